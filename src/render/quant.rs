//! Section 2's charts: each one's name, how it is fed from the [`Lab`], and its drawing.
//!
//! Quantization charts (note §2, issue 4 §2): a channel's histogram under its quantization
//! grid, per-group error against `scale/2`, and per-row squared error against
//! `1/4 Σ_j scale_j²`.
//!
//! The views hold what [`crate::quant`] computed ([`GroupError`], [`RowError`], the grid of
//! [`crate::quant::Quantized::grid`]); the charts only place it on pixels.

use super::{Labels, Pixels};
use crate::chart;
use crate::chart::layout::runs;
use crate::chart::{ColorbarView, HeatmapFrameView, StateLabels};
use crate::lab::Lab;

use crate::chart::downsample::{max_finite, pixel_buckets};
use crate::chart::layout::{
    alpha, axes, begin, boxed_text, draw_err, headroom, index_text, tick_text, usable_range, Axes,
    LegendItem, Mark, Plot,
};
use crate::chart::{ChartError, ChartStyle, PixelRect};
use crate::quant::{GroupError, RowError};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// A chart of this section (a [`super::Chart`]): its canvas carries [`QuantChart::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantChart {
    /// The shown group's histogram with its grid.
    Hist,
    /// Per-group max error against `scale/2`.
    Groups,
    /// Per-token squared error against `1/4 sum scale^2`.
    Rows,
    /// `|x - x_hat|` over tokens and channels.
    Errmap,
}

impl QuantChart {
    /// Every chart of the section, in the page's order.
    pub const ALL: &'static [QuantChart] = &[
        QuantChart::Hist,
        QuantChart::Groups,
        QuantChart::Rows,
        QuantChart::Errmap,
    ];

    /// The name its canvas carries (`data-chart`).
    pub fn name(self) -> &'static str {
        match self {
            QuantChart::Hist => "hist",
            QuantChart::Groups => "groups",
            QuantChart::Rows => "rows",
            QuantChart::Errmap => "errmap",
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
    chart: QuantChart,
    l: &Labels,
    style: &ChartStyle,
) -> Result<Option<Pixels>, ChartError> {
    match chart {
        QuantChart::Hist => draw_hist(root, lab, l, style).map(|_| None),
        QuantChart::Groups => draw_groups(root, lab, l, style).map(|_| None),
        QuantChart::Rows => draw_rows(root, lab, l, style).map(|_| None),
        QuantChart::Errmap => draw_errmap(root, lab, l, style).map(Some),
    }
}

/// Histogram of `values` in `bins` equal bins over `[min, max]` (a zero range is widened).
pub fn histogram(values: &[f32], bins: usize) -> ((f64, f64), Vec<u32>) {
    let bins = bins.max(1);
    let (lo, hi) = values
        .iter()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(f64::from(v)), b.max(f64::from(v)))
        });
    let (lo, hi) = if !lo.is_finite() {
        (0.0, 1.0)
    } else if hi - lo <= f64::EPSILON * lo.abs().max(1.0) {
        (lo - 0.5, hi + 0.5)
    } else {
        (lo, hi)
    };
    let mut counts = vec![0u32; bins];
    let w = (hi - lo) / bins as f64;
    for &v in values.iter().filter(|v| v.is_finite()) {
        let i = (((f64::from(v) - lo) / w) as usize).min(bins - 1);
        counts[i] += 1;
    }
    ((lo, hi), counts)
}

/// The shown group in words ("channel 39, tokens 0–31", "token 0", "the whole tensor"), from
/// the `chart.group.*` templates the page's formulas use too.
pub fn group_name(g: &crate::lab::ShownGroup, l: &Labels) -> String {
    let whole = g.from == 0 && g.to + 1 >= g.len;
    let key = match (g.granularity, whole) {
        ("per-channel", true) => "chart.group.channel",
        ("per-channel", false) => "chart.group.channel-run",
        ("per-token", true) => "chart.group.token",
        ("per-token", false) => "chart.group.token-run",
        _ => "chart.group.tensor",
    };
    l.get(key)
        .replace("{index}", &g.index.to_string())
        .replace("{from}", &g.from.to_string())
        .replace("{to}", &g.to.to_string())
}

