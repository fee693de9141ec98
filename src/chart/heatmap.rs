//! Heatmaps as pixel buffers (issue 4 §2 error heatmap `|x - x_hat|`, §3 attention heatmap
//! with kept/dropped columns), plus the plotters frame (axes, ticks, colour bar) around them.
//!
//! A grid is never drawn cell by cell (toolchain notes: 512x512 plotters rectangles on a canvas
//! take ~365 ms; RGBA bytes into an `ImageData` ~12 ms). Instead the grid is pooled to the
//! canvas's pixel size and coloured into an RGBA buffer the page puts on the canvas with
//! `putImageData` at the [`PixelRect`] that [`draw_heatmap_frame`] returns.
//!
//! **Pooling is max pooling.** When several cells share a pixel, the pixel shows the largest
//! (NaN skipped). For attention this keeps a lone heavy-hitter or sink column visible when
//! 32,768 tokens share 800 pixels (a mean would dilute it 40-fold); for `|x - x_hat|` it shows
//! the worst error, the quantity the bound `scale/2` is about. When the output is larger than
//! the grid, each pixel takes the cell it falls in (nearest, no interpolation). Pooling is
//! separable and streams the input once: `O(rows·cols + out_w·out_h)`.

use super::downsample::{cell_range, state_runs};
use super::layout::{axes, begin, draw_err, index_text, rect_of, tick_text, usable_range, Axes};
use super::style::StateLabels;
use super::{ChartError, ChartStyle, Colormap, PixelRect, StateColors, TokenState};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontTransform;
use std::ops::Range;

/// The largest pixel buffer the heatmap functions produce: 8192 x 8192 pixels (256 MiB RGBA).
pub const MAX_PIXELS: u64 = 8192 * 8192;

fn check_grid(len: usize, rows: usize, cols: usize, name: &'static str) -> Result<(), ChartError> {
    let expected = rows as u128 * cols as u128;
    if len as u128 != expected {
        return Err(ChartError::GridShape {
            name,
            len,
            rows,
            cols,
            expected,
        });
    }
    Ok(())
}

fn check_out(width: u32, height: u32) -> Result<(), ChartError> {
    if u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(ChartError::OutputTooLarge {
            width,
            height,
            max: MAX_PIXELS,
        });
    }
    Ok(())
}

/// Max-pool a row-major grid to `out_h x out_w` (row-major), `NEG_INFINITY` where a pixel saw
/// no number. `transposed` puts the grid's rows along x and its columns along y.
fn pool(
    values: &[f32],
    rows: usize,
    cols: usize,
    out_w: usize,
    out_h: usize,
    transposed: bool,
) -> Vec<f32> {
    let mut out = vec![f32::NEG_INFINITY; out_w * out_h];
    if rows == 0 || cols == 0 || out_w == 0 || out_h == 0 {
        return out;
    }
    // `v > m` is false for NaN, so NaN cells are skipped.
    let max_into = |m: f32, cells: &[f32]| cells.iter().fold(m, |m, &v| if v > m { v } else { m });
    if !transposed {
        let xr: Vec<Range<usize>> = (0..out_w).map(|o| cell_range(o, cols, out_w)).collect();
        let mut prev: Option<Range<usize>> = None;
        for py in 0..out_h {
            let rr = cell_range(py, rows, out_h);
            if prev.as_ref() == Some(&rr) && py > 0 {
                out.copy_within((py - 1) * out_w..py * out_w, py * out_w);
                continue;
            }
            let line = &mut out[py * out_w..(py + 1) * out_w];
            for r in rr.clone() {
                let row = &values[r * cols..(r + 1) * cols];
                for (m, cr) in line.iter_mut().zip(&xr) {
                    *m = max_into(*m, &row[cr.clone()]);
                }
            }
            prev = Some(rr);
        }
    } else {
        pool_transposed(values, rows, cols, out_w, &mut out);
    }
    out
}

/// Pixel columns [`pool_transposed`] pools at a time: their per-channel maxima (`TILE x cols`
/// values) stay in cache, and each pixel row of the tile is written as one contiguous run.
const TILE: usize = 16;

