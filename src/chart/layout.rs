//! Shared layout for every chart: background, title, legend, axes, tick text, and the mapping
//! from data to plot pixels.
//!
//! Axes (ticks, labels, grid lines) are drawn by plotters' mesh; data marks are drawn in the
//! plot's own pixel space ([`Plot`]), so that one bucket is exactly one pixel column and no bar
//! collapses to zero width when thousands of items share a few hundred pixels.

use super::{ChartError, ChartStyle, PixelRect};
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::{CoordTranslate, Shift};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Map a plotters error (generic over the backend) to [`ChartError::Draw`].
pub(crate) fn draw_err<E: std::fmt::Display>(e: E) -> ChartError {
    ChartError::Draw(e.to_string())
}

/// The pixel rectangle of a drawing area, in backend pixels.
pub(crate) fn rect_of<DB: DrawingBackend, CT: CoordTranslate>(
    area: &DrawingArea<DB, CT>,
) -> PixelRect {
    let (x, y) = area.get_pixel_range();
    PixelRect {
        x: x.start,
        y: y.start,
        w: (i64::from(x.end) - i64::from(x.start)).clamp(0, i64::from(u32::MAX)) as u32,
        h: (i64::from(y.end) - i64::from(y.start)).clamp(0, i64::from(u32::MAX)) as u32,
    }
}

/// What a legend entry shows beside its text.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mark {
    /// A filled square (bars, areas, states).
    Box(RGBAColor),
    /// A short solid line (a line series, a bound).
    Line(RGBAColor),
    /// A short dashed line (a threshold, a mean).
    Dash(RGBAColor),
    /// An open circle (a ringed point, such as the current setting).
    Ring(RGBAColor),
}

/// One legend entry; entries with empty text are not drawn.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LegendItem<'a> {
    pub mark: Mark,
    pub text: &'a str,
}

/// Background, then title and legend rows when they fit; returns the area left for the plot.
pub(crate) fn begin<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    style: &ChartStyle,
    title: &str,
    legend: &[LegendItem],
) -> Result<DrawingArea<DB, Shift>, ChartError> {
    root.fill(&style.background).map_err(draw_err)?;
    let full = rect_of(root);
    let min_body = style.px(48.0);
    let left = style.px(f64::from(style.y_label_area.min(400)));
    let mut body = root.clone();
    if !title.is_empty() {
        let title_style = style.title_text();
        let x = if i64::from(full.w) > i64::from(left) * 3 {
            left
        } else {
            style.px(4.0)
        };
        // A title wider than the canvas wraps at its spaces (a narrow screen's charts).
        let room = i64::from(full.w) - i64::from(x) - i64::from(style.px(4.0));
        let lines = wrap(root, title, &title_style, room)?;
        let line_h = (style.font_px(1.1) * 1.25).ceil() as i32;
        // (the first line at the font's height, each further one a line apart)
        let th =
            style.font_px(1.1).ceil() as i32 + line_h * (lines.len() as i32 - 1) + style.px(10.0);
        if i64::from(full.h) >= i64::from(th) + i64::from(min_body) {
            for (i, line) in lines.iter().enumerate() {
                body.draw_text(
                    line,
                    &title_style.pos(Pos::new(HPos::Left, VPos::Top)),
                    (x, style.px(5.0) + line_h * i as i32),
                )
                .map_err(draw_err)?;
            }
            body = body.split_vertically(th).1;
        }
    }
    let items: Vec<&LegendItem> = legend.iter().filter(|i| !i.text.is_empty()).collect();
    if !items.is_empty() {
        let r = rect_of(&body);
        let lh = legend_height(&body, style, &items, r.w)?;
        if i64::from(r.h) >= i64::from(lh) + i64::from(min_body) {
            draw_legend(&body, style, &items, r.w)?;
            body = body.split_vertically(lh).1;
        }
    }
    Ok(body)
}

