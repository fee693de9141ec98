//! Reducing long series to pixel columns, and the token states charts colour by
//! (issue 4 §3: kept tokens by role, dropped ones dimmed).
//!
//! A series of `n` items drawn `w` pixels wide is cut into at most `w` contiguous buckets
//! ([`pixel_buckets`]); each chart then draws one mark per bucket (the bucket's maximum, or its
//! most important state). This is layout, not analysis: the exact numbers stay in the core and
//! in the figures the page prints beside each chart.

use crate::select::{Role, Selection};
use std::ops::Range;

/// What happened to one token under a selection policy, ordered by importance for display:
/// `Dropped < Recent < Heavy < Sink`.
///
/// When several tokens share one pixel column, the column shows its most important state
/// (sink > heavy > recent > dropped), so a single kept heavy hitter among 40 dropped tokens
/// stays visible at any zoom; the exact kept set is listed beside the chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum TokenState {
    /// Evicted: not in the kept set.
    #[default]
    Dropped,
    /// Kept because it is in the recent window `[T-r, T)`.
    Recent,
    /// Kept as a heavy hitter (top score).
    Heavy,
    /// Kept as an attention sink (StreamingLLM's first tokens).
    Sink,
}

impl From<Option<Role>> for TokenState {
    fn from(role: Option<Role>) -> Self {
        match role {
            None => TokenState::Dropped,
            Some(Role::Recent) => TokenState::Recent,
            Some(Role::Heavy) => TokenState::Heavy,
            Some(Role::Sink) => TokenState::Sink,
        }
    }
}

impl From<Role> for TokenState {
    fn from(role: Role) -> Self {
        Some(role).into()
    }
}

/// The state of each token `0..T` under `selection` (`T = selection.total()`): kept tokens
/// take their role, all others are [`TokenState::Dropped`]. Kept indices `>= T` are ignored.
pub fn token_states(selection: &Selection) -> Vec<TokenState> {
    let mut states = vec![TokenState::Dropped; selection.total()];
    for (&i, &role) in selection.kept.iter().zip(&selection.roles) {
        if let Some(s) = states.get_mut(i) {
            *s = role.into();
        }
    }
    states
}

/// Cut `0..n` into at most `max_buckets` contiguous, non-empty, ascending ranges that cover it.
///
/// If `n <= max_buckets`, every item is its own bucket; otherwise bucket `b` is
/// `floor(b n / m) .. floor((b+1) n / m)` with `m = max_buckets`, so sizes differ by at most
/// one. Empty when `n == 0` or `max_buckets == 0`.
///
/// ```
/// use kvlab::chart::pixel_buckets;
/// assert_eq!(pixel_buckets(3, 10), vec![0..1, 1..2, 2..3]);
/// assert_eq!(pixel_buckets(10, 4), vec![0..2, 2..5, 5..7, 7..10]);
/// assert!(pixel_buckets(0, 4).is_empty());
/// ```
pub fn pixel_buckets(n: usize, max_buckets: usize) -> Vec<Range<usize>> {
    if n == 0 || max_buckets == 0 {
        return Vec::new();
    }
    if n <= max_buckets {
        return (0..n).map(|i| i..i + 1).collect();
    }
    (0..max_buckets)
        .map(|b| bucket_start(b, n, max_buckets)..bucket_start(b + 1, n, max_buckets))
        .collect()
}

/// `floor(b n / m)` without overflow on 32-bit targets.
pub(crate) fn bucket_start(b: usize, n: usize, m: usize) -> usize {
    if m == 0 {
        return 0;
    }
    ((b as u128 * n as u128) / m as u128) as usize
}

/// The input range output cell `o` of `out` covers when `n` inputs are resampled to `out`
/// cells: the pooled range when shrinking, the single nearest-below input when enlarging.
pub(crate) fn cell_range(o: usize, n: usize, out: usize) -> Range<usize> {
    let start = bucket_start(o, n, out).min(n.saturating_sub(1));
    let end = bucket_start(o + 1, n, out).max(start + 1).min(n);
    start..end
}

/// The most important state in `states` (sink > heavy > recent > dropped).
pub(crate) fn top_state(states: &[TokenState]) -> TokenState {
    states.iter().copied().max().unwrap_or_default()
}

