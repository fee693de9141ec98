//! Token selection: keep fewer tokens (note §3, math-spec §3).
//!
//! * cumulative scores `score_i = sum_t a[t][i]` (note §3.1);
//! * H2O: `K = TopK(score, B - r) ∪ {T-r, ..., T-1}` (note §3.1);
//! * SnapKV: the same rule on observation-window scores `sum_{t in W_obs} a[t][i]`, optionally
//!   pooled (note §3.2);
//! * StreamingLLM: the first `s` sink tokens plus the last `B - s`;
//! * `R_token = T_total / T_kept` (note §3.3) and the quality of a selection (attention mass
//!   retained per step).
//!
//! Tokens are 0-based here: the note's recent window `{T-r+1, ..., T}` is `[T-r, T)`.
//! Ties in score go to the lower token index, so every selection is deterministic.

use crate::tensor::{all_finite, first_non_finite};
use crate::Matrix;
use thiserror::Error;

/// Why a selection was refused.
///
/// Serialized for the page (which words the ranges a learner can type past in its language) as
/// `{kind: "sinks", sinks, budget}` and so on.
#[derive(Debug, Clone, PartialEq, Error, serde::Serialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum SelectError {
    /// Budget outside `1..=T`. If unsure, start with `T/4`.
    #[error(
        "budget {budget} is out of range: must be between 1 and {total} (the number of tokens)"
    )]
    Budget {
        /// Budget asked for.
        budget: usize,
        /// Number of tokens `T`.
        total: usize,
    },
    /// There are no tokens to select from.
    #[error("no tokens: the score vector is empty (need at least 1 token)")]
    NoTokens,
    /// A score or attention weight is NaN or infinite.
    #[error("{what} at index {index} is {value}: scores must be finite")]
    NonFinite {
        /// What held the value ("score" or "attention weight").
        what: &'static str,
        /// Flat index of the first bad value.
        index: usize,
        /// The value.
        value: f32,
    },
    /// Observation window outside `1..=S`.
    #[error("observation window {window} is out of range: must be between 1 and {steps} (the number of attention rows)")]
    Window {
        /// Window asked for.
        window: usize,
        /// Number of attention rows `S`.
        steps: usize,
    },
    /// Pooling kernel even, zero, or wider than allowed.
    #[error("pooling kernel {kernel} is out of range: must be an odd number between 1 and {max}")]
    Kernel {
        /// Kernel asked for.
        kernel: usize,
        /// Largest allowed kernel.
        max: usize,
    },
    /// More sink tokens than the budget holds.
    #[error("sinks {sinks} is out of range: must be between 0 and {budget} (the budget B)")]
    Sinks {
        /// Sinks asked for.
        sinks: usize,
        /// The budget.
        budget: usize,
    },
    /// `compression_ratio` needs `0 < kept <= total`.
    #[error("kept {kept} is out of range: must be between 1 and {total} (the total tokens)")]
    Kept {
        /// Kept tokens.
        kept: usize,
        /// Total tokens.
        total: usize,
    },
    /// The kept set and the attention matrix disagree on `T`.
    #[error("token {index} is out of range: the attention has {total} tokens")]
    TokenIndex {
        /// The bad index.
        index: usize,
        /// `T`.
        total: usize,
    },
}

/// Why a token was kept: what the page colours it by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Role {
    /// In the recent window `[T-r, T)`.
    Recent,
    /// One of the top-scored older tokens (a heavy hitter).
    Heavy,
    /// An attention sink (StreamingLLM's first tokens).
    Sink,
}

/// A selection of tokens out of `T`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Selection {
    /// Kept token indices, ascending, `|kept| == min(B, T)`.
    pub kept: Vec<usize>,
    /// Dropped token indices, ascending; `kept ∪ dropped = 0..T`, disjoint.
    pub dropped: Vec<usize>,
    /// Why each kept token was kept, aligned with `kept`.
    pub roles: Vec<Role>,
}

