//! Section 5's reports on the real model's last run (what the upload module's `Model` gives the
//! page, as JSON): the quality under the page's compression, every policy at the same budget,
//! the two levers in one currency, the heads' budgets, and text from both caches.

use kvlab_core::kivi::KiviConfig;
use kvlab_core::lm::compress::{
    first_difference, generate, kivi_quality, lever_cost, levers, quality, Allocation, CacheSpec,
    EvalError, Keep, LeverCost, Protocol, Quality, Sampling,
};
use kvlab_core::lm::{Lm, LmRun};
use kvlab_core::policy::Policy;
use serde::Serialize;

/// One named compression of the policies' table.
pub type Named<'a> = (&'a str, &'a CacheSpec);

/// The quality under the current compression.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QualityReport {
    /// Which positions were evaluated.
    pub protocol: Protocol,
    /// KL per evaluated position.
    pub kl: Vec<f64>,
    /// Top-1 kept, per evaluated position.
    pub top1: Vec<bool>,
    /// Mean KL, nats.
    pub mean_kl: f64,
    /// Share of positions with the same top-1 byte.
    pub top1_rate: f64,
    /// Mean loss of the true next byte, full cache (`None` when no evaluated position has
    /// its next byte in the prompt: a prompt of one byte).
    pub nll_full: Option<f64>,
    /// The same, compressed.
    pub nll: Option<f64>,
    /// The compressed prefill cache's bytes, and the full one's (fp16).
    pub bytes: u64,
    /// See `bytes`.
    pub bytes_full: u64,
    /// Tokens kept by each layer's heads, `[layer][head]`.
    pub kept_counts: Vec<Vec<usize>>,
    /// For each prefill token, the share of the shown heads keeping it.
    pub marks: Vec<f32>,
    /// The shown heads' kept tokens (kept by at least half of them), ascending.
    pub kept: Vec<usize>,
}

fn report(q: &Quality, layer: usize, head: Option<usize>) -> QualityReport {
    let p = q.protocol.prefill;
    let heads: Vec<&Vec<usize>> = match (q.kept.get(layer), head) {
        (Some(l), Some(h)) => l.get(h).into_iter().collect(),
        (Some(l), None) => l.iter().collect(),
        (None, _) => Vec::new(),
    };
    let mut marks = vec![0f32; p];
    for k in &heads {
        for &i in k.iter() {
            if let Some(m) = marks.get_mut(i) {
                *m += 1.0 / heads.len() as f32;
            }
        }
    }
    QualityReport {
        protocol: q.protocol,
        kl: q.kl.clone(),
        top1: q.top1.clone(),
        mean_kl: q.mean_kl(),
        top1_rate: q.top1_rate(),
        nll_full: (!q.nll_full.is_empty()).then(|| q.mean_nll_full()),
        nll: (!q.nll.is_empty()).then(|| q.mean_nll()),
        bytes: q.bytes,
        bytes_full: q.bytes_full,
        kept_counts: q
            .kept
            .iter()
            .map(|l| l.iter().map(Vec::len).collect())
            .collect(),
        kept: (0..p).filter(|&i| marks[i] >= 0.5).collect(),
        marks,
    }
}

/// The quality under `spec`, with the marks of `layer`'s head `head` (`None`: all its heads).
pub fn quality_report(
    lm: &Lm,
    run: &LmRun,
    tokens: &[u8],
    spec: &CacheSpec,
    layer: usize,
    head: Option<usize>,
) -> Result<QualityReport, EvalError> {
    Ok(report(&quality(lm, run, tokens, spec)?, layer, head))
}

/// One row of the policies on the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRow {
    /// The name.
    pub name: String,
    /// Mean KL (`None` with `error`).
    pub kl: Option<f64>,
    /// Top-1 agreement.
    pub top1: Option<f64>,
    /// Loss of the true next byte (`None` also when no position has one).
    pub nll: Option<f64>,
    /// The cache's bytes.
    pub bytes: Option<u64>,
    /// Why it could not be measured.
    pub error: Option<String>,
    /// The first row above that kept the very same tokens in every layer and head, by name: its
    /// KL, agreement and loss are then this row's too (the bytes can differ by a policy's score
    /// state); at `B <= r` every policy with a recent window keeps the last `B`.
    pub same_as: Option<String>,
}

