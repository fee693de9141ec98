//! More token-selection policies side by side, and the quality of a selection (issue 5, "More
//! policies" and "Quality, not just ratio"; note §3 and math-spec §3, beyond the note: H2O,
//! ObservedAttention, SnapKV, StreamingLLM, TOVA, a random baseline and an oracle).
//!
//! # The observation point
//!
//! An attention history `A` is `S x T` (math-spec notation). Row `t` (0-based) is the query at
//! position `T - S + t`; under the causal rule it sees tokens `0..=T - S + t` (the layout of
//! [`crate::synth::attention`] and of captured decode histories).
//!
//! Every function here takes `observed_rows` `S_o` in `1..=S`:
//!
//! * the **observed rows** `[0, S_o)` are all a policy may look at (the selection happens after
//!   row `S_o - 1`);
//! * the **future rows** `[S_o, S)` are what the [`Policy::Oracle`] scores with;
//! * the **evaluation rows**, on which quality is measured, are the future rows when there are
//!   any (`S_o < S`), else all `S` rows (in-sample).
//!
//! Every policy selects among all `T` columns. Columns no observed row can see yet (tokens after
//! the observation point) score 0 for the observed-row policies and are kept only through the
//! recent window; with `r >= S - S_o` they are always kept, as a real cache keeps every token
//! appended after its compression.
//!
//! # Policies (`B` = budget, `r` = recent window, `O` = the observed rows)
//!
//! | policy | score of token `i` | rule |
//! |---|---|---|
//! | [`Policy::H2oSum`] | `sum_{t < S_o} a[t][i]` (the note) | heavy + recent ([`select::h2o`]) |
//! | [`Policy::H2oMean`] | the sum divided by `n_i`, the observed rows that can see `i` | heavy + recent |
//! | [`Policy::SnapKv`] | `sum` over the last `window` observed rows, pooled | heavy + recent ([`select::observation_scores`]) |
//! | [`Policy::StreamingLlm`] | none | first `sinks` + last `B - sinks` ([`select::streaming_llm`]) |
//! | [`Policy::Tova`] | `a[S_o - 1][i]` (the last observed step) | heavy + recent |
//! | [`Policy::Random`] | rank in a seeded permutation | heavy + recent |
//! | [`Policy::Oracle`] | `sum_{t >= S_o} a[t][i] / sum_k a[t][k]` (the future) | top-`B`, no recent window |
//!
//! "Heavy + recent" is math-spec §3's rule, applied by [`select::heavy_plus_recent`] on the score vector:
//! `kept = [T - r, T) ∪ TopK(score over [0, T - r), B - r)`, the last `B` when `r > B`, ties to
//! the lower index. Every policy keeps exactly `B` tokens for `B` in `1..=T` (budgets outside
//! are an error, as in [`select`]).
//!
//! # Quality
//!
//! On the evaluation rows: attention mass retained per step ([`select::mass_retained`]) and the
//! relative L2 error of the attention output per step ([`output_error`]), summarised as mean and
//! worst step in a [`QualityReport`]. [`sweep`] evaluates many budgets per policy in one pass.

use crate::budget::{
    breakdown, byte_count, byte_sum, Breakdown, BudgetError, Compression, IndexKind, ModelConfig,
};
use crate::select::{self, Pooling, SelectError, Selection};
use crate::{Matrix, ShapeError};
use serde::{Deserialize, Serialize};
use std::fmt;
use thiserror::Error;

/// Why a policy, a quality measurement or a sweep was refused. Every message names the bad
/// value and the valid range.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PolicyError {
    /// A selection parameter is out of range (budget, window, kernel, sinks, kept index) or an
    /// attention weight is not finite; see [`SelectError`].
    #[error(transparent)]
    Select(#[from] SelectError),
    /// The byte accounting refused the model or the compression; see [`BudgetError`].
    #[error(transparent)]
    Budget(#[from] BudgetError),
    /// A sub-matrix could not be built (cannot happen for valid inputs; kept for totality).
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// `observed_rows` outside `1..=S`. If unsure, use `S` (observe everything, no oracle).
    #[error("observed rows {observed_rows} is out of range: must be between 1 and {steps} (the number of attention rows)")]
    ObservedRows {
        /// Observed rows asked for.
        observed_rows: usize,
        /// Attention rows `S`.
        steps: usize,
    },
    /// The oracle was asked for but no row lies after the observation point. Lower
    /// `observed_rows` below `S` (which needs `S >= 2`).
    #[error("the oracle needs future rows: observed rows {observed_rows} leaves none of the {steps} attention rows; observed rows must be between 1 and {max} for the oracle", max = steps.saturating_sub(1))]
    NoFutureRows {
        /// Observed rows asked for.
        observed_rows: usize,
        /// Attention rows `S`.
        steps: usize,
    },
    /// The values do not have one row per token.
    #[error("values have {rows} rows but the attention has {tokens} tokens: values need one row per token (T x d)")]
    ValuesTokens {
        /// Rows of the values.
        rows: usize,
        /// Tokens `T` of the attention.
        tokens: usize,
    },
    /// The de-quantized values and the values differ in shape.
    #[error("de-quantized values are {rows} x {cols} but the values are {expected_rows} x {expected_cols}: the shapes must match")]
    ValuesHatShape {
        /// Rows of the de-quantized values.
        rows: usize,
        /// Columns of the de-quantized values.
        cols: usize,
        /// Rows of the values.
        expected_rows: usize,
        /// Columns of the values.
        expected_cols: usize,
    },
    /// A value is NaN or infinite.
    #[error("{which} at row {row}, column {col} is {value}: values must be finite")]
    NonFiniteValue {
        /// `"values"` or `"de-quantized values"`.
        which: &'static str,
        /// Row (token) of the first bad value.
        row: usize,
        /// Column (channel) of the first bad value.
        col: usize,
        /// The value.
        value: f32,
    },
    /// A head group is empty.
    #[error("no heads: a group needs at least 1 attention matrix")]
    NoHeads,
    /// The heads of a group differ in shape.
    #[error("head {head} is {rows} x {cols} but head 0 is {expected_rows} x {expected_cols}: every head of a group needs the same shape")]
    HeadShape {
        /// Index of the first mismatching head.
        head: usize,
        /// Its rows.
        rows: usize,
        /// Its columns.
        cols: usize,
        /// Rows of head 0.
        expected_rows: usize,
        /// Columns of head 0.
        expected_cols: usize,
    },
    /// `n_heads` is not a multiple of the KV heads, so query heads cannot be grouped.
    #[error("n_heads {n_heads} is not a multiple of n_kv_heads {n_kv_heads}: each KV head must serve a whole group of query heads (n_kv_heads must divide n_heads)")]
    HeadGroups {
        /// Query heads per layer.
        n_heads: u64,
        /// KV heads per layer (1 for MLA's shared latent).
        n_kv_heads: u64,
    },
}

/// Serde mirror of [`select::Pooling`] (which has no serde derive of its own).
#[derive(Serialize, Deserialize)]
#[serde(remote = "Pooling", rename_all = "kebab-case", tag = "kind")]
enum PoolingDef {
    None,
    Avg { kernel: usize },
    Max { kernel: usize },
}

/// A token-selection policy. Serialised internally tagged, kebab-case, e.g.
/// `{"kind":"h2o-sum"}`, `{"kind":"snapkv","window":32,"pooling":{"kind":"avg","kernel":5}}`,
/// `{"kind":"streaming-llm","sinks":4}`, `{"kind":"random","seed":7}`, `{"kind":"oracle"}`.
///
/// See the module docs for each score and rule. The oracle has no parameter: the split between
/// observed and future rows is `observed_rows`, shared by every policy of a comparison so that
/// all of them are judged on the same steps.
///
/// ```
/// use kvlab_core::{Matrix, policy::{select_with, Policy}};
/// let a = Matrix::new(3, 4, vec![0.60, 0.20, 0.10, 0.10,
///                                0.70, 0.10, 0.10, 0.10,
///                                0.05, 0.05, 0.10, 0.80]).unwrap();
/// // observe rows 0..2; the oracle scores with row 2, whose top-2 are tokens 3 and 2
/// assert_eq!(select_with(&Policy::Oracle, &a, 2, 0, 2).unwrap().kept, vec![2, 3]);
/// // H2O on rows 0..2: scores [1.30, 0.30, 0.20, 0.20]
/// assert_eq!(select_with(&Policy::H2oSum, &a, 2, 0, 2).unwrap().kept, vec![0, 1]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Policy {
    /// H2O as in the note: `score_i = sum_{t < S_o} a[t][i]` ([`select::h2o`]).
    H2oSum,
    /// H2O with averaged scores (ObservedAttention): `score_i = sum_{t < S_o} a[t][i] / n_i`,
    /// `n_i = #{t < S_o : t >= i - (T - S)}`, the observed rows whose causal window contains
    /// token `i` (row `t` sees `0..=T - S + t`). Counted by that rule, not by looking for zero
    /// weights; `score_i = 0` when `n_i = 0`. Older tokens are seen by more rows, so the plain
    /// sum favours them; the mean does not.
    H2oMean,
    /// SnapKV: scores over the last `window` observed rows, prefix pooled
    /// ([`select::observation_scores`]); `window` in `1..=S_o`.
    #[serde(rename = "snapkv")]
    SnapKv {
        /// Observation window `w` in rows, `1..=S_o` (the reference uses 32..64).
        window: usize,
        /// Pooling of the prefix scores (the reference uses avg or max, kernel 5..7).
        #[serde(default, with = "PoolingDef")]
        pooling: Pooling,
    },
    /// StreamingLLM: the first `sinks` tokens and the last `B - sinks`; `sinks` in `0..=B`.
    /// Takes no recent window (its recent part is `B - sinks`).
    StreamingLlm {
        /// Attention-sink tokens at the start (4 in the paper).
        sinks: usize,
    },
    /// TOVA, one-shot: the top-`B` by the last observed step's attention `a[S_o - 1][i]`, with the
    /// recent window honoured as in H2O. (The paper evicts one token per step; applied once at the
    /// observation point that is the top-`B` of the last row.)
    Tova,
    /// Random baseline: a uniformly random set of older tokens plus the recent window. Scores are
    /// ranks in a permutation of `0..T` drawn by a Fisher-Yates shuffle from SplitMix64 seeded
    /// with `seed`: the same seed and `T` give the same set on every platform. (Above `2^24`
    /// tokens ranks round to equal `f32` values and ties go to the lower index.)
    Random {
        /// Seed of the permutation (JSON numbers are exact up to `2^53`).
        seed: u64,
    },
    /// Oracle upper bound: the top-`B` by the normalised attention of the future rows,
    /// `score_i = sum_{t >= S_o} a[t][i] / sum_k a[t][k]` (rows summing to 0 skipped), with no
    /// recent window. This is exactly the mass that [`QualityReport::mass_mean`] averages, so no
    /// set of `B` tokens retains more mean mass on the future rows. Needs `S_o < S`.
    Oracle,
}