impl Selection {
    /// Total number of tokens `T = |kept| + |dropped|`.
    pub fn total(&self) -> usize {
        self.kept.len() + self.dropped.len()
    }

    /// A keep-mask of length `T`.
    pub fn mask(&self) -> Vec<bool> {
        let mut m = vec![false; self.total()];
        for &i in &self.kept {
            if let Some(x) = m.get_mut(i) {
                *x = true;
            }
        }
        m
    }

    /// `R_token = T_total / T_kept` (note §3.3).
    pub fn r_token(&self) -> f64 {
        self.total() as f64 / self.kept.len().max(1) as f64
    }
}

/// Pooling of prefix scores before top-k (SnapKV), stride 1, same length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Pooling {
    /// No pooling.
    #[default]
    None,
    /// Average over an odd `kernel`; padding counts as zero (PyTorch's `avg_pool1d` default).
    Avg {
        /// Odd kernel width `k`.
        kernel: usize,
    },
    /// Maximum over an odd `kernel`; padding is ignored.
    Max {
        /// Odd kernel width `k`.
        kernel: usize,
    },
}

/// `score_i = sum_t a[t][i]` over all rows of `attention` (note §3.1), summed in `f64`.
///
/// ```
/// use kvlab_core::{Matrix, select::cumulative_scores};
/// let a = Matrix::new(3, 4, vec![0.60, 0.20, 0.10, 0.10,
///                                0.70, 0.10, 0.10, 0.10,
///                                0.05, 0.05, 0.10, 0.80]).unwrap();
/// let s = cumulative_scores(&a);
/// let want = [1.35, 0.35, 0.30, 1.00];
/// for (x, w) in s.iter().zip(want) { assert!((x - w).abs() < 1e-6); }
/// ```
pub fn cumulative_scores(attention: &Matrix) -> Vec<f32> {
    column_sums(attention, 0..attention.rows())
}

/// `sum_{t in rows} a[t][i]` for every column `i`: each column summed in `f64` in row order
/// (row `rows.start` first), then rounded to `f32`. Rows past the end of `attention` are ignored.
///
/// Non-finite weights are not checked: a column holding one sums to NaN or an infinity.
pub fn column_sums(attention: &Matrix, rows: std::ops::Range<usize>) -> Vec<f32> {
    let cols = attention.cols();
    let data = attention.data();
    let end = rows.end.min(attention.rows());
    let start = rows.start.min(end);
    let mut acc = vec![0f64; cols];
    add_rows(&mut acc, &data[start * cols..end * cols]);
    acc.into_iter().map(|v| v as f32).collect()
}

/// Rows added to the accumulators in one pass over them (see [`add_rows`]).
const ROWS_PER_PASS: usize = 4;

/// `acc[j] += rows[t][j]` for every row `t` of `rows` (row-major, `acc.len()` columns), in `f64`
/// and in row order. Rows are taken [`ROWS_PER_PASS`] at a time,
/// `acc[j] = (((acc[j] + a0[j]) + a1[j]) + a2[j]) + a3[j]`, which performs the same additions
/// in the same order as one row at a time (so the same result, bit for bit) with fewer loads
/// and stores of `acc`; the loop over `j` is what the compiler vectorises (across columns,
/// which leaves each column's order alone).
fn add_rows(acc: &mut [f64], rows: &[f32]) {
    let cols = acc.len();
    if cols == 0 {
        return;
    }
    let mut groups = rows.chunks_exact(ROWS_PER_PASS * cols);
    for g in &mut groups {
        let (r0, rest) = g.split_at(cols);
        let (r1, rest) = rest.split_at(cols);
        let (r2, r3) = rest.split_at(cols);
        for ((((a, &x0), &x1), &x2), &x3) in acc.iter_mut().zip(r0).zip(r1).zip(r2).zip(r3) {
            *a = (((*a + f64::from(x0)) + f64::from(x1)) + f64::from(x2)) + f64::from(x3);
        }
    }
    for row in groups.remainder().chunks_exact(cols) {
        for (a, &x) in acc.iter_mut().zip(row) {
            *a += f64::from(x);
        }
    }
}

