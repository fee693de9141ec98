//! What the model can do, measured while it trains, on cases it never saw (filler from the
//! held-out text, names, numbers and letters drawn from a seed the batches never use):
//! the held-out loss, copying a span of random letters read 128+ bytes earlier, recalling a
//! fact asked for 128+ bytes after it was stated, and each head's share of rows that put over
//! half their weight on BOS (an attention sink).

use crate::data::Corpus;
use crate::grad::Workspace;
use crate::params::{Layout, Rope};
use kvlab_core::lm::tasks::{self, Case};
use kvlab_core::rng::Xoshiro256;

/// The probes' seed: never a batch's (the batches use the run's seed's streams 1 and up).
const PROBE_SEED: u64 = 0x9E0B_E5EE_D000;

/// Cases per measure.
pub const CASES: usize = 32;

/// Where a row counts for the sink share: from position 16 on (earlier rows have few tokens
/// to spread over).
pub const SINK_FROM: usize = 16;

/// The fixed cases the probes run.
#[derive(Debug, Clone)]
pub struct Probes {
    heldout: Vec<u8>,
    copies: Vec<Case>,
    copies127: Vec<Case>,
    facts: Vec<Case>,
}

/// One probe's measures.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Report {
    /// Nats per byte on the held-out slice.
    pub heldout_loss: f64,
    /// Share of the repeat's second-half bytes predicted right (argmax), spans of 40 letters
    /// read 128 to 200 bytes earlier (`None` when the context cannot hold such a case).
    pub copy: Option<f64>,
    /// The same on half the context's letters repeated at once (the textbook case).
    pub copy127: Option<f64>,
    /// Share of facts answered with all 4 digits right (argmax at each), asked 128+ bytes
    /// after they were stated.
    pub fact: Option<f64>,
    /// Share of the answers' digits right.
    pub fact_digits: Option<f64>,
    /// Per layer, per head: the share of rows (positions 16+ of the held-out windows) putting
    /// over half their weight on BOS.
    pub sinks: Vec<Vec<f64>>,
    /// Per layer, per head: the mean weight a row puts on the token just before it (a
    /// previous-token head, the first half of a copy circuit, puts most of it there).
    pub previous: Vec<Vec<f64>>,
}

impl Probes {
    /// The cases for windows of `context` tokens (BOS included).
    pub fn new(corpus: &Corpus, context: usize) -> Probes {
        let len = context - 1;
        let text = &corpus.heldout;
        let mut rng = Xoshiro256::stream(PROBE_SEED, 0);
        let mut copies = Vec::new();
        let mut copies127 = Vec::new();
        let mut facts = Vec::new();
        // (a context too short for a case leaves its list empty: its measure is then None)
        for _ in 0..CASES {
            let distance = 128 + rng.below(73) as usize;
            copies.extend(tasks::copy_case(text, &mut rng, len, 40, distance));
            copies127.extend(tasks::copy_case(text, &mut rng, len, len / 2, len / 2));
        }
        for _ in 0..CASES {
            // from 128 bytes to as far as the context allows (a name of up to 8 letters)
            let far = len.saturating_sub(2 * "The number of  is 0000. ".len() + 16);
            let distance = 128 + rng.below(far.saturating_sub(128) as u64 + 1) as usize;
            facts.extend(tasks::fact_case(text, &mut rng, len, distance));
        }
        Probes {
            heldout: corpus.heldout_slice().to_vec(),
            copies,
            copies127,
            facts,
        }
    }

