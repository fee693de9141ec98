//! The tasks kvlab's model is trained to need its cache for, and the cases they are measured
//! on: a **fact** stated once and asked for later (a made-up name and a 4-digit number; the
//! King James text holds no digits, so the number can only come from the fact), and a **copy**
//! (a span read earlier and repeated). The trainer (`crates/train`) mixes them into its
//! windows; the tests on the committed weights and the page build new cases of them with the
//! same functions, from a seed the trainer never used.
//!
//! A case is bytes (no BOS): filler text around the task, the part graded at its end.

use crate::rng::Xoshiro256;
use std::ops::Range;

/// How a fact is stated: `{key}` and `{value}` are replaced.
pub const FACT: &str = "The number of {key} is {value}.";

/// How it is asked for: the answer is `{value}`, the bytes after the question's prefix.
pub const QUESTION: &str = "The number of {key} is {value}.";

/// Consonants and vowels of the made-up names (syllables of one each, so that names read
/// like the text's own: "Zerubab", "Kotali").
const CONSONANTS: &[u8] = b"bcdfghjklmnprstvz";
const VOWELS: &[u8] = b"aeiou";

/// A made-up name: 2 to 4 syllables (consonant, vowel), capitalised; about 7.2 million of them.
pub fn draw_key(rng: &mut Xoshiro256) -> String {
    let syllables = 2 + rng.below(3) as usize;
    let mut s = String::with_capacity(2 * syllables);
    for i in 0..syllables {
        let c = CONSONANTS[rng.below(CONSONANTS.len() as u64) as usize] as char;
        s.push(if i == 0 { c.to_ascii_uppercase() } else { c });
        s.push(VOWELS[rng.below(VOWELS.len() as u64) as usize] as char);
    }
    s
}

/// A 4-digit number, leading zeros allowed ("0420").
pub fn draw_value(rng: &mut Xoshiro256) -> String {
    (0..4)
        .map(|_| char::from(b'0' + rng.below(10) as u8))
        .collect()
}

/// `template` with `{key}` and `{value}` replaced.
pub fn fill(template: &str, key: &str, value: &str) -> String {
    template.replace("{key}", key).replace("{value}", value)
}

/// The question up to its answer (what a prompt ends with), and the answer.
pub fn question(key: &str, value: &str) -> (String, String) {
    let at = QUESTION.find("{value}").unwrap_or(QUESTION.len());
    (fill(&QUESTION[..at], key, value), value.to_string())
}

/// `n` random lowercase letters.
pub fn letters(rng: &mut Xoshiro256, n: usize) -> Vec<u8> {
    (0..n).map(|_| b'a' + rng.below(26) as u8).collect()
}

/// A contiguous `n`-byte slice of `text` at a random place (all of it when shorter).
pub fn filler<'a>(text: &'a [u8], rng: &mut Xoshiro256, n: usize) -> &'a [u8] {
    if text.len() <= n {
        return text;
    }
    let at = rng.below((text.len() - n + 1) as u64) as usize;
    &text[at..at + n]
}

/// A built case: its bytes and where its parts sit.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The bytes (no BOS).
    pub bytes: Vec<u8>,
    /// Where the fact (or the first copy of the span) sits.
    pub source: Range<usize>,
    /// Where what asks for the answer starts: the question (or the span's repeat).
    pub asked: usize,
    /// The graded bytes, at the end: the answer (or the repeat's second half).
    pub answer: Range<usize>,
}

/// A fact, `distance` bytes of filler, then its question with the answer, in `len` bytes:
/// filler from `text` fills the start. `None` when the parts do not fit in `len`.
pub fn fact_case(text: &[u8], rng: &mut Xoshiro256, len: usize, distance: usize) -> Option<Case> {
    let (key, value) = (draw_key(rng), draw_value(rng));
    let fixed = fact_len(&key, &value, distance)?;
    let before = len.checked_sub(fixed)?;
    fact_case_with(
        filler(text, rng, before + distance),
        &key,
        &value,
        len,
        distance,
    )
}

/// The bytes a fact case needs besides the filler before the fact: the fact and its space,
/// `distance` bytes, the question and the answer.
fn fact_len(key: &str, value: &str, distance: usize) -> Option<usize> {
    let fact = fill(FACT, key, value).len() + 1;
    let (q, a) = question(key, value);
    fact.checked_add(distance)?.checked_add(q.len() + a.len())
}