fn check_finite_scores(scores: &[f32]) -> Result<(), SelectError> {
    match first_non_finite(scores) {
        Some(index) => Err(SelectError::NonFinite {
            what: "score",
            index,
            value: scores[index],
        }),
        None => Ok(()),
    }
}

fn check_finite_attention(attention: &Matrix) -> Result<(), SelectError> {
    match attention.first_non_finite_index() {
        Some(index) => Err(SelectError::NonFinite {
            what: "attention weight",
            index,
            value: attention.data()[index],
        }),
        None => Ok(()),
    }
}

/// Tokens [`rank_key`] can tell apart (its index field has 32 bits).
pub const RANK_KEY_MAX_TOKENS: u64 = 1 << 32;

/// A `u32` whose unsigned order is [`f32::total_cmp`]'s order of `x`.
#[inline]
fn order_key(x: f32) -> u32 {
    let b = x.to_bits();
    // Negative: flip every bit (larger magnitude sorts lower); positive: set the sign bit.
    b ^ ((((b as i32) >> 31) as u32) | 0x8000_0000)
}

/// One `u64` per token whose ascending order is descending score ([`f32::total_cmp`]), then
/// ascending index: the order [`heavy_plus_recent`] ranks by. Needs `index < 2^32`
/// ([`RANK_KEY_MAX_TOKENS`]).
#[inline]
pub fn rank_key(score: f32, index: usize) -> u64 {
    (u64::from(!order_key(score)) << 32) | index as u64
}

/// Pushes the indices of the `k` highest `scores` (ties to the lower index) onto `kept` and the
/// others onto `dropped`, both ascending.
fn split_top_k(scores: &[f32], k: usize, kept: &mut Vec<usize>, dropped: &mut Vec<usize>) {
    let n = scores.len();
    if k >= n {
        kept.extend(0..n);
        return;
    }
    if k == 0 {
        dropped.extend(0..n);
        return;
    }
    // Order keys of the scores; selecting the (n-k)-th smallest moves the k largest, as a
    // multiset, to keys[n-k..], with the smallest of them (the cut) at n-k.
    let mut keys: Vec<u32> = scores.iter().map(|&s| order_key(s)).collect();
    let (_, &mut cut, above) = keys.select_nth_unstable(n - k);
    // Every token above the cut is kept; of the tokens at the cut, the first `ties` by index.
    let mut ties = 1 + above.iter().filter(|&&x| x == cut).count();
    for (i, &s) in scores.iter().enumerate() {
        let key = order_key(s);
        let keep = if key == cut && ties > 0 {
            ties -= 1;
            true
        } else {
            key > cut
        };
        if keep {
            kept.push(i);
        } else {
            dropped.push(i);
        }
    }
}

/// The heavy-hitters-plus-recent rule on a score vector (math-spec §3):
/// `recent = [max(0, T-r), T)`, `heavy` = the `(B - |recent|)^+` highest-scored tokens among
/// `[0, T-r)`, `kept = sorted(recent ∪ heavy)`, and only its last `B` when `r > B`.
///
/// [`h2o`] and [`snapkv`] are this rule on their scores; the other policies
/// ([`crate::policy`]) apply it to theirs. `scores.len()` is `T`; `budget` in `1..=T`.
pub fn heavy_plus_recent(
    scores: &[f32],
    budget: usize,
    recent: usize,
) -> Result<Selection, SelectError> {
    let total = scores.len();
    if total == 0 {
        return Err(SelectError::NoTokens);
    }
    if budget == 0 || budget > total {
        return Err(SelectError::Budget { budget, total });
    }
    check_finite_scores(scores)?;
    let recent_start = total.saturating_sub(recent);
    // When r > B only the last B of the recent window survive.
    let kept_recent_start = recent_start.max(total - budget);
    let n_heavy = budget.saturating_sub(total - recent_start);
    let mut kept = Vec::with_capacity(budget);
    let mut dropped = Vec::with_capacity(total - budget);
    // n_heavy > 0 only when the whole recent window is kept (kept_recent_start == recent_start).
    split_top_k(&scores[..recent_start], n_heavy, &mut kept, &mut dropped);
    let n_heavy = kept.len();
    dropped.extend(recent_start..kept_recent_start);
    kept.extend(kept_recent_start..total);
    let mut roles = vec![Role::Heavy; n_heavy];
    roles.resize(kept.len(), Role::Recent);
    Ok(Selection {
        kept,
        dropped,
        roles,
    })
}

