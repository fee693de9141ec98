//! Section 1's charts: each one's name, how it is fed from the [`Lab`], and its drawing.
//!
//! The budget bar (note §1, issue 4 §1): `M_KV,final = T_kept x bytes_token + M_meta + M_index`
//! as a stacked bar of its terms, against the full-precision `M_fp`.
//!
//! The view holds what [`crate::budget::breakdown`] computed, already converted to the unit the
//! page shows (bytes, MiB or GiB) and formatted as text by the page.

use super::{Labels, Pixels};
use crate::lab::Lab;

use crate::chart::layout::{
    alpha, axes, begin, draw_err, rect_of, tick_text, Axes, LegendItem, Mark,
};
use crate::chart::{ChartError, ChartStyle, PixelRect};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// A chart of this section (a [`super::Chart`]): its canvas carries [`BudgetChart::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetChart {
    /// `M_KV,final` on the data.
    Data,
    /// `M_KV,final` on the model.
    Model,
}

impl BudgetChart {
    /// Every chart of the section, in the page's order.
    pub const ALL: &'static [BudgetChart] = &[BudgetChart::Data, BudgetChart::Model];

    /// The name its canvas carries (`data-chart`).
    pub fn name(self) -> &'static str {
        match self {
            BudgetChart::Data => "budget-data",
            BudgetChart::Model => "budget-model",
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
    chart: BudgetChart,
    l: &Labels,
    style: &ChartStyle,
) -> Result<Option<Pixels>, ChartError> {
    match chart {
        BudgetChart::Data => draw_budget(root, lab, l, style, false).map(|_| None),
        BudgetChart::Model => draw_budget(root, lab, l, style, true).map(|_| None),
    }
}

/// most `max`, and its size in bytes.
pub fn byte_unit(max: u64) -> (&'static str, f64) {
    const UNITS: [(&str, u64); 5] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("B", 1),
    ];
    UNITS
        .iter()
        .find(|(_, size)| max >= *size)
        .map_or(("B", 1.0), |&(unit, size)| (unit, size as f64))
}

/// Bytes as text: `512 B`, `12.3 KiB`, `4.50 MiB`, `1.25 GiB`.
pub fn bytes_text(b: u64) -> String {
    // Ties round up, as the page's JavaScript `toFixed` does for the same figures in the
    // formulas (Rust's `{:.1}` would round 9.25 to 9.2, `toFixed(1)` gives 9.3).
    let fixed = |v: f64, digits: usize| {
        let scale = 10f64.powi(digits as i32);
        format!("{:.*}", digits, (v * scale).round() / scale)
    };
    let v = b as f64;
    if b < 1024 {
        format!("{b} B")
    } else if v < 1024.0 * 1024.0 {
        format!("{} KiB", fixed(v / 1024.0, 1))
    } else if v < 1024.0 * 1024.0 * 1024.0 {
        format!("{} MiB", fixed(v / (1024.0 * 1024.0), 2))
    } else {
        format!("{} GiB", fixed(v / (1024.0 * 1024.0 * 1024.0), 2))
    }
}

/// Section 1: `M_KV,final` as stacked terms beside `M_fp`; `model` picks the extrapolated
/// breakdown instead of the one on the data.
pub(super) fn draw_budget<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
    model: bool,
) -> Result<PixelRect, ChartError> {
    let f = &lab.figures().budget;
    let b = if model { &f.extrapolated } else { &f.data };
    let parts = [
        ("budget.codes", b.m_codes),
        ("budget.fpkept", b.m_fp_kept),
        ("budget.scales", b.m_scales),
        ("budget.zeros", b.m_zero_points),
        ("budget.score", b.m_score_state),
        ("budget.index", b.m_index),
    ];
    let texts: Vec<String> = parts.iter().map(|(_, v)| bytes_text(*v)).collect();
    // The axis counts in the binary unit of the larger bar, so its ticks read "0 … 160" KiB
    // or "0 … 5" GiB rather than "1.0e9".
    let (unit, size) = byte_unit(b.m_final.max(b.m_fp));
    let terms: Vec<BudgetTerm> = parts
        .iter()
        .zip(&texts)
        .map(|((k, v), t)| BudgetTerm {
            label: l.get(k),
            value: *v as f64 / size,
            value_text: t,
        })
        .collect();
    let x_label = format!("{} ({unit})", l.get("chart.budget.x"));
    let final_text = bytes_text(b.m_final);
    let fp_text = bytes_text(b.m_fp);
    let title = if model {
        l.get("chart.budget.title.model")
            .replace("{model}", &f.model_name)
    } else {
        l.get("chart.budget.title.data").to_string()
    };
    budget_bar(
        root,
        &BudgetBarView {
            title: &title,
            x_label: &x_label,
            final_label: l.get("budget.final"),
            terms: &terms,
            final_text: &final_text,
            fp_label: l.get("budget.fp"),
            fp_value: b.m_fp as f64 / size,
            fp_text: &fp_text,
        },
        style,
    )
}

/// One term of `M_KV,final`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetTerm<'a> {
    /// Its name, e.g. "codes", "fp kept", "scales", "zero points", "score state", "index".
    pub label: &'a str,
    /// Its size in the unit of the x axis (values that are not finite and positive draw no
    /// segment, but the term stays in the legend).
    pub value: f64,
    /// Its size as the page formats it, e.g. "1.02 GiB"; shown after the label in the legend.
    pub value_text: &'a str,
}

