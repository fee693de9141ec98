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

/// One of the wasm builds the page ships.
struct Flavour {
    /// Shown in the output.
    name: &'static str,
    /// The package built.
    package: &'static str,
    /// The `.wasm` file's stem (the package's lib name).
    artifact: &'static str,
    /// Folder of its bindings: under `www/` for the page's modules, under the benchmark's output
    /// folder for [`BENCH_FLAVOURS`].
    pkg: &'static str,
    /// Its own target folder under the workspace's (so the two builds never evict each other's
    /// cache), or `None` for the workspace's.
    target_sub: Option<&'static str>,
    /// `CARGO_ENCODED_RUSTFLAGS` for it (applies to the wasm artifacts only, as `--target` is
    /// given), or `None`.
    rustflags: Option<&'static str>,
    /// The release profile's `opt-level` for this build, when not the profile's own.
    opt_level: Option<&'static str>,
    /// More `--config` settings for this build.
    configs: &'static [&'static str],
}

/// The page's module as a scalar build (`www/pkg/`, every browser with WebAssembly) and as a SIMD
/// build (`www/pkg-simd/`, compiled with simd128, which every current browser has), and the upload
/// module (`www/pkg-upload/`, the `upload/` crate: the file readers, fetched on the first upload).
/// The page loads the SIMD build where `WebAssembly.validate` accepts a SIMD module
/// (`www/client.js`); both compute bit-identical results (a browser test checks the figures and
/// data fingerprints). The upload module only reads files, so one scalar build serves all.
const FLAVOURS: [Flavour; 4] = [
    Flavour {
        name: "scalar",
        package: "kvlab",
        artifact: "kvlab",
        pkg: "pkg",
        target_sub: None,
        rustflags: None,
        opt_level: None,
        configs: &[],
    },
    Flavour {
        name: "simd128",
        package: "kvlab",
        artifact: "kvlab",
        pkg: "pkg-simd",
        target_sub: Some("wasm-simd"),
        rustflags: Some("-Ctarget-feature=+simd128"),
        opt_level: None,
        configs: &[],
    },
    Flavour {
        name: "upload module",
        package: "kvlab-upload",
        artifact: "kvlab_upload",
        pkg: PKG_ON_DEMAND,
        // (its own folder: kvlab without `page` would overwrite the page build's kvlab, whose
        // cdylib artifacts carry no hash, and each build would then recompile it)
        target_sub: Some("wasm-upload"),
        rustflags: None,
        // Size over speed for the readers: they run once per file, and `z` makes what the page
        // downloads for them smaller. The model's kernels are the core's and run on every
        // control change: the core at `3` (rustc vectorises no loop at `s` or `z`).
        opt_level: Some("z"),
        configs: UPLOAD_CONFIGS,
    },
    Flavour {
        name: "upload module, simd128",
        package: "kvlab-upload",
        artifact: "kvlab_upload",
        pkg: PKG_ON_DEMAND_SIMD,
        target_sub: Some("wasm-upload-simd"),
        rustflags: Some("-Ctarget-feature=+simd128"),
        opt_level: Some("z"),
        configs: UPLOAD_CONFIGS,
    },
];

/// The upload module's own settings: the core (the model's forward pass, the quantizer, the
/// policies) optimised for speed in a module otherwise optimised for size.
const UPLOAD_CONFIGS: &[&str] = &["profile.release.package.kvlab-core.opt-level=3"];

/// The upload module's simd128 build, which browsers with SIMD fetch instead of
/// [`PKG_ON_DEMAND`] (the model runs twice as fast).
pub const PKG_ON_DEMAND_SIMD: &str = "pkg-upload-simd";

/// The bindings folder of the module the page fetches only when needed (on the first upload).
pub const PKG_ON_DEMAND: &str = "pkg-upload";