/// H2O: cumulative scores over all of `attention` (`S x T`), then
/// `TopK(score, B - r) ∪ recent window` (note §3.1).
///
/// `budget` in `1..=T`; any `recent >= 0` (when `r >= B` the last `B` tokens are kept).
///
/// ```
/// use kvlab_core::{Matrix, select::h2o};
/// let a = Matrix::new(3, 4, vec![0.60, 0.20, 0.10, 0.10,
///                                0.70, 0.10, 0.10, 0.10,
///                                0.05, 0.05, 0.10, 0.80]).unwrap();
/// // scores [1.35, 0.35, 0.30, 1.00]: recent {3}, then the top-1 of tokens 0..3 is 0
/// assert_eq!(h2o(&a, 2, 1).unwrap().kept, vec![0, 3]);
/// ```
pub fn h2o(attention: &Matrix, budget: usize, recent: usize) -> Result<Selection, SelectError> {
    let scores = cumulative_scores(attention);
    // A column's f64 sum is non-finite iff one of its weights is (|sum| <= S * f32::MAX cannot
    // overflow f64), and then so is its f32 score: only then look for the first bad weight. A
    // finite sum can still round to an infinite f32 score; heavy_plus_recent reports that one.
    if !all_finite(&scores) {
        check_finite_attention(attention)?;
    }
    heavy_plus_recent(&scores, budget, recent)
}

/// SnapKV selection on given scores: the same rule as H2O (note §3.2).
/// `scores.len()` is `T`; `budget` in `1..=T`.
pub fn snapkv(scores: &[f32], budget: usize, recent: usize) -> Result<Selection, SelectError> {
    heavy_plus_recent(scores, budget, recent)
}

/// Observation-window scores: `score_i = sum over the last `window` rows of a[t][i]`
/// (note §3.2), with the prefix `[0, T - window)` pooled as SnapKV's reference does (the
/// window's own tokens are not pooled; they are normally kept as the recent window).
///
/// `window` in `1..=S`; pooling kernel odd in `1..=2*T+1`.
pub fn observation_scores(
    attention: &Matrix,
    window: usize,
    pooling: Pooling,
) -> Result<Vec<f32>, SelectError> {
    let steps = attention.rows();
    if window == 0 || window > steps {
        return Err(SelectError::Window { window, steps });
    }
    // The whole matrix is checked, once per matrix (it remembers): the error names its first
    // bad weight.
    check_finite_attention(attention)?;
    observation_scores_of_rows(attention, steps, window, pooling)
}

/// [`observation_scores`] of the first `rows` rows of `attention` (`rows` in `1..=S`), without
/// copying them and without checking the weights are finite (the caller has): the window is the
/// last `window` of those rows, `window` in `1..=rows`.
pub fn observation_scores_of_rows(
    attention: &Matrix,
    rows: usize,
    window: usize,
    pooling: Pooling,
) -> Result<Vec<f32>, SelectError> {
    if window == 0 || window > rows {
        return Err(SelectError::Window {
            window,
            steps: rows,
        });
    }
    let mut scores = column_sums(attention, rows - window..rows);
    pool_prefix(&mut scores, window, pooling)?;
    Ok(scores)
}

/// Pools the prefix `[0, T - window)` of observation-window scores (see [`observation_scores`]).
fn pool_prefix(scores: &mut [f32], window: usize, pooling: Pooling) -> Result<(), SelectError> {
    let total = scores.len();
    let prefix = total.saturating_sub(window);
    pool_in_place(&mut scores[..prefix], pooling, total)
}

