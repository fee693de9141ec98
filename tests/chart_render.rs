//! Chart tests: every chart is rendered natively with `SVGBackend` into a `String`, and the
//! assertions read the SVG back (labels, elements by colour, positions) or, for heatmaps, the
//! RGBA bytes. Set `KVLAB_CHART_DUMP=/some/dir` to also write each SVG there for a look.

use kvlab::chart::*;
use kvlab::quant::{GroupError, RowError};
use kvlab::render::{budget::*, compare::*, quant::*, select::*};
use plotters::prelude::*;
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};

// ---------------------------------------------------------------- SVG reading helpers

/// One SVG element: its tag and attributes, and its text for `<text>`.
#[derive(Debug, Clone)]
struct El {
    tag: String,
    attrs: Vec<(String, String)>,
    text: String,
}

impl El {
    fn get(&self, k: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(a, _)| a == k)
            .map(|(_, v)| v.as_str())
    }
    fn num(&self, k: &str) -> f64 {
        self.get(k).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
    }
    fn points(&self) -> Vec<(i32, i32)> {
        self.get("points")
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|p| {
                let (x, y) = p.split_once(',')?;
                Some((x.parse().ok()?, y.parse().ok()?))
            })
            .collect()
    }
    fn fill(&self) -> &str {
        self.get("fill").unwrap_or("")
    }
    fn stroke(&self) -> &str {
        self.get("stroke").unwrap_or("")
    }
    /// Whether a `<rect>` lies inside `r` (inclusive of its right/bottom edge).
    fn rect_inside(&self, r: PixelRect) -> bool {
        let (x, y, w, h) = (
            self.num("x"),
            self.num("y"),
            self.num("width"),
            self.num("height"),
        );
        x >= f64::from(r.x)
            && y >= f64::from(r.y)
            && x + w <= f64::from(r.x) + f64::from(r.w) + 0.5
            && y + h <= f64::from(r.y) + f64::from(r.h) + 0.5
    }
    /// Whether every point of a `<polyline>` lies inside `r`.
    fn points_inside(&self, r: PixelRect) -> bool {
        let pts = self.points();
        !pts.is_empty()
            && pts.iter().all(|&(x, y)| {
                x >= r.x && y >= r.y && x <= r.x + r.w as i32 && y <= r.y + r.h as i32
            })
    }
}

/// Parse the flat SVG plotters writes (one element per tag; `<text>` holds one line).
fn parse(svg: &str) -> Vec<El> {
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(start) = rest.find('<') {
        rest = &rest[start + 1..];
        if rest.starts_with('/') {
            continue;
        }
        let Some(end) = rest.find('>') else { break };
        let inner = rest[..end].trim_end_matches('/');
        let (tag, mut attrs_s) = inner.split_once(' ').unwrap_or((inner, ""));
        let mut attrs = Vec::new();
        while let Some(eq) = attrs_s.find("=\"") {
            let key = attrs_s[..eq].trim().to_string();
            let after = &attrs_s[eq + 2..];
            let close = after.find('"').unwrap_or(after.len());
            attrs.push((key, after[..close].to_string()));
            attrs_s = &after[(close + 1).min(after.len())..];
        }
        rest = &rest[end + 1..];
        let text = if tag == "text" {
            let close = rest.find("</text>").unwrap_or(0);
            rest[..close].trim().to_string()
        } else {
            String::new()
        };
        out.push(El {
            tag: tag.to_string(),
            attrs,
            text,
        });
    }
    out
}

fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

fn texts(els: &[El]) -> Vec<&str> {
    els.iter()
        .filter(|e| e.tag == "text")
        .map(|e| e.text.as_str())
        .collect()
}

fn rects<'a>(els: &'a [El], fill: &str, inside: PixelRect) -> Vec<&'a El> {
    els.iter()
        .filter(|e| e.tag == "rect" && e.fill() == fill && e.rect_inside(inside))
        .collect()
}

fn lines<'a>(els: &'a [El], stroke: &str, inside: PixelRect) -> Vec<&'a El> {
    els.iter()
        .filter(|e| e.tag == "polyline" && e.stroke() == stroke && e.points_inside(inside))
        .collect()
}

/// Render with `draw` onto a `w x h` SVG; returns the SVG text and what `draw` returned.
/// Charts measure their text as a real font would set it ([`WideText`]), and no text may run off
/// the canvas.
fn render<T>(
    name: &str,
    (w, h): (u32, u32),
    draw: impl FnOnce(&DrawingArea<WideText, plotters::coord::Shift>) -> T,
) -> (String, T) {
    let mut s = String::new();
    let out = {
        let root = WideText(SVGBackend::with_string(&mut s, (w, h))).into_drawing_area();
        let out = draw(&root);
        root.present().expect("present");
        out
    };
    if let Ok(dir) = std::env::var("KVLAB_CHART_DUMP") {
        let _ = std::fs::write(format!("{dir}/{name}.svg"), &s);
    }
    // (a canvas too small for any text is the degenerate tests' business)
    if !name.starts_with("degenerate") {
        assert_texts_inside(name, &s, (w, h));
    }
    (s, out)
}

/// The width a sans-serif font of `size` px sets `text` in, about: 0.6 em per Latin character,
/// 1 em per other (CJK) one. plotters' own estimate for SVG (0.45 em per byte) is narrower than
/// real fonts for Latin text, so a chart that left fixed room for a label passed with it.
fn text_width(text: &str, size: f64) -> u32 {
    let ems: f64 = text
        .chars()
        .map(|c| if c.is_ascii() { 0.6 } else { 1.0 })
        .sum();
    (ems * size).ceil() as u32
}

/// An SVG backend measuring text with [`text_width`] (the page measures with the canvas's
/// `measureText`).
struct WideText<'a>(SVGBackend<'a>);

impl DrawingBackend for WideText<'_> {
    type ErrorType = std::io::Error;
    fn get_size(&self) -> (u32, u32) {
        self.0.get_size()
    }
    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.ensure_prepared()
    }
    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.present()
    }
    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_pixel(point, color)
    }
    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_line(from, to, style)
    }
    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_rect(upper_left, bottom_right, style, fill)
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_path(path, style)
    }
    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_circle(center, radius, style, fill)
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.fill_polygon(vert, style)
    }
    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_text(text, style, pos)
    }
    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        Ok((
            text_width(text, style.size()),
            (style.size() * 1.2).ceil() as u32,
        ))
    }
    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.blit_bitmap(pos, size, src)
    }
}

/// Every `<text>` of `svg` lies on the `w x h` canvas along its run (across, or up it for a
/// y axis name), by the width the charts measured it with ([`text_width`]): a label cut at the
/// canvas's edge fails here.
fn assert_texts_inside(name: &str, svg: &str, (w, h): (u32, u32)) {
    for t in parse(svg).iter().filter(|e| e.tag == "text") {
        let text = t
            .text
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&");
        // (plotters' SVG backend writes the font size divided by 1.24)
        let tw = text_width(&text, t.num("font-size") * 1.24);
        // A y axis name is turned a quarter: its width runs up the canvas from its anchor.
        let turned = t
            .get("transform")
            .is_some_and(|r| r.starts_with("rotate(270"));
        let (at, size) = if turned {
            (-t.num("y"), f64::from(h))
        } else {
            (t.num("x"), f64::from(w))
        };
        let (from, to) = match t.get("text-anchor") {
            Some("end") => (at - f64::from(tw), at),
            Some("middle") => (at - f64::from(tw) / 2.0, at + f64::from(tw) / 2.0),
            _ => (at, at + f64::from(tw)),
        };
        let (from, to) = if turned { (-to, -from) } else { (from, to) };
        assert!(
            from >= -1.0 && to <= size + 1.0,
            "{name}: '{text}' spans {from:.1}..{to:.1}, outside the canvas 0..{size} {}",
            if turned {
                "(up the canvas)"
            } else {
                "(across)"
            }
        );
    }
}

/// Expected plot-local row of `v` on a `[lo, hi]` axis over `h` pixels (the documented
/// mapping `round((1 - t)(h - 1))`).
fn y_of(v: f64, (lo, hi): (f64, f64), h: u32) -> i32 {
    ((1.0 - (v - lo) / (hi - lo)) * f64::from(h - 1)).round() as i32
}

// ---------------------------------------------------------------- quant_histogram

fn hist_view<'a>(counts: &'a [u32], grid: &'a [f64]) -> QuantHistogramView<'a> {
    QuantHistogramView {
        title: "Channel 3 histogram",
        x_label: "value x",
        y_label: "count",
        bin_range: (-2.0, 2.0),
        counts,
        grid,
        min: -1.9,
        max: 1.7,
        counts_label: "values",
        grid_label: "grid scale*q",
        min_label: "min -1.90",
        max_label: "max 1.70",
        thinned_note: "1/{k} of grid: {shown} of {total} lines",
    }
}

