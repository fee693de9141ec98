//! `cargo xtask dist`: assemble `www/` (with the generated `www/pkg/`, `www/pkg-simd/` and
//! `www/pkg-upload/`) into `dist/`, its JavaScript and CSS minified ([`minify`]), and report
//! the sizes a browser downloads.
//!
//! `dist/` is a plain folder that works from any static host and any sub-path, so every URL in
//! the page must be relative and nothing may come from another origin. [`absolute_urls`] checks
//! our own html, css and js for the usual ways to break that; the browser tests then load the
//! site under a sub-path and fail on any request to another origin.

use crate::first_view;
use crate::wasm::{collect_files, size_report};
use crate::{wasm, Result, Workspace};

/// Builds, then copies `www/` into a fresh `dist/`.
pub fn dist(ws: &Workspace) -> Result<()> {
    wasm::build(ws)?;
    let (www, dist) = (ws.www(), ws.dist());
    write_texts_module(&www)?;
    write_fields_module(&www)?;
    for required in [
        "index.html",
        "pkg/kvlab.js",
        "pkg/kvlab_bg.wasm",
        "pkg-simd/kvlab.js",
        "pkg-simd/kvlab_bg.wasm",
        "pkg-upload/kvlab_upload.js",
        "pkg-upload/kvlab_upload_bg.wasm",
        "pkg-upload-simd/kvlab_upload.js",
        "pkg-upload-simd/kvlab_upload_bg.wasm",
    ] {
        if !www.join(required).is_file() {
            return Err(format!("{} is missing", www.join(required).display()).into());
        }
    }
    let mut files = Vec::new();
    collect_files(&www, &mut files)?;
    // (the texts' sources and their notes: the page loads i18n/text.js, built from them)
    let sources = www.join("i18n");
    files.retain(|f| !f.starts_with(&sources) || f.file_name().is_some_and(|n| n == "text.js"));
    files.sort();
    let mut problems = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&www)?;
        let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("");
        // The generated glue (`pkg*/`) is wasm-bindgen's; it loads its module relative to
        // import.meta.url.
        let generated = rel
            .components()
            .next()
            .is_some_and(|c| c.as_os_str().to_string_lossy().starts_with("pkg"));
        if matches!(ext, "html" | "css" | "js" | "mjs") && !generated {
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            for (line, found) in absolute_urls(&text) {
                problems.push(format!("{}:{line}: {found}", rel.display()));
            }
        }
    }
    if !problems.is_empty() {
        return Err(format!(
            "dist must use relative URLs to its own files only (it may be served from a \
             sub-path, with no other origin); found:\n  {}",
            problems.join("\n  ")
        )
        .into());
    }
    if dist.exists() {
        std::fs::remove_dir_all(&dist)
            .map_err(|e| format!("cannot clear {}: {e}", dist.display()))?;
    }
    for file in &files {
        let to = dist.join(file.strip_prefix(&www)?);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(file, &to)
            .map_err(|e| format!("cannot copy {} to {}: {e}", file.display(), to.display()))?;
    }
    crate::pipeline::ensure_node_packages(ws)?;
    bundle(ws, &dist)?;
    // (what is left after bundling: the entries, the worker, the generated glue, the style)
    let mut shipped = Vec::new();
    collect_files(&dist, &mut shipped)?;
    shipped.sort();
    let scripts: Vec<_> = shipped
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "js" || e == "css"))
        .collect();
    minify(ws, &scripts)?;
    unindent(&dist.join("index.html"))?;
    blank_i18n_defaults(&dist.join("index.html"))?;
    let ahead = first_view::write(&www.join("i18n"), &dist.join("index.html"))?;
    let mut shipped = Vec::new();
    collect_files(&dist, &mut shipped)?;
    println!(
        "xtask: dist assembled: {} files in {} (the page's modules bundled into main.js and \
         engine.js, js and css minified; index.html with the default view drawn ahead, \
         {ahead} B)",
        shipped.len(),
        dist.display()
    );
    print!("{}", size_report(&dist)?);
    Ok(())
}