/// Builds the wasm32 release modules ([`FLAVOURS`]), generates their bindings into `www/pkg*/`
/// (`cargo xtask build` then prints the sizes of `www/`, `cargo xtask dist` those of `dist/`).
pub fn build(ws: &Workspace) -> Result<()> {
    ensure_target()?;
    let started = Instant::now();
    for flavour in &FLAVOURS {
        build_flavour(ws, flavour, &ws.www().join(flavour.pkg))?;
    }
    println!(
        "xtask: build done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The kernel benchmark's modules (`benches/kernels/`, timed by `benches/wasm.mjs`): the same
/// two builds as the page's module, scalar and simd128, each with the page's release profile.
const BENCH_FLAVOURS: [Flavour; 2] = [
    Flavour {
        name: "kernel benchmark, scalar",
        package: "kvlab-bench-kernels",
        artifact: "kvlab_bench_kernels",
        pkg: "pkg",
        target_sub: Some("wasm-bench"),
        rustflags: None,
        opt_level: None,
        configs: &[],
    },
    Flavour {
        name: "kernel benchmark, simd128",
        package: "kvlab-bench-kernels",
        artifact: "kvlab_bench_kernels",
        pkg: "pkg-simd",
        target_sub: Some("wasm-bench-simd"),
        rustflags: Some("-Ctarget-feature=+simd128"),
        opt_level: None,
        configs: &[],
    },
];

/// Builds the kernel benchmark's modules ([`BENCH_FLAVOURS`]) and their bindings into
/// `out/pkg/` and `out/pkg-simd/`.
pub fn build_bench(ws: &Workspace, out: &Path) -> Result<()> {
    ensure_target()?;
    for flavour in &BENCH_FLAVOURS {
        build_flavour(ws, flavour, &out.join(flavour.pkg))?;
    }
    Ok(())
}

fn build_flavour(ws: &Workspace, flavour: &Flavour, pkg: &Path) -> Result<()> {
    println!(
        "xtask: building {} for {TARGET} (release, {})",
        flavour.package, flavour.name
    );
    let target = match flavour.target_sub {
        Some(sub) => ws.target().join(sub),
        None => ws.target(),
    };
    let mut cmd = ws.cargo();
    cmd.args([
        "build",
        "--release",
        "--target",
        TARGET,
        "-p",
        flavour.package,
        "--lib",
        // (one codegen unit for the readers too, as for every crate of the page: the
        // workspace gives kvlab-io 16 for the native builds, see Cargo.toml)
        "--config",
        "profile.release.package.kvlab-io.codegen-units=1",
        "--target-dir",
    ])
    .arg(&target);
    for config in flavour.configs {
        cmd.args(["--config", config]);
    }
    match flavour.rustflags {
        Some(flags) => cmd.env("CARGO_ENCODED_RUSTFLAGS", flags),
        None => cmd.env_remove("CARGO_ENCODED_RUSTFLAGS"),
    };
    match flavour.opt_level {
        Some(level) => cmd.env("CARGO_PROFILE_RELEASE_OPT_LEVEL", level),
        None => cmd.env_remove("CARGO_PROFILE_RELEASE_OPT_LEVEL"),
    };
    run_status(&mut cmd)?;
    let wasm = target
        .join(TARGET)
        .join("release")
        .join(format!("{}.wasm", flavour.artifact));
    if !wasm.is_file() {
        return Err(format!("the build succeeded but {} is missing", wasm.display()).into());
    }
    println!(
        "xtask: generating --target web bindings into {}",
        pkg.display()
    );
    if pkg.exists() {
        std::fs::remove_dir_all(pkg).map_err(|e| format!("cannot clear {}: {e}", pkg.display()))?;
    }
    std::fs::create_dir_all(pkg).map_err(|e| format!("cannot create {}: {e}", pkg.display()))?;
    Bindgen::new()
        .input_path(&wasm)
        .web(true)
        .map_err(|e| format!("wasm-bindgen: {e:#}"))?
        .typescript(false)
        .omit_default_module_path(false)
        .remove_name_section(true)
        .remove_producers_section(true)
        .generate(pkg)
        .map_err(|e| format!("wasm-bindgen could not generate bindings: {e:#}"))?;
    let module = pkg.join(format!("{}_bg.wasm", flavour.artifact));
    let bytes = std::fs::read(&module).map_err(|e| format!("{}: {e}", module.display()))?;
    let stripped = strip_custom_sections(&bytes, &["target_features"])
        .ok_or_else(|| format!("{}: not a WebAssembly module", module.display()))?;
    std::fs::write(&module, stripped).map_err(|e| format!("{}: {e}", module.display()))?;
    Ok(())
}

/// `module` without its custom sections named in `names`: metadata for tools that engines
/// ignore (LLVM's `target_features`: 150 bytes the page would download at start). `None`
/// when `module` is not a well-formed sequence of sections.
pub fn strip_custom_sections(module: &[u8], names: &[&str]) -> Option<Vec<u8>> {
    fn leb(b: &[u8], mut i: usize) -> Option<(usize, usize)> {
        let (mut v, mut shift) = (0usize, 0u32);
        loop {
            let x = *b.get(i)?;
            i += 1;
            v |= usize::from(x & 0x7f).checked_shl(shift)?;
            if x < 0x80 {
                return Some((v, i));
            }
            shift += 7;
            if shift > 28 {
                return None;
            }
        }
    }
    if module.get(..4)? != b"\0asm" {
        return None;
    }
    let mut out = module.get(..8)?.to_vec();
    let mut i = 8;
    while i < module.len() {
        let start = i;
        let id = module[i];
        let (size, body) = leb(module, i + 1)?;
        let end = body.checked_add(size)?;
        let section = module.get(start..end)?;
        let drop = id == 0 && {
            let (n, at) = leb(module, body)?;
            names
                .iter()
                .any(|name| module.get(at..at + n) == Some(name.as_bytes()))
        };
        if !drop {
            out.extend_from_slice(section);
        }
        i = end;
    }
    Some(out)
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

/// Raw and gzip sizes of each wasm build and of the whole page as one browser downloads it:
/// every html, js and css file under `www` plus one build's folder (`pkg*/`), gzipped one by one
/// as a server would send them (the larger build counts); then the same plus the module fetched
/// on the first upload ([`PKG_ON_DEMAND`]).
pub fn size_report(www: &Path) -> Result<String> {
    Ok(Sizes::of(www)?.report())
}

/// The performance issue's size targets, gzip bytes (its KB read as decimal, the stricter
/// reading): the wasm a page loads at start, and the whole page at start (html, js, wasm and
/// css: what every visit downloads).
pub const WASM_BUDGET: usize = 250_000;
/// See [`WASM_BUDGET`].
pub const PAGE_BUDGET: usize = 400_000;
/// The module fetched on the first upload or the first run of the model ([`PKG_ON_DEMAND`] or
/// [`PKG_ON_DEMAND_SIMD`]: the file readers, the model's forward pass and section 5's
/// evaluation of the compressed cache, wasm and glue), gzip bytes: a visit that uploads a file
/// or runs the model downloads it once, on top of the page. Its own budget, as each module
/// fetched on demand has (the page's start is what every visit pays), set a little above what
/// its parts measured (benches/README.md, "The model under compression"), so that it catches
/// growth; splitting the model into a module of its own would spare an upload the model's code
/// and the model the readers'. Raised from 200,000 with section 5's needle test (the learner's
/// fact, every cache's answer, KIVI's, the accuracy chart's cases: 9 kB gzip, measured in
/// benches/README.md, "The needle test").
pub const ON_DEMAND_BUDGET: usize = 210_000;

/// Sizes of the page's files as [`size_report`] counts them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sizes {
    /// Per build folder loaded at start (`pkg/`, `pkg-simd/`): wasm raw, wasm gzip, all raw,
    /// all gzip, files.
    builds: Vec<(String, [usize; 5])>,
    /// The shared html/js/css files: raw, gzip, files.
    shared: [usize; 3],
    /// The module fetched on demand ([`PKG_ON_DEMAND`]), as `builds`' entries.
    on_demand: Option<[usize; 5]>,
}

impl Sizes {
    /// Reads and gzips every html, js, css and wasm file under `www`.
    pub fn of(www: &Path) -> Result<Sizes> {
        let mut files = Vec::new();
        collect_files(www, &mut files)?;
        files.sort();
        let page_exts = ["html", "js", "mjs", "wasm", "css"];
        // (build folder or "" for the shared files) -> (wasm raw, wasm gz, all raw, all gz, files)
        let mut parts: std::collections::BTreeMap<String, [usize; 5]> = Default::default();
        for file in &files {
            let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("");
            if !page_exts.contains(&ext) {
                continue;
            }
            let rel = file.strip_prefix(www).unwrap_or(file);
            let first = rel
                .components()
                .next()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .unwrap_or_default();
            let key = if first.starts_with("pkg") && rel.components().count() > 1 {
                first
            } else {
                String::new()
            };
            let bytes =
                std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let gz = gzip_len(&bytes)?;
            let part = parts.entry(key).or_default();
            if ext == "wasm" {
                part[0] += bytes.len();
                part[1] += gz;
            }
            part[2] += bytes.len();
            part[3] += gz;
            part[4] += 1;
        }
        let shared = parts.remove("").unwrap_or_default();
        // (the on-demand module's two builds: a browser fetches one, the larger counts)
        let on_demand = [PKG_ON_DEMAND, PKG_ON_DEMAND_SIMD]
            .iter()
            .filter_map(|p| parts.remove(*p))
            .max_by_key(|p| p[3]);
        Ok(Sizes {
            builds: parts.into_iter().collect(),
            shared: [shared[2], shared[3], shared[4]],
            on_demand,
        })
    }

    /// The page at start as one browser loads it: the shared files plus the larger build
    /// (raw, gzip, files).
    pub fn page_at_start(&self) -> [usize; 3] {
        let mut page = self.shared;
        for (_, p) in &self.builds {
            if self.shared[1] + p[3] >= page[1] {
                page = [
                    self.shared[0] + p[2],
                    self.shared[1] + p[3],
                    self.shared[2] + p[4],
                ];
            }
        }
        page
    }

    /// [`Sizes::page_at_start`] plus the module fetched on demand.
    pub fn page_with_on_demand(&self) -> [usize; 3] {
        let [raw, gz, n] = self.page_at_start();
        let p = self.on_demand.unwrap_or_default();
        [raw + p[2], gz + p[3], n + p[4]]
    }

    /// The largest wasm (gzip) a browser loads at start.
    pub fn wasm_at_start(&self) -> usize {
        self.builds.iter().map(|(_, p)| p[1]).max().unwrap_or(0)
    }

    /// The lines `cargo xtask build` prints.
    pub fn report(&self) -> String {
        let mut out = String::new();
        for (name, p) in &self.builds {
            out.push_str(&format!(
                "size: wasm ({name}/, loaded at start) {} raw, {} gzip\n",
                kib(p[0]),
                kib(p[1])
            ));
        }
        let page = self.page_at_start();
        out.push_str(&format!(
            "size: page at start ({} html/js/wasm/css files a browser loads) {} raw, {} gzip\n",
            page[2],
            kib(page[0]),
            kib(page[1])
        ));
        if let Some(p) = self.on_demand {
            out.push_str(&format!(
                "size: wasm ({PKG_ON_DEMAND}/ or {PKG_ON_DEMAND_SIMD}/, the larger, fetched on the first upload or model run) {} raw, {} gzip\n",
                kib(p[0]),
                kib(p[1])
            ));
            let all = self.page_with_on_demand();
            out.push_str(&format!(
                "size: page with the upload module ({} files) {} raw, {} gzip\n",
                all[2],
                kib(all[0]),
                kib(all[1])
            ));
        }
        out
    }

    /// The size targets, each as `(what, measured gzip bytes, budget, within)`.
    pub fn budget_checks(&self) -> Vec<(&'static str, usize, usize, bool)> {
        let wasm = self.wasm_at_start();
        let page = self.page_at_start()[1];
        let upload = self.on_demand.map_or(0, |p| p[3]);
        vec![
            (
                "wasm loaded at start",
                wasm,
                WASM_BUDGET,
                wasm <= WASM_BUDGET,
            ),
            (
                "the page at start (html, js, wasm, css)",
                page,
                PAGE_BUDGET,
                page <= PAGE_BUDGET,
            ),
            (
                "the upload module (fetched on the first upload)",
                upload,
                ON_DEMAND_BUDGET,
                upload <= ON_DEMAND_BUDGET,
            ),
        ]
    }
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
    #[test]
    fn custom_sections_named_are_stripped_and_the_rest_kept_byte_for_byte() {
        // header, a type section (id 1, 1 byte), a custom "target_features" (id 0), a custom
        // "keep" and a code section (id 10, 2 bytes)
        let mut m = b"\0asm\x01\0\0\0".to_vec();
        m.extend([1, 1, 0]);
        m.extend([0, 16, 15]);
        m.extend(b"target_features");
        m.extend([0, 6, 4]);
        m.extend(b"keep\x07");
        m.extend([10, 2, 0, 0]);
        let s = super::strip_custom_sections(&m, &["target_features"]).unwrap();
        let mut want = b"\0asm\x01\0\0\0".to_vec();
        want.extend([1, 1, 0, 0, 6, 4]);
        want.extend(b"keep\x07");
        want.extend([10, 2, 0, 0]);
        assert_eq!(s, want);
        assert_eq!(
            super::strip_custom_sections(&m[..m.len() - 1], &[]),
            None,
            "cut short"
        );
        assert_eq!(super::strip_custom_sections(b"nope\x01\0\0\0", &[]), None);
    }

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
        std::fs::create_dir_all(dir.join("pkg-simd")).unwrap();
        std::fs::write(dir.join("pkg-simd/m.wasm"), vec![0u8; 1200]).unwrap();
        std::fs::create_dir_all(dir.join(PKG_ON_DEMAND)).unwrap();
        std::fs::write(dir.join(PKG_ON_DEMAND).join("u.wasm"), vec![0u8; 700]).unwrap();
        let report = size_report(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            report.contains("wasm (pkg/, loaded at start) 1000 B"),
            "{report}"
        );
        assert!(
            report.contains("wasm (pkg-simd/, loaded at start) 1200 B"),
            "{report}"
        );
        assert!(
            report.contains(
                "wasm (pkg-upload/ or pkg-upload-simd/, the larger, fetched on the first upload or model run) 700 B"
            ),
            "{report}"
        );
        // one build per browser: the shared html plus the larger build, not both; then plus
        // the module fetched on demand
        assert!(
            report.contains("page at start (2 html/js/wasm/css files a browser loads) 1300 B"),
            "{report}"
        );
        assert!(
            report.contains("page with the upload module (3 files) 2000 B"),
            "{report}"
        );
    }

    #[test]
    fn budget_checks_compare_gzip_sizes_with_the_targets() {
        let sizes = |wasm_gz: usize, upload_gz: usize| Sizes {
            builds: vec![
                ("pkg".into(), [0, wasm_gz - 1000, 0, wasm_gz - 1000, 1]),
                ("pkg-simd".into(), [0, wasm_gz, 0, wasm_gz, 1]),
            ],
            shared: [0, 50_000, 3],
            on_demand: Some([0, upload_gz, 0, upload_gz, 1]),
        };
        let within = |s: &Sizes| s.budget_checks().iter().map(|c| c.3).collect::<Vec<_>>();
        assert_eq!(within(&sizes(WASM_BUDGET, 100_000)), [true, true, true]);
        // the larger build counts
        assert_eq!(within(&sizes(WASM_BUDGET + 1, 90_000)), [false, true, true]);
        // the page at start is the shared files and that build; the upload module on its own
        let over = Sizes {
            shared: [0, PAGE_BUDGET - 240_000 + 1, 3],
            ..sizes(240_000, ON_DEMAND_BUDGET + 1)
        };
        assert_eq!(within(&over), [true, false, false]);
        assert_eq!(
            within(&sizes(240_000, ON_DEMAND_BUDGET)),
            [true, true, true]
        );
    }
}