/// `text` in lines at most `room` pixels wide, broken at spaces (a word wider than `room` gets
/// a line of its own).
fn wrap<'t, DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &'t str,
    style: &TextStyle,
    room: i64,
) -> Result<Vec<&'t str>, ChartError> {
    let width = |t: &str| -> Result<i64, ChartError> {
        Ok(i64::from(
            area.estimate_text_size(t, style).map_err(draw_err)?.0,
        ))
    };
    if width(text)? <= room {
        return Ok(vec![text]);
    }
    let mut lines = Vec::new();
    let mut start = 0;
    let mut end = 0; // (the end of the last word that fits on the line from `start`)
    for (i, _) in text.match_indices(' ').chain([(text.len(), "")]) {
        if end > start && width(&text[start..i])? > room {
            lines.push(&text[start..end]);
            start = end + 1;
        }
        end = i;
    }
    lines.push(&text[start..]);
    Ok(lines)
}

/// Legend entries laid out left to right, wrapping: `(x, y)` of each entry, and total height.
fn legend_layout<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    style: &ChartStyle,
    items: &[&LegendItem],
    width: u32,
) -> Result<(Vec<(i32, i32)>, i32), ChartError> {
    let text = style.text(0.9, style.foreground);
    let row_h = (style.font_px(0.9) * 1.6).ceil() as i32;
    let swatch = style.px(18.0);
    let gap = style.px(14.0);
    let right = i32::try_from(width).unwrap_or(i32::MAX);
    let mut widths = Vec::with_capacity(items.len());
    for item in items {
        let (tw, _) = area
            .estimate_text_size(item.text, &text)
            .map_err(draw_err)?;
        widths.push(swatch + style.px(4.0) + tw.min(10_000) as i32);
    }
    // Aligned with the plot, unless the canvas is narrow or an entry would not fit beside the
    // y tick labels' area (a long policy name on a narrow screen): then from the left edge.
    let area_w = style.px(f64::from(style.y_label_area.min(400)));
    let left = if i64::from(width) > i64::from(area_w) * 3
        && widths
            .iter()
            .all(|&w| i64::from(area_w) + i64::from(w) <= i64::from(right))
    {
        area_w
    } else {
        style.px(4.0)
    };
    let (mut x, mut y) = (left, 0);
    let mut at = Vec::with_capacity(items.len());
    for w in widths {
        if x > left && x + w > right {
            x = left;
            y += row_h;
        }
        at.push((x, y));
        x += w + gap;
    }
    Ok((at, y + row_h + style.px(4.0)))
}

fn legend_height<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    style: &ChartStyle,
    items: &[&LegendItem],
    width: u32,
) -> Result<i32, ChartError> {
    Ok(legend_layout(area, style, items, width)?.1)
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    style: &ChartStyle,
    items: &[&LegendItem],
    width: u32,
) -> Result<(), ChartError> {
    let (at, _) = legend_layout(area, style, items, width)?;
    let text = style
        .text(0.9, style.foreground)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let row_h = (style.font_px(0.9) * 1.6).ceil() as i32;
    let swatch = style.px(18.0);
    let lw = style.stroke(2.0);
    for (item, &(x, y)) in items.iter().zip(&at) {
        let cy = y + row_h / 2;
        match item.mark {
            Mark::Box(c) => {
                let s = style.px(5.0);
                area.draw(&Rectangle::new(
                    [(x + swatch / 2 - s, cy - s), (x + swatch / 2 + s, cy + s)],
                    c.filled(),
                ))
                .map_err(draw_err)?;
            }
            Mark::Line(c) => {
                area.draw(&PathElement::new(
                    vec![(x, cy), (x + swatch, cy)],
                    c.stroke_width(lw),
                ))
                .map_err(draw_err)?;
            }
            Mark::Ring(c) => {
                area.draw(&Circle::new(
                    (x + swatch / 2, cy),
                    style.px(5.0).max(2) as u32,
                    c.stroke_width(lw),
                ))
                .map_err(draw_err)?;
            }
            Mark::Dash(c) => {
                let d = (swatch / 4).max(1);
                for k in [0, 2] {
                    area.draw(&PathElement::new(
                        vec![(x + k * d, cy), (x + (k + 1) * d + d / 2, cy)],
                        c.stroke_width(lw),
                    ))
                    .map_err(draw_err)?;
                }
            }
        }
        area.draw_text(item.text, &text, (x + swatch + style.px(4.0), cy))
            .map_err(draw_err)?;
    }
    Ok(())
}

