//! `cargo xtask build`: the wasm32 release build, its `--target web` bindings and a size report.
//!
//! The bindings come from `wasm-bindgen-cli-support`, pinned with `=` to the `wasm-bindgen`
//! version in Cargo.lock: the generated glue and the crate's runtime must match exactly.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use flate2::write::GzEncoder;
use flate2::Compression;
use wasm_bindgen_cli_support::Bindgen;

use crate::{run_status, show, Result, Workspace};

/// The target triple of the browser build.
pub const TARGET: &str = "wasm32-unknown-unknown";

/// Builds the crate for wasm32 (release), generates the bindings into `www/pkg/`, prints sizes.
pub fn build(ws: &Workspace) -> Result<()> {
    ensure_target()?;

    let started = Instant::now();
    println!("xtask: building kvlab for {TARGET} (release)");
    run_status(ws.cargo().args([
        "build",
        "--release",
        "--target",
        TARGET,
        "-p",
        "kvlab",
        "--lib",
    ]))?;
    let wasm = ws.target().join(TARGET).join("release").join("kvlab.wasm");
    if !wasm.is_file() {
        return Err(format!("the build succeeded but {} is missing", wasm.display()).into());
    }

    let pkg = ws.pkg();
    println!(
        "xtask: generating --target web bindings into {}",
        pkg.display()
    );
    if pkg.exists() {
        std::fs::remove_dir_all(&pkg)
            .map_err(|e| format!("cannot clear {}: {e}", pkg.display()))?;
    }
    std::fs::create_dir_all(&pkg).map_err(|e| format!("cannot create {}: {e}", pkg.display()))?;
    Bindgen::new()
        .input_path(&wasm)
        .web(true)
        .map_err(|e| format!("wasm-bindgen: {e:#}"))?
        .typescript(false)
        .omit_default_module_path(false)
        .remove_name_section(true)
        .generate(&pkg)
        .map_err(|e| format!("wasm-bindgen could not generate bindings: {e:#}"))?;
    println!(
        "xtask: build done in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    print!("{}", size_report(&ws.www())?);
    Ok(())
}

/// Adds the wasm32 target with rustup when `rustup target list --installed` lacks it.
///
/// `RUSTUP_AUTO_INSTALL=0` on these machines means a toolchain file would not do it for us.
pub fn ensure_target() -> Result<()> {
    let mut list = Command::new("rustup");
    list.args(["target", "list", "--installed"]);
    let out = match list.output() {
        Ok(out) if out.status.success() => out,
        Ok(out) => {
            return Err(format!(
                "`{}` failed ({}): {}",
                show(&list),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )
            .into())
        }
        Err(e) => {
            println!(
                "xtask: rustup not found ({e}); assuming the {TARGET} target is installed \
                 (add it with your toolchain manager if the build says it is missing)"
            );
            return Ok(());
        }
    };
    let installed = String::from_utf8_lossy(&out.stdout);
    if installed.lines().any(|l| l.trim() == TARGET) {
        return Ok(());
    }
    println!("xtask: the {TARGET} target is missing: running `rustup target add {TARGET}`");
    run_status(Command::new("rustup").args(["target", "add", TARGET]))
}

/// Raw and gzip sizes of the wasm module and of the whole page (every html, js, wasm and css
/// file under `www`, gzipped one by one as a server would send them).
pub fn size_report(www: &Path) -> Result<String> {
    let mut files = Vec::new();
    collect_files(www, &mut files)?;
    files.sort();
    let page_exts = ["html", "js", "mjs", "wasm", "css"];
    let (mut wasm_raw, mut wasm_gz, mut page_raw, mut page_gz, mut n) = (0, 0, 0, 0, 0);
    for file in &files {
        let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !page_exts.contains(&ext) {
            continue;
        }
        let bytes =
            std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let gz = gzip_len(&bytes)?;
        if ext == "wasm" {
            wasm_raw += bytes.len();
            wasm_gz += gz;
        }
        page_raw += bytes.len();
        page_gz += gz;
        n += 1;
    }
    Ok(format!(
        "size: wasm {} raw, {} gzip\nsize: page ({n} html/js/wasm/css files) {} raw, {} gzip\n",
        kib(wasm_raw),
        kib(wasm_gz),
        kib(page_raw),
        kib(page_gz)
    ))
}

fn kib(bytes: usize) -> String {
    format!("{bytes} B ({:.1} KiB)", bytes as f64 / 1024.0)
}

/// Length of `bytes` gzipped at the default level (what a typical static server sends).
pub fn gzip_len(bytes: &[u8]) -> Result<usize> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(bytes)?;
    Ok(enc.finish()?.len())
}

/// Every regular file under `dir`, recursively.
pub fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry?.path();
        if path.is_dir() {
            collect_files(&path, out)?;
        } else if path.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_shrinks_repetitive_data() {
        let data = vec![b'a'; 10_000];
        let n = gzip_len(&data).unwrap();
        assert!(n > 10 && n < 200, "{n}");
    }

    #[test]
    fn size_report_counts_page_files_only() {
        let dir = std::env::temp_dir().join(format!("kvlab-size-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("pkg")).unwrap();
        std::fs::write(dir.join("index.html"), "x".repeat(100)).unwrap();
        std::fs::write(dir.join("pkg/m.wasm"), vec![0u8; 1000]).unwrap();
        std::fs::write(dir.join("notes.txt"), "y".repeat(5000)).unwrap();
        let report = size_report(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(report.contains("wasm 1000 B"), "{report}");
        assert!(
            report.contains("page (2 html/js/wasm/css files) 1100 B"),
            "{report}"
        );
    }
}