/// [`pool`] with the grid's rows along x and its columns along y, into `out` (`out_h x out_w`,
/// filled with `NEG_INFINITY`; all sizes non-zero).
///
/// The grid is read once, row after row: pixel column `px` takes the per-channel maxima of its
/// rows ([`cell_range`]) in one straight pass per row (no division or bounds check per
/// element), then each pixel row takes the maximum of its precomputed channel range of those.
/// Pixel columns are done [`TILE`] at a time. A pixel column that covers the same rows as the
/// one before (an output wider than the grid) copies its maxima.
fn pool_transposed(values: &[f32], rows: usize, cols: usize, out_w: usize, out: &mut [f32]) {
    let out_h = out.len() / out_w;
    let ybins: Vec<Range<usize>> = (0..out_h).map(|o| cell_range(o, cols, out_h)).collect();
    let mut tile = vec![f32::NEG_INFINITY; TILE * cols];
    let mut prev: Option<Range<usize>> = None;
    for px0 in (0..out_w).step_by(TILE) {
        let n = TILE.min(out_w - px0);
        for t in 0..n {
            let xr = cell_range(px0 + t, rows, out_w);
            // The slot of the pixel column before: t - 1, or the last of the previous
            // (full) tile.
            let before = (t + TILE - 1) % TILE;
            if prev.as_ref() == Some(&xr) {
                tile.copy_within(before * cols..(before + 1) * cols, t * cols);
                continue;
            }
            let slot = &mut tile[t * cols..(t + 1) * cols];
            slot.fill(f32::NEG_INFINITY);
            // `v > m` is false for NaN, so NaN cells are skipped.
            for row in values[xr.start * cols..xr.end * cols].chunks_exact(cols) {
                for (m, &v) in slot.iter_mut().zip(row) {
                    *m = if v > *m { v } else { *m };
                }
            }
            prev = Some(xr);
        }
        for (line, yr) in out.chunks_exact_mut(out_w).zip(&ybins) {
            let slots = tile.chunks_exact(cols);
            for (o, slot) in line[px0..px0 + n].iter_mut().zip(slots) {
                *o = slot[yr.clone()]
                    .iter()
                    .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
            }
        }
    }
}

/// Max-pool a `rows x cols` row-major grid to `out_h x out_w` (row-major, x along columns):
/// pixel `(px, py)` is the largest non-NaN value of the cells it covers (see the module docs),
/// NaN if it covers none (all NaN, or an empty grid).
///
/// ```
/// use kvlab::chart::pool_max;
/// let grid = [1.0, 2.0, 3.0, 4.0,
///             5.0, 6.0, 7.0, 8.0,
///             9.0, 1.0, 2.0, 3.0,
///             4.0, 5.0, 6.0, 0.0];
/// assert_eq!(pool_max(&grid, 4, 4, 2, 2).unwrap(), vec![6.0, 8.0, 9.0, 6.0]);
/// ```
pub fn pool_max(
    values: &[f32],
    rows: usize,
    cols: usize,
    out_w: u32,
    out_h: u32,
) -> Result<Vec<f32>, ChartError> {
    check_grid(values.len(), rows, cols, "values")?;
    check_out(out_w, out_h)?;
    let mut out = pool(values, rows, cols, out_w as usize, out_h as usize, false);
    for v in &mut out {
        if *v == f32::NEG_INFINITY {
            *v = f32::NAN;
        }
    }
    Ok(out)
}

/// A value range mapped onto the 256 colours of a colour map.
struct Scale {
    lo: f32,
    inv: f32,
    step: bool,
}

impl Scale {
    /// `(lo, hi)` with `lo < hi` maps linearly; `lo >= hi` is a step at `lo` (above: top
    /// colour, else bottom); a range that is not finite is taken as `(0, 1)`.
    fn new((lo, hi): (f32, f32)) -> Self {
        if !lo.is_finite() || !hi.is_finite() {
            return Self::new((0.0, 1.0));
        }
        let span = hi - lo;
        if span > 0.0 && span.is_finite() {
            Scale {
                lo,
                inv: 1.0 / span,
                step: false,
            }
        } else {
            Scale {
                lo,
                inv: 0.0,
                step: true,
            }
        }
    }