/// 1-D pooling with stride 1, padding `k/2` and the same length.
fn pool_in_place(xs: &mut [f32], pooling: Pooling, total: usize) -> Result<(), SelectError> {
    let (kernel, is_max) = match pooling {
        Pooling::None => return Ok(()),
        Pooling::Avg { kernel } => (kernel, false),
        Pooling::Max { kernel } => (kernel, true),
    };
    let max = 2 * total + 1;
    if kernel == 0 || kernel % 2 == 0 || kernel > max {
        return Err(SelectError::Kernel { kernel, max });
    }
    let half = kernel / 2;
    let n = xs.len();
    if is_max {
        let src = xs.to_vec();
        for (i, out) in xs.iter_mut().enumerate() {
            let lo = i.saturating_sub(half);
            let hi = (i + half + 1).min(n);
            *out = src[lo..hi]
                .iter()
                .copied()
                .fold(f32::NEG_INFINITY, f32::max);
        }
    } else {
        // Running sum in f64; divide by the full kernel (padding counts as zeros).
        let mut prefix = Vec::with_capacity(n + 1);
        let mut run = 0f64;
        prefix.push(run);
        for &x in xs.iter() {
            run += f64::from(x);
            prefix.push(run);
        }
        let k = kernel as f64;
        let window = |i: usize| {
            let lo = i.saturating_sub(half);
            let hi = (i + half + 1).min(n);
            ((prefix[hi] - prefix[lo]) / k) as f32
        };
        // Tokens [head, tail) have the whole window inside: prefix[i + half + 1] - prefix[i - half]
        // (the same formula, in a loop the compiler vectorises); the edges clamp.
        let head = half.min(n);
        let tail = n.saturating_sub(half).max(head);
        for (i, out) in xs.iter_mut().enumerate().take(head) {
            *out = window(i);
        }
        for (i, out) in xs.iter_mut().enumerate().skip(tail) {
            *out = window(i);
        }
        if head < tail {
            // head == half here (n > 2 * half).
            let interior = xs[head..tail]
                .iter_mut()
                .zip(&prefix[kernel..])
                .zip(&prefix[..]);
            for ((out, &hi), &lo) in interior {
                *out = ((hi - lo) / k) as f32;
            }
        }
    }
    Ok(())
}

/// StreamingLLM: the first `sinks` tokens (attention sinks) and the last `B - sinks`.
///
/// `total >= 1`, `budget` in `1..=total`, `sinks` in `0..=budget`.
///
/// ```
/// let s = kvlab_core::select::streaming_llm(10, 4, 1).unwrap();
/// assert_eq!(s.kept, vec![0, 7, 8, 9]);
/// ```
pub fn streaming_llm(total: usize, budget: usize, sinks: usize) -> Result<Selection, SelectError> {
    if total == 0 {
        return Err(SelectError::NoTokens);
    }
    if budget == 0 || budget > total {
        return Err(SelectError::Budget { budget, total });
    }
    if sinks > budget {
        return Err(SelectError::Sinks { sinks, budget });
    }
    let recent_start = total - (budget - sinks);
    let mut roles = vec![Role::Sink; sinks];
    roles.resize(budget, Role::Recent);
    Ok(Selection {
        kept: (0..sinks).chain(recent_start..total).collect(),
        dropped: (sinks..recent_start).collect(),
        roles,
    })
}

/// `R_token = total / kept` (note §3.3); an error unless `0 < kept <= total`.
///
/// ```
/// assert_eq!(kvlab_core::select::compression_ratio(4096, 1024).unwrap(), 4.0);
/// assert!(kvlab_core::select::compression_ratio(10, 0).is_err());
/// ```
pub fn compression_ratio(total: usize, kept: usize) -> Result<f64, SelectError> {
    if kept == 0 || kept > total {
        return Err(SelectError::Kept { kept, total });
    }
    Ok(total as f64 / kept as f64)
}

