//! The default view drawn ahead: `dist/index.html` carries the default view's figures and its
//! first screen's two budget charts (SVG, per language and theme), computed natively by
//! [`kvlab::first_view`], so a first visit shows them before the WebAssembly module has started
//! (`www/main.js`, `showFirstView`).
//!
//! The charts' texts are the page's own: [`Labels::for_charts`] picks them from
//! `www/i18n/{en,zh}.json` as `chartLabels` in `www/i18n.js` does.

use crate::Result;
use kvlab::render::{read_page_texts, Labels};
use std::path::Path;

/// The CSS size of the budget canvases at the page's widest layout (its `main` is at most 86rem
/// wide). A browser test checks it against the page; at other widths the page scales the charts
/// drawn ahead to fit, or leaves them out when they would be too small to read.
pub const CHART_SIZE: (u32, u32) = (1002, 176);

/// Where the first view goes in `index.html`.
const MARKER: &str = "<!-- first-view -->";

/// Writes the first view into `dist_index` (the assembled `index.html`); returns its size in
/// bytes.
pub fn write(i18n: &Path, dist_index: &Path) -> Result<usize> {
    let texts = read_page_texts(i18n)?;
    let languages: Vec<(&str, Labels)> = ["en", "zh"]
        .into_iter()
        .map(|lang| (lang, Labels::for_charts(&texts, lang)))
        .collect();
    let view = kvlab::first_view::first_view(&languages, CHART_SIZE)?;
    let json = serde_json::to_string(&view)?;
    let block = format!(
        "<script type=\"application/json\" id=\"first-view\">{}</script>",
        script_safe(&json)
    );
    let html = std::fs::read_to_string(dist_index)
        .map_err(|e| format!("cannot read {}: {e}", dist_index.display()))?;
    if html.matches(MARKER).count() != 1 {
        return Err(format!(
            "{} must hold the marker {MARKER} exactly once",
            dist_index.display()
        )
        .into());
    }
    std::fs::write(dist_index, html.replace(MARKER, &block))
        .map_err(|e| format!("cannot write {}: {e}", dist_index.display()))?;
    Ok(block.len())
}

/// JSON text that cannot end its `<script>` element or open a comment: every `<` escaped.
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_safe_json_cannot_close_its_element() {
        let s = script_safe(r#"{"svg":"<svg></svg><!-- x -->"}"#);
        assert!(!s.contains('<'));
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back["svg"], "<svg></svg><!-- x -->");
    }
}
