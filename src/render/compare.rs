//! Section 3b's charts: each one's name, how it is fed from the [`Lab`], and its drawing.
//!
//! Charts of the policy comparison (beyond the note): the quality-vs-ratio trade-off, one curve
//! per policy, and every policy's kept set as one strip per row.

use super::{Labels, Pixels};
use crate::chart;
use crate::lab::Lab;

use crate::chart::downsample::{pixel_buckets, state_runs};
use crate::chart::layout::{
    alpha, axes, begin, dashed_path, draw_err, tick_text, Axes, LegendItem, Mark,
};
use crate::chart::{ChartError, ChartStyle, PixelRect, StateLabels, TokenState};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// A chart of this section (a [`super::Chart`]): its canvas carries [`CompareChart::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareChart {
    /// Quality against `R_overall`, one curve per policy.
    Tradeoff,
    /// Every policy's kept set.
    Strips,
}

impl CompareChart {
    /// Every chart of the section, in the page's order.
    pub const ALL: &'static [CompareChart] = &[CompareChart::Tradeoff, CompareChart::Strips];

    /// The name its canvas carries (`data-chart`).
    pub fn name(self) -> &'static str {
        match self {
            CompareChart::Tradeoff => "tradeoff",
            CompareChart::Strips => "strips",
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
    chart: CompareChart,
    l: &Labels,
    style: &ChartStyle,
) -> Result<Option<Pixels>, ChartError> {
    match chart {
        CompareChart::Tradeoff => draw_tradeoff(root, lab, l, style).map(|_| None),
        CompareChart::Strips => draw_strips(root, lab, l, style).map(|_| None),
    }
}

/// curve per policy swept over B, with the current method and B ringed.
pub(super) fn draw_tradeoff<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let cmp = lab.compare();
    let points: Vec<Vec<(f64, f64)>> = cmp
        .curves
        .iter()
        .map(|c| {
            c.points
                .iter()
                .filter_map(|p| p.r_overall.map(|x| (x, p.quality.mass_mean)))
                .collect()
        })
        .collect();
    let names: Vec<String> = cmp
        .curves
        .iter()
        .map(|c| format!("policy.{}", c.policy.name()))
        .collect();
    let curves: Vec<TradeoffCurve> = names
        .iter()
        .zip(&points)
        .map(|(n, p)| TradeoffCurve {
            label: l.get(n),
            points: p,
        })
        .collect();
    let current_policy = lab.settings().method.policy();
    let current = cmp
        .figures
        .rows
        .iter()
        .find(|r| r.policy == current_policy)
        .and_then(|r| r.quality)
        .map(|q| (lab.figures().budget.data.r_overall, q.mass_mean));
    tradeoff(
        root,
        &TradeoffView {
            title: l.get("chart.tradeoff.title"),
            x_label: l.get("chart.tradeoff.x"),
            y_label: l.get("chart.tradeoff.y"),
            curves: &curves,
            current,
            current_label: l.get("chart.tradeoff.current"),
            log_x: false,
            y_top: None,
        },
        style,
    )
}

/// Beyond the note: every policy's kept set at the current B, one strip per policy.
pub(super) fn draw_strips<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let cmp = lab.compare();
    let states: Vec<(String, Vec<TokenState>)> = cmp
        .selections
        .iter()
        .filter_map(|(p, sel)| {
            sel.as_ref()
                .map(|s| (format!("policy.short.{}", p.name()), chart::token_states(s)))
        })
        .collect();
    let rows: Vec<(&str, &[TokenState])> = states
        .iter()
        .map(|(n, s)| (l.get(n), s.as_slice()))
        .collect();
    policy_strips(
        root,
        &PolicyStripsView {
            title: l.get("chart.strips.title"),
            x_label: l.get("chart.tokens"),
            rows: &rows,
            legend: l.states(),
        },
        style,
    )
}

/// One curve of the trade-off chart.
#[derive(Debug, Clone, Copy)]
pub struct TradeoffCurve<'a> {
    /// Legend text (the policy's name).
    pub label: &'a str,
    /// `(x, y)` points, e.g. `(R_overall, mass retained)`; non-finite points are skipped.
    pub points: &'a [(f64, f64)],
}

