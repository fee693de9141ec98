//! `cargo xtask bench`: the performance issue's benchmarks, one command (see benches/README.md).
//!
//! ```text
//! cargo xtask bench [all]          page, model, core, wasm
//! cargo xtask bench page [ARGS]    dist, serve it on a free port, `node benches/page.mjs ARGS`
//! cargo xtask bench model [ARGS]   the same with `node benches/model.mjs ARGS` (the real model:
//!                                  run, section 5 on a control change, its texts and tables)
//! cargo xtask bench core           `python3 benches/numpy_compare.py --runs 3` (kernels vs numpy,
//!                                  kvlab built for the baseline target, then again with
//!                                  `--target-cpu native`), then `cargo bench --bench core --
//!                                  --lab-only` (page update path)
//! cargo xtask bench wasm [ARGS]    the same kernels in wasm in headless Chromium against native:
//!                                  builds benches/kernels/ for wasm32 (scalar, simd128), times
//!                                  the native kernels (`cargo bench --bench core -- --json
//!                                  --no-lab`, unless ARGS give `--native FILE`), then
//!                                  `node benches/wasm.mjs ARGS`
//! ```
//!
//! Figures only: nothing here fails on a missed target (the benchmarks print pass/MISS).

use std::path::PathBuf;
use std::process::{ExitCode, Stdio};

use crate::{pipeline, run_status, serve, show, site, wasm, Result, Workspace};

/// Runs the benchmarks named by `rest` (default: all).
pub fn run(ws: &Workspace, rest: &[String]) -> Result<ExitCode> {
    let (what, args) = match rest.split_first() {
        None => ("all", &[][..]),
        Some((w, args)) => (w.as_str(), args),
    };
    match what {
        "all" if args.is_empty() => {
            page(ws, "benches/page.mjs", &[])?;
            page(ws, "benches/model.mjs", &[])?;
            core(ws)?;
            wasm_kernels(ws, &[])?;
        }
        "page" => page(ws, "benches/page.mjs", args)?,
        "model" => page(ws, "benches/model.mjs", args)?,
        "core" if args.is_empty() => core(ws)?,
        "wasm" => wasm_kernels(ws, args)?,
        // (not in "all": it takes a minute of both cores and a release build of candle)
        "train" => crate::train::bench(ws, args)?,
        other => {
            return Err(format!(
                "unknown `bench` arguments `{other} {}`: use `bench [all]`, `bench page [ARGS for \
                 benches/page.mjs]`, `bench model [ARGS for benches/model.mjs]`, `bench core`, `bench wasm [ARGS for benches/wasm.mjs]` or `bench train [--steps N] [--threads T]`",
                args.join(" ")
            )
            .into())
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// dist, served on a free port, driven by `script` (benches/page.mjs or benches/model.mjs) in
/// headless Chromium.
fn page(ws: &Workspace, script: &str, args: &[String]) -> Result<()> {
    site::dist(ws)?;
    let chromium = browser_setup(ws)?;
    let server = serve::start(&ws.dist(), "/", 0, true)?;
    let url = server.url("/");
    println!("xtask: serving dist/ at {url}");
    let result = run_status(
        ws.command("node")
            .arg(script)
            .args(args)
            .env("KVLAB_URL", &url)
            .env("KVLAB_CHROMIUM", &chromium)
            .env("KVLAB_DIST", ws.dist()),
    );
    server.stop();
    result
}

/// What the benchmark scripts need (node packages, Chromium), set up as `cargo xtask test` does;
/// the Chromium found, for `KVLAB_CHROMIUM`.
fn browser_setup(ws: &Workspace) -> Result<PathBuf> {
    pipeline::ensure_node_packages(ws)?;
    Ok(pipeline::ensure_chromium()?)
}

/// The kernels in wasm (benches/kernels/, scalar and simd128) in headless Chromium, against the
/// same kernels natively: benches/wasm.mjs.
fn wasm_kernels(ws: &Workspace, args: &[String]) -> Result<()> {
    let out = ws.target().join("bench-wasm");
    wasm::build_bench(ws, &out)?;
    let chromium = browser_setup(ws)?;
    let mut script_args = vec![
        "benches/wasm.mjs".to_string(),
        "--pkg".to_string(),
        out.display().to_string(),
    ];
    // The arguments are checked before the native timing, which can take minutes.
    run_status(
        ws.command("node")
            .args(&script_args)
            .args(args)
            .arg("--check"),
    )?;
    if !args.iter().any(|a| a == "--native") {
        let native = out.join("native.json");
        println!(
            "xtask: timing the native kernels: `cargo bench --bench core -- --json --no-lab` into \
             {} (a first build of the benchmark takes minutes: release, fat LTO)",
            native.display()
        );
        let mut cmd = ws.cargo();
        cmd.args(["bench", "--bench", "core", "--", "--json", "--no-lab"])
            .stderr(Stdio::inherit());
        let output = cmd
            .output()
            .map_err(|e| format!("cannot run `{}`: {e}", show(&cmd)))?;
        if !output.status.success() {
            return Err(format!("`{}` failed ({})", show(&cmd), output.status).into());
        }
        std::fs::write(&native, &output.stdout)
            .map_err(|e| format!("cannot write {}: {e}", native.display()))?;
        script_args.extend(["--native".to_string(), native.display().to_string()]);
    }
    script_args.extend(args.iter().cloned());
    run_status(
        ws.command("node")
            .args(&script_args)
            .env("KVLAB_CHROMIUM", &chromium),
    )
}

/// Native kernels against numpy, then the page's update path natively.
fn core(ws: &Workspace) -> Result<()> {
    let python = std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into());
    let has_numpy = ws
        .command(&python)
        .args(["-c", "import numpy"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if has_numpy {
        run_status(
            ws.command(&python)
                .args(["benches/numpy_compare.py", "--runs", "3"]),
        )?;
        println!(
            "xtask: kernels vs numpy again, kvlab built for this CPU (-C target-cpu=native, \
             as numpy picks AVX2/AVX-512 at run time)"
        );
        run_status(ws.command(&python).args([
            "benches/numpy_compare.py",
            "--runs",
            "3",
            "--target-cpu",
            "native",
        ]))?;
    } else {
        println!(
            "xtask: skipping benches/numpy_compare.py: numpy is not installed \
             (`pip install numpy`); running the native kernels alone"
        );
        run_status(
            ws.cargo()
                .args(["bench", "--bench", "core", "--", "--no-lab"]),
        )?;
    }
    run_status(
        ws.cargo()
            .args(["bench", "--bench", "core", "--", "--lab-only"]),
    )
}