/// Section 2: the shown group's histogram with its quantization grid over it.
pub(super) fn draw_hist<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let q = lab.quant();
    let f = &q.figures;
    let values = lab.shown_group_values();
    let bins = (values.len() / 4).clamp(8, 80);
    let ((lo, hi), counts) = histogram(values, bins);
    let title = l
        .get("chart.hist.title")
        .replace("{group}", &group_name(&f.group, l));
    quant_histogram(
        root,
        &QuantHistogramView {
            title: &title,
            x_label: l.get("chart.hist.x"),
            y_label: l.get("chart.hist.y"),
            bin_range: (lo, hi),
            counts: &counts,
            grid: &q.group_grid,
            min: f.group_min,
            max: f.group_max,
            counts_label: l.get("chart.hist.counts"),
            grid_label: l.get("chart.hist.grid"),
            min_label: l.get("chart.hist.min"),
            max_label: l.get("chart.hist.max"),
            thinned_note: l.get("chart.hist.thinned"),
        },
        style,
    )
}

/// Section 2: per-group max error against `scale/2`.
pub(super) fn draw_groups<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    group_error_bars(
        root,
        &GroupErrorView {
            title: l.get("chart.groups.title"),
            x_label: l.get("chart.groups.x"),
            y_label: l.get("chart.groups.y"),
            errors: &lab.quant().groups,
            error_label: l.get("chart.groups.error"),
            bound_label: l.get("chart.groups.bound"),
            alarm_label: l.get("chart.alarm"),
        },
        style,
    )
}

/// Section 2: per-row squared error against `1/4 sum scale^2`.
pub(super) fn draw_rows<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    row_error_vs_bound(
        root,
        &RowErrorView {
            title: l.get("chart.rows.title"),
            x_label: l.get("chart.rows.x"),
            y_label: l.get("chart.rows.y"),
            rows: &lab.quant().rows,
            error_label: l.get("chart.rows.error"),
            bound_label: l.get("chart.rows.bound"),
            alarm_label: l.get("chart.alarm"),
        },
        style,
    )
}

/// Section 2: the `|x - x_hat|` heatmap (tokens along x): draws the frame, returns the pixels.
pub(super) fn draw_errmap<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<Pixels, ChartError> {
    let q = lab.quant();
    let (t, d) = (q.quantized.rows(), q.quantized.cols());
    // max |x - x_hat| over every element = the largest per-group maximum (the same f32 errors,
    // from the same analysis): a pass over the groups instead of over T x d errors.
    let max_err = q.groups.iter().map(|g| g.max_abs).fold(0f32, f32::max);
    let rect = chart::draw_heatmap_frame(
        root,
        &HeatmapFrameView {
            title: l.get("chart.errmap.title"),
            x_label: l.get("chart.errmap.x"),
            y_label: l.get("chart.errmap.y"),
            x_range: (0.0, t as f64),
            y_range: (0.0, d as f64),
            strip_px: 0,
            colorbar: Some(ColorbarView {
                colormap: style.colormap,
                range: (0.0, f64::from(max_err)),
                label: l.get("chart.errmap.bar"),
                scale: chart::BarScale::Linear,
            }),
            legend: StateLabels {
                sink: "",
                heavy: "",
                recent: "",
                dropped: "",
            },
        },
        style,
    )?;
    if rect.is_empty() {
        return Ok(Pixels {
            rect,
            rgba: Vec::new(),
        });
    }
    let rgba =
        chart::error_heatmap_rgba(&q.abs_err, t, d, rect.w, rect.h, style.colormap, max_err)?;
    Ok(Pixels { rect, rgba })
}

/// Grid lines beyond this count are drawn lighter.
const DENSE_GRID: usize = 64;

