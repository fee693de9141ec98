//! Section 5's needle test on the real model, for the page (issue 37): a fact stated in the
//! text and asked for at its end ([`kvlab_core::lm::needle`]), the answer each cache gives,
//! and each policy's accuracy on a fixed set of built-in cases against the cache's
//! `R_overall`, a case and a policy at a time.

use kvlab_core::kivi::KiviConfig;
use kvlab_core::lm::compress::{CacheSpec, EvalError};
use kvlab_core::lm::needle::{answer_kivi, answer_memo, Answer, Answers, Asked};
use kvlab_core::lm::tasks::{self, Case};
use kvlab_core::lm::{Lm, LmRun};
use kvlab_core::rng::Xoshiro256;
use serde::Serialize;

use crate::model_report::{at_budget, Named};

/// The built-in cases' seed: neither the trainer's streams nor the tests'.
pub const NEEDLE_SEED: u64 = 0x6e65_6564_6c65;

/// The built-in cases: this many, the distances between fact and question cycling through
/// [`NEEDLE_DISTANCES`].
pub const NEEDLE_CASES: usize = 16;

/// Bytes of text between a built-in case's fact and its question.
pub const NEEDLE_DISTANCES: [usize; 4] = [48, 96, 144, 192];

/// The budgets of the accuracy chart (then the prefill, where nothing is dropped).
pub const NEEDLE_BUDGETS: [usize; 6] = [4, 8, 16, 32, 64, 128];

/// The built-in cases, 255 bytes each (the model's context less the BOS), filler from `text`
/// (the held-out slice): new names and numbers from [`NEEDLE_SEED`].
pub fn needle_cases(text: &[u8]) -> Vec<Case> {
    let mut rng = Xoshiro256::stream(NEEDLE_SEED, 1);
    let mut cases = Vec::with_capacity(NEEDLE_CASES);
    let mut tries = 0;
    while cases.len() < NEEDLE_CASES && tries < 10 * NEEDLE_CASES {
        let distance = NEEDLE_DISTANCES[cases.len() % NEEDLE_DISTANCES.len()];
        cases.extend(tasks::fact_case(text, &mut rng, 255, distance));
        tries += 1;
    }
    cases
}

/// What one cache answered, for the page.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NeedleAnswer {
    /// The compression's name (`full` for the full cache).
    pub name: String,
    /// The answer it generated, as text.
    pub said: String,
    /// Whether each byte is the true answer's.
    pub right: Vec<bool>,
    /// Every byte right.
    pub correct: bool,
    /// The prefill cache's `R_overall`.
    pub r_overall: f64,
    /// The share of heads that kept every byte of the fact's value.
    pub kept_value: f64,
    /// Per byte of the compressed prefill (the BOS left out), the percentage of heads that
    /// kept it: the page's strip. Bytes past it (the question read after the compression)
    /// were never compressed.
    pub kept: Vec<u8>,
}

fn report(name: &str, case: &Case, a: &Answer) -> NeedleAnswer {
    let value = value_tokens(case);
    let heads = a.kept.iter().flatten().count().max(1);
    let keeping = a
        .kept
        .iter()
        .flatten()
        .filter(|k| value.clone().all(|t| k.binary_search(&t).is_ok()))
        .count();
    let mut counts = vec![0usize; a.prefill];
    for k in a.kept.iter().flatten().flatten() {
        if let Some(c) = counts.get_mut(*k) {
            *c += 1;
        }
    }
    let kept = counts
        .iter()
        .skip(1)
        // (whole percents: 0 only where no head kept it, 100 only where every head did)
        .map(|&c| match c {
            0 => 0,
            c if c >= heads => 100,
            c => ((100 * c + heads / 2) / heads).clamp(1, 99) as u8,
        })
        .collect();
    NeedleAnswer {
        name: name.to_string(),
        said: String::from_utf8_lossy(&a.bytes).into_owned(),
        right: a.right.clone(),
        correct: a.correct(),
        r_overall: a.r_overall(),
        kept_value: keeping as f64 / heads as f64,
        kept,
    }
}

/// The tokens of the fact's value in the case (token `k` is byte `k - 1`).
fn value_tokens(case: &Case) -> std::ops::Range<usize> {
    let value = &case.bytes[case.answer.clone()];
    let at = case.bytes[case.source.clone()]
        .windows(value.len().max(1))
        .position(|w| w == value)
        .map_or(case.source.start, |i| case.source.start + i);
    at + 1..at + 1 + value.len()
}