/// The parameters the policies of [`Policy::each`] take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PolicyParams {
    /// SnapKV's observation window `w`, `1..=S_o`.
    pub window: usize,
    /// SnapKV's pooling.
    pub pooling: Pooling,
    /// StreamingLLM's sinks, `0..=B`.
    pub sinks: usize,
    /// The random baseline's seed.
    pub seed: u64,
}

impl Policy {
    /// Stable kebab-case name: `h2o-sum`, `h2o-mean`, `snapkv`, `streaming-llm`, `tova`,
    /// `random`, `oracle` (the serde tag).
    pub fn name(&self) -> &'static str {
        match self {
            Policy::H2oSum => "h2o-sum",
            Policy::H2oMean => "h2o-mean",
            Policy::SnapKv { .. } => "snapkv",
            Policy::StreamingLlm { .. } => "streaming-llm",
            Policy::Tova => "tova",
            Policy::Random { .. } => "random",
            Policy::Oracle => "oracle",
        }
    }

    /// Every policy, in the comparison's order, each with its parameters from `p`: the page's
    /// comparison and its tests list them here, so a new policy is its variant, its arms in
    /// this impl and a line in this list.
    pub fn each(p: &PolicyParams) -> Vec<Policy> {
        vec![
            Policy::H2oSum,
            Policy::H2oMean,
            Policy::SnapKv {
                window: p.window,
                pooling: p.pooling,
            },
            Policy::StreamingLlm { sinks: p.sinks },
            Policy::Tova,
            Policy::Random { seed: p.seed },
            Policy::Oracle,
        ]
    }

    /// [`Policy::each`] with sensible parameters: SnapKV with `window` (clamp it to
    /// `1..=S_o` yourself) and no pooling, StreamingLLM with 4 sinks, random with seed 1.
    pub fn defaults(window: usize) -> Vec<Policy> {
        Policy::each(&PolicyParams {
            window,
            pooling: Pooling::None,
            sinks: 4,
            seed: 1,
        })
    }

    /// Whether the policy honours the recent window `r` (all but StreamingLLM and the oracle).
    pub fn uses_recent(&self) -> bool {
        // (every policy says: a new one decides here, the compiler asks)
        match self {
            Policy::H2oSum
            | Policy::H2oMean
            | Policy::SnapKv { .. }
            | Policy::Tova
            | Policy::Random { .. } => true,
            Policy::StreamingLlm { .. } | Policy::Oracle => false,
        }
    }

    /// Bytes of score state kept per kept token per selection copy (math-spec §1, `M_meta`):
    /// 4 for H2O (one fp32 accumulated score, updated every step), 0 for the others (SnapKV
    /// selects once, TOVA uses the current step's attention, StreamingLLM, random and the
    /// oracle keep no score).
    pub fn score_state_bytes(&self) -> u64 {
        match self {
            Policy::H2oSum | Policy::H2oMean => 4,
            Policy::SnapKv { .. }
            | Policy::StreamingLlm { .. }
            | Policy::Tova
            | Policy::Random { .. }
            | Policy::Oracle => 0,
        }
    }

    /// The byte-accounting inputs of this policy at `t_kept` of `t_total` tokens: `template`
    /// with `t_total`, `t_kept`, this policy's [`Policy::score_state_bytes`], and no index for
    /// StreamingLLM (its positions are implied) or `template.index` otherwise.
    pub fn compression(&self, template: &Compression, t_total: u64, t_kept: u64) -> Compression {
        Compression {
            t_total,
            t_kept,
            score_state_bytes: self.score_state_bytes(),
            index: match self {
                Policy::StreamingLlm { .. } => IndexKind::None,
                Policy::H2oSum
                | Policy::H2oMean
                | Policy::SnapKv { .. }
                | Policy::Tova
                | Policy::Random { .. }
                | Policy::Oracle => template.index,
            },
            ..*template
        }
    }
}

