//! Browser driver (wasm32 only): the single module that talks to JavaScript and the DOM.
//!
//! It translates and nothing more: settings in (a query string, parsed and checked by
//! [`crate::state::Settings::from_query`]), calls on the [`crate::lab::Lab`] that holds the data in wasm
//! memory, charts drawn by [`crate::render`] onto canvases (plotters-canvas for vector parts,
//! `ImageData` for heatmap pixels), and small figure objects out. Big arrays never cross the
//! boundary per frame.
//!
//! Errors are JavaScript `Error`s whose `field` property names the control that caused them, so
//! the page shows the message next to that control; the lab keeps its last good state.

use crate::chart::{ChartError, ChartStyle};
use crate::js::{error, lab_error, reporter, to_js};
use crate::lab::{Defer, Lab, LabError};
use crate::render::{self, Labels, Pixels};
use crate::state::Settings;
use crate::upload::Chosen;
use crate::Matrix;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters_canvas::CanvasBackend;
use wasm_bindgen::prelude::*;
use wasm_bindgen::{Clamped, JsCast};
use web_sys::{
    CanvasRenderingContext2d, HtmlCanvasElement, ImageData, OffscreenCanvas,
    OffscreenCanvasRenderingContext2d,
};

mod canvas;
mod offscreen;
use canvas::AnyCanvas;
use offscreen::OffscreenBackend;

/// Installs the panic hook once, when the module is instantiated: a panic is a bug, and its
/// message should reach the console rather than "unreachable executed".
#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

fn chart_error(e: ChartError) -> JsValue {
    error("chart", &e.to_string())
}

/// The settings the page sends, as a query string (see [`Settings::checked`]).
fn settings_of(query: &str) -> Result<Settings, JsValue> {
    Settings::checked(query).map_err(|w| lab_error(&LabError::from(w)))
}

/// Parses a URL query into `{settings, warnings}` (never fails on bad values: they are clamped
/// or replaced by defaults, each with a warning naming the key, the value and the range).
#[wasm_bindgen(js_name = parseQuery)]
pub fn parse_query(query: &str) -> Result<JsValue, JsValue> {
    to_js(&Settings::from_query(query))
}

/// The canonical query string of the settings sent as `settings` (a query string, see
/// [`Settings::checked`]): only non-default values, short option names, fixed key order.
#[wasm_bindgen(js_name = toQuery)]
pub fn to_query(settings: &str) -> Result<String, JsValue> {
    Ok(settings_of(settings)?.to_query())
}

/// The model presets: `[{slug, name, layers, n_kv_heads, n_heads, d_head, fp_bytes, ...}]`.
#[wasm_bindgen(js_name = modelPresets)]
pub fn model_presets() -> Result<JsValue, JsValue> {
    to_js(&crate::state::ModelPreset::all())
}

/// The page's handle: the data and every derived view live here, in wasm memory.
#[wasm_bindgen]
pub struct Page {
    lab: Lab,
    /// The attention heatmap's pooled grid between draws (see [`render::AttentionCache`]).
    attn_cache: render::AttentionCache,
}

#[wasm_bindgen]
impl Page {
    /// A page on data generated from `settings`; `progress(stage)` (optional) is called with
    /// each stage's key (`data`, `quantization`, `selection`, `budget`, `compare`, `kivi`)
    /// before it runs.
    #[wasm_bindgen(constructor)]
    pub fn new(settings: &str, progress: Option<js_sys::Function>) -> Result<Page, JsValue> {
        Page::of_lab(Lab::new_with_progress(
            settings_of(settings)?,
            &mut reporter(progress),
        ))
    }

    /// A page on a lab just built (or why it could not be).
    fn of_lab(lab: Result<Lab, LabError>) -> Result<Page, JsValue> {
        Ok(Page {
            lab: lab.map_err(|e| lab_error(&e))?,
            attn_cache: render::AttentionCache::default(),
        })
    }

    /// A page like the constructor's, with the policy comparison and KIVI left for
    /// [`Page::complete`] (see [`Lab::new_staged_with_progress`]): the page draws its first
    /// screen in between. Its figures carry `pending: true` until then.
    pub fn staged(settings: &str, progress: Option<js_sys::Function>) -> Result<Page, JsValue> {
        Page::of_lab(Lab::new_staged_with_progress(
            settings_of(settings)?,
            &mut reporter(progress),
        ))
    }

    /// Computes what [`Page::staged`] or a deferring [`Page::update`] left out; returns the
    /// figures. `progress` as in the constructor.
    pub fn complete(&mut self, progress: Option<js_sys::Function>) -> Result<JsValue, JsValue> {
        let f = self
            .lab
            .complete_with_progress(&mut reporter(progress))
            .map_err(|e| lab_error(&e))?;
        to_js(f)
    }

