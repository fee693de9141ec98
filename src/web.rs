//! Browser driver (wasm32 only): the single module that talks to JavaScript and the DOM.
//!
//! It translates: JS values in, core calls ([`crate::synth`], [`crate::quant`]), a chart drawn,
//! small results out. Large data (the KV tensor and its quantized form) stays in wasm memory
//! behind the opaque [`Lab`] handle; JavaScript calls small methods and gets a few numbers back.
//! Every export returns `Result<_, JsError>` so the page can show the message next to the control
//! that caused it. This first page implements note §2.1-2.2 (symmetric per-channel quantization,
//! its error and `R_quant`); the chart here is a stop-gap until `chart/` draws it.

use plotters::prelude::*;
use plotters_canvas::CanvasBackend;
use serde::Serialize;
use wasm_bindgen::prelude::*;
use web_sys::HtmlCanvasElement;

use crate::quant::{error_stats, quantize, Granularity, QuantConfig, Quantized, Scheme};
use crate::synth::{keys, KvSpec};
use crate::Matrix;

/// Installs the panic hook once, when the module is instantiated: a panic is a bug, and its
/// message should reach the console rather than "unreachable executed".
#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

/// The figures of one quantization, as a plain JS object (camelCase keys).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct Figures {
    /// Bit width `b`.
    bits: u8,
    /// The channel the chart shows.
    channel: usize,
    /// That channel's `scale = max|x| / (2^(b-1) - 1)`.
    scale: f64,
    /// `max |x - x_hat|` over the whole tensor.
    max_abs_error: f64,
    /// `mean |x - x_hat|`.
    mean_abs_error: f64,
    /// Root mean square error.
    rmse: f64,
    /// `10 log10(||x||^2 / ||x - x_hat||^2)` in dB.
    snr_db: f64,
    /// `R_quant` with the scales counted (fp16 source and metadata).
    r_quant: f64,
    /// `R_quant = 16 / b`, ignoring metadata.
    r_quant_no_meta: f64,
}

/// A KV tensor (keys, `T x d`) and its current quantization, held in wasm memory.
#[wasm_bindgen]
pub struct Lab {
    keys: Matrix,
    channel: usize,
    quantized: Option<Quantized>,
}

#[wasm_bindgen]
impl Lab {
    /// Generates keys with `tokens` rows (`T`) and `channels` columns (`d`) from `seed`, and picks
    /// the channel with the largest `max|x|` to show (outlier channels are why keys are quantized
    /// per channel).
    #[wasm_bindgen(constructor)]
    pub fn new(tokens: usize, channels: usize, seed: u32) -> Result<Lab, JsError> {
        let keys = keys(&KvSpec {
            tokens,
            channels,
            seed: u64::from(seed),
            ..KvSpec::default()
        })?;
        if let Some((row, col)) = keys.first_non_finite() {
            return Err(JsError::new(&format!(
                "generated keys have a non-finite value at token {row}, channel {col}"
            )));
        }
        let channel = (0..keys.cols())
            .max_by(|&a, &b| max_abs(&keys, a).total_cmp(&max_abs(&keys, b)))
            .unwrap_or(0);
        Ok(Lab {
            keys,
            channel,
            quantized: None,
        })
    }

    /// Tokens `T` (rows of the keys).
    pub fn tokens(&self) -> usize {
        self.keys.rows()
    }

    /// Channels `d` (columns of the keys).
    pub fn channels(&self) -> usize {
        self.keys.cols()
    }

    /// The channel the chart shows.
    pub fn channel(&self) -> usize {
        self.channel
    }

    /// Shows channel `channel` (`0..channels`).
    #[wasm_bindgen(js_name = setChannel)]
    pub fn set_channel(&mut self, channel: usize) -> Result<(), JsError> {
        if channel >= self.keys.cols() {
            return Err(JsError::new(&format!(
                "channel {channel} is out of range: must be in 0..{} (the number of channels)",
                self.keys.cols()
            )));
        }
        self.channel = channel;
        Ok(())
    }

