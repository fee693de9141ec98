//! Token-selection charts (note §3, issue 4 §3): per-token scores with the top-k threshold and
//! the recent window, the token strip of the kept set, and the attention mass retained per step.
//!
//! The views hold what [`crate::select`] computed (scores, the [`crate::select::Selection`] as
//! [`TokenState`]s, [`crate::select::mass_retained`]); the charts only place it on pixels.

use super::downsample::{max_finite, pixel_buckets, state_runs, top_state};
use super::layout::{
    alpha, axes, begin, dashed_hline, draw_err, headroom, index_text, tick_text, Axes, LegendItem,
    Mark,
};
use super::quant_charts::runs;
use super::{ChartError, ChartStyle, PixelRect, TokenState};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Legend texts for the token states; an empty text leaves that state out of the legend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StateLabels<'a> {
    /// e.g. "sink".
    pub sink: &'a str,
    /// e.g. "heavy hitter".
    pub heavy: &'a str,
    /// e.g. "recent".
    pub recent: &'a str,
    /// e.g. "dropped".
    pub dropped: &'a str,
}

impl StateLabels<'_> {
    pub(crate) fn legend(&self, style: &ChartStyle) -> Vec<LegendItem<'_>> {
        [
            (TokenState::Sink, self.sink),
            (TokenState::Heavy, self.heavy),
            (TokenState::Recent, self.recent),
            (TokenState::Dropped, self.dropped),
        ]
        .into_iter()
        // An empty label leaves its entry out (e.g. an error heatmap has no token states).
        .filter(|(_, text)| !text.is_empty())
        .map(|(s, text)| LegendItem {
            mark: Mark::Box(alpha(style.states.of(s), 1.0)),
            text,
        })
        .collect()
    }
}

fn check_states(states: &[TokenState], other: &'static str, n: usize) -> Result<(), ChartError> {
    if states.len() != n {
        return Err(ChartError::LengthMismatch {
            name: "states",
            len: states.len(),
            other,
            other_len: n,
        });
    }
    Ok(())
}

/// Per-token scores with the selection rule drawn over them (note §3.1/§3.2:
/// `TopK(score, B - r) ∪ recent`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreBarsView<'a> {
    /// Chart title ("" for none).
    pub title: &'a str,
    /// x axis name, e.g. "token i".
    pub x_label: &'a str,
    /// y axis name, e.g. "score".
    pub y_label: &'a str,
    /// One score per token `0..T` (NaN: no bar).
    pub scores: &'a [f32],
    /// One state per token, same length as `scores`.
    pub states: &'a [TokenState],
    /// The top-k threshold: the smallest score that was kept as a heavy hitter. `None` (or
    /// NaN) draws no line.
    pub threshold: Option<f64>,
    /// Text at the threshold line, e.g. "top-k threshold 0.31".
    pub threshold_label: &'a str,
    /// The recent window as token indices `[start, end)`, shaded; `None` for no window.
    pub recent: Option<(usize, usize)>,
    /// Text in the shaded window, e.g. "recent r = 16".
    pub recent_label: &'a str,
    /// Legend texts of the bar colours.
    pub legend: StateLabels<'a>,
    /// Token texts to write above their bars, `(token, text)`, the most important first (a
    /// prompt's kept heavy hitters by score: which tokens they are). A label that would
    /// overlap one placed before it, or leave the plot, is left out.
    pub labels: &'a [(usize, String)],
}