impl fmt::Display for Policy {
    /// A short label for tables and legends, e.g. `SnapKV (w=32, avg k=5)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::H2oSum => f.write_str("H2O (sum)"),
            Policy::H2oMean => f.write_str("H2O (mean)"),
            Policy::SnapKv { window, pooling } => match pooling {
                Pooling::None => write!(f, "SnapKV (w={window})"),
                Pooling::Avg { kernel } => write!(f, "SnapKV (w={window}, avg k={kernel})"),
                Pooling::Max { kernel } => write!(f, "SnapKV (w={window}, max k={kernel})"),
            },
            Policy::StreamingLlm { sinks } => write!(f, "StreamingLLM ({sinks} sinks)"),
            Policy::Tova => f.write_str("TOVA"),
            Policy::Random { seed } => write!(f, "random (seed {seed})"),
            Policy::Oracle => f.write_str("oracle"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Scores and selection

fn check_observed(attention: &Matrix, observed_rows: usize) -> Result<(), PolicyError> {
    let steps = attention.rows();
    if observed_rows == 0 || observed_rows > steps {
        return Err(PolicyError::ObservedRows {
            observed_rows,
            steps,
        });
    }
    Ok(())
}

fn check_finite_attention(attention: &Matrix) -> Result<(), PolicyError> {
    match attention.first_non_finite_index() {
        Some(index) => Err(SelectError::NonFinite {
            what: "attention weight",
            index,
            value: attention.data().get(index).copied().unwrap_or(f32::NAN),
        }
        .into()),
        None => Ok(()),
    }
}

/// Rows `[from, to)` of `m` as a new matrix (`from < to <= rows`).
fn rows_of(m: &Matrix, from: usize, to: usize) -> Result<Matrix, PolicyError> {
    let c = m.cols();
    let data = m
        .data()
        .get(from.saturating_mul(c)..to.saturating_mul(c))
        .unwrap_or(&[]);
    Ok(Matrix::new(to.saturating_sub(from), c, data.to_vec())?)
}

/// The evaluation rows `[lo, hi)`: the future rows when `S_o < S`, else all rows.
fn eval_range(steps: usize, observed_rows: usize) -> (usize, usize) {
    if observed_rows < steps {
        (observed_rows, steps)
    } else {
        (0, steps)
    }
}

/// The score vector (length `T`) a policy ranks tokens by, computed from the first
/// `observed_rows` rows of `attention` (`S x T`), or from the future rows for the oracle; `None`
/// for StreamingLLM, which ranks nothing. See the module docs for each formula. Scores are
/// accumulated in `f64` and returned as `f32`, the type [`select::heavy_plus_recent`] ranks.
///
/// Errors: `observed_rows` outside `1..=S`, a non-finite weight, a SnapKV window outside
/// `1..=S_o` or a bad pooling kernel, the oracle with `S_o = S`.
///
/// ```
/// use kvlab_core::{Matrix, policy::{policy_scores, Policy}};
/// let a = Matrix::new(3, 4, vec![0.60, 0.20, 0.10, 0.10,
///                                0.70, 0.10, 0.10, 0.10,
///                                0.05, 0.05, 0.10, 0.80]).unwrap();
/// // rows 0 and 1 see tokens 0..=1 and 0..=2 (T - S = 1), so n = [2, 2, 1, 0] over the two
/// // observed rows; sums [1.30, 0.30, 0.20, 0.20] (n counts rows by the causal rule only)
/// let s = policy_scores(&Policy::H2oMean, &a, 2).unwrap().unwrap();
/// assert!((s[0] - 0.65).abs() < 1e-6 && (s[1] - 0.15).abs() < 1e-6);
/// assert!((s[2] - 0.20).abs() < 1e-6 && s[3] == 0.0);
/// ```
pub fn policy_scores(
    policy: &Policy,
    attention: &Matrix,
    observed_rows: usize,
) -> Result<Option<Vec<f32>>, PolicyError> {
    check_observed(attention, observed_rows)?;
    check_finite_attention(attention)?;
    let (steps, total) = (attention.rows(), attention.cols());
    // The observed rows are rows [0, observed_rows) of `attention`, read in place; their weights
    // were checked just above.
    let scores = match *policy {
        Policy::H2oSum => select::column_sums(attention, 0..observed_rows),
        Policy::H2oMean => {
            let sums = select::column_sums(attention, 0..observed_rows);
            sums.iter()
                .enumerate()
                .map(|(i, &x)| {
                    // Row t sees token i iff t >= i - (T - S), i.e. t >= i + S - T.
                    let first_row = i.saturating_add(steps).saturating_sub(total);
                    let n = observed_rows.saturating_sub(first_row);
                    if n == 0 {
                        0.0
                    } else {
                        (f64::from(x) / n as f64) as f32
                    }
                })
                .collect()
        }
        Policy::SnapKv { window, pooling } => {
            select::observation_scores_of_rows(attention, observed_rows, window, pooling)?
        }
        Policy::StreamingLlm { .. } => return Ok(None),
        Policy::Tova => {
            select::observation_scores_of_rows(attention, observed_rows, 1, Pooling::None)?
        }
        Policy::Random { seed } => random_scores(seed, total),
        Policy::Oracle => {
            if observed_rows >= steps {
                return Err(PolicyError::NoFutureRows {
                    observed_rows,
                    steps,
                });
            }
            let mut acc = vec![0f64; total];
            for row in attention.iter_rows().skip(observed_rows) {
                let sum: f64 = row.iter().map(|&v| f64::from(v)).sum();
                if sum != 0.0 {
                    for (a, &v) in acc.iter_mut().zip(row) {
                        *a += f64::from(v) / sum;
                    }
                }
            }
            acc.into_iter().map(|v| v as f32).collect()
        }
    };
    Ok(Some(scores))
}

use crate::rng::splitmix64;

/// Ranks of a seeded permutation of `0..total`: the first token drawn scores `total`, the
/// last scores 1.
fn random_scores(seed: u64, total: usize) -> Vec<f32> {
    let mut perm: Vec<usize> = (0..total).collect();
    let mut state = seed;
    for i in (1..total).rev() {
        // Multiply-high maps 64 random bits onto 0..=i (bias below 2^-40 for i < 2^24).
        let j = ((u128::from(splitmix64(&mut state)) * (i as u128 + 1)) >> 64) as usize;
        perm.swap(i, j.min(i));
    }
    let mut scores = vec![0f32; total];
    for (rank, &tok) in perm.iter().enumerate() {
        if let Some(s) = scores.get_mut(tok) {
            *s = (total - rank) as f32;
        }
    }
    scores
}

/// The recent window a policy actually applies: `recent`, or 0 when it takes none.
fn effective_recent(policy: &Policy, recent: usize) -> usize {
    if policy.uses_recent() {
        recent
    } else {
        0
    }
}

/// Selects `budget` tokens of the `T` columns of `attention` (`S x T`) with `policy`, looking
/// only at the first `observed_rows` rows (the oracle: only at the rows after them).
///
/// * `budget` `B` in `1..=T`; `|kept| == B` for every policy;
/// * `recent` `r >= 0`: the recent window `[T - r, T)` (the last `B` of it when `r > B`), ignored
///   by StreamingLLM and the oracle;
/// * `observed_rows` `S_o` in `1..=S` (`1..S` for the oracle).
///
/// Deterministic: ties in score go to the lower token index; random depends only on its seed.
///
/// ```
/// use kvlab_core::{Matrix, policy::{select_with, Policy}};
/// let a = Matrix::new(3, 4, vec![0.60, 0.20, 0.10, 0.10,
///                                0.70, 0.10, 0.10, 0.10,
///                                0.05, 0.05, 0.10, 0.80]).unwrap();
/// // TOVA over all rows: the last row [0.05, 0.05, 0.10, 0.80], recent window {3}
/// assert_eq!(select_with(&Policy::Tova, &a, 2, 1, 3).unwrap().kept, vec![2, 3]);
/// assert!(select_with(&Policy::Oracle, &a, 2, 0, 3).is_err()); // no future rows
/// ```
pub fn select_with(
    policy: &Policy,
    attention: &Matrix,
    budget: usize,
    recent: usize,
    observed_rows: usize,
) -> Result<Selection, PolicyError> {
    check_observed(attention, observed_rows)?;
    check_finite_attention(attention)?;
    match *policy {
        // select::h2o on the observed rows (checked above), read in place.
        Policy::H2oSum => Ok(select::heavy_plus_recent(
            &select::column_sums(attention, 0..observed_rows),
            budget,
            recent,
        )?),
        Policy::StreamingLlm { sinks } => {
            Ok(select::streaming_llm(attention.cols(), budget, sinks)?)
        }
        Policy::H2oMean
        | Policy::SnapKv { .. }
        | Policy::Tova
        | Policy::Random { .. }
        | Policy::Oracle => {
            let scores = policy_scores(policy, attention, observed_rows)?.unwrap_or_default();
            Ok(select::heavy_plus_recent(
                &scores,
                budget,
                effective_recent(policy, recent),
            )?)
        }
    }
}

/// Tokens in the order a growing budget admits them: `kept(B)` is the first `B` of this order
/// for every valid `B` (the policies' kept sets are nested in `B`).
///
/// Heavy + recent: `T-1, T-2, ..., T-r` (the last `min(B, r)` recent tokens are the first
/// admitted), then `[0, T - r)` by descending score, ties to the lower index (the order of
/// math-spec §3's `TopK`). StreamingLLM: the sinks `0..s`, then `T-1, T-2, ...`.
#[cfg(test)]
fn admission_order(
    policy: &Policy,
    scores: Option<&[f32]>,
    total: usize,
    recent: usize,
) -> Vec<usize> {
    admission_order_ranked(policy, &rank(scores.unwrap_or(&[]), total), total, recent)
}

/// [`admission_order`] from `ranked`, all `T` tokens by descending score ([`rank`]): the
/// prefix `[0, T - r)` in ranked order is the prefix sorted by the same total order, so a
/// change of `r` needs no new sort.
fn admission_order_ranked(
    policy: &Policy,
    ranked: &[usize],
    total: usize,
    recent: usize,
) -> Vec<usize> {
    if let Policy::StreamingLlm { sinks } = policy {
        let s = (*sinks).min(total);
        return (0..s).chain((s..total).rev()).collect();
    }
    let r = effective_recent(policy, recent).min(total);
    let prefix = total - r;
    (prefix..total)
        .rev()
        .chain(ranked.iter().copied().filter(|&i| i < prefix))
        .collect()
}

/// Tokens `0..total` by descending score, ties to the lower index (a total order, so the
/// result is unique); a token without a score ranks as `-inf`.
fn rank(scores: &[f32], total: usize) -> Vec<usize> {
    let score = |i: usize| scores.get(i).copied().unwrap_or(f32::NEG_INFINITY);
    if total as u64 > select::RANK_KEY_MAX_TOKENS {
        let mut ranked: Vec<usize> = (0..total).collect();
        ranked.sort_unstable_by(|&a, &b| score(b).total_cmp(&score(a)).then(a.cmp(&b)));
        return ranked;
    }
    // The same order as one sortable integer per token (score, then index): a plain integer
    // sort instead of one through a comparison closure.
    let mut keys: Vec<u64> = (0..total).map(|i| select::rank_key(score(i), i)).collect();
    keys.sort_unstable();
    keys.into_iter()
        .map(|k| (k & 0xffff_ffff) as usize)
        .collect()
}

/// One policy's score vector on the observed rows and its ranking, for any budget and recent
/// window.
#[derive(Debug, Clone)]
struct PreparedPolicy {
    policy: Policy,
    /// [`policy_scores`] (`None` for StreamingLLM), or why the policy cannot run here.
    scores: Result<Option<Vec<f32>>, PolicyError>,
    /// All tokens by descending score ([`rank`]); empty when there are no scores.
    ranked: Vec<usize>,
}

impl PreparedPolicy {
    /// [`select_with`] at `budget` and `recent` (on the attention the scores came from, whose
    /// observed rows and weights the caller has checked).
    fn select(&self, total: usize, budget: usize, recent: usize) -> Result<Selection, PolicyError> {
        match self.policy {
            Policy::StreamingLlm { sinks } => Ok(select::streaming_llm(total, budget, sinks)?),
            // H2O (sum) included: select::h2o is this rule on the same cumulative scores.
            Policy::H2oSum
            | Policy::H2oMean
            | Policy::SnapKv { .. }
            | Policy::Tova
            | Policy::Random { .. }
            | Policy::Oracle => match &self.scores {
                Err(e) => Err(e.clone()),
                Ok(s) => Ok(select::heavy_plus_recent(
                    s.as_deref().unwrap_or_default(),
                    budget,
                    effective_recent(&self.policy, recent),
                )?),
            },
        }
    }
}

/// The score vectors of a list of policies on one attention history and observation point,
/// computed once and reused while only the budget or the recent window changes.
#[derive(Debug, Clone)]
pub struct PolicyScores {
    observed_rows: usize,
    entries: Vec<PreparedPolicy>,
}

impl PolicyScores {
    /// Scores of each of `policies` on `attention` observed up to `observed_rows`. Entries of
    /// `reuse` (which must come from the same attention) with the same policy and observation
    /// point are taken over instead of being computed again.
    pub fn new(
        policies: &[Policy],
        attention: &Matrix,
        observed_rows: usize,
        reuse: Option<&PolicyScores>,
    ) -> Self {
        let reuse = reuse.filter(|r| r.observed_rows == observed_rows);
        let entries = policies
            .iter()
            .map(|p| {
                if let Some(e) = reuse.and_then(|r| r.entries.iter().find(|e| e.policy == *p)) {
                    return e.clone();
                }
                let scores = policy_scores(p, attention, observed_rows);
                let ranked = match &scores {
                    Ok(Some(s)) => rank(s, attention.cols()),
                    _ => Vec::new(),
                };
                PreparedPolicy {
                    policy: *p,
                    scores,
                    ranked,
                }
            })
            .collect();
        Self {
            observed_rows,
            entries,
        }
    }

    /// Whether these are the scores of `policies` observed up to `observed_rows`.
    pub fn is_for(&self, policies: &[Policy], observed_rows: usize) -> bool {
        self.observed_rows == observed_rows
            && self.entries.len() == policies.len()
            && self
                .entries
                .iter()
                .zip(policies)
                .all(|(e, p)| e.policy == *p)
    }
}

// ---------------------------------------------------------------------------------------------
// Quality

/// Quality of one selection on the evaluation rows (the future rows when `S_o < S`, else all).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct QualityReport {
    /// Mean over evaluation rows of the attention mass retained
    /// `sum_{i in kept} a[t][i] / sum_i a[t][i]` (1 for a row of mass 0), in `[0, 1]` for
    /// non-negative attention.
    pub mass_mean: f64,
    /// Smallest per-row mass retained (the worst step).
    pub mass_worst: f64,
    /// Mean over evaluation rows of the relative output error ([`output_error`]); `None` when no
    /// values were given. `+inf` if some row's exact output is exactly zero while the kept
    /// output is not.
    pub output_error_mean: Option<f64>,
    /// Largest per-row relative output error (the worst step); `None` without values.
    pub output_error_worst: Option<f64>,
    /// `R_token = T / |kept|` (note §3.3), `>= 1`.
    pub r_token: f64,
    /// Number of kept tokens `|kept|` (distinct), `1..=T`.
    pub kept: usize,
    /// Number of evaluation rows the figures average over, `>= 1`.
    pub eval_rows: usize,
}

/// The evaluation rows and values, prepared once for many kept sets.
#[derive(Debug)]
pub struct Evaluator {
    /// Evaluation rows (`E x T`).
    eval: Matrix,
    /// The same, transposed (`T x E`): token `i`'s weights from every row, contiguous.
    eval_t: Vec<f32>,
    /// `s_t = sum_i a[t][i]` per evaluation row, in token order.
    row_sum: Vec<f64>,
    values: Option<ValueCtx>,
}

#[derive(Debug)]
struct ValueCtx {
    /// Channels `d`.
    d: usize,
    /// De-quantized values `v_hat` (`T x d`, row-major), as `f64`.
    hat: Vec<f64>,
    /// Exact outputs `o_t = sum_i a[t][i] v_i / s_t` (`E x d`; 0 where `s_t = 0`).
    exact: Vec<f64>,
    /// `||o_t||`.
    exact_norm: Vec<f64>,
}

fn check_finite_values(m: &Matrix, which: &'static str) -> Result<(), PolicyError> {
    match m.first_non_finite_index() {
        Some(index) => Err(PolicyError::NonFiniteValue {
            which,
            row: index / m.cols(),
            col: index % m.cols(),
            value: m.data().get(index).copied().unwrap_or(f32::NAN),
        }),
        None => Ok(()),
    }
}

/// Row `i` of a row-major buffer with rows of `len` values (empty when out of range).
fn chunk<T>(data: &[T], i: usize, len: usize) -> &[T] {
    i.checked_mul(len)
        .and_then(|lo| data.get(lo..lo.checked_add(len)?))
        .unwrap_or(&[])
}

/// Adds token `i`'s weighted value `a[t][i] v_i` to `num[t]` and `a[t][i]` to `m[t]` for every
/// row `t`, for each token of `tokens`, in `f64` (a product of two `f32` is exact in `f64`, so
/// the only round-off is the `f64` sums').
///
/// Tokens are taken [`BLOCK`] at a time, so each row's running sum is read and written once per
/// block rather than once per token: the loop is bound by that traffic, not by the arithmetic.
/// `values` are already `f64` (converted once per evaluation): row `i` of `values` is token
/// `i`'s, or with `packed` the `k`-th token of `tokens`' (only those rows were converted).
#[allow(clippy::too_many_arguments)]
fn accumulate(
    eval_t: &[f32],
    rows: usize,
    values: &[f64],
    packed: bool,
    d: usize,
    tokens: &[usize],
    num: &mut [f64],
    m: &mut [f64],
) {
    if d == 0 || rows == 0 {
        return;
    }
    let col = |i: usize| chunk(eval_t, i, rows);
    let val = |pos: usize, i: usize| chunk(values, if packed { pos } else { i }, d);
    let mut blocks = tokens.chunks_exact(BLOCK);
    for (b, block) in blocks.by_ref().enumerate() {
        let tok = |k: usize| block.get(k).copied().unwrap_or(usize::MAX);
        let cols: [&[f32]; BLOCK] = std::array::from_fn(|k| col(tok(k)));
        let vals: [&[f64]; BLOCK] = std::array::from_fn(|k| val(b * BLOCK + k, tok(k)));
        if cols.iter().any(|c| c.len() != rows) || vals.iter().any(|v| v.len() != d) {
            continue;
        }
        for (t, (acc, mt)) in num.chunks_exact_mut(d).zip(m.iter_mut()).enumerate() {
            let w: [f64; BLOCK] =
                std::array::from_fn(|k| f64::from(cols[k].get(t).copied().unwrap_or(0.0)));
            // Token by token, so that `m` over all tokens equals `s_t` bit for bit.
            for &x in &w {
                *mt += x;
            }
            if w.iter().all(|&x| x == 0.0) {
                continue;
            }
            let [v0, v1, v2, v3, v4, v5, v6, v7] = vals;
            let it = acc.iter_mut().zip(v0).zip(v1).zip(v2).zip(v3);
            for ((((((((a, x0), x1), x2), x3), x4), x5), x6), x7) in
                it.zip(v4).zip(v5).zip(v6).zip(v7)
            {
                *a += w[0] * x0
                    + w[1] * x1
                    + w[2] * x2
                    + w[3] * x3
                    + w[4] * x4
                    + w[5] * x5
                    + w[6] * x6
                    + w[7] * x7;
            }
        }
    }
    let first = tokens.len() - blocks.remainder().len();
    for (k, &i) in blocks.remainder().iter().enumerate() {
        add_token(col(i), val(first + k, i), d, num, m);
    }
}

/// Adds one token's `a[t][i] v_i` to `num[t]` and `a[t][i]` to `m[t]` for every row `t`
/// (`col`: its weight in each row; `v`: its value vector).
fn add_token(col: &[f32], v: &[f64], d: usize, num: &mut [f64], m: &mut [f64]) {
    for ((&w, acc), mt) in col.iter().zip(num.chunks_exact_mut(d)).zip(m.iter_mut()) {
        if w != 0.0 {
            let w = f64::from(w);
            *mt += w;
            for (a, &x) in acc.iter_mut().zip(v) {
                *a += w * x;
            }
        }
    }
}

/// Tokens admitted per pass of [`accumulate`] over a row's running sum.
const BLOCK: usize = 8;

/// Adds `a[t][i]` to `m[t]` for every row `t` and token `i` of `tokens`.
fn accumulate_mass(eval_t: &[f32], rows: usize, tokens: &[usize], m: &mut [f64]) {
    for &i in tokens {
        let col = chunk(eval_t, i, rows);
        for (&w, mt) in col.iter().zip(m.iter_mut()) {
            *mt += f64::from(w);
        }
    }
}

impl Evaluator {
    /// Checks the inputs and prepares the evaluation rows of `attention` for `observed_rows`,
    /// with the exact outputs when `values` are given (`values_hat`: their de-quantized form).
    pub fn new(
        attention: &Matrix,
        values: Option<&Matrix>,
        values_hat: Option<&Matrix>,
        observed_rows: usize,
    ) -> Result<Self, PolicyError> {
        check_observed(attention, observed_rows)?;
        check_finite_attention(attention)?;
        let total = attention.cols();
        let (lo, hi) = eval_range(attention.rows(), observed_rows);
        let eval = rows_of(attention, lo, hi)?;
        let rows = eval.rows();
        let mut eval_t = vec![0f32; eval.data().len()];
        for (t, row) in eval.iter_rows().enumerate() {
            for (i, &w) in row.iter().enumerate() {
                if let Some(x) = eval_t.get_mut(i * rows + t) {
                    *x = w;
                }
            }
        }
        let row_sum: Vec<f64> = eval
            .iter_rows()
            .map(|r| r.iter().map(|&v| f64::from(v)).sum())
            .collect();
        let values = match values {
            None => None,
            Some(v) => {
                if v.rows() != total {
                    return Err(PolicyError::ValuesTokens {
                        rows: v.rows(),
                        tokens: total,
                    });
                }
                check_finite_values(v, "values")?;
                let hat = match values_hat {
                    None => v,
                    Some(h) => {
                        if h.rows() != v.rows() || h.cols() != v.cols() {
                            return Err(PolicyError::ValuesHatShape {
                                rows: h.rows(),
                                cols: h.cols(),
                                expected_rows: v.rows(),
                                expected_cols: v.cols(),
                            });
                        }
                        check_finite_values(h, "de-quantized values")?;
                        h
                    }
                };
                let d = v.cols();
                let mut exact = vec![0f64; rows * d];
                let mut m = vec![0f64; rows];
                let all: Vec<usize> = (0..total).collect();
                let exact_values: Vec<f64> = v.data().iter().map(|&x| f64::from(x)).collect();
                accumulate(
                    &eval_t,
                    rows,
                    &exact_values,
                    false,
                    d,
                    &all,
                    &mut exact,
                    &mut m,
                );
                let mut exact_norm = Vec::with_capacity(rows);
                for (o, &s) in exact.chunks_exact_mut(d).zip(&row_sum) {
                    if s != 0.0 {
                        o.iter_mut().for_each(|x| *x /= s);
                    } else {
                        o.iter_mut().for_each(|x| *x = 0.0);
                    }
                    exact_norm.push(o.iter().map(|x| x * x).sum::<f64>().sqrt());
                }
                Some(ValueCtx {
                    d,
                    hat: if std::ptr::eq(hat, v) {
                        exact_values
                    } else {
                        hat.data().iter().map(|&x| f64::from(x)).collect()
                    },
                    exact,
                    exact_norm,
                })
            }
        };
        Ok(Self {
            eval,
            eval_t,
            row_sum,
            values,
        })
    }