    /// Measures `params` with `ws` (sized for the context, 8 sequences or more).
    pub fn run(&self, params: &[f32], layout: &Layout, rope: &Rope, ws: &mut Workspace) -> Report {
        let s = layout.shape;
        let t = ws.tokens_per_sequence();
        let mut sinks = vec![vec![0.0; s.heads]; s.layers];
        let mut previous = vec![vec![0.0; s.heads]; s.layers];
        // held-out loss and sinks: windows of 255 bytes after a BOS, the last input dropped
        // (as the first trainer measured it)
        let w = s.context - 1;
        let mut loss = 0.0;
        let mut count = 0usize;
        let mut rows = 0usize;
        for win in self.heldout.chunks_exact(w) {
            let mut x = vec![0u8; t];
            x[1..].copy_from_slice(&win[..t - 1]);
            ws.forward(params, layout, rope, &x, 1);
            // (position i predicts win[i]; the first w positions have a target)
            for (i, &y) in win.iter().enumerate().take(t) {
                loss -= f64::from(ws.probs(0, i)[usize::from(y)].max(1e-30)).ln();
                count += 1;
            }
            for (l, (layer, prev)) in sinks.iter_mut().zip(previous.iter_mut()).enumerate() {
                for (h, (share, p)) in layer.iter_mut().zip(prev.iter_mut()).enumerate() {
                    let a = ws.attention(l, 0, h);
                    *share += (SINK_FROM..t).filter(|&i| a[i * t] > 0.5).count() as f64;
                    *p += (SINK_FROM..t)
                        .map(|i| f64::from(a[i * t + i - 1]))
                        .sum::<f64>();
                }
            }
            rows += t - SINK_FROM;
        }
        for share in sinks.iter_mut().chain(previous.iter_mut()).flatten() {
            *share /= rows.max(1) as f64;
        }
        let (copy, _) = graded(&self.copies, params, layout, rope, ws);
        let (copy127, _) = graded(&self.copies127, params, layout, rope, ws);
        let (fact_digits, fact) = graded(&self.facts, params, layout, rope, ws);
        Report {
            heldout_loss: loss / count.max(1) as f64,
            copy,
            copy127,
            fact,
            fact_digits,
            sinks,
            previous,
        }
    }
}

/// The share of graded bytes whose argmax is right, and the share of cases with all of them
/// right (both `None` without cases). Each case runs as `[BOS, bytes]`: position `i` predicts
/// byte `i`.
fn graded(
    cases: &[Case],
    params: &[f32],
    layout: &Layout,
    rope: &Rope,
    ws: &mut Workspace,
) -> (Option<f64>, Option<f64>) {
    if cases.is_empty() {
        return (None, None);
    }
    let t = ws.tokens_per_sequence();
    let mut right = 0usize;
    let mut total = 0usize;
    let mut whole = 0usize;
    for case in cases {
        let mut x = vec![0u8; t];
        let n = case.bytes.len().min(t - 1);
        x[1..=n].copy_from_slice(&case.bytes[..n]);
        ws.forward(params, layout, rope, &x, 1);
        let mut all = true;
        for i in case.answer.clone() {
            let p = ws.probs(0, i);
            let best = (0..p.len()).fold(0, |b, j| if p[j] > p[b] { j } else { b });
            let ok = best == usize::from(case.bytes[i]);
            right += usize::from(ok);
            all &= ok;
            total += 1;
        }
        whole += usize::from(all);
    }
    (
        Some(right as f64 / total.max(1) as f64),
        Some(whole as f64 / cases.len() as f64),
    )
}

impl Report {
    /// The largest sink share of any head.
    pub fn max_sink(&self) -> f64 {
        self.sinks.iter().flatten().copied().fold(0.0, f64::max)
    }

    /// One line for the log.
    pub fn line(&self) -> String {
        let pc = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.0}%", 100.0 * v));
        format!(
            "held-out {:.3}  copy {}  copy127 {}  facts {} (digits {})  sink max {}  previous-token max {}",
            self.heldout_loss,
            pc(self.copy),
            pc(self.copy127),
            pc(self.fact),
            pc(self.fact_digits),
            pc(Some(self.max_sink())),
            pc(Some(self.previous.iter().flatten().copied().fold(0.0, f64::max)))
        )
    }
}