/// Writes `www/i18n/text.js`, the page's texts as one module (`TEXT` by language, `LOAD_ZH`),
/// from `www/i18n/en.json`, `zh.json` and `load-zh.json`, which Rust reads too. Each must be a
/// JSON object of strings: a broken one stops the build, naming the file.
fn write_texts_module(www: &std::path::Path) -> Result<()> {
    let dir = www.join("i18n");
    let read = |name: &str| -> Result<serde_json::Map<String, serde_json::Value>> {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let map: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some((k, _)) = map.iter().find(|(_, v)| !v.is_string()) {
            return Err(format!("{}: '{k}' is not a string", path.display()).into());
        }
        Ok(map)
    };
    let mut text = serde_json::Map::new();
    text.insert("en".into(), read("en.json")?.into());
    text.insert("zh".into(), read("zh.json")?.into());
    let load_zh = serde_json::Value::Object(read("load-zh.json")?);
    let module = format!(
        "// Generated by `cargo xtask dist` from www/i18n/*.json: edit those.\n\
         export const TEXT = {};\nexport const LOAD_ZH = {};\n",
        serde_json::Value::Object(text),
        load_zh
    );
    write_if_changed(&dir.join("text.js"), &module)
}

/// Writes `www/fields.js`: the rules Rust owns, as the page needs them, from
/// [`kvlab::state::fields`] and the types beside it, so the page keeps no copy of its own:
/// - `FIELDS`: each URL key, whether it is a whole number, its range and step (`min`, `max`,
///   `step`; `auto` when it may be `auto`), and the sections it changes (`null` for the data's
///   keys, which change every section);
/// - `BOUNDS`: the bounds between settings ([`kvlab::state::BOUNDS`]) as numbers (the largest
///   value is `share / v` with `share`, else `times v + plus`), what a message calls them, and
///   whether a value typed past one is used at it and said (`said`: the data's own counts, as a
///   link's is) or sent for the engine to refuse (every other setting);
/// - `SECTIONS` (the page's, [`kvlab::state::Section::PAGE`]), `STAGES` (an update's, in order,
///   [`kvlab::lab::Stage::ALL`]), `COMPARISON_CHARTS` (the charts drawn from the policy
///   comparison), `POLICY_OF` (each method's policy, [`kvlab::state::Method::policy`]) and
///   `SWEPT` (the settings the model's trade-off is measured again for: those that affect
///   [`kvlab::state::Section::ModelTradeoff`], or the data);
/// - `LEAST_BITS`: the fewest bits each scheme takes ([`kvlab::state::least_bits`]), which the
///   bits follow on a scheme change, said as the link parser's repair is;
/// - `METHOD_BOUNDS`: the bounds a method sets ([`kvlab::state::METHOD_BOUNDS`]: StreamingLLM's
///   sinks at most B), which a method switch follows, said beside the setting moved;
/// - `EMBED_KEYS`: the settings a section shown alone depends on besides the data
///   ([`kvlab::state::embed_keys`]), which an embedded section states.
fn write_fields_module(www: &std::path::Path) -> Result<()> {
    use kvlab::quant::Scheme;
    use kvlab::render::{Chart, CompareChart};
    use kvlab::state::{
        embed_keys, least_bits, Affects, Embed, Limit, Method, Rule, Section, BOUNDS, METHOD_BOUNDS,
    };
    use serde_json::{json, Value};
    let mut fields = serde_json::Map::new();
    let mut swept = Vec::new();
    for f in kvlab::state::fields() {
        let numeric = matches!(f.rule, Rule::Int(..) | Rule::Odd(..) | Rule::Numbers(_));
        let sections = match f.affects {
            Affects::Data => Value::Null,
            Affects::Page => json!([]),
            Affects::Only(s) => serde_json::to_value(s)?,
        };
        let mut field = json!({ "numeric": numeric, "sections": sections });
        let range = match f.rule {
            Rule::Int(lo, hi) | Rule::AutoOr(lo, hi) => Some((lo, hi, 1)),
            Rule::Odd(lo, hi) => Some((lo, hi, 2)),
            Rule::Numbers(_) | Rule::Words(_) | Rule::Named | Rule::Model => None,
        };
        if let Some((lo, hi, step)) = range {
            field["min"] = json!(lo);
            field["max"] = json!(hi);
            field["step"] = json!(step);
        }
        if matches!(f.rule, Rule::AutoOr(..)) {
            field["auto"] = json!(true);
        }
        let tradeoff = match f.affects {
            Affects::Data => true,
            Affects::Only(s) => s.contains(&Section::ModelTradeoff),
            Affects::Page => false,
        };
        if tradeoff {
            swept.push(f.key);
        }
        fields.insert(f.key.into(), field);
    }
    let data_keys: Vec<&str> = kvlab::state::fields()
        .into_iter()
        .filter(|f| f.affects == Affects::Data)
        .map(|f| f.key)
        .collect();
    let bounds: Vec<Value> = BOUNDS
        .iter()
        .map(|b| {
            let (times, plus, share) = match b.limit {
                Limit::AtMost => (1, 0, None),
                Limit::Below => (1, -1, None),
                Limit::TwicePlusOne => (2, 1, None),
                Limit::Share(n) => (0, 0, Some(n)),
            };
            let mut v = json!({
                "key": b.key, "by": b.by, "what": b.what,
                "times": times, "plus": plus, "said": data_keys.contains(&b.key),
            });
            if let Some(n) = share {
                v["share"] = json!(n);
            }
            if b.limit == Limit::Below {
                v["below"] = json!(true);
            }
            v
        })
        .collect();
    let stages: Vec<&str> = kvlab::lab::Stage::ALL.iter().map(|s| s.key()).collect();
    let comparison: Vec<&str> = CompareChart::ALL
        .iter()
        .map(|&c| Chart::Compare(c).name())
        .collect();
    let policy_of: serde_json::Map<String, Value> =
        [Method::H2o, Method::Snapkv, Method::Streaming]
            .into_iter()
            .map(|m| {
                Ok((
                    serde_json::to_value(m)?.as_str().unwrap_or("").to_string(),
                    json!(m.policy()),
                ))
            })
            .collect::<Result<_>>()?;
    let least_bits: serde_json::Map<String, Value> = [Scheme::Symmetric, Scheme::Asymmetric]
        .into_iter()
        .map(|scheme| {
            Ok((
                serde_json::to_value(scheme)?
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                json!(least_bits(scheme)),
            ))
        })
        .collect::<Result<_>>()?;
    let method_bounds = METHOD_BOUNDS
        .iter()
        .map(|&(method, key, by)| {
            Ok(json!({ "method": serde_json::to_value(method)?, "key": key, "by": by }))
        })
        .collect::<Result<Vec<Value>>>()?;
    let embed: serde_json::Map<String, Value> = [
        Embed::Budget,
        Embed::Quant,
        Embed::Select,
        Embed::Compare,
        Embed::Together,
        Embed::Model,
    ]
    .into_iter()
    .map(|e| {
        Ok((
            serde_json::to_value(e)?.as_str().unwrap_or("").to_string(),
            json!(embed_keys(e)),
        ))
    })
    .collect::<Result<_>>()?;
    let module = format!(
        "// Generated by `cargo xtask dist` from the table of settings in src/state.rs and the \
         types beside it: edit those.\n\
         export const FIELDS = {};\nexport const BOUNDS = {};\nexport const SECTIONS = {};\n\
         export const STAGES = {};\nexport const COMPARISON_CHARTS = {};\n\
         export const POLICY_OF = {};\nexport const SWEPT = {};\n\
         export const LEAST_BITS = {};\nexport const METHOD_BOUNDS = {};\n\
         export const EMBED_KEYS = {};\n",
        Value::Object(fields),
        Value::Array(bounds),
        serde_json::to_value(Section::PAGE)?,
        json!(stages),
        json!(comparison),
        Value::Object(policy_of),
        json!(swept),
        Value::Object(least_bits),
        Value::Array(method_bounds),
        Value::Object(embed),
    );
    write_if_changed(&www.join("fields.js"), &module)
}

