//! The training windows: the corpus split, and the mixtures a run draws its windows from, all
//! with kvlab's seeded generator so that a run is reproducible and no answer can be memorised
//! (every name, number and letter span is drawn anew).

use kvlab_core::lm::tasks::{self, FACT};
use kvlab_core::rng::Xoshiro256;

/// Bytes of the held-out slice the loss is stated on (the start of the last 5% of the corpus).
pub const HELDOUT_BYTES: usize = 8 * 255;

/// The corpus split: the first 95% for training, the rest held out (its first
/// [`HELDOUT_BYTES`] are the loss's slice; the probes' filler comes from all of it).
#[derive(Debug, Clone)]
pub struct Corpus {
    pub train: Vec<u8>,
    pub heldout: Vec<u8>,
}

impl Corpus {
    /// Splits `text` (which must not hold byte 0, the BOS).
    pub fn new(text: Vec<u8>) -> Result<Corpus, String> {
        if text.contains(&0) {
            return Err("the corpus holds byte 0, which is the BOS token".into());
        }
        if text.len() < 20 * 4096 {
            return Err(format!(
                "the corpus has {} bytes: the trainer needs at least {}",
                text.len(),
                20 * 4096
            ));
        }
        let split = text.len() - text.len() / 20;
        Ok(Corpus {
            heldout: text[split..].to_vec(),
            train: text[..split].to_vec(),
        })
    }

    /// The slice the held-out loss is measured on.
    pub fn heldout_slice(&self) -> &[u8] {
        &self.heldout[..HELDOUT_BYTES.min(self.heldout.len())]
    }
}

/// What a run's windows are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mixture {
    /// The King James text alone (the first model's data).
    Kjv,
    /// The textbook copy case: 127 random letters, then the same 127 again. The copy is always
    /// 127 bytes back, so a head that attends 127 positions back solves it without matching
    /// anything: it forms fast (docs/model.md) and does not copy at other distances.
    Textbook,
    /// Random letters with one or two spans (16 to 96 letters) each repeated at a random later
    /// place: the distance varies, so only a head that matches content (an induction head)
    /// predicts the repeats.
    Induction,
    /// Random letters in segments, each a span of 3 to 24 letters said 2 to 4 times in a row:
    /// most bytes repeat one from a few bytes back, at a distance that changes from segment to
    /// segment (short distances give a head that matches content a strong early signal).
    Repeats,
    /// Reasons to look back: a quarter each of text, [`Mixture::Induction`]'s dense copies of
    /// random letters at varied distances (the signal a copy head forms from: the sparser
    /// mixtures tried first showed none in 1,750 steps, docs/model.md), windows of facts
    /// asked for later, and copies of letters and text inside the text.
    Recall,
    /// Recall's second recipe, for a model that already copies letters (started `--init` from
    /// a recall run): copies of random symbols (letters, capitals and digits, so that the copy
    /// head copies digits too), dense pairs of names and numbers asked for again (the name is
    /// the match, the number what is copied), windows of two or three facts each asked for,
    /// and the text. The recall run's copy head copied letters at 99% while the facts' digits
    /// stayed at chance: its copy windows held no digits and its facts were a few bytes in 256.
    Facts,
}

impl Mixture {
    /// A mixture by name.
    pub fn named(name: &str) -> Option<Mixture> {
        match name {
            "kjv" => Some(Mixture::Kjv),
            "textbook" => Some(Mixture::Textbook),
            "induction" => Some(Mixture::Induction),
            "repeats" => Some(Mixture::Repeats),
            "recall" => Some(Mixture::Recall),
            "facts" => Some(Mixture::Facts),
            _ => None,
        }
    }

    /// One window of `t` bytes.
    pub fn window(self, text: &[u8], rng: &mut Xoshiro256, t: usize) -> Vec<u8> {
        let w = match self {
            Mixture::Kjv => tasks::filler(text, rng, t).to_vec(),
            Mixture::Textbook => {
                let half = (t - 1) / 2;
                let mut w = tasks::letters(rng, half);
                w.extend_from_within(..);
                w.extend(tasks::letters(rng, t - 2 * half));
                w
            }
            Mixture::Induction => {
                let mut w = tasks::letters(rng, t);
                repeat_spans(&mut w, rng, 16..97);
                w
            }
            Mixture::Repeats => {
                let mut w = Vec::with_capacity(t + 96);
                while w.len() < t {
                    let len = 3 + rng.below(22) as usize;
                    let span = tasks::letters(rng, len);
                    for _ in 0..2 + rng.below(3) {
                        w.extend_from_slice(&span);
                    }
                }
                w.truncate(t);
                w
            }
            Mixture::Recall => {
                let r = rng.uniform();
                if r < 0.25 {
                    tasks::filler(text, rng, t).to_vec()
                } else if r < 0.5 {
                    Mixture::Induction.window(text, rng, t)
                } else if r < 0.75 {
                    facts_window(text, rng, t)
                } else {
                    copies_window(text, rng, t)
                }
            }
            Mixture::Facts => {
                let r = rng.uniform();
                if r < 0.2 {
                    tasks::filler(text, rng, t).to_vec()
                } else if r < 0.4 {
                    symbols_window(rng, t)
                } else if r < 0.6 {
                    pairs_window(rng, t)
                } else {
                    dense_facts_window(text, rng, t)
                }
            }
        };
        debug_assert_eq!(w.len(), t);
        w
    }

