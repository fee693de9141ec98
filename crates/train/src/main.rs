//! kvlab's trainer (native only, never in the page). `cargo xtask train` prepares the corpus
//! and runs this; `cargo xtask bench train` runs its `bench`.
//!
//! ```text
//! kvlab-train train --corpus FILE --run DIR [--out DIR] [--resume] [--steps N] [--seed S]
//!                   [--batch B] [--threads T] [--shape model|small]
//!                   [--data kjv|textbook|induction|repeats|recall|facts] [--lr PEAK] [--warmup N]
//!                   [--weight-decay W] [--probe-every N] [--checkpoint-every N]
//!                   [--stop-at N] [--init DIR]
//! kvlab-train export --corpus FILE --run DIR --out DIR
//! kvlab-train bench --corpus FILE [--steps N] [--batch B] [--threads T]
//! ```
//!
//! `train` starts a run in DIR (refusing one that already holds a checkpoint) or, with
//! `--resume`, continues the one there with the settings it was started with; `--stop-at N`
//! stops after step N (the schedule is still the run's); at the run's last step it writes the
//! model into `--out`. The schedule is step-based and every random number comes from kvlab's
//! own generator, so a run (and a resumed one) is reproducible at a given thread count.

use kvlab_train::checkpoint::Settings;
use kvlab_train::data::{Corpus, Mixture};
use kvlab_train::params::{Layout, Shape};
use kvlab_train::run::{self, State, CHECKPOINT};
use std::path::{Path, PathBuf};

fn main() {
    if let Err(e) = cli() {
        eprintln!("kvlab-train: {e}");
        std::process::exit(1);
    }
}

/// The command line as `--key value` pairs and bare flags.
struct Args {
    command: String,
    pairs: Vec<(String, String)>,
    flags: Vec<String>,
}

impl Args {
    fn parse() -> Result<Args, String> {
        let mut it = std::env::args().skip(1);
        let command = it.next().ok_or(USAGE)?;
        let mut pairs = Vec::new();
        let mut flags = Vec::new();
        while let Some(k) = it.next() {
            match k.as_str() {
                "--resume" => flags.push(k),
                _ if k.starts_with("--") => {
                    let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
                    pairs.push((k, v));
                }
                _ => return Err(format!("unexpected argument {k}\n{USAGE}")),
            }
        }
        Ok(Args {
            command,
            pairs,
            flags,
        })
    }

    fn take(&mut self, key: &str) -> Option<String> {
        let at = self.pairs.iter().position(|(k, _)| k == key)?;
        Some(self.pairs.remove(at).1)
    }

    fn num<T: std::str::FromStr>(&mut self, key: &str, default: T) -> Result<T, String>
    where
        T::Err: std::fmt::Display,
    {
        match self.take(key) {
            Some(v) => v.parse().map_err(|e| format!("{key} {v}: {e}")),
            None => Ok(default),
        }
    }

    fn done(&self) -> Result<(), String> {
        match self.pairs.first() {
            Some((k, _)) => Err(format!("unknown option {k} for {}\n{USAGE}", self.command)),
            None => Ok(()),
        }
    }
}

const USAGE: &str =
    "usage: kvlab-train train --corpus FILE --run DIR [--out DIR] [--resume] [options]
       kvlab-train export --corpus FILE --run DIR --out DIR
       kvlab-train bench --corpus FILE [--steps N] [--batch B] [--threads T]";

