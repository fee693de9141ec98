//! Section 3's charts: each one's name, how it is fed from the [`Lab`], and its drawing.
//!
//! Token-selection charts (note §3, issue 4 §3): per-token scores with the top-k threshold and
//! the recent window, the token strip of the kept set, and the attention mass retained per step.
//!
//! The views hold what [`crate::select`] computed (scores, the [`crate::select::Selection`] as
//! [`TokenState`]s, [`crate::select::mass_retained`]); the charts only place it on pixels.

use super::{Labels, Pixels};
use crate::chart;
use crate::chart::{AttentionMarks, ColorbarView, HeatmapFrameView, StateLabels};
use crate::lab::Lab;
use crate::state::Method;

use crate::chart::downsample::{max_finite, pixel_buckets, state_runs, top_state};
use crate::chart::layout::runs;
use crate::chart::layout::{
    alpha, axes, begin, dashed_hline, draw_err, headroom, index_text, tick_text, Axes, LegendItem,
    Mark,
};
use crate::chart::{ChartError, ChartStyle, PixelRect, TokenState};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// A chart of this section (a [`super::Chart`]): its canvas carries [`SelectChart::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectChart {
    /// The attention heatmap with the kept set marked.
    Attn,
    /// The score bars and the top-k threshold.
    Scores,
    /// The kept-set strip.
    Strip,
    /// Attention mass retained per step.
    Mass,
}

impl SelectChart {
    /// Every chart of the section, in the page's order.
    pub const ALL: &'static [SelectChart] = &[
        SelectChart::Attn,
        SelectChart::Scores,
        SelectChart::Strip,
        SelectChart::Mass,
    ];

    /// The name its canvas carries (`data-chart`).
    pub fn name(self) -> &'static str {
        match self {
            SelectChart::Attn => "attn",
            SelectChart::Scores => "scores",
            SelectChart::Strip => "strip",
            SelectChart::Mass => "mass",
        }
    }
}

/// Draws `chart` of `lab` on `root`; returns the heatmap pixels still to be put on it.
// (inlined into `render::draw`: one function over every chart compresses better in the page's
// wasm than one per section; the sizes are in benches/README.md, "The house, finished")
#[inline(always)]
pub(super) fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    chart: SelectChart,
    l: &Labels,
    style: &ChartStyle,
    attn_cache: &mut AttentionCache,
) -> Result<Option<Pixels>, ChartError> {
    match chart {
        SelectChart::Attn => draw_attn(root, lab, l, style, attn_cache).map(Some),
        SelectChart::Scores => draw_scores(root, lab, l, style).map(|_| None),
        SelectChart::Strip => draw_strip(root, lab, l, style).map(|_| None),
        SelectChart::Mass => draw_mass(root, lab, l, style).map(|_| None),
    }
}

pub(super) fn states(lab: &Lab) -> Vec<TokenState> {
    chart::token_states(&lab.select().selection)
}

/// The attention heatmap's pooled grid, kept between draws: it depends only on the data and the
/// canvas size, while B, r and the method only move the marks. At W2 (64 x 32,768) pooling is
/// most of the chart's time.
///
/// It also keeps the two colourings of that grid ([`chart::AttentionLayers`]): they depend on
/// the pool and the style, so a selection change only copies pixel columns from one or the
/// other.
#[derive(Debug, Default)]
pub struct AttentionCache {
    /// (data id, plot width, plot height, strip height) of `pooled`.
    key: Option<(u64, u32, u32, u32)>,
    pooled: Vec<f32>,
    /// The data id of `max`, the largest weight.
    max_of: Option<u64>,
    max: f32,
    /// `pooled`'s key, the colour map, the range's top (bits) and the dimming (background and
    /// fade, bits) of `layers`.
    layers_key: Option<LayersKey>,
    layers: chart::AttentionLayers,
}

/// What [`AttentionCache::layers`] were built from.
type LayersKey = (
    (u64, u32, u32, u32),
    chart::Colormap,
    u32,
    (u8, u8, u8),
    u32,
);

/// How attention weights are shown: `sqrt(max(a, 0))`, so small but real attention stays
/// visible (monotone, so it commutes with max-pooling).
fn shown_weight(a: f32) -> f32 {
    a.max(0.0).sqrt()
}