/// Draw per-token scores as bars coloured by token state, the top-k threshold as a dashed
/// line, and the recent window shaded.
///
/// With more tokens than pixel columns, tokens are bucketed per column ([`pixel_buckets`]):
/// the bar is the bucket's largest score, coloured by its most important state
/// (sink > heavy > recent > dropped, see [`TokenState`]). The y axis spans `[0, 1.1 max(score, threshold)]`
/// (negative scores draw no bar). Errors when `states` and `scores` differ in length.
pub fn score_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    view: &ScoreBarsView,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let n = view.scores.len();
    check_states(view.states, "scores", n)?;
    let threshold = view.threshold.filter(|t| t.is_finite());
    let mut legend = view.legend.legend(style);
    if threshold.is_some() {
        legend.push(LegendItem {
            mark: Mark::Dash(alpha(style.reference, 1.0)),
            text: view.threshold_label,
        });
    }
    let body = begin(root, style, view.title, &legend)?;
    let top = headroom(max_finite(
        view.scores.iter().map(|&s| f64::from(s)).chain(threshold),
    ));
    let fy = |v: &f64| tick_text(*v, top);
    let Some(plot) = axes(
        &body,
        style,
        RangedCoordf64::from(0.0..n.max(1) as f64),
        RangedCoordf64::from(0.0..top),
        (0.0, top),
        &Axes {
            x_label: view.x_label,
            y_label: view.y_label,
            x_ticks: n > 0,
            y_ticks: true,
            y_grid: true,
        },
        &|v: &f64| index_text(*v),
        &fy,
    )?
    else {
        return Ok(PixelRect::default());
    };
    let (w, h) = (plot.w(), plot.h());
    let token_px = |i: usize| -> i32 {
        if n == 0 {
            0
        } else {
            ((i.min(n) as u128 * u128::from(plot.rect.w)) / n as u128) as i32
        }
    };

    if let Some((s, e)) = view.recent {
        let (s, e) = (s.min(n), e.min(n));
        if e > s {
            let (x0, x1) = (token_px(s), token_px(e).max(token_px(s) + 1));
            plot.area
                .draw(&Rectangle::new(
                    [(x0, 0), (x1, h)],
                    alpha(style.states.recent, 0.12).filled(),
                ))
                .map_err(draw_err)?;
            if !view.recent_label.is_empty() {
                plot.area
                    .draw_text(
                        view.recent_label,
                        &style
                            .text(0.85, style.foreground)
                            .pos(Pos::new(HPos::Right, VPos::Top)),
                        (x1 - style.px(3.0), style.px(3.0)),
                    )
                    .map_err(draw_err)?;
            }
        }
    }

    let buckets = pixel_buckets(n, w.max(1) as usize);
    let m = buckets.len();
    for (b, r) in buckets.iter().enumerate() {
        let Some(score) = max_finite(
            view.scores
                .get(r.clone())
                .unwrap_or_default()
                .iter()
                .map(|&s| f64::from(s)),
        ) else {
            continue;
        };
        if score <= 0.0 {
            continue;
        }
        let state = top_state(view.states.get(r.clone()).unwrap_or_default());
        let (c0, c1) = (plot.col(b, m), plot.col(b + 1, m));
        let gap = if c1 - c0 >= 4 {
            ((c1 - c0) / 6).max(1)
        } else {
            0
        };
        plot.area
            .draw(&Rectangle::new(
                [(c0 + gap, plot.y_px(score)), (c1 - gap, h)],
                style.states.of(state).filled(),
            ))
            .map_err(draw_err)?;
    }

    if let Some(t) = threshold {
        let y = plot.y_px(t);
        dashed_hline(&plot.area, style, (0, w), y, alpha(style.reference, 1.0))?;
    }
    let text = style
        .text(0.8, style.foreground)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    let mut placed: Vec<(i32, i32)> = Vec::with_capacity(view.labels.len());
    let gap = style.px(4.0);
    for (i, label) in view.labels {
        let Some(&score) = view.scores.get(*i).filter(|s| s.is_finite()) else {
            continue;
        };
        let (tw, _) = plot
            .area
            .estimate_text_size(label, &text)
            .map_err(draw_err)?;
        let x = (token_px(*i) + token_px(i + 1)) / 2;
        let half = (tw as i32 + 1) / 2;
        let (left, right) = (x - half, x + half);
        let overlaps = placed
            .iter()
            .any(|&(l, r)| left < r + gap && l < right + gap);
        if overlaps || left < 0 || right > w {
            continue;
        }
        let y = (plot.y_px(f64::from(score)) - style.px(2.0)).max(style.px(12.0));
        plot.area
            .draw_text(label, &text, (x, y))
            .map_err(draw_err)?;
        placed.push((left, right));
    }
    Ok(plot.rect)
}

/// One row of `T` tokens coloured by state: the kept set at a glance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenStripView<'a> {
    /// Chart title ("" for none).
    pub title: &'a str,
    /// x axis name, e.g. "token i" ("" for none: a bare strip with tick numbers).
    pub x_label: &'a str,
    /// One state per token `0..T`.
    pub states: &'a [TokenState],
    /// Legend texts (all empty: no legend).
    pub legend: StateLabels<'a>,
}