/// Runs of equal [`top_state`] over `buckets` of `states`: `(first bucket, end bucket, state)`,
/// end exclusive, in order. A strip is drawn as one rectangle per run, not per pixel column.
pub(crate) fn state_runs(
    states: &[TokenState],
    buckets: &[Range<usize>],
) -> Vec<(usize, usize, TokenState)> {
    let mut runs: Vec<(usize, usize, TokenState)> = Vec::new();
    for (b, r) in buckets.iter().enumerate() {
        let s = top_state(states.get(r.clone()).unwrap_or_default());
        match runs.last_mut() {
            Some(run) if run.2 == s => run.1 = b + 1,
            _ => runs.push((b, b + 1, s)),
        }
    }
    runs
}

/// The largest finite value of `values` (NaN and infinities skipped), if any.
pub(crate) fn max_finite<I: IntoIterator<Item = f64>>(values: I) -> Option<f64> {
    values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold(None, |m, v| Some(m.map_or(v, |m: f64| m.max(v))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_runs_merge_equal_neighbours_and_cover_every_bucket() {
        use TokenState::*;
        let states = [
            Sink, Dropped, Dropped, Heavy, Heavy, Dropped, Recent, Recent, Dropped,
        ];
        let one_each = pixel_buckets(states.len(), states.len());
        assert_eq!(
            state_runs(&states, &one_each),
            vec![
                (0, 1, Sink),
                (1, 3, Dropped),
                (3, 5, Heavy),
                (5, 6, Dropped),
                (6, 8, Recent),
                (8, 9, Dropped)
            ]
        );
        // Against the per-bucket rule on larger inputs: the runs tile the buckets, and each
        // bucket's state is its run's.
        let mut states = vec![Dropped; 10_000];
        for i in (0..10_000).step_by(37) {
            states[i] = Heavy;
        }
        states[9_990..].fill(Recent);
        states[0] = Sink;
        for width in [1usize, 3, 640, 10_000] {
            let buckets = pixel_buckets(states.len(), width);
            let runs = state_runs(&states, &buckets);
            assert_eq!(runs.first().map(|r| r.0), Some(0));
            assert_eq!(runs.last().map(|r| r.1), Some(buckets.len()));
            for (w, next) in runs.iter().zip(runs.iter().skip(1)) {
                assert_eq!(w.1, next.0, "runs tile the buckets");
                assert_ne!(w.2, next.2, "neighbouring runs differ");
            }
            for (start, end, s) in runs {
                for b in start..end {
                    assert_eq!(top_state(&states[buckets[b].clone()]), s);
                }
            }
        }
    }

    #[test]
    fn buckets_cover_without_gaps() {
        for n in [1usize, 2, 7, 799, 800, 801, 4096, 131_072] {
            for m in [1usize, 3, 800] {
                let b = pixel_buckets(n, m);
                assert_eq!(b.len(), n.min(m));
                assert_eq!(b.first().map(|r| r.start), Some(0));
                assert_eq!(b.last().map(|r| r.end), Some(n));
                for w in b.windows(2) {
                    assert_eq!(w[0].end, w[1].start);
                    assert!(!w[0].is_empty());
                }
            }
        }
    }

    #[test]
    fn cell_ranges_pool_and_repeat() {
        assert_eq!(cell_range(0, 4, 2), 0..2);
        assert_eq!(cell_range(1, 4, 2), 2..4);
        // enlarging 2 -> 4: each input twice
        let r: Vec<_> = (0..4).map(|o| cell_range(o, 2, 4)).collect();
        assert_eq!(r, vec![0..1, 0..1, 1..2, 1..2]);
    }

    #[test]
    fn state_priority() {
        use TokenState::*;
        assert_eq!(top_state(&[Dropped, Recent, Dropped]), Recent);
        assert_eq!(top_state(&[Recent, Heavy]), Heavy);
        assert_eq!(top_state(&[Heavy, Sink, Dropped]), Sink);
        assert_eq!(top_state(&[]), Dropped);
    }

    #[test]
    fn states_from_selection() {
        let s = Selection {
            kept: vec![0, 2, 9],
            dropped: vec![1, 3],
            roles: vec![Role::Sink, Role::Heavy, Role::Recent],
        };
        // total = 5; index 9 is out of range and ignored
        assert_eq!(
            token_states(&s),
            vec![
                TokenState::Sink,
                TokenState::Dropped,
                TokenState::Heavy,
                TokenState::Dropped,
                TokenState::Dropped
            ]
        );
    }

    #[test]
    fn max_finite_skips_nan() {
        assert_eq!(max_finite([1.0, f64::NAN, 3.0, f64::INFINITY]), Some(3.0));
        assert_eq!(max_finite([f64::NAN]), None);
    }
}