    fn total(&self) -> usize {
        self.eval.cols()
    }

    /// Relative output error per row from the kept sums `num[t] = sum_kept a v_hat`,
    /// `m[t] = sum_kept a` (see [`output_error`] for the definition and its edge cases).
    fn errors_from(ctx: &ValueCtx, num: &[f64], m: &[f64]) -> Vec<f64> {
        num.chunks_exact(ctx.d.max(1))
            .zip(m)
            .zip(ctx.exact.chunks_exact(ctx.d.max(1)))
            .zip(&ctx.exact_norm)
            .map(|(((n, &mt), o), &norm)| {
                let diff2: f64 = n
                    .iter()
                    .zip(o)
                    .map(|(&x, &e)| {
                        let hat = if mt != 0.0 { x / mt } else { 0.0 };
                        (e - hat) * (e - hat)
                    })
                    .sum();
                relative(diff2.sqrt(), norm)
            })
            .collect()
    }

    /// Per-row output errors of a kept set (validated, distinct, ascending).
    fn output_errors(&self, kept: &[usize]) -> Option<Vec<f64>> {
        let ctx = self.values.as_ref()?;
        let rows = self.eval.rows();
        let mut num = vec![0f64; rows * ctx.d];
        let mut m = vec![0f64; rows];
        accumulate(
            &self.eval_t,
            rows,
            &ctx.hat,
            false,
            ctx.d,
            kept,
            &mut num,
            &mut m,
        );
        Some(Self::errors_from(ctx, &num, &m))
    }

