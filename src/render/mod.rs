//! From a [`Lab`] to its charts, one file per page section ([`budget`], [`quant`], [`select`],
//! [`compare`]): each holds its section's [`Chart`] kinds, how each is fed from the lab
//! (histogram bins, display transforms, state arrays, budget terms) and its drawing, generic
//! over any plotters backend, of a plain view struct (testable without a lab). A new chart is a
//! variant, its adapter and its drawing in its section's file, a canvas in `index.html` and its
//! texts in `www/i18n/`.
//!
//! The browser calls these with `CanvasBackend`; the tests call them with `SVGBackend`. Texts
//! come from a [`Labels`] map the page fills in its language; a missing key shows the key.
//! Heatmaps come back as [`Pixels`] for the caller to blit inside the frame the chart drew.
//! The shared pieces (layout, style, heatmap buffers, downsampling) are in [`crate::chart`].

pub mod budget;
pub mod compare;
pub mod model;
pub mod quant;
pub mod select;

pub use budget::{byte_unit, bytes_text, BudgetChart};
pub use compare::CompareChart;
pub use model::ModelChart;
pub use quant::{group_name, histogram, QuantChart};
pub use select::{quoted_token, AttentionCache, SelectChart};

use crate::chart::StateLabels;
use crate::chart::{ChartError, ChartStyle, PixelRect};
use crate::lab::Lab;
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

/// A chart of the page: a typed value, one section's chart each, so that a new chart is one more
/// variant in its section's file, which the compiler makes its `match` handle. Its canvas
/// carries [`Chart::name`] (`data-chart`); the page's names are parsed once, where they come in
/// ([`Chart::from_name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chart {
    /// Section 1.
    Budget(BudgetChart),
    /// Section 2.
    Quant(QuantChart),
    /// Section 3.
    Select(SelectChart),
    /// Section 3b.
    Compare(CompareChart),
    /// Section 5.
    Model(ModelChart),
}

impl Chart {
    /// Every chart, in the page's order.
    pub fn all() -> impl Iterator<Item = Chart> {
        let quant = QuantChart::ALL.iter().map(|&c| Chart::Quant(c));
        let select = SelectChart::ALL.iter().map(|&c| Chart::Select(c));
        let compare = CompareChart::ALL.iter().map(|&c| Chart::Compare(c));
        let budget = BudgetChart::ALL.iter().map(|&c| Chart::Budget(c));
        let model = ModelChart::ALL.iter().map(|&c| Chart::Model(c));
        quant
            .chain(select)
            .chain(compare)
            .chain(budget)
            .chain(model)
    }

    /// The name its canvas carries (`data-chart`).
    pub fn name(self) -> &'static str {
        match self {
            Chart::Budget(c) => c.name(),
            Chart::Quant(c) => c.name(),
            Chart::Select(c) => c.name(),
            Chart::Compare(c) => c.name(),
            Chart::Model(c) => c.name(),
        }
    }

    /// The chart whose canvas carries `name`.
    pub fn from_name(name: &str) -> Option<Chart> {
        Chart::all().find(|c| c.name() == name)
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
    match chart {
        Chart::Budget(c) => budget::draw(root, lab, c, labels, style),
        Chart::Quant(c) => quant::draw(root, lab, c, labels, style),
        Chart::Select(c) => select::draw(root, lab, c, labels, style, attn_cache),
        Chart::Compare(c) => compare::draw(root, lab, c, labels, style),
        Chart::Model(c) => model::draw(root, lab, c, labels, style),
    }
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
        let states = select::states(&lab);
        assert_eq!(
            select::token_labels(&lab, &states),
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
            select::draw_scores(&root, &lab, &Labels::default(), &ChartStyle::light()).unwrap();
        }
        assert!(svg.contains("‘ cat’") && svg.contains("‘⏎’"), "{svg}");
    }

    /// The page's own files, `www/i18n/{en,zh}.json`.
    fn page_files() -> [(&'static str, &'static str); 2] {
        [
            ("en", include_str!("../../www/i18n/en.json")),
            ("zh", include_str!("../../www/i18n/zh.json")),
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

    /// The page's canvases (`data-chart` in `index.html`) are the engine's charts, both ways: a
    /// variant left out of its section's `ALL` would only fail when the page loads ("unknown
    /// chart"), and a chart without a canvas would never be drawn.
    #[test]
    fn every_canvas_of_the_page_is_a_chart_and_every_chart_has_one() {
        let html = include_str!("../../www/index.html");
        let mut canvases: Vec<&str> = html
            .split("<canvas data-chart=\"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .collect();
        canvases.sort_unstable();
        let mut charts: Vec<&str> = Chart::all().map(Chart::name).collect();
        charts.sort_unstable();
        assert_eq!(canvases, charts);
    }

    #[test]
    fn charts_are_named_once() {
        let names: Vec<&str> = Chart::all().map(Chart::name).collect();
        for c in Chart::all() {
            assert_eq!(Chart::from_name(c.name()), Some(c));
            assert_eq!(
                names.iter().filter(|n| **n == c.name()).count(),
                1,
                "{}",
                c.name()
            );
        }
        assert_eq!(Chart::from_name(""), None);
        assert_eq!(Chart::from_name("Hist"), None);
        assert_eq!(
            Chart::from_name("budget-model"),
            Some(Chart::Budget(BudgetChart::Model))
        );
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
            select::draw_attn(&root, lab, &l, style, cache)
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
                budget::draw_budget(&root, &lab, &l, &style, model).expect("drawn");
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
            quant::draw_hist(&root, &lab, &l, &style).unwrap();
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
                    quant::draw_groups(r, &lab, &l, &style).unwrap();
                }),
            ),
            (
                "chart.rows.title",
                svg_of(|r| {
                    quant::draw_rows(r, &lab, &l, &style).unwrap();
                }),
            ),
            (
                "chart.scores.title.h2o",
                svg_of(|r| {
                    select::draw_scores(r, &lab, &l, &style).unwrap();
                }),
            ),
            (
                "chart.strip.title",
                svg_of(|r| {
                    select::draw_strip(r, &lab, &l, &style).unwrap();
                }),
            ),
            (
                "chart.mass.title",
                svg_of(|r| {
                    select::draw_mass(r, &lab, &l, &style).unwrap();
                }),
            ),
            (
                "chart.tradeoff.title",
                svg_of(|r| {
                    compare::draw_tradeoff(r, &lab, &l, &style).unwrap();
                }),
            ),
            (
                "chart.strips.title",
                svg_of(|r| {
                    compare::draw_strips(r, &lab, &l, &style).unwrap();
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
                select::draw_attn(&root, &lab, &l, &style, &mut AttentionCache::default()).unwrap();
            assert_eq!(p.rgba.len(), (p.rect.w * p.rect.h * 4) as usize);
            let p = quant::draw_errmap(&root, &lab, &l, &style).unwrap();
            assert_eq!(p.rgba.len(), (p.rect.w * p.rect.h * 4) as usize);
            budget::draw_budget(&root, &lab, &l, &style, true).unwrap();
        }
        assert!(svg.contains("Llama-3-8B") || svg.contains("chart.budget.title.model"));
    }
}