/// The trade-off chart: quality against compression, one curve per policy.
#[derive(Debug, Clone, Copy)]
pub struct TradeoffView<'a> {
    /// Title.
    pub title: &'a str,
    /// X axis name (e.g. "R_overall").
    pub x_label: &'a str,
    /// Y axis name (e.g. "attention mass retained").
    pub y_label: &'a str,
    /// The curves, drawn in palette order.
    pub curves: &'a [TradeoffCurve<'a>],
    /// The current setting, marked with a ring in the text's colour (no curve has it), and so
    /// in the legend.
    pub current: Option<(f64, f64)>,
    /// Legend text of the ring.
    pub current_label: &'a str,
    /// Whether x is on a log scale (ratios that span orders of magnitude).
    pub log_x: bool,
    /// The y axis's top (`None`: a share, `[0, 1]`).
    pub y_top: Option<f64>,
}

/// Draw the trade-off: x from 1 to the largest finite x, linear, or on a log scale with
/// `log_x` (from the smallest x where one is below 1: 16-bit codes with their scales can take
/// more bytes than fp16); y from 0 to `y_top` (1 by default).
pub fn tradeoff<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    view: &TradeoffView,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    // (curves past the palette's colours reuse them, dashed: the model's eighth curve)
    let dashed = |i: usize| i >= style.palette.len().max(1);
    let mut legend: Vec<LegendItem> = view
        .curves
        .iter()
        .enumerate()
        .map(|(i, c)| LegendItem {
            mark: if dashed(i) {
                Mark::Dash(alpha(style.palette_color(i), 1.0))
            } else {
                Mark::Line(alpha(style.palette_color(i), 1.0))
            },
            text: c.label,
        })
        .collect();
    if view.current.is_some() {
        legend.push(LegendItem {
            mark: Mark::Ring(alpha(style.foreground, 1.0)),
            text: view.current_label,
        });
    }
    let body = begin(root, style, view.title, &legend)?;
    let xs = || {
        view.curves
            .iter()
            .flat_map(|c| c.points.iter().map(|p| p.0))
            .chain(view.current.map(|p| p.0))
            .filter(|x| x.is_finite())
    };
    // (on a log scale the plot's x is log10 of the ratio, from the smallest positive one)
    let lowest = match xs().filter(|&x| x > 0.0).fold(1.0f64, f64::min) {
        m if view.log_x && m < 1.0 => m / 1.02,
        _ => 1.0,
    };
    let fx = |x: f64| if view.log_x { x.max(lowest).log10() } else { x };
    let x_hi = xs().fold(1.0f64, f64::max);
    let x_hi = if x_hi > 1.0 { x_hi * 1.02 } else { 2.0 };
    let (x_lo, x_hi) = (fx(lowest), fx(x_hi));
    let y_top = view
        .y_top
        .filter(|y| y.is_finite() && *y > 0.0)
        .unwrap_or(1.0);
    let x_text = |v: &f64| {
        if view.log_x {
            // (a ratio to two figures below 10: 1.6, 3.2; "1", not "1.0")
            let r = 10f64.powf(*v);
            let t = tick_text(r, if r < 10.0 { 1.0 } else { 10.0 });
            t.strip_suffix(".0").map_or(t.clone(), str::to_string)
        } else {
            tick_text(*v, x_hi - 1.0)
        }
    };
    let Some(plot) = axes(
        &body,
        style,
        RangedCoordf64::from(x_lo..x_hi),
        RangedCoordf64::from(0.0..y_top),
        (0.0, y_top),
        &Axes {
            x_label: view.x_label,
            y_label: view.y_label,
            x_ticks: true,
            y_ticks: true,
            y_grid: true,
        },
        &x_text,
        &|v: &f64| tick_text(*v, y_top),
    )?
    else {
        return Ok(PixelRect::default());
    };
    for (i, c) in view.curves.iter().enumerate() {
        let color = style.palette_color(i);
        // (in order of x by insertion, ties kept in their order: a curve has a few points,
        // and the library's stable sort would bring its code into the page's module,
        // benches/README.md "The needle test")
        let mut pts: Vec<(f64, f64)> = Vec::with_capacity(c.points.len());
        for &(x, y) in c
            .points
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
        {
            let at = pts.iter().position(|p| p.0 > x).unwrap_or(pts.len());
            pts.insert(at, (x, y));
        }
        let px: Vec<(i32, i32)> = pts
            .iter()
            .map(|&(x, y)| (plot.x_px(fx(x), x_lo, x_hi), plot.y_px(y)))
            .collect();
        if dashed(i) {
            dashed_path(&plot.area, style, &px, color)?;
        } else if px.len() > 1 {
            plot.area
                .draw(&PathElement::new(
                    px.clone(),
                    color.stroke_width(style.stroke(1.5)),
                ))
                .map_err(draw_err)?;
        }
        for p in px {
            plot.area
                .draw(&Circle::new(p, style.px(1.5).max(1) as u32, color.filled()))
                .map_err(draw_err)?;
        }
    }
    if let Some((x, y)) = view.current {
        if x.is_finite() && y.is_finite() {
            let p = (plot.x_px(fx(x), x_lo, x_hi), plot.y_px(y));
            plot.area
                .draw(&Circle::new(
                    p,
                    style.px(6.0).max(2) as u32,
                    style.foreground.stroke_width(style.stroke(2.0)),
                ))
                .map_err(draw_err)?;
        }
    }
    Ok(plot.rect)
}