/// Section 3: the attention heatmap, dropped token columns dimmed, kept ones marked.
/// Weights are shown as `sqrt(a)` so small but real attention stays visible. `cache` keeps the
/// pooled grid for the next draw on the same data and size.
pub(super) fn draw_attn<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
    cache: &mut AttentionCache,
) -> Result<Pixels, ChartError> {
    let a = &lab.data().attention;
    let strip = (6.0 * style.scale.max(1.0)).round() as u32;
    if cache.max_of != Some(lab.data_id()) {
        cache.max = a.data().iter().copied().fold(0f32, f32::max);
        cache.max_of = Some(lab.data_id());
    }
    let hi = shown_weight(cache.max).max(f32::MIN_POSITIVE);
    let rect = chart::draw_heatmap_frame(
        root,
        &HeatmapFrameView {
            title: l.get("chart.attn.title"),
            x_label: l.get("chart.attn.x"),
            y_label: l.get("chart.attn.y"),
            x_range: (0.0, a.cols() as f64),
            y_range: (0.0, a.rows() as f64),
            strip_px: strip,
            colorbar: Some(ColorbarView {
                colormap: style.colormap,
                range: (0.0, f64::from(hi * hi)),
                label: l.get("chart.attn.bar"),
                scale: chart::BarScale::Sqrt,
            }),
            legend: l.states(),
        },
        style,
    )?;
    if rect.is_empty() {
        return Ok(Pixels {
            rect,
            rgba: Vec::new(),
        });
    }
    // The plot area's size, not the canvas's: labels in another language move its edges.
    let key = (lab.data_id(), rect.w, rect.h, strip);
    if cache.key != Some(key) {
        cache.pooled = chart::pool_attention(a.data(), a.rows(), a.cols(), rect.w, rect.h, strip)?;
        cache.key = Some(key);
    }
    let st = states(lab);
    let marks = AttentionMarks {
        strip_px: strip,
        ..AttentionMarks::new(&st, style)
    };
    let bg = marks.dim_toward;
    let layers_key = (
        key,
        style.colormap,
        hi.to_bits(),
        (bg.0, bg.1, bg.2),
        marks.dim.to_bits(),
    );
    if cache.layers_key != Some(layers_key) {
        cache.layers = chart::AttentionLayers::new(
            &cache.pooled,
            rect.w,
            rect.h,
            style.colormap,
            (0.0, hi),
            &marks,
            shown_weight,
        )?;
        cache.layers_key = Some(layers_key);
    }
    let rgba = cache.layers.compose(&marks, a.cols())?;
    Ok(Pixels { rect, rgba })
}

/// Section 3: the scores the method ranked, with the top-k threshold and the recent window.
pub(super) fn draw_scores<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let sel = lab.select();
    let t = sel.scores.len();
    let title = match lab.settings().method {
        Method::H2o => l.get("chart.scores.title.h2o"),
        Method::Snapkv => l.get("chart.scores.title.snapkv"),
        Method::Streaming => l.get("chart.scores.title.streaming"),
    };
    let recent = (sel.figures.recent_start < t).then_some((sel.figures.recent_start, t));
    let st = states(lab);
    let labels = token_labels(lab, &st);
    score_bars(
        root,
        &ScoreBarsView {
            title,
            x_label: l.get("chart.tokens"),
            y_label: l.get("chart.scores.y"),
            scores: &sel.scores,
            states: &st,
            threshold: sel.figures.threshold,
            threshold_label: l.get("chart.scores.threshold"),
            recent,
            recent_label: l.get("chart.scores.recent"),
            legend: l.states(),
            labels: &labels,
        },
        style,
    )
}

/// The most a score chart names: more would not fit beside each other on a phone.
const TOKEN_LABELS: usize = 8;

/// With the prompt's token texts: the kept sinks and heavy hitters with the highest scores (at
/// most [`TOKEN_LABELS`]), each as its text in quotes ([`quoted_token`]), the highest first (the
/// chart names those first where labels would collide).
pub(super) fn token_labels(lab: &Lab, states: &[TokenState]) -> Vec<(usize, String)> {
    let Some(texts) = lab.data().tokens.as_deref() else {
        return Vec::new();
    };
    let scores = &lab.select().scores;
    let score = |i: usize| scores.get(i).copied().unwrap_or(f32::NEG_INFINITY);
    // The highest scores first, ties to the lower token (the selection's own order), kept by
    // insertion: a sort with this comparison would add a sort's code to the page for 8 items.
    let mut named: Vec<usize> = Vec::with_capacity(TOKEN_LABELS + 1);
    for (i, st) in states.iter().enumerate() {
        if !matches!(st, TokenState::Heavy | TokenState::Sink) {
            continue;
        }
        let at = named
            .iter()
            .position(|&j| score(i) > score(j))
            .unwrap_or(named.len());
        if at < TOKEN_LABELS {
            named.insert(at, i);
            named.truncate(TOKEN_LABELS);
        }
    }
    named
        .into_iter()
        .filter_map(|i| Some((i, quoted_token(texts.get(i)?))))
        .collect()
}

/// A token's text as a label: in quotes, a line break shown as `⏎`, at most 12 characters
/// (then `…`).
pub fn quoted_token(text: &str) -> String {
    let mut out = String::from("‘");
    for (n, c) in text.chars().enumerate() {
        if n == 12 {
            out.push('…');
            break;
        }
        out.push(if c == '\n' { '⏎' } else { c });
    }
    out.push('’');
    out
}

/// Section 3: the kept set as a strip over the tokens.
pub(super) fn draw_strip<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let st = states(lab);
    token_strip(
        root,
        &TokenStripView {
            title: l.get("chart.strip.title"),
            x_label: l.get("chart.tokens"),
            states: &st,
            legend: l.states(),
        },
        style,
    )
}

/// Section 3: attention mass retained per step.
pub(super) fn draw_mass<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let sel = lab.select();
    mass_retained(
        root,
        &MassRetainedView {
            title: l.get("chart.mass.title"),
            x_label: l.get("chart.mass.x"),
            y_label: l.get("chart.mass.y"),
            mass: &sel.mass,
            mean: sel.figures.mass_mean,
            mass_label: l.get("chart.mass.line"),
            mean_label: l.get("chart.mass.mean"),
        },
        style,
    )
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