    /// Quantizes the keys symmetrically per channel with `bits` (`2..=16`) and returns the
    /// figures `{bits, channel, scale, maxAbsError, meanAbsError, rmse, snrDb, rQuant,
    /// rQuantNoMeta}`. On error the previous quantization is kept.
    pub fn quantize(&mut self, bits: u32) -> Result<JsValue, JsError> {
        let range = QuantConfig::bits_range(Scheme::Symmetric);
        let bits = u8::try_from(bits).map_err(|_| {
            JsError::new(&format!(
                "bits {bits} is out of range: must be in {}..={}",
                range.start(),
                range.end()
            ))
        })?;
        let config = QuantConfig {
            bits,
            scheme: Scheme::Symmetric,
            granularity: Granularity::PerChannel,
            group_size: None,
        };
        let q = quantize(&self.keys, &config)?;
        let stats = error_stats(&self.keys, &q);
        let group = q.layout().group_of(0, self.channel);
        let figures = Figures {
            bits,
            channel: self.channel,
            scale: q.scales().get(group).copied().map_or(f64::NAN, f64::from),
            max_abs_error: stats.max_abs,
            mean_abs_error: stats.mean_abs,
            rmse: stats.rmse,
            snr_db: stats.snr_db,
            r_quant: stats.compression_ratio,
            r_quant_no_meta: stats.compression_ratio_no_meta,
        };
        self.quantized = Some(q);
        Ok(serde_wasm_bindgen::to_value(&figures)?)
    }

    /// Draws the shown channel: a histogram of its values `x` (bars), the quantization grid
    /// `scale * k` (thin lines) and where the values land after quantization (stems), on
    /// `canvas` whose size is in device pixels (`pixel_ratio` device pixels per CSS pixel).
    /// Axis captions come from the page so they can be translated.
    #[wasm_bindgen(js_name = drawChannel)]
    pub fn draw_channel(
        &self,
        canvas: HtmlCanvasElement,
        pixel_ratio: f64,
        x_caption: &str,
        y_caption: &str,
    ) -> Result<(), JsError> {
        let q = self
            .quantized
            .as_ref()
            .ok_or_else(|| JsError::new("nothing to draw yet: call quantize(bits) first"))?;
        let view = ChannelView::new(&self.keys, q, self.channel)?;
        let backend = CanvasBackend::with_canvas_object(canvas)
            .ok_or_else(|| JsError::new("the canvas has no 2D context"))?;
        let ratio = if pixel_ratio.is_finite() {
            pixel_ratio.clamp(0.5, 4.0)
        } else {
            1.0
        };
        draw_channel(backend, &view, ratio, x_caption, y_caption)
            .map_err(|e| JsError::new(&format!("drawing failed: {e}")))
    }
}

fn max_abs(m: &Matrix, col: usize) -> f32 {
    m.column(col)
        .unwrap_or_default()
        .iter()
        .fold(0.0f32, |a, v| a.max(v.abs()))
}

/// What the channel chart shows, already computed: it only draws.
struct ChannelView {
    /// Value range of the x axis.
    lo: f64,
    hi: f64,
    /// Decimals of the x axis labels, enough for the range.
    decimals: usize,
    /// Histogram of the original values: `bins` equal bins over `[lo, hi]`.
    bins: Vec<u32>,
    /// The grid `scale * k`.
    grid: Vec<f64>,
    /// `(grid value, tokens quantized to it)` for the grid values that are used.
    landed: Vec<(f64, u32)>,
}

impl ChannelView {
    const BINS: usize = 48;

