//! `cargo xtask test`: every check, in order, each announced and timed.
//!
//! 1. `cargo fmt --all -- --check`
//! 2. `cargo clippy --workspace --all-targets -- -D warnings`, then the same lints for the
//!    wasm32 builds of `kvlab`, `kvlab-upload` and `kvlab-bench-kernels` (the only builds that
//!    compile `src/web/`, `src/js.rs` and the wrappers of `upload/` and `benches/kernels/`)
//! 3. `cargo test --workspace --no-fail-fast` (unit, integration, property and doc tests)
//! 4. the wasm builds (the page's module, scalar and simd128; the upload module) and `dist/`,
//!    then the size budget (issue 6's gzip targets: the wasm at start, every file of the page)
//! 5. the page's unit tests: `node --test tests/unit/` (no browser: the controls' binding and
//!    the update transaction against fakes, on the modules dist generated)
//! 6. Chromium (installed with apt when missing, as root on Debian)
//! 7. node packages (`npm ci` from package-lock.json when node_modules is missing or stale)
//! 8. browser tests: `node --test tests/e2e/` against `dist/` served on a free port under a
//!    sub-path, with the URL in `KVLAB_URL`
//!
//! Before the steps, and again after a failed run, it prints the free disk space where the run
//! writes, with a warning when it is less than a run from a clean clone needs.
//!
//! A failing step does not hide the others: the independent ones still run, a step whose
//! prerequisite failed is reported as failed (never silently skipped), and the run ends with
//! one line `N passed, M failed`, where N and M add up the cargo and node test counts and every
//! failed step without test counts (fmt, clippy, build, setup) adds one failure.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use crate::{run_status, serve, show, site, wasm, Result, Workspace};

/// How long the browser tests may take before they are stopped and counted as failed: a hang's
/// stop, not a speed target, with room for a machine slower than the one that measured them
/// (docs/tests.md); CI's 90 minutes hold it easily.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(1200);

/// [`BROWSER_TIMEOUT`], or `KVLAB_BROWSER_TIMEOUT` seconds where a run sets it: on two cores
/// shared with another build or browser run, the browser tests take longer than on a machine
/// of their own, and a run stopped at the limit says nothing about the tests it did not reach.
fn browser_timeout() -> Duration {
    std::env::var("KVLAB_BROWSER_TIMEOUT")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|&s| s > 0)
        .map_or(BROWSER_TIMEOUT, Duration::from_secs)
}

/// Passed and failed test counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed (node's cancelled tests count here too).
    pub failed: u64,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.passed += o.passed;
        self.failed += o.failed;
    }
}

struct Step {
    name: &'static str,
    seconds: f64,
    outcome: std::result::Result<(), String>,
    counts: Option<Counts>,
}

struct Run {
    steps: Vec<Step>,
    started: Instant,
}

impl Run {
    fn step<T>(
        &mut self,
        name: &'static str,
        f: impl FnOnce() -> std::result::Result<(T, Option<Counts>), String>,
    ) -> Option<T> {
        let n = self.steps.len() + 1;
        println!("\n==> [{n}] {name}");
        let t = Instant::now();
        let (outcome, value, counts) = match f() {
            Ok((v, c)) => (Ok(()), Some(v), c),
            Err(e) => (Err(e), None, None),
        };
        let seconds = t.elapsed().as_secs_f64();
        let failed_tests = counts.is_some_and(|c| c.failed > 0);
        match &outcome {
            Ok(()) if !failed_tests => println!("==> [{n}] {name}: ok ({seconds:.1} s)"),
            Ok(()) => println!("==> [{n}] {name}: FAILED ({seconds:.1} s)"),
            Err(e) => println!("==> [{n}] {name}: FAILED ({seconds:.1} s)\n{e}"),
        }
        self.steps.push(Step {
            name,
            seconds,
            outcome,
            counts,
        });
        value
    }

    /// Records a step that could not run because a step it needs failed.
    fn blocked(&mut self, name: &'static str, because: &str) {
        let n = self.steps.len() + 1;
        println!("\n==> [{n}] {name}: FAILED: not run because {because} failed");
        self.steps.push(Step {
            name,
            seconds: 0.0,
            outcome: Err(format!("not run because {because} failed")),
            counts: None,
        });
    }
}