/// Every policy's kept set: one labelled strip per row over the same token axis.
#[derive(Debug, Clone, Copy)]
pub struct PolicyStripsView<'a> {
    /// Title.
    pub title: &'a str,
    /// X axis name.
    pub x_label: &'a str,
    /// `(row label, per-token states)`; all rows must have the same length.
    pub rows: &'a [(&'a str, &'a [TokenState])],
    /// Legend texts of the states.
    pub legend: StateLabels<'a>,
}

/// CSS pixels between a strip's row label and the plot.
const LABEL_GAP: u32 = 4;

/// Draw one strip per policy; each pixel column shows its bucket's most important state.
pub fn policy_strips<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    view: &PolicyStripsView,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let n = view.rows.first().map_or(0, |r| r.1.len());
    if let Some((_, bad)) = view.rows.iter().find(|r| r.1.len() != n) {
        return Err(ChartError::LengthMismatch {
            name: "states",
            len: bad.len(),
            other: "the first row",
            other_len: n,
        });
    }
    // The row labels sit in the left label area: at least as wide as the longest of them
    // ("StreamingLLM", "H2O mean" overflowed the shared 56 px).
    let mut widest = 0;
    for (label, _) in view.rows {
        let (w, _) = root
            .estimate_text_size(label, &style.text(0.8, style.foreground))
            .map_err(draw_err)?;
        widest = widest.max(w.min(10_000));
    }
    let need = (f64::from(widest) / style.k()).ceil() as u32 + LABEL_GAP + 4;
    let style = &ChartStyle {
        y_label_area: style.y_label_area.max(need),
        ..style.clone()
    };
    let legend = view.legend.legend(style);
    let body = begin(root, style, view.title, &legend)?;
    let m = view.rows.len().max(1);
    let Some(plot) = axes(
        &body,
        style,
        RangedCoordf64::from(0.0..(n.max(1) as f64)),
        RangedCoordf64::from(0.0..(m as f64)),
        (0.0, m as f64),
        &Axes {
            x_label: view.x_label,
            y_label: "",
            x_ticks: n > 0,
            y_ticks: false,
            y_grid: false,
        },
        &|v: &f64| tick_text(*v, n.max(1) as f64),
        &|_: &f64| String::new(),
    )?
    else {
        return Ok(PixelRect::default());
    };
    let buckets = pixel_buckets(n, plot.w().max(1) as usize);
    let row_h = plot.h() / m as i32;
    let label_style = style
        .text(0.8, style.foreground)
        .pos(Pos::new(HPos::Right, VPos::Center));
    for (ri, (label, states)) in view.rows.iter().enumerate() {
        let y0 = ri as i32 * row_h;
        let y1 = y0 + (row_h - style.px(2.0)).max(1);
        // One rectangle per run of equal states (a per-pixel-column rectangle was ~1,000
        // canvas calls per row).
        for (from, to, st) in state_runs(states, &buckets) {
            let color = match st {
                TokenState::Dropped => alpha(style.states.of(st), 0.35),
                _ => alpha(style.states.of(st), 1.0),
            };
            let x0 = plot.col(from, buckets.len());
            let x1 = plot.col(to, buckets.len()).max(x0 + 1);
            plot.area
                .draw(&Rectangle::new([(x0, y0), (x1, y1)], color.filled()))
                .map_err(draw_err)?;
        }
        // Row labels sit in the left label area, right-aligned against the plot.
        root.draw(&Text::new(
            label.to_string(),
            (
                plot.rect.x - style.px(f64::from(LABEL_GAP)),
                plot.rect.y + (y0 + y1) / 2,
            ),
            label_style.clone(),
        ))
        .map_err(draw_err)?;
    }
    Ok(plot.rect)
}
