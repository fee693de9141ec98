//! `cargo xtask fuzz [--seconds N] [TARGET...]`: a bounded run of every cargo-fuzz target in
//! `fuzz/` (issue 7, "Fuzzing"). Not part of `cargo xtask test`: it needs nightly and takes
//! minutes.
//!
//! 1. `cargo +nightly --version` must work (else: `rustup toolchain install nightly`);
//!    `cargo fuzz` is installed with `cargo install cargo-fuzz` when missing, and said so.
//! 2. Each target's corpus `fuzz/corpus/<target>/` (gitignored) is seeded from
//!    `tests/fixtures/` as `fuzz/README.md` lists, plus the earlier findings
//!    `tests/fixtures/malformed/fuzz-<target>-*`, so every run replays them first.
//! 3. Each target runs for N seconds (`-max_total_time`, default 30), built without a sanitizer
//!    (`--sanitizer none`, see [`SANITIZER`]), with cargo-fuzz's default debug assertions and
//!    overflow checks. An input slower than [`INPUT_TIMEOUT`] counts as a hang. The full
//!    libFuzzer output goes to `fuzz/artifacts/logs/<target>.log`; the terminal shows its pulse
//!    lines and any panic.
//! 4. Per target: executions (libFuzzer's `stat::number_of_executed_units`, else `Done N runs`)
//!    and whether it crashed. A crash input is copied to
//!    `tests/fixtures/malformed/fuzz-<target>-<hash>` as a regression fixture and the log's
//!    tail (the panic message and stack) is printed. Any crash makes the exit status non-zero.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::{run_status, show, Result, Workspace};

/// Default time per target.
pub const DEFAULT_SECONDS: u64 = 30;

/// A single input slower than this (seconds) counts as a hang: the page must never freeze.
pub const INPUT_TIMEOUT: u64 = 30;

/// kvlab is `#![forbid(unsafe_code)]`: every memory error AddressSanitizer could find is already
/// a bounds-check panic, which libFuzzer catches without it. Without ASan a run makes 3-5x more
/// executions in the same time.
pub const SANITIZER: &str = "none";

/// Where the seed files of a target come from: a folder of `tests/fixtures/`, and the name
/// prefixes / extensions (either may match; empty lists match nothing).
struct Seeds {
    dir: &'static str,
    prefixes: &'static [&'static str],
    extensions: &'static [&'static str],
}

/// The seed table of `fuzz/README.md`.
fn seeds_of(target: &str) -> Vec<Seeds> {
    let s = |dir, prefixes, extensions| Seeds {
        dir,
        prefixes,
        extensions,
    };
    match target {
        "npy" => vec![
            s("npy", &[], &["npy"]),
            s("interpret", &[], &["npy"]),
            s("malformed", &["npy_", "empty"], &[]),
        ],
        "safetensors" => vec![
            s("safetensors", &[""], &[]),
            s("capture", &[], &["safetensors"]),
            s("malformed", &["st_"], &[]),
        ],
        "csv" => vec![
            s("text", &[], &["csv", "tsv", "txt"]),
            s("malformed", &["csv_"], &[]),
        ],
        "json" => vec![s("text", &[], &["json"]), s("malformed", &["json_"], &[])],
        _ => Vec::new(),
    }
}

/// Queries that reach every key of the URL state, in range and not, for `url_state`.
const URL_SEEDS: &[&str] = &[
    "",
    "?bits=3&budget=64",
    "pattern=needle&seed=9007199254740992&tokens=4096&steps=100&channels=128&outliers=0&skewed=3",
    "bits=2&scheme=asym&granularity=token&group=32&tensor=v&channel=5&meta=f32",
    "method=snapkv&budget=1000&recent=0&window=32&pool=avg&kernel=5&sinks=0",
    "model=custom&layers=3&kv_heads=2&head_dim=256&fp_bytes=4&context=1048576&batch=8&index=mask",
    "lang=zh&embed=select&channel=auto&model=llama-2-7b",
    "bits=NaN&budget=-5&tokens=1e99&method=magic&kernel=4&steps=9999&%ZZ=1&seed=&lang=fr",
    "budget=0&recent=131073&window=0&kernel=64&sinks=1025&group=65537&bits=17&channel=1024",
    "tokens=1&steps=1&budget=1&recent=1&window=1",
    "seed=-0&tokens=+1e2&steps=0x10&channels=1.5&bits=inf&budget=%2B7",
];