/// Runs every step and prints the summary; the exit code is non-zero if anything failed.
pub fn test(ws: &Workspace) -> Result<ExitCode> {
    let mut run = Run {
        steps: Vec::new(),
        started: Instant::now(),
    };
    disk_report(ws);

    run.step("format check: cargo fmt --all -- --check", || {
        plain(ws.cargo().args(["fmt", "--all", "--", "--check"]))
    });
    run.step(
        "lint: cargo clippy --workspace --all-targets -- -D warnings (host, then wasm32 for src/web/, src/js.rs, upload/ and benches/kernels/)",
        || {
            // src/web/, src/js.rs and the wrappers of upload/ and benches/kernels/ only compile
            // for wasm32, so the host run alone would never lint them.
            let host = plain(ws.cargo().args([
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ]));
            let wasm = wasm::ensure_target().map_err(|e| e.to_string()).and_then(|()| {
                plain(ws.cargo().args([
                    "clippy",
                    "--target",
                    wasm::TARGET,
                    "-p",
                    "kvlab",
                    "-p",
                    "kvlab-upload",
                    "-p",
                    "kvlab-bench-kernels",
                    "--lib",
                    "--",
                    "-D",
                    "warnings",
                ]))
            });
            match (host, wasm) {
                (Ok(_), Ok(_)) => Ok(((), None)),
                (Err(e), Ok(_)) | (Ok(_), Err(e)) => Err(e),
                (Err(a), Err(b)) => Err(format!("{a}\n{b}")),
            }
        },
    );
    run.step(
        "docs: cargo doc --workspace --no-deps (rustdoc warnings are errors)",
        || {
            plain(
                ws.cargo()
                    .args(["doc", "--workspace", "--no-deps"])
                    .env("RUSTDOCFLAGS", "-D warnings"),
            )
        },
    );
    run.step(
        "native tests: cargo test --workspace --no-fail-fast",
        || {
            counted(
                ws.cargo().args(["test", "--workspace", "--no-fail-fast"]),
                Duration::MAX,
            )
        },
    );
    let dist = run.step("wasm build and dist: cargo xtask dist", || {
        site::dist(ws)
            .map(|()| ((), None))
            .map_err(|e| e.to_string())
    });
    const BUDGET: &str =
        "size budget: wasm at start <= 250 kB, page at start <= 400 kB, upload module (readers, the model and its evaluation) <= 210 kB (gzip)";
    match dist {
        Some(()) => {
            run.step(BUDGET, || size_budget(ws));
        }
        None => run.blocked(BUDGET, "the wasm build and dist"),
    }
    // (the page's own logic without a browser: the generated fields.js and texts are dist's)
    const UNIT: &str = "page unit tests: node --test tests/unit/ (controls, update transaction)";
    match dist {
        Some(()) => {
            run.step(UNIT, || unit_tests(ws));
        }
        None => run.blocked(UNIT, "the wasm build and dist"),
    }
    let chromium = run.step("browser: find or install Chromium", || {
        ensure_chromium().map(|p| (p, None))
    });
    let node = run.step("node packages: npm ci when needed", || {
        ensure_node_packages(ws).map(|()| ((), None))
    });

    const BROWSER: &str = "browser tests: node --test tests/e2e/";
    match (dist, chromium, node) {
        (Some(()), Some(chromium), Some(())) => {
            run.step(BROWSER, || browser_tests(ws, &chromium));
        }
        (None, _, _) => run.blocked(BROWSER, "the wasm build and dist"),
        (_, None, _) => run.blocked(BROWSER, "finding Chromium"),
        (_, _, None) => run.blocked(BROWSER, "installing node packages"),
    }

    let code = summary(&run);
    if code != ExitCode::SUCCESS {
        // A disk that filled up during the run explains many failures at once.
        disk_report(ws);
    }
    Ok(code)
}

/// What a run from a clean clone writes, with room to spare: `target/` (debug, wasm and doc
/// builds) and `node_modules/` came to 2.8 GB on 2026-11-30.
const RUN_WRITES_BYTES: u64 = 4 << 30;

/// Prints the free space where the run writes (the target folder, or the nearest existing
/// folder above it), with a warning when it is less than a run needs: a full disk makes
/// cargo and npm fail midway with `No space left on device`. Reads `df -Pk`; where that is
/// unavailable, says so.
fn disk_report(ws: &Workspace) {
    let target = ws.target();
    let dir = target
        .ancestors()
        .find(|p| p.is_dir())
        .unwrap_or(&ws.root)
        .to_path_buf();
    let free = Command::new("df")
        .arg("-Pk")
        .arg(&dir)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| parse_df_available(&String::from_utf8_lossy(&o.stdout)));
    let Some(free) = free else {
        println!(
            "disk: free space under {} unknown (`df -Pk` gave no answer)",
            dir.display()
        );
        return;
    };
    let gb = |b: u64| b as f64 / f64::from(1u32 << 30);
    println!("disk: {:.1} GB free under {}", gb(free), dir.display());
    if free < RUN_WRITES_BYTES {
        println!(
            "WARNING: a run from a clean clone writes about 3 GB (target/, node_modules/); \
             with {:.1} GB free, builds may fail with `No space left on device`",
            gb(free)
        );
    }
}