/// Axis names and which tick labels to draw.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Axes<'a> {
    /// Name under the x axis ("" for none).
    pub x_label: &'a str,
    /// Name beside the y axis ("" for none).
    pub y_label: &'a str,
    /// Whether the x axis has tick labels.
    pub x_ticks: bool,
    /// Whether the y axis has tick labels.
    pub y_ticks: bool,
    /// Horizontal grid lines at the y ticks.
    pub y_grid: bool,
}

/// The plotting area after the axes are drawn, in its own pixel space (`(0, 0)` top-left).
pub(crate) struct Plot<DB: DrawingBackend> {
    /// Drawing area with plot-local pixel coordinates.
    pub area: DrawingArea<DB, Shift>,
    /// Where it is on the backend.
    pub rect: PixelRect,
    /// The y data range `[lo, hi]` mapped bottom to top.
    pub y: (f64, f64),
}

impl<DB: DrawingBackend> Plot<DB> {
    /// Width in pixels.
    pub fn w(&self) -> i32 {
        i32::try_from(self.rect.w).unwrap_or(i32::MAX)
    }

    /// Height in pixels.
    pub fn h(&self) -> i32 {
        i32::try_from(self.rect.h).unwrap_or(i32::MAX)
    }

    /// Plot-local pixel row of value `v`: `round((1 - t) (h - 1))` with
    /// `t = (v - lo) / (hi - lo)` clamped to `[0, 1]`.
    pub fn y_px(&self, v: f64) -> i32 {
        let (lo, hi) = self.y;
        let t = ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
        let t = if t.is_nan() { 0.0 } else { t };
        ((1.0 - t) * f64::from((self.h() - 1).max(0))).round() as i32
    }

    /// Left pixel column of bucket `b` of `m` equal buckets across the plot:
    /// `floor(b w / m)`; bucket `b` spans `col(b) .. col(b + 1)`.
    pub fn col(&self, b: usize, m: usize) -> i32 {
        if m == 0 {
            return 0;
        }
        ((b as u128 * self.rect.w as u128) / m as u128).min(i32::MAX as u128) as i32
    }

    /// Plot-local pixel column of `v` on an x axis spanning `[lo, hi]` across the width.
    pub fn x_px(&self, v: f64, lo: f64, hi: f64) -> i32 {
        let t = ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
        let t = if t.is_nan() { 0.0 } else { t };
        (t * f64::from((self.w() - 1).max(0))).round() as i32
    }
}

/// Size of the bottom label area: tick labels and the x axis name.
fn x_area(style: &ChartStyle, axes: &Axes) -> i32 {
    let mut h = style.px(4.0);
    if axes.x_ticks {
        h += style.font_px(0.9).ceil() as i32 + style.px(10.0);
    }
    if !axes.x_label.is_empty() {
        h += style.font_px(1.0).ceil() as i32 + style.px(6.0);
    }
    h
}