/// Inputs of `lab_update` (fuzz_targets/lab_update.rs reads, per settings value, 4 bytes of
/// override flags, the overrides, 1 byte of query length, the query): no overrides, and each
/// URL seed as the first settings with the next one as an update.
fn lab_update_seeds() -> Vec<Vec<u8>> {
    let part = |q: &str| {
        let q = &q.as_bytes()[..q.len().min(200)];
        let mut b = vec![0u8; 4];
        b.push(q.len() as u8);
        b.extend_from_slice(q);
        b
    };
    (0..URL_SEEDS.len())
        .map(|i| {
            let next = URL_SEEDS[(i + 1) % URL_SEEDS.len()];
            [part(URL_SEEDS[i]), part(next), part("")].concat()
        })
        .collect()
}

/// Arguments: `[--seconds N] [TARGET...]`.
#[derive(Debug, PartialEq, Eq)]
pub struct Args {
    /// Seconds per target.
    pub seconds: u64,
    /// Targets to run; empty = all.
    pub targets: Vec<String>,
}

/// Parses `[--seconds N | --seconds=N] [TARGET...]`.
pub fn parse_args(rest: &[String]) -> Result<Args> {
    let mut args = Args {
        seconds: DEFAULT_SECONDS,
        targets: Vec::new(),
    };
    let mut it = rest.iter();
    while let Some(arg) = it.next() {
        let value = if arg == "--seconds" || arg == "-s" {
            it.next()
                .ok_or("`--seconds` needs a value, e.g. `--seconds 60`")?
                .as_str()
        } else if let Some(v) = arg.strip_prefix("--seconds=") {
            v
        } else if arg.starts_with('-') {
            return Err(format!("unknown argument `{arg}` for `fuzz`: usage `cargo xtask fuzz [--seconds N] [TARGET...]`").into());
        } else {
            args.targets.push(arg.clone());
            continue;
        };
        args.seconds = match value.parse::<u64>() {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err(format!("seconds `{value}` is not a whole number of at least 1").into())
            }
        };
    }
    Ok(args)
}

/// What one target's run found.
#[derive(Debug)]
struct Outcome {
    target: String,
    executions: Option<u64>,
    /// Crash, timeout, OOM and leak inputs written by libFuzzer during this run.
    crashes: Vec<PathBuf>,
    /// Inputs libFuzzer reported as slow (not a failure; listed for a look).
    slow: Vec<PathBuf>,
    /// Fixtures written for the crashes.
    fixtures: Vec<PathBuf>,
    /// The run failed without a crash input (a build error, libFuzzer refused its flags...).
    error: Option<String>,
    log: PathBuf,
}