/// Writes `text` to `to` unless it already holds it, so the file's time says when it changed.
fn write_if_changed(to: &std::path::Path, text: &str) -> Result<()> {
    if std::fs::read_to_string(to).ok().as_deref() != Some(text) {
        std::fs::write(to, text).map_err(|e| format!("cannot write {}: {e}", to.display()))?;
    }
    Ok(())
}

/// The modules `dist/` keeps as entries: the page's (`main.js`, with every room it imports)
/// and the engine's (`engine.js`, loaded by the worker, or by the page where it cannot start
/// one). Everything else the page loads comes by URL (the worker, the wasm glue, the model).
const ENTRIES: [&str; 2] = ["main.js", "engine.js"];

/// Joins each of [`ENTRIES`] in `dist` with the modules it imports (esbuild,
/// `xtask/bundle.mjs`), and removes the modules joined: a visit downloads two modules, not
/// forty, and gzip reads each whole. `www/` keeps them apart, one concern a file.
fn bundle(ws: &Workspace, dist: &std::path::Path) -> Result<()> {
    let status = ws
        .command("node")
        .arg(ws.root.join("xtask").join("bundle.mjs"))
        .arg(dist)
        .args(ENTRIES)
        .status()
        .map_err(|e| format!("cannot run node (Node.js 20 or later is needed): {e}"))?;
    if !status.success() {
        return Err(format!("bundling dist/'s modules failed ({status})").into());
    }
    Ok(())
}

