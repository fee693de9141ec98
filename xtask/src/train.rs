//! `cargo xtask train`: reproduces the committed model, in two stages checkpointed under
//! `target/train/` (a stopped recipe continues where it stopped), writing it to `www/model/`
//! (the weights, their card and the held-out slice the tests read). `cargo xtask train
//! [--resume] OPTIONS`: one run with those options, checkpointed in `target/train/run/`
//! (`--run DIR` to choose) so that `--resume` continues it.
//! `cargo xtask bench train` measures the trainer against the first one (candle).
//!
//! The corpus is the King James Bible of Debian's `bible-kjv-text` 4.38, read out by the
//! `bible` program of `bible-kjv` 4.38: both packages are downloaded by name and version
//! (`apt-get download`, no install) and unpacked under `target/train/`. The verse references
//! ("Ge1:1 ") are stripped, one verse a line. Never run by `cargo xtask test`: the tests check
//! the committed weights.

use crate::{run_status, Result, Workspace};
use std::path::{Path, PathBuf};

/// Debian's packages of the corpus, pinned.
const PACKAGES: [&str; 2] = ["bible-kjv-text=4.38", "bible-kjv=4.38"];

/// The corpus, prepared when missing.
fn corpus(ws: &Workspace) -> Result<PathBuf> {
    let dir = ws.target().join("train");
    let corpus = dir.join("kjv.txt");
    if !corpus.is_file() {
        prepare_corpus(ws, &dir, &corpus)?;
    }
    Ok(corpus)
}

/// The committed model's recipe, in two stages (docs/model.md): the `recall` mixture on a
/// 30,000-step schedule stopped at step 18,000, where its copy head has formed; then 6,000
/// steps of the `facts` mixture from those weights, written to `www/model/`. Each stage
/// resumes its folder's checkpoint when there is one, so a stopped recipe continues.
const STAGES: [(&str, &[&str]); 2] = [
    (
        "recall",
        &[
            "--data",
            "recall",
            "--steps",
            "30000",
            "--lr",
            "2e-3",
            "--warmup",
            "1500",
            "--weight-decay",
            "0.05",
            "--seed",
            "1",
            "--threads",
            "2",
            "--stop-at",
            "18000",
        ],
    ),
    (
        "facts",
        &[
            "--data",
            "facts",
            "--steps",
            "6000",
            "--lr",
            "1e-3",
            "--warmup",
            "200",
            "--weight-decay",
            "0.05",
            "--seed",
            "1",
            "--threads",
            "2",
        ],
    ),
];

/// With no options, the committed model's recipe ([`STAGES`]); with options, one run of
/// `kvlab-train train` with them.
pub fn run(ws: &Workspace, rest: &[String]) -> Result<()> {
    if !rest.is_empty() {
        return one_run(ws, rest);
    }
    let dir = ws.target().join("train");
    let mut before: Option<PathBuf> = None;
    for (i, (name, settings)) in STAGES.iter().enumerate() {
        let run = dir.join(name);
        let mut args: Vec<String> = vec!["--run".into(), run.display().to_string()];
        if run.join("checkpoint.bin").is_file() {
            println!(
                "xtask: stage {} of 2 ({name}): resuming {}",
                i + 1,
                run.display()
            );
            args.push("--resume".into());
            // (a resumed run keeps its settings; only where to stop is said again)
            if let Some(at) = settings.iter().position(|&a| a == "--stop-at") {
                args.extend(settings[at..at + 2].iter().map(|a| a.to_string()));
            }
        } else {
            println!(
                "xtask: stage {} of 2 ({name}): a new run in {}",
                i + 1,
                run.display()
            );
            args.extend(settings.iter().map(|a| a.to_string()));
            if let Some(from) = &before {
                args.extend(["--init".into(), from.display().to_string()]);
            }
        }
        // (`--out` is www/model/ for both: the first stage stops before its schedule's last
        // step, where a run writes its model, so only the second writes it)
        one_run(ws, &args)?;
        before = Some(run);
    }
    Ok(())
}

fn one_run(ws: &Workspace, rest: &[String]) -> Result<()> {
    let corpus = corpus(ws)?;
    let has = |k: &str| rest.iter().any(|a| a == k);
    println!("xtask: training (release build of crates/train; its probes print as it goes)");
    let mut cmd = ws.cargo();
    cmd.args([
        "run",
        "--release",
        "-p",
        "kvlab-train",
        "--",
        "train",
        "--corpus",
    ])
    .arg(&corpus);
    if !has("--run") {
        cmd.arg("--run").arg(ws.target().join("train").join("run"));
    }
    if !has("--out") {
        cmd.arg("--out").arg(ws.www().join("model"));
    }
    run_status(cmd.args(rest))
}

pub fn bench(ws: &Workspace, rest: &[String]) -> Result<()> {
    let corpus = corpus(ws)?;
    println!("xtask: the trainer against candle's (release build of crates/train)");
    let mut cmd = ws.cargo();
    cmd.args([
        "run",
        "--release",
        "-p",
        "kvlab-train",
        "--",
        "bench",
        "--corpus",
    ])
    .arg(&corpus)
    .args(rest);
    run_status(&mut cmd)
}
fn prepare_corpus(ws: &Workspace, dir: &Path, corpus: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    println!(
        "xtask: downloading {} (apt-get download)",
        PACKAGES.join(", ")
    );
    let mut get = ws.command("apt-get");
    get.current_dir(dir).arg("download").args(PACKAGES);
    run_status(&mut get).map_err(|e| {
        format!("{e}\n(the corpus comes from Debian's packages: run `apt-get update` once)")
    })?;
    let root = dir.join("root");
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "deb") {
            run_status(ws.command("dpkg-deb").arg("-x").arg(&path).arg(&root))?;
        }
    }
    println!("xtask: reading the text out with the package's own `bible` program");
    let out = ws
        .command(root.join("usr/bin/bible"))
        .arg("-p")
        .arg(root.join("usr/lib"))
        .args(["-f", "Gen1:1-Rev22:21"])
        .output()
        .map_err(|e| format!("cannot run bible: {e}"))?;
    if !out.status.success() {
        return Err(format!("bible failed ({})", out.status).into());
    }
    let text = String::from_utf8(out.stdout).map_err(|e| format!("bible's output: {e}"))?;
    let verses: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(_, verse)| verse.trim()))
        .filter(|v| !v.is_empty())
        .collect();
    let mut joined = verses.join("\n");
    joined.push('\n');
    std::fs::write(corpus, &joined)?;
    println!(
        "xtask: corpus {}: {} verses, {} bytes",
        corpus.display(),
        verses.len(),
        joined.len()
    );
    Ok(())
}