/// Attention mass retained per step: `sum_{i in kept} a[t][i] / sum_i a[t][i]` for each row
/// `t` (1.0 for a row whose mass is 0).
pub fn mass_retained(attention: &Matrix, kept: &[usize]) -> Result<Vec<f64>, SelectError> {
    let total = attention.cols();
    if let Some(&index) = kept.iter().find(|&&i| i >= total) {
        return Err(SelectError::TokenIndex { index, total });
    }
    mass_retained_with(attention, &row_sums(attention), kept)
}

/// `sum_i a[t][i]` of every row `t`, summed in `f64` in token order: the denominators of
/// [`mass_retained`], computed once for many kept sets.
pub fn row_sums(attention: &Matrix) -> Vec<f64> {
    attention
        .iter_rows()
        .map(|row| row.iter().map(|&v| f64::from(v)).sum())
        .collect()
}

/// [`mass_retained`] with the row sums given (`row_sums` from [`row_sums`] of the same
/// `attention`; rows without a sum count as mass 0).
pub fn mass_retained_with(
    attention: &Matrix,
    row_sums: &[f64],
    kept: &[usize],
) -> Result<Vec<f64>, SelectError> {
    let total = attention.cols();
    if let Some(&index) = kept.iter().find(|&&i| i >= total) {
        return Err(SelectError::TokenIndex { index, total });
    }
    Ok(attention
        .iter_rows()
        .enumerate()
        .map(|(t, row)| {
            let all = row_sums.get(t).copied().unwrap_or(0.0);
            let k: f64 = kept.iter().map(|&i| f64::from(row[i])).sum();
            if all == 0.0 {
                1.0
            } else {
                k / all
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_carries_the_fields_its_message_names() {
        let e = streaming_llm(512, 64, 100).unwrap_err();
        assert_eq!(
            e.to_string(),
            "sinks 100 is out of range: must be between 0 and 64 (the budget B)"
        );
        // (what the page words it from in its language)
        assert_eq!(
            serde_json::to_value(&e).expect("serialize"),
            serde_json::json!({"kind": "sinks", "sinks": 100, "budget": 64})
        );
    }

    fn spec_attention() -> Matrix {
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
    fn h2o_on_the_spec_example() {
        let a = spec_attention();
        // scores [1.35, 0.35, 0.30, 1.00]
        let s = h2o(&a, 3, 1).unwrap();
        assert_eq!(s.kept, vec![0, 1, 3]);
        assert_eq!(s.dropped, vec![2]);
        assert_eq!(s.roles, vec![Role::Heavy, Role::Heavy, Role::Recent]);
        // r = 0: pure top-k
        assert_eq!(h2o(&a, 2, 0).unwrap().kept, vec![0, 3]);
        // r > B: the last B of the recent window
        assert_eq!(h2o(&a, 2, 3).unwrap().kept, vec![2, 3]);
        // r > T
        assert_eq!(h2o(&a, 1, 10).unwrap().kept, vec![3]);
        // B = T keeps all
        assert_eq!(h2o(&a, 4, 0).unwrap().dropped, Vec::<usize>::new());
    }

    #[test]
    fn ties_go_to_the_lower_index() {
        let s = snapkv(&[1.0, 2.0, 2.0, 2.0, 0.0], 2, 0).unwrap();
        assert_eq!(s.kept, vec![1, 2]);
        let s = snapkv(&[5.0; 6], 3, 1).unwrap();
        assert_eq!(s.kept, vec![0, 1, 5]);
    }

    #[test]
    fn errors_name_value_and_range() {
        let a = spec_attention();
        assert_eq!(
            h2o(&a, 0, 1).unwrap_err().to_string(),
            "budget 0 is out of range: must be between 1 and 4 (the number of tokens)"
        );
        assert!(h2o(&a, 5, 1).is_err());
        assert_eq!(snapkv(&[], 1, 0), Err(SelectError::NoTokens));
        assert!(matches!(
            snapkv(&[1.0, f32::NAN], 1, 0),
            Err(SelectError::NonFinite { index: 1, .. })
        ));
        assert_eq!(
            observation_scores(&a, 4, Pooling::None)
                .unwrap_err()
                .to_string(),
            "observation window 4 is out of range: must be between 1 and 3 (the number of attention rows)"
        );
        assert!(observation_scores(&a, 1, Pooling::Avg { kernel: 2 }).is_err());
        assert!(observation_scores(&a, 1, Pooling::Max { kernel: 0 }).is_err());
        assert_eq!(
            streaming_llm(10, 2, 3).unwrap_err().to_string(),
            "sinks 3 is out of range: must be between 0 and 2 (the budget B)"
        );
        assert!(compression_ratio(3, 4).is_err());
        assert!(mass_retained(&a, &[4]).is_err());
    }

    #[test]
    fn observation_window_and_pooling() {
        let a = spec_attention();
        // last row only
        let s = observation_scores(&a, 1, Pooling::None).unwrap();
        assert_eq!(s, vec![0.05, 0.05, 0.10, 0.80]);
        // window 1 -> prefix is tokens 0..3: avg k=3 with zero padding
        let s = observation_scores(&a, 1, Pooling::Avg { kernel: 3 }).unwrap();
        let want = [0.10 / 3.0, 0.20 / 3.0, 0.15 / 3.0, 0.80];
        for (x, w) in s.iter().zip(want) {
            assert!((f64::from(*x) - w).abs() < 1e-7, "{s:?}");
        }
        let s = observation_scores(&a, 1, Pooling::Max { kernel: 3 }).unwrap();
        assert_eq!(s, vec![0.05, 0.10, 0.10, 0.80]);
    }

    #[test]
    fn streaming_llm_and_ratio() {
        let s = streaming_llm(6, 3, 1).unwrap();
        assert_eq!(s.kept, vec![0, 4, 5]);
        assert_eq!(s.roles, vec![Role::Sink, Role::Recent, Role::Recent]);
        assert_eq!(streaming_llm(3, 3, 2).unwrap().kept, vec![0, 1, 2]);
        assert_eq!(compression_ratio(4, 4).unwrap(), 1.0);
        assert_eq!(s.r_token(), 2.0);
    }

    #[test]
    fn rank_keys_follow_the_total_order() {
        let xs = [
            f32::NEG_INFINITY,
            -f32::MAX,
            -1.0,
            -f32::MIN_POSITIVE,
            -1.0e-45,
            -0.0,
            0.0,
            1.0e-45,
            f32::MIN_POSITIVE,
            0.5,
            1.0,
            f32::MAX,
            f32::INFINITY,
            f32::NAN,
            -f32::NAN,
        ];
        for (i, &a) in xs.iter().enumerate() {
            for (j, &b) in xs.iter().enumerate() {
                let want = b.total_cmp(&a).then(i.cmp(&j));
                assert_eq!(rank_key(a, i).cmp(&rank_key(b, j)), want, "{a} {b}");
            }
        }
    }

    #[test]
    fn finite_checks_find_the_first_bad_value() {
        for n in [0usize, 1, 15, 16, 17, 40] {
            let clean: Vec<f32> = (0..n).map(|i| i as f32 - 3.5).collect();
            assert!(all_finite(&clean));
            assert_eq!(first_non_finite(&clean), None);
            for p in 0..n {
                for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
                    let mut xs = clean.clone();
                    xs[p] = bad;
                    xs[n - 1] = -bad;
                    assert!(!all_finite(&xs));
                    assert_eq!(first_non_finite(&xs), Some(p));
                }
            }
        }
    }

    #[test]
    fn mass_retained_per_step() {
        let a = spec_attention();
        let m = mass_retained(&a, &[0, 3]).unwrap();
        assert!((m[0] - 0.7).abs() < 1e-6);
        assert!((m[2] - 0.85).abs() < 1e-6);
    }
}