/// Available bytes from `df -Pk`'s output: the fourth field (1024-byte blocks) of its second
/// line.
pub fn parse_df_available(out: &str) -> Option<u64> {
    let line = out.lines().nth(1)?;
    let kib: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The performance issue's size targets on `dist/`, one test each (sizes are deterministic, so
/// unlike timings they can be checked on every run).
fn size_budget(ws: &Workspace) -> std::result::Result<((), Option<Counts>), String> {
    let sizes = wasm::Sizes::of(&ws.dist()).map_err(|e| e.to_string())?;
    let mut counts = Counts::default();
    for (what, measured, budget, within) in sizes.budget_checks() {
        let verdict = if within { "ok" } else { "OVER" };
        println!("size budget: {what}: {measured} B gzip of {budget} B: {verdict}");
        if within {
            counts.passed += 1;
        } else {
            counts.failed += 1;
        }
    }
    Ok(((), Some(counts)))
}

fn summary(run: &Run) -> ExitCode {
    println!(
        "\n==> summary ({:.1} s in all)",
        run.started.elapsed().as_secs_f64()
    );
    let mut total = Counts::default();
    for (i, s) in run.steps.iter().enumerate() {
        let ok = s.outcome.is_ok() && s.counts.is_none_or(|c| c.failed == 0);
        let status = if ok { "ok" } else { "FAILED" };
        let counts = match s.counts {
            Some(c) => format!(" ({} passed, {} failed)", c.passed, c.failed),
            None => String::new(),
        };
        println!(
            "  [{}] {status:<6} {:>6.1} s  {}{counts}",
            i + 1,
            s.seconds,
            s.name
        );
        match (s.counts, &s.outcome) {
            (Some(c), _) => total += c,
            (None, Err(_)) => total.failed += 1,
            (None, Ok(())) => {}
        }
    }
    let all_ok = run.steps.iter().all(|s| s.outcome.is_ok()) && total.failed == 0;
    println!("{} passed, {} failed", total.passed, total.failed);
    if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// A step without test counts: it passes when the command exits 0.
fn plain(cmd: &mut Command) -> std::result::Result<((), Option<Counts>), String> {
    run_status(cmd)
        .map(|()| ((), None))
        .map_err(|e| e.to_string())
}

/// Runs a test command, echoing its stdout and adding up the counts in it. A non-zero exit
/// with no failure counted (a crash, a build error) counts as one failure; so does a run in
/// which no test ran at all.
fn counted(
    cmd: &mut Command,
    timeout: Duration,
) -> std::result::Result<((), Option<Counts>), String> {
    let shown = show(cmd);
    cmd.stdout(Stdio::piped());
    #[cfg(unix)]
    {
        // Its own process group, so a timeout can stop the whole tree (node and Chromium).
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run `{shown}`: {e}"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| format!("`{shown}`: no stdout"))?;
    let reader = std::thread::spawn(move || {
        let mut counts = Counts::default();
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            println!("{line}");
            if let Some(c) = parse_cargo_result(&line) {
                counts += c;
            }
            if let Some(c) = parse_node_tap(&line) {
                counts += c;
            }
        }
        counts
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if started.elapsed() > timeout => {
                stop_group(child.id());
                let _ = child.wait();
                break Err(format!(
                    "`{shown}` did not finish in {} s and was stopped",
                    timeout.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => break Err(format!("waiting for `{shown}`: {e}")),
        }
    };
    let mut counts = reader
        .join()
        .map_err(|_| format!("`{shown}`: output reader panicked"))?;
    let status = match status {
        Ok(status) => status,
        Err(e) => {
            println!("{e}: counted as one failure");
            counts.failed += 1;
            return Ok(((), Some(counts)));
        }
    };
    if counts.passed + counts.failed == 0 {
        return Err(if status.success() {
            format!("`{shown}` ran no test")
        } else {
            format!("`{shown}` failed ({status}) before reporting any test result")
        });
    }
    if !status.success() && counts.failed == 0 {
        println!("`{shown}` failed ({status}) without a failing test: counted as one failure");
        counts.failed = 1;
    }
    Ok(((), Some(counts)))
}

#[cfg(unix)]
fn stop_group(pid: u32) {
    // `process_group(0)` made the child the leader of a group with its own pid.
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .status();
}

#[cfg(not(unix))]
fn stop_group(_pid: u32) {}

/// Counts from a libtest summary line:
/// `test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; ...`.
pub fn parse_cargo_result(line: &str) -> Option<Counts> {
    let rest = line.trim().strip_prefix("test result:")?;
    let mut counts = Counts::default();
    let mut seen = false;
    for part in rest.split(['.', ';']) {
        let mut words = part.split_whitespace();
        if let (Some(n), Some(what)) = (words.next(), words.next()) {
            let Ok(n) = n.parse::<u64>() else { continue };
            match what {
                "passed" => {
                    counts.passed = n;
                    seen = true;
                }
                "failed" => counts.failed = n,
                _ => {}
            }
        }
    }
    seen.then_some(counts)
}

/// Counts from node's TAP reporter summary: `# pass 3`, `# fail 1`, `# cancelled 1`.
pub fn parse_node_tap(line: &str) -> Option<Counts> {
    let rest = line.trim().strip_prefix("# ")?;
    let (what, n) = rest.split_once(' ')?;
    let n: u64 = n.trim().parse().ok()?;
    match what {
        "pass" => Some(Counts {
            passed: n,
            failed: 0,
        }),
        "fail" | "cancelled" => Some(Counts {
            passed: 0,
            failed: n,
        }),
        _ => None,
    }
}

/// Where Chromium is: `KVLAB_CHROMIUM`, `/usr/bin/chromium`, or `chromium` on PATH.
fn find_chromium() -> std::result::Result<Option<PathBuf>, String> {
    if let Some(p) = std::env::var_os("KVLAB_CHROMIUM") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(Some(p))
        } else {
            Err(format!("KVLAB_CHROMIUM={} is not a file", p.display()))
        };
    }
    let usr = Path::new("/usr/bin/chromium");
    if usr.is_file() {
        return Ok(Some(usr.to_path_buf()));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    Ok(std::env::split_paths(&path)
        .map(|d| d.join("chromium"))
        .find(|p| p.is_file()))
}

/// Chromium's path ([`find_chromium`]), installed with apt first when it is missing (as root on
/// Debian).
pub fn ensure_chromium() -> std::result::Result<PathBuf, String> {
    if let Some(p) = find_chromium()? {
        println!("Chromium: {}", p.display());
        return Ok(p);
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    let debian = Path::new("/etc/debian_version").is_file();
    if !(root && debian) {
        return Err(
            "Chromium is needed for the browser tests and was not found (/usr/bin/chromium or \
             `chromium` on PATH). Install the package `chromium` (Debian/Ubuntu: \
             `sudo apt-get install chromium`), or set KVLAB_CHROMIUM to a Chromium binary."
                .into(),
        );
    }
    println!("Chromium is missing: installing the Debian package `chromium` with apt-get");
    for args in [
        &["update"][..],
        &["install", "-y", "--no-install-recommends", "chromium"][..],
    ] {
        run_status(
            Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive"),
        )
        .map_err(|e| format!("installing Chromium failed: {e}"))?;
    }
    find_chromium()?
        .ok_or_else(|| "apt-get installed `chromium` but no chromium binary was found".into())
        .inspect(|p| println!("Chromium: {}", p.display()))
}

/// `npm ci` when node_modules is missing, or older than package-lock.json.
pub fn ensure_node_packages(ws: &Workspace) -> std::result::Result<(), String> {
    for (tool, hint) in [("node", "Node.js 20 or later"), ("npm", "npm")] {
        match Command::new(tool).arg("--version").output() {
            Ok(o) if o.status.success() => {
                println!("{tool} {}", String::from_utf8_lossy(&o.stdout).trim())
            }
            _ => {
                return Err(format!(
                    "`{tool}` was not found: the browser tests need {hint} \
                     (Debian: packages `nodejs` and `npm`)"
                ))
            }
        }
    }
    let lock = ws.root.join("package-lock.json");
    let installed = ws.root.join("node_modules/.package-lock.json");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let fresh = match (modified(&installed), modified(&lock)) {
        (Some(i), Some(l)) => {
            i >= l
                && ws
                    .root
                    .join("node_modules/playwright-core/package.json")
                    .is_file()
        }
        (_, None) => return Err(format!("{} is missing", lock.display())),
        _ => false,
    };
    if fresh {
        println!("node_modules is up to date with package-lock.json");
        return Ok(());
    }
    println!("node_modules is missing or stale: running `npm ci`");
    run_status(ws.command("npm").args(["ci", "--no-audit", "--no-fund"])).map_err(|e| e.to_string())
}

/// The `node --test` files of `dir` (`*.test.mjs`, `*.test.js`), named one by one: node 20
/// searches a folder argument, later versions read arguments as glob patterns; a list of files
/// means the same to both.
fn test_files(ws: &Workspace, dir: &str) -> std::result::Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    crate::wasm::collect_files(&ws.root.join(dir), &mut files).map_err(|e| e.to_string())?;
    files.retain(|f| {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
        [".test.mjs", ".test.js"]
            .iter()
            .any(|ext| name.ends_with(ext))
    });
    files.sort();
    if files.is_empty() {
        return Err(format!("no tests (*.test.mjs) in {dir}/"));
    }
    Ok(files
        .into_iter()
        .map(|f| f.strip_prefix(&ws.root).map(Path::to_path_buf).unwrap_or(f))
        .collect())
}

/// The page's unit tests (`tests/unit/`, no browser: the controls' binding and the update
/// transaction against fakes), after dist has written the generated modules they import.
fn unit_tests(ws: &Workspace) -> std::result::Result<((), Option<Counts>), String> {
    let files = test_files(ws, "tests/unit")?;
    counted(
        ws.command("node")
            .args(["--test", "--test-reporter=tap"])
            .args(&files),
        Duration::from_secs(120),
    )
}

/// Serves dist/ under a sub-path on a free port and runs the node tests against it.
fn browser_tests(
    ws: &Workspace,
    chromium: &Path,
) -> std::result::Result<((), Option<Counts>), String> {
    const PREFIX: &str = "/kvlab/";
    let server = serve::start(&ws.dist(), PREFIX, 0, true).map_err(|e| e.to_string())?;
    let url = server.url(PREFIX);
    println!("serving dist/ at {url}");
    let artifacts = ws.root.join("test-artifacts");
    let files = match test_files(ws, "tests/e2e") {
        Ok(files) => files,
        Err(e) => {
            server.stop();
            return Err(e);
        }
    };
    let result = counted(
        ws.command("node")
            .args(["--test", "--test-reporter=tap"])
            .args(&files)
            .env("KVLAB_URL", &url)
            .env("KVLAB_CHROMIUM", chromium)
            .env("KVLAB_ARTIFACTS", &artifacts),
        browser_timeout(),
    );
    server.stop();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_summary_lines() {
        assert_eq!(
            parse_cargo_result(
                "test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s"
            ),
            Some(Counts { passed: 12, failed: 0 })
        );
        assert_eq!(
            parse_cargo_result("test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1.20s"),
            Some(Counts { passed: 3, failed: 2 })
        );
        assert_eq!(parse_cargo_result("running 3 tests"), None);
        assert_eq!(parse_cargo_result("test foo ... ok"), None);
    }

    #[test]
    fn df_available_bytes() {
        let out = "Filesystem     1024-blocks      Used Available Capacity Mounted on\n\
                   /dev/vda        263174212  94371840   1363148      99% /\n";
        assert_eq!(parse_df_available(out), Some(1_363_148 * 1024));
        assert_eq!(
            parse_df_available("Filesystem 1024-blocks Used Available\n"),
            None
        );
        assert_eq!(parse_df_available("header\n/dev/x 10 5 lots 50% /\n"), None);
        assert_eq!(parse_df_available(""), None);
    }

    #[test]
    fn node_tap_summary_lines() {
        assert_eq!(
            parse_node_tap("# pass 4"),
            Some(Counts {
                passed: 4,
                failed: 0
            })
        );
        assert_eq!(
            parse_node_tap("# fail 1"),
            Some(Counts {
                passed: 0,
                failed: 1
            })
        );
        assert_eq!(
            parse_node_tap("# cancelled 2"),
            Some(Counts {
                passed: 0,
                failed: 2
            })
        );
        assert_eq!(parse_node_tap("# tests 5"), None);
        assert_eq!(parse_node_tap("# duration_ms 812.3"), None);
        assert_eq!(parse_node_tap("ok 1 - loads"), None);
    }

    #[test]
    fn failed_steps_without_counts_count_once() {
        let step = |outcome: std::result::Result<(), String>, counts| Step {
            name: "x",
            seconds: 0.0,
            outcome,
            counts,
        };
        let run = Run {
            steps: vec![
                step(Err("fmt".into()), None),
                step(
                    Ok(()),
                    Some(Counts {
                        passed: 5,
                        failed: 0,
                    }),
                ),
            ],
            started: Instant::now(),
        };
        assert_eq!(summary(&run), ExitCode::FAILURE);
        let run = Run {
            steps: vec![step(
                Ok(()),
                Some(Counts {
                    passed: 5,
                    failed: 0,
                }),
            )],
            started: Instant::now(),
        };
        assert_eq!(summary(&run), ExitCode::SUCCESS);
    }
}