/// The answers of the full cache, of every compression of `policies` and of KIVI with `kivi`
/// (named `kivi`) to `case`, whose full forward ([`kvlab_core::lm::needle::tokens`]) is `run`;
/// `memo` holds the answers met on this case so far.
#[allow(clippy::too_many_arguments)]
pub fn needle_answers(
    lm: &Lm,
    run: &LmRun,
    case: &Case,
    policies: &[Named<'_>],
    kivi: Option<&KiviConfig>,
    asked: Asked,
    memo: &mut Answers,
) -> Result<Vec<NeedleAnswer>, EvalError> {
    let mut out = vec![report(
        "full",
        case,
        &answer_memo(lm, run, case, None, asked, memo)?,
    )];
    for &(name, spec) in policies {
        out.push(report(
            name,
            case,
            &answer_memo(lm, run, case, Some(spec), asked, memo)?,
        ));
    }
    if let Some(kivi) = kivi {
        out.push(report(
            "kivi",
            case,
            &answer_kivi(lm, run, case, kivi, asked)?,
        ));
    }
    Ok(out)
}

/// One point of a policy's accuracy on one case.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NeedlePoint {
    /// `B` (the prefill's length where nothing is dropped).
    pub budget: usize,
    /// The prefill cache's `R_overall`.
    pub r_overall: f64,
    /// Every byte of the answer right.
    pub correct: bool,
}

/// `spec`'s policy on `case` at every budget of [`NEEDLE_BUDGETS`] below the prefill, then
/// at the prefill: one case of one curve of the accuracy chart. StreamingLLM's sinks are
/// capped at each budget, as the page's controls cap them. `memo`: the answers met on this
/// case so far (the policies' curves share their points at `B <= r` and at the prefill).
pub fn needle_row(
    lm: &Lm,
    run: &LmRun,
    case: &Case,
    spec: &CacheSpec,
    asked: Asked,
    memo: &mut Answers,
) -> Result<Vec<NeedlePoint>, EvalError> {
    let prefill = kvlab_core::lm::needle::prefill(case, asked);
    let budgets = NEEDLE_BUDGETS
        .iter()
        .copied()
        .filter(|&b| b < prefill)
        .chain([prefill]);
    budgets
        .map(|budget| {
            let keep = at_budget(spec.keep, budget);
            needle_at(
                lm,
                run,
                case,
                &CacheSpec {
                    budget,
                    keep,
                    ..*spec
                },
                asked,
                memo,
            )
        })
        .collect()
}

