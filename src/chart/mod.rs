//! What every section's charts share: layout (axes, legends, marks), style and colour maps, the
//! heatmaps' pixel buffers, and downsampling to pixel columns. The charts themselves, one file
//! per page section, are in [`crate::render`]; nothing here reads the page's model.
//!
//! Every chart is one function generic over plotters' [`DrawingBackend`](plotters::prelude::DrawingBackend),
//! the pattern of plotters' console example: natively it draws to `SVGBackend` (the chart tests
//! assert on the SVG text), in the browser to `plotters-canvas`'s `CanvasBackend`. Each takes a
//! plain *view* struct of numbers the core has already computed and a [`ChartStyle`]; it
//! computes nothing but layout and scaling (bucketing to pixel columns, axis ranges).
//!
//! Rules every chart keeps:
//! * **No text of its own.** Titles, axis names, legend entries and notes all come in through
//!   the view (the page is bilingual); the only text a chart makes is tick numbers.
//! * **Bounded work.** Series longer than the plot is wide are reduced to one bucket per pixel
//!   column ([`pixel_buckets`]) before anything is drawn, so 131,072 rows cost as much as 800.
//!   Dense grids are never drawn cell by cell: [`heatmap_rgba`] pools them into an RGBA buffer
//!   the page puts on the canvas (`putImageData`) inside the rectangle [`draw_heatmap_frame`]
//!   returns.
//! * **No panics on view data.** Empty series, NaN (drawn as gaps / skipped), zero ranges,
//!   one-element series and 0x0 areas all draw something sensible or nothing. Only shape
//!   mismatches between parallel arrays are errors ([`ChartError`]).
//! * **Returns the plot rectangle.** Each chart returns the [`PixelRect`] of its plotting area
//!   in backend pixels, so the page can map a pointer position back to a token or channel.

mod colormap;
pub(crate) mod downsample;
mod heatmap;
pub(crate) mod layout;
mod style;

pub use colormap::Colormap;
pub use downsample::{pixel_buckets, token_states, TokenState};
pub use heatmap::{
    attention_heatmap_rgba, attention_heatmap_rgba_pooled, draw_heatmap_frame, error_heatmap_rgba,
    heatmap_rgba, pool_attention, pool_max, AttentionLayers, AttentionMarks, BarScale,
    ColorbarView, HeatmapFrameView, MAX_PIXELS,
};
pub use style::{ChartStyle, StateColors, StateLabels};

use thiserror::Error;

/// Why a chart could not be drawn.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ChartError {
    /// The backend failed while drawing (a canvas or SVG error, or a plotters layout error);
    /// the text is plotters' own message. Nothing in the view data causes this: report it.
    #[error("drawing failed: {0}")]
    Draw(String),
    /// A grid's value array does not hold `rows x cols` values. Give exactly one value per
    /// cell, row-major (`values[r * cols + c]`).
    #[error(
        "{name} has {len} values but rows x cols = {rows} x {cols} = {expected}: give exactly one value per cell, row-major"
    )]
    GridShape {
        /// Which array (e.g. `"values"`).
        name: &'static str,
        /// Its length.
        len: usize,
        /// Rows given.
        rows: usize,
        /// Columns given.
        cols: usize,
        /// `rows * cols`, computed without overflow.
        expected: u128,
    },
    /// Two arrays that must run in parallel have different lengths.
    #[error("{name} has {len} entries but {other} has {other_len}: give one entry of {name} per entry of {other}")]
    LengthMismatch {
        /// The array that does not fit (e.g. `"states"`).
        name: &'static str,
        /// Its length.
        len: usize,
        /// The array it must match (e.g. `"scores"`).
        other: &'static str,
        /// That array's length.
        other_len: usize,
    },
    /// A requested pixel buffer is larger than [`MAX_PIXELS`].
    #[error("an output of {width} x {height} pixels is too large: at most {max} pixels (e.g. 8192 x 8192) may be requested")]
    OutputTooLarge {
        /// Requested width in pixels.
        width: u32,
        /// Requested height in pixels.
        height: u32,
        /// The limit, [`MAX_PIXELS`].
        max: u64,
    },
}

/// A rectangle in backend pixels (canvas pixels in the browser): the plotting area a chart
/// used, or where a heatmap's pixel buffer goes. `w` or `h` is 0 when the area was too small
/// to hold a plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PixelRect {
    /// Left edge (inclusive), pixels from the backend's left.
    pub x: i32,
    /// Top edge (inclusive), pixels from the backend's top.
    pub y: i32,
    /// Width in pixels.
    pub w: u32,
    /// Height in pixels.
    pub h: u32,
}

impl PixelRect {
    /// Whether the rectangle covers no pixel.
    pub fn is_empty(&self) -> bool {
        self.w == 0 || self.h == 0
    }

    /// Whether the pixel `(px, py)` lies inside.
    pub fn contains(&self, px: i32, py: i32) -> bool {
        let (dx, dy) = (
            i64::from(px) - i64::from(self.x),
            i64::from(py) - i64::from(self.y),
        );
        dx >= 0 && dy >= 0 && dx < i64::from(self.w) && dy < i64::from(self.h)
    }
}