#[test]
fn histogram_draws_bins_grid_and_extremes() {
    let style = ChartStyle::light();
    let counts = [1u32, 3, 7, 12, 20, 12, 7, 3, 1, 0, 2];
    // 4-bit symmetric: 15 levels
    let grid: Vec<f64> = (-7..=7).map(|k| f64::from(k) * 0.28).collect();
    let view = hist_view(&counts, &grid);
    let (svg, rect) = render("hist", (600, 300), |root| {
        quant_histogram(root, &view, &style).unwrap()
    });
    assert!(!rect.is_empty());
    let els = parse(&svg);
    let t = texts(&els);
    for label in [
        "Channel 3 histogram",
        "value x",
        "count",
        "values",
        "grid scale*q",
        "min -1.90",
        "max 1.70",
    ] {
        assert!(t.contains(&label), "missing label {label:?} in {t:?}");
    }
    // one bar per non-empty bin
    assert_eq!(rects(&els, &hex(style.primary), rect).len(), 10);
    // every grid level is a full-height line at opacity 0.55
    let grid_lines: Vec<_> = lines(&els, &hex(style.muted), rect)
        .into_iter()
        .filter(|e| e.get("opacity") == Some("0.55"))
        .collect();
    assert_eq!(grid_lines.len(), 15);
    for g in &grid_lines {
        let p = g.points();
        assert_eq!(p[0].0, p[1].0, "grid lines are vertical");
        assert_eq!(p[0].1, rect.y);
    }
    // min and max are dashed lines in the accent colour: all at two x positions
    let mut xs: Vec<i32> = lines(&els, &hex(style.accent), rect)
        .iter()
        .map(|e| e.points()[0].0)
        .collect();
    xs.dedup();
    assert_eq!(xs.len(), 2);
    assert!(xs[0] < xs[1]);
    // no thinning note at 15 levels
    assert!(!t.iter().any(|s| s.contains("of grid")));
}

#[test]
fn histogram_thins_a_dense_grid_with_a_note() {
    let style = ChartStyle::light();
    let counts = [5u32; 40];
    // 8-bit: 255 levels over [-2, 2]
    let grid: Vec<f64> = (-127..=127).map(|k| f64::from(k) * 2.0 / 127.0).collect();
    let view = hist_view(&counts, &grid);
    let (svg, rect) = render("hist_dense", (400, 260), |root| {
        quant_histogram(root, &view, &style).unwrap()
    });
    let els = parse(&svg);
    let w = rect.w as usize;
    let k = (255usize * 2).div_ceil(w);
    assert!(k >= 2, "a {w}-pixel plot cannot hold 255 lines 2 px apart");
    let shown = 255usize.div_ceil(k);
    let light: Vec<_> = lines(&els, &hex(style.muted), rect)
        .into_iter()
        .filter(|e| e.get("opacity") == Some("0.25"))
        .collect();
    assert_eq!(light.len(), shown);
    let note = format!("1/{k} of grid: {shown} of 255 lines");
    assert!(texts(&els).contains(&note.as_str()), "{:?}", texts(&els));

    // 16 bits: 65,535 levels still draw at most one line per 2 pixels
    let grid16: Vec<f64> = (-32767..=32767)
        .map(|k| f64::from(k) * 2.0 / 32767.0)
        .collect();
    let view = hist_view(&counts, &grid16);
    let (svg, rect) = render("hist16", (400, 260), |root| {
        quant_histogram(root, &view, &style).unwrap()
    });
    let n = lines(&parse(&svg), &hex(style.muted), rect)
        .into_iter()
        .filter(|e| e.get("opacity") == Some("0.25"))
        .count();
    assert!(n <= rect.w as usize / 2 + 1 && n > 10, "{n} lines");
}

// ---------------------------------------------------------------- group_error_bars

fn group_view(errors: &[GroupError]) -> GroupErrorView<'_> {
    GroupErrorView {
        title: "Per-channel max error",
        x_label: "channel j",
        y_label: "max |x - x_hat|",
        errors,
        error_label: "measured",
        bound_label: "scale/2",
        alarm_label: "above bound!",
    }
}

#[test]
fn group_bars_mark_bounds_and_alarm() {
    let style = ChartStyle::light();
    let mut errors: Vec<GroupError> = (0..8)
        .map(|i| GroupError {
            max_abs: 0.01 * (i + 1) as f32,
            bound: 0.01 * (i + 1) as f32 + 0.005,
            limit: f64::from(0.01 * (i + 1) as f32 + 0.005),
        })
        .collect();
    errors[5].max_abs = errors[5].bound * 1.5; // breaks its bound
    let view = group_view(&errors);
    let (svg, rect) = render("group_bars", (600, 300), |root| {
        group_error_bars(root, &view, &style).unwrap()
    });
    let els = parse(&svg);
    let t = texts(&els);
    for l in [
        "Per-channel max error",
        "channel j",
        "max |x - x_hat|",
        "measured",
        "scale/2",
        "above bound!",
    ] {
        assert!(t.contains(&l), "missing {l:?}");
    }
    let ok = rects(&els, &hex(style.primary), rect);
    let alarm = rects(&els, &hex(style.alarm), rect);
    assert_eq!(ok.len(), 7);
    assert_eq!(alarm.len(), 1);
    // the alarm bar is the 6th of 8 columns
    let col_w = f64::from(rect.w) / 8.0;
    let ax = alarm[0].num("x") - f64::from(rect.x);
    assert!(ax >= 5.0 * col_w && ax < 6.0 * col_w, "alarm bar at {ax}");
    // one bound tick per bar, at the expected height; the alarm bar rises above its tick
    let ticks = lines(&els, &hex(style.reference), rect);
    assert_eq!(ticks.len(), 8);
    let top = 1.1 * f64::from(errors[5].max_abs);
    let tick5 = ticks
        .iter()
        .find(|e| (f64::from(e.points()[0].0 - rect.x) - 5.0 * col_w).abs() < 1.5)
        .expect("tick over bar 5");
    let y_bound = tick5.points()[0].1 - rect.y;
    assert!((y_bound - y_of(f64::from(errors[5].bound), (0.0, top), rect.h)).abs() <= 1);
    assert!((alarm[0].num("y") as i32 - rect.y) < y_bound);

    // without a breach there is no alarm colour and no alarm legend
    errors[5].max_abs = 0.0;
    let view = group_view(&errors);
    let (svg, _) = render("group_bars_ok", (600, 300), |root| {
        group_error_bars(root, &view, &style).unwrap()
    });
    assert!(!svg.contains(&hex(style.alarm)));
    assert!(!svg.contains("above bound!"));
}

/// A group or row past its bound by less than its `f32` round-off allowance (its `limit`) is
/// not an alarm; past the limit it is.
#[test]
fn alarms_allow_the_round_off() {
    let style = ChartStyle::light();
    for (limit, alarmed) in [
        (0.5 * (1.0 + 1e-4), false),
        (0.5 * (1.0 + 1e-5), true),
        (0.5, true),
    ] {
        let mut errors = vec![
            GroupError {
                max_abs: 0.5,
                bound: 0.5,
                limit,
            };
            4
        ];
        errors[2].max_abs = 0.50003; // 6e-5 over, as an 8-bit group far from zero can be
        let (svg, _) = render("group_bars_roundoff", (600, 300), |root| {
            group_error_bars(root, &group_view(&errors), &style).unwrap()
        });
        assert_eq!(
            svg.contains("above bound!"),
            alarmed,
            "groups, limit {limit}"
        );
        let rows: Vec<RowError> = (0..4)
            .map(|i| RowError {
                sq_err: if i == 2 { 0.25 * 1.00012 } else { 0.25 },
                bound: 0.25,
                limit: limit * limit,
            })
            .collect();
        let (svg, _) = render("row_bound_roundoff", (600, 300), |root| {
            row_error_vs_bound(root, &row_view(&rows), &style).unwrap()
        });
        assert_eq!(svg.contains("above bound!"), alarmed, "rows, limit {limit}");
    }
}

#[test]
fn group_bars_aggregate_4096_groups_to_pixel_columns() {
    let style = ChartStyle::light();
    let mut errors: Vec<GroupError> = (0..4096)
        .map(|i| GroupError {
            max_abs: 0.002 + 0.001 * ((i * 7919) % 13) as f32,
            bound: 0.02,
            limit: 0.02,
        })
        .collect();
    errors[4000].max_abs = 0.05; // one breach among 4096
    let view = group_view(&errors);
    let (svg, rect) = render("group_bars_4096", (800, 300), |root| {
        group_error_bars(root, &view, &style).unwrap()
    });
    let els = parse(&svg);
    let bars = rects(&els, &hex(style.primary), rect).len();
    let alarm = rects(&els, &hex(style.alarm), rect);
    assert_eq!(
        bars + alarm.len(),
        rect.w as usize,
        "one bar per pixel column"
    );
    assert_eq!(alarm.len(), 1);
    // the breach stays visible: its column is at 4000/4096 of the width
    let ax = alarm[0].num("x") - f64::from(rect.x);
    assert!((ax - 4000.0 / 4096.0 * f64::from(rect.w)).abs() <= 1.5);
    // bounds as one step line, not 4096 ticks
    assert_eq!(lines(&els, &hex(style.reference), rect).len(), 1);
}

// ---------------------------------------------------------------- row_error_vs_bound

fn row_view(rows: &[RowError]) -> RowErrorView<'_> {
    RowErrorView {
        title: "Per-token squared error",
        x_label: "token t",
        y_label: "||x - x_hat||^2",
        rows,
        error_label: "measured",
        bound_label: "1/4 sum scale^2",
        alarm_label: "above bound!",
    }
}

#[test]
fn row_errors_downsample_131072_rows_to_pixel_width() {
    let style = ChartStyle::light();
    let rows: Vec<RowError> = (0..131_072u32)
        .map(|i| RowError {
            sq_err: 0.01 + 0.001 * f64::from(i % 17),
            bound: 0.05,
            limit: 0.05,
        })
        .collect();
    let view = row_view(&rows);
    let (svg, rect) = render("rows_131072", (800, 300), |root| {
        row_error_vs_bound(root, &view, &style).unwrap()
    });
    let els = parse(&svg);
    let err_lines = lines(&els, &hex(style.primary), rect);
    assert_eq!(err_lines.len(), 1);
    assert_eq!(err_lines[0].points().len(), rect.w as usize);
    let bound_lines = lines(&els, &hex(style.reference), rect);
    assert_eq!(bound_lines.len(), 1);
    assert_eq!(bound_lines[0].points().len(), rect.w as usize);
    // the shaded bound area
    assert_eq!(els.iter().filter(|e| e.tag == "polygon").count(), 1);
    // the bound is flat at its expected height
    let top = 1.1 * 0.05;
    let yb = y_of(0.05, (0.0, top), rect.h) + rect.y;
    assert!(bound_lines[0]
        .points()
        .iter()
        .all(|p| (p.1 - yb).abs() <= 1));
    assert!(texts(&els).contains(&"1/4 sum scale^2"));
    assert!(!svg.contains(&hex(style.alarm)));
}