/// The lever verdict in the model's currency.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeverReport {
    /// The current compression's mean KL and bytes.
    pub kl: f64,
    /// See `kl`.
    pub bytes: u64,
    /// One bit fewer for K and V, if possible.
    pub fewer_bits: Option<LeverCost>,
    /// 10% fewer tokens, if possible.
    pub fewer_tokens: Option<LeverCost>,
    /// `bits`, `tokens`, or `None` when only one (or neither) lever can be pulled.
    pub verdict: Option<&'static str>,
}

/// The heads' budgets, uniform against by score mass, for the current policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocationReport {
    /// `B` in every head.
    pub uniform: QualityReport,
    /// `B x heads` per layer by score mass.
    pub mass: QualityReport,
}

/// Text from both caches, split where they part.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TextReport {
    /// The prefill's length in tokens: the prompt (its last bytes where it leaves the model no
    /// room to write [`GENERATED`] bytes), which the texts continue.
    pub prefill: usize,
    /// The prompt's bytes left out of the texts' prefill, from its start, for room to write.
    pub cut: usize,
    /// The prompt's last bytes (up to 48), as text: what the texts continue.
    pub context: String,
    /// Full cache.
    pub full: String,
    /// Compressed once, split at the first byte that differs from `full`.
    pub once: Split,
    /// Held at `B` while generating, split likewise (`None`: the policy selects once).
    pub evicting: Option<Split>,
    /// Bytes generated.
    pub bytes: usize,
}

/// A text in two parts: what it shares with the full cache's, and the rest.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Split {
    /// The bytes the full cache's text also has, as text.
    pub same: String,
    /// From the first byte that differs (moved back to a character boundary).
    pub rest: String,
    /// The byte where they part (`None`: the same text).
    pub parts_at: Option<usize>,
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn split(full: &[u8], other: &[u8]) -> Split {
    let at = first_difference(full, other)
        .or_else(|| (full.len() != other.len()).then_some(full.len().min(other.len())));
    let cut = at.map_or(other.len(), |i| {
        // (back to the start of the character the byte belongs to: both parts stay text)
        (0..=i.min(other.len()))
            .rev()
            .find(|&j| j == 0 || j == other.len() || (other[j] & 0xC0) != 0x80)
            .unwrap_or(0)
    });
    Split {
        same: text(&other[..cut]),
        rest: text(&other[cut..]),
        parts_at: at,
    }
}

/// Bytes generated after the prompt.
pub const GENERATED: usize = 64;