/// Runs the fuzz targets; non-zero exit when any crashed or could not run.
pub fn run(ws: &Workspace, rest: &[String]) -> Result<ExitCode> {
    let args = parse_args(rest)?;
    let fuzz_dir = ws.root.join("fuzz");
    check_nightly(ws)?;
    ensure_cargo_fuzz(ws)?;

    let all = list_targets(ws)?;
    let targets: Vec<String> = if args.targets.is_empty() {
        all.clone()
    } else {
        for t in &args.targets {
            if !all.contains(t) {
                return Err(
                    format!("no fuzz target `{t}`: the targets are {}", all.join(", ")).into(),
                );
            }
        }
        args.targets.clone()
    };

    println!(
        "==> building {} fuzz target(s) with cargo +nightly fuzz build",
        targets.len()
    );
    let mut build = fuzz_cargo(ws);
    build.args(["fuzz", "build", "--sanitizer", SANITIZER]);
    run_status(&mut build)?;

    let logs = fuzz_dir.join("artifacts").join("logs");
    fs::create_dir_all(&logs).map_err(|e| format!("cannot create {}: {e}", logs.display()))?;
    let mut outcomes = Vec::new();
    for target in &targets {
        let corpus = seed_corpus(ws, target)?;
        println!(
            "\n==> fuzzing `{target}` for {} s (corpus {}, {} file(s))",
            args.seconds,
            rel(ws, &corpus),
            count_files(&corpus)
        );
        outcomes.push(run_target(ws, target, &corpus, args.seconds, &logs)?);
    }

    println!("\n==> fuzz summary ({} s per target)", args.seconds);
    let mut failed = false;
    for o in &outcomes {
        let execs = o
            .executions
            .map_or_else(|| "unknown".to_string(), |n| n.to_string());
        let verdict = if let Some(e) = &o.error {
            failed = true;
            format!("ERROR: {e}")
        } else if o.crashes.is_empty() {
            "no crash".to_string()
        } else {
            failed = true;
            let fixtures: Vec<String> = o.fixtures.iter().map(|f| rel(ws, f)).collect();
            format!(
                "CRASH ({} input(s); regression fixture(s): {})",
                o.crashes.len(),
                fixtures.join(", ")
            )
        };
        println!("  {:<12} {:>12} executions  {verdict}", o.target, execs);
        for s in &o.slow {
            println!("  {:<12} slow input (not a failure): {}", "", rel(ws, s));
        }
        if o.error.is_some() || !o.crashes.is_empty() {
            println!("  {:<12} full log: {}", "", rel(ws, &o.log));
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `cargo` from PATH (the rustup proxy, which understands `+nightly`), not `$CARGO` (the stable
/// cargo that runs xtask), and without the variables that would pin the stable toolchain.
fn fuzz_cargo(ws: &Workspace) -> Command {
    let mut c = ws.command("cargo");
    c.arg("+nightly");
    for var in ["RUSTUP_TOOLCHAIN", "RUSTC", "RUSTDOC", "CARGO"] {
        c.env_remove(var);
    }
    c
}

fn check_nightly(ws: &Workspace) -> Result<()> {
    let mut c = fuzz_cargo(ws);
    c.arg("--version");
    let out = c.output();
    match out {
        Ok(o) if o.status.success() => {
            println!("==> {}", String::from_utf8_lossy(&o.stdout).trim());
            Ok(())
        }
        _ => Err(
            "`cargo +nightly --version` failed: fuzzing needs the nightly toolchain \
                  (libFuzzer's sanitizer flags are nightly-only). Install it with \
                  `rustup toolchain install nightly`, then rerun `cargo xtask fuzz`."
                .into(),
        ),
    }
}

fn ensure_cargo_fuzz(ws: &Workspace) -> Result<()> {
    let mut c = fuzz_cargo(ws);
    c.args(["fuzz", "--version"]);
    if let Ok(o) = c.output() {
        if o.status.success() {
            println!("==> {}", String::from_utf8_lossy(&o.stdout).trim());
            return Ok(());
        }
    }
    println!("==> `cargo fuzz` is not installed: installing it with `cargo install cargo-fuzz`");
    let mut install = ws.command("cargo");
    install.args(["install", "cargo-fuzz"]);
    run_status(&mut install).map_err(|e| format!("installing cargo-fuzz failed: {e}"))?;
    Ok(())
}

/// `cargo fuzz list`: the `[[bin]]` targets of `fuzz/Cargo.toml`.
fn list_targets(ws: &Workspace) -> Result<Vec<String>> {
    let mut c = fuzz_cargo(ws);
    c.args(["fuzz", "list"]);
    let shown = show(&c);
    let out = c
        .output()
        .map_err(|e| format!("cannot run `{shown}`: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{shown}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    let targets: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    if targets.is_empty() {
        return Err(format!("`{shown}` lists no target").into());
    }
    Ok(targets)
}

/// Fills `fuzz/corpus/<target>/` with the target's seeds and earlier findings.
fn seed_corpus(ws: &Workspace, target: &str) -> Result<PathBuf> {
    let corpus = ws.root.join("fuzz").join("corpus").join(target);
    fs::create_dir_all(&corpus).map_err(|e| format!("cannot create {}: {e}", corpus.display()))?;
    let fixtures = ws.root.join("tests").join("fixtures");
    let regression = format!("fuzz-{target}-");
    let mut sources: Vec<PathBuf> = Vec::new();
    for seeds in seeds_of(target) {
        for path in files_in(&fixtures.join(seeds.dir))? {
            let name = file_name(&path);
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if seeds.prefixes.iter().any(|p| name.starts_with(p)) || seeds.extensions.contains(&ext)
            {
                sources.push(path);
            }
        }
    }
    for path in files_in(&fixtures.join("malformed"))? {
        if file_name(&path).starts_with(&regression) {
            sources.push(path);
        }
    }
    for path in &sources {
        let to = corpus.join(file_name(path));
        fs::copy(path, &to)
            .map_err(|e| format!("cannot copy {} to {}: {e}", path.display(), to.display()))?;
    }
    let generated: Vec<Vec<u8>> = match target {
        "url_state" => URL_SEEDS.iter().map(|q| q.as_bytes().to_vec()).collect(),
        "lab_update" => lab_update_seeds(),
        _ => Vec::new(),
    };
    for (i, bytes) in generated.iter().enumerate() {
        let to = corpus.join(format!("seed-{i:02}"));
        fs::write(&to, bytes).map_err(|e| format!("cannot write {}: {e}", to.display()))?;
    }
    Ok(corpus)
}

/// Runs one target; its output goes to the log, pulse and crash lines to the terminal too.
fn run_target(
    ws: &Workspace,
    target: &str,
    corpus: &Path,
    seconds: u64,
    logs: &Path,
) -> Result<Outcome> {
    let artifacts = ws.root.join("fuzz").join("artifacts").join(target);
    fs::create_dir_all(&artifacts)
        .map_err(|e| format!("cannot create {}: {e}", artifacts.display()))?;
    let before: BTreeSet<PathBuf> = files_in(&artifacts)?.into_iter().collect();
    let log_path = logs.join(format!("{target}.log"));
    let log = File::create(&log_path)
        .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
    let log = Arc::new(Mutex::new(log));

    let mut c = fuzz_cargo(ws);
    c.args(["fuzz", "run", "--sanitizer", SANITIZER, target])
        .arg(corpus)
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-timeout={INPUT_TIMEOUT}"))
        .arg("-print_final_stats=1");
    let dict = ws
        .root
        .join("fuzz")
        .join("dicts")
        .join(format!("{target}.dict"));
    if dict.is_file() {
        c.arg(format!("-dict={}", dict.display()));
    }
    let shown = show(&c);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = c
        .spawn()
        .map_err(|e| format!("cannot run `{shown}`: {e}"))?;
    let readers: Vec<_> = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|stream| {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stream).lines().map_while(|l| l.ok()) {
                if let Ok(mut f) = log.lock() {
                    let _ = writeln!(f, "{line}");
                }
                if worth_showing(&line) {
                    println!("    {line}");
                }
                lines.push(line);
            }
            lines
        })
    })
    .collect();
    let status = child
        .wait()
        .map_err(|e| format!("waiting for `{shown}`: {e}"))?;
    let mut lines = Vec::new();
    for r in readers {
        lines.extend(r.join().unwrap_or_default());
    }
    println!(
        "    `{target}` finished in {:.0} s ({status})",
        started.elapsed().as_secs_f64()
    );

    // Inputs written during this run: named in the output, or new in the artifacts folder.
    let mut written: BTreeSet<PathBuf> = lines
        .iter()
        .filter_map(|l| parse_written(l))
        .map(|p| {
            let p = PathBuf::from(p);
            if p.is_absolute() {
                p
            } else {
                ws.root.join(p)
            }
        })
        .collect();
    for p in files_in(&artifacts)? {
        if !before.contains(&p) {
            written.insert(p);
        }
    }
    let (slow, crashes): (Vec<PathBuf>, Vec<PathBuf>) = written
        .into_iter()
        .filter(|p| p.is_file())
        .partition(|p| file_name(p).starts_with("slow-unit-"));

    let mut fixtures = Vec::new();
    for crash in &crashes {
        let to = ws
            .root
            .join("tests/fixtures/malformed")
            .join(fixture_name(target, &file_name(crash)));
        fs::copy(crash, &to)
            .map_err(|e| format!("cannot copy {} to {}: {e}", crash.display(), to.display()))?;
        fixtures.push(to);
    }
    if !crashes.is_empty() {
        println!("    --- last lines of {} ---", rel(ws, &log_path));
        let tail = lines.len().saturating_sub(80);
        for l in &lines[tail..] {
            println!("    {l}");
        }
    }
    let error = if !status.success() && crashes.is_empty() {
        Some(format!(
            "`{shown}` failed ({status}) without writing a crash input"
        ))
    } else {
        None
    };
    Ok(Outcome {
        target: target.to_string(),
        executions: executions(&lines),
        crashes,
        slow,
        fixtures,
        error,
        log: log_path,
    })
}

/// Lines of libFuzzer's output worth showing live: progress pulses, the end, and trouble.
fn worth_showing(line: &str) -> bool {
    line.contains(" pulse ")
        || line.starts_with("Done ")
        || line.contains("panicked at")
        || line.contains("ERROR:")
        || line.contains("SUMMARY:")
        || line.contains("Test unit written")
        || line.starts_with("error")
}

/// Executions from libFuzzer's final lines: `stat::number_of_executed_units: N` (with
/// `-print_final_stats=1`), else `Done N runs in S second(s)`, else the last `#N` status line.
pub fn executions(lines: &[String]) -> Option<u64> {
    let stat = lines.iter().rev().find_map(|l| {
        l.trim()
            .strip_prefix("stat::number_of_executed_units:")
            .and_then(|n| n.trim().parse().ok())
    });
    let done = || {
        lines.iter().rev().find_map(|l| {
            l.trim()
                .strip_prefix("Done ")
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse().ok())
        })
    };
    let last_status = || {
        lines.iter().rev().find_map(|l| {
            l.strip_prefix('#')
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse().ok())
        })
    };
    stat.or_else(done).or_else(last_status)
}