#[test]
fn row_errors_one_point_per_row_gaps_and_alarms() {
    let style = ChartStyle::light();
    let mut rows: Vec<RowError> = (0..10)
        .map(|i| RowError {
            sq_err: 0.1 * f64::from(i),
            bound: 1.0,
            limit: 1.0,
        })
        .collect();
    rows[4].sq_err = f64::NAN; // a gap
    rows[8].sq_err = 1.2; // a breach
    let view = row_view(&rows);
    let (svg, rect) = render("rows_10", (600, 300), |root| {
        row_error_vs_bound(root, &view, &style).unwrap()
    });
    let els = parse(&svg);
    let segs = lines(&els, &hex(style.primary), rect);
    let mut lens: Vec<usize> = segs.iter().map(|e| e.points().len()).collect();
    lens.sort_unstable();
    assert_eq!(lens, vec![4, 5]);
    let dots = els
        .iter()
        .filter(|e| e.tag == "circle" && e.fill() == hex(style.alarm))
        .count();
    assert_eq!(dots, 1);
    assert!(texts(&els).contains(&"above bound!"));
}

// ---------------------------------------------------------------- heatmaps

const PATTERN: [f32; 16] = [
    1.0, 2.0, 3.0, 4.0, //
    5.0, 6.0, 7.0, 8.0, //
    9.0, 1.0, 2.0, 3.0, //
    4.0, 5.0, 6.0, 0.0,
];

fn px(buf: &[u8], w: u32, x: u32, y: u32) -> [u8; 4] {
    let i = ((y * w + x) * 4) as usize;
    [buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]
}

fn lut_rgba(cm: Colormap, t: f32) -> [u8; 4] {
    let [r, g, b] = cm.color(t);
    [r, g, b, 255]
}

#[test]
fn pooling_4x4_to_2x2_takes_block_maxima() {
    assert_eq!(
        pool_max(&PATTERN, 4, 4, 2, 2).unwrap(),
        vec![6.0, 8.0, 9.0, 6.0]
    );
    let rgba = heatmap_rgba(&PATTERN, 4, 4, 2, 2, Colormap::Viridis, (0.0, 9.0)).unwrap();
    assert_eq!(rgba.len(), 2 * 2 * 4);
    assert_eq!(px(&rgba, 2, 0, 0), lut_rgba(Colormap::Viridis, 6.0 / 9.0));
    assert_eq!(px(&rgba, 2, 1, 0), lut_rgba(Colormap::Viridis, 8.0 / 9.0));
    assert_eq!(px(&rgba, 2, 0, 1), lut_rgba(Colormap::Viridis, 1.0));
    assert_eq!(px(&rgba, 2, 1, 1), lut_rgba(Colormap::Viridis, 6.0 / 9.0));
    // enlarging repeats cells: 4x4 -> 8x8, pixel (5, 2) is cell (row 1, col 2) = 7
    let up = pool_max(&PATTERN, 4, 4, 8, 8).unwrap();
    assert_eq!(up[2 * 8 + 5], 7.0);
    // 1 x 4 strip pooled to 2 x 3: rows repeat, columns pool
    assert_eq!(
        pool_max(&[1.0, 5.0, 2.0, 0.0], 1, 4, 2, 3).unwrap(),
        vec![5.0, 2.0, 5.0, 2.0, 5.0, 2.0]
    );
}

#[test]
fn heatmap_nan_range_and_shape_rules() {
    // NaN cells are skipped; an all-NaN pixel is transparent
    let v = [f32::NAN, 1.0, f32::NAN, f32::NAN];
    let rgba = heatmap_rgba(&v, 2, 2, 2, 1, Colormap::Cividis, (0.0, 1.0)).unwrap();
    assert_eq!(px(&rgba, 2, 0, 0), [0, 0, 0, 0]);
    assert_eq!(px(&rgba, 2, 1, 0), lut_rgba(Colormap::Cividis, 1.0));
    // clamping, zero range (a step), non-finite range
    let v = [-5.0, 0.5, 7.0];
    let rgba = heatmap_rgba(&v, 1, 3, 3, 1, Colormap::Viridis, (0.0, 1.0)).unwrap();
    assert_eq!(px(&rgba, 3, 0, 0), lut_rgba(Colormap::Viridis, 0.0));
    assert_eq!(px(&rgba, 3, 2, 0), lut_rgba(Colormap::Viridis, 1.0));
    let step = heatmap_rgba(&v, 1, 3, 3, 1, Colormap::Viridis, (0.5, 0.5)).unwrap();
    assert_eq!(px(&step, 3, 0, 0), lut_rgba(Colormap::Viridis, 0.0));
    assert_eq!(px(&step, 3, 1, 0), lut_rgba(Colormap::Viridis, 0.0));
    assert_eq!(px(&step, 3, 2, 0), lut_rgba(Colormap::Viridis, 1.0));
    assert!(heatmap_rgba(&v, 1, 3, 3, 1, Colormap::Viridis, (f32::NAN, 1.0)).is_ok());
    // shapes
    let err = heatmap_rgba(&v, 2, 2, 4, 4, Colormap::Viridis, (0.0, 1.0)).unwrap_err();
    assert!(matches!(
        err,
        ChartError::GridShape {
            len: 3,
            rows: 2,
            cols: 2,
            expected: 4,
            ..
        }
    ));
    let msg = err.to_string();
    assert!(
        msg.contains("values has 3 values") && msg.contains("2 x 2 = 4"),
        "{msg}"
    );
    let err = heatmap_rgba(&[], 0, 0, 100_000, 100_000, Colormap::Viridis, (0.0, 1.0));
    assert!(matches!(err, Err(ChartError::OutputTooLarge { .. })));
    assert!(heatmap_rgba(&[], usize::MAX, 2, 4, 4, Colormap::Viridis, (0.0, 1.0)).is_err());
    // degenerate sizes
    assert!(heatmap_rgba(&[], 0, 5, 4, 4, Colormap::Viridis, (0.0, 1.0))
        .unwrap()
        .chunks(4)
        .all(|p| p == [0, 0, 0, 0]));
    assert!(heatmap_rgba(&v, 1, 3, 0, 7, Colormap::Viridis, (0.0, 1.0))
        .unwrap()
        .is_empty());
    assert_eq!(
        heatmap_rgba(&[0.3], 1, 1, 1, 1, Colormap::Viridis, (0.0, 1.0))
            .unwrap()
            .len(),
        4
    );
}

#[test]
fn attention_heatmap_marks_kept_and_dims_dropped_columns() {
    use TokenState::*;
    let style = ChartStyle::light();
    let states = [Sink, Dropped, Heavy, Recent];
    let mut marks = AttentionMarks::new(&states, &style);
    marks.strip_px = 2;
    // 4 x 4 attention, 4 x 6 output: 2 strip rows + 4 heat rows (one per query row)
    let rgba = attention_heatmap_rgba(&PATTERN, 4, 4, 4, 6, Colormap::Viridis, (0.0, 9.0), &marks)
        .unwrap();
    let c = |s: TokenState| {
        let c = style.states.of(s);
        [c.0, c.1, c.2, 255]
    };
    for y in 0..2 {
        assert_eq!(px(&rgba, 4, 0, y), c(Sink));
        assert_eq!(px(&rgba, 4, 1, y), c(Dropped));
        assert_eq!(px(&rgba, 4, 2, y), c(Heavy));
        assert_eq!(px(&rgba, 4, 3, y), c(Recent));
    }
    // kept columns keep the colour map: pixel (2, 3) is query 1, key 2 = 7
    assert_eq!(px(&rgba, 4, 2, 3), lut_rgba(Colormap::Viridis, 7.0 / 9.0));
    assert_eq!(px(&rgba, 4, 0, 4), lut_rgba(Colormap::Viridis, 1.0));
    // the dropped column is grey (r = g = b), faded toward white, not the colour map
    for y in 2..6 {
        let p = px(&rgba, 4, 1, y);
        assert!(
            p[0] == p[1] && p[1] == p[2],
            "dropped pixel {p:?} is not grey"
        );
        assert!(p[0] >= 153, "dropped pixel {p:?} is not faded toward white");
        assert_eq!(p[3], 255);
    }
    // darker cells stay darker after fading: key 1 is 6 at query 1 and 1 at query 2
    assert!(px(&rgba, 4, 1, 3)[0] > px(&rgba, 4, 1, 4)[0]);

    // dark theme: faded toward the dark background
    let dark = ChartStyle::dark();
    let marks = AttentionMarks::new(&states, &dark);
    let rgba = attention_heatmap_rgba(&PATTERN, 4, 4, 4, 20, Colormap::Viridis, (0.0, 9.0), &marks)
        .unwrap();
    assert!(px(&rgba, 4, 1, 19)[0] < 128);

    // one kept token among 32,768 survives pooling into 800 columns
    let cols = 32_768;
    let mut states = vec![Dropped; cols];
    states[20_000] = Heavy;
    let values = vec![0.5f32; 2 * cols];
    let mut marks = AttentionMarks::new(&states, &style);
    marks.strip_px = 3;
    let rgba = attention_heatmap_rgba(
        &values,
        2,
        cols,
        800,
        10,
        Colormap::Viridis,
        (0.0, 1.0),
        &marks,
    )
    .unwrap();
    let heavy_cols: Vec<u32> = (0..800)
        .filter(|&x| px(&rgba, 800, x, 0) == c(Heavy))
        .collect();
    assert_eq!(heavy_cols, vec![20_000 * 800 / 32_768]);
    assert_eq!(
        px(&rgba, 800, heavy_cols[0], 9),
        lut_rgba(Colormap::Viridis, 0.5)
    );

    // states must match the columns
    let err = attention_heatmap_rgba(
        &PATTERN,
        4,
        4,
        4,
        4,
        Colormap::Viridis,
        (0.0, 1.0),
        &AttentionMarks::new(&[Sink], &style),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("states has 1 entries but attention columns has 4"),
        "{err}"
    );
}