/// `M_KV,final` as stacked terms beside `M_fp`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetBarView<'a> {
    /// Chart title ("" for none).
    pub title: &'a str,
    /// x axis name with its unit, e.g. "GiB".
    pub x_label: &'a str,
    /// Name of the stacked bar, e.g. "M_KV,final".
    pub final_label: &'a str,
    /// The terms of `M_KV,final`, stacked left to right in this order (coloured by
    /// [`ChartStyle::palette`] in order).
    pub terms: &'a [BudgetTerm<'a>],
    /// The total as text, shown at the end of the stacked bar, e.g. "1.31 GiB (R = 12.2x)".
    pub final_text: &'a str,
    /// Name of the comparison bar, e.g. "M_fp (full precision)".
    pub fp_label: &'a str,
    /// `M_fp` in the unit of the x axis.
    pub fp_value: f64,
    /// `M_fp` as text, shown at the end of its bar.
    pub fp_text: &'a str,
}

/// Draw the stacked bar of `M_KV,final`'s terms above a bar of `M_fp`, each named above its
/// left end and with its total at its right end; the legend lists every term as
/// "label value_text" with its colour.
///
/// The x axis spans `[0, 1.25 max(Σ terms, M_fp)]` (room for the totals). A positive term
/// too small to see still gets one pixel.
pub fn budget_bar<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    view: &BudgetBarView,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let texts: Vec<String> = view
        .terms
        .iter()
        .map(|t| match (t.label.is_empty(), t.value_text.is_empty()) {
            (true, _) => String::new(),
            (false, true) => t.label.to_string(),
            (false, false) => format!("{} {}", t.label, t.value_text),
        })
        .collect();
    let legend: Vec<LegendItem> = texts
        .iter()
        .enumerate()
        .map(|(i, text)| LegendItem {
            mark: Mark::Box(alpha(style.palette_color(i), 1.0)),
            text,
        })
        .collect();
    let body = begin(root, style, view.title, &legend)?;
    let usable = |v: f64| if v.is_finite() && v > 0.0 { v } else { 0.0 };
    let sum: f64 = view.terms.iter().map(|t| usable(t.value)).sum();
    let fp = usable(view.fp_value);
    let max = sum.max(fp);
    // The axis runs to 1.25 x the longer bar, or further when a bar's total, written right of
    // it, would not fit on the canvas by then (a narrow screen).
    let mut x_hi = if max > 0.0 && (max * 1.25).is_finite() {
        max * 1.25
    } else {
        1.0
    };
    let plot_w = f64::from(rect_of(&body).w)
        - f64::from(style.px(f64::from(style.y_label_area.min(400))))
        - f64::from(style.px(16.0));
    for (value, text) in [(sum, view.final_text), (fp, view.fp_text)] {
        let (tw, _) = body
            .estimate_text_size(text, &style.text(0.9, style.foreground))
            .map_err(draw_err)?;
        // (the bar's end, its gap, the text, within the plot and most of its right margin)
        let room = plot_w + f64::from(style.px(14.0))
            - f64::from(style.px(4.0))
            - f64::from(tw.min(10_000));
        if value > 0.0 && room > plot_w * 0.25 {
            let need = value * plot_w / room;
            if need.is_finite() && need > x_hi {
                x_hi = need;
            }
        }
    }
    let fx = |v: &f64| tick_text(*v, x_hi);
    let Some(plot) = axes(
        &body,
        style,
        RangedCoordf64::from(0.0..x_hi),
        RangedCoordf64::from(0.0..2.0),
        (0.0, 2.0),
        &Axes {
            x_label: view.x_label,
            y_label: "",
            x_ticks: true,
            y_ticks: false,
            y_grid: false,
        },
        &fx,
        &|_: &f64| String::new(),
    )?
    else {
        return Ok(PixelRect::default());
    };
    let name = style
        .text(0.9, style.foreground)
        .pos(Pos::new(HPos::Left, VPos::Bottom));
    let total = style
        .text(0.9, style.foreground)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let pad = style.px(4.0);

    // (band bottom, band top) in y units: M_KV,final on top, M_fp below.
    let bars = [
        (1.1, 1.6, view.final_label, view.final_text),
        (0.1, 0.6, view.fp_label, view.fp_text),
    ];
    for (i, &(b0, b1, label, text)) in bars.iter().enumerate() {
        let (y0, y1) = (plot.y_px(b1), plot.y_px(b0).max(plot.y_px(b1) + 1));
        let mut end = 0;
        if i == 0 {
            let mut acc = 0.0;
            for (k, t) in view.terms.iter().enumerate() {
                let v = usable(t.value);
                if v <= 0.0 {
                    continue;
                }
                // A run of tiny terms may shift later ones right by a pixel each.
                let x0 = plot.x_px(acc, 0.0, x_hi).max(end);
                acc += v;
                let x1 = plot.x_px(acc, 0.0, x_hi).max(x0 + 1);
                plot.area
                    .draw(&Rectangle::new(
                        [(x0, y0), (x1, y1)],
                        style.palette_color(k).filled(),
                    ))
                    .map_err(draw_err)?;
                end = x1;
            }
        } else if fp > 0.0 {
            end = plot.x_px(fp, 0.0, x_hi).max(1);
            plot.area
                .draw(&Rectangle::new(
                    [(0, y0), (end, y1)],
                    alpha(style.muted, 0.6).filled(),
                ))
                .map_err(draw_err)?;
        }
        if !label.is_empty() {
            plot.area
                .draw_text(label, &name, (pad, y0 - style.px(3.0)))
                .map_err(draw_err)?;
        }
        if !text.is_empty() {
            plot.area
                .draw_text(text, &total, (end + pad, (y0 + y1) / 2))
                .map_err(draw_err)?;
        }
    }
    Ok(plot.rect)
}
