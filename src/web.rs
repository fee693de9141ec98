//! Browser driver (wasm32 only): the single module that talks to JavaScript and the DOM.
//!
//! It translates and nothing more: settings objects in (validated by serde into
//! [`crate::state::Settings`]), calls on the [`crate::lab::Lab`] that holds the data in wasm
//! memory, charts drawn by [`crate::render`] onto canvases (plotters-canvas for vector parts,
//! `ImageData` for heatmap pixels), and small figure objects out. Big arrays never cross the
//! boundary per frame.
//!
//! Errors are JavaScript `Error`s whose `field` property names the control that caused them, so
//! the page shows the message next to that control; the lab keeps its last good state.

use crate::chart::{ChartError, ChartStyle};
use crate::lab::{Lab, LabError, UploadChoice};
use crate::render::{self, Labels, Pixels};
use crate::state::Settings;
use plotters::prelude::*;
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};
use plotters_canvas::CanvasBackend;
use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen::{Clamped, JsCast};
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement, ImageData};

/// Installs the panic hook once, when the module is instantiated: a panic is a bug, and its
/// message should reach the console rather than "unreachable executed".
#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

fn error(field: &str, message: &str) -> JsValue {
    let e = js_sys::Error::new(message);
    // Setting a property on a fresh Error object cannot fail; ignore the Result to stay total.
    let _ = js_sys::Reflect::set(&e, &"field".into(), &field.into());
    e.into()
}

fn lab_error(e: &LabError) -> JsValue {
    error(e.field(), &e.to_string())
}

fn chart_error(e: ChartError) -> JsValue {
    error("chart", &e.to_string())
}

fn to_js<T: Serialize>(v: &T) -> Result<JsValue, JsValue> {
    v.serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| {
            error(
                "internal",
                &format!("could not convert a result for the page: {e}"),
            )
        })
}

fn settings_of(v: JsValue) -> Result<Settings, JsValue> {
    serde_wasm_bindgen::from_value(v)
        .map_err(|e| error("settings", &format!("settings object rejected: {e}")))
}

/// Parses a URL query into `{settings, warnings}` (never fails on bad values: they are clamped
/// or replaced by defaults, each with a warning naming the key, the value and the range).
#[wasm_bindgen(js_name = parseQuery)]
pub fn parse_query(query: &str) -> Result<JsValue, JsValue> {
    to_js(&Settings::from_query(query))
}

/// The canonical query string of a settings object (only non-default values).
#[wasm_bindgen(js_name = toQuery)]
pub fn to_query(settings: JsValue) -> Result<String, JsValue> {
    Ok(settings_of(settings)?.to_query())
}

/// The model presets: `[{slug, name, layers, n_kv_heads, n_heads, d_head, fp_bytes, ...}]`.
#[wasm_bindgen(js_name = modelPresets)]
pub fn model_presets() -> Result<JsValue, JsValue> {
    #[derive(Serialize)]
    struct Preset {
        slug: String,
        #[serde(flatten)]
        model: crate::budget::ModelConfig,
    }
    let list: Vec<Preset> = crate::budget::ModelConfig::presets()
        .into_iter()
        .map(|m| Preset {
            slug: crate::state::model_slug(&m.name),
            model: m,
        })
        .collect();
    to_js(&list)
}

/// The page's handle: the data and every derived view live here, in wasm memory.
#[wasm_bindgen]
pub struct Page {
    lab: Lab,
}

#[wasm_bindgen]
impl Page {
    /// A page on data generated from `settings`.
    #[wasm_bindgen(constructor)]
    pub fn new(settings: JsValue) -> Result<Page, JsValue> {
        let s = settings_of(settings)?;
        Ok(Page {
            lab: Lab::new(s).map_err(|e| lab_error(&e))?,
        })
    }

    /// Applies a settings object; returns the figures. On error (an `Error` with `field`) the
    /// previous view stays.
    pub fn update(&mut self, settings: JsValue) -> Result<JsValue, JsValue> {
        let s = settings_of(settings)?;
        let f = self.lab.update(&s).map_err(|e| lab_error(&e))?;
        to_js(f)
    }

    /// The current figures.
    pub fn figures(&self) -> Result<JsValue, JsValue> {
        to_js(self.lab.figures())
    }