#[test]
fn error_heatmap_puts_tokens_along_x() {
    // 3 tokens x 2 channels, |x - x_hat| row-major (token-major)
    let abs_err = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5];
    let rgba = error_heatmap_rgba(&abs_err, 3, 2, 3, 2, Colormap::Viridis, 0.5).unwrap();
    // pixel (x = token 2, y = channel 0) = 0.4
    assert_eq!(px(&rgba, 3, 2, 0), lut_rgba(Colormap::Viridis, 0.8));
    assert_eq!(px(&rgba, 3, 0, 1), lut_rgba(Colormap::Viridis, 0.2));
    // pooling tokens keeps the worst error
    let rgba = error_heatmap_rgba(&abs_err, 3, 2, 1, 1, Colormap::Viridis, 0.5).unwrap();
    assert_eq!(px(&rgba, 1, 0, 0), lut_rgba(Colormap::Viridis, 1.0));
    // zero error everywhere with a zero range: the low end, no panic
    let rgba = error_heatmap_rgba(&[0.0; 6], 3, 2, 5, 5, Colormap::Viridis, 0.0).unwrap();
    assert_eq!(px(&rgba, 5, 4, 4), lut_rgba(Colormap::Viridis, 0.0));
    assert!(error_heatmap_rgba(&abs_err, 2, 2, 3, 2, Colormap::Viridis, 0.5).is_err());
}

#[test]
fn heatmap_frame_leaves_the_plot_empty_and_aligns_the_strip() {
    let style = ChartStyle::light();
    let view = HeatmapFrameView {
        title: "Attention (dropped columns dimmed)",
        x_label: "key token i",
        y_label: "query step t",
        x_range: (0.0, 4096.0),
        y_range: (0.0, 64.0),
        strip_px: 6,
        colorbar: Some(ColorbarView {
            colormap: Colormap::Viridis,
            range: (0.0, 0.25),
            label: "attention a[t][i]",
            scale: BarScale::Sqrt,
        }),
        legend: StateLabels {
            sink: "sink",
            heavy: "heavy",
            recent: "recent",
            dropped: "dropped",
        },
    };
    let (svg, rect) = render("heatmap_frame", (800, 320), |root| {
        draw_heatmap_frame(root, &view, &style).unwrap()
    });
    assert!(rect.w > 500 && rect.h > 150, "{rect:?}");
    assert!(rect.x >= 0 && rect.x as u32 + rect.w <= 800 && rect.y as u32 + rect.h <= 320);
    let els = parse(&svg);
    let t = texts(&els);
    for l in [
        "Attention (dropped columns dimmed)",
        "key token i",
        "query step t",
        "attention a[t][i]",
        "sink",
        "heavy",
        "recent",
        "dropped",
        "0.25",
        // a square-root bar: a quarter of the range is drawn half-way up (it said 0.13)
        "0.06",
    ] {
        assert!(t.contains(&l), "missing {l:?} in {t:?}");
    }
    assert!(
        !t.iter()
            .any(|x| x.starts_with("0.12") || x.starts_with("0.13")),
        "{t:?}"
    );
    // nothing drawn inside the plotting area: the page puts the pixels there
    let inside = els.iter().filter(|e| {
        (e.tag == "rect" && e.rect_inside(rect) && e.num("width") < f64::from(rect.w))
            || (e.tag == "polyline"
                && e.points().iter().any(|&(x, y)| {
                    x > rect.x
                        && y > rect.y
                        && x < rect.x + rect.w as i32 - 1
                        && y < rect.y + rect.h as i32 - 1
                }))
    });
    assert_eq!(inside.count(), 0);
    // the y axis starts below the strip: the tick "0" sits at rect.y + strip_px
    let zero = els
        .iter()
        .filter(|e| e.tag == "text" && e.text == "0" && e.get("text-anchor") == Some("end"))
        .map(|e| e.num("y") as i32)
        .next()
        .expect("y tick 0");
    assert!(
        (zero - (rect.y + 6)).abs() <= 1,
        "tick 0 at {zero}, plot top {}",
        rect.y
    );
    // the colour bar: gradient rectangles right of the plot
    let bar = els
        .iter()
        .filter(|e| e.tag == "rect" && e.num("x") > f64::from(rect.x) + f64::from(rect.w))
        .count();
    assert_eq!(bar, 64);
}

// ---------------------------------------------------------------- score_bars

const LABELS: StateLabels<'static> = StateLabels {
    sink: "sink",
    heavy: "heavy hitter",
    recent: "recent",
    dropped: "dropped",
};

#[test]
fn score_bars_name_their_tokens_when_there_is_room() {
    use TokenState::*;
    let style = ChartStyle::light();
    let scores = [1.35f32, 0.35, 0.30, 1.00, 0.20, 0.60, 0.10, 0.40];
    let states = [
        Sink, Dropped, Dropped, Heavy, Dropped, Heavy, Recent, Recent,
    ];
    let labels = [
        (0, "‘BOS’".to_string()),
        (3, "‘ cat’".to_string()),
        // (a label wider than the gap to the one before it is left out)
        (5, "‘ a very long token that cannot fit’".to_string()),
    ];
    let view = ScoreBarsView {
        title: "scores",
        x_label: "token i",
        y_label: "score",
        scores: &scores,
        states: &states,
        threshold: None,
        threshold_label: "",
        recent: None,
        recent_label: "",
        legend: StateLabels::default(),
        labels: &labels,
    };
    let (svg, rect) = render("score_bars_labels", (600, 300), |root| {
        score_bars(root, &view, &style).unwrap()
    });
    let els = parse(&svg);
    let t = texts(&els);
    assert!(t.contains(&"‘BOS’") && t.contains(&"‘ cat’"), "{t:?}");
    assert!(!t.iter().any(|x| x.contains("very long")), "{t:?}");
    // each name sits over its own bar
    let x_of = |label: &str| {
        els.iter()
            .find(|e| e.tag == "text" && e.text == label)
            .map(|e| e.num("x") - f64::from(rect.x))
            .expect("drawn")
    };
    let bar = f64::from(rect.w) / 8.0;
    assert!((x_of("‘ cat’") - 3.5 * bar).abs() <= 1.0);
    assert!((x_of("‘BOS’") - 0.5 * bar).abs() <= 1.0);

    // Labels come most important first: of two that collide, the first is drawn, whichever
    // token comes first (the tallest heavy hitter went unnamed when its left neighbour's label
    // was placed before it).
    let scores: Vec<f32> = (0..40).map(|i| if i == 21 { 2.0 } else { 0.5 }).collect();
    let states = vec![Heavy; 40];
    let crowded = [(21, "‘ over’".to_string()), (20, "‘ jumps’".to_string())];
    let view = ScoreBarsView {
        scores: &scores,
        states: &states,
        labels: &crowded,
        ..view
    };
    let (svg, _) = render("score_bars_crowded", (300, 200), |root| {
        score_bars(root, &view, &style).unwrap()
    });
    let t: Vec<String> = texts(&parse(&svg)).into_iter().map(String::from).collect();
    assert!(t.iter().any(|x| x == "‘ over’"), "{t:?}");
    assert!(!t.iter().any(|x| x == "‘ jumps’"), "{t:?}");
}

