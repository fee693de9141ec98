//! Section 3, token selection: each method's scores and kept set, and the mass they retain.

use super::*;
use crate::select::{
    heavy_plus_recent, observation_scores, streaming_llm, Pooling, Role, SelectError, Selection,
};
use crate::state::{Method, PoolKind, Settings};
use serde::Serialize;
use std::sync::Arc;

/// The selection section's numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectFigures {
    /// `|kept|`.
    pub kept_count: usize,
    /// Kept indices as compact ranges, e.g. `0-3,17,480-511`.
    pub kept_ranges: String,
    /// `|dropped|`.
    pub dropped_count: usize,
    /// Kept as heavy hitters.
    pub heavy_count: usize,
    /// Kept as recent.
    pub recent_count: usize,
    /// Kept as sinks.
    pub sink_count: usize,
    /// `R_token = T / |kept|`.
    pub r_token: f64,
    /// Mean attention mass retained over steps.
    pub mass_mean: f64,
    /// Worst step's attention mass retained.
    pub mass_worst: f64,
    /// The lowest score among kept heavy hitters (the top-k threshold), if any.
    pub threshold: Option<f64>,
    /// Recent window actually kept `[start, T)`.
    pub recent_start: usize,
    /// The smallest budget the method takes here: StreamingLLM keeps its sinks, so
    /// `max(1, sinks)`; 1 otherwise. The B slider starts there (it never rests on a refused B).
    pub budget_min: usize,
}