/// Minifies `scripts` (the page's and wasm-bindgen's JavaScript, and the style sheet, in
/// `dist/`) in place with terser and csso (`xtask/minify.mjs`): what the browser downloads
/// carries no comments, indentation or long local names.
fn minify(ws: &Workspace, scripts: &[std::path::PathBuf]) -> Result<()> {
    let status = ws
        .command("node")
        .arg(ws.root.join("xtask").join("minify.mjs"))
        .args(scripts)
        .status()
        .map_err(|e| format!("cannot run node (Node.js 20 or later is needed): {e}"))?;
    if !status.success() {
        return Err(format!("minifying dist/'s JavaScript failed ({status})").into());
    }
    Ok(())
}

/// Drops the indentation at the start of each line of an HTML file: whitespace between tags
/// collapses to one space when rendered, and the page has no `<pre>` or `<textarea>`, where it
/// would not (checked: such a page is refused rather than changed).
fn unindent(html: &std::path::Path) -> Result<()> {
    let text = std::fs::read_to_string(html)
        .map_err(|e| format!("cannot read {}: {e}", html.display()))?;
    // (a one-line textarea keeps its text: only lines' starts are trimmed)
    let multiline_textarea = text.match_indices("<textarea").any(|(at, _)| {
        let rest = &text[at..];
        rest.find("</textarea>")
            .is_none_or(|end| rest[..end].contains('\n'))
    });
    if text.contains("<pre") || multiline_textarea {
        return Err(format!(
            "{} has a <pre> or a textarea over several lines, whose indentation would show: \
             unindent cannot be used",
            html.display()
        )
        .into());
    }
    let out: Vec<&str> = text.lines().map(str::trim_start).collect();
    std::fs::write(html, out.join("\n") + "\n")
        .map_err(|e| format!("cannot write {}: {e}", html.display()).into())
}