#[test]
fn score_bars_threshold_window_and_state_colours() {
    use TokenState::*;
    let style = ChartStyle::light();
    let scores = [1.35f32, 0.35, 0.30, 1.00, 0.20, 0.60, 0.10, 0.40];
    let states = [
        Sink, Dropped, Dropped, Heavy, Dropped, Heavy, Recent, Recent,
    ];
    let view = ScoreBarsView {
        title: "Cumulative attention scores",
        x_label: "token i",
        y_label: "score",
        scores: &scores,
        states: &states,
        threshold: Some(0.6),
        threshold_label: "top-k threshold",
        recent: Some((6, 8)),
        recent_label: "recent r = 2",
        legend: LABELS,
        labels: &[],
    };
    let (svg, rect) = render("score_bars", (600, 300), |root| {
        score_bars(root, &view, &style).unwrap()
    });
    let els = parse(&svg);
    let t = texts(&els);
    for l in [
        "Cumulative attention scores",
        "token i",
        "score",
        "top-k threshold",
        "recent r = 2",
        "sink",
        "heavy hitter",
        "recent",
        "dropped",
    ] {
        assert!(t.contains(&l), "missing {l:?}");
    }
    let count = |s: TokenState| {
        rects(&els, &hex(style.states.of(s)), rect)
            .into_iter()
            .filter(|e| e.get("opacity") == Some("1"))
            .count()
    };
    assert_eq!(count(Sink), 1);
    assert_eq!(count(Heavy), 2);
    assert_eq!(count(Dropped), 3);
    assert_eq!(count(Recent), 2);
    // recent window shading over tokens 6..8
    let shade: Vec<_> = rects(&els, &hex(style.states.recent), rect)
        .into_iter()
        .filter(|e| e.get("opacity") == Some("0.12"))
        .collect();
    assert_eq!(shade.len(), 1);
    let sx = shade[0].num("x") - f64::from(rect.x);
    assert!((sx - 6.0 / 8.0 * f64::from(rect.w)).abs() <= 1.0);
    // the threshold: dashes all on one row, at the expected height
    let dashes = lines(&els, &hex(style.reference), rect);
    assert!(dashes.len() > 5, "a dashed line has several dashes");
    let top = 1.1 * 1.35;
    let y = y_of(0.6, (0.0, top), rect.h) + rect.y;
    assert!(
        dashes.iter().all(|d| d.points().iter().all(|p| p.1 == y)),
        "threshold not at y={y}"
    );
    // bars above the threshold reach above the line, bars below stay below
    let heavy_tops: Vec<f64> = rects(&els, &hex(style.states.heavy), rect)
        .iter()
        .map(|e| e.num("y"))
        .collect();
    assert!(heavy_tops.iter().all(|&t| t <= f64::from(y)));
    let dropped_tops: Vec<f64> = rects(&els, &hex(style.states.dropped), rect)
        .iter()
        .map(|e| e.num("y"))
        .collect();
    assert!(dropped_tops.iter().all(|&t| t > f64::from(y)));
}

#[test]
fn score_bars_downsample_to_pixel_columns() {
    use TokenState::*;
    let style = ChartStyle::light();
    let n = 32_768;
    let scores: Vec<f32> = (0..n).map(|i| 0.1 + (i % 5) as f32 * 0.01).collect();
    let mut states = vec![Dropped; n];
    states[10_000] = Heavy;
    for s in &mut states[n - 64..] {
        *s = Recent;
    }
    states[0] = Sink;
    let view = ScoreBarsView {
        title: "",
        x_label: "",
        y_label: "",
        scores: &scores,
        states: &states,
        threshold: None,
        threshold_label: "never shown",
        recent: Some((n - 64, n)),
        recent_label: "",
        legend: StateLabels::default(),
        labels: &[],
    };
    let (svg, rect) = render("score_bars_32k", (800, 240), |root| {
        score_bars(root, &view, &style).unwrap()
    });
    let els = parse(&svg);
    let bars: usize = [Sink, Heavy, Recent, Dropped]
        .iter()
        .map(|&s| {
            rects(&els, &hex(style.states.of(s)), rect)
                .into_iter()
                .filter(|e| e.get("opacity") == Some("1"))
                .count()
        })
        .sum();
    assert_eq!(bars, rect.w as usize);
    assert_eq!(rects(&els, &hex(style.states.heavy), rect).len(), 1);
    assert_eq!(rects(&els, &hex(style.states.sink), rect).len(), 1);
    assert!(!svg.contains("never shown"));
    assert!(lines(&els, &hex(style.reference), rect).is_empty());
}

// ---------------------------------------------------------------- token_strip

#[test]
fn token_strip_runs_and_priority() {
    use TokenState::*;
    let style = ChartStyle::light();
    let states = [
        Sink, Dropped, Dropped, Heavy, Heavy, Dropped, Recent, Recent,
    ];
    let view = TokenStripView {
        title: "Kept tokens",
        x_label: "token i",
        states: &states,
        legend: LABELS,
    };
    let (svg, rect) = render("strip", (600, 120), |root| {
        token_strip(root, &view, &style).unwrap()
    });
    let els = parse(&svg);
    let count = |s: TokenState| rects(&els, &hex(style.states.of(s)), rect).len();
    // runs: S | DD | HH | D | RR
    assert_eq!(
        (count(Sink), count(Dropped), count(Heavy), count(Recent)),
        (1, 2, 1, 1)
    );
    let heavy = &rects(&els, &hex(style.states.heavy), rect)[0];
    let w8 = f64::from(rect.w) / 8.0;
    assert!((heavy.num("x") - f64::from(rect.x) - 3.0 * w8).abs() <= 1.0);
    assert!((heavy.num("width") - 2.0 * w8).abs() <= 1.0);
    assert!(texts(&els).contains(&"Kept tokens"));

    // 100,000 tokens in ~500 px: each kept token still shows, by priority
    let mut states = vec![Dropped; 100_000];
    states[50_000] = Recent;
    states[50_001] = Heavy; // same pixel column as the recent one: heavy wins
    states[99_999] = Sink;
    let view = TokenStripView {
        title: "",
        x_label: "",
        states: &states,
        legend: StateLabels::default(),
    };
    let (svg, rect) = render("strip_100k", (600, 40), |root| {
        token_strip(root, &view, &style).unwrap()
    });
    let els = parse(&svg);
    assert_eq!(rects(&els, &hex(style.states.heavy), rect).len(), 1);
    assert_eq!(rects(&els, &hex(style.states.recent), rect).len(), 0);
    assert_eq!(rects(&els, &hex(style.states.sink), rect).len(), 1);
    assert_eq!(rects(&els, &hex(style.states.dropped), rect).len(), 2);
}

#[test]
fn policy_strips_draw_one_rectangle_per_run_of_equal_states() {
    use TokenState::*;
    let style = ChartStyle::light();
    // 100,000 tokens in ~500 px: one heavy token among dropped ones, and a row all recent.
    let mut one_heavy = vec![Dropped; 100_000];
    one_heavy[50_000] = Heavy;
    let all_recent = vec![Recent; 100_000];
    let rows: [(&str, &[TokenState]); 2] = [("H2O", &one_heavy), ("recent", &all_recent)];
    let view = PolicyStripsView {
        title: "Kept tokens per policy",
        x_label: "token i",
        rows: &rows,
        legend: LABELS,
    };
    let (svg, rect) = render("policy_strips", (600, 160), |root| {
        policy_strips(root, &view, &style).unwrap()
    });
    let els = parse(&svg);
    let count = |s: TokenState| rects(&els, &hex(style.states.of(s)), rect).len();
    // dropped | heavy | dropped, then one recent run
    assert_eq!((count(Dropped), count(Heavy), count(Recent)), (2, 1, 1));
    let recent = rects(&els, &hex(style.states.recent), rect)[0];
    assert!(
        (recent.num("width") - f64::from(rect.w)).abs() <= 1.0,
        "the recent run spans the plot"
    );
    assert!(texts(&els).contains(&"H2O") && texts(&els).contains(&"recent"));
}

#[test]
fn policy_strips_make_room_for_their_longest_row_label() {
    use TokenState::*;
    let style = ChartStyle::light();
    let states = vec![Dropped; 64];
    let plot_left = |rows: &[(&str, &[TokenState])]| {
        let view = PolicyStripsView {
            title: "",
            x_label: "token i",
            rows,
            legend: LABELS,
        };
        render("policy_strips_labels", (600, 160), |root| {
            let font =
                TextStyle::from((style.font_family.as_str(), style.font_size * 0.8).into_font());
            let widest = rows
                .iter()
                .map(|(label, _)| root.estimate_text_size(label, &font).unwrap().0)
                .max()
                .unwrap();
            (policy_strips(root, &view, &style).unwrap().x, widest)
        })
        .1
    };
    // Short labels: the shared left area (56 px), so the plot lines up with the other charts.
    let (short_left, short_w) = plot_left(&[("H2O", &states), ("TOVA", &states)]);
    assert!(short_w + 8 <= 56, "{short_w}");
    assert_eq!(short_left, 56);
    // A long one: the area grows to hold it, with its gap, so no label is cut at the edge.
    let (long_left, long_w) = plot_left(&[("H2O", &states), ("StreamingLLM (sinks)", &states)]);
    assert!(long_w > 56, "{long_w}");
    assert!(
        long_left >= long_w as i32 + 4 && long_left <= long_w as i32 + 10,
        "{long_left} for {long_w}"
    );
}

// ---------------------------------------------------------------- mass_retained

#[test]
fn mass_retained_line_mean_and_gaps() {
    let style = ChartStyle::light();
    let mass: Vec<f64> = (0..50).map(|i| 0.8 + 0.004 * f64::from(i)).collect();
    let view = MassRetainedView {
        title: "Attention mass retained",
        x_label: "step t",
        y_label: "retained",
        mass: &mass,
        mean: 0.9,
        mass_label: "per step",
        mean_label: "mean 0.90",
    };
    let (svg, rect) = render("mass", (600, 300), |root| {
        mass_retained(root, &view, &style).unwrap()
    });
    let els = parse(&svg);
    let line = lines(&els, &hex(style.primary), rect);
    assert_eq!(line.len(), 1);
    assert_eq!(line[0].points().len(), 50);
    let y = y_of(0.9, (0.0, 1.0), rect.h) + rect.y;
    let dashes = lines(&els, &hex(style.reference), rect);
    assert!(dashes.len() > 5);
    assert!(dashes.iter().all(|d| d.points().iter().all(|p| p.1 == y)));
    for l in [
        "Attention mass retained",
        "step t",
        "retained",
        "per step",
        "mean 0.90",
    ] {
        assert!(texts(&els).contains(&l));
    }

    // a NaN step splits the line; many steps keep each column's min and max
    let mut mass: Vec<f64> = (0..20_000).map(|i| 0.5 + 0.5 * f64::from(i % 2)).collect();
    mass[10_000..10_100].fill(f64::NAN);
    let view = MassRetainedView {
        mass: &mass,
        mean: f64::NAN,
        ..view
    };
    let (svg, rect) = render("mass_20k", (600, 300), |root| {
        mass_retained(root, &view, &style).unwrap()
    });
    let els = parse(&svg);
    let segs = lines(&els, &hex(style.primary), rect);
    assert_eq!(segs.len(), 2);
    let pts: usize = segs.iter().map(|e| e.points().len()).sum();
    assert!(pts <= 2 * rect.w as usize && pts > rect.w as usize);
    let ys: Vec<i32> = segs.iter().flat_map(|e| e.points()).map(|p| p.1).collect();
    assert!(ys.contains(&(y_of(0.5, (0.0, 1.0), rect.h) + rect.y)));
    assert!(ys.contains(&(y_of(1.0, (0.0, 1.0), rect.h) + rect.y)));
    assert!(!svg.contains("mean 0.90"));
}