/// Every compression of `policies` (named) on the run of `tokens`: the table of section 5.
pub fn policy_rows(lm: &Lm, run: &LmRun, tokens: &[u8], policies: &[Named<'_>]) -> Vec<PolicyRow> {
    let mut seen: Vec<(&str, Vec<Vec<Vec<usize>>>)> = Vec::new();
    policies
        .iter()
        .map(|&(name, spec)| {
            let q = quality(lm, run, tokens, spec);
            let mut r = row(name, q.as_ref());
            if let Ok(q) = &q {
                r.same_as = seen
                    .iter()
                    .find(|(_, kept)| *kept == q.kept)
                    .map(|(n, _)| n.to_string());
                seen.push((name, q.kept.clone()));
            }
            r
        })
        .collect()
}

/// The table's row of KIVI with `kivi` (every token kept, K per channel and V per token, the
/// residual in full precision), named `kivi`.
pub fn kivi_row(lm: &Lm, run: &LmRun, tokens: &[u8], kivi: &KiviConfig) -> PolicyRow {
    row("kivi", kivi_quality(lm, run, tokens, kivi).as_ref())
}

fn row(name: &str, q: Result<&Quality, &EvalError>) -> PolicyRow {
    PolicyRow {
        name: name.to_string(),
        kl: q.ok().map(Quality::mean_kl),
        top1: q.ok().map(Quality::top1_rate),
        nll: q.ok().filter(|q| !q.nll.is_empty()).map(Quality::mean_nll),
        bytes: q.ok().map(|q| q.bytes),
        error: q.err().map(ToString::to_string),
        same_as: None,
    }
}

/// `spec` with `B` in every head against `B x heads` per layer shared by score mass, with the
/// marks of `layer`'s head `head`; `None` for a policy that ranks nothing (StreamingLLM, whose
/// positions are the same in every head) or keeps every token.
pub fn allocation_report(
    lm: &Lm,
    run: &LmRun,
    tokens: &[u8],
    spec: &CacheSpec,
    layer: usize,
    head: Option<usize>,
) -> Option<Result<AllocationReport, EvalError>> {
    let ranks = matches!(spec.keep, Keep::Policy { policy } if !matches!(policy,
        Policy::StreamingLlm { .. } | Policy::Oracle));
    ranks.then(|| {
        let with = |allocation| CacheSpec {
            allocation,
            ..*spec
        };
        Ok(AllocationReport {
            uniform: quality_report(lm, run, tokens, &with(Allocation::Uniform), layer, head)?,
            mass: quality_report(lm, run, tokens, &with(Allocation::ScoreMass), layer, head)?,
        })
    })
}

/// The two levers against `spec`.
pub fn lever_report(
    lm: &Lm,
    run: &LmRun,
    tokens: &[u8],
    spec: &CacheSpec,
) -> Result<LeverReport, EvalError> {
    let base = quality(lm, run, tokens, spec)?;
    let (bits, fewer) = levers(spec, base.protocol.prefill);
    let cost = |s: Option<CacheSpec>| -> Result<Option<LeverCost>, EvalError> {
        s.map(|s| Ok(lever_cost(&base, &quality(lm, run, tokens, &s)?)))
            .transpose()
    };
    let (fewer_bits, fewer_tokens) = (cost(bits)?, cost(fewer)?);
    let verdict = match (
        fewer_bits.and_then(|c| c.kl_per_kib),
        fewer_tokens.and_then(|c| c.kl_per_kib),
    ) {
        (Some(b), Some(t)) => Some(if b <= t { "bits" } else { "tokens" }),
        _ => None,
    };
    Ok(LeverReport {
        kl: base.mean_kl(),
        bytes: base.bytes,
        fewer_bits,
        fewer_tokens,
        verdict,
    })
}

/// One point of a policy's trade-off curve on the model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepPoint {
    /// `B`.
    pub budget: usize,
    /// The prefill cache's `R_overall`: its fp16 bytes over its bytes compressed.
    pub r_overall: f64,
    /// Mean KL, nats.
    pub kl: f64,
    /// Top-1 agreement.
    pub top1: f64,
}

/// One policy's model KL over budgets (the trade-off chart's curve).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepCurve {
    /// The policy's name.
    pub name: String,
    /// One point per budget of [`sweep_budgets`], ascending.
    pub points: Vec<SweepPoint>,
    /// Why the curve could not be measured (the points stop there).
    pub error: Option<String>,
}

/// Budgets of the model's trade-off sweep for a prefill of `p`: the powers of two below `p`,
/// then `p` (where nothing is dropped): evenly spaced on the chart's log axis, and few, since
/// each point is a run of the model.
pub fn sweep_budgets(p: usize) -> Vec<usize> {
    let mut out: Vec<usize> = std::iter::successors(Some(1usize), |b| b.checked_mul(2))
        .take_while(|&b| b < p)
        .collect();
    out.push(p.max(1));
    out
}

/// `keep` at a budget of `budget`: StreamingLLM's sinks are part of its budget, so at a smaller
/// `B` all of it is sinks (as the page's own controls cap them); other rules are unchanged.
pub fn at_budget(keep: Keep, budget: usize) -> Keep {
    match keep {
        Keep::Policy {
            policy: Policy::StreamingLlm { sinks },
        } => Keep::Policy {
            policy: Policy::StreamingLlm {
                sinks: sinks.min(budget),
            },
        },
        keep => keep,
    }
}

