//! From a [`Lab`] to its charts: prepares each chart's view data (histogram bins, display
//! transforms, state arrays, budget terms) and draws it on any plotters backend.
//!
//! The browser calls these with `CanvasBackend`; the tests call them with `SVGBackend`. Texts
//! come from a [`Labels`] map the page fills in its language; a missing key shows the key.
//! Heatmaps come back as [`Pixels`] for the caller to blit inside the frame the chart drew.

use crate::chart::{
    self, AttentionMarks, BudgetBarView, BudgetTerm, ChartError, ChartStyle, ColorbarView,
    GroupErrorView, HeatmapFrameView, MassRetainedView, PixelRect, PolicyStripsView,
    QuantHistogramView, RowErrorView, ScoreBarsView, StateLabels, TokenState, TokenStripView,
    TradeoffCurve, TradeoffView,
};
use crate::lab::Lab;
use crate::state::Method;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::HashMap;

/// Chart texts by key, in the page's language.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct Labels(pub HashMap<String, String>);

impl Labels {
    /// The text for `key`, or the key itself when missing (visible, never a crash).
    pub fn get<'a>(&'a self, key: &'a str) -> &'a str {
        self.0.get(key).map_or(key, String::as_str)
    }

    fn states(&self) -> StateLabels<'_> {
        StateLabels {
            sink: self.get("state.sink"),
            heavy: self.get("state.heavy"),
            recent: self.get("state.recent"),
            dropped: self.get("state.dropped"),
        }
    }

    /// What `chartLabels(lang)` in `i18n.js` gives: every English key starting with `chart.`,
    /// `state.`, `budget.` or `policy.`, in `lang` (falling back to English), and `budget.index` as
    /// `budget.index.term`.
    pub fn for_charts(texts: &HashMap<String, HashMap<String, String>>, lang: &str) -> Labels {
        let empty = HashMap::new();
        let en = texts.get("en").unwrap_or(&empty);
        let own = texts.get(lang).unwrap_or(&empty);
        let t = |key: &str| {
            own.get(key)
                .or_else(|| en.get(key))
                .cloned()
                .unwrap_or_else(|| key.to_string())
        };
        let mut out: HashMap<String, String> = en
            .keys()
            .filter(|k| {
                ["chart.", "state.", "budget.", "policy."]
                    .iter()
                    .any(|p| k.starts_with(p))
            })
            .map(|k| (k.clone(), t(k)))
            .collect();
        out.insert("budget.index".into(), t("budget.index.term"));
        Labels(out)
    }
}

/// The page's texts, language -> key -> text, from each language's JSON object of key -> text
/// (`www/i18n/en.json`, `zh.json`: what the page's `TEXT` is built from). A file that is not
/// one JSON object of strings is refused with its language and the reason, so a broken file
/// fails the build (which draws the default view's charts with them) rather than dropping texts.
pub fn page_texts(
    languages: &[(&str, &str)],
) -> Result<HashMap<String, HashMap<String, String>>, String> {
    languages
        .iter()
        .map(|&(lang, json)| {
            serde_json::from_str::<HashMap<String, String>>(json)
                .map(|texts| (lang.to_string(), texts))
                .map_err(|e| format!("{lang}: {e}"))
        })
        .collect()
}

/// [`page_texts`] of the files `dir/en.json` and `dir/zh.json` (`www/i18n/`), native only: for
/// the site build's first view and the tests.
#[cfg(not(target_arch = "wasm32"))]
pub fn read_page_texts(
    dir: &std::path::Path,
) -> Result<HashMap<String, HashMap<String, String>>, String> {
    let read = |lang: &str| {
        let path = dir.join(format!("{lang}.json"));
        std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    let (en, zh) = (read("en")?, read("zh")?);
    page_texts(&[("en", &en), ("zh", &zh)]).map_err(|e| format!("{}: {e}", dir.display()))
}

/// RGBA pixels to put at `rect` (row-major, `rect.w x rect.h x 4` bytes).
#[derive(Debug, Clone, PartialEq)]
pub struct Pixels {
    /// Where, in backend pixels.
    pub rect: PixelRect,
    /// The bytes.
    pub rgba: Vec<u8>,
}

/// A chart of the page: a typed value, so that a new chart is one more variant the compiler
/// makes every `match` handle. Its canvas carries [`Chart::name`] (`data-chart`); the page's
/// names are parsed once, where they come in ([`Chart::from_name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Chart {
    /// Section 2: the shown group's histogram with its grid.
    Hist,
    /// Section 2: per-group max error against `scale/2`.
    Groups,
    /// Section 2: per-token squared error against `1/4 sum scale^2`.
    Rows,
    /// Section 2: `|x - x_hat|` over tokens and channels.
    Errmap,
    /// Section 3: the attention heatmap with the kept set marked.
    Attn,
    /// Section 3: the score bars and the top-k threshold.
    Scores,
    /// Section 3: the kept-set strip.
    Strip,
    /// Section 3: attention mass retained per step.
    Mass,
    /// Section 3b: quality against `R_overall`, one curve per policy.
    Tradeoff,
    /// Section 3b: every policy's kept set.
    Strips,
    /// Section 1: `M_KV,final` on the data.
    BudgetData,
    /// Section 1: `M_KV,final` on the model.
    BudgetModel,
}