/// Margins around the plot in `body`: `(top, right, left, bottom, axes)`, where `axes` may
/// have lost its x tick labels and name if the body is too short for them. `None` when even
/// a bare plot does not fit.
fn plan<'a, DB: DrawingBackend>(
    body: &DrawingArea<DB, Shift>,
    style: &ChartStyle,
    ax: &Axes<'a>,
) -> Option<(i32, i32, i32, i32, Axes<'a>)> {
    let r = rect_of(body);
    // Room above the plot for the top y tick label, which is centred on the plot's top edge.
    let top = if ax.y_ticks {
        style.px(8.0)
    } else {
        style.px(2.0)
    };
    let right = style.px(16.0);
    let left = style.px(f64::from(style.y_label_area.min(400)));
    let min = style.px(8.0).max(2);
    if i64::from(r.w) < i64::from(left) + i64::from(right) + i64::from(min) {
        return None;
    }
    let bare = Axes {
        x_ticks: false,
        x_label: "",
        ..*ax
    };
    [*ax, bare].into_iter().find_map(|a| {
        let bottom = x_area(style, &a);
        (i64::from(r.h) >= i64::from(top) + i64::from(bottom) + i64::from(min))
            .then_some((top, right, left, bottom, a))
    })
}

/// The height of the plotting area [`axes`] would make in `body` (0 if none).
pub(crate) fn plot_height<DB: DrawingBackend>(
    body: &DrawingArea<DB, Shift>,
    style: &ChartStyle,
    ax: &Axes,
) -> i32 {
    match plan(body, style, ax) {
        Some((top, _, _, bottom, _)) => {
            (i64::from(rect_of(body).h) - i64::from(top) - i64::from(bottom))
                .clamp(0, i64::from(i32::MAX)) as i32
        }
        None => 0,
    }
}

/// Draw axes over `body` with x spanning `x` and y spanning `y` (any plotters ranged types of
/// `f64`), and return the plot. `None` when `body` is too small to hold a plot; a body too
/// short for x tick labels gets a plot without them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn axes<DB, X, Y>(
    body: &DrawingArea<DB, Shift>,
    style: &ChartStyle,
    x: X,
    y: Y,
    y_range: (f64, f64),
    axes: &Axes,
    x_fmt: &dyn Fn(&f64) -> String,
    y_fmt: &dyn Fn(&f64) -> String,
) -> Result<Option<Plot<DB>>, ChartError>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let Some((top, right, left, bottom, axes)) = plan(body, style, axes) else {
        return Ok(None);
    };
    // The last x tick label is centred on its tick, which can sit at the plot's right end:
    // room for half of the widest label there can be (the range's end written as a tick).
    let right = if axes.x_ticks {
        right.max(half_label(body, style, x_fmt(&x.range().end))?)
    } else {
        right
    };
    let mut chart = ChartBuilder::on(body)
        .margin_top(top)
        .margin_right(right)
        .x_label_area_size(bottom)
        .y_label_area_size(left)
        .build_cartesian_2d(x, y)
        .map_err(draw_err)?;
    let plot_rect = rect_of(chart.plotting_area());
    let x_n = (plot_rect.w / style.px(90.0).max(1) as u32).clamp(2, 12) as usize;
    let y_n = (plot_rect.h / style.px(36.0).max(1) as u32).clamp(2, 10) as usize;
    let label = style.text(0.9, style.foreground);
    let desc = style.text(1.0, style.foreground);
    let none = |_: &f64| String::new();
    {
        let mut mesh = chart.configure_mesh();
        mesh.disable_x_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(style.grid.stroke_width(style.stroke(1.0)))
            .axis_style(style.muted.stroke_width(style.stroke(1.0)))
            .set_all_tick_mark_size(style.px(4.0))
            .label_style(label)
            .axis_desc_style(desc)
            .x_labels(x_n)
            .y_labels(y_n)
            .x_label_formatter(if axes.x_ticks { x_fmt } else { &none })
            .y_label_formatter(if axes.y_ticks { y_fmt } else { &none });
        if !axes.y_grid {
            mesh.disable_y_mesh();
        }
        if !axes.y_ticks {
            mesh.set_tick_mark_size(LabelAreaPosition::Left, 0);
        }
        if !axes.x_ticks {
            mesh.set_tick_mark_size(LabelAreaPosition::Bottom, 0);
        }
        if !axes.x_label.is_empty() {
            mesh.x_desc(axes.x_label);
        }
        if !axes.y_label.is_empty() {
            mesh.y_desc(axes.y_label);
        }
        mesh.draw().map_err(draw_err)?;
    }
    let area = chart.plotting_area().strip_coord_spec();
    Ok(Some(Plot {
        rect: rect_of(&area),
        area,
        y: y_range,
    }))
}