// ---------------------------------------------------------------- tradeoff

/// One curve `points` and the ring at `current` on a log-x trade-off with y up to 0.2 (the
/// model's): the SVG, the plot's rectangle and the ring drawn in it.
fn log_tradeoff(name: &str, points: &[(f64, f64)], current: (f64, f64)) -> (String, PixelRect, El) {
    let style = ChartStyle::light();
    let curves = [TradeoffCurve { label: "A", points }];
    let view = TradeoffView {
        title: "KL",
        x_label: "R_overall",
        y_label: "KL",
        curves: &curves,
        current: Some(current),
        current_label: "current setting",
        log_x: true,
        y_top: Some(0.2),
    };
    let (svg, rect) = render(name, (600, 320), |root| {
        tradeoff(root, &view, &style).unwrap()
    });
    let fg = hex(style.foreground);
    let ring = parse(&svg)
        .into_iter()
        .filter(|e| e.tag == "circle" && e.stroke() == fg && e.fill() == "none")
        .find(|e| e.num("cy") >= f64::from(rect.y))
        .expect("the ring in the plot");
    (svg, rect, ring)
}

#[test]
fn a_log_scale_tradeoff_reaches_down_to_a_ratio_below_one() {
    // 16-bit codes with their scales can take more bytes than fp16: a curve reaching R_overall
    // 0.5 moves the axis's left end below 1, so a ratio of 1 is no longer at the left edge
    // (the 0.5 was clamped onto 1 there).
    let (_, rect, ring) = log_tradeoff(
        "tradeoff-log-low",
        &[(0.5, 0.0), (10.0, 0.05), (100.0, 0.1)],
        (1.0, 0.0),
    );
    let (lo, hi) = ((0.5f64 / 1.02).log10(), 102f64.log10());
    let want_x = f64::from(rect.x) + (0.0 - lo) / (hi - lo) * f64::from(rect.w - 1);
    assert!(
        (ring.num("cx") - want_x).abs() <= 1.5,
        "cx {} against {want_x}",
        ring.num("cx")
    );
}

#[test]
fn a_tradeoff_curve_past_the_palette_is_dashed_in_the_plot_and_the_legend() {
    // Eight curves, seven colours: the eighth reuses the first's colour, dashed.
    let style = ChartStyle::light();
    let pts = [(1.0, 0.1), (10.0, 0.5), (100.0, 0.9)];
    let labels = ["a", "b", "c", "d", "e", "f", "g", "h"];
    assert_eq!(style.palette.len(), 7);
    let curves: Vec<TradeoffCurve> = labels
        .iter()
        .map(|label| TradeoffCurve {
            label,
            points: &pts,
        })
        .collect();
    let lines = |curves: &[TradeoffCurve]| {
        let view = TradeoffView {
            title: "KL",
            x_label: "R",
            y_label: "KL",
            curves,
            current: None,
            current_label: "",
            log_x: true,
            y_top: Some(1.0),
        };
        let (svg, _) = render("tradeoff-dashed", (600, 320), |root| {
            tradeoff(root, &view, &style).unwrap()
        });
        let first = hex(style.palette[0]);
        parse(&svg)
            .iter()
            .filter(|e| e.tag == "polyline" && e.stroke() == first)
            .count()
    };
    // Seven curves: the first colour's line in the plot and its swatch in the legend.
    assert_eq!(lines(&curves[..7]), 2);
    // The eighth adds dashes along its path and a two-dash swatch: many more short lines.
    assert!(lines(&curves) > 10, "{}", lines(&curves));
}

#[test]
fn a_log_scale_tradeoff_places_ratios_by_their_logarithm_and_y_up_to_its_top() {
    // The model's trade-off: KL (nats, up to y_top) against R_overall on a log axis.
    let (svg, rect, ring) = log_tradeoff(
        "tradeoff-log",
        &[(1.0, 0.0), (10.0, 0.05), (100.0, 0.1)],
        (10.0, 0.1),
    );
    // x spans log10(1) ..= log10(1.02 * 100): 10 sits at 1 / log10(102) of the width, not at
    // 9 / 101 as on a linear axis; y = 0.1 is half of the top 0.2.
    let want_x = f64::from(rect.x) + 1.0 / 102f64.log10() * f64::from(rect.w - 1);
    let want_y = f64::from(y_of(0.1, (0.0, 0.2), rect.h) + rect.y);
    assert!(
        (ring.num("cx") - want_x).abs() <= 1.5,
        "cx {} against {want_x}",
        ring.num("cx")
    );
    assert!(
        (ring.num("cy") - want_y).abs() <= 1.5,
        "cy {} against {want_y}",
        ring.num("cy")
    );
    // The ticks read as ratios: 10 and 100 are labelled, not their logarithms 1 and 2.
    let ticks: Vec<&str> = svg
        .split("</text>")
        .filter_map(|t| t.rsplit('>').next())
        .map(str::trim)
        .collect();
    for want in ["1", "10", "100"] {
        assert!(ticks.contains(&want), "tick {want} in {ticks:?}");
    }
    assert!(!ticks.contains(&"2"), "no logarithm as a tick: {ticks:?}");
}

#[test]
fn tradeoff_rings_the_current_setting_in_the_text_colour_and_its_legend_shows_a_ring() {
    for style in [ChartStyle::light(), ChartStyle::dark()] {
        let a = [(1.0, 1.0), (2.0, 0.8), (4.0, 0.5)];
        let b = [(1.0, 1.0), (2.0, 0.6), (4.0, 0.2)];
        let curves = [
            TradeoffCurve {
                label: "A",
                points: &a,
            },
            TradeoffCurve {
                label: "B",
                points: &b,
            },
        ];
        let view = TradeoffView {
            title: "trade-off",
            x_label: "R",
            y_label: "mass",
            curves: &curves,
            current: Some((2.0, 0.8)),
            current_label: "current setting",
            log_x: false,
            y_top: None,
        };
        let (svg, rect) = render("tradeoff", (600, 320), |root| {
            tradeoff(root, &view, &style).unwrap()
        });
        let els = parse(&svg);
        let fg = hex(style.foreground);
        let rings: Vec<&El> = els
            .iter()
            .filter(|e| e.tag == "circle" && e.stroke() == fg && e.fill() == "none")
            .collect();
        assert_eq!(
            rings.len(),
            2,
            "one ring in the plot, one in the legend: {svg}"
        );
        // No curve has the ring's colour, so the ring is told apart from every curve's dots.
        assert!(style.palette.iter().all(|&c| hex(c) != fg));
        // The plot's ring sits on the current point (x spans 1 ..= 1.02 * 4, y 0 ..= 1).
        let (x_hi, y) = (4.0 * 1.02, 0.8);
        let inside = |e: &El| {
            let (cx, cy) = (e.num("cx"), e.num("cy"));
            cx >= f64::from(rect.x)
                && cx <= f64::from(rect.x + rect.w as i32)
                && cy >= f64::from(rect.y)
                && cy <= f64::from(rect.y + rect.h as i32)
        };
        let plot_ring = rings
            .iter()
            .find(|e| inside(e))
            .expect("a ring in the plot");
        let want_x = f64::from(rect.x) + (2.0 - 1.0) / (x_hi - 1.0) * f64::from(rect.w - 1);
        let want_y = f64::from(y_of(y, (0.0, 1.0), rect.h) + rect.y);
        assert!(
            (plot_ring.num("cx") - want_x).abs() <= 1.5,
            "cx {} against {want_x}",
            plot_ring.num("cx")
        );
        assert!(
            (plot_ring.num("cy") - want_y).abs() <= 1.5,
            "cy {} against {want_y}",
            plot_ring.num("cy")
        );
        // The legend's ring is above the plot, on the line of its text.
        let legend_ring = rings
            .iter()
            .find(|e| !inside(e))
            .expect("a ring in the legend");
        assert!(legend_ring.num("cy") < f64::from(rect.y));
        let label = els
            .iter()
            .find(|e| e.tag == "text" && e.text == "current setting")
            .expect("the ring's legend text");
        assert!((label.num("y") - legend_ring.num("cy")).abs() <= 1.0);
        assert!(label.num("x") > legend_ring.num("cx"));
        // Nothing is drawn in the alarm colour: the ring is not an alarm.
        assert!(!svg.contains(&hex(style.alarm)));
    }
}

// ---------------------------------------------------------------- budget_bar

