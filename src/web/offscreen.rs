//! A plotters backend for an `OffscreenCanvas` (the page draws from a Web Worker).
//!
//! plotters-canvas's `CanvasBackend` needs an `HtmlCanvasElement`, which a worker does not have:
//! the page transfers each chart's canvas to the worker (`transferControlToOffscreen`) and the
//! worker draws here. The drawing calls are the ones plotters-canvas makes, on the offscreen 2d
//! context, so a chart looks the same on either path (the in-page fallback still uses
//! plotters-canvas). Text is measured with the context's `measureText`.

use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
    FontTransform,
};
use wasm_bindgen::JsValue;
use web_sys::{OffscreenCanvas, OffscreenCanvasRenderingContext2d};

/// A drawing error from the offscreen context (its JavaScript message).
#[derive(Debug)]
pub struct OffscreenError(String);

impl std::fmt::Display for OffscreenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "canvas error: {}", self.0)
    }
}

impl std::error::Error for OffscreenError {}

type Err = DrawingErrorKind<OffscreenError>;

fn cast(e: JsValue) -> Err {
    let text = js_sys::JSON::stringify(&e)
        .map(String::from)
        .unwrap_or_else(|_| "unknown".to_string());
    DrawingErrorKind::DrawingError(OffscreenError(text))
}

fn css(color: BackendColor) -> String {
    let (r, g, b) = color.rgb;
    format!("rgba({r},{g},{b},{})", color.alpha)
}

/// The font string plotters-canvas uses (`style size px family`).
pub fn font_of<S: BackendTextStyle>(style: &S) -> String {
    format!(
        "{} {}px {}",
        style.style().as_str(),
        style.size(),
        style.family().as_str()
    )
}

/// The size plotters expects for text `style` measured `width` pixels wide by `measureText`:
/// `(ceil(width), ceil(font size))`.
pub fn text_box<S: BackendTextStyle>(width: f64, style: &S) -> (u32, u32) {
    (
        width.ceil().max(0.0) as u32,
        style.size().ceil().max(0.0) as u32,
    )
}

/// Moves horizontal/vertical lines half a pixel so one-pixel lines stay sharp (as
/// plotters-canvas does).
fn sharp(from: BackendCoord, to: BackendCoord) -> ((f64, f64), (f64, f64)) {
    let mut a = (f64::from(from.0), f64::from(from.1));
    let mut b = (f64::from(to.0), f64::from(to.1));
    if a.0 == b.0 {
        a.0 -= 0.5;
        b.0 -= 0.5;
    }
    if a.1 == b.1 {
        a.1 -= 0.5;
        b.1 -= 0.5;
    }
    (a, b)
}

/// A colour as the context's state compares it: rgb and the alpha's bits.
type Rgba = ((u8, u8, u8), u64);

fn rgba(color: BackendColor) -> Rgba {
    (color.rgb, color.alpha.to_bits())
}

/// The context state this backend has set, so that a draw call setting what is already set
/// skips the call (each one formats a string, passes it to JavaScript and has the canvas parse
/// it: a chart's tick labels and bars mostly repeat one colour and one font). `None`: not known
/// (at the start, and after a `restore()`).
#[derive(Debug, Default)]
struct State {
    fill: Option<Rgba>,
    stroke: Option<(Rgba, u32)>,
    font: Option<String>,
    baseline: Option<&'static str>,
    align: Option<&'static str>,
}

/// Draws on an `OffscreenCanvas`'s 2d context.
pub struct OffscreenBackend {
    canvas: OffscreenCanvas,
    ctx: OffscreenCanvasRenderingContext2d,
    /// What this backend last set on `ctx` (nothing else draws on it while the backend lives).
    state: std::cell::RefCell<State>,
}

impl OffscreenBackend {
    /// A backend on `canvas`'s 2d context.
    pub fn new(
        canvas: OffscreenCanvas,
        ctx: OffscreenCanvasRenderingContext2d,
    ) -> OffscreenBackend {
        OffscreenBackend {
            canvas,
            ctx,
            state: Default::default(),
        }
    }

    fn line_style<S: BackendStyle>(&self, style: &S) {
        let want = (rgba(style.color()), style.stroke_width());
        let mut state = self.state.borrow_mut();
        if state.stroke != Some(want) {
            self.ctx.set_stroke_style_str(&css(style.color()));
            self.ctx.set_line_width(f64::from(style.stroke_width()));
            state.stroke = Some(want);
        }
    }

    fn fill_style(&self, color: BackendColor) {
        let mut state = self.state.borrow_mut();
        if state.fill != Some(rgba(color)) {
            self.ctx.set_fill_style_str(&css(color));
            state.fill = Some(rgba(color));
        }
    }

