//! Comment and indentation stripping for the page's JavaScript in `dist/`.
//!
//! The sources in `www/` are written to be read (about a third of their bytes are comments);
//! the browser needs none of it. [`strip_js`] removes comments, leading indentation and blank
//! lines, and nothing else: names, strings, template literals, regular expressions and line
//! breaks stay as written, so the code that runs is the code in `www/`, line for line (minus
//! the comment lines), and automatic semicolon insertion sees the same line breaks. It is a
//! small lexer, not a parser; it knows the lexical grammar our files use and refuses (with the
//! line) what it cannot follow, such as an unterminated string, rather than guess.

/// `src` without comments, indentation and blank lines (see the module docs).
pub fn strip_js(src: &str) -> Result<String, String> {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    // Template literals being read, innermost last: the `{` depth of code inside their current
    // `${ ... }` (0 while reading the literal's text).
    let mut templates: Vec<usize> = Vec::new();
    // Whether a `/` here starts a regular expression (true) or divides (false).
    let mut regex_ok = true;
    let mut at_line_start = true;
    let line_of = |i: usize| src[..i].bytes().filter(|&c| c == b'\n').count() + 1;
    while i < b.len() {
        let c = b[i];
        // Inside a template literal's text.
        if templates.last() == Some(&0) {
            let start = i;
            loop {
                match b.get(i) {
                    None => return Err(format!("line {}: unterminated template", line_of(start))),
                    Some(b'\\') => i += 2,
                    Some(b'`') => {
                        i += 1;
                        templates.pop();
                        regex_ok = false;
                        break;
                    }
                    Some(b'$') if b.get(i + 1) == Some(&b'{') => {
                        i += 2;
                        *templates.last_mut().expect("in a template") = 1;
                        regex_ok = true;
                        break;
                    }
                    Some(_) => i += 1,
                }
            }
            out.push_str(&src[start..i.min(b.len())]);
            at_line_start = false;
            continue;
        }
        if at_line_start && (c == b' ' || c == b'\t') {
            i += 1;
            continue;
        }
        match c {
            b'\n' | b'\r' => {
                if !at_line_start {
                    out.push('\n');
                }
                at_line_start = true;
                i += 1;
            }
            b' ' | b'\t' => {
                out.push(c as char);
                i += 1;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                // (the line break stays: the next iteration writes it)
                trim_end_spaces(&mut out);
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = src[i + 2..]
                    .find("*/")
                    .ok_or_else(|| format!("line {}: unterminated comment", line_of(i)))?
                    + i
                    + 4;
                // A comment holding a line break is a line break to the grammar.
                if src[i..end].contains('\n') {
                    trim_end_spaces(&mut out);
                    if !at_line_start {
                        out.push('\n');
                    }
                    at_line_start = true;
                } else if !at_line_start && !out.ends_with(' ') {
                    out.push(' ');
                }
                i = end;
                // (one space where the comment was, not the two around it)
                if at_line_start || out.ends_with(' ') {
                    while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                        i += 1;
                    }
                }
            }
            b'/' if regex_ok => {
                let start = i;
                i += 1;
                let mut class = false;
                loop {
                    match b.get(i) {
                        None | Some(b'\n') => {
                            return Err(format!("line {}: unterminated regex", line_of(start)))
                        }
                        Some(b'\\') => i += 2,
                        Some(b'[') => {
                            class = true;
                            i += 1;
                        }
                        Some(b']') => {
                            class = false;
                            i += 1;
                        }
                        Some(b'/') if !class => {
                            i += 1;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
                while i < b.len() && (b[i] as char).is_ascii_alphabetic() {
                    i += 1; // flags
                }
                out.push_str(&src[start..i]);
                regex_ok = false;
                at_line_start = false;
            }
            b'\'' | b'"' => {
                let start = i;
                i += 1;
                loop {
                    match b.get(i) {
                        None | Some(b'\n') => {
                            return Err(format!("line {}: unterminated string", line_of(start)))
                        }
                        Some(b'\\') => i += 2,
                        Some(&q) if q == c => {
                            i += 1;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
                out.push_str(&src[start..i]);
                regex_ok = false;
                at_line_start = false;
            }
            b'`' => {
                templates.push(0);
                out.push('`');
                i += 1;
                at_line_start = false;
            }
            b'{' | b'}' => {
                if let Some(depth) = templates.last_mut() {
                    if c == b'{' {
                        *depth += 1;
                    } else {
                        *depth -= 1; // 0: back in the template's text
                    }
                }
                out.push(c as char);
                // `}` ends a block (a regex may follow) or an object (a division may): blocks
                // are the usual case in our code, and `} / x` never appears.
                regex_ok = true;
                i += 1;
                at_line_start = false;
            }
            _ if c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80 => {
                let start = i;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric()
                        || b[i] == b'_'
                        || b[i] == b'$'
                        || b[i] >= 0x80)
                {
                    i += 1;
                }
                let word = &src[start..i];
                out.push_str(word);
                // After a value a `/` divides; after these keywords an expression starts.
                regex_ok = matches!(
                    word,
                    "return"
                        | "typeof"
                        | "instanceof"
                        | "in"
                        | "of"
                        | "new"
                        | "delete"
                        | "void"
                        | "throw"
                        | "case"
                        | "do"
                        | "else"
                        | "yield"
                        | "await"
                );
                at_line_start = false;
            }
            _ => {
                // Punctuation (one byte; multi-byte operators are runs of these).
                out.push(c as char);
                regex_ok = !matches!(c, b')' | b']');
                i += 1;
                at_line_start = false;
            }
        }
    }
    if !templates.is_empty() {
        return Err("unterminated template at the end".into());
    }
    trim_end_spaces(&mut out);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

fn trim_end_spaces(out: &mut String) {
    while out.ends_with(' ') || out.ends_with('\t') {
        out.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::strip_js;

    #[test]
    fn comments_indentation_and_blank_lines_go() {
        let src =
            "// head\n/**\n * Doc.\n */\nfunction f(a) {\n  // inside\n  return a; // tail\n\n}\n";
        assert_eq!(strip_js(src).unwrap(), "function f(a) {\nreturn a;\n}\n");
    }

    #[test]
    fn strings_templates_and_regexes_keep_what_looks_like_comments() {
        let src = concat!(
            "const u = 'http://x'; const v = \"/* no */\";\n",
            "const t = `a // b\n  /* c */ ${x /* gone */ + `in ${y}`} // d`;\n",
            "const r = /\\/\\/[/*]x/g.test(s); const q = a / b / c; // e\n",
            "if (ok) return /x\\//.exec(s);\n",
        );
        let out = strip_js(src).unwrap();
        assert_eq!(
            out,
            concat!(
                "const u = 'http://x'; const v = \"/* no */\";\n",
                "const t = `a // b\n  /* c */ ${x + `in ${y}`} // d`;\n",
                "const r = /\\/\\/[/*]x/g.test(s); const q = a / b / c;\n",
                "if (ok) return /x\\//.exec(s);\n",
            )
        );
    }

    #[test]
    fn a_block_comment_with_a_line_break_stays_a_line_break() {
        // `a` then `b` on the next line: two statements (automatic semicolon insertion).
        assert_eq!(strip_js("x = a /*\n*/ b\n").unwrap(), "x = a\nb\n");
        assert_eq!(
            strip_js("x = a /* one line */ + b\n").unwrap(),
            "x = a + b\n"
        );
    }

    #[test]
    fn nested_braces_in_template_code_return_to_the_text() {
        let src = "s = `${ {a: 1}.a } // kept`; // gone\n";
        assert_eq!(strip_js(src).unwrap(), "s = `${ {a: 1}.a } // kept`;\n");
    }

    #[test]
    fn what_it_cannot_follow_is_refused_with_the_line() {
        for (src, what) in [
            ("a\n'open\n", "line 2: unterminated string"),
            ("/* open", "line 1: unterminated comment"),
            ("x = `open", "line 1: unterminated template"),
            ("\n\nx = /open\n", "line 3: unterminated regex"),
        ] {
            assert_eq!(strip_js(src).unwrap_err(), what, "{src:?}");
        }
    }

    #[test]
    fn the_pages_sources_lose_their_comments_only() {
        // Every js file of www/ (not the generated pkg*/) is followed to its end, loses
        // bytes, keeps no comment line, and a second pass changes nothing. (That the stripped
        // code still works is what the browser tests check: they run dist/.)
        let www = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../www");
        let mut seen = 0;
        for entry in std::fs::read_dir(&www).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "js") {
                let src = std::fs::read_to_string(&path).unwrap();
                let out = strip_js(&src).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert!(out.len() < src.len(), "{}", path.display());
                // Nothing is added, and stripping again changes nothing.
                assert_eq!(strip_js(&out).unwrap(), out, "{}", path.display());
                assert!(!out.lines().any(|l| l.trim_start().starts_with("//")));
                seen += 1;
            }
        }
        assert!(seen >= 6, "found {seen} js files in www/");
    }
}