    /// Applies a settings object; returns the figures. On error (an `Error` with `field`) the
    /// previous view stays. `progress` as in the constructor (only recomputed stages). With
    /// `defer`, a comparison the change makes stale is left for [`Page::complete`] (the figures
    /// carry `pending: true` until then); with `defer_lever`, the bits lever's RMSE at one bit
    /// fewer when not known yet (`together.fewerBits.pending`). See [`Lab::update_deferring`].
    pub fn update(
        &mut self,
        settings: &str,
        progress: Option<js_sys::Function>,
        defer: bool,
        defer_lever: bool,
    ) -> Result<JsValue, JsValue> {
        let s = settings_of(settings)?;
        let mut progress = reporter(progress);
        let defer = Defer {
            comparison: defer,
            levers: defer_lever,
        };
        let f = self
            .lab
            .update_deferring(&s, &mut progress, defer)
            .map_err(|e| lab_error(&e))?;
        to_js(f)
    }

    /// Whether the comparison, KIVI or the bits lever wait for [`Page::complete`].
    #[wasm_bindgen(js_name = isPending)]
    pub fn is_pending(&self) -> bool {
        self.lab.is_pending()
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
    /// `mass`, `tradeoff`, `strips`, `budget-data`, `budget-model`, `kl`) on `canvas` (an
    /// `HTMLCanvasElement` in the page or an `OffscreenCanvas` in a worker), whose width/height
    /// are already in device pixels; `labels` maps text keys to the page language; `scale` is
    /// `devicePixelRatio`.
    pub fn draw(
        &mut self,
        name: &str,
        canvas: JsValue,
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
        let no_context = || error("chart", "the canvas has no 2d context");
        // Where the heatmap pixels go: the same 2d context the backend draws on.
        let (backend, put): (AnyCanvas, PutPixels) = if let Some(offscreen) =
            canvas.dyn_ref::<OffscreenCanvas>()
        {
            let ctx = offscreen
                .get_context("2d")?
                .ok_or_else(no_context)?
                .dyn_into::<OffscreenCanvasRenderingContext2d>()?;
            let put_ctx = ctx.clone();
            (
                AnyCanvas::Worker(OffscreenBackend::new(offscreen.clone(), ctx)),
                Box::new(move |img, x, y| put_ctx.put_image_data(img, x, y)),
            )
        } else {
            let canvas: HtmlCanvasElement = canvas.dyn_into().map_err(|_| {
                error(
                    "chart",
                    "not a canvas: expected an HTMLCanvasElement or an OffscreenCanvas",
                )
            })?;
            let inner = CanvasBackend::with_canvas_object(canvas.clone()).ok_or_else(no_context)?;
            let ctx = canvas
                .get_context("2d")?
                .ok_or_else(no_context)?
                .dyn_into::<CanvasRenderingContext2d>()?;
            let put_ctx = ctx.clone();
            (
                AnyCanvas::Page { inner, ctx },
                Box::new(move |img, x, y| put_ctx.put_image_data(img, x, y)),
            )
        };
        let root = backend.into_drawing_area();
        if let Some(px) = draw_chart(
            &root,
            &self.lab,
            &mut self.attn_cache,
            name,
            &labels,
            &style,
        )? {
            if let Some(img) = image_of(&px)? {
                put(&img, f64::from(px.rect.x), f64::from(px.rect.y))?;
            }
        }
        Ok(())
    }

    /// Uses tensors the upload module chose (`Uploads.choose` in `upload/`), each optional
    /// (`undefined`: generated at the upload's `T`): `attention` (`steps x tokens`,
    /// row-major), `keys` (`tokens x channels`), `values` (`tokens x values_width`), the
    /// prompt's token texts (one per token, or `undefined`), with the choice's description and
    /// warnings. Returns `{description, warnings}`. On error (shapes
    /// that do not agree, each named; nothing chosen) the data in use stays.
    #[wasm_bindgen(js_name = useChosen)]
    #[allow(clippy::too_many_arguments)] // (flat typed arrays and numbers: no object to decode)
    pub fn use_chosen(
        &mut self,
        attention: Option<Vec<f32>>,
        steps: usize,
        keys: Option<Vec<f32>>,
        channels: usize,
        values: Option<Vec<f32>>,
        values_width: usize,
        tokens: Option<Vec<String>>,
        description: String,
        warnings: Vec<String>,
        progress: Option<js_sys::Function>,
    ) -> Result<JsValue, JsValue> {
        // (a width of 0, or a length that is not a multiple of the width, is refused by
        // Matrix::new with both numbers named)
        let per = |len: usize, width: usize| len.checked_div(width).unwrap_or(0);
        let matrix = |what: &str, rows: usize, cols: usize, data: Vec<f32>| {
            Matrix::new(rows, cols, data).map_err(|e| error("file", &format!("{what}: {e}")))
        };
        let a = attention
            .map(|a| matrix("attention", steps, per(a.len(), steps), a))
            .transpose()?;
        let k = keys
            .map(|k| matrix("K", per(k.len(), channels), channels, k))
            .transpose()?;
        let v = values
            .map(|v| matrix("V", per(v.len(), values_width), values_width, v))
            .transpose()?;
        let mut chosen = Chosen::new(a, k, v, description, warnings)
            .map_err(|e| lab_error(&LabError::from(e)))?;
        if let Some(texts) = tokens {
            chosen = chosen.with_tokens(texts);
        }
        let s = self
            .lab
            .use_chosen_with_progress(chosen, &mut reporter(progress))
            .map_err(|e| lab_error(&e))?;
        to_js(&s)
    }

    /// Back to generated data from `settings`.
    #[wasm_bindgen(js_name = useGenerated)]
    pub fn use_generated(
        &mut self,
        settings: &str,
        progress: Option<js_sys::Function>,
    ) -> Result<JsValue, JsValue> {
        let s = settings_of(settings)?;
        let f = self
            .lab
            .use_generated_with_progress(&s, &mut reporter(progress))
            .map_err(|e| lab_error(&e))?;
        to_js(f)
    }

    /// Takes what the model's module measured ([`crate::lab::ModelView`]) for the `kl`
    /// chart: the prompt's tokens, the prefill, the KL of each evaluated position and each
    /// prefill token's share of the shown heads keeping it, and the prefill cache's
    /// `R_overall` (the ring of the `model-tradeoff` chart).
    #[wasm_bindgen(js_name = useModelView)]
    pub fn use_model_view(
        &mut self,
        tokens: usize,
        prefill: usize,
        kl: Vec<f64>,
        marks: Vec<f32>,
        r_overall: f64,
    ) {
        self.lab.set_model_view(crate::lab::ModelView {
            tokens,
            prefill,
            kl,
            marks,
            r_overall,
        });
    }

    /// Takes the model's curves measured so far ([`crate::lab::ModelCurve`]s), flat: curve
    /// `i` is named `names[i]` and has the next `lens[i]` points of `xs` (`R_overall`) and
    /// `ys`: the mean KL for the `model-tradeoff` chart, or with `facts` the share of facts
    /// recalled for the `needle` chart. Lengths that do not add up drop the curves that overrun.
    #[wasm_bindgen(js_name = useModelSweep)]
    pub fn use_model_sweep(
        &mut self,
        facts: bool,
        names: Vec<String>,
        lens: Vec<u32>,
        xs: Vec<f64>,
        ys: Vec<f64>,
    ) {
        let mut at = 0usize;
        let mut curves = Vec::with_capacity(names.len());
        for (name, len) in names.into_iter().zip(lens) {
            let end = at.saturating_add(len as usize);
            let (Some(x), Some(y)) = (xs.get(at..end), ys.get(at..end)) else {
                break;
            };
            curves.push(crate::lab::ModelCurve {
                name,
                points: x.iter().copied().zip(y.iter().copied()).collect(),
            });
            at = end;
        }
        let which = if facts {
            crate::lab::ModelCurves::Facts
        } else {
            crate::lab::ModelCurves::Kl
        };
        self.lab.set_model_sweep(which, curves);
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

    /// Kept/dropped indices and the breakdown ([`crate::lab::Lab::export`]) as a plain object,
    /// for the page to write as JSON (so this module carries no JSON serializer).
    #[wasm_bindgen(js_name = exportData)]
    pub fn export_data(&self) -> Result<JsValue, JsValue> {
        to_js(&self.lab.export())
    }

    /// Per-token kept/role/score and the breakdown as CSV text.
    #[wasm_bindgen(js_name = exportCsv)]
    pub fn export_csv(&self) -> String {
        self.lab.export_csv()
    }
}

/// Puts heatmap pixels at (x, y) on the 2d context a chart is drawn on.
type PutPixels = Box<dyn Fn(&ImageData, f64, f64) -> Result<(), JsValue>>;

/// Draws chart `name` of `lab` on `root`; returns the heatmap pixels still to be put on the
/// canvas (heatmaps are RGBA buffers, not plotters rectangles).
fn draw_chart<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    attn_cache: &mut render::AttentionCache,
    name: &str,
    labels: &Labels,
    style: &ChartStyle,
) -> Result<Option<Pixels>, JsValue> {
    // (the page's names are parsed here, where they come in: a name the page does not have is
    // said, with those it does)
    let chart = render::Chart::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = render::Chart::all().map(|c| c.name()).collect();
        error(
            "chart",
            &format!("unknown chart '{name}': one of {}", known.join(", ")),
        )
    })?;
    let pixels = render::draw(root, lab, attn_cache, chart, labels, style).map_err(chart_error)?;
    root.present()
        .map_err(|e| error("chart", &format!("drawing failed: {e}")))?;
    Ok(pixels)
}

/// The heatmap pixels as an `ImageData` (none when the plot area is empty).
fn image_of(px: &Pixels) -> Result<Option<ImageData>, JsValue> {
    if px.rect.is_empty() || px.rgba.is_empty() {
        return Ok(None);
    }
    ImageData::new_with_u8_clamped_array_and_sh(Clamped(&px.rgba), px.rect.w, px.rect.h).map(Some)
}