#[test]
fn budget_bar_stacks_terms_against_fp() {
    let style = ChartStyle::light();
    let terms = [
        BudgetTerm {
            label: "codes",
            value: 3.0,
            value_text: "3.00 GiB",
        },
        BudgetTerm {
            label: "fp kept",
            value: 1.0,
            value_text: "1.00 GiB",
        },
        BudgetTerm {
            label: "scales",
            value: 0.25,
            value_text: "0.25 GiB",
        },
        BudgetTerm {
            label: "zero points",
            value: 0.0,
            value_text: "0 B",
        },
        BudgetTerm {
            label: "score state",
            value: 0.0005,
            value_text: "0.5 MiB",
        },
        BudgetTerm {
            label: "index",
            value: 0.5,
            value_text: "0.50 GiB",
        },
    ];
    let view = BudgetBarView {
        title: "KV cache memory",
        x_label: "GiB",
        final_label: "M_KV,final",
        terms: &terms,
        final_text: "4.75 GiB",
        fp_label: "M_fp",
        fp_value: 16.0,
        fp_text: "16.00 GiB",
    };
    let (svg, rect) = render("budget", (700, 260), |root| {
        budget_bar(root, &view, &style).unwrap()
    });
    let els = parse(&svg);
    let t = texts(&els);
    for l in [
        "KV cache memory",
        "GiB",
        "M_KV,final",
        "4.75 GiB",
        "M_fp",
        "16.00 GiB",
        "codes 3.00 GiB",
        "zero points 0 B",
        "score state 0.5 MiB",
        "index 0.50 GiB",
    ] {
        assert!(t.contains(&l), "missing {l:?} in {t:?}");
    }
    // one segment per positive term, left to right, widths in proportion
    let segs: Vec<&El> = (0..6)
        .flat_map(|i| rects(&els, &hex(style.palette[i]), rect))
        .collect();
    assert_eq!(segs.len(), 5);
    let x_hi = 1.25 * 16.0;
    let unit = f64::from(rect.w - 1) / x_hi;
    assert!((segs[0].num("width") - 3.0 * unit).abs() <= 1.5);
    assert!(segs[3].num("width") >= 1.0, "a tiny term still shows");
    assert!(segs.windows(2).all(|w| w[0].num("x") < w[1].num("x")));
    let fp = rects(&els, &hex(style.muted), rect);
    assert_eq!(fp.len(), 1);
    assert!((fp[0].num("width") - 16.0 * unit).abs() <= 1.5);
    assert!(
        fp[0].num("y") > segs[0].num("y"),
        "M_fp is below M_KV,final"
    );
}

// ---------------------------------------------------------------- themes, text, degenerate input

#[test]
fn dark_theme_and_chinese_labels() {
    let style = ChartStyle::dark().with_scale(2.0);
    let mass = [0.9, 0.95, 1.0];
    let view = MassRetainedView {
        title: "保留的注意力质量",
        x_label: "步 t",
        y_label: "保留比例",
        mass: &mass,
        mean: 0.95,
        mass_label: "每步",
        mean_label: "平均 0.95",
    };
    let (svg, rect) = render("mass_dark_zh", (1200, 600), |root| {
        mass_retained(root, &view, &style).unwrap()
    });
    assert!(!rect.is_empty());
    assert!(svg.contains(&format!("fill=\"{}\"", hex(style.background))));
    let els = parse(&svg);
    for l in ["保留的注意力质量", "步 t", "保留比例", "每步", "平均 0.95"] {
        assert!(texts(&els).contains(&l), "missing {l:?}");
    }
    // at scale 2 lines are 3 px (1.5 CSS px) wide
    assert!(lines(&els, &hex(style.primary), rect)[0].get("stroke-width") == Some("3"));
}

#[test]
fn length_mismatches_are_errors_naming_the_arrays() {
    let style = ChartStyle::light();
    let view = ScoreBarsView {
        title: "",
        x_label: "",
        y_label: "",
        scores: &[1.0, 2.0, 3.0],
        states: &[TokenState::Heavy],
        threshold: None,
        threshold_label: "",
        recent: None,
        recent_label: "",
        legend: LABELS,
        labels: &[],
    };
    let (_, r) = render("mismatch", (300, 200), |root| {
        score_bars(root, &view, &style)
    });
    let msg = r.unwrap_err().to_string();
    assert!(
        msg.contains("states has 1 entries but scores has 3"),
        "{msg}"
    );
}

/// Every chart, on every degenerate input, at every tiny size: no panic.
#[test]
fn degenerate_inputs_never_panic() {
    use TokenState::*;
    let style = ChartStyle::light();
    let nan = f64::NAN;
    let sizes = [
        (0, 0),
        (1, 1),
        (2, 300),
        (300, 2),
        (20, 15),
        (90, 60),
        (400, 240),
    ];
    let empties_f32: [&[f32]; 4] = [&[], &[f32::NAN], &[0.0], &[f32::NAN, 1.0, f32::INFINITY]];
    let empties_f64: [&[f64]; 4] = [&[], &[nan], &[0.0], &[nan, 0.5, f64::INFINITY]];
    let grids: [&[f64]; 3] = [&[], &[nan, 0.0], &[1.0; 3]];
    let groups: [&[GroupError]; 4] = [
        &[],
        &[GroupError {
            max_abs: f32::NAN,
            bound: f32::NAN,
            limit: f64::from(f32::NAN),
        }],
        &[GroupError {
            max_abs: 0.0,
            bound: 0.0,
            limit: 0.0,
        }],
        &[
            GroupError {
                max_abs: 1.0,
                bound: f32::INFINITY,
                limit: f64::from(f32::INFINITY),
            },
            GroupError {
                max_abs: 2.0,
                bound: 1.0,
                limit: 1.0,
            },
        ],
    ];
    let rows: [&[RowError]; 3] = [
        &[],
        &[RowError {
            sq_err: nan,
            bound: nan,
            limit: nan,
        }],
        &[RowError {
            sq_err: 0.0,
            bound: 0.0,
            limit: 0.0,
        }],
    ];
    let states_for = |n: usize| vec![Sink; n];
    for &(w, h) in &sizes {
        let name = format!("degenerate_{w}x{h}");
        for (i, &counts) in [&[][..], &[0u32][..], &[0, 5, u32::MAX][..]]
            .iter()
            .enumerate()
        {
            for &grid in &grids {
                for range in [(0.0, 0.0), (nan, 1.0), (2.0, -2.0), (-1.0, 1.0)] {
                    let view = QuantHistogramView {
                        bin_range: range,
                        counts,
                        grid,
                        min: if i == 1 { nan } else { 0.0 },
                        max: f64::INFINITY,
                        ..hist_view(&[], &[])
                    };
                    render(&name, (w, h), |root| {
                        quant_histogram(root, &view, &style).unwrap()
                    });
                }
            }
        }
        for &errors in &groups {
            render(&name, (w, h), |root| {
                group_error_bars(root, &group_view(errors), &style).unwrap()
            });
        }
        for &r in &rows {
            render(&name, (w, h), |root| {
                row_error_vs_bound(root, &row_view(r), &style).unwrap()
            });
        }
        for &scores in &empties_f32 {
            let states = states_for(scores.len());
            for threshold in [None, Some(nan), Some(0.0), Some(-1.0)] {
                for recent in [None, Some((0, 0)), Some((5, 2)), Some((0, usize::MAX))] {
                    let view = ScoreBarsView {
                        title: "t",
                        x_label: "x",
                        y_label: "y",
                        scores,
                        states: &states,
                        threshold,
                        threshold_label: "thr",
                        recent,
                        recent_label: "r",
                        legend: LABELS,
                        labels: &[],
                    };
                    render(&name, (w, h), |root| {
                        score_bars(root, &view, &style).unwrap()
                    });
                }
            }
            let view = TokenStripView {
                title: "t",
                x_label: "x",
                states: &states,
                legend: LABELS,
            };
            render(&name, (w, h), |root| {
                token_strip(root, &view, &style).unwrap()
            });
        }
        for &mass in &empties_f64 {
            for mean in [nan, 0.0, 2.0] {
                let view = MassRetainedView {
                    title: "t",
                    x_label: "x",
                    y_label: "y",
                    mass,
                    mean,
                    mass_label: "m",
                    mean_label: "mean",
                };
                render(&name, (w, h), |root| {
                    mass_retained(root, &view, &style).unwrap()
                });
            }
        }
        for terms in [
            &[][..],
            &[BudgetTerm {
                label: "",
                value: nan,
                value_text: "",
            }][..],
        ] {
            for fp in [nan, 0.0, -1.0, f64::INFINITY] {
                let view = BudgetBarView {
                    title: "t",
                    x_label: "x",
                    final_label: "f",
                    terms,
                    final_text: "",
                    fp_label: "fp",
                    fp_value: fp,
                    fp_text: "",
                };
                render(&name, (w, h), |root| {
                    budget_bar(root, &view, &style).unwrap()
                });
            }
        }
        for (xr, yr, strip) in [
            ((0.0, 0.0), (nan, nan), 0),
            ((0.0, 1.0), (0.0, 1.0), 1000),
            ((5.0, 1.0), (0.0, 64.0), 3),
        ] {
            let view = HeatmapFrameView {
                title: "t",
                x_label: "x",
                y_label: "y",
                x_range: xr,
                y_range: yr,
                strip_px: strip,
                colorbar: Some(ColorbarView {
                    colormap: Colormap::Cividis,
                    range: (nan, nan),
                    label: "c",
                    scale: BarScale::Linear,
                }),
                legend: LABELS,
            };
            render(&name, (w, h), |root| {
                draw_heatmap_frame(root, &view, &style).unwrap()
            });
        }
        // pixel buffers of the same sizes
        let marks_states = [Dropped; 3];
        let marks = AttentionMarks {
            strip_px: 1000,
            ..AttentionMarks::new(&marks_states, &style)
        };
        let buf = attention_heatmap_rgba(
            &[0.1, f32::NAN, 0.3],
            1,
            3,
            w,
            h,
            Colormap::Viridis,
            (0.0, 0.0),
            &marks,
        )
        .unwrap();
        assert_eq!(buf.len(), (w * h * 4) as usize);
        let buf = error_heatmap_rgba(&[], 0, 0, w, h, Colormap::Viridis, f32::NAN).unwrap();
        assert_eq!(buf.len(), (w * h * 4) as usize);
    }
    // odd styles
    let mut odd = ChartStyle::dark();
    odd.scale = f64::NAN;
    odd.font_size = 0.0;
    odd.palette.clear();
    odd.font_family.clear();
    odd.y_label_area = u32::MAX;
    let terms = [BudgetTerm {
        label: "a",
        value: 1.0,
        value_text: "1",
    }];
    let view = BudgetBarView {
        title: "t",
        x_label: "x",
        final_label: "f",
        terms: &terms,
        final_text: "1",
        fp_label: "fp",
        fp_value: 2.0,
        fp_text: "2",
    };
    render("odd_style", (300, 200), |root| {
        budget_bar(root, &view, &odd).unwrap()
    });
}

