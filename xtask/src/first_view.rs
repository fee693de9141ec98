//! The default view drawn ahead: `dist/index.html` carries the default view's figures and its
//! first screen's two budget charts (SVG, per language and theme), computed natively by
//! [`kvlab::first_view`], so a first visit shows them before the WebAssembly module has started
//! (`www/main.js`, `showFirstView`).
//!
//! The charts' texts are the page's own: [`chart_labels`] reads them from `www/i18n.js` as
//! `chartLabels` there picks them.

use crate::Result;
use kvlab::render::Labels;
use std::collections::HashMap;
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
    let source = std::fs::read_to_string(i18n)
        .map_err(|e| format!("cannot read {}: {e}", i18n.display()))?;
    let texts = parse_texts(&source).map_err(|e| format!("{}: {e}", i18n.display()))?;
    let languages: Vec<(&str, Labels)> = ["en", "zh"]
        .into_iter()
        .map(|lang| (lang, chart_labels(&texts, lang)))
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

/// The texts of `i18n.js`'s `TEXT`: language -> key -> text. Every line of a language's block is
/// a `'key': 'text',` pair (either quote), a comment or blank; anything else is refused, so a
/// change of the file's form fails the build rather than dropping texts.
fn parse_texts(
    source: &str,
) -> std::result::Result<HashMap<String, HashMap<String, String>>, String> {
    let mut out: HashMap<String, HashMap<String, String>> = HashMap::new();
    let mut lang: Option<String> = None;
    let mut in_text = false;
    for (n, line) in source.lines().enumerate() {
        let t = line.trim();
        if !in_text {
            in_text = t == "export const TEXT = {";
            continue;
        }
        match &lang {
            None if t == "};" => return Ok(out),
            None => match t.strip_suffix(": {") {
                Some(name) if name.chars().all(|c| c.is_ascii_lowercase()) => {
                    lang = Some(name.to_string());
                }
                _ if t.is_empty() || t.starts_with("//") => {}
                _ => {
                    return Err(format!(
                        "line {}: expected a language block, found `{t}`",
                        n + 1
                    ))
                }
            },
            Some(_) if t == "}," => lang = None,
            Some(l) => {
                if t.is_empty() || t.starts_with("//") {
                    continue;
                }
                let (key, text) = pair(t).ok_or_else(|| {
                    format!("line {}: expected 'key': 'text', found `{t}`", n + 1)
                })?;
                out.entry(l.clone()).or_default().insert(key, text);
            }
        }
    }
    Err("no complete `export const TEXT = { ... };` found".into())
}

/// `'key': 'text',` (either quote on each side, no escapes) as `(key, text)`.
fn pair(line: &str) -> Option<(String, String)> {
    let (key, rest) = quoted(line)?;
    let rest = rest.strip_prefix(':')?.trim_start();
    let (text, rest) = quoted(rest)?;
    (rest == ",").then_some((key, text))
}

/// A string literal at the start of `s` and what follows it; `None` with a backslash inside.
fn quoted(s: &str) -> Option<(String, &str)> {
    let q = s.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let end = s[1..].find(q)? + 1;
    let text = &s[1..end];
    (!text.contains('\\')).then(|| (text.to_string(), &s[end + 1..]))
}

/// What `chartLabels(lang)` in `i18n.js` gives: every English key starting with `chart.`,
/// `state.`, `budget.` or `policy.`, in `lang` (falling back to English), and `budget.index` as
/// `budget.index.term`.
fn chart_labels(texts: &HashMap<String, HashMap<String, String>>, lang: &str) -> Labels {
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

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "// texts\n\nexport const TEXT = {\n  en: {\n    'title': 'kvlab',\n    // a comment\n    'chart.budget.x': 'bytes',\n    'budget.index.term': \"index (it's)\",\n    'state.sink': 'sink',\n  },\n  zh: {\n    'chart.budget.x': '字节',\n  },\n};\n\nexport function t() {}\n";

    #[test]
    fn reads_both_languages_blocks() {
        let texts = parse_texts(SOURCE).unwrap();
        assert_eq!(texts["en"]["title"], "kvlab");
        assert_eq!(texts["en"]["budget.index.term"], "index (it's)");
        assert_eq!(texts["zh"]["chart.budget.x"], "字节");
        assert_eq!(texts["zh"].len(), 1);
    }

    #[test]
    fn chart_labels_pick_the_prefixed_keys_with_english_fallback() {
        let texts = parse_texts(SOURCE).unwrap();
        let zh = chart_labels(&texts, "zh");
        assert_eq!(zh.get("chart.budget.x"), "字节");
        assert_eq!(zh.get("state.sink"), "sink", "falls back to English");
        assert_eq!(zh.get("budget.index"), "index (it's)");
        assert!(!zh.0.contains_key("title"), "only chart keys");
    }

    #[test]
    fn a_line_of_another_form_is_refused_with_its_number() {
        let bad = SOURCE.replace("'title': 'kvlab',", "'title': `kvlab`,");
        let e = parse_texts(&bad).unwrap_err();
        assert!(e.starts_with("line 5:"), "{e}");
        let escaped = SOURCE.replace("'title': 'kvlab',", "'title': 'kv\\'lab',");
        assert!(parse_texts(&escaped).unwrap_err().starts_with("line 5:"));
        assert!(parse_texts("const X = 1;").is_err());
    }

    #[test]
    fn the_pages_own_texts_parse() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../www/i18n.js");
        let texts = parse_texts(&std::fs::read_to_string(path).unwrap()).unwrap();
        let (en, zh) = (chart_labels(&texts, "en"), chart_labels(&texts, "zh"));
        assert_eq!(en.get("chart.budget.title.data"), "M_KV,final on this data");
        assert_ne!(
            zh.get("chart.budget.title.data"),
            en.get("chart.budget.title.data")
        );
        assert_eq!(en.0.len(), zh.0.len());
    }

    #[test]
    fn script_safe_json_cannot_close_its_element() {
        let s = script_safe(r#"{"svg":"<svg></svg><!-- x -->"}"#);
        assert!(!s.contains('<'));
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back["svg"], "<svg></svg><!-- x -->");
    }
}