fn corpus(args: &mut Args) -> Result<Corpus, String> {
    let path = args.take("--corpus").ok_or("--corpus FILE is needed")?;
    let text = std::fs::read(&path).map_err(|e| format!("cannot read the corpus {path}: {e}"))?;
    Corpus::new(text)
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn cli() -> Result<(), String> {
    let mut args = Args::parse()?;
    let mut say = |s: &str| println!("{s}");
    match args.command.as_str() {
        "train" => {
            let corpus = corpus(&mut args)?;
            let dir = PathBuf::from(args.take("--run").ok_or("--run DIR is needed")?);
            let out = args.take("--out").map(PathBuf::from);
            let resume = args.flags.iter().any(|f| f == "--resume");
            let mut state = if resume {
                const SETTINGS: [&str; 12] = [
                    "--shape",
                    "--data",
                    "--steps",
                    "--batch",
                    "--seed",
                    "--threads",
                    "--lr",
                    "--warmup",
                    "--weight-decay",
                    "--probe-every",
                    "--checkpoint-every",
                    "--init",
                ];
                if let Some((k, _)) = args
                    .pairs
                    .iter()
                    .find(|(k, _)| SETTINGS.contains(&k.as_str()))
                {
                    return Err(format!(
                        "{k}: a resumed run keeps the settings it was started with (see its checkpoint); \
                         start a new run in another --run folder to change them"
                    ));
                }
                let s = State::load(&dir)?;
                say(&format!(
                    "kvlab-train: resuming {} at step {} of {} ({:.0} s trained so far)",
                    dir.display(),
                    s.header.step,
                    s.header.settings.steps,
                    s.header.seconds
                ));
                s
            } else {
                if dir.join(CHECKPOINT).exists() {
                    return Err(format!(
                        "{} already holds a run: add --resume to continue it, or name another --run",
                        dir.display()
                    ));
                }
                let shape_name = args.take("--shape").unwrap_or_else(|| "model".into());
                let shape = Shape::named(&shape_name).ok_or_else(|| {
                    format!("--shape {shape_name}: the shapes are model and small")
                })?;
                let data = args.take("--data").unwrap_or_else(|| "recall".into());
                let mixture = Mixture::named(&data).ok_or_else(|| {
                    format!("--data {data}: the mixtures are kjv, textbook, induction, repeats, recall and facts")
                })?;
                let steps: usize = args.num("--steps", 12_000)?;
                let mut adamw = kvlab_train::adamw::AdamWConfig::default();
                adamw.weight_decay = args.num("--weight-decay", adamw.weight_decay)?;
                let settings = Settings {
                    shape,
                    mixture,
                    steps,
                    batch: args.num("--batch", 8)?,
                    seed: args.num("--seed", 1)?,
                    threads: args.num("--threads", cores())?,
                    peak_lr: args.num("--lr", 2e-3)?,
                    warmup: args.num("--warmup", (steps / 20).max(1))?,
                    adamw,
                    probe_every: args.num("--probe-every", 250)?,
                    checkpoint_every: args.num("--checkpoint-every", 250)?,
                    init: None,
                };
                if settings.steps == 0 || settings.batch == 0 || settings.threads == 0 {
                    return Err("--steps, --batch and --threads must be at least 1".into());
                }
                match args.take("--init") {
                    Some(from) => State::from_weights_of(settings, Path::new(&from))?,
                    None => State::fresh(settings),
                }
            };
            let stop_at: usize = args.num("--stop-at", usize::MAX)?;
            args.done()?;
            let s = state.header.settings.clone();
            say(&format!(
                "kvlab-train: {} parameters, {} mixture, {} steps of {} x {} on {} threads, {} training bytes",
                Layout::new(s.shape).len,
                serde_json::to_string(&s.mixture).unwrap_or_default(),
                s.steps,
                s.batch,
                s.shape.context,
                s.threads,
                corpus.train.len()
            ));
            run::train(&mut state, &corpus, Some(&dir), stop_at, &mut say)?;
            if state.header.step == s.steps {
                if let Some(out) = out {
                    let report = run::export(&state, &corpus, &out)?;
                    say(&format!(
                        "kvlab-train: wrote {} ({:.0} s of training); on the f16 weights: {}",
                        out.display(),
                        state.header.seconds,
                        report.line()
                    ));
                }
            }
            Ok(())
        }
        "export" => {
            let corpus = corpus(&mut args)?;
            let dir = PathBuf::from(args.take("--run").ok_or("--run DIR is needed")?);
            let out = PathBuf::from(args.take("--out").ok_or("--out DIR is needed")?);
            args.done()?;
            let state = State::load(&dir)?;
            let report = run::export(&state, &corpus, &out)?;
            say(&format!(
                "kvlab-train: wrote {}: {}",
                out.display(),
                report.line()
            ));
            Ok(())
        }
        "bench" => {
            let corpus = corpus(&mut args)?;
            let steps = args.num("--steps", 5)?;
            let batch = args.num("--batch", 8)?;
            let threads = args.num("--threads", cores())?;
            args.done()?;
            if steps == 0 || batch == 0 || threads == 0 {
                return Err("--steps, --batch and --threads must be at least 1".into());
            }
            let (candle, ours) = kvlab_train::bench::run(&corpus, steps, batch, threads, &mut say)?;
            println!(
                "\ntrainer        s/step (median, fastest)   bytes/s\n\
                 candle         {:.3}, {:.3}               {:.0}\n\
                 hand-written   {:.3}, {:.3}               {:.0}\n\
                 ratio: {:.2}x (model shape, batch {batch} x {}, {threads} threads for the hand-written one, {steps} timed steps each)",
                candle.median,
                candle.fastest,
                candle.bytes_per_second,
                ours.median,
                ours.fastest,
                ours.bytes_per_second,
                ours.bytes_per_second / candle.bytes_per_second,
                Shape::MODEL.context
            );
            Ok(())
        }
        other => Err(format!("unknown command {other}\n{USAGE}")),
    }
}