    /// A batch: `n` windows as model inputs (`[BOS, w[..t-1]]`) and targets (`w`).
    pub fn batch(
        self,
        text: &[u8],
        rng: &mut Xoshiro256,
        n: usize,
        t: usize,
    ) -> (Vec<u8>, Vec<u8>) {
        let mut x = Vec::with_capacity(n * t);
        let mut y = Vec::with_capacity(n * t);
        for _ in 0..n {
            let w = self.window(text, rng, t);
            x.push(0);
            x.extend_from_slice(&w[..t - 1]);
            y.extend_from_slice(&w);
        }
        (x, y)
    }
}

/// `parts` with filler between them: the filler is one contiguous passage of `text`, cut at
/// `parts.len()` random points, so the window reads as text with the parts spliced in.
fn splice(text: &[u8], rng: &mut Xoshiro256, t: usize, parts: &[Vec<u8>]) -> Vec<u8> {
    let fixed: usize = parts.iter().map(Vec::len).sum();
    let free = t.saturating_sub(fixed);
    let fill = tasks::filler(text, rng, free);
    let mut cuts: Vec<usize> = (0..parts.len())
        .map(|_| rng.below(free as u64 + 1) as usize)
        .collect();
    cuts.sort_unstable();
    let mut w = Vec::with_capacity(t);
    let mut at = 0;
    for (part, &cut) in parts.iter().zip(&cuts) {
        w.extend_from_slice(&fill[at..cut]);
        w.extend_from_slice(part);
        at = cut;
    }
    w.extend_from_slice(&fill[at..]);
    w.truncate(t);
    w
}

/// 1 to 3 facts, then each asked for once in a shuffled order, text around them (three facts
/// and their questions take at most about 200 of 256 bytes).
fn facts_window(text: &[u8], rng: &mut Xoshiro256, t: usize) -> Vec<u8> {
    let k = 1 + rng.below(3) as usize;
    let pairs: Vec<(String, String)> = (0..k)
        .map(|_| (tasks::draw_key(rng), tasks::draw_value(rng)))
        .collect();
    let mut parts: Vec<Vec<u8>> = pairs
        .iter()
        .map(|(key, value)| format!(" {} ", tasks::fill(FACT, key, value)).into_bytes())
        .collect();
    let mut order: Vec<usize> = (0..k).collect();
    for i in (1..k).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for &i in &order {
        let (q, a) = tasks::question(&pairs[i].0, &pairs[i].1);
        parts.push(format!(" {q}{a}. ").into_bytes());
    }
    splice(text, rng, t, &parts)
}

/// Random symbols (lowercase, capitals, digits) with one or two spans of 8 to 64 repeated
/// later, as [`Mixture::Induction`] does with letters.
fn symbols_window(rng: &mut Xoshiro256, t: usize) -> Vec<u8> {
    const SYMBOLS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut w: Vec<u8> = (0..t)
        .map(|_| SYMBOLS[rng.below(SYMBOLS.len() as u64) as usize])
        .collect();
    repeat_spans(&mut w, rng, 8..65);
    w
}

/// One or two spans of `w`, each of a length drawn from `lens` (at most half the window),
/// copied over a later place of `w`: a copy a model can predict only by matching what it
/// reads.
fn repeat_spans(w: &mut [u8], rng: &mut Xoshiro256, lens: std::ops::Range<usize>) {
    let t = w.len();
    for _ in 0..1 + rng.below(2) {
        let len = (lens.start + rng.below((lens.end - lens.start) as u64) as usize).min(t / 2);
        let from = rng.below((t - 2 * len + 1) as u64) as usize;
        let to = from + len + rng.below((t - from - 2 * len + 1) as u64) as usize;
        w.copy_within(from..from + len, to);
    }
}

/// Four to six names with their numbers (" Kotali 4817."), then pairs drawn from that list
/// at random until the window is full: every number after its name's second appearance is
/// predictable, and only by finding the name's first.
fn pairs_window(rng: &mut Xoshiro256, t: usize) -> Vec<u8> {
    let k = 4 + rng.below(3) as usize;
    let pairs: Vec<String> = (0..k)
        .map(|_| format!(" {} {}.", tasks::draw_key(rng), tasks::draw_value(rng)))
        .collect();
    let mut w: Vec<u8> = pairs.concat().into_bytes();
    while w.len() < t {
        w.extend_from_slice(pairs[rng.below(k as u64) as usize].as_bytes());
    }
    w.truncate(t);
    w
}