    /// The report of a kept set: mass by [`select::mass_retained`], errors by [`output_error`].
    fn report(&self, kept: &[usize]) -> Result<QualityReport, PolicyError> {
        let kept = distinct_kept(kept, self.total())?;
        let mass = select::mass_retained_with(&self.eval, &self.row_sum, &kept)?;
        let errors = self.output_errors(&kept);
        Ok(summarize(
            &mass,
            errors.as_deref(),
            kept.len(),
            self.total(),
        ))
    }
}

/// The exact attention output `o_t` of every step, computed once (`O(S T d)`) so that the
/// output error of many kept sets and de-quantized values can be measured against it, each in
/// `O(S |kept| d)`: "which lever first" measures both levers by it (one bit fewer changes
/// `v_hat`, fewer tokens change `kept`).
#[derive(Debug)]
pub struct Outputs {
    /// Built without de-quantized values; their slot is emptied (they come with each call).
    ev: Evaluator,
}

impl Outputs {
    /// The outputs of every row of `attention` (`S x T`) with `values` (`T x d`), both finite.
    pub fn new(attention: &Matrix, values: &Matrix) -> Result<Self, PolicyError> {
        let mut ev = Evaluator::new(attention, Some(values), None, attention.rows())?;
        // (the exact values as f64 are not needed again: at 32,768 x 128 they are 32 MiB)
        if let Some(ctx) = ev.values.as_mut() {
            ctx.hat = Vec::new();
        }
        Ok(Self { ev })
    }