    /// The settings of the current view (after an upload they carry the data's T, S, d).
    pub fn settings(&self) -> Result<JsValue, JsValue> {
        to_js(self.lab.settings())
    }

    /// Draws chart `name` (`hist`, `groups`, `rows`, `errmap`, `attn`, `scores`, `strip`,
    /// `mass`, `budget-data`, `budget-model`) on `canvas`, whose width/height are already in
    /// device pixels; `labels` maps text keys to the page language; `scale` is
    /// `devicePixelRatio`.
    pub fn draw(
        &self,
        name: &str,
        canvas: HtmlCanvasElement,
        labels: JsValue,
        dark: bool,
        scale: f64,
    ) -> Result<(), JsValue> {
        let labels: Labels = serde_wasm_bindgen::from_value(labels)
            .map_err(|e| error("labels", &format!("labels object rejected: {e}")))?;
        let style = if dark {
            ChartStyle::dark()
        } else {
            ChartStyle::light()
        }
        .with_scale(scale);
        let inner = CanvasBackend::with_canvas_object(canvas.clone())
            .ok_or_else(|| error("chart", "the canvas has no 2d context"))?;
        let ctx = canvas
            .get_context("2d")?
            .ok_or_else(|| error("chart", "the canvas has no 2d context"))?
            .dyn_into::<CanvasRenderingContext2d>()?;
        let root = MeasuredCanvas { inner, ctx }.into_drawing_area();
        let lab = &self.lab;
        let pixels: Option<Pixels> = match name {
            "hist" => render::quant_histogram(&root, lab, &labels, &style)
                .map(|_| None)
                .map_err(chart_error)?,
            "groups" => render::group_errors(&root, lab, &labels, &style)
                .map(|_| None)
                .map_err(chart_error)?,
            "rows" => render::row_errors(&root, lab, &labels, &style)
                .map(|_| None)
                .map_err(chart_error)?,
            "scores" => render::score_bars(&root, lab, &labels, &style)
                .map(|_| None)
                .map_err(chart_error)?,
            "strip" => render::token_strip(&root, lab, &labels, &style)
                .map(|_| None)
                .map_err(chart_error)?,
            "mass" => render::mass_retained(&root, lab, &labels, &style)
                .map(|_| None)
                .map_err(chart_error)?,
            "tradeoff" => render::tradeoff(&root, lab, &labels, &style)
                .map(|_| None)
                .map_err(chart_error)?,
            "strips" => render::policy_strips(&root, lab, &labels, &style)
                .map(|_| None)
                .map_err(chart_error)?,
            "budget-data" => render::budget_bar(&root, lab, &labels, &style, false)
                .map(|_| None)
                .map_err(chart_error)?,
            "budget-model" => render::budget_bar(&root, lab, &labels, &style, true)
                .map(|_| None)
                .map_err(chart_error)?,
            "errmap" => Some(render::error_heatmap(&root, lab, &labels, &style).map_err(chart_error)?),
            "attn" => Some(render::attention_heatmap(&root, lab, &labels, &style).map_err(chart_error)?),
            other => {
                return Err(error(
                    "chart",
                    &format!("unknown chart '{other}': one of hist, groups, rows, errmap, attn, scores, strip, mass, tradeoff, strips, budget-data, budget-model"),
                ))
            }
        };
        root.present()
            .map_err(|e| error("chart", &format!("drawing failed: {e}")))?;
        if let Some(px) = pixels {
            blit(&canvas, &px)?;
        }
        Ok(())
    }

    /// Reads an uploaded file (bytes copied once into wasm); returns what it holds. The data in
    /// use does not change until [`Page::use_uploaded`].
    #[wasm_bindgen(js_name = loadFile)]
    pub fn load_file(&mut self, name: &str, bytes: &[u8]) -> Result<JsValue, JsValue> {
        let s = self.lab.load_file(name, bytes).map_err(|e| lab_error(&e))?;
        to_js(&s)
    }

    /// Uses uploaded tensors `{attention, keys, values?, headMode, head, layer, kvHead,
    /// normalise}`; returns `{description, warnings}`. On error the data in use stays.
    #[wasm_bindgen(js_name = useUploaded)]
    pub fn use_uploaded(&mut self, choice: JsValue) -> Result<JsValue, JsValue> {
        let c: UploadChoice = serde_wasm_bindgen::from_value(choice)
            .map_err(|e| error("file", &format!("tensor choice rejected: {e}")))?;
        let s = self.lab.use_uploaded(&c).map_err(|e| lab_error(&e))?;
        to_js(&s)
    }