/// A channel's value histogram with its quantization grid (note §2.1/§2.3: the values
/// `x_hat = scale (q - zp)` a code can take).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantHistogramView<'a> {
    /// Chart title ("" for none).
    pub title: &'a str,
    /// x axis name, e.g. "value".
    pub x_label: &'a str,
    /// y axis name, e.g. "count".
    pub y_label: &'a str,
    /// `[lo, hi]` of the equal-width bins `counts` was taken over.
    pub bin_range: (f64, f64),
    /// Number of the channel's values in each bin, left to right.
    pub counts: &'a [u32],
    /// The quantization grid: every value `x_hat` a code decodes to, ascending.
    pub grid: &'a [f64],
    /// The channel's smallest value (NaN: not marked).
    pub min: f64,
    /// The channel's largest value (NaN: not marked).
    pub max: f64,
    /// Legend text for the bars, e.g. "values".
    pub counts_label: &'a str,
    /// Legend text for the grid lines, e.g. "grid x_hat = scale·q".
    pub grid_label: &'a str,
    /// Text beside the min marker, e.g. "min −2.31".
    pub min_label: &'a str,
    /// Text beside the max marker, e.g. "max 2.31".
    pub max_label: &'a str,
    /// Note shown when the grid is too dense to draw every line and only every k-th is drawn:
    /// `{k}`, `{shown}` and `{total}` are replaced by the numbers, e.g.
    /// "every {k}th of {total} grid lines shown". "" for no note.
    pub thinned_note: &'a str,
}

/// Draw a channel's histogram (bars) with its quantization grid (vertical lines) and its
/// min/max (dashed markers).
///
/// Layout rules: the x axis spans the bins, the min/max and the grid; the y axis spans
/// `[0, 1.1 max(count)]`. Bins with count 0 draw no bar; more bins than pixel columns are
/// merged (counts summed). Up to 64 visible grid lines are drawn at opacity 0.55, more at
/// 0.25; when they would be closer than 2 pixels only every `k`-th is drawn,
/// `k = ceil(2 n / width)`, and `thinned_note` says so.
pub fn quant_histogram<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    view: &QuantHistogramView,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let bar_color = alpha(style.primary, 0.6);
    let legend = [
        LegendItem {
            mark: Mark::Box(bar_color),
            text: view.counts_label,
        },
        LegendItem {
            mark: Mark::Line(alpha(style.muted, 0.55)),
            text: view.grid_label,
        },
    ];
    let body = begin(root, style, view.title, &legend)?;

    let (blo, bhi) = view.bin_range;
    let bins_ok = blo.is_finite() && bhi.is_finite() && bhi > blo && !view.counts.is_empty();
    let mut ends: Vec<f64> = Vec::new();
    if bins_ok {
        ends.extend([blo, bhi]);
    }
    ends.extend([view.min, view.max]);
    let grid_lo = view
        .grid
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(f64::INFINITY, f64::min);
    ends.extend([
        grid_lo,
        max_finite(view.grid.iter().copied()).unwrap_or(f64::NAN),
    ]);
    let lo = ends
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(f64::INFINITY, f64::min);
    let hi = max_finite(ends.iter().copied()).unwrap_or(f64::NAN);
    let (lo, hi) = usable_range(lo, hi);
    let pad = (hi - lo) * 0.02;
    let (lo, hi) = (lo - pad, hi + pad);
    let top = headroom(max_finite(view.counts.iter().map(|&c| f64::from(c))));

    let fx = |v: &f64| tick_text(*v, hi - lo);
    let fy = |v: &f64| tick_text(*v, top);
    let Some(plot) = axes(
        &body,
        style,
        RangedCoordf64::from(lo..hi),
        RangedCoordf64::from(0.0..top),
        (0.0, top),
        &Axes {
            x_label: view.x_label,
            y_label: view.y_label,
            x_ticks: true,
            y_ticks: true,
            y_grid: true,
        },
        &fx,
        &fy,
    )?
    else {
        return Ok(PixelRect::default());
    };
    let (w, h) = (plot.w(), plot.h());

    // The grid underneath: dense at 8 bits, a few coarse steps at 2-4 bits.
    let visible: Vec<f64> = view
        .grid
        .iter()
        .copied()
        .filter(|g| g.is_finite() && *g >= lo && *g <= hi)
        .collect();
    let n = visible.len();
    let k = if n * 2 > w.max(1) as usize {
        (n * 2).div_ceil(w.max(1) as usize)
    } else {
        1
    };
    let grid_color = alpha(style.muted, if n > DENSE_GRID { 0.25 } else { 0.55 });
    for g in visible.iter().step_by(k) {
        let x = plot.x_px(*g, lo, hi);
        plot.area
            .draw(&PathElement::new(
                vec![(x, 0), (x, h - 1)],
                grid_color.stroke_width(1),
            ))
            .map_err(draw_err)?;
    }

    if bins_ok {
        let nb = view.counts.len();
        let width = (bhi - blo) / nb as f64;
        for r in pixel_buckets(nb, w.max(1) as usize) {
            let count: u64 = view
                .counts
                .get(r.clone())
                .unwrap_or_default()
                .iter()
                .map(|&c| u64::from(c))
                .sum();
            if count == 0 {
                continue;
            }
            let x0 = plot.x_px(blo + r.start as f64 * width, lo, hi);
            let x1 = plot.x_px(blo + r.end as f64 * width, lo, hi).max(x0 + 1);
            plot.area
                .draw(&Rectangle::new(
                    [(x0, plot.y_px(count as f64)), (x1, h)],
                    bar_color.filled(),
                ))
                .map_err(draw_err)?;
        }
    }

    let label = style.text(0.85, style.foreground);
    let row = (style.font_px(0.85) * 1.4).ceil() as i32;
    for (v, text, left) in [
        (view.min, view.min_label, true),
        (view.max, view.max_label, false),
    ] {
        if !v.is_finite() || v < lo || v > hi {
            continue;
        }
        let x = plot.x_px(v, lo, hi);
        dashed_vline(&plot, style, x, alpha(style.accent, 1.0))?;
        if !text.is_empty() {
            let (anchor, dx) = if left {
                (HPos::Left, style.px(4.0))
            } else {
                (HPos::Right, -style.px(4.0))
            };
            boxed_text(
                &plot.area,
                style,
                text,
                &label.pos(Pos::new(anchor, VPos::Top)),
                (x + dx, style.px(3.0)),
                alpha(style.background, 0.85),
            )?;
        }
    }
    if k > 1 && !view.thinned_note.is_empty() {
        let shown = n.div_ceil(k);
        let note = view
            .thinned_note
            .replace("{k}", &k.to_string())
            .replace("{shown}", &shown.to_string())
            .replace("{total}", &n.to_string());
        boxed_text(
            &plot.area,
            style,
            &note,
            &style
                .text(0.85, style.foreground)
                .pos(Pos::new(HPos::Right, VPos::Top)),
            (w - style.px(4.0), style.px(6.0) + row),
            alpha(style.background, 0.85),
        )?;
    }
    Ok(plot.rect)
}

