//! The default view, computed and drawn when the site is built (native only).
//!
//! A first visit opens the default view. Its numbers and the two budget charts of the first
//! screen do not depend on anything the browser knows, so `cargo xtask dist` computes them
//! natively with the same [`Lab`] the page's module runs, draws the charts with plotters'
//! `SVGBackend` (the same chart functions the page draws on a canvas), and writes the result
//! into `index.html`. The page shows it at once, before the WebAssembly module has started,
//! and the engine's own view replaces it when it is ready: the engine computes the same
//! figures (a browser test checks every figure the page writes, in both languages).
//!
//! The object written is what the engine's `init` returns for an empty query (`settings`,
//! `warnings`, `presets`, `figures`, `query`), plus `charts[lang][theme][chart]` (SVG text) and
//! `chartSize` (the CSS pixels they were drawn at).

use crate::chart::{ChartError, ChartStyle};
use crate::lab::{Lab, LabError};
use crate::render::{self, BudgetChart, Chart, Labels};
use crate::state::{ModelPreset, Settings};
use plotters::prelude::*;
use serde_json::{json, Map, Value};

/// The default view with its charts drawn for each `(language, labels)` in `languages`, in
/// light and dark, at `size` CSS pixels.
pub fn first_view(languages: &[(&str, Labels)], size: (u32, u32)) -> Result<Value, FirstViewError> {
    let settings = Settings::default();
    let lab = Lab::new(settings.clone())?;
    let mut charts = Map::new();
    for (lang, labels) in languages {
        let mut themes = Map::new();
        for (theme, style) in [("light", ChartStyle::light()), ("dark", ChartStyle::dark())] {
            let mut drawn = Map::new();
            for &chart in BudgetChart::ALL {
                drawn.insert(
                    chart.name().into(),
                    budget_svg(&lab, labels, &style, chart, size)?.into(),
                );
            }
            themes.insert(theme.into(), Value::Object(drawn));
        }
        charts.insert((*lang).into(), Value::Object(themes));
    }
    let to_value =
        |v: serde_json::Result<Value>| v.map_err(|e| FirstViewError::Json(e.to_string()));
    Ok(json!({
        "settings": to_value(serde_json::to_value(&settings))?,
        "warnings": [],
        "presets": to_value(serde_json::to_value(ModelPreset::all()))?,
        "figures": to_value(serde_json::to_value(lab.figures()))?,
        "query": settings.to_query(),
        "charts": charts,
        "chartSize": [size.0, size.1],
    }))
}

/// A budget chart of `lab` as SVG text.
pub fn budget_svg(
    lab: &Lab,
    labels: &Labels,
    style: &ChartStyle,
    chart: BudgetChart,
    size: (u32, u32),
) -> Result<String, ChartError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        render::draw(
            &root,
            lab,
            &mut Default::default(),
            Chart::Budget(chart),
            labels,
            style,
        )?;
        root.present()
            .map_err(|e| ChartError::Draw(e.to_string()))?;
    }
    // plotters ends every element with a line break, inside `<text>` too; SVG drops line breaks
    // there (xml:space="default") and ignores them between elements, so they are not sent.
    Ok(page_font_sizes(&svg).replace('\n', ""))
}

