//! Chart themes: colours, font and pixel scale shared by every chart (issue 4, "Everywhere":
//! a colour-blind-safe palette, dark and light themes).
//!
//! Series colours come from the Okabe–Ito palette (Okabe & Ito, *Color Universal Design*),
//! which stays distinguishable under the common colour-vision deficiencies. Heatmaps use a
//! perceptual sequential [`Colormap`].

use super::{Colormap, TokenState};
use plotters::style::{Color, FontDesc, FontFamily, FontStyle, IntoFont, RGBColor, TextStyle};

/// Okabe–Ito orange.
const OI_ORANGE: RGBColor = RGBColor(0xE6, 0x9F, 0x00);
/// Okabe–Ito sky blue.
const OI_SKY: RGBColor = RGBColor(0x56, 0xB4, 0xE9);
/// Okabe–Ito bluish green.
const OI_GREEN: RGBColor = RGBColor(0x00, 0x9E, 0x73);
/// Okabe–Ito yellow.
const OI_YELLOW: RGBColor = RGBColor(0xF0, 0xE4, 0x42);
/// Okabe–Ito blue.
const OI_BLUE: RGBColor = RGBColor(0x00, 0x72, 0xB2);
/// Okabe–Ito vermillion.
const OI_VERMILLION: RGBColor = RGBColor(0xD5, 0x5E, 0x00);
/// Okabe–Ito reddish purple.
const OI_PURPLE: RGBColor = RGBColor(0xCC, 0x79, 0xA7);

/// The colour of each token state (kept by role, or dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateColors {
    /// Kept as an attention sink (StreamingLLM's first tokens).
    pub sink: RGBColor,
    /// Kept as a heavy hitter (top score).
    pub heavy: RGBColor,
    /// Kept because it is in the recent window.
    pub recent: RGBColor,
    /// Dropped (evicted).
    pub dropped: RGBColor,
}

impl StateColors {
    /// The colour of `state`.
    pub fn of(&self, state: TokenState) -> RGBColor {
        match state {
            TokenState::Sink => self.sink,
            TokenState::Heavy => self.heavy,
            TokenState::Recent => self.recent,
            TokenState::Dropped => self.dropped,
        }
    }
}

/// A chart theme: colours, font and pixel scale.
///
/// All sizes (font, margins, line widths) are CSS pixels multiplied by [`ChartStyle::scale`],
/// so a canvas sized for `devicePixelRatio = 2` passes `scale = 2.0` and gets the same layout
/// at twice the resolution.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartStyle {
    /// Fill behind everything; also what dropped heatmap columns are dimmed toward.
    pub background: RGBColor,
    /// Titles, tick labels, axis names, legend text.
    pub foreground: RGBColor,
    /// Axis lines and secondary marks (quantization grid lines).
    pub muted: RGBColor,
    /// Background grid lines of the mesh.
    pub grid: RGBColor,
    /// The main series (histogram bars, error bars, the error line).
    pub primary: RGBColor,
    /// Reference marks: bounds (`scale/2`, `1/4 Σ scale²`), the top-k threshold, the mean.
    pub reference: RGBColor,
    /// Markers of data extremes (a channel's min and max).
    pub accent: RGBColor,
    /// A value that breaks its bound (which the math says never happens).
    pub alarm: RGBColor,
    /// Colours of token states (score bars, token strip, attention heatmap marks).
    pub states: StateColors,
    /// Colours of stacked terms (budget bar), used in order and cycled; empty falls back to
    /// `primary`.
    pub palette: Vec<RGBColor>,
    /// Heatmap colour map.
    pub colormap: Colormap,
    /// CSS font family, e.g. `"sans-serif"`; the browser resolves it (CJK text included).
    pub font_family: String,
    /// Base font size in CSS pixels (before `scale`), e.g. 13.
    pub font_size: f64,
    /// Device pixels per CSS pixel (`devicePixelRatio`); values that are not finite and
    /// positive are treated as 1.
    pub scale: f64,
    /// Width of the left (y tick label) area in CSS pixels. Charts stacked over the same token
    /// axis share it, so their plotting areas line up.
    pub y_label_area: u32,
}

impl Default for ChartStyle {
    fn default() -> Self {
        Self::light()
    }
}