/// A dashed vertical line over the full plot height at plot-local column `x`.
fn dashed_vline<DB: DrawingBackend>(
    plot: &Plot<DB>,
    style: &ChartStyle,
    x: i32,
    color: RGBAColor,
) -> Result<(), ChartError> {
    let dash = style.px(6.0).max(1);
    let gap = style.px(4.0).max(1);
    let mut y = 0;
    while y < plot.h() {
        let e = (y + dash).min(plot.h());
        plot.area
            .draw(&PathElement::new(
                vec![(x, y), (x, e)],
                color.stroke_width(style.stroke(1.5)),
            ))
            .map_err(draw_err)?;
        y = e + gap;
    }
    Ok(())
}

/// Per-group measured error against its bound (note §2.2: `|x - x_hat| <= scale/2`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupErrorView<'a> {
    /// Chart title ("" for none).
    pub title: &'a str,
    /// x axis name, e.g. "channel" or "group".
    pub x_label: &'a str,
    /// y axis name, e.g. "max |x − x̂|".
    pub y_label: &'a str,
    /// One entry per group, in group order ([`crate::quant::group_errors`]).
    pub errors: &'a [GroupError],
    /// Legend text for the bars.
    pub error_label: &'a str,
    /// Legend text for the bound marks, e.g. "scale/2".
    pub bound_label: &'a str,
    /// Legend text for bars above their bound; shown only when there is one.
    pub alarm_label: &'a str,
}