    fn index(&self, v: f32) -> usize {
        if self.step {
            return if v > self.lo { 255 } else { 0 };
        }
        let t = (v - self.lo) * self.inv;
        if t >= 1.0 {
            255
        } else if t > 0.0 {
            (t * 255.0 + 0.5) as usize
        } else {
            0
        }
    }
}

/// Colour pooled values into RGBA; `NEG_INFINITY` (no data) becomes transparent.
fn colorize(pooled: &[f32], lut: &[[u8; 3]; 256], scale: &Scale, out: &mut [u8]) {
    for (px, &v) in out.chunks_exact_mut(4).zip(pooled) {
        if v == f32::NEG_INFINITY {
            px.copy_from_slice(&[0, 0, 0, 0]);
        } else {
            let [r, g, b] = lut[scale.index(v).min(255)];
            px.copy_from_slice(&[r, g, b, 255]);
        }
    }
}

/// Colour a `rows x cols` row-major grid into an `out_w x out_h` RGBA buffer (row-major, 4
/// bytes per pixel, row 0 at the top, x along the grid's columns), ready for `ImageData`.
///
/// Cells are max-pooled to pixels (see the module docs); `range = (lo, hi)` maps linearly onto
/// `colormap` (below `lo`: the low end; above `hi`: the high end; `lo >= hi`: a step at `lo`; a
/// range that is not finite: `(0, 1)`). Pixels with no number (all NaN, empty grid) are fully
/// transparent so the page background shows. `out_w` or `out_h` of 0 gives an empty buffer.
///
/// Errors: `values.len() != rows * cols`; `out_w * out_h > MAX_PIXELS`.
pub fn heatmap_rgba(
    values: &[f32],
    rows: usize,
    cols: usize,
    out_w: u32,
    out_h: u32,
    colormap: Colormap,
    range: (f32, f32),
) -> Result<Vec<u8>, ChartError> {
    check_grid(values.len(), rows, cols, "values")?;
    check_out(out_w, out_h)?;
    let pooled = pool(values, rows, cols, out_w as usize, out_h as usize, false);
    let mut out = vec![0u8; pooled.len() * 4];
    colorize(&pooled, colormap.lut(), &Scale::new(range), &mut out);
    Ok(out)
}

/// The `|x - x_hat|` heatmap (note §2.2) of a `tokens x channels` row-major error matrix (the
/// layout of [`crate::Matrix`]), drawn with **tokens along x** and channels down y, so it lines
/// up with the other token-axis charts. Colours map `[0, max_err]` (pass the largest bound
/// `scale/2` to read colour as a fraction of the bound, or the largest error to use the whole
/// colour map). Otherwise as [`heatmap_rgba`].
pub fn error_heatmap_rgba(
    abs_err: &[f32],
    tokens: usize,
    channels: usize,
    out_w: u32,
    out_h: u32,
    colormap: Colormap,
    max_err: f32,
) -> Result<Vec<u8>, ChartError> {
    check_grid(abs_err.len(), tokens, channels, "abs_err")?;
    check_out(out_w, out_h)?;
    let pooled = pool(
        abs_err,
        tokens,
        channels,
        out_w as usize,
        out_h as usize,
        true,
    );
    let mut out = vec![0u8; pooled.len() * 4];
    colorize(
        &pooled,
        colormap.lut(),
        &Scale::new((0.0, max_err)),
        &mut out,
    );
    Ok(out)
}

/// How the attention heatmap marks the selection on its token columns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionMarks<'a> {
    /// One state per key token (grid column).
    pub states: &'a [TokenState],
    /// Colours of the state strip.
    pub colors: StateColors,
    /// What dropped columns fade toward (the page background).
    pub dim_toward: RGBColor,
    /// How far dropped columns fade, `0` (only desaturated) to `1` (gone); clamped.
    pub dim: f32,
    /// Pixel rows at the top of the buffer given to the state strip (0 for none).
    pub strip_px: u32,
}