/// `spec` on `case` at its own budget (the page's current setting, ringed on the chart; the
/// full cache with [`CacheSpec::full`]).
pub fn needle_at(
    lm: &Lm,
    run: &LmRun,
    case: &Case,
    spec: &CacheSpec,
    asked: Asked,
    memo: &mut Answers,
) -> Result<NeedlePoint, EvalError> {
    let a = answer_memo(lm, run, case, Some(spec), asked, memo)?;
    Ok(NeedlePoint {
        budget: spec.budget,
        r_overall: a.r_overall(),
        correct: a.correct(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_cases_cycle_the_distances_with_new_names() {
        let text = b"And God said, Let there be light: and there was light. ".repeat(40);
        let cases = needle_cases(&text);
        assert_eq!(cases.len(), NEEDLE_CASES);
        for (i, c) in cases.iter().enumerate() {
            assert_eq!(c.bytes.len(), 255);
            // the question starts the distance after the fact and its space
            assert_eq!(c.asked, c.source.end + 1 + NEEDLE_DISTANCES[i % 4]);
            let value = &c.bytes[c.answer.clone()];
            let t = value_tokens(c);
            assert_eq!(&c.bytes[t.start - 1..t.end - 1], value);
        }
        let keys: std::collections::HashSet<_> = cases
            .iter()
            .map(|c| c.bytes[c.source.clone()].to_vec())
            .collect();
        assert_eq!(keys.len(), NEEDLE_CASES, "every fact new");
    }

    #[test]
    fn a_learners_fact_is_built_or_refused_in_words() {
        let text = b"And God said, Let there be light: and there was light. ".repeat(10);
        let c = learner_case(&text, " Mirabel ", "2026", 150, 255).expect("fits");
        assert_eq!(&c.bytes[c.answer.clone()], b"2026");
        assert_eq!(c.asked, c.source.end + 1 + 150);
        let e = |k: &str, v: &str, d: usize, t: &[u8]| {
            learner_case(t, k, v, d, 255).unwrap_err().to_string()
        };
        assert_eq!(
            e("", "1", 10, &text),
            "the name is empty: type one (a name like \"Tobeka\", a number like \"4817\")"
        );
        assert_eq!(
            e("Ann", "12.5", 10, &text),
            "the value \"12.5\" has '.': use letters, digits and spaces"
        );
        // "The number of Ann is 7." and its space: 24; the question and answer: 22
        assert_eq!(
            e("Ann", "7", 240, &text),
            "the fact, 240 bytes of text and the question need 286 bytes; the model reads 255: \
             a distance of at most 209 fits"
        );
        assert_eq!(longest_distance("Ann", "7", 255), 209);
        assert!(learner_case(&text, "Ann", "7", 209, 255).is_ok());
        assert_eq!(
            e("Ann", "7", 100, &text[..50]),
            "the text has 50 bytes; the case needs 209 around the fact: give more text"
        );
    }
}

/// Why the learner's fact cannot be asked (each names the value and what is allowed). Its
/// fields go to the page as `{kind, ...}` (camelCase), which words them in its language.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum NeedleError {
    /// An empty name or value.
    #[error("the {what} is empty: type one (a name like \"Tobeka\", a number like \"4817\")")]
    Empty {
        /// `name` or `value`.
        what: &'static str,
    },
    /// A name or value with a byte the templates cannot hold.
    #[error("the {what} {text:?} has {found:?}: use letters, digits and spaces")]
    Character {
        /// `name` or `value`.
        what: &'static str,
        /// What was typed.
        text: String,
        /// The first character refused.
        found: char,
    },
    /// The fact, the distance and the question do not fit the model's context.
    #[error(
        "the fact, {distance} bytes of text and the question need {need} bytes; the model reads \
         {context}: a distance of at most {most} fits"
    )]
    Long {
        /// The distance asked for.
        distance: usize,
        /// The bytes needed.
        need: usize,
        /// The model's prompt bytes.
        context: usize,
        /// The longest distance that fits.
        most: usize,
    },
    /// Too little text to fill the case.
    #[error("the text has {have} bytes; the case needs {need} around the fact: give more text")]
    Text {
        /// Bytes of text given.
        have: usize,
        /// Bytes needed.
        need: usize,
    },
}

/// The learner's fact `key` is `value`, asked `distance` bytes of `text` later, in a prompt of
/// `len` bytes (the model's context less the BOS): the text fills the prompt before the fact
/// and between it and the question.
pub fn learner_case(
    text: &[u8],
    key: &str,
    value: &str,
    distance: usize,
    len: usize,
) -> Result<Case, NeedleError> {
    for (what, s) in [("name", key), ("value", value)] {
        if s.trim().is_empty() {
            return Err(NeedleError::Empty { what });
        }
        if let Some(found) = s
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == ' '))
        {
            return Err(NeedleError::Character {
                what,
                text: s.to_string(),
                found,
            });
        }
    }
    let (key, value) = (key.trim(), value.trim());
    let fixed = fixed_bytes(key, value);
    let need = fixed + distance;
    if need > len {
        return Err(NeedleError::Long {
            distance,
            need,
            context: len,
            most: len.saturating_sub(fixed),
        });
    }
    let room = len - fixed;
    tasks::fact_case_with(text, key, value, len, distance).ok_or(NeedleError::Text {
        have: text.len(),
        need: room,
    })
}

/// The bytes of a case that are not filler: the fact, its space, the question and the answer.
fn fixed_bytes(key: &str, value: &str) -> usize {
    let (q, a) = tasks::question(key, value);
    tasks::fill(tasks::FACT, key, value).len() + 1 + q.len() + a.len()
}

/// The longest distance between the fact `key` is `value` and its question that a prompt of
/// `len` bytes holds (the page's distance slider ends there).
pub fn longest_distance(key: &str, value: &str, len: usize) -> usize {
    len.saturating_sub(fixed_bytes(key.trim(), value.trim()))
}