impl Chart {
    /// Every chart, in the page's order.
    pub const ALL: &'static [Chart] = &[
        Chart::Hist,
        Chart::Groups,
        Chart::Rows,
        Chart::Errmap,
        Chart::Attn,
        Chart::Scores,
        Chart::Strip,
        Chart::Mass,
        Chart::Tradeoff,
        Chart::Strips,
        Chart::BudgetData,
        Chart::BudgetModel,
    ];

    /// The name its canvas carries (`data-chart`).
    pub fn name(self) -> &'static str {
        match self {
            Chart::Hist => "hist",
            Chart::Groups => "groups",
            Chart::Rows => "rows",
            Chart::Errmap => "errmap",
            Chart::Attn => "attn",
            Chart::Scores => "scores",
            Chart::Strip => "strip",
            Chart::Mass => "mass",
            Chart::Tradeoff => "tradeoff",
            Chart::Strips => "strips",
            Chart::BudgetData => "budget-data",
            Chart::BudgetModel => "budget-model",
        }
    }

    /// The chart whose canvas carries `name`.
    pub fn from_name(name: &str) -> Option<Chart> {
        Chart::ALL.iter().copied().find(|c| c.name() == name)
    }

    /// The `model` argument of [`budget_bar`] for the two budget charts.
    pub fn budget_model(self) -> Option<bool> {
        match self {
            Chart::BudgetData => Some(false),
            Chart::BudgetModel => Some(true),
            _ => None,
        }
    }
}

/// Draws the page's `chart` of `lab` on `root`; returns the heatmap pixels still to be put on
/// it (heatmaps are RGBA buffers, not plotters rectangles).
pub fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    attn_cache: &mut AttentionCache,
    chart: Chart,
    labels: &Labels,
    style: &ChartStyle,
) -> Result<Option<Pixels>, ChartError> {
    fn none<T>(r: Result<T, ChartError>) -> Result<Option<Pixels>, ChartError> {
        r.map(|_| None)
    }
    match chart {
        Chart::Hist => none(quant_histogram(root, lab, labels, style)),
        Chart::Groups => none(group_errors(root, lab, labels, style)),
        Chart::Rows => none(row_errors(root, lab, labels, style)),
        Chart::Scores => none(score_bars(root, lab, labels, style)),
        Chart::Strip => none(token_strip(root, lab, labels, style)),
        Chart::Mass => none(mass_retained(root, lab, labels, style)),
        Chart::Tradeoff => none(tradeoff(root, lab, labels, style)),
        Chart::Strips => none(policy_strips(root, lab, labels, style)),
        Chart::BudgetData => none(budget_bar(root, lab, labels, style, false)),
        Chart::BudgetModel => none(budget_bar(root, lab, labels, style, true)),
        Chart::Errmap => error_heatmap(root, lab, labels, style).map(Some),
        Chart::Attn => attention_heatmap(root, lab, labels, style, attn_cache).map(Some),
    }
}

/// Histogram of `values` in `bins` equal bins over `[min, max]` (a zero range is widened).
pub fn histogram(values: &[f32], bins: usize) -> ((f64, f64), Vec<u32>) {
    let bins = bins.max(1);
    let (lo, hi) = values
        .iter()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(f64::from(v)), b.max(f64::from(v)))
        });
    let (lo, hi) = if !lo.is_finite() {
        (0.0, 1.0)
    } else if hi - lo <= f64::EPSILON * lo.abs().max(1.0) {
        (lo - 0.5, hi + 0.5)
    } else {
        (lo, hi)
    };
    let mut counts = vec![0u32; bins];
    let w = (hi - lo) / bins as f64;
    for &v in values.iter().filter(|v| v.is_finite()) {
        let i = (((f64::from(v) - lo) / w) as usize).min(bins - 1);
        counts[i] += 1;
    }
    ((lo, hi), counts)
}

/// The shown group in words ("channel 39, tokens 0–31", "token 0", "the whole tensor"), from
/// the `chart.group.*` templates the page's formulas use too.
pub fn group_name(g: &crate::lab::ShownGroup, l: &Labels) -> String {
    let whole = g.from == 0 && g.to + 1 >= g.len;
    let key = match (g.granularity, whole) {
        ("per-channel", true) => "chart.group.channel",
        ("per-channel", false) => "chart.group.channel-run",
        ("per-token", true) => "chart.group.token",
        ("per-token", false) => "chart.group.token-run",
        _ => "chart.group.tensor",
    };
    l.get(key)
        .replace("{index}", &g.index.to_string())
        .replace("{from}", &g.from.to_string())
        .replace("{to}", &g.to.to_string())
}