impl<'a> AttentionMarks<'a> {
    /// Marks in `style`'s state colours: dropped columns desaturated and faded 60% toward the
    /// background, a 6 CSS-pixel strip.
    pub fn new(states: &'a [TokenState], style: &ChartStyle) -> Self {
        Self {
            states,
            colors: style.states,
            dim_toward: style.background,
            dim: 0.6,
            strip_px: style.px(6.0).max(0) as u32,
        }
    }
}

/// The attention heatmap (note §3): a `rows x cols` row-major grid (`rows` query steps, `cols`
/// key tokens along x) coloured like [`heatmap_rgba`], with the selection marked per column:
///
/// * the top `marks.strip_px` pixel rows are a strip in each column's state colour;
/// * below it, kept columns show the colour map; dropped columns are desaturated (grey of equal
///   luminance) and faded by `marks.dim` toward `marks.dim_toward`, so their values still read
///   as lighter/darker but clearly out of the kept set.
///
/// A pixel column covering several tokens takes its most important state (sink > heavy >
/// recent > dropped, [`TokenState`]). The grid is pooled into `out_h - strip_px` rows.
///
/// Errors: `values.len() != rows * cols`; `marks.states.len() != cols`;
/// `out_w * out_h > MAX_PIXELS`.
// Eight arguments: the seven of `heatmap_rgba` in the same order, plus the marks.
#[allow(clippy::too_many_arguments)]
pub fn attention_heatmap_rgba(
    values: &[f32],
    rows: usize,
    cols: usize,
    out_w: u32,
    out_h: u32,
    colormap: Colormap,
    range: (f32, f32),
    marks: &AttentionMarks,
) -> Result<Vec<u8>, ChartError> {
    check_grid(values.len(), rows, cols, "values")?;
    check_states(marks, cols)?;
    let pooled = pool_attention(values, rows, cols, out_w, out_h, marks.strip_px)?;
    attention_heatmap_rgba_pooled(&pooled, cols, out_w, out_h, colormap, range, marks, |v| v)
}

/// One state per attention column.
fn check_states(marks: &AttentionMarks, cols: usize) -> Result<(), ChartError> {
    if marks.states.len() != cols {
        return Err(ChartError::LengthMismatch {
            name: "states",
            len: marks.states.len(),
            other: "attention columns",
            other_len: cols,
        });
    }
    Ok(())
}

/// [`attention_heatmap_rgba`] on a grid already max-pooled by [`pool_attention`] to
/// `out_w x (out_h - marks.strip_px)` pixels, after `shown` (monotone non-decreasing, so it
/// commutes with max-pooling: pooling once and mapping the pooled pixels gives exactly the
/// pixels of mapping every cell first) is applied to each pooled pixel. The page pools once per
/// data and canvas size, then redraws the marks on every selection change.
///
/// Errors: `pooled` is not that size; `marks.states.len() != cols`; too many pixels.
// The arguments of `attention_heatmap_rgba`, with the pooled grid for the values.
#[allow(clippy::too_many_arguments)]
pub fn attention_heatmap_rgba_pooled(
    pooled: &[f32],
    cols: usize,
    out_w: u32,
    out_h: u32,
    colormap: Colormap,
    range: (f32, f32),
    marks: &AttentionMarks,
    shown: fn(f32) -> f32,
) -> Result<Vec<u8>, ChartError> {
    check_states(marks, cols)?;
    AttentionLayers::new(pooled, out_w, out_h, colormap, range, marks, shown)?.compose(marks, cols)
}

/// The attention heatmap below its strip in two colourings of the same pooled grid: as the
/// colour map shows it (`kept`) and as a dropped column shows it (`dropped`: desaturated and
/// faded). A selection change only chooses, per pixel column, which of the two to copy, so the
/// page builds the layers once per data, canvas size and style
/// ([`AttentionLayers::compose`]). Composing gives exactly [`attention_heatmap_rgba_pooled`]'s
/// pixels.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttentionLayers {
    w: usize,
    h: usize,
    strip: usize,
    kept: Vec<u8>,
    dropped: Vec<u8>,
}