    fn font<S: BackendTextStyle>(&self, style: &S) {
        let font = font_of(style);
        let mut state = self.state.borrow_mut();
        if state.font.as_deref() != Some(font.as_str()) {
            self.ctx.set_font(&font);
            state.font = Some(font);
        }
    }
}

impl DrawingBackend for OffscreenBackend {
    type ErrorType = OffscreenError;

    fn get_size(&self) -> (u32, u32) {
        (self.canvas.width(), self.canvas.height())
    }

    fn ensure_prepared(&mut self) -> Result<(), Err> {
        Ok(())
    }

    fn present(&mut self) -> Result<(), Err> {
        Ok(())
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Result<(), Err> {
        if color.alpha == 0.0 {
            return Ok(());
        }
        self.fill_style(color);
        self.ctx
            .fill_rect(f64::from(point.0), f64::from(point.1), 1.0, 1.0);
        Ok(())
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), Err> {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        let (a, b) = sharp(from, to);
        self.line_style(style);
        self.ctx.begin_path();
        self.ctx.move_to(a.0, a.1);
        self.ctx.line_to(b.0, b.1);
        self.ctx.stroke();
        Ok(())
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), Err> {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        let (x, y) = (f64::from(upper_left.0), f64::from(upper_left.1));
        let w = f64::from(bottom_right.0 - upper_left.0);
        let h = f64::from(bottom_right.1 - upper_left.1);
        if fill {
            self.fill_style(style.color());
            self.ctx.fill_rect(x, y, w, h);
        } else {
            self.line_style(style);
            self.ctx.stroke_rect(x, y, w, h);
        }
        Ok(())
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), Err> {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        let mut path = path.into_iter();
        self.ctx.begin_path();
        if let Some(start) = path.next() {
            self.line_style(style);
            self.ctx.move_to(f64::from(start.0), f64::from(start.1));
            for p in path {
                self.ctx.line_to(f64::from(p.0), f64::from(p.1));
            }
        }
        self.ctx.stroke();
        Ok(())
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), Err> {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        let mut vert = vert.into_iter();
        self.ctx.begin_path();
        if let Some(start) = vert.next() {
            self.fill_style(style.color());
            self.ctx.move_to(f64::from(start.0), f64::from(start.1));
            for p in vert {
                self.ctx.line_to(f64::from(p.0), f64::from(p.1));
            }
            self.ctx.close_path();
        }
        self.ctx.fill();
        Ok(())
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), Err> {
        if style.color().alpha == 0.0 {
            return Ok(());
        }
        if fill {
            self.fill_style(style.color());
        } else {
            self.line_style(style);
        }
        self.ctx.begin_path();
        self.ctx
            .arc(
                f64::from(center.0),
                f64::from(center.1),
                f64::from(radius),
                0.0,
                std::f64::consts::TAU,
            )
            .map_err(cast)?;
        if fill {
            self.ctx.fill();
        } else {
            self.ctx.stroke();
        }
        Ok(())
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), Err> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let degrees: f64 = match style.transform() {
            FontTransform::None => 0.0,
            FontTransform::Rotate90 => 90.0,
            FontTransform::Rotate180 => 180.0,
            FontTransform::Rotate270 => 270.0,
        };
        let (mut x, mut y) = (f64::from(pos.0), f64::from(pos.1));
        if degrees != 0.0 {
            self.ctx.save();
            self.ctx.translate(x, y).map_err(cast)?;
            self.ctx.rotate(degrees.to_radians()).map_err(cast)?;
            x = 0.0;
            y = 0.0;
        }
        let baseline = match style.anchor().v_pos {
            VPos::Top => "top",
            VPos::Center => "middle",
            VPos::Bottom => "bottom",
        };
        let align = match style.anchor().h_pos {
            HPos::Left => "start",
            HPos::Right => "end",
            HPos::Center => "center",
        };
        {
            let mut state = self.state.borrow_mut();
            if state.baseline != Some(baseline) {
                self.ctx.set_text_baseline(baseline);
                state.baseline = Some(baseline);
            }
            if state.align != Some(align) {
                self.ctx.set_text_align(align);
                state.align = Some(align);
            }
        }
        self.fill_style(color);
        self.font(style);
        self.ctx.fill_text(text, x, y).map_err(cast)?;
        if degrees != 0.0 {
            self.ctx.restore();
            // restore() puts back the state of save(): forget what was set since.
            *self.state.borrow_mut() = State::default();
        }
        Ok(())
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), Err> {
        self.font(style);
        let width = self
            .ctx
            .measure_text(text)
            .map(|m| m.width())
            .unwrap_or(0.0);
        Ok(text_box(width, style))
    }
}