/// Empties the English text of every element that carries `data-i18n`: `main.js` writes each
/// from `i18n.js` in the page's language before anything is drawn (`applyLanguage`), so the
/// copy in the HTML was sent for nothing (about 0.75 kB gzip). `www/index.html` keeps it, to be
/// read as written.
fn blank_i18n_defaults(html: &std::path::Path) -> Result<()> {
    let text = std::fs::read_to_string(html)
        .map_err(|e| format!("cannot read {}: {e}", html.display()))?;
    std::fs::write(html, without_i18n_defaults(&text))
        .map_err(|e| format!("cannot write {}: {e}", html.display()).into())
}

/// `html` with the text of each `data-i18n` element removed: the text between the end of the
/// opening tag and the element's closing tag, when nothing else (no other tag) is between them.
pub fn without_i18n_defaults(html: &str) -> String {
    const ATTR: &str = " data-i18n=\"";
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(at) = rest.find(ATTR) {
        let Some(close) = rest[at..].find('>').map(|c| at + c + 1) else {
            break;
        };
        out.push_str(&rest[..close]);
        rest = &rest[close..];
        // (a self-closing or void tag, or one whose content holds markup, is left as it is)
        if let Some(lt) = rest.find('<') {
            if rest[lt..].starts_with("</") && !out.ends_with("/>") {
                rest = &rest[lt..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Root-relative or other-origin URLs in html/css/js text, as `(line, snippet)`.
///
/// XML namespace names (`http://www.w3.org/...`) are identifiers, not requests, and are allowed.
pub fn absolute_urls(text: &str) -> Vec<(usize, String)> {
    const PATTERNS: [&str; 12] = [
        "src=\"/",
        "href=\"/",
        "src='/",
        "href='/",
        "url(/",
        "url(\"/",
        "url('/",
        "from \"/",
        "from '/",
        "import(\"/",
        "import('/",
        "//",
    ];
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if PATTERNS.iter().any(|p| line_has(line, p)) {
            found.push((i + 1, line.trim().chars().take(80).collect()));
        }
    }
    found
}

fn line_has(line: &str, pattern: &str) -> bool {
    line.match_indices(pattern).any(|(at, _)| {
        if pattern != "//" {
            return true;
        }
        // Only a scheme-relative or absolute URL counts: `http://`, `https://`, `"//host`.
        let before = &line[..at];
        let is_url = ["http:", "https:", "\"", "'", "("]
            .iter()
            .any(|b| before.ends_with(b));
        is_url && !line[at..].starts_with("//www.w3.org/")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i18n_defaults_are_blanked_and_nothing_else() {
        let html = r#"<p><label for="a" data-i18n="x.a">Tokens T</label><input id="a"> keep
<span data-i18n="x.b">one <b>two</b></span><input data-i18n="x.c"/>after</p>"#;
        assert_eq!(
            without_i18n_defaults(html),
            r#"<p><label for="a" data-i18n="x.a"></label><input id="a"> keep
<span data-i18n="x.b">one <b>two</b></span><input data-i18n="x.c"/>after</p>"#
        );
    }

    #[test]
    fn relative_urls_pass() {
        let ok = r#"<script type="module" src="./main.js"></script>
<link rel="icon" href="favicon.svg">
// a comment with // slashes
import init from './pkg/kvlab.js';
el.setAttribute('xmlns', 'http://www.w3.org/2000/svg');
background: url(./bg.png);"#;
        assert_eq!(absolute_urls(ok), vec![]);
    }

    #[test]
    fn absolute_and_foreign_urls_are_found() {
        for bad in [
            r#"<script src="/main.js"></script>"#,
            r#"<link href='/style.css'>"#,
            r#"<img src="https://example.com/a.png">"#,
            r#"@import url(//fonts.example/x.css);"#,
            r#"import x from "/pkg/kvlab.js";"#,
            r#"fetch("http://127.0.0.1:9/x")"#,
            r#"<script src="//cdn.example/x.js"></script>"#,
        ] {
            assert_eq!(absolute_urls(bad).len(), 1, "{bad}");
        }
    }
}