/// Half the width of tick label `text`, and a little: the room it needs beside its tick.
#[inline(never)] // (one copy per backend, not one per axis type `axes` is built for)
fn half_label<DB: DrawingBackend>(
    body: &DrawingArea<DB, Shift>,
    style: &ChartStyle,
    text: String,
) -> Result<i32, ChartError> {
    let (w, _) = body
        .estimate_text_size(&text, &style.text(0.9, style.foreground))
        .map_err(draw_err)?;
    Ok((w.min(10_000) as i32 + 1) / 2 + style.px(2.0))
}

/// A usable axis range from data extremes: finite, `lo < hi`. Non-finite input gives `[0, 1]`;
/// equal ends are widened by 5% of their magnitude (or by 0.5 around 0).
pub(crate) fn usable_range(lo: f64, hi: f64) -> (f64, f64) {
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
    if hi - lo > f64::EPSILON * lo.abs().max(hi.abs()) && (hi - lo).is_finite() {
        return (lo, hi);
    }
    let pad = if lo.abs() > 0.0 { lo.abs() * 0.05 } else { 0.5 };
    (lo - pad, hi + pad)
}

/// The top of a `[0, top]` value axis holding `max` with 10% headroom; 1 when nothing positive
/// and finite is given.
pub(crate) fn headroom(max: Option<f64>) -> f64 {
    match max {
        Some(m) if m.is_finite() && m > 0.0 && (m * 1.1).is_finite() => m * 1.1,
        _ => 1.0,
    }
}

/// Tick text for `v` on an axis spanning `span`: enough decimals to tell ticks apart, scientific
/// notation for very large or small magnitudes, never `-0`.
pub(crate) fn tick_text(v: f64, span: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    let span = span.abs();
    let mag = v.abs().max(span);
    if mag >= 1e6 || (mag > 0.0 && mag < 1e-3) {
        if v == 0.0 {
            return "0".to_string();
        }
        return format!("{v:.1e}");
    }
    let step = span / 5.0;
    let dec = if step > 0.0 && step.is_finite() {
        (-step.log10().floor()).clamp(0.0, 6.0) as usize
    } else {
        0
    };
    let s = format!("{v:.dec$}");
    if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
        s[1..].to_string()
    } else {
        s
    }
}

/// Tick text for an index axis: integers only (half-way ticks get no label).
pub(crate) fn index_text(v: f64) -> String {
    if v.is_finite() && (v - v.round()).abs() < 1e-6 && v.abs() < 1e15 {
        format!("{}", v.round() as i64)
    } else {
        String::new()
    }
}

/// A dashed horizontal line from `x0` to `x1` (plot-local pixels) at row `y`.
pub(crate) fn dashed_hline<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    style: &ChartStyle,
    (x0, x1): (i32, i32),
    y: i32,
    color: RGBAColor,
) -> Result<(), ChartError> {
    let dash = style.px(6.0).max(1);
    let gap = style.px(4.0).max(1);
    let lw = style.stroke(1.5);
    let mut x = x0;
    while x < x1 {
        let e = (x + dash).min(x1);
        area.draw(&PathElement::new(
            vec![(x, y), (e, y)],
            color.stroke_width(lw),
        ))
        .map_err(draw_err)?;
        x = e + gap;
    }
    Ok(())
}