/// The fact case of `key` and `value` in `len` bytes with `fill` as its text (its first
/// bytes before the fact, the next `distance` between the fact and its question): what the
/// page builds from the learner's own fact. `None` when the parts do not fit in `len` or
/// `fill` is shorter than the room they leave.
pub fn fact_case_with(
    fill_bytes: &[u8],
    key: &str,
    value: &str,
    len: usize,
    distance: usize,
) -> Option<Case> {
    let fact = format!("{} ", fill(FACT, key, value));
    let (q, a) = question(key, value);
    let before = len.checked_sub(fact_len(key, value, distance)?)?;
    if fill_bytes.len() < before + distance {
        return None;
    }
    let mut bytes = Vec::with_capacity(len);
    bytes.extend_from_slice(&fill_bytes[..before]);
    let source = bytes.len()..bytes.len() + fact.len() - 1;
    bytes.extend_from_slice(fact.as_bytes());
    bytes.extend_from_slice(&fill_bytes[before..before + distance]);
    let asked = bytes.len();
    bytes.extend_from_slice(q.as_bytes());
    let answer = bytes.len()..bytes.len() + a.len();
    bytes.extend_from_slice(a.as_bytes());
    Some(Case {
        bytes,
        source,
        asked,
        answer,
    })
}

/// A span of `span` random letters, `distance` bytes of filler (counted from the span's start
/// to its repeat's), then the span again, in `len` bytes: the graded bytes are the repeat's
/// second half, which a model that copies predicts and one that does not cannot.
pub fn copy_case(
    text: &[u8],
    rng: &mut Xoshiro256,
    len: usize,
    span: usize,
    distance: usize,
) -> Option<Case> {
    let gap = distance.checked_sub(span)?;
    let letters = letters(rng, span);
    let fixed = span + gap + span;
    let before = len.checked_sub(fixed)?;
    let fill_bytes = filler(text, rng, before + gap);
    if fill_bytes.len() < before + gap {
        return None;
    }
    let mut bytes = Vec::with_capacity(len);
    bytes.extend_from_slice(&fill_bytes[..before]);
    let source = bytes.len()..bytes.len() + span;
    bytes.extend_from_slice(&letters);
    bytes.extend_from_slice(&fill_bytes[before..]);
    let repeat = bytes.len();
    bytes.extend_from_slice(&letters);
    Some(Case {
        bytes,
        source,
        asked: repeat,
        answer: repeat + span / 2..repeat + span,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &[u8] = b"And God said, Let there be light: and there was light. And God saw the light, that it was good: and God divided the light from the darkness. And God called the light Day, and the darkness he called Night. And the evening and the morning were the first day. And God said, Let there be a firmament in the midst of the waters.";

    #[test]
    fn a_fact_case_ends_with_its_answer_and_states_it_once_before() {
        let mut rng = Xoshiro256::stream(1, 2);
        let c = fact_case(TEXT, &mut rng, 255, 128).unwrap();
        assert_eq!(c.bytes.len(), 255);
        assert_eq!(c.answer.end, 255);
        let answer = &c.bytes[c.answer.clone()];
        assert_eq!(answer.len(), 4);
        assert!(answer.iter().all(u8::is_ascii_digit));
        let fact = std::str::from_utf8(&c.bytes[c.source.clone()]).unwrap();
        assert!(fact.starts_with("The number of ") && fact.ends_with('.'));
        assert!(fact.contains(std::str::from_utf8(answer).unwrap()));
        // the question starts `distance` bytes after the fact and its space
        let q_start = std::str::from_utf8(&c.bytes)
            .unwrap()
            .rfind("The number of ");
        assert_eq!(q_start, Some(c.source.end + 1 + 128));
        assert_eq!(Some(c.asked), q_start);
        // the learner's own fact, with the text given
        let own = fact_case_with(TEXT, "Abigail", "12", 200, 30).unwrap();
        assert_eq!(own.bytes.len(), 200);
        assert_eq!(&own.bytes[own.answer.clone()], b"12");
        assert_eq!(
            &own.bytes[own.source.clone()],
            b"The number of Abigail is 12."
        );
        assert_eq!(own.asked, own.source.end + 1 + 30);
        assert!(fact_case_with(&TEXT[..100], "Abigail", "12", 200, 30).is_none());
        assert!(fact_case_with(TEXT, "Abigail", "12", 60, 30).is_none());
        assert!(fact_case(TEXT, &mut rng, 100, 128).is_none());
    }

    #[test]
    fn a_copy_case_repeats_its_span_at_the_distance() {
        let mut rng = Xoshiro256::stream(1, 3);
        let c = copy_case(TEXT, &mut rng, 255, 40, 150).unwrap();
        assert_eq!(c.bytes.len(), 255);
        let span = &c.bytes[c.source.clone()];
        assert_eq!(&c.bytes[c.source.start + 150..c.source.end + 150], span);
        assert_eq!(c.answer, c.source.start + 170..c.source.start + 190);
        assert_eq!(c.answer.end, 255);
    }

    #[test]
    fn keys_read_like_names_and_values_are_four_digits() {
        let mut rng = Xoshiro256::stream(4, 5);
        for _ in 0..100 {
            let k = draw_key(&mut rng);
            assert!((4..=8).contains(&k.len()) && k.as_bytes()[0].is_ascii_uppercase());
            let v = draw_value(&mut rng);
            assert!(v.len() == 4 && v.bytes().all(|b| b.is_ascii_digit()));
        }
    }
}
