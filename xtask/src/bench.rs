//! `cargo xtask bench`: the performance issue's benchmarks, one command (see benches/README.md).
//!
//! ```text
//! cargo xtask bench [all]          page + core
//! cargo xtask bench page [ARGS]    dist, serve it on a free port, `node benches/page.mjs ARGS`
//! cargo xtask bench core           `python3 benches/numpy_compare.py --runs 3` (kernels vs numpy,
//!                                  kvlab built for the baseline target, then again with
//!                                  `--target-cpu native`), then `cargo bench --bench core --
//!                                  --lab-only` (page update path)
//! ```
//!
//! Figures only: nothing here fails on a missed target (the benchmarks print pass/MISS).

use std::process::ExitCode;

use crate::{run_status, serve, site, Result, Workspace};

/// Runs the benchmarks named by `rest` (default: all).
pub fn run(ws: &Workspace, rest: &[String]) -> Result<ExitCode> {
    let (what, args) = match rest.split_first() {
        None => ("all", &[][..]),
        Some((w, args)) => (w.as_str(), args),
    };
    match what {
        "all" if args.is_empty() => {
            page(ws, &[])?;
            core(ws)?;
        }
        "page" => page(ws, args)?,
        "core" if args.is_empty() => core(ws)?,
        other => {
            return Err(format!(
                "unknown `bench` arguments `{other} {}`: use `bench [all]`, `bench page [ARGS for \
                 benches/page.mjs]` or `bench core`",
                args.join(" ")
            )
            .into())
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// dist, served on a free port, driven by benches/page.mjs in headless Chromium.
fn page(ws: &Workspace, args: &[String]) -> Result<()> {
    site::dist(ws)?;
    if !ws
        .root
        .join("node_modules/playwright-core/package.json")
        .is_file()
    {
        println!("xtask: node_modules is missing: running `npm ci`");
        run_status(ws.command("npm").arg("ci"))?;
    }
    let server = serve::start(&ws.dist(), "/", 0, true)?;
    let url = server.url("/");
    println!("xtask: serving dist/ at {url}");
    let result = run_status(
        ws.command("node")
            .arg("benches/page.mjs")
            .args(args)
            .env("KVLAB_URL", &url)
            .env("KVLAB_DIST", ws.dist()),
    );
    server.stop();
    result
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