/// A dashed polyline through `points` (plot-local pixels), the dashes running on across its
/// corners. (Not plotters' `DashedPathElement`: one more element type costs the page's wasm
/// more than this walk over the one it already draws.)
pub(crate) fn dashed_path<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    style: &ChartStyle,
    points: &[(i32, i32)],
    color: RGBColor,
) -> Result<(), ChartError> {
    let (dash, gap) = (
        f64::from(style.px(5.0).max(1)),
        f64::from(style.px(3.0).max(1)),
    );
    let lw = style.stroke(1.5);
    let (mut on, mut left) = (true, dash);
    for w in points.windows(2) {
        let (a, b) = (w[0], w[1]);
        let (dx, dy) = (f64::from(b.0 - a.0), f64::from(b.1 - a.1));
        let len = dx.hypot(dy);
        let at = |s: f64| {
            (
                (f64::from(a.0) + dx * s / len).round() as i32,
                (f64::from(a.1) + dy * s / len).round() as i32,
            )
        };
        let mut t = 0.0;
        while t < len {
            let step = left.min(len - t);
            if on {
                area.draw(&PathElement::new(
                    vec![at(t), at(t + step)],
                    color.stroke_width(lw),
                ))
                .map_err(draw_err)?;
            }
            t += step;
            left -= step;
            if left <= 0.0 {
                on = !on;
                left = if on { dash } else { gap };
            }
        }
    }
    Ok(())
}

/// Text over a box of `bg`, so it stays readable over bars and lines. `text_style` carries
/// the anchor; `pos` is in `area`'s pixels.
pub(crate) fn boxed_text<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    style: &ChartStyle,
    text: &str,
    text_style: &TextStyle,
    pos: (i32, i32),
    bg: RGBAColor,
) -> Result<(), ChartError> {
    let (tw, th) = area
        .estimate_text_size(text, text_style)
        .map_err(draw_err)?;
    let (tw, th) = (tw.min(10_000) as i32, th.min(10_000) as i32);
    let x0 = match text_style.pos.h_pos {
        HPos::Left => pos.0,
        HPos::Center => pos.0 - tw / 2,
        HPos::Right => pos.0 - tw,
    };
    let y0 = match text_style.pos.v_pos {
        VPos::Top => pos.1,
        VPos::Center => pos.1 - th / 2,
        VPos::Bottom => pos.1 - th,
    };
    let p = style.px(2.0);
    area.draw(&Rectangle::new(
        [(x0 - p, y0 - p), (x0 + tw + p, y0 + th + p)],
        bg.filled(),
    ))
    .map_err(draw_err)?;
    area.draw_text(text, text_style, pos).map_err(draw_err)
}

/// `color` at opacity `a`.
pub(crate) fn alpha(color: RGBColor, a: f64) -> RGBAColor {
    color.mix(a)
}

/// Split a sequence of optional points into runs of consecutive present points.
pub(crate) fn runs(points: &[Option<(i32, i32)>]) -> Vec<Vec<(i32, i32)>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for p in points {
        match p {
            Some(p) => cur.push(*p),
            None => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_usable() {
        assert_eq!(usable_range(0.0, 0.0), (-0.5, 0.5));
        assert_eq!(usable_range(f64::NAN, 1.0), (0.0, 1.0));
        assert_eq!(usable_range(2.0, 1.0), (1.0, 2.0));
        let (lo, hi) = usable_range(10.0, 10.0);
        assert!(lo < 10.0 && hi > 10.0);
        assert_eq!(headroom(None), 1.0);
        assert_eq!(headroom(Some(0.0)), 1.0);
        assert!((headroom(Some(2.0)) - 2.2).abs() < 1e-12);
    }

    #[test]
    fn tick_texts() {
        assert_eq!(tick_text(0.5, 1.0), "0.5");
        assert_eq!(tick_text(-0.0001, 1.0), "0.0");
        assert_eq!(tick_text(2.0e7, 1e7), "2.0e7");
        assert_eq!(tick_text(120.0, 500.0), "120");
        assert_eq!(index_text(3.0), "3");
        assert_eq!(index_text(2.5), "");
    }
}