/// plotters' `SVGBackend` writes every font size divided by 1.24; the page's canvases draw text
/// at the style's size. The first-screen charts are shown where the canvases will be, so their
/// text is put back at the style's size.
fn page_font_sizes(svg: &str) -> String {
    const ATTR: &str = "font-size=\"";
    let mut out = String::with_capacity(svg.len());
    let mut rest = svg;
    while let Some(at) = rest.find(ATTR) {
        let (head, tail) = rest.split_at(at + ATTR.len());
        out.push_str(head);
        let end = tail.find('"').unwrap_or(tail.len());
        match tail[..end].parse::<f64>() {
            Ok(px) => out.push_str(&format!("{}", (px * 1.24 * 100.0).round() / 100.0)),
            Err(_) => out.push_str(&tail[..end]),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Why the first view could not be made (a bug: the defaults are always valid).
#[derive(Debug, thiserror::Error)]
pub enum FirstViewError {
    /// The lab refused the default settings.
    #[error("the default view could not be computed: {0}")]
    Lab(#[from] LabError),
    /// A chart could not be drawn.
    #[error("a first-screen chart could not be drawn: {0}")]
    Chart(#[from] ChartError),
    /// A value could not be converted to JSON.
    #[error("the first view could not be written as JSON: {0}")]
    Json(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        Labels(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect::<HashMap<_, _>>(),
        )
    }

    #[test]
    fn holds_the_default_views_figures_and_a_chart_per_language_theme_and_name() {
        let en = labels(&[("chart.budget.title.data", "M_KV,final on this data")]);
        let zh = labels(&[("chart.budget.title.data", "当前数据上的 M_KV,final")]);
        let v = first_view(&[("en", en), ("zh", zh)], (500, 180)).unwrap();
        let lab = Lab::new(Settings::default()).unwrap();
        assert_eq!(v["figures"], serde_json::to_value(lab.figures()).unwrap());
        assert_eq!(v["settings"]["tokens"], Settings::default().tokens);
        assert_eq!(v["query"], Settings::default().to_query());
        assert_eq!(v["chartSize"], json!([500, 180]));
        let presets = v["presets"].as_array().unwrap();
        assert_eq!(presets.len(), crate::budget::ModelConfig::presets().len());
        assert!(presets
            .iter()
            .all(|p| p["slug"].is_string() && p["name"].is_string()));
        for (lang, title) in [
            ("en", "M_KV,final on this data"),
            ("zh", "当前数据上的 M_KV,final"),
        ] {
            for theme in ["light", "dark"] {
                for name in ["budget-data", "budget-model"] {
                    let svg = v["charts"][lang][theme][name].as_str().unwrap();
                    assert!(svg.starts_with("<svg") && svg.contains("viewBox=\"0 0 500 180\""));
                    // The data's chart carries its title in the language it was drawn for.
                    assert_eq!(
                        svg.contains(title),
                        name == "budget-data",
                        "{lang} {theme} {name}"
                    );
                }
            }
        }
        let light = v["charts"]["en"]["light"]["budget-data"].as_str().unwrap();
        let dark = v["charts"]["en"]["dark"]["budget-data"].as_str().unwrap();
        assert_ne!(light, dark, "the dark theme draws in other colours");
    }

    #[test]
    fn text_is_at_the_styles_font_size_as_on_the_pages_canvas() {
        let lab = Lab::new(Settings::default()).unwrap();
        let style = ChartStyle::light();
        let svg = budget_svg(
            &lab,
            &Labels::default(),
            &style,
            BudgetChart::Data,
            (600, 200),
        )
        .unwrap();
        let sizes: Vec<f64> = svg
            .split("font-size=\"")
            .skip(1)
            .map(|t| t[..t.find('"').unwrap()].parse().unwrap())
            .collect();
        assert!(!sizes.is_empty());
        // Every text is at one of the style's font sizes (plotters' SVG would write them / 1.24).
        let styled: Vec<f64> = [0.8, 0.85, 0.9, 1.0, 1.1, 1.2]
            .map(|r| style.font_px(r))
            .to_vec();
        for px in &sizes {
            assert!(
                styled.iter().any(|s| (s - px).abs() < 0.01),
                "font-size {px} is not one of the style's {styled:?}"
            );
        }
        assert!(sizes
            .iter()
            .any(|px| (px - style.font_px(1.0)).abs() < 0.01));
    }

    #[test]
    fn font_sizes_are_rewritten_and_nothing_else() {
        let svg = r#"<text font-size="10" x="1">a</text><text font-size="x">b</text>"#;
        assert_eq!(
            page_font_sizes(svg),
            r#"<text font-size="12.4" x="1">a</text><text font-size="x">b</text>"#
        );
    }

    #[test]
    fn the_models_chart_names_the_default_model() {
        let l = labels(&[("chart.budget.title.model", "M_KV,final on {model}")]);
        let lab = Lab::new(Settings::default()).unwrap();
        let svg = budget_svg(
            &lab,
            &l,
            &ChartStyle::light(),
            BudgetChart::Model,
            (600, 200),
        )
        .unwrap();
        let model = &lab.figures().budget.model_name;
        assert!(
            svg.contains(&format!(">M_KV,final on {model}</text>")),
            "{svg}"
        );
        assert!(!svg.contains('\n'), "no line break is sent");
    }
}