    fn new(x: &Matrix, q: &Quantized, channel: usize) -> Result<Self, JsError> {
        let values = x
            .column(channel)
            .ok_or_else(|| JsError::new(&format!("channel {channel} is out of range")))?;
        let x_hat = q
            .dequantize()
            .column(channel)
            .ok_or_else(|| JsError::new(&format!("channel {channel} is out of range")))?;
        let grid: Vec<f64> = q
            .grid(q.layout().group_of(0, channel))
            .into_iter()
            .map(f64::from)
            .collect();
        let extent = values
            .iter()
            .chain(&x_hat)
            .fold(0.0f64, |a, &v| a.max(f64::from(v).abs()))
            .max(1e-6);
        let (lo, hi) = (-extent * 1.04, extent * 1.04);
        let mut bins = vec![0u32; Self::BINS];
        let width = (hi - lo) / Self::BINS as f64;
        for &v in &values {
            let i = ((f64::from(v) - lo) / width).floor();
            let i = (i.max(0.0) as usize).min(Self::BINS - 1);
            if let Some(b) = bins.get_mut(i) {
                *b += 1;
            }
        }
        let mut sorted: Vec<f64> = x_hat.iter().map(|&v| f64::from(v)).collect();
        sorted.sort_by(f64::total_cmp);
        let mut landed: Vec<(f64, u32)> = Vec::new();
        for v in sorted {
            match landed.last_mut() {
                Some((last, n)) if *last == v => *n += 1,
                _ => landed.push((v, 1)),
            }
        }
        let decimals = match extent {
            e if e >= 10.0 => 0,
            e if e >= 1.0 => 1,
            e if e >= 0.1 => 2,
            _ => 3,
        };
        Ok(Self {
            lo,
            hi,
            decimals,
            bins,
            grid,
            landed,
        })
    }
}

fn draw_channel<DB: DrawingBackend>(
    backend: DB,
    view: &ChannelView,
    ratio: f64,
    x_caption: &str,
    y_caption: &str,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let px = |v: f64| (v * ratio).round() as u32;
    let root = backend.into_drawing_area();
    root.fill(&WHITE)?;
    let y_max = view
        .bins
        .iter()
        .copied()
        .chain(view.landed.iter().map(|&(_, n)| n))
        .max()
        .unwrap_or(1)
        .max(1);
    let font = ("sans-serif", px(13.0)).into_font();
    let mut chart = ChartBuilder::on(&root)
        .margin(px(12.0))
        .x_label_area_size(px(40.0))
        .y_label_area_size(px(44.0))
        .build_cartesian_2d(view.lo..view.hi, 0.0..f64::from(y_max) * 1.08)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(230, 230, 230).stroke_width(px(1.0)))
        .axis_style(RGBColor(120, 120, 120).stroke_width(px(1.0)))
        .x_desc(x_caption)
        .y_desc(y_caption)
        .label_style(font.clone().color(&RGBColor(60, 60, 60)))
        .axis_desc_style(font.color(&RGBColor(40, 40, 40)))
        .x_labels(7)
        .y_labels(5)
        .x_label_formatter(&|v| format!("{v:.*}", view.decimals))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;

    // The grid first, underneath: dense at 8 bits, a few coarse steps at 2-4 bits.
    let grid_color = RGBColor(90, 90, 110).mix(if view.grid.len() > 64 { 0.18 } else { 0.45 });
    chart.draw_series(view.grid.iter().map(|&g| {
        PathElement::new(
            vec![(g, 0.0), (g, f64::from(y_max) * 1.08)],
            grid_color.stroke_width(px(1.0).max(1)),
        )
    }))?;

    let width = (view.hi - view.lo) / view.bins.len() as f64;
    let bar = RGBColor(86, 140, 200).mix(0.55).filled();
    chart.draw_series(view.bins.iter().enumerate().map(|(i, &n)| {
        let x0 = view.lo + i as f64 * width;
        Rectangle::new([(x0, 0.0), (x0 + width, f64::from(n))], bar)
    }))?;

    let stem = RGBColor(214, 96, 20);
    chart.draw_series(view.landed.iter().map(|&(v, n)| {
        PathElement::new(
            vec![(v, 0.0), (v, f64::from(n))],
            stem.stroke_width(px(2.0)),
        )
    }))?;
    chart.draw_series(
        view.landed
            .iter()
            .map(|&(v, n)| Circle::new((v, f64::from(n)), px(3.0), stem.filled())),
    )?;
    root.present()
}