/// Section 2: the shown group's histogram with its quantization grid over it.
pub fn quant_histogram<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let q = lab.quant();
    let f = &q.figures;
    let values = lab.shown_group_values();
    let bins = (values.len() / 4).clamp(8, 80);
    let ((lo, hi), counts) = histogram(values, bins);
    let title = l
        .get("chart.hist.title")
        .replace("{group}", &group_name(&f.group, l));
    chart::quant_histogram(
        root,
        &QuantHistogramView {
            title: &title,
            x_label: l.get("chart.hist.x"),
            y_label: l.get("chart.hist.y"),
            bin_range: (lo, hi),
            counts: &counts,
            grid: &q.group_grid,
            min: f.group_min,
            max: f.group_max,
            counts_label: l.get("chart.hist.counts"),
            grid_label: l.get("chart.hist.grid"),
            min_label: l.get("chart.hist.min"),
            max_label: l.get("chart.hist.max"),
            thinned_note: l.get("chart.hist.thinned"),
        },
        style,
    )
}

/// Section 2: per-group max error against `scale/2`.
pub fn group_errors<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    chart::group_error_bars(
        root,
        &GroupErrorView {
            title: l.get("chart.groups.title"),
            x_label: l.get("chart.groups.x"),
            y_label: l.get("chart.groups.y"),
            errors: &lab.quant().groups,
            error_label: l.get("chart.groups.error"),
            bound_label: l.get("chart.groups.bound"),
            alarm_label: l.get("chart.alarm"),
        },
        style,
    )
}

/// Section 2: per-row squared error against `1/4 sum scale^2`.
pub fn row_errors<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    chart::row_error_vs_bound(
        root,
        &RowErrorView {
            title: l.get("chart.rows.title"),
            x_label: l.get("chart.rows.x"),
            y_label: l.get("chart.rows.y"),
            rows: &lab.quant().rows,
            error_label: l.get("chart.rows.error"),
            bound_label: l.get("chart.rows.bound"),
            alarm_label: l.get("chart.alarm"),
        },
        style,
    )
}

/// Section 2: the `|x - x_hat|` heatmap (tokens along x): draws the frame, returns the pixels.
pub fn error_heatmap<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<Pixels, ChartError> {
    let q = lab.quant();
    let (t, d) = (q.quantized.rows(), q.quantized.cols());
    // max |x - x_hat| over every element = the largest per-group maximum (the same f32 errors,
    // from the same analysis): a pass over the groups instead of over T x d errors.
    let max_err = q.groups.iter().map(|g| g.max_abs).fold(0f32, f32::max);
    let rect = chart::draw_heatmap_frame(
        root,
        &HeatmapFrameView {
            title: l.get("chart.errmap.title"),
            x_label: l.get("chart.errmap.x"),
            y_label: l.get("chart.errmap.y"),
            x_range: (0.0, t as f64),
            y_range: (0.0, d as f64),
            strip_px: 0,
            colorbar: Some(ColorbarView {
                colormap: style.colormap,
                range: (0.0, f64::from(max_err)),
                label: l.get("chart.errmap.bar"),
                scale: chart::BarScale::Linear,
            }),
            legend: StateLabels {
                sink: "",
                heavy: "",
                recent: "",
                dropped: "",
            },
        },
        style,
    )?;
    if rect.is_empty() {
        return Ok(Pixels {
            rect,
            rgba: Vec::new(),
        });
    }
    let rgba =
        chart::error_heatmap_rgba(&q.abs_err, t, d, rect.w, rect.h, style.colormap, max_err)?;
    Ok(Pixels { rect, rgba })
}

fn states(lab: &Lab) -> Vec<TokenState> {
    chart::token_states(&lab.select().selection)
}

/// The attention heatmap's pooled grid, kept between draws: it depends only on the data and the
/// canvas size, while B, r and the method only move the marks. At W2 (64 x 32,768) pooling is
/// most of the chart's time.
///
/// It also keeps the two colourings of that grid ([`chart::AttentionLayers`]): they depend on
/// the pool and the style, so a selection change only copies pixel columns from one or the
/// other.
#[derive(Debug, Default)]
pub struct AttentionCache {
    /// (data id, plot width, plot height, strip height) of `pooled`.
    key: Option<(u64, u32, u32, u32)>,
    pooled: Vec<f32>,
    /// The data id of `max`, the largest weight.
    max_of: Option<u64>,
    max: f32,
    /// `pooled`'s key, the colour map, the range's top (bits) and the dimming (background and
    /// fade, bits) of `layers`.
    layers_key: Option<LayersKey>,
    layers: chart::AttentionLayers,
}

/// What [`AttentionCache::layers`] were built from.
type LayersKey = (
    (u64, u32, u32, u32),
    chart::Colormap,
    u32,
    (u8, u8, u8),
    u32,
);

/// How attention weights are shown: `sqrt(max(a, 0))`, so small but real attention stays
/// visible (monotone, so it commutes with max-pooling).
fn shown_weight(a: f32) -> f32 {
    a.max(0.0).sqrt()
}