/// Two facts and four questions, or three and three, each question about one of the
/// window's facts drawn at random, spliced in that order into the text.
fn dense_facts_window(text: &[u8], rng: &mut Xoshiro256, t: usize) -> Vec<u8> {
    let k = 2 + rng.below(2) as usize;
    let pairs: Vec<(String, String)> = (0..k)
        .map(|_| (tasks::draw_key(rng), tasks::draw_value(rng)))
        .collect();
    let mut parts: Vec<Vec<u8>> = pairs
        .iter()
        .map(|(key, value)| format!(" {} ", tasks::fill(FACT, key, value)).into_bytes())
        .collect();
    let asked = if k == 2 { 4 } else { 3 };
    for _ in 0..asked {
        let (key, value) = &pairs[rng.below(k as u64) as usize];
        let (q, a) = tasks::question(key, value);
        parts.push(format!(" {q}{a}. ").into_bytes());
    }
    splice(text, rng, t, &parts)
}

/// One to three spans (8 to 48 bytes, random letters or a passage of the text) each
/// repeated later, text around them.
fn copies_window(text: &[u8], rng: &mut Xoshiro256, t: usize) -> Vec<u8> {
    let k = 1 + rng.below(3) as usize;
    let spans: Vec<Vec<u8>> = (0..k)
        .map(|_| {
            let len = 8 + rng.below(41) as usize;
            if rng.uniform() < 0.5 {
                tasks::letters(rng, len)
            } else {
                tasks::filler(text, rng, len).to_vec()
            }
        })
        .collect();
    let mut parts = spans.clone();
    parts.extend(spans);
    splice(text, rng, t, &parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text() -> Vec<u8> {
        b"And God said, Let there be light: and there was light.\n".repeat(40)
    }

    #[test]
    fn every_mixture_makes_windows_of_the_length_asked() {
        let text = text();
        let mut rng = Xoshiro256::stream(1, 1);
        for mix in [
            Mixture::Kjv,
            Mixture::Textbook,
            Mixture::Induction,
            Mixture::Repeats,
            Mixture::Recall,
            Mixture::Facts,
        ] {
            for _ in 0..200 {
                assert_eq!(mix.window(&text, &mut rng, 256).len(), 256);
            }
        }
    }

    #[test]
    fn the_textbook_window_repeats_its_letters() {
        let mut rng = Xoshiro256::stream(1, 2);
        let w = Mixture::Textbook.window(&text(), &mut rng, 256);
        assert_eq!(w[..127], w[127..254]);
        assert!(w.iter().all(u8::is_ascii_lowercase));
    }

    #[test]
    fn a_facts_window_asks_for_every_fact_after_stating_them() {
        let text = text();
        let mut rng = Xoshiro256::stream(2, 2);
        for _ in 0..50 {
            let w = String::from_utf8(facts_window(&text, &mut rng, 256)).unwrap();
            let stated = w.matches("The number of ").count();
            assert!(stated >= 2 && stated.is_multiple_of(2), "{w}");
        }
    }

    #[test]
    fn a_pairs_window_gives_every_name_its_one_number() {
        let mut rng = Xoshiro256::stream(2, 3);
        for _ in 0..50 {
            let w = String::from_utf8(pairs_window(&mut rng, 256)).unwrap();
            let mut seen = std::collections::HashMap::new();
            // the last pair may be cut by the window's end
            for pair in w
                .split('.')
                .filter(|p| p.len() > 6)
                .take(w.matches('.').count())
            {
                let (key, value) = pair.trim().split_once(' ').unwrap();
                assert_eq!(*seen.entry(key.to_string()).or_insert(value), value, "{w}");
            }
            assert!(
                seen.len() >= 4 && seen.len() < w.matches('.').count(),
                "{w}"
            );
        }
    }

    #[test]
    fn a_dense_facts_window_asks_only_for_facts_it_stated() {
        let mut rng = Xoshiro256::stream(2, 4);
        for _ in 0..50 {
            let w = String::from_utf8(dense_facts_window(&text(), &mut rng, 256)).unwrap();
            let said: Vec<&str> = w.split("The number of ").skip(1).collect();
            assert!(said.len() >= 5, "{w}");
            let mut seen = std::collections::HashMap::new();
            for s in &said {
                let (key, rest) = s.split_once(" is ").unwrap();
                assert_eq!(*seen.entry(key).or_insert(&rest[..4]), &rest[..4], "{w}");
            }
            // two or three facts, each stated once and asked for after it
            assert!((2..=3).contains(&seen.len()), "{w}");
            assert!(said.len() - seen.len() >= 3, "{w}");
        }
    }

    #[test]
    fn a_batch_is_bos_then_the_window_shifted() {
        let mut rng = Xoshiro256::stream(3, 3);
        let (x, y) = Mixture::Recall.batch(&text(), &mut rng, 2, 256);
        assert_eq!((x.len(), y.len()), (512, 512));
        assert_eq!((x[0], x[256]), (0, 0));
        assert_eq!(x[1..256], y[..255]);
    }
}