/// The selection result the charts draw.
#[derive(Debug, Clone)]
pub struct SelectView {
    pub(super) key: SelectKey,
    /// The score vector the method ranked (cumulative, observation-window, or position).
    pub scores: Vec<f32>,
    /// The selection.
    pub selection: Selection,
    /// Attention mass retained per step.
    pub mass: Vec<f64>,
    /// The kept set at `floor(0.9 B)` (the "which lever" comparison), if smaller.
    pub fewer_tokens: Option<Vec<usize>>,
    /// The figures.
    pub figures: SelectFigures,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct SelectKey {
    pub(super) method: Method,
    pub(super) budget: usize,
    pub(super) recent: usize,
    pub(super) window: usize,
    pub(super) pool: PoolKind,
    pub(super) kernel: usize,
    pub(super) sinks: usize,
}

impl SelectKey {
    pub(super) fn of(s: &Settings) -> Self {
        Self {
            method: s.method,
            budget: s.budget,
            recent: s.recent,
            window: s.window,
            pool: s.pool,
            kernel: s.kernel,
            sinks: s.sinks,
        }
    }
}

/// `0-3,17,480-511`: ascending indices as compact ranges.
///
/// Written into one string (no string per range: at W2 a selection has thousands of ranges,
/// and this runs on every B or r change and for every policy of the comparison).
pub fn compact_ranges(indices: &[usize]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(indices.len() * 4);
    let mut i = 0;
    while i < indices.len() {
        let start = indices[i];
        let mut end = start;
        while i + 1 < indices.len() && indices[i + 1] == end + 1 {
            i += 1;
            end = indices[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        // Writing to a String cannot fail.
        let _ = if start == end {
            write!(out, "{start}")
        } else {
            write!(out, "{start}-{end}")
        };
        i += 1;
    }
    out
}

/// What the selection section reuses between updates on the same data: B and r change only
/// the top-k, not the scores or the rows' total mass.
#[derive(Debug, Clone, Default)]
pub(super) struct SelectCache {
    /// `sum_i a[t][i]` of every attention row (the denominators of the mass retained).
    pub(super) row_sums: Option<Arc<Vec<f64>>>,
    /// The section's score vector, by the settings it depends on.
    pub(super) scores: Option<(ScoreKey, Arc<ScoresResult>)>,
}

/// A score vector, or why it could not be computed.
pub(super) type ScoresResult = Result<Vec<f32>, LabError>;

/// Method, and for SnapKV its window, pooling and kernel (unused fields are zeroed).
pub(super) type ScoreKey = (Method, usize, PoolKind, usize);

impl SelectCache {
    pub(super) fn row_sums(&mut self, data: &Data) -> Arc<Vec<f64>> {
        self.row_sums
            .get_or_insert_with(|| Arc::new(crate::select::row_sums(&data.attention)))
            .clone()
    }

    pub(super) fn scores(&mut self, data: &Data, s: &Settings) -> Arc<ScoresResult> {
        let key = match s.method {
            Method::Snapkv => (s.method, s.window, s.pool, s.kernel),
            _ => (s.method, 0, PoolKind::None, 0),
        };
        cached(&mut self.scores, key, || section_scores(data, s))
    }
}

/// The score vector the section ranks (cumulative for H2O, observation-window for SnapKV) or
/// shows (cumulative, for StreamingLLM), or why it cannot be computed; errors name the control
/// as [`select_view_at`] reports them.
pub(super) fn section_scores(data: &Data, s: &Settings) -> ScoresResult {
    let a = &data.attention;
    let err = |field: &'static str| move |error: SelectError| LabError::Select { field, error };
    match s.method {
        Method::H2o => {
            // select::h2o's check: H2O refuses non-finite weights before scoring.
            if let Some((row, col)) = a.first_non_finite() {
                return Err(err("budget")(SelectError::NonFinite {
                    what: "attention weight",
                    index: row * a.cols() + col,
                    value: a.get(row, col).unwrap_or(f32::NAN),
                }));
            }
            Ok(crate::select::cumulative_scores(a))
        }
        Method::Snapkv => {
            let pooling = match s.pool {
                PoolKind::None => Pooling::None,
                PoolKind::Avg => Pooling::Avg { kernel: s.kernel },
                PoolKind::Max => Pooling::Max { kernel: s.kernel },
            };
            let field = if s.window > a.rows() {
                "window"
            } else {
                "kernel"
            };
            observation_scores(a, s.window, pooling).map_err(err(field))
        }
        Method::Streaming => Ok(crate::select::cumulative_scores(a)),
    }
}

pub(super) fn select_view(
    data: &Data,
    s: &Settings,
    cache: &mut SelectCache,
) -> Result<SelectView, LabError> {
    let scores = cache.scores(data, s);
    let row_sums = cache.row_sums(data);
    let mut v = select_view_at(data, s, &scores, &row_sums)?;
    let smaller = (s.budget as f64 * 0.9).floor() as usize;
    if smaller >= 1 && smaller < s.budget {
        let s2 = Settings {
            budget: smaller,
            sinks: s.sinks.min(smaller),
            ..s.clone()
        };
        let w = select_view_at(data, &s2, &scores, &row_sums)?;
        v.fewer_tokens = Some(w.selection.kept);
    }
    Ok(v)
}

/// The section at `s.budget` and `s.recent`, from the section's `scores` ([`section_scores`]
/// with the same settings) and the attention's `row_sums`.
pub(super) fn select_view_at(
    data: &Data,
    s: &Settings,
    scores: &ScoresResult,
    row_sums: &[f64],
) -> Result<SelectView, LabError> {
    let a = &data.attention;
    let t = a.cols();
    let err = |field: &'static str| move |error: SelectError| LabError::Select { field, error };
    if s.budget > t {
        return Err(LabError::Select {
            field: "budget",
            error: SelectError::Budget {
                budget: s.budget,
                total: t,
            },
        });
    }
    let (scores, selection) = match s.method {
        // select::h2o and select::snapkv are this rule on the section's scores.
        Method::H2o | Method::Snapkv => {
            let sc = scores.as_ref().map_err(Clone::clone)?;
            let sel = heavy_plus_recent(sc, s.budget, s.recent).map_err(err("budget"))?;
            (sc.clone(), sel)
        }
        Method::Streaming => {
            let sel = streaming_llm(t, s.budget, s.sinks).map_err(err("sinks"))?;
            (scores.as_ref().map_err(Clone::clone)?.clone(), sel)
        }
    };
    let mass =
        crate::select::mass_retained_with(a, row_sums, &selection.kept).map_err(err("budget"))?;
    let mass_mean = mass.iter().sum::<f64>() / mass.len().max(1) as f64;
    let mass_worst = mass.iter().copied().fold(1.0, f64::min);
    let count = |r: Role| selection.roles.iter().filter(|&&x| x == r).count();
    let threshold = selection
        .kept
        .iter()
        .zip(&selection.roles)
        .filter(|(_, &r)| r == Role::Heavy)
        .map(|(&i, _)| f64::from(scores[i]))
        .reduce(f64::min);
    let recent_start = match s.method {
        Method::Streaming => t - (s.budget - s.sinks.min(s.budget)),
        _ => t.saturating_sub(s.recent).max(t - s.budget),
    };
    let figures = SelectFigures {
        kept_count: selection.kept.len(),
        kept_ranges: compact_ranges(&selection.kept),
        dropped_count: selection.dropped.len(),
        heavy_count: count(Role::Heavy),
        recent_count: count(Role::Recent),
        sink_count: count(Role::Sink),
        r_token: selection.r_token(),
        mass_mean,
        mass_worst,
        threshold,
        recent_start,
        budget_min: match s.method {
            Method::Streaming => s.sinks.max(1),
            _ => 1,
        },
    };
    Ok(SelectView {
        key: SelectKey::of(s),
        scores,
        selection,
        mass,
        fewer_tokens: None,
        figures,
    })
}