    /// The mean over steps of [`output_error`] for `kept` with de-quantized values
    /// `values_hat` (`T x d`, finite): the same figure, up to `f64` summation order.
    ///
    /// ```
    /// use kvlab_core::{Matrix, policy::Outputs};
    /// let a = Matrix::new(1, 3, vec![0.5, 0.25, 0.25]).unwrap();
    /// let v = Matrix::new(3, 1, vec![2.0, 4.0, 0.0]).unwrap();
    /// let out = Outputs::new(&a, &v).unwrap();
    /// assert!((out.mean_error(&v, &[0, 1]).unwrap() - 1.0 / 3.0).abs() < 1e-12);
    /// ```
    pub fn mean_error(&self, values_hat: &Matrix, kept: &[usize]) -> Result<f64, PolicyError> {
        let Some(ctx) = self.ev.values.as_ref() else {
            return Ok(0.0);
        };
        let total = self.ev.total();
        if values_hat.rows() != total || values_hat.cols() != ctx.d {
            return Err(PolicyError::ValuesHatShape {
                rows: values_hat.rows(),
                cols: values_hat.cols(),
                expected_rows: total,
                expected_cols: ctx.d,
            });
        }
        check_finite_values(values_hat, "de-quantized values")?;
        let kept = distinct_kept(kept, total)?;
        let rows = self.ev.eval.rows();
        let (mut num, mut m) = (vec![0f64; rows * ctx.d], vec![0f64; rows]);
        // Only the kept rows, as f64, in kept order (`packed`).
        let mut values = Vec::with_capacity(kept.len() * ctx.d);
        for &i in &kept {
            values.extend(
                chunk(values_hat.data(), i, ctx.d)
                    .iter()
                    .map(|&x| f64::from(x)),
            );
        }
        let eval_t = &self.ev.eval_t;
        accumulate(eval_t, rows, &values, true, ctx.d, &kept, &mut num, &mut m);
        let e = Evaluator::errors_from(ctx, &num, &m);
        Ok(e.iter().sum::<f64>() / e.len().max(1) as f64)
    }
}

/// `num / den`, with `0 / 0 = 0` and `x / 0 = +inf` for `x > 0`.
fn relative(num: f64, den: f64) -> f64 {
    if den > 0.0 {
        num / den
    } else if num == 0.0 {
        0.0
    } else {
        f64::INFINITY
    }
}

/// `kept` validated against `0..total`, de-duplicated and ascending; an error when empty.
fn distinct_kept(kept: &[usize], total: usize) -> Result<Vec<usize>, PolicyError> {
    let mut mask = vec![false; total];
    for &i in kept {
        match mask.get_mut(i) {
            Some(x) => *x = true,
            None => return Err(SelectError::TokenIndex { index: i, total }.into()),
        }
    }
    let out: Vec<usize> = mask
        .iter()
        .enumerate()
        .filter_map(|(i, &k)| k.then_some(i))
        .collect();
    if out.is_empty() {
        return Err(SelectError::Kept { kept: 0, total }.into());
    }
    Ok(out)
}

fn summarize(mass: &[f64], errors: Option<&[f64]>, kept: usize, total: usize) -> QualityReport {
    let n = mass.len().max(1) as f64;
    QualityReport {
        mass_mean: mass.iter().sum::<f64>() / n,
        mass_worst: mass.iter().copied().fold(f64::INFINITY, f64::min),
        output_error_mean: errors.map(|e| e.iter().sum::<f64>() / e.len().max(1) as f64),
        output_error_worst: errors.map(|e| e.iter().copied().fold(0.0, f64::max)),
        r_token: total as f64 / kept.max(1) as f64,
        kept,
        eval_rows: mass.len(),
    }
}

/// Relative L2 error of the attention output per row of `attention` (`E x T`) when only `kept`
/// tokens remain, with de-quantized values `values_hat` (`None` = `values`, no quantization).
///
/// For each row `t`, with `s_t = sum_i a[t][i]` and `m_t = sum_{i in kept} a[t][i]`:
///
/// ```text
/// o_t     = sum_i         a[t][i] v_i     / s_t      (0 when s_t = 0)
/// o_hat_t = sum_{i in kept} a[t][i] v_hat_i / m_t    (0 when m_t = 0: nothing kept is attended)
/// e_t     = ||o_t - o_hat_t||_2 / ||o_t||_2          (0/0 = 0; x/0 = +inf for x > 0)
/// ```
///
/// Both outputs are normalised by their own mass, so for softmax rows (`s_t = 1`) `o_t` is the
/// note's `sum_i a[t][i] v_i`, and rows that do not sum exactly to 1 (f32 round-off, captures
/// that are not normalised) count no error when every token is kept with exact values: then
/// `e_t = 0` exactly. When `m_t = 0` the error is 1 (nothing of the output survives).
/// Accumulated in `f64`.
///
/// `values` and `values_hat` are `T x d`, finite; `kept` holds token indices in `0..T`
/// (duplicates count once), at least one. Runs in `O(E |kept| d + E T d)`.
///
/// ```
/// use kvlab_core::{Matrix, policy::output_error};
/// let a = Matrix::new(1, 3, vec![0.5, 0.25, 0.25]).unwrap();
/// let v = Matrix::new(3, 1, vec![2.0, 4.0, 0.0]).unwrap();
/// // o = 2; keep {0, 1}: o_hat = (1 + 1) / 0.75 = 8/3; e = (2/3) / 2 = 1/3
/// let e = output_error(&a, &v, None, &[0, 1]).unwrap();
/// assert!((e[0] - 1.0 / 3.0).abs() < 1e-12);
/// ```
pub fn output_error(
    attention: &Matrix,
    values: &Matrix,
    values_hat: Option<&Matrix>,
    kept: &[usize],
) -> Result<Vec<f64>, PolicyError> {
    let ev = Evaluator::new(attention, Some(values), values_hat, attention.rows())?;
    let kept = distinct_kept(kept, ev.total())?;
    Ok(ev.output_errors(&kept).unwrap_or_default())
}

/// Quality of the kept set `kept` on the evaluation rows of `attention` (`S x T`): the future
/// rows `[observed_rows, S)` when `observed_rows < S`, else all rows. Mass retained per row by
/// [`select::mass_retained`], output error per row by [`output_error`] when `values` (`T x d`)
/// are given (`values_hat`: their de-quantized form, `None` = exact), summarised as mean and
/// worst row.
///
/// Errors: `observed_rows` outside `1..=S`, non-finite inputs, shape mismatches, a kept index
/// outside `0..T`, an empty kept set.
///
/// ```
/// use kvlab_core::{Matrix, policy::quality};
/// let a = Matrix::new(3, 4, vec![0.60, 0.20, 0.10, 0.10,
///                                0.70, 0.10, 0.10, 0.10,
///                                0.05, 0.05, 0.10, 0.80]).unwrap();
/// let q = quality(&a, None, None, &[0, 3], 3).unwrap();
/// // per-row mass [0.70, 0.80, 0.85]
/// assert!((q.mass_mean - 2.35 / 3.0).abs() < 1e-6 && (q.mass_worst - 0.70).abs() < 1e-6);
/// assert_eq!((q.r_token, q.kept, q.eval_rows), (2.0, 2, 3));
/// ```
pub fn quality(
    attention: &Matrix,
    values: Option<&Matrix>,
    values_hat: Option<&Matrix>,
    kept: &[usize],
    observed_rows: usize,
) -> Result<QualityReport, PolicyError> {
    Evaluator::new(attention, values, values_hat, observed_rows)?.report(kept)
}

/// Every policy of `policies` on the same data, budget and split: [`select_with`] then
/// [`quality`] on the evaluation rows. One entry per policy, in order; an invalid shared input
/// (observed rows, shapes, non-finite values) makes every entry that error. The exact outputs
/// are computed once for all policies.
///
/// ```
/// use kvlab_core::{Matrix, policy::{compare, Policy}};
/// let a = Matrix::new(3, 4, vec![0.60, 0.20, 0.10, 0.10,
///                                0.70, 0.10, 0.10, 0.10,
///                                0.05, 0.05, 0.10, 0.80]).unwrap();
/// let table = compare(&[Policy::H2oSum, Policy::Oracle], &a, None, None, 2, 0, 2);
/// let oracle = table[1].1.as_ref().unwrap();
/// assert!((oracle.mass_mean - 0.90).abs() < 1e-6); // tokens {2, 3} of row 2
/// ```
pub fn compare(
    policies: &[Policy],
    attention: &Matrix,
    values: Option<&Matrix>,
    values_hat: Option<&Matrix>,
    budget: usize,
    recent: usize,
    observed_rows: usize,
) -> Vec<(Policy, Result<QualityReport, PolicyError>)> {
    compare_selections(
        policies,
        attention,
        values,
        values_hat,
        budget,
        recent,
        observed_rows,
    )
    .into_iter()
    .map(|(p, r)| (p, r.map(|(_, q)| q)))
    .collect()
}

/// One policy's kept set and its quality, or why it could not run.
pub type PolicyOutcome = Result<(Selection, QualityReport), PolicyError>;

/// [`compare`], also returning each policy's kept set (selected once, for both the report and
/// the caller's drawing).
pub fn compare_selections(
    policies: &[Policy],
    attention: &Matrix,
    values: Option<&Matrix>,
    values_hat: Option<&Matrix>,
    budget: usize,
    recent: usize,
    observed_rows: usize,
) -> Vec<(Policy, PolicyOutcome)> {
    match Evaluator::new(attention, values, values_hat, observed_rows) {
        Err(e) => policies.iter().map(|p| (*p, Err(e.clone()))).collect(),
        Ok(ev) => {
            let scores = PolicyScores::new(policies, attention, observed_rows, None);
            compare_prepared(&ev, &scores, budget, recent)
        }
    }
}

/// [`compare_selections`] with the evaluation and the scores prepared (on the same attention
/// and observation point): only the selections at `budget` and `recent` and their reports are
/// computed.
pub fn compare_prepared(
    ev: &Evaluator,
    scores: &PolicyScores,
    budget: usize,
    recent: usize,
) -> Vec<(Policy, PolicyOutcome)> {
    let total = ev.total();
    scores
        .entries
        .iter()
        .map(|e| {
            let r = e
                .select(total, budget, recent)
                .and_then(|s| ev.report(&s.kept).map(|q| (s, q)));
            (e.policy, r)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Sweep

/// One point of a trade-off curve: a budget and the quality there.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SweepPoint {
    /// Budget `B` (tokens kept).
    pub budget: usize,
    /// Quality at `B` (holds `r_token` and `kept`).
    pub quality: QualityReport,
    /// `R_overall` of the whole model cache at this point, filled by [`annotate_r_overall`];
    /// `None` until then.
    pub r_overall: Option<f64>,
}

/// A budget a policy could not be evaluated at, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedBudget {
    /// The budget.
    pub budget: usize,
    /// The error message (e.g. StreamingLLM's sinks above the budget).
    pub reason: String,
}

/// One policy's trade-off curve over the swept budgets.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepCurve {
    /// The policy.
    pub policy: Policy,
    /// Tokens `T` of the attention (for the byte accounting).
    pub t_total: usize,
    /// Points in ascending budget order (one per valid budget given).
    pub points: Vec<SweepPoint>,
    /// Budgets this policy cannot take (all of them when the policy itself is invalid, e.g.
    /// the oracle without future rows).
    pub skipped: Vec<SkippedBudget>,
}

/// Quality of every policy at every budget, for a trade-off chart (`R_token` or `R_overall` on
/// x, quality on y, one curve per policy). The same figures as [`select_with`] then [`quality`]
/// for each pair, up to `f64` summation order (the tests hold them to `1e-9` relative).
///
/// Fast: each policy's scores are computed once and sorted once (the kept sets are nested in
/// `B`: `kept(B)` is the first `B` tokens of one admission order), then budgets are visited in
/// ascending order, adding only the newly admitted tokens to per-row running sums
/// `sum_kept a[t][i]` and `sum_kept a[t][i] v_hat_i`. Cost: `O(P (S T + T log T + E B_max d))`
/// for `P` policies, `E` evaluation rows, values of width `d`, plus `O(E T d)` once for the
/// exact outputs.
///
/// Errors (the whole sweep): `observed_rows` outside `1..=S`, a budget outside `1..=T`, shapes
/// or non-finite values. A policy that is invalid for some budgets (StreamingLLM with
/// `sinks > B`) or for all (the oracle with `S_o = S`, a SnapKV window above `S_o`) lists them
/// in [`SweepCurve::skipped`].
pub fn sweep(
    policies: &[Policy],
    budgets: &[usize],
    attention: &Matrix,
    values: Option<&Matrix>,
    values_hat: Option<&Matrix>,
    recent: usize,
    observed_rows: usize,
) -> Result<Vec<SweepCurve>, PolicyError> {
    let ev = Evaluator::new(attention, values, values_hat, observed_rows)?;
    let scores = PolicyScores::new(policies, attention, observed_rows, None);
    sweep_prepared(&ev, &scores, budgets, recent)
}

/// [`sweep`] with the evaluation and the scores prepared (on the same attention and
/// observation point).
pub fn sweep_prepared(
    ev: &Evaluator,
    scores: &PolicyScores,
    budgets: &[usize],
    recent: usize,
) -> Result<Vec<SweepCurve>, PolicyError> {
    let total = ev.total();
    if let Some(&budget) = budgets.iter().find(|&&b| b == 0 || b > total) {
        return Err(SelectError::Budget { budget, total }.into());
    }
    let mut sorted = budgets.to_vec();
    sorted.sort_unstable();
    Ok(scores
        .entries
        .iter()
        .map(|e| sweep_one(ev, e, &sorted, recent))
        .collect())
}

fn sweep_one(
    ev: &Evaluator,
    prepared: &PreparedPolicy,
    sorted_budgets: &[usize],
    recent: usize,
) -> SweepCurve {
    let policy = &prepared.policy;
    let total = ev.total();
    let mut curve = SweepCurve {
        policy: *policy,
        t_total: total,
        points: Vec::new(),
        skipped: Vec::new(),
    };
    if let Err(e) = &prepared.scores {
        let reason = e.to_string();
        curve.skipped = sorted_budgets
            .iter()
            .map(|&budget| SkippedBudget {
                budget,
                reason: reason.clone(),
            })
            .collect();
        return curve;
    }
    let order = admission_order_ranked(policy, &prepared.ranked, total, recent);
    let rows = ev.eval.rows();
    let d = ev.values.as_ref().map_or(0, |c| c.d);
    let mut num = vec![0f64; rows * d];
    let mut m = vec![0f64; rows];
    let mut admitted = 0usize;
    for &budget in sorted_budgets {
        if let Policy::StreamingLlm { sinks } = *policy {
            if sinks > budget {
                curve.skipped.push(SkippedBudget {
                    budget,
                    reason: SelectError::Sinks { sinks, budget }.to_string(),
                });
                continue;
            }
        }
        let new = order.get(admitted..budget).unwrap_or(&[]);
        match &ev.values {
            Some(ctx) => accumulate(&ev.eval_t, rows, &ctx.hat, false, d, new, &mut num, &mut m),
            None => accumulate_mass(&ev.eval_t, rows, new, &mut m),
        }
        admitted = budget.max(admitted);
        let mass: Vec<f64> = m
            .iter()
            .zip(&ev.row_sum)
            .map(|(&k, &s)| if s == 0.0 { 1.0 } else { k / s })
            .collect();
        let errors = ev
            .values
            .as_ref()
            .map(|ctx| Evaluator::errors_from(ctx, &num, &m));
        curve.points.push(SweepPoint {
            budget,
            quality: summarize(&mass, errors.as_deref(), budget, total),
            r_overall: None,
        });
    }
    curve
}

/// Fills [`SweepPoint::r_overall`] of every point: the whole-model `R_overall` (note §4) of
/// keeping `kept` of `t_total` tokens under `template` (bits, residual, batch, index kind),
/// with each policy's own score state and index ([`Policy::compression`]) and the selection
/// copies of `scope` ([`scoped_breakdown`]).
pub fn annotate_r_overall(
    curves: &mut [SweepCurve],
    model: &ModelConfig,
    template: &Compression,
    scope: SelectionScope,
) -> Result<(), PolicyError> {
    for c in curves.iter_mut() {
        for p in c.points.iter_mut() {
            let comp = c
                .policy
                .compression(template, c.t_total as u64, p.quality.kept as u64);
            p.r_overall = Some(scoped_breakdown(model, &comp, scope)?.breakdown.r_overall);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// GQA: per-head vs shared selection

/// How the scores of the query heads of a group are combined into one shared score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Aggregate {
    /// `score_i = (1/h) sum_heads score_i^(head)` (ranks like `Sum`).
    #[default]
    Mean,
    /// `score_i = max_heads score_i^(head)`: keep what any head needs most.
    Max,
    /// `score_i = sum_heads score_i^(head)`.
    Sum,
}

fn check_heads(heads: &[Matrix]) -> Result<(), PolicyError> {
    let first = heads.first().ok_or(PolicyError::NoHeads)?;
    for (head, h) in heads.iter().enumerate() {
        if h.rows() != first.rows() || h.cols() != first.cols() {
            return Err(PolicyError::HeadShape {
                head,
                rows: h.rows(),
                cols: h.cols(),
                expected_rows: first.rows(),
                expected_cols: first.cols(),
            });
        }
    }
    Ok(())
}

/// One selection per query head (SnapKV's reference): [`select_with`] on each head's `S x T`
/// attention. All heads must share one shape. Memory: the KV head then holds one copy per query
/// head ([`SelectionScope::PerQueryHead`]).
pub fn per_head_selection(
    heads: &[Matrix],
    budget: usize,
    recent: usize,
    policy: &Policy,
    observed_rows: usize,
) -> Result<Vec<Selection>, PolicyError> {
    check_heads(heads)?;
    heads
        .iter()
        .map(|h| select_with(policy, h, budget, recent, observed_rows))
        .collect()
}

/// One selection shared by a group of query heads that read the same KV head (GQA): each head's
/// [`policy_scores`], combined token by token with `aggregate` in `f64`, then math-spec §3's rule
/// ([`select::heavy_plus_recent`]) with the policy's recent window. StreamingLLM ignores the scores and
/// gives [`select::streaming_llm`]. `|kept| == B`. Memory: one copy per KV head
/// ([`SelectionScope::PerKvHead`]).
///
/// ```
/// use kvlab_core::{Matrix, policy::{shared_selection, Aggregate, Policy}};
/// let h1 = Matrix::new(1, 3, vec![0.7, 0.2, 0.1]).unwrap();
/// let h2 = Matrix::new(1, 3, vec![0.1, 0.3, 0.6]).unwrap();
/// // mean [0.4, 0.25, 0.35] -> {0}; max [0.7, 0.3, 0.6] -> {0}; each top-1 differs
/// let s = shared_selection(&[h1, h2], 1, 0, &Policy::Tova, Aggregate::Mean, 1).unwrap();
/// assert_eq!(s.kept, vec![0]);
/// ```
pub fn shared_selection(
    heads: &[Matrix],
    budget: usize,
    recent: usize,
    policy: &Policy,
    aggregate: Aggregate,
    observed_rows: usize,
) -> Result<Selection, PolicyError> {
    check_heads(heads)?;
    let mut per_head = Vec::with_capacity(heads.len());
    for h in heads {
        match policy_scores(policy, h, observed_rows)? {
            Some(s) => per_head.push(s),
            None => {
                let total = h.cols();
                return match policy {
                    Policy::StreamingLlm { sinks } => {
                        Ok(select::streaming_llm(total, budget, *sinks)?)
                    }
                    Policy::H2oSum
                    | Policy::H2oMean
                    | Policy::SnapKv { .. }
                    | Policy::Tova
                    | Policy::Random { .. }
                    | Policy::Oracle => Ok(select::heavy_plus_recent(
                        &vec![0.0; total],
                        budget,
                        recent,
                    )?),
                };
            }
        }
    }
    let total = heads.first().map_or(0, Matrix::cols);
    let n = per_head.len().max(1) as f64;
    let combined: Vec<f32> = (0..total)
        .map(|i| {
            let xs = per_head
                .iter()
                .map(|s| f64::from(s.get(i).copied().unwrap_or(0.0)));
            let v = match aggregate {
                Aggregate::Sum => xs.sum::<f64>(),
                Aggregate::Mean => xs.sum::<f64>() / n,
                Aggregate::Max => xs.fold(f64::NEG_INFINITY, f64::max),
            };
            v as f32
        })
        .collect();
    Ok(select::heavy_plus_recent(
        &combined,
        budget,
        effective_recent(policy, recent),
    )?)
}

/// Which heads share one selection, for the memory accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SelectionScope {
    /// One selection per query head (SnapKV's reference): a KV head serving `g` query heads is
    /// gathered into `g` different kept sets, so the cache holds `g = n_heads / n_kv_heads`
    /// copies of K/V.
    PerQueryHead,
    /// One selection per KV head, shared by its group of query heads ([`shared_selection`]).
    #[default]
    PerKvHead,
    /// One selection per layer, shared by every head.
    PerLayer,
}

/// The memory consequence of a [`SelectionScope`] for one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SelectionMemory {
    /// The scope.
    pub scope: SelectionScope,
    /// Independent selections over the whole model, each with its own index and score state:
    /// `L x n_heads`, `L x n_kv` or `L` (the value for [`Compression::selection_copies`]).
    pub selection_copies: u64,
    /// Copies of each KV head's K/V bytes: `n_heads / n_kv` per query head, else 1.
    pub kv_copy_factor: u64,
    /// KV streams per layer `n_kv`: `n_kv_heads`, or 1 for MLA's shared latent.
    pub n_kv: u64,
}

/// How many selection copies and K/V copies `scope` costs on `model` (see
/// [`SelectionMemory`]). For MLA the latent is one stream per layer, so per-query-head
/// selection copies it `n_heads` times.
///
/// Errors: an invalid model (as [`budget::breakdown`](crate::budget::breakdown) checks it), or
/// `n_heads` not a multiple of the KV streams.
///
/// ```
/// use kvlab_core::{budget::ModelConfig, policy::{selection_memory, SelectionScope}};
/// let llama3 = ModelConfig::presets().into_iter().find(|m| m.name == "Llama-3-8B").unwrap();
/// let m = selection_memory(&llama3, SelectionScope::PerQueryHead).unwrap();
/// assert_eq!((m.kv_copy_factor, m.selection_copies), (4, 32 * 32)); // 32 / 8 heads
/// ```
pub fn selection_memory(
    model: &ModelConfig,
    scope: SelectionScope,
) -> Result<SelectionMemory, PolicyError> {
    breakdown(model, &Compression::none(1))?;
    let n_kv = if model.mla_latent.is_some() {
        1
    } else {
        model.n_kv_heads
    };
    if n_kv == 0 || model.n_heads % n_kv != 0 {
        return Err(PolicyError::HeadGroups {
            n_heads: model.n_heads,
            n_kv_heads: n_kv,
        });
    }
    let (per_layer, factor) = match scope {
        SelectionScope::PerQueryHead => (model.n_heads, model.n_heads / n_kv),
        SelectionScope::PerKvHead => (n_kv, 1),
        SelectionScope::PerLayer => (1, 1),
    };
    Ok(SelectionMemory {
        scope,
        selection_copies: model.layers.saturating_mul(per_layer),
        kv_copy_factor: factor,
        n_kv,
    })
}

/// A [`Breakdown`] with the selection scope's copies counted, and the copies.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ScopedBreakdown {
    /// Copies of the scope.
    pub memory: SelectionMemory,
    /// The breakdown: `selection_copies` from the scope; code, fp-kept, scale and zero-point
    /// bytes (and `bytes_token_*`) multiplied by `kv_copy_factor`; `m_meta`, `m_final` and
    /// `r_overall = m_fp / m_final` recomputed. `m_fp` stays the uncompressed single-copy cache,
    /// and `r_quant_with_meta` is per copy (copies do not change how well a copy quantizes).
    pub breakdown: Breakdown,
}