    /// Back to generated data from `settings`.
    #[wasm_bindgen(js_name = useGenerated)]
    pub fn use_generated(&mut self, settings: JsValue) -> Result<JsValue, JsValue> {
        let s = settings_of(settings)?;
        let f = self.lab.use_generated(&s).map_err(|e| lab_error(&e))?;
        to_js(f)
    }

    /// FNV-1a fingerprints (16 hex digits) of the data in use: `[attention, keys, values]`.
    /// The same settings give the same fingerprints natively and in wasm (tested both ways).
    #[wasm_bindgen(js_name = dataFingerprints)]
    pub fn data_fingerprints(&self) -> Vec<String> {
        let d = self.lab.data();
        [&d.attention, &d.keys, &d.values]
            .iter()
            .map(|m| format!("{:016x}", crate::synth::fingerprint(m)))
            .collect()
    }

    /// Kept/dropped indices and the breakdown as JSON text.
    #[wasm_bindgen(js_name = exportJson)]
    pub fn export_json(&self) -> String {
        self.lab.export_json()
    }

    /// Per-token kept/role/score and the breakdown as CSV text.
    #[wasm_bindgen(js_name = exportCsv)]
    pub fn export_csv(&self) -> String {
        self.lab.export_csv()
    }
}

/// A canvas backend that measures text with the canvas's own `measureText` instead of plotters'
/// default (a styled `<span>` appended to the page and read back), which forced a full-page
/// layout for every label and needed inline styles in the CSP. Everything else is delegated.
struct MeasuredCanvas {
    inner: CanvasBackend,
    ctx: CanvasRenderingContext2d,
}

type CanvasErr = DrawingErrorKind<<CanvasBackend as DrawingBackend>::ErrorType>;

impl DrawingBackend for MeasuredCanvas {
    type ErrorType = <CanvasBackend as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }
    fn ensure_prepared(&mut self) -> Result<(), CanvasErr> {
        self.inner.ensure_prepared()
    }
    fn present(&mut self) -> Result<(), CanvasErr> {
        self.inner.present()
    }
    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Result<(), CanvasErr> {
        self.inner.draw_pixel(point, color)
    }
    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), CanvasErr> {
        self.inner.draw_line(from, to, style)
    }
    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), CanvasErr> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), CanvasErr> {
        self.inner.draw_path(path, style)
    }
    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), CanvasErr> {
        self.inner.draw_circle(center, radius, style, fill)
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), CanvasErr> {
        self.inner.fill_polygon(vert, style)
    }
    fn draw_text<TStyle: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &TStyle,
        pos: BackendCoord,
    ) -> Result<(), CanvasErr> {
        self.inner.draw_text(text, style, pos)
    }
    fn estimate_text_size<TStyle: BackendTextStyle>(
        &self,
        text: &str,
        style: &TStyle,
    ) -> Result<(u32, u32), CanvasErr> {
        // The same font string plotters-canvas draws with.
        self.ctx.set_font(&format!(
            "{} {}px {}",
            style.style().as_str(),
            style.size(),
            style.family().as_str()
        ));
        let width = self
            .ctx
            .measure_text(text)
            .map(|m| m.width())
            .unwrap_or(0.0);
        Ok((
            width.ceil().max(0.0) as u32,
            style.size().ceil().max(0.0) as u32,
        ))
    }
    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), CanvasErr> {
        self.inner.blit_bitmap(pos, size, src)
    }
}

fn blit(canvas: &HtmlCanvasElement, px: &Pixels) -> Result<(), JsValue> {
    if px.rect.is_empty() || px.rgba.is_empty() {
        return Ok(());
    }
    let ctx = canvas
        .get_context("2d")?
        .ok_or_else(|| error("chart", "the canvas has no 2d context"))?
        .dyn_into::<CanvasRenderingContext2d>()?;
    let img = ImageData::new_with_u8_clamped_array_and_sh(Clamped(&px.rgba), px.rect.w, px.rect.h)?;
    ctx.put_image_data(&img, f64::from(px.rect.x), f64::from(px.rect.y))
}
