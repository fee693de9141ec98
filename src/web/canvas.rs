//! The one drawing backend the charts are compiled for: a canvas in the page (plotters-canvas)
//! or an `OffscreenCanvas` in the worker ([`OffscreenBackend`]), chosen at run time.
//!
//! Charts are generic over the backend; instantiating them for two backend types doubled the
//! chart code in the wasm (+28 kB gzip, measured). This enum is one type, so the charts exist
//! once and each drawing call dispatches on the variant. On the page path, text is measured
//! with the canvas's `measureText`: plotters-canvas's default measures with a styled `<span>`,
//! forcing a page layout per label and needing inline styles in the CSP.

use super::offscreen::{font_of, text_box, OffscreenBackend};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};
use plotters_canvas::CanvasBackend;
use web_sys::CanvasRenderingContext2d;

/// A drawing error from either canvas kind (its message).
#[derive(Debug)]
pub struct CanvasFailure(String);

impl std::fmt::Display for CanvasFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CanvasFailure {}

type Err = DrawingErrorKind<CanvasFailure>;

fn unify<E: std::error::Error + Send + Sync>(e: DrawingErrorKind<E>) -> Err {
    match e {
        DrawingErrorKind::DrawingError(e) => {
            DrawingErrorKind::DrawingError(CanvasFailure(e.to_string()))
        }
        DrawingErrorKind::FontError(e) => DrawingErrorKind::FontError(e),
    }
}

/// A chart's canvas: in the page, or transferred to the worker.
pub enum AnyCanvas {
    /// An `HTMLCanvasElement` (the page draws itself when it cannot use a worker).
    Page {
        /// plotters-canvas's backend on the element.
        inner: CanvasBackend,
        /// The same element's 2d context, for measuring text.
        ctx: CanvasRenderingContext2d,
    },
    /// An `OffscreenCanvas` (the worker).
    Worker(OffscreenBackend),
}

/// Calls `$method` on whichever backend `$self` holds, with errors unified.
macro_rules! both {
    ($self:ident, $b:ident => $call:expr) => {
        match $self {
            AnyCanvas::Page { inner: $b, .. } => $call.map_err(unify),
            AnyCanvas::Worker($b) => $call.map_err(unify),
        }
    };
}

impl DrawingBackend for AnyCanvas {
    type ErrorType = CanvasFailure;

    fn get_size(&self) -> (u32, u32) {
        match self {
            AnyCanvas::Page { inner, .. } => inner.get_size(),
            AnyCanvas::Worker(b) => b.get_size(),
        }
    }
    fn ensure_prepared(&mut self) -> Result<(), Err> {
        both!(self, b => b.ensure_prepared())
    }
    fn present(&mut self) -> Result<(), Err> {
        both!(self, b => b.present())
    }
    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Result<(), Err> {
        both!(self, b => b.draw_pixel(point, color))
    }
    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), Err> {
        both!(self, b => b.draw_line(from, to, style))
    }
    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), Err> {
        both!(self, b => b.draw_rect(upper_left, bottom_right, style, fill))
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), Err> {
        both!(self, b => b.draw_path(path, style))
    }
    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), Err> {
        both!(self, b => b.draw_circle(center, radius, style, fill))
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), Err> {
        both!(self, b => b.fill_polygon(vert, style))
    }
    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), Err> {
        both!(self, b => b.draw_text(text, style, pos))
    }
    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), Err> {
        match self {
            AnyCanvas::Page { ctx, .. } => {
                // The same font string plotters-canvas draws with.
                ctx.set_font(&font_of(style));
                let width = ctx.measure_text(text).map(|m| m.width()).unwrap_or(0.0);
                Ok(text_box(width, style))
            }
            AnyCanvas::Worker(b) => b.estimate_text_size(text, style).map_err(unify),
        }
    }
}