/// Layers built once and composed for many selections (what the page does on B, r and method
/// changes) give, pixel for pixel, a reference written from the documented rules: the strip in
/// each pixel column's most important state colour; below it the colour map, and in dropped
/// columns the grey of equal luminance faded 60% toward the background.
#[test]
fn attention_layers_compose_the_documented_pixels() {
    use TokenState::*;
    let style = ChartStyle::dark();
    let (rows, cols) = (5usize, 37usize);
    let values: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7919) % 997) as f32 / 997.0)
        .collect();
    for (w, h, strip) in [(20u32, 11u32, 3u32), (37, 5, 0), (90, 12, 2), (4, 4, 4)] {
        let base = vec![Dropped; cols];
        let mut marks = AttentionMarks::new(&base, &style);
        marks.strip_px = strip;
        let pooled = pool_attention(&values, rows, cols, w, h, strip).unwrap();
        let layers =
            AttentionLayers::new(&pooled, w, h, Colormap::Cividis, (0.0, 1.0), &marks, |v| v)
                .unwrap();
        let (wu, hu, su) = (w as usize, h as usize, (strip as usize).min(h as usize));
        // the colour map of the pooled grid itself (pooling a grid to its own size is exact)
        let plain = heatmap_rgba(
            &pooled,
            hu - su,
            wu,
            w,
            h - su.min(hu) as u32,
            Colormap::Cividis,
            (0.0, 1.0),
        )
        .unwrap();
        for k in 0..6usize {
            let states: Vec<TokenState> = (0..cols)
                .map(|c| [Sink, Dropped, Heavy, Recent, Dropped, Dropped][(c * (k + 1) + k) % 6])
                .collect();
            let marks = AttentionMarks {
                strip_px: strip,
                ..AttentionMarks::new(&states, &style)
            };
            let got = layers.compose(&marks, cols).unwrap();
            assert_eq!(got.len(), wu * hu * 4);
            for x in 0..wu {
                let (a, b) = (
                    x * cols / wu,
                    ((x + 1) * cols / wu).max(x * cols / wu + 1).min(cols),
                );
                let st = states[a.min(cols - 1)..b].iter().copied().max().unwrap();
                for y in 0..hu {
                    let i = (y * wu + x) * 4;
                    let want: [u8; 4] = if y < su {
                        let c = style.states.of(st);
                        [c.0, c.1, c.2, 255]
                    } else {
                        let j = ((y - su) * wu + x) * 4;
                        let p = [plain[j], plain[j + 1], plain[j + 2], plain[j + 3]];
                        if st != Dropped || p[3] == 0 {
                            p
                        } else {
                            let grey = 0.2126 * f32::from(p[0])
                                + 0.7152 * f32::from(p[1])
                                + 0.0722 * f32::from(p[2]);
                            let bg = style.background;
                            let f = |t: u8| (grey * 0.4 + f32::from(t) * 0.6).round() as u8;
                            [f(bg.0), f(bg.1), f(bg.2), 255]
                        }
                    };
                    assert_eq!(
                        &got[i..i + 4],
                        &want,
                        "{w}x{h} strip {strip} k {k} at ({x}, {y})"
                    );
                }
            }
        }
        // wrong state count: refused
        assert!(layers
            .compose(&AttentionMarks::new(&base[1..], &style), cols)
            .is_err());
    }
}

/// Pooling the raw weights once and mapping the pooled pixels (what the page does, caching the
/// pool between selection changes) gives exactly the pixels of mapping every weight first.
#[test]
fn pooled_attention_heatmap_equals_mapping_every_cell_first() {
    use TokenState::*;
    let style = ChartStyle::light();
    // A deterministic, irregular 7 x 50 grid with zeros, tiny and negative weights.
    let (rows, cols) = (7usize, 50usize);
    let values: Vec<f32> = (0..rows * cols)
        .map(|i| {
            let x = ((i * 7919) % 1000) as f32 / 1000.0;
            if i % 11 == 0 {
                -x
            } else {
                x * x * x
            }
        })
        .collect();
    let states: Vec<TokenState> = (0..cols)
        .map(|c| [Sink, Dropped, Heavy, Recent, Dropped][c % 5])
        .collect();
    let shown = |v: f32| v.max(0.0).sqrt();
    let mapped: Vec<f32> = values.iter().map(|&v| shown(v)).collect();
    let hi = mapped.iter().copied().fold(0f32, f32::max);
    for (w, h, strip) in [(13u32, 9u32, 2u32), (50, 7, 0), (120, 30, 4), (3, 3, 3)] {
        let mut marks = AttentionMarks::new(&states, &style);
        marks.strip_px = strip;
        let direct = attention_heatmap_rgba(
            &mapped,
            rows,
            cols,
            w,
            h,
            Colormap::Viridis,
            (0.0, hi),
            &marks,
        )
        .unwrap();
        let pooled = pool_attention(&values, rows, cols, w, h, strip).unwrap();
        let cached = attention_heatmap_rgba_pooled(
            &pooled,
            cols,
            w,
            h,
            Colormap::Viridis,
            (0.0, hi),
            &marks,
            shown,
        )
        .unwrap();
        assert_eq!(direct, cached, "{w} x {h}, strip {strip}");
    }
    // A pooled grid of the wrong size is refused, not drawn.
    let marks = AttentionMarks::new(&states, &style);
    let pooled = pool_attention(&values, rows, cols, 10, 10, marks.strip_px).unwrap();
    assert!(attention_heatmap_rgba_pooled(
        &pooled,
        cols,
        11,
        10,
        Colormap::Viridis,
        (0.0, hi),
        &marks,
        shown
    )
    .is_err());
}

#[test]
fn a_title_wider_than_the_canvas_wraps_at_its_spaces() {
    let style = ChartStyle::light();
    let mass = vec![0.5; 10];
    let title = "Cumulative scores and the top-k threshold of every step";
    let view = |title| MassRetainedView {
        title,
        x_label: "step t",
        y_label: "retained",
        mass: &mass,
        mean: 0.5,
        mass_label: "",
        mean_label: "",
    };
    let plot_top = |w: u32| {
        let (svg, rect) = render("wrapped_title", (w, 300), |root| {
            mass_retained(root, &view(title), &style).unwrap()
        });
        let lines: Vec<String> = texts(&parse(&svg))
            .into_iter()
            .filter(|t| title.contains(*t) && t.len() > 3)
            .map(String::from)
            .collect();
        (lines, rect.y)
    };
    let (wide, wide_top) = plot_top(900);
    assert_eq!(wide, [title]);
    let (narrow, narrow_top) = plot_top(309);
    assert!(narrow.len() >= 2, "{narrow:?}");
    assert_eq!(narrow.join(" "), title, "every word, in order, once");
    assert!(
        narrow_top > wide_top,
        "the plot moves down for the extra lines"
    );
}

// ---------------------------------------------------------------- the page's charts, its texts

/// Every chart of the page, drawn from the default view with the page's own texts (read from
/// `www/i18n/*.json`) in both languages, at the sizes its canvases have at 1280 and at 375 px wide:
/// no text of any of them runs off the canvas (`render` checks every chart it draws).
#[test]
fn the_pages_charts_keep_their_texts_on_the_canvas_in_both_languages() {
    use kvlab::render::{draw, read_page_texts, AttentionCache, Chart, Labels};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("www/i18n");
    let texts = read_page_texts(&dir).expect("texts");
    let lab = kvlab::lab::Lab::new(kvlab::state::Settings::default()).expect("the default view");
    // (the canvases' CSS sizes, from the page at those widths)
    let height = |name: &str, narrow: bool| match name {
        "budget-data" | "budget-model" if narrow => 240,
        "budget-data" | "budget-model" => 176,
        "tradeoff" if narrow => 480, // (30rem there: its legend takes a line per policy)
        "attn" | "tradeoff" => 320,
        "strip" => 80,
        "strips" => 208,
        _ if narrow => 272,
        _ => 240,
    };
    for lang in ["en", "zh"] {
        let labels = Labels::for_charts(&texts, lang);
        for style in [ChartStyle::light(), ChartStyle::dark()] {
            for (width, narrow) in [(874, false), (309, true)] {
                for chart in Chart::all() {
                    let name = chart.name();
                    let size = (width, height(name, narrow));
                    render(&format!("page_{name}_{lang}_{width}"), size, |root| {
                        draw(
                            root,
                            &lab,
                            &mut AttentionCache::default(),
                            chart,
                            &labels,
                            &style,
                        )
                        .unwrap_or_else(|e| panic!("{name}: {e}"))
                    });
                }
            }
        }
    }
}