/// `spec`'s policy at `budget` on the run of `tokens`: one point of its trade-off curve.
/// StreamingLLM's sinks are part of its budget: at a smaller `B`, all of it (as the page's own
/// controls cap them).
pub fn sweep_point(
    lm: &Lm,
    run: &LmRun,
    tokens: &[u8],
    spec: &CacheSpec,
    budget: usize,
) -> Result<SweepPoint, EvalError> {
    let keep = at_budget(spec.keep, budget);
    let q = quality(
        lm,
        run,
        tokens,
        &CacheSpec {
            budget,
            keep,
            ..*spec
        },
    )?;
    Ok(SweepPoint {
        budget,
        r_overall: q.bytes_full as f64 / q.bytes.max(1) as f64,
        kl: q.mean_kl(),
        top1: q.top1_rate(),
    })
}

/// `spec`'s policy at every budget of [`sweep_budgets`] on the run of `tokens` (the page asks
/// for the points one by one, [`sweep_point`], so that a change never waits behind a curve).
pub fn sweep_curve(
    lm: &Lm,
    run: &LmRun,
    tokens: &[u8],
    name: &str,
    spec: &CacheSpec,
) -> SweepCurve {
    let mut curve = SweepCurve {
        name: name.to_string(),
        points: Vec::new(),
        error: None,
    };
    let p = match Protocol::of(tokens.len()) {
        Ok(p) => p.prefill,
        Err(e) => {
            curve.error = Some(e.to_string());
            return curve;
        }
    };
    for budget in sweep_budgets(p) {
        match sweep_point(lm, run, tokens, spec, budget) {
            Ok(point) => curve.points.push(point),
            Err(e) => {
                curve.error = Some(e.to_string());
                break;
            }
        }
    }
    curve
}

/// Text after the whole prompt (the run of `tokens`, BOS first) from both caches: what the
/// model writes next, as a server continues what was typed. A prompt longer than the context
/// less [`GENERATED`] bytes is continued from its last bytes (run again), so that there is
/// room to write.
pub fn text_report(
    lm: &Lm,
    run: &LmRun,
    tokens: &[u8],
    spec: &CacheSpec,
    sampling: &Sampling,
) -> Result<TextReport, EvalError> {
    let room = lm.config().context.saturating_sub(GENERATED).max(2);
    let cut = tokens.len().saturating_sub(room);
    let shorter;
    let (tokens, run) = if cut > 0 {
        let mut t = Vec::with_capacity(room);
        t.extend_from_slice(&tokens[..1]);
        t.extend_from_slice(&tokens[1 + cut..]);
        let r = lm.forward(&t)?;
        shorter = (t, r);
        (&shorter.0[..], &shorter.1)
    } else {
        (tokens, run)
    };
    let g = generate(lm, run, tokens, spec, GENERATED, sampling)?;
    let p = g.prefill;
    let start = p.saturating_sub(48).max(1);
    Ok(TextReport {
        prefill: p,
        cut,
        context: text(&tokens[start..p]),
        full: text(&g.full),
        once: split(&g.full, &g.once),
        evicting: g.evicting.as_deref().map(|e| split(&g.full, e)),
        bytes: g.full.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_doubles_the_budget_up_to_the_prefill() {
        assert_eq!(sweep_budgets(192), [1, 2, 4, 8, 16, 32, 64, 128, 192]);
        assert_eq!(sweep_budgets(64), [1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(sweep_budgets(1), [1]);
        assert_eq!(sweep_budgets(0), [1]);
    }

    #[test]
    fn a_text_parts_from_the_full_caches_at_a_character_not_inside_one() {
        let s = split(b"and God said", b"and God saw");
        assert_eq!(
            (s.same.as_str(), s.rest.as_str(), s.parts_at),
            ("and God sa", "w", Some(10))
        );
        // "é" is two bytes (c3 a9); "è" (c3 a8) differs in its second: the cut is before both.
        let s = split("café".as_bytes(), "cafè".as_bytes());
        assert_eq!(
            (s.same.as_str(), s.rest.as_str(), s.parts_at),
            ("caf", "è", Some(4))
        );
        let s = split(b"amen", b"amen");
        assert_eq!(
            (s.same.as_str(), s.rest.as_str(), s.parts_at),
            ("amen", "", None)
        );
        // One text a prefix of the other: they part where the shorter ends.
        let s = split(b"amen", b"am");
        assert_eq!(
            (s.same.as_str(), s.rest.as_str(), s.parts_at),
            ("am", "", Some(2))
        );
    }
}