/// Section 3: the attention heatmap, dropped token columns dimmed, kept ones marked.
/// Weights are shown as `sqrt(a)` so small but real attention stays visible. `cache` keeps the
/// pooled grid for the next draw on the same data and size.
pub fn attention_heatmap<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
    cache: &mut AttentionCache,
) -> Result<Pixels, ChartError> {
    let a = &lab.data().attention;
    let strip = (6.0 * style.scale.max(1.0)).round() as u32;
    if cache.max_of != Some(lab.data_id()) {
        cache.max = a.data().iter().copied().fold(0f32, f32::max);
        cache.max_of = Some(lab.data_id());
    }
    let hi = shown_weight(cache.max).max(f32::MIN_POSITIVE);
    let rect = chart::draw_heatmap_frame(
        root,
        &HeatmapFrameView {
            title: l.get("chart.attn.title"),
            x_label: l.get("chart.attn.x"),
            y_label: l.get("chart.attn.y"),
            x_range: (0.0, a.cols() as f64),
            y_range: (0.0, a.rows() as f64),
            strip_px: strip,
            colorbar: Some(ColorbarView {
                colormap: style.colormap,
                range: (0.0, f64::from(hi * hi)),
                label: l.get("chart.attn.bar"),
                scale: chart::BarScale::Sqrt,
            }),
            legend: l.states(),
        },
        style,
    )?;
    if rect.is_empty() {
        return Ok(Pixels {
            rect,
            rgba: Vec::new(),
        });
    }
    // The plot area's size, not the canvas's: labels in another language move its edges.
    let key = (lab.data_id(), rect.w, rect.h, strip);
    if cache.key != Some(key) {
        cache.pooled = chart::pool_attention(a.data(), a.rows(), a.cols(), rect.w, rect.h, strip)?;
        cache.key = Some(key);
    }
    let st = states(lab);
    let marks = AttentionMarks {
        strip_px: strip,
        ..AttentionMarks::new(&st, style)
    };
    let bg = marks.dim_toward;
    let layers_key = (
        key,
        style.colormap,
        hi.to_bits(),
        (bg.0, bg.1, bg.2),
        marks.dim.to_bits(),
    );
    if cache.layers_key != Some(layers_key) {
        cache.layers = chart::AttentionLayers::new(
            &cache.pooled,
            rect.w,
            rect.h,
            style.colormap,
            (0.0, hi),
            &marks,
            shown_weight,
        )?;
        cache.layers_key = Some(layers_key);
    }
    let rgba = cache.layers.compose(&marks, a.cols())?;
    Ok(Pixels { rect, rgba })
}

/// Section 3: the scores the method ranked, with the top-k threshold and the recent window.
pub fn score_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let sel = lab.select();
    let t = sel.scores.len();
    let title = match lab.settings().method {
        Method::H2o => l.get("chart.scores.title.h2o"),
        Method::Snapkv => l.get("chart.scores.title.snapkv"),
        Method::Streaming => l.get("chart.scores.title.streaming"),
    };
    let recent = (sel.figures.recent_start < t).then_some((sel.figures.recent_start, t));
    let st = states(lab);
    let labels = token_labels(lab, &st);
    chart::score_bars(
        root,
        &ScoreBarsView {
            title,
            x_label: l.get("chart.tokens"),
            y_label: l.get("chart.scores.y"),
            scores: &sel.scores,
            states: &st,
            threshold: sel.figures.threshold,
            threshold_label: l.get("chart.scores.threshold"),
            recent,
            recent_label: l.get("chart.scores.recent"),
            legend: l.states(),
            labels: &labels,
        },
        style,
    )
}

/// The most a score chart names: more would not fit beside each other on a phone.
const TOKEN_LABELS: usize = 8;

/// With the prompt's token texts: the kept sinks and heavy hitters with the highest scores (at
/// most [`TOKEN_LABELS`]), each as its text in quotes ([`quoted_token`]), the highest first (the
/// chart names those first where labels would collide).
fn token_labels(lab: &Lab, states: &[TokenState]) -> Vec<(usize, String)> {
    let Some(texts) = lab.data().tokens.as_deref() else {
        return Vec::new();
    };
    let scores = &lab.select().scores;
    let score = |i: usize| scores.get(i).copied().unwrap_or(f32::NEG_INFINITY);
    // The highest scores first, ties to the lower token (the selection's own order), kept by
    // insertion: a sort with this comparison would add a sort's code to the page for 8 items.
    let mut named: Vec<usize> = Vec::with_capacity(TOKEN_LABELS + 1);
    for (i, st) in states.iter().enumerate() {
        if !matches!(st, TokenState::Heavy | TokenState::Sink) {
            continue;
        }
        let at = named
            .iter()
            .position(|&j| score(i) > score(j))
            .unwrap_or(named.len());
        if at < TOKEN_LABELS {
            named.insert(at, i);
            named.truncate(TOKEN_LABELS);
        }
    }
    named
        .into_iter()
        .filter_map(|i| Some((i, quoted_token(texts.get(i)?))))
        .collect()
}

/// A token's text as a label: in quotes, a line break shown as `⏎`, at most 12 characters
/// (then `…`).
pub fn quoted_token(text: &str) -> String {
    let mut out = String::from("‘");
    for (n, c) in text.chars().enumerate() {
        if n == 12 {
            out.push('…');
            break;
        }
        out.push(if c == '\n' { '⏎' } else { c });
    }
    out.push('’');
    out
}

/// Section 3: the kept set as a strip over the tokens.
pub fn token_strip<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let st = states(lab);
    chart::token_strip(
        root,
        &TokenStripView {
            title: l.get("chart.strip.title"),
            x_label: l.get("chart.tokens"),
            states: &st,
            legend: l.states(),
        },
        style,
    )
}