/// [`budget::breakdown`](crate::budget::breakdown) of `compression` on `model` with the
/// selection copies and K/V copies of `scope` (`compression.selection_copies` is replaced).
///
/// ```
/// use kvlab_core::budget::{Compression, ModelConfig};
/// use kvlab_core::policy::{scoped_breakdown, SelectionScope};
/// let llama3 = ModelConfig::presets().into_iter().find(|m| m.name == "Llama-3-8B").unwrap();
/// let c = Compression { t_kept: 1024, ..Compression::none(4096) };
/// let shared = scoped_breakdown(&llama3, &c, SelectionScope::PerKvHead).unwrap();
/// let per_q = scoped_breakdown(&llama3, &c, SelectionScope::PerQueryHead).unwrap();
/// assert_eq!(shared.breakdown.r_overall, 4.0);
/// assert_eq!(per_q.breakdown.r_overall, 1.0); // 4 copies of each KV head eat the 4x
/// ```
pub fn scoped_breakdown(
    model: &ModelConfig,
    compression: &Compression,
    scope: SelectionScope,
) -> Result<ScopedBreakdown, PolicyError> {
    let memory = selection_memory(model, scope)?;
    let mut b = breakdown(
        model,
        &Compression {
            selection_copies: memory.selection_copies,
            ..*compression
        },
    )?;
    let f = memory.kv_copy_factor;
    let mul = |x: u64| byte_count(u128::from(x) * u128::from(f));
    b.m_codes = mul(b.m_codes)?;
    b.m_fp_kept = mul(b.m_fp_kept)?;
    b.m_scales = mul(b.m_scales)?;
    b.m_zero_points = mul(b.m_zero_points)?;
    b.bytes_token_codes *= f as f64;
    b.bytes_token_quant *= f as f64;
    b.m_meta = byte_sum(&[b.m_scales, b.m_zero_points, b.m_score_state])?;
    b.m_final = byte_sum(&[b.m_codes, b.m_fp_kept, b.m_meta, b.m_index])?;
    b.r_overall = b.m_fp as f64 / b.m_final.max(1) as f64;
    Ok(ScopedBreakdown {
        memory,
        breakdown: b,
    })
}