impl AttentionLayers {
    /// The layers of a pooled grid (see [`attention_heatmap_rgba_pooled`] for the arguments);
    /// of `marks`, only `strip_px`, `dim` and `dim_toward` are used (the states and their
    /// colours come with [`AttentionLayers::compose`]).
    ///
    /// Errors: `pooled` is not `out_w x (out_h - strip_px)`; too many pixels.
    pub fn new(
        pooled: &[f32],
        out_w: u32,
        out_h: u32,
        colormap: Colormap,
        range: (f32, f32),
        marks: &AttentionMarks,
        shown: fn(f32) -> f32,
    ) -> Result<Self, ChartError> {
        check_out(out_w, out_h)?;
        let (w, h) = (out_w as usize, out_h as usize);
        if w == 0 || h == 0 {
            return Ok(Self::default());
        }
        let strip = (marks.strip_px as usize).min(h);
        check_grid(pooled.len(), h - strip, w, "pooled")?;
        // A pixel covering no cell stays "no value" (it is not a value to map).
        let mapped: Vec<f32> = pooled
            .iter()
            .map(|&v| if v == f32::NEG_INFINITY { v } else { shown(v) })
            .collect();
        let mut kept = vec![0u8; w * (h - strip) * 4];
        colorize(&mapped, colormap.lut(), &Scale::new(range), &mut kept);
        let mut dropped = kept.clone();
        dim_pixels(&mut dropped, marks);
        Ok(Self {
            w,
            h,
            strip,
            kept,
            dropped,
        })
    }

    /// The heatmap's pixels (`out_w x out_h` RGBA) for the states in `marks` over `cols` key
    /// tokens: the strip in each pixel column's state colour, then each column copied from the
    /// `dropped` layer if its state is dropped, else from `kept`.
    ///
    /// Errors: `marks.states.len() != cols`.
    pub fn compose(&self, marks: &AttentionMarks, cols: usize) -> Result<Vec<u8>, ChartError> {
        check_states(marks, cols)?;
        let (w, h, strip) = (self.w, self.h, self.strip);
        if w == 0 || h == 0 {
            return Ok(Vec::new());
        }
        let buckets: Vec<Range<usize>> = (0..w)
            .map(|px| {
                if cols == 0 {
                    0..0
                } else {
                    cell_range(px, cols, w)
                }
            })
            .collect();
        let runs = state_runs(marks.states, &buckets);
        let mut out = vec![0u8; w * h * 4];
        let (strip_bytes, heat_bytes) = out.split_at_mut(w * strip * 4);
        let mut first = Vec::with_capacity(w * 4);
        for &(a, b, st) in &runs {
            let c = marks.colors.of(st);
            for _ in a..b {
                first.extend_from_slice(&[c.0, c.1, c.2, 255]);
            }
        }
        for row in strip_bytes.chunks_exact_mut(w * 4) {
            row.copy_from_slice(&first);
        }
        for ((row, kept), dropped) in heat_bytes
            .chunks_exact_mut(w * 4)
            .zip(self.kept.chunks_exact(w * 4))
            .zip(self.dropped.chunks_exact(w * 4))
        {
            for &(a, b, st) in &runs {
                let src = if st == TokenState::Dropped {
                    dropped
                } else {
                    kept
                };
                row[a * 4..b * 4].copy_from_slice(&src[a * 4..b * 4]);
            }
        }
        Ok(out)
    }
}

/// Dropped columns' colouring, in place: each opaque pixel desaturated to the grey of equal
/// luminance and faded by `marks.dim` (clamped to `0..=1`, NaN as 0) toward `marks.dim_toward`.
fn dim_pixels(rgba: &mut [u8], marks: &AttentionMarks) {
    let dim = if marks.dim.is_nan() {
        0.0
    } else {
        marks.dim.clamp(0.0, 1.0)
    };
    let toward = [
        f32::from(marks.dim_toward.0),
        f32::from(marks.dim_toward.1),
        f32::from(marks.dim_toward.2),
    ];
    for px in rgba.chunks_exact_mut(4) {
        if px[3] == 0 {
            continue;
        }
        let grey =
            0.2126 * f32::from(px[0]) + 0.7152 * f32::from(px[1]) + 0.0722 * f32::from(px[2]);
        for (c, t) in px[..3].iter_mut().zip(toward) {
            *c = (grey * (1.0 - dim) + t * dim).round().clamp(0.0, 255.0) as u8;
        }
    }
}