/// The path in libFuzzer's `...; Test unit written to PATH` line.
pub fn parse_written(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once("Test unit written to ")?;
    let path = rest.trim();
    (!path.is_empty()).then_some(path)
}

/// `fuzz-<target>-<hash>` from libFuzzer's `crash-<sha1>` (the kind is kept when it is not a
/// plain crash: `fuzz-npy-timeout-<hash>`), hash shortened to 12 hex digits.
pub fn fixture_name(target: &str, artifact: &str) -> String {
    let (kind, hash) = artifact.split_once('-').unwrap_or(("crash", artifact));
    let short: String = hash.chars().take(12).collect();
    if kind == "crash" {
        format!("fuzz-{target}-{short}")
    } else {
        format!("fuzz-{target}-{kind}-{short}")
    }
}

fn files_in(dir: &Path) -> Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))? {
        let path = entry
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .path();
        if path.is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

fn count_files(dir: &Path) -> usize {
    files_in(dir).map_or(0, |f| f.len())
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn rel(ws: &Workspace, path: &Path) -> String {
    path.strip_prefix(&ws.root)
        .unwrap_or(path)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn arguments() {
        assert_eq!(
            parse_args(&[]).unwrap(),
            Args {
                seconds: 30,
                targets: vec![]
            }
        );
        let a = parse_args(&strings(&["--seconds", "60", "npy"])).unwrap();
        assert_eq!((a.seconds, a.targets), (60, strings(&["npy"])));
        assert_eq!(parse_args(&strings(&["--seconds=5"])).unwrap().seconds, 5);
        assert!(parse_args(&strings(&["--seconds"])).is_err());
        assert!(parse_args(&strings(&["--seconds", "0"])).is_err());
        assert!(parse_args(&strings(&["--seconds", "x"])).is_err());
        assert!(parse_args(&strings(&["--verbose"])).is_err());
    }

    #[test]
    fn executions_from_libfuzzer_output() {
        let lines = strings(&[
            "#1048576\tpulse  cov: 612 ft: 1970 corp: 459/19Kb exec/s: 16000 rss: 329Mb",
            "Done 1234567 runs in 61 second(s)",
            "stat::number_of_executed_units: 1234568",
            "stat::average_exec_per_sec:     20238",
        ]);
        assert_eq!(executions(&lines), Some(1_234_568));
        assert_eq!(executions(&lines[..2]), Some(1_234_567));
        assert_eq!(executions(&lines[..1]), Some(1_048_576));
        assert_eq!(executions(&[]), None);
    }

    #[test]
    fn crash_inputs_and_fixture_names() {
        assert_eq!(
            parse_written("artifact_prefix='/w/fuzz/artifacts/npy/'; Test unit written to /w/fuzz/artifacts/npy/crash-0123456789abcdef"),
            Some("/w/fuzz/artifacts/npy/crash-0123456789abcdef")
        );
        assert_eq!(parse_written("#2 INITED"), None);
        assert_eq!(
            fixture_name("npy", "crash-0123456789abcdef0123"),
            "fuzz-npy-0123456789ab"
        );
        assert_eq!(
            fixture_name("lab_update", "timeout-0123456789abcdef"),
            "fuzz-lab_update-timeout-0123456789ab"
        );
    }
}