/// How many tokens of context fit in `memory_bytes` when `scope`'s copies are counted: the
/// search of [`budget::tokens_that_fit_keeping`](crate::budget::tokens_that_fit_keeping) over
/// [`scoped_breakdown`]'s `M_KV,final`, so that at the context it reports the scoped cache
/// (every copy of K/V, every copy's scores and index) fits, and one token more does not.
///
/// ```
/// use kvlab_core::budget::{Compression, Keep, ModelConfig};
/// use kvlab_core::policy::{scoped_breakdown, scoped_tokens_that_fit, SelectionScope};
/// let llama = ModelConfig::presets().into_iter().find(|m| m.name == "Llama-3-8B").unwrap();
/// let c = Compression { t_kept: 1024, ..Compression::none(4096) };
/// let fit = scoped_tokens_that_fit(&llama, &c, 8 << 30, Keep::Fraction, SelectionScope::PerQueryHead).unwrap();
/// let at = |t: u64| Compression { t_total: t, t_kept: (t as f64 / 4.0).ceil() as u64, ..c };
/// let m = |t| scoped_breakdown(&llama, &at(t), SelectionScope::PerQueryHead).unwrap().breakdown.m_final;
/// assert!(m(fit.tokens) <= 8 << 30 && m(fit.tokens + 1) > 8 << 30);
/// ```
pub fn scoped_tokens_that_fit(
    model: &ModelConfig,
    compression: &Compression,
    memory_bytes: u64,
    keep: crate::budget::Keep,
    scope: SelectionScope,
) -> Result<crate::budget::Fit, PolicyError> {
    crate::budget::fit_by(
        model,
        compression,
        memory_bytes,
        keep,
        |c| match scoped_breakdown(model, c, scope) {
            Ok(s) => Ok(Some(s.breakdown.m_final)),
            Err(PolicyError::Budget(BudgetError::Overflow)) => Ok(None),
            Err(e) => Err(e),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Matrix {
        Matrix::new(
            3,
            4,
            vec![
                0.60, 0.20, 0.10, 0.10, 0.70, 0.10, 0.10, 0.10, 0.05, 0.05, 0.10, 0.80,
            ],
        )
        .unwrap()
    }

    #[test]
    fn admission_order_matches_select_for_every_budget() {
        let a = spec();
        for p in Policy::defaults(1) {
            for r in 0..5 {
                let obs = if p == Policy::Oracle { 2 } else { 3 };
                let scores = policy_scores(&p, &a, obs).unwrap();
                let order = admission_order(&p, scores.as_deref(), 4, r);
                for b in 1..=4 {
                    let Ok(s) = select_with(&p, &a, b, r, obs) else {
                        continue;
                    };
                    let mut first: Vec<usize> = order[..b].to_vec();
                    first.sort();
                    assert_eq!(first, s.kept, "{p} b={b} r={r}");
                }
            }
        }
    }

    #[test]
    fn rank_is_the_comparison_sort() {
        let scores = [0.5, -0.0, 0.0, 2.0, 0.5, f32::NEG_INFINITY, 2.0, 0.0, -1.0];
        for total in [0, 1, 5, scores.len(), scores.len() + 3] {
            let score = |i: usize| scores.get(i).copied().unwrap_or(f32::NEG_INFINITY);
            let mut want: Vec<usize> = (0..total).collect();
            want.sort_by(|&a, &b| score(b).total_cmp(&score(a)).then(a.cmp(&b)));
            assert_eq!(rank(&scores, total), want);
        }
        assert_eq!(rank(&scores, 4), vec![3, 0, 2, 1]);
    }

    #[test]
    fn random_scores_are_a_permutation() {
        let s = random_scores(42, 100);
        let mut sorted: Vec<u32> = s.iter().map(|&x| x as u32).collect();
        sorted.sort();
        assert_eq!(sorted, (1..=100).collect::<Vec<u32>>());
        assert_eq!(random_scores(42, 100), s);
        assert_ne!(random_scores(43, 100), s);
        assert!(random_scores(1, 0).is_empty());
    }

    #[test]
    fn relative_defines_zero_over_zero() {
        assert_eq!(relative(0.0, 0.0), 0.0);
        assert_eq!(relative(1.0, 0.0), f64::INFINITY);
        assert_eq!(relative(1.0, 2.0), 0.5);
    }
}

/// The fit search reports a context whose own scoped `M_KV,final` fits the memory and one
/// token more does not, for every preset and scope (before, the search counted one copy of
/// K/V whatever the scope: Llama-3-70B per query head in 80 GiB reported 2,796,192 tokens
/// whose cache was 453 GiB).
#[cfg(test)]
mod fit_tests {
    use super::*;
    use crate::budget::{FitKind, Keep, QuantAccounting};
    use crate::quant::{Granularity, MetaDtype, Scheme};
    use proptest::prelude::*;

    const SCOPES: [SelectionScope; 3] = [
        SelectionScope::PerQueryHead,
        SelectionScope::PerKvHead,
        SelectionScope::PerLayer,
    ];

    fn m_final(model: &ModelConfig, c: &Compression, scope: SelectionScope) -> u64 {
        scoped_breakdown(model, c, scope).unwrap().breakdown.m_final
    }

    /// `c` at context `t` as the search counts it.
    fn at(c: &Compression, keep: Keep, t: u64) -> Compression {
        let kept = match keep {
            Keep::Fraction => (t as f64 * c.t_kept as f64 / c.t_total as f64).ceil() as u64,
            Keep::Tokens => c.t_kept,
        };
        Compression {
            t_total: t,
            t_kept: kept.clamp(1, t),
            ..*c
        }
    }

    #[test]
    fn llama_3_70b_per_query_head_fits_what_its_total_says() {
        let model = ModelConfig::presets()
            .into_iter()
            .find(|m| m.name.starts_with("Llama-3") && m.name.contains("70B"))
            .expect("a 70B preset");
        let c = Compression {
            t_kept: 32_768,
            score_state_bytes: 4,
            selection_copies: 1,
            ..Compression::none(131_072)
        };
        let mem = 80u64 << 30;
        let scope = SelectionScope::PerQueryHead;
        let fit = scoped_tokens_that_fit(&model, &c, mem, Keep::Fraction, scope).unwrap();
        assert_eq!(fit.kind, FitKind::Tokens);
        assert!(m_final(&model, &at(&c, Keep::Fraction, fit.tokens), scope) <= mem);
        assert!(m_final(&model, &at(&c, Keep::Fraction, fit.tokens + 1), scope) > mem);
        // one copy's search says more fits than the copies leave room for
        let one_copy =
            crate::budget::tokens_that_fit_keeping(&model, &c, mem, Keep::Fraction).unwrap();
        assert!(
            one_copy.tokens > 4 * fit.tokens,
            "{one_copy:?} against {fit:?}"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn the_reported_context_fits_and_one_more_token_does_not(
            preset in 0usize..64,
            scope in 0usize..3,
            bits in prop::option::of(1u8..=8),
            keep_tokens in any::<bool>(),
            kept_share in 1u64..=100,
            score in prop::sample::select(vec![0u64, 4]),
            index in prop::sample::select(vec![IndexKind::None, IndexKind::List, IndexKind::Mask]),
            gib in 1u64..=160,
            batch in 1u64..=4,
        ) {
            let presets = ModelConfig::presets();
            let model = &presets[preset % presets.len()];
            let scope = SCOPES[scope];
            let q = bits.map(|bits| QuantAccounting {
                bits,
                scheme: Scheme::Asymmetric,
                granularity: Granularity::PerChannel,
                group_size: Some(32),
                meta: MetaDtype::F16,
            });
            let t = 131_072;
            let c = Compression {
                t_kept: (t * kept_share / 100).max(1),
                batch,
                k: q,
                v: q,
                index,
                score_state_bytes: score,
                ..Compression::none(t)
            };
            let keep = if keep_tokens { Keep::Tokens } else { Keep::Fraction };
            let mem = gib << 30;
            let fit = scoped_tokens_that_fit(model, &c, mem, keep, scope).unwrap();
            let m = |t: u64| m_final(model, &at(&c, keep, t), scope);
            match fit.kind {
                FitKind::Tokens if fit.tokens == 0 => prop_assert!(m(1) > mem),
                FitKind::Tokens => {
                    prop_assert!(m(fit.tokens) <= mem, "{}: {} tokens", model.name, fit.tokens);
                    prop_assert!(m(fit.tokens + 1) > mem, "{}: {} + 1 tokens", model.name, fit.tokens);
                }
                // the cache stops growing: what it holds at its largest fits
                FitKind::AnyLength | FitKind::Capped | FitKind::Beyond => {
                    prop_assert!(m(fit.tokens) <= mem);
                }
            }
        }
    }
}