/// Draw per-group `max|x - x_hat|` as bars with each group's bound `scale/2` as a tick over
/// its bar.
///
/// With more groups than pixel columns, groups are bucketed per column ([`pixel_buckets`]): the
/// bar is the bucket's largest error, the tick its largest bound, and the bar takes the
/// `alarm` colour if any group in it exceeds its own bound after `f32` round-off
/// (`max_abs > limit`, [`GroupError::limit`]).
/// Buckets narrower than 3 pixels draw the bounds as one step line instead of ticks and mark
/// alarm buckets with a dot. The y axis spans `[0, 1.1 max(error, bound)]`. NaN entries are
/// skipped.
pub fn group_error_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    view: &GroupErrorView,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let above = |e: &GroupError| f64::from(e.max_abs) > e.limit;
    let any_alarm = view.errors.iter().any(above);
    let mut legend = vec![
        LegendItem {
            mark: Mark::Box(alpha(style.primary, 1.0)),
            text: view.error_label,
        },
        LegendItem {
            mark: Mark::Line(alpha(style.reference, 1.0)),
            text: view.bound_label,
        },
    ];
    if any_alarm {
        legend.push(LegendItem {
            mark: Mark::Box(alpha(style.alarm, 1.0)),
            text: view.alarm_label,
        });
    }
    let body = begin(root, style, view.title, &legend)?;
    let n = view.errors.len();
    let top = headroom(max_finite(
        view.errors
            .iter()
            .flat_map(|e| [f64::from(e.max_abs), f64::from(e.bound)]),
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

    let buckets = pixel_buckets(n, plot.w().max(1) as usize);
    let m = buckets.len();
    let bars: Vec<(Option<f64>, Option<f64>, bool)> = buckets
        .iter()
        .map(|r| {
            let g = view.errors.get(r.clone()).unwrap_or_default();
            (
                max_finite(g.iter().map(|e| f64::from(e.max_abs))),
                max_finite(g.iter().map(|e| f64::from(e.bound))),
                g.iter().any(above),
            )
        })
        .collect();
    let narrow = m > 0 && plot.col(1, m) - plot.col(0, m) < 3;
    let h = plot.h();
    for (b, &(err, _, alarm)) in bars.iter().enumerate() {
        let Some(err) = err else { continue };
        let (c0, c1) = (plot.col(b, m), plot.col(b + 1, m));
        let gap = if c1 - c0 >= 4 {
            ((c1 - c0) / 6).max(1)
        } else {
            0
        };
        let color = if alarm { style.alarm } else { style.primary };
        plot.area
            .draw(&Rectangle::new(
                [(c0 + gap, plot.y_px(err)), (c1 - gap, h)],
                color.filled(),
            ))
            .map_err(draw_err)?;
        if alarm && narrow {
            plot.area
                .draw(&Circle::new(
                    ((c0 + c1) / 2, plot.y_px(err) - style.px(4.0)),
                    style.px(3.0).max(1) as u32,
                    style.alarm.filled(),
                ))
                .map_err(draw_err)?;
        }
    }
    let bound_style = style.reference.stroke_width(style.stroke(2.0));
    if narrow {
        let mut seg: Vec<(i32, i32)> = Vec::new();
        for (b, &(_, bound, _)) in bars.iter().enumerate() {
            match bound {
                Some(v) => {
                    let y = plot.y_px(v);
                    seg.push((plot.col(b, m), y));
                    seg.push((plot.col(b + 1, m), y));
                }
                None => flush_path(&plot, &mut seg, bound_style)?,
            }
        }
        flush_path(&plot, &mut seg, bound_style)?;
    } else {
        for (b, &(_, bound, _)) in bars.iter().enumerate() {
            let Some(v) = bound else { continue };
            let y = plot.y_px(v);
            plot.area
                .draw(&PathElement::new(
                    vec![(plot.col(b, m), y), (plot.col(b + 1, m), y)],
                    bound_style,
                ))
                .map_err(draw_err)?;
        }
    }
    Ok(plot.rect)
}

/// Draw the collected polyline (if it has a point) and clear it.
fn flush_path<DB: DrawingBackend>(
    plot: &Plot<DB>,
    seg: &mut Vec<(i32, i32)>,
    style: ShapeStyle,
) -> Result<(), ChartError> {
    if seg.len() == 1 {
        plot.area
            .draw(&Circle::new(
                seg[0],
                style.stroke_width.max(1),
                style.filled(),
            ))
            .map_err(draw_err)?;
    } else if seg.len() > 1 {
        plot.area
            .draw(&PathElement::new(std::mem::take(seg), style))
            .map_err(draw_err)?;
    }
    seg.clear();
    Ok(())
}

/// Per-row (token) squared error against its bound (note §2.2:
/// `‖x - x_hat‖² <= 1/4 Σ_j scale_j²`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowErrorView<'a> {
    /// Chart title ("" for none).
    pub title: &'a str,
    /// x axis name, e.g. "token".
    pub x_label: &'a str,
    /// y axis name, e.g. "‖x − x̂‖²".
    pub y_label: &'a str,
    /// One entry per row, in row order ([`crate::quant::row_errors`]).
    pub rows: &'a [RowError],
    /// Legend text for the error line.
    pub error_label: &'a str,
    /// Legend text for the bound (line over a shaded area), e.g. "¼ Σ scale²".
    pub bound_label: &'a str,
    /// Legend text for rows above their bound; shown only when there is one.
    pub alarm_label: &'a str,
}