/// Max-pools a `rows x cols` attention grid to the `out_w x (out_h - strip_px)` pixels of its
/// heatmap (see [`attention_heatmap_rgba_pooled`]).
pub fn pool_attention(
    values: &[f32],
    rows: usize,
    cols: usize,
    out_w: u32,
    out_h: u32,
    strip_px: u32,
) -> Result<Vec<f32>, ChartError> {
    check_grid(values.len(), rows, cols, "values")?;
    check_out(out_w, out_h)?;
    let (w, h) = (out_w as usize, out_h as usize);
    let strip = (strip_px as usize).min(h);
    Ok(pool(values, rows, cols, w, h - strip, false))
}

/// A colour bar beside a heatmap frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ColorbarView<'a> {
    /// The colour map the heatmap used.
    pub colormap: Colormap,
    /// The value range the heatmap used, `(low end, high end)`.
    pub range: (f64, f64),
    /// Name of the value, e.g. "|x − x̂|" or "attention".
    pub label: &'a str,
    /// How the colours follow the value: the bar's middle tick names the value drawn there
    /// (a quarter of the range on a square-root scale, not half).
    pub scale: BarScale,
}

/// How a heatmap's colours follow its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarScale {
    /// Colour position = `(v - lo) / (hi - lo)`.
    Linear,
    /// Colour position = `sqrt((v - lo) / (hi - lo))`: small values stay visible.
    Sqrt,
}

/// Axes, ticks and labels around a heatmap's pixel buffer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeatmapFrameView<'a> {
    /// Chart title ("" for none).
    pub title: &'a str,
    /// x axis name, e.g. "key token i".
    pub x_label: &'a str,
    /// y axis name, e.g. "query step t" or "channel".
    pub y_label: &'a str,
    /// Data values at the image's left and right edges, e.g. `(0, T)`.
    pub x_range: (f64, f64),
    /// Data values at the top and bottom edges of the heatmap rows (below any strip), e.g.
    /// `(0, rows)`; the y axis runs downward.
    pub y_range: (f64, f64),
    /// Pixel rows at the top of the image taken by a state strip ([`AttentionMarks::strip_px`]),
    /// kept out of the y axis; 0 for none.
    pub strip_px: u32,
    /// A colour bar on the right, or none.
    pub colorbar: Option<ColorbarView<'a>>,
    /// Legend of the strip's state colours (all empty: no legend).
    pub legend: StateLabels<'a>,
}

/// A y axis that runs downward (row 0 at the top), whose top may extend above the visible data
/// to leave room for the state strip; ticks only within `shown`.
struct TopDown {
    lo: f64,
    hi: f64,
    shown: (f64, f64),
}