impl ChartStyle {
    /// The light theme: dark text on white, Okabe–Ito series colours, viridis heatmaps.
    pub fn light() -> Self {
        Self {
            background: RGBColor(0xFF, 0xFF, 0xFF),
            foreground: RGBColor(0x1F, 0x23, 0x28),
            muted: RGBColor(0x6A, 0x73, 0x7D),
            grid: RGBColor(0xE6, 0xE8, 0xEB),
            primary: OI_BLUE,
            reference: RGBColor(0x1F, 0x23, 0x28),
            accent: OI_PURPLE,
            alarm: OI_VERMILLION,
            states: StateColors {
                sink: OI_PURPLE,
                heavy: OI_ORANGE,
                recent: OI_BLUE,
                dropped: RGBColor(0xC4, 0xC8, 0xCD),
            },
            palette: vec![
                OI_BLUE,
                OI_ORANGE,
                OI_GREEN,
                OI_PURPLE,
                OI_YELLOW,
                OI_SKY,
                OI_VERMILLION,
            ],
            colormap: Colormap::Viridis,
            font_family: "sans-serif".to_string(),
            font_size: 13.0,
            scale: 1.0,
            y_label_area: 56,
        }
    }

    /// The dark theme: light text on near-black, the lighter Okabe–Ito colours for lines,
    /// viridis heatmaps (its darkest colour, a deep purple, still separates from the
    /// background).
    pub fn dark() -> Self {
        Self {
            background: RGBColor(0x16, 0x18, 0x1C),
            foreground: RGBColor(0xE6, 0xE8, 0xEB),
            muted: RGBColor(0x9A, 0xA1, 0xA9),
            grid: RGBColor(0x2E, 0x33, 0x3A),
            primary: OI_SKY,
            reference: RGBColor(0xE6, 0xE8, 0xEB),
            accent: OI_PURPLE,
            alarm: OI_VERMILLION,
            states: StateColors {
                sink: OI_PURPLE,
                heavy: OI_ORANGE,
                recent: OI_SKY,
                dropped: RGBColor(0x4A, 0x50, 0x58),
            },
            palette: vec![
                OI_SKY,
                OI_ORANGE,
                OI_GREEN,
                OI_PURPLE,
                OI_YELLOW,
                OI_BLUE,
                OI_VERMILLION,
            ],
            colormap: Colormap::Viridis,
            font_family: "sans-serif".to_string(),
            font_size: 13.0,
            scale: 1.0,
            y_label_area: 56,
        }
    }

    /// The same theme at another device pixel ratio.
    pub fn with_scale(mut self, scale: f64) -> Self {
        self.scale = scale;
        self
    }

    /// The effective scale: `scale` if finite and in `(0, 16]`, else 1.
    pub(crate) fn k(&self) -> f64 {
        if self.scale.is_finite() && self.scale > 0.0 && self.scale <= 16.0 {
            self.scale
        } else {
            1.0
        }
    }

    /// `v` CSS pixels in backend pixels, rounded, at least 0.
    pub(crate) fn px(&self, v: f64) -> i32 {
        (v * self.k()).round().max(0.0) as i32
    }

    /// A line width: `v` CSS pixels, at least one backend pixel.
    pub(crate) fn stroke(&self, v: f64) -> u32 {
        (v * self.k()).round().max(1.0) as u32
    }

    /// The font size in backend pixels, times `rel`; falls back to 13 px for a size that is not
    /// finite and positive.
    pub(crate) fn font_px(&self, rel: f64) -> f64 {
        let base = if self.font_size.is_finite() && self.font_size > 0.0 {
            self.font_size.min(200.0)
        } else {
            13.0
        };
        (base * rel * self.k()).max(1.0)
    }

    /// The font at `rel` times the base size.
    pub(crate) fn font(&self, rel: f64) -> FontDesc<'_> {
        let family = if self.font_family.is_empty() {
            FontFamily::SansSerif
        } else {
            FontFamily::Name(&self.font_family)
        };
        (family, self.font_px(rel)).into_font()
    }

    /// The text style for plain text in `color` at `rel` times the base size.
    pub(crate) fn text(&self, rel: f64, color: RGBColor) -> TextStyle<'_> {
        let mut t = TextStyle::from(self.font(rel));
        t.color = color.to_backend_color();
        t
    }

    /// Bold text for titles.
    pub(crate) fn title_text(&self) -> TextStyle<'_> {
        let mut t = TextStyle::from(self.font(1.1).style(FontStyle::Bold));
        t.color = self.foreground.to_backend_color();
        t
    }

    /// The colour of stacked term `i` (palette cycled; `primary` if the palette is empty).
    pub(crate) fn palette_color(&self, i: usize) -> RGBColor {
        if self.palette.is_empty() {
            self.primary
        } else {
            self.palette[i % self.palette.len()]
        }
    }
}

/// Legend texts for the token states; an empty text leaves that state out of the legend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StateLabels<'a> {
    /// e.g. "sink".
    pub sink: &'a str,
    /// e.g. "heavy hitter".
    pub heavy: &'a str,
    /// e.g. "recent".
    pub recent: &'a str,
    /// e.g. "dropped".
    pub dropped: &'a str,
}