/// Section 3: attention mass retained per step.
pub fn mass_retained<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let sel = lab.select();
    chart::mass_retained(
        root,
        &MassRetainedView {
            title: l.get("chart.mass.title"),
            x_label: l.get("chart.mass.x"),
            y_label: l.get("chart.mass.y"),
            mass: &sel.mass,
            mean: sel.figures.mass_mean,
            mass_label: l.get("chart.mass.line"),
            mean_label: l.get("chart.mass.mean"),
        },
        style,
    )
}

/// Beyond the note: quality (mass retained on the evaluation rows) against `R_overall`, one
/// curve per policy swept over B, with the current method and B ringed.
pub fn tradeoff<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let cmp = lab.compare();
    let points: Vec<Vec<(f64, f64)>> = cmp
        .curves
        .iter()
        .map(|c| {
            c.points
                .iter()
                .filter_map(|p| p.r_overall.map(|x| (x, p.quality.mass_mean)))
                .collect()
        })
        .collect();
    let names: Vec<String> = cmp
        .curves
        .iter()
        .map(|c| format!("policy.{}", c.policy.name()))
        .collect();
    let curves: Vec<TradeoffCurve> = names
        .iter()
        .zip(&points)
        .map(|(n, p)| TradeoffCurve {
            label: l.get(n),
            points: p,
        })
        .collect();
    let current_policy = match lab.settings().method {
        Method::H2o => "h2o-sum",
        Method::Snapkv => "snapkv",
        Method::Streaming => "streaming-llm",
    };
    let current = cmp
        .figures
        .rows
        .iter()
        .find(|r| r.policy == current_policy)
        .and_then(|r| r.quality)
        .map(|q| (lab.figures().budget.data.r_overall, q.mass_mean));
    chart::tradeoff(
        root,
        &TradeoffView {
            title: l.get("chart.tradeoff.title"),
            x_label: l.get("chart.tradeoff.x"),
            y_label: l.get("chart.tradeoff.y"),
            curves: &curves,
            current,
            current_label: l.get("chart.tradeoff.current"),
        },
        style,
    )
}

/// Beyond the note: every policy's kept set at the current B, one strip per policy.
pub fn policy_strips<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
) -> Result<PixelRect, ChartError> {
    let cmp = lab.compare();
    let states: Vec<(String, Vec<TokenState>)> = cmp
        .selections
        .iter()
        .filter_map(|(p, sel)| {
            sel.as_ref()
                .map(|s| (format!("policy.short.{}", p.name()), chart::token_states(s)))
        })
        .collect();
    let rows: Vec<(&str, &[TokenState])> = states
        .iter()
        .map(|(n, s)| (l.get(n), s.as_slice()))
        .collect();
    chart::policy_strips(
        root,
        &PolicyStripsView {
            title: l.get("chart.strips.title"),
            x_label: l.get("chart.tokens"),
            rows: &rows,
            legend: l.states(),
        },
        style,
    )
}

/// The binary unit to count `max` bytes in: the largest of B, KiB, MiB, GiB and TiB that is at
/// most `max`, and its size in bytes.
pub fn byte_unit(max: u64) -> (&'static str, f64) {
    const UNITS: [(&str, u64); 5] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("B", 1),
    ];
    UNITS
        .iter()
        .find(|(_, size)| max >= *size)
        .map_or(("B", 1.0), |&(unit, size)| (unit, size as f64))
}

/// Bytes as text: `512 B`, `12.3 KiB`, `4.50 MiB`, `1.25 GiB`.
pub fn bytes_text(b: u64) -> String {
    // Ties round up, as the page's JavaScript `toFixed` does for the same figures in the
    // formulas (Rust's `{:.1}` would round 9.25 to 9.2, `toFixed(1)` gives 9.3).
    let fixed = |v: f64, digits: usize| {
        let scale = 10f64.powi(digits as i32);
        format!("{:.*}", digits, (v * scale).round() / scale)
    };
    let v = b as f64;
    if b < 1024 {
        format!("{b} B")
    } else if v < 1024.0 * 1024.0 {
        format!("{} KiB", fixed(v / 1024.0, 1))
    } else if v < 1024.0 * 1024.0 * 1024.0 {
        format!("{} MiB", fixed(v / (1024.0 * 1024.0), 2))
    } else {
        format!("{} GiB", fixed(v / (1024.0 * 1024.0 * 1024.0), 2))
    }
}