impl Ranged for TopDown {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        RangedCoordf64::from(self.lo..self.hi).map(v, (limit.1, limit.0))
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        RangedCoordf64::from(self.shown.0..self.shown.1).key_points(hint)
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

/// Tick text for an axis: integers when both ends are whole numbers at least 2 apart (token,
/// channel and step indices), otherwise decimals.
fn axis_text(v: f64, (lo, hi): (f64, f64)) -> String {
    if lo.fract() == 0.0 && hi.fract() == 0.0 && (hi - lo).abs() >= 2.0 {
        index_text(v)
    } else {
        tick_text(v, hi - lo)
    }
}

/// Draw the frame of a heatmap: background, title, strip legend, axes with ticks and labels,
/// and an optional colour bar. Nothing is drawn inside the plotting area: the page puts the
/// pixel buffer there afterwards, `putImageData(buffer, rect.x, rect.y)`, with the buffer made
/// `rect.w x rect.h` ([`heatmap_rgba`], [`attention_heatmap_rgba`], [`error_heatmap_rgba`]).
///
/// Returns that rectangle in backend pixels (empty when the area is too small for a plot).
pub fn draw_heatmap_frame<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    view: &HeatmapFrameView,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let legend = view.legend.legend(style);
    let body = begin(root, style, view.title, &legend)?;
    let full = rect_of(&body);
    let cb_w = style.px(88.0);
    let (body, bar_area) = match view.colorbar {
        Some(_) if i64::from(full.w) > i64::from(cb_w) + i64::from(style.px(160.0)) => {
            let (l, r) = body.split_horizontally(full.w as i32 - cb_w);
            (l, Some(r))
        }
        _ => (body, None),
    };
    let (x0, x1) = usable_range(view.x_range.0, view.x_range.1);
    let (y0, y1) = usable_range(view.y_range.0, view.y_range.1);
    let ax = Axes {
        x_label: view.x_label,
        y_label: view.y_label,
        x_ticks: true,
        y_ticks: true,
        y_grid: false,
    };
    // The strip sits above row y0: extend the axis upward by the strip's share of the height.
    let plot_h = super::layout::plot_height(&body, style, &ax);
    let strip = i64::from(view.strip_px);
    let top = if strip > 0 && i64::from(plot_h) > strip {
        y0 - strip as f64 * (y1 - y0) / (i64::from(plot_h) - strip) as f64
    } else {
        y0
    };
    let fx = |v: &f64| axis_text(*v, (x0, x1));
    let fy = |v: &f64| axis_text(*v, (y0, y1));
    let Some(plot) = axes(
        &body,
        style,
        RangedCoordf64::from(x0..x1),
        TopDown {
            lo: top,
            hi: y1,
            shown: (y0, y1),
        },
        (y0, y1),
        &ax,
        &fx,
        &fy,
    )?
    else {
        return Ok(PixelRect::default());
    };
    if let (Some(cb), Some(area)) = (view.colorbar, bar_area) {
        draw_colorbar(&area, style, &cb, plot.rect)?;
    }
    Ok(plot.rect)
}

/// A vertical colour bar in `area`, spanning the plot's rows, high values on top.
fn draw_colorbar<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    style: &ChartStyle,
    cb: &ColorbarView,
    plot: PixelRect,
) -> Result<(), ChartError> {
    let ar = rect_of(area);
    let h = i32::try_from(plot.h).unwrap_or(i32::MAX);
    if h < 2 {
        return Ok(());
    }
    let top = plot.y - ar.y;
    // [rotated label][bar][tick values], left to right.
    let label_w = if cb.label.is_empty() {
        0
    } else {
        style.font_px(0.9).ceil() as i32 + style.px(4.0)
    };
    let bx0 = style.px(8.0) + label_w;
    let bx1 = bx0 + style.px(12.0);
    let n = h.min(64);
    let lut = cb.colormap.lut();
    for s in 0..n {
        let ya = top + (i64::from(s) * i64::from(h) / i64::from(n)) as i32;
        let yb = top + (i64::from(s + 1) * i64::from(h) / i64::from(n)) as i32;
        let t = 1.0 - (f64::from(s) + 0.5) / f64::from(n);
        let [r, g, b] = lut[((t * 255.0).round() as usize).min(255)];
        area.draw(&Rectangle::new(
            [(bx0, ya), (bx1, yb)],
            RGBColor(r, g, b).filled(),
        ))
        .map_err(draw_err)?;
    }
    let (lo, hi) = cb.range;
    let span = hi - lo;
    let text = style
        .text(0.85, style.foreground)
        .pos(Pos::new(HPos::Left, VPos::Center));
    // (the value whose colour is half-way up the bar)
    let mid = match cb.scale {
        BarScale::Linear => lo + span / 2.0,
        BarScale::Sqrt => lo + span / 4.0,
    };
    for (v, y) in [(hi, top), (mid, top + h / 2), (lo, top + h - 1)] {
        area.draw_text(&tick_text(v, span), &text, (bx1 + style.px(4.0), y))
            .map_err(draw_err)?;
    }
    if !cb.label.is_empty() {
        let label = style
            .text(0.9, style.foreground)
            .transform(FontTransform::Rotate270)
            .pos(Pos::new(HPos::Center, VPos::Top));
        area.draw_text(cb.label, &label, (style.px(8.0), top + h / 2))
            .map_err(draw_err)?;
    }
    Ok(())
}