/// Draw per-row squared error (a line) and its bound (a line over a shaded area) against the
/// row index.
///
/// With more rows than pixel columns, rows are bucketed per column ([`pixel_buckets`]) and each
/// series takes the bucket's maximum, so a single bad row stays visible; each bucket is one
/// point at its pixel column's centre. A bucket holding a row above its own bound
/// after `f32` round-off (`sq_err > limit`, [`RowError::limit`]) gets an `alarm` dot. NaN rows break the lines. The y axis spans
/// `[0, 1.1 max(error, bound)]`.
pub fn row_error_vs_bound<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    view: &RowErrorView,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let above = |r: &RowError| r.sq_err > r.limit;
    let any_alarm = view.rows.iter().any(above);
    let mut legend = vec![
        LegendItem {
            mark: Mark::Line(alpha(style.primary, 1.0)),
            text: view.error_label,
        },
        LegendItem {
            mark: Mark::Box(alpha(style.reference, 0.25)),
            text: view.bound_label,
        },
    ];
    if any_alarm {
        legend.push(LegendItem {
            mark: Mark::Box(alpha(style.alarm, 1.0)),
            text: view.alarm_label,
        });
    }
    let body = begin(root, style, view.title, &legend)?;
    let n = view.rows.len();
    let top = headroom(max_finite(
        view.rows.iter().flat_map(|r| [r.sq_err, r.bound]),
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

    let buckets = pixel_buckets(n, plot.w().max(1) as usize);
    let m = buckets.len();
    let h = plot.h();
    let mut errs: Vec<Option<(i32, i32)>> = Vec::with_capacity(m);
    let mut bounds: Vec<Option<(i32, i32)>> = Vec::with_capacity(m);
    let mut alarms: Vec<(i32, i32)> = Vec::new();
    for (b, r) in buckets.iter().enumerate() {
        let rows = view.rows.get(r.clone()).unwrap_or_default();
        let x = (plot.col(b, m) + plot.col(b + 1, m) - 1).max(0) / 2;
        let e = max_finite(rows.iter().map(|r| r.sq_err)).map(|v| (x, plot.y_px(v)));
        errs.push(e);
        bounds.push(max_finite(rows.iter().map(|r| r.bound)).map(|v| (x, plot.y_px(v))));
        if rows.iter().any(above) {
            if let Some(p) = e {
                alarms.push(p);
            }
        }
    }
    // Bound: shaded area and its edge, one polygon and one line per run without gaps.
    let fill = alpha(style.reference, 0.12).filled();
    let edge = style.reference.stroke_width(style.stroke(1.5));
    for run in runs(&bounds) {
        if let (Some(&(x0, _)), Some(&(x1, _))) = (run.first(), run.last()) {
            let mut poly = Vec::with_capacity(run.len() + 2);
            poly.push((x0, h));
            poly.extend_from_slice(&run);
            poly.push((x1, h));
            if run.len() > 1 {
                plot.area
                    .draw(&Polygon::new(poly, fill))
                    .map_err(draw_err)?;
            }
        }
        let mut seg = run;
        flush_path(&plot, &mut seg, edge)?;
    }
    let line = style.primary.stroke_width(style.stroke(1.5));
    for mut seg in runs(&errs) {
        flush_path(&plot, &mut seg, line)?;
    }
    for p in alarms {
        plot.area
            .draw(&Circle::new(
                p,
                style.px(3.0).max(1) as u32,
                style.alarm.filled(),
            ))
            .map_err(draw_err)?;
    }
    Ok(plot.rect)
}