/// Section 1: `M_KV,final` as stacked terms beside `M_fp`; `model` picks the extrapolated
/// breakdown instead of the one on the data.
pub fn budget_bar<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lab: &Lab,
    l: &Labels,
    style: &ChartStyle,
    model: bool,
) -> Result<PixelRect, ChartError> {
    let f = &lab.figures().budget;
    let b = if model { &f.extrapolated } else { &f.data };
    let parts = [
        ("budget.codes", b.m_codes),
        ("budget.fpkept", b.m_fp_kept),
        ("budget.scales", b.m_scales),
        ("budget.zeros", b.m_zero_points),
        ("budget.score", b.m_score_state),
        ("budget.index", b.m_index),
    ];
    let texts: Vec<String> = parts.iter().map(|(_, v)| bytes_text(*v)).collect();
    // The axis counts in the binary unit of the larger bar, so its ticks read "0 … 160" KiB
    // or "0 … 5" GiB rather than "1.0e9".
    let (unit, size) = byte_unit(b.m_final.max(b.m_fp));
    let terms: Vec<BudgetTerm> = parts
        .iter()
        .zip(&texts)
        .map(|((k, v), t)| BudgetTerm {
            label: l.get(k),
            value: *v as f64 / size,
            value_text: t,
        })
        .collect();
    let x_label = format!("{} ({unit})", l.get("chart.budget.x"));
    let final_text = bytes_text(b.m_final);
    let fp_text = bytes_text(b.m_fp);
    let title = if model {
        l.get("chart.budget.title.model")
            .replace("{model}", &f.model_name)
    } else {
        l.get("chart.budget.title.data").to_string()
    };
    chart::budget_bar(
        root,
        &BudgetBarView {
            title: &title,
            x_label: &x_label,
            final_label: l.get("budget.final"),
            terms: &terms,
            final_text: &final_text,
            fp_label: l.get("budget.fp"),
            fp_value: b.m_fp as f64 / size,
            fp_text: &fp_text,
        },
        style,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Settings;

    const EN: &str = r#"{"title": "kvlab", "chart.budget.x": "bytes", "budget.index.term": "index (it's)", "state.sink": "sink"}"#;
    const ZH: &str = r#"{"chart.budget.x": "字节"}"#;

    #[test]
    fn a_prompts_heavy_hitters_are_named_on_the_score_chart() {
        use crate::lab::{Lab, UploadChoice};
        use plotters::prelude::SVGBackend;
        // 2 steps over 6 tokens: B = 4 with r = 1 keeps the three highest scores before token
        // 5, tokens 1 (" cat", 0.9), 4 ("\n", 0.5) and 0 (0.15, the first of a tie)
        let s = Settings {
            budget: 4,
            recent: 1,
            ..Settings::default()
        };
        let mut lab = Lab::new(s).unwrap();
        lab.load_file(
            "a.csv",
            b"0.1,0.5,0.1,0.1,0.2,0\n0.05,0.4,0.05,0.05,0.3,0.15\n",
        )
        .unwrap();
        lab.load_file(
            "t.json",
            br#"["<s>", " cat", " sat", " on", "\n", " a very long token"]"#,
        )
        .unwrap();
        let choice = UploadChoice {
            attention: "a.csv".into(),
            head_mode: "head".into(),
            ..UploadChoice::default()
        };
        lab.use_uploaded(&choice).unwrap();
        assert_eq!(lab.select().selection.kept, vec![0, 1, 4, 5]);
        let states = states(&lab);
        assert_eq!(
            token_labels(&lab, &states),
            vec![
                (1, "‘ cat’".to_string()),
                (4, "‘⏎’".to_string()),
                (0, "‘<s>’".to_string())
            ]
        );
        assert_eq!(quoted_token(" a very long token"), "‘ a very long…’");
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (600, 240)).into_drawing_area();
            score_bars(&root, &lab, &Labels::default(), &ChartStyle::light()).unwrap();
        }
        assert!(svg.contains("‘ cat’") && svg.contains("‘⏎’"), "{svg}");
    }

    /// The page's own files, `www/i18n/{en,zh}.json`.
    fn page_files() -> [(&'static str, &'static str); 2] {
        [
            ("en", include_str!("../www/i18n/en.json")),
            ("zh", include_str!("../www/i18n/zh.json")),
        ]
    }

    #[test]
    fn reads_both_languages_blocks() {
        let texts = page_texts(&[("en", EN), ("zh", ZH)]).unwrap();
        assert_eq!(texts["en"]["title"], "kvlab");
        assert_eq!(texts["en"]["budget.index.term"], "index (it's)");
        assert_eq!(texts["zh"]["chart.budget.x"], "字节");
        assert_eq!(texts["zh"].len(), 1);
    }

    #[test]
    fn chart_labels_pick_the_prefixed_keys_with_english_fallback() {
        let texts = page_texts(&[("en", EN), ("zh", ZH)]).unwrap();
        let zh = Labels::for_charts(&texts, "zh");
        assert_eq!(zh.get("chart.budget.x"), "字节");
        assert_eq!(zh.get("state.sink"), "sink", "falls back to English");
        assert_eq!(zh.get("budget.index"), "index (it's)");
        assert!(!zh.0.contains_key("title"), "only chart keys");
    }

    #[test]
    fn a_file_that_is_not_an_object_of_strings_is_refused_by_its_language() {
        let e = page_texts(&[("en", EN), ("zh", r#"{"a": 1}"#)]).unwrap_err();
        assert!(e.starts_with("zh: "), "{e}");
        assert!(page_texts(&[("en", "[]")]).unwrap_err().starts_with("en: "));
        assert!(page_texts(&[("en", "{")]).is_err());
    }

    #[test]
    fn the_pages_own_texts_parse() {
        let texts = page_texts(&page_files()).unwrap();
        let (en, zh) = (
            Labels::for_charts(&texts, "en"),
            Labels::for_charts(&texts, "zh"),
        );
        assert_eq!(en.get("chart.budget.title.data"), "M_KV,final on this data");
        assert_ne!(
            zh.get("chart.budget.title.data"),
            en.get("chart.budget.title.data")
        );
        assert_eq!(en.0.len(), zh.0.len());
    }

    #[test]
    fn charts_are_named_once_and_the_budget_charts_by_the_breakdown_they_show() {
        for &c in Chart::ALL {
            assert_eq!(Chart::from_name(c.name()), Some(c));
        }
        assert_eq!(Chart::from_name(""), None);
        assert_eq!(Chart::from_name("Hist"), None);
        assert_eq!(Chart::BudgetData.budget_model(), Some(false));
        assert_eq!(Chart::BudgetModel.budget_model(), Some(true));
        assert_eq!(Chart::Hist.budget_model(), None);
    }

    /// The page keeps the attention heatmap's pooled grid across selection changes: the pixels
    /// must equal a fresh draw's, and new data must not reuse the old pool.
    #[test]
    fn cached_attention_heatmap_matches_a_fresh_draw() {
        let mut s = Settings {
            tokens: 300,
            steps: 20,
            channels: 8,
            budget: 60,
            recent: 10,
            window: 4,
            future: 4,
            ..Settings::default()
        };
        let mut lab = Lab::new(s.clone()).unwrap();
        let (l, style) = (Labels::default(), ChartStyle::light());
        let mut cache = AttentionCache::default();
        let draw_in = |lab: &Lab, style: &ChartStyle, cache: &mut AttentionCache| {
            let mut svg = String::new();
            let root = SVGBackend::with_string(&mut svg, (420, 220)).into_drawing_area();
            attention_heatmap(&root, lab, &l, style, cache)
                .unwrap()
                .rgba
        };
        let draw = |lab: &Lab, cache: &mut AttentionCache| draw_in(lab, &style, cache);
        let first = draw(&lab, &mut cache);
        assert_eq!(first, draw(&lab, &mut AttentionCache::default()));
        for (budget, seed) in [(20, 0), (200, 0), (20, 5)] {
            s.budget = budget;
            s.seed += seed;
            lab.update(&s).unwrap();
            let cached = draw(&lab, &mut cache);
            assert_eq!(
                cached,
                draw(&lab, &mut AttentionCache::default()),
                "B {budget}, seed {}",
                s.seed
            );
        }
        assert_ne!(first, draw(&lab, &mut cache), "new data, new pixels");
        // another theme on the same data and size: the cached colourings are rebuilt
        let dark = ChartStyle::dark();
        let draw_dark = |lab: &Lab, cache: &mut AttentionCache| draw_in(lab, &dark, cache);
        let light = draw(&lab, &mut cache);
        let themed = draw_dark(&lab, &mut cache);
        assert_ne!(light, themed);
        assert_eq!(themed, draw_dark(&lab, &mut AttentionCache::default()));
    }

    #[test]
    fn histogram_bins_everything() {
        let ((lo, hi), c) = histogram(&[0.0, 1.0, 2.0, 3.0, f32::NAN], 3);
        assert_eq!((lo, hi), (0.0, 3.0));
        assert_eq!(c, vec![1, 1, 2]);
        let ((lo, hi), c) = histogram(&[5.0; 4], 2);
        assert!(lo < 5.0 && hi > 5.0);
        assert_eq!(c.iter().sum::<u32>(), 4);
        assert_eq!(histogram(&[], 4).1, vec![0; 4]);
    }

    #[test]
    fn byte_units() {
        assert_eq!(byte_unit(0), ("B", 1.0));
        assert_eq!(byte_unit(1023), ("B", 1.0));
        assert_eq!(byte_unit(1024), ("KiB", 1024.0));
        assert_eq!(byte_unit(128 << 10), ("KiB", 1024.0));
        assert_eq!(byte_unit(4 << 30), ("GiB", (1u64 << 30) as f64));
        assert_eq!(byte_unit(3 << 40), ("TiB", (1u64 << 40) as f64));
    }

    #[test]
    fn budget_bars_count_their_axis_in_binary_units() {
        let lab = Lab::new(Settings::default()).expect("lab");
        let (l, style) = (Labels::default(), ChartStyle::light());
        for (model, unit) in [(false, "(KiB)"), (true, "(GiB)")] {
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, (700, 200)).into_drawing_area();
                budget_bar(&root, &lab, &l, &style, model).expect("drawn");
            }
            assert!(svg.contains(unit), "model {model}: {unit} missing");
            // (no tick in exponent notation, as "1.0e9" was)
            let exponent = svg.split('>').any(|t| {
                let t = t.split('<').next().unwrap_or("");
                t.contains('e')
                    && t.chars()
                        .all(|c| c.is_ascii_digit() || c == '.' || c == 'e')
            });
            assert!(!exponent, "model {model}: a tick in exponent notation");
        }
    }

    #[test]
    fn bytes_texts() {
        assert_eq!(bytes_text(512), "512 B");
        assert_eq!(bytes_text(2048), "2.0 KiB");
        assert_eq!(bytes_text(3 << 20), "3.00 MiB");
        assert_eq!(bytes_text(5 << 30), "5.00 GiB");
        // Exact ties round up, like the page's `toFixed` (9,472 B = 9.25 KiB).
        assert_eq!(bytes_text(9472), "9.3 KiB");
        assert_eq!(bytes_text(9216), "9.0 KiB");
        assert_eq!(bytes_text((1 << 20) + (1 << 20) / 8), "1.13 MiB"); // 1.125
        assert_eq!(bytes_text(1023 * 1024 + 1000), "1024.0 KiB"); // as toFixed(1) shows it
    }

    #[test]
    fn the_histogram_and_formulas_name_the_group_they_show() {
        let mut l = Labels::default();
        for (k, v) in [
            ("chart.group.channel", "channel {index}"),
            (
                "chart.group.channel-run",
                "channel {index}, tokens {from}-{to}",
            ),
            ("chart.group.token", "token {index}"),
            (
                "chart.group.token-run",
                "token {index}, channels {from}-{to}",
            ),
            ("chart.group.tensor", "the whole tensor"),
        ] {
            l.0.insert(k.into(), v.into());
        }
        let named = |granularity, group: usize, channel| {
            let lab = Lab::new(Settings {
                tokens: 64,
                channels: 8,
                budget: 16,
                granularity,
                group,
                channel: Some(channel),
                ..Settings::default()
            })
            .unwrap();
            let q = &lab.figures().quant;
            (group_name(&q.group, &l), lab.shown_group_values().len())
        };
        use crate::quant::Granularity::*;
        assert_eq!(named(PerChannel, 0, 5), ("channel 5".into(), 64));
        assert_eq!(
            named(PerChannel, 16, 5),
            ("channel 5, tokens 0-15".into(), 16)
        );
        assert_eq!(named(PerToken, 0, 5), ("token 0".into(), 8));
        assert_eq!(named(PerToken, 4, 5), ("token 0, channels 4-7".into(), 4));
        assert_eq!(named(PerTensor, 0, 5), ("the whole tensor".into(), 64 * 8));
    }

    #[test]
    fn every_chart_renders_to_svg() {
        let lab = Lab::new(Settings {
            tokens: 64,
            steps: 16,
            channels: 8,
            budget: 16,
            recent: 4,
            window: 4,
            future: 4,
            ..Settings::default()
        })
        .unwrap();
        let mut l = Labels::default();
        l.0.insert("chart.hist.title".into(), "Values of {group}".into());
        l.0.insert("chart.group.channel".into(), "channel {index}".into());
        let style = ChartStyle::light();
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (400, 200)).into_drawing_area();
            quant_histogram(&root, &lab, &l, &style).unwrap();
        }
        assert!(svg.contains(&format!(
            "Values of channel {}",
            lab.figures().quant.channel
        )));
        fn svg_of(f: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>)) -> String {
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, (400, 200)).into_drawing_area();
                f(&root);
            }
            svg
        }
        for (key, svg) in [
            (
                "chart.groups.title",
                svg_of(|r| {
                    group_errors(r, &lab, &l, &style).unwrap();
                }),
            ),
            (
                "chart.rows.title",
                svg_of(|r| {
                    row_errors(r, &lab, &l, &style).unwrap();
                }),
            ),
            (
                "chart.scores.title.h2o",
                svg_of(|r| {
                    score_bars(r, &lab, &l, &style).unwrap();
                }),
            ),
            (
                "chart.strip.title",
                svg_of(|r| {
                    token_strip(r, &lab, &l, &style).unwrap();
                }),
            ),
            (
                "chart.mass.title",
                svg_of(|r| {
                    mass_retained(r, &lab, &l, &style).unwrap();
                }),
            ),
            (
                "chart.tradeoff.title",
                svg_of(|r| {
                    tradeoff(r, &lab, &l, &style).unwrap();
                }),
            ),
            (
                "chart.strips.title",
                svg_of(|r| {
                    policy_strips(r, &lab, &l, &style).unwrap();
                }),
            ),
        ] {
            // a missing label shows its key: visible, never a crash
            assert!(svg.contains(key), "{key} missing");
            if key == "chart.strips.title" {
                for p in [
                    "policy.short.h2o-sum",
                    "policy.short.tova",
                    "policy.short.oracle",
                ] {
                    assert!(svg.contains(p), "{p} row missing");
                }
            }
        }
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (400, 200)).into_drawing_area();
            let p =
                attention_heatmap(&root, &lab, &l, &style, &mut AttentionCache::default()).unwrap();
            assert_eq!(p.rgba.len(), (p.rect.w * p.rect.h * 4) as usize);
            let p = error_heatmap(&root, &lab, &l, &style).unwrap();
            assert_eq!(p.rgba.len(), (p.rect.w * p.rect.h * 4) as usize);
            budget_bar(&root, &lab, &l, &style, true).unwrap();
        }
        assert!(svg.contains("Llama-3-8B") || svg.contains("chart.budget.title.model"));
    }
}