/// Draw a one-row strip of tokens coloured by state.
///
/// With more tokens than pixel columns, each column shows its bucket's most important state
/// (sink > heavy > recent > dropped, see [`TokenState`]): a kept token is never hidden by
/// dropped neighbours. Adjacent columns of one state are drawn as one rectangle.
pub fn token_strip<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    view: &TokenStripView,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let n = view.states.len();
    let legend = view.legend.legend(style);
    let body = begin(root, style, view.title, &legend)?;
    let Some(plot) = axes(
        &body,
        style,
        RangedCoordf64::from(0.0..n.max(1) as f64),
        RangedCoordf64::from(0.0..1.0),
        (0.0, 1.0),
        &Axes {
            x_label: view.x_label,
            y_label: "",
            x_ticks: n > 0,
            y_ticks: false,
            y_grid: false,
        },
        &|v: &f64| index_text(*v),
        &|_: &f64| String::new(),
    )?
    else {
        return Ok(PixelRect::default());
    };
    let buckets = pixel_buckets(n, plot.w().max(1) as usize);
    let m = buckets.len();
    let h = plot.h();
    for (from, to, s) in state_runs(view.states, &buckets) {
        plot.area
            .draw(&Rectangle::new(
                [(plot.col(from, m), 0), (plot.col(to, m), h)],
                style.states.of(s).filled(),
            ))
            .map_err(draw_err)?;
    }
    Ok(plot.rect)
}

/// Attention mass retained per decoding step (note §3: what the kept set still sees).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MassRetainedView<'a> {
    /// Chart title ("" for none).
    pub title: &'a str,
    /// x axis name, e.g. "step t".
    pub x_label: &'a str,
    /// y axis name, e.g. "mass retained".
    pub y_label: &'a str,
    /// `Σ_{i kept} a[t][i] / Σ_i a[t][i]` per step, in `[0, 1]` (NaN: gap).
    pub mass: &'a [f64],
    /// The mean over steps (NaN: no line).
    pub mean: f64,
    /// Legend text for the line.
    pub mass_label: &'a str,
    /// Legend text for the dashed mean, e.g. "mean 0.93".
    pub mean_label: &'a str,
}

/// Draw the mass retained per step as a line over `[0, 1]`, with the mean dashed.
///
/// With more steps than pixel columns, each column keeps its bucket's minimum and maximum (in
/// step order), so dips are never averaged away. A column whose steps are all NaN breaks the
/// line; a lone point between gaps is drawn as a dot.
pub fn mass_retained<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    view: &MassRetainedView,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let n = view.mass.len();
    let mut legend = vec![LegendItem {
        mark: Mark::Line(alpha(style.primary, 1.0)),
        text: view.mass_label,
    }];
    if view.mean.is_finite() {
        legend.push(LegendItem {
            mark: Mark::Dash(alpha(style.reference, 1.0)),
            text: view.mean_label,
        });
    }
    let body = begin(root, style, view.title, &legend)?;
    let x_hi = (n.saturating_sub(1)).max(1) as f64;
    let Some(plot) = axes(
        &body,
        style,
        RangedCoordf64::from(0.0..x_hi),
        RangedCoordf64::from(0.0..1.0),
        (0.0, 1.0),
        &Axes {
            x_label: view.x_label,
            y_label: view.y_label,
            x_ticks: n > 0,
            y_ticks: true,
            y_grid: true,
        },
        &|v: &f64| index_text(*v),
        &|v: &f64| tick_text(*v, 1.0),
    )?
    else {
        return Ok(PixelRect::default());
    };
    let buckets = pixel_buckets(n, plot.w().max(1) as usize);
    let mut points: Vec<Option<(i32, i32)>> = Vec::with_capacity(2 * buckets.len());
    for r in &buckets {
        let mut lo: Option<(usize, f64)> = None;
        let mut hi: Option<(usize, f64)> = None;
        for (i, &v) in view
            .mass
            .get(r.clone())
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            if !v.is_finite() {
                continue;
            }
            if lo.map_or(true, |(_, l)| v < l) {
                lo = Some((r.start + i, v));
            }
            if hi.map_or(true, |(_, h)| v > h) {
                hi = Some((r.start + i, v));
            }
        }
        let mut pts: Vec<(usize, f64)> = lo.into_iter().chain(hi).collect();
        pts.sort_by_key(|p| p.0);
        pts.dedup_by_key(|p| p.0);
        if pts.is_empty() {
            points.push(None);
        }
        for (i, v) in pts {
            points.push(Some((plot.x_px(i as f64, 0.0, x_hi), plot.y_px(v))));
        }
    }
    let line = style.primary.stroke_width(style.stroke(1.5));
    for seg in runs(&points) {
        if seg.len() == 1 {
            plot.area
                .draw(&Circle::new(
                    seg[0],
                    style.px(2.0).max(1) as u32,
                    style.primary.filled(),
                ))
                .map_err(draw_err)?;
        } else {
            plot.area
                .draw(&PathElement::new(seg, line))
                .map_err(draw_err)?;
        }
    }
    if view.mean.is_finite() {
        let y = plot.y_px(view.mean);
        dashed_hline(
            &plot.area,
            style,
            (0, plot.w()),
            y,
            alpha(style.reference, 1.0),
        )?;
    }
    Ok(plot.rect)
}
