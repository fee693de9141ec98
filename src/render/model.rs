//! The real model's charts: its KL per position under the compressed cache, with the prefill's
//! kept tokens marked under it, so a learner sees where the model started to go wrong and what
//! the cache held (section 5); and its KL against `R_overall`, one curve per policy, beside
//! section 3b's trade-off on the attention.

use super::{Labels, Pixels};
use crate::chart::layout::{axes, begin, draw_err, headroom, index_text, tick_text, Axes};
use crate::chart::{ChartError, ChartStyle};
use crate::lab::{Lab, ModelCurves, ModelView};
use crate::render::compare::{tradeoff, TradeoffCurve, TradeoffView};
use crate::render::PixelRect;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

/// A chart of this section (a [`super::Chart`]): its canvas carries [`ModelChart::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelChart {
    /// KL per position, kept tokens marked.
    Kl,
    /// Mean KL against `R_overall`, one curve per policy (shown in section 3b).
    Tradeoff,
    /// The needle test: the share of facts recalled against `R_overall`, one curve per policy.
    Needle,
}

impl ModelChart {
    /// Every chart of the section, in the page's order.
    pub const ALL: &'static [ModelChart] =
        &[ModelChart::Kl, ModelChart::Tradeoff, ModelChart::Needle];

    /// The name its canvas carries (`data-chart`).
    pub fn name(self) -> &'static str {
        match self {
            ModelChart::Kl => "kl",
            ModelChart::Tradeoff => "model-tradeoff",
            ModelChart::Needle => "needle",
        }
    }
}

/// Draws `chart` of `lab` on `root` (a titled empty frame until the model has been measured).
// (inlined into `render::draw`, as every section's is: see benches/README.md)
#[inline(always)]
pub(super) fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    chart: ModelChart,
    l: &Labels,
    style: &ChartStyle,
) -> Result<Option<Pixels>, ChartError> {
    match chart {
        ModelChart::Kl => draw_kl(root, lab.model_view(), l, style).map(|_| None),
        ModelChart::Tradeoff => draw_tradeoff(root, lab, ModelCurves::Kl, l, style).map(|_| None),
        ModelChart::Needle => draw_tradeoff(root, lab, ModelCurves::Facts, l, style).map(|_| None),
    }
}

/// The model's curves `which` against the prefill cache's `R_overall` (log scale: a budget of
/// one token saves two orders of magnitude), the current setting ringed: each policy's mean
/// KL (the trade-off, the ring the measured view), or its share of the needle test's facts
/// recalled (the full cache's level a curve of its own; the ring the curve named `current`).
fn draw_tradeoff<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    which: ModelCurves,
    l: &Labels,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let facts = which == ModelCurves::Facts;
    let sweep = lab.model_sweep(which);
    // (the accuracy's ring is its last curve, named `current`: one point)
    let (sweep, ring) = match sweep.split_last() {
        Some((last, rest)) if last.name == "current" => (rest, last.points.first().copied()),
        _ => (sweep, None),
    };
    let names: Vec<String> = sweep.iter().map(|c| format!("policy.{}", c.name)).collect();
    let curves: Vec<TradeoffCurve> = sweep
        .iter()
        .zip(&names)
        .map(|(c, n)| TradeoffCurve {
            label: l.get(n),
            points: &c.points,
        })
        .collect();
    let current = if facts {
        ring
    } else {
        lab.model_view().map(|v| (v.r_overall, v.mean_kl()))
    };
    let max = sweep
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.1))
        .chain(current.map(|p| p.1))
        .filter(|y| y.is_finite())
        .fold(0.0f64, f64::max);
    let [title, y_label] = if facts {
        ["chart.needle.title", "chart.needle.y"]
    } else {
        ["chart.model-tradeoff.title", "chart.kl.y"]
    };
    tradeoff(
        root,
        &TradeoffView {
            title: l.get(title),
            x_label: l.get("chart.model-tradeoff.x"),
            y_label: l.get(y_label),
            curves: &curves,
            current,
            current_label: l.get("chart.tradeoff.current"),
            log_x: true,
            y_top: (!facts).then(|| headroom(Some(max.max(1e-4)))),
        },
        style,
    )
}

/// The KL bars over positions `P..T` and, in a strip under the plot, each prefill token's
/// share of the shown heads that keep it (dark: kept).
pub fn draw_kl<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    view: Option<&ModelView>,
    l: &Labels,
    style: &ChartStyle,
) -> Result<(), ChartError> {
    let body = begin(root, style, l.get("chart.kl.title"), &[])?;
    let Some(v) = view else {
        return Ok(());
    };
    let t = v.tokens.max(1) as f64;
    let max = v.kl.iter().copied().fold(0.0f64, f64::max);
    let top = headroom(Some(max.max(1e-4)));
    let span = top;
    let Some(plot) = axes(
        &body,
        style,
        RangedCoordf64::from(0.0..t),
        RangedCoordf64::from(0.0..top),
        (0.0, top),
        &Axes {
            x_label: l.get("chart.kl.x"),
            y_label: l.get("chart.kl.y"),
            x_ticks: true,
            y_ticks: true,
            y_grid: true,
        },
        &|x| index_text(*x),
        &|y| tick_text(*y, span),
    )?
    else {
        return Ok(());
    };
    let (w, h) = (plot.w(), plot.h());
    let x = |pos: f64| plot.x_px(pos, 0.0, t);
    // The kept strip: the bottom tenth of the plot, one column per prefill token.
    let strip = (h / 10).max(style.px(6.0)).min(h);
    for (i, &m) in v.marks.iter().enumerate() {
        let (x0, x1) = (x(i as f64), x(i as f64 + 1.0).max(x(i as f64) + 1));
        let color = if m > 0.0 {
            style
                .states
                .heavy
                .mix(f64::from(m.clamp(0.0, 1.0)) * 0.85 + 0.15)
        } else {
            style.states.dropped.mix(0.35)
        };
        plot.area
            .draw(&Rectangle::new([(x0, h - strip), (x1, h)], color.filled()))
            .map_err(draw_err)?;
    }
    // The prefill's end: where the compressed cache starts to be read.
    let px = x(v.prefill as f64);
    plot.area
        .draw(&PathElement::new(
            vec![(px, 0), (px, h)],
            style.muted.stroke_width(style.stroke(1.0)),
        ))
        .map_err(draw_err)?;
    for (i, &kl) in v.kl.iter().enumerate() {
        let pos = (v.prefill + i) as f64;
        let (x0, x1) = (x(pos), x(pos + 1.0).max(x(pos) + 1));
        let y = plot.y_px(kl).min(h - strip - 1);
        plot.area
            .draw(&Rectangle::new(
                [(x0, y), (x1.min(w), h - strip)],
                style.primary.filled(),
            ))
            .map_err(draw_err)?;
    }
    Ok(())
}
