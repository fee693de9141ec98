//! A training run: fresh or resumed from its checkpoint, the steps with their learning rate,
//! the probes and the checkpoints on the way, and the export of the finished weights into the
//! files the page and the tests read.

use crate::adamw::AdamW;
use crate::checkpoint::{self, Header, Settings};
use crate::data::Corpus;
use crate::grad::{Trainer, Workspace};
use crate::params::Layout;
use crate::probes::{Probes, Report};
use crate::reference::Reference;
use kvlab_core::lm::tasks;
use kvlab_core::rng::Xoshiro256;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

/// The checkpoint's file name inside a run's folder.
pub const CHECKPOINT: &str = "checkpoint.bin";
/// The probes' log (one JSON object a line) inside a run's folder.
pub const LOG: &str = "log.jsonl";

/// The prompts whose logits are recorded beside the weights (every position's), for the test
/// that kvlab's forward pass equals the trainer's.
pub const REFERENCE_PROMPTS: [&str; 3] = [
    "In the beginning God created the heaven and the earth.",
    "And the LORD said unto Moses,",
    "x",
];

/// A run in memory: where it stands, its weights and its optimizer.
#[derive(Debug, Clone)]
pub struct State {
    pub header: Header,
    pub params: Vec<f32>,
    pub adam: AdamW,
}

impl State {
    /// A new run: weights from the seed's stream 0, batches from its stream 1.
    pub fn fresh(settings: Settings) -> State {
        let layout = Layout::new(settings.shape);
        let params = layout.init(&mut Xoshiro256::stream(settings.seed, 0));
        let rng = Xoshiro256::stream(settings.seed, 1).state();
        State {
            adam: AdamW::new(settings.adamw, layout.len),
            header: Header {
                settings,
                step: 0,
                rng,
                seconds: 0.0,
                len: layout.len,
            },
            params,
        }
    }

    /// A new run that starts from the weights of the run saved in `from` (same shape), with
    /// a fresh optimizer and its own schedule: a new recipe tried on a model that has already
    /// learnt something (a copy head), instead of from the seed.
    pub fn from_weights_of(mut settings: Settings, from: &Path) -> Result<State, String> {
        let old = State::load(from)?;
        if old.header.settings.shape != settings.shape {
            return Err(format!(
                "--init {}: its run has another shape than --shape asks for",
                from.display()
            ));
        }
        settings.init = Some(format!("{} at step {}", from.display(), old.header.step));
        let mut state = State::fresh(settings);
        state.params = old.params;
        Ok(state)
    }

    /// The run saved in `dir`.
    pub fn load(dir: &Path) -> Result<State, String> {
        let (header, params, adam) = checkpoint::load(&dir.join(CHECKPOINT))?;
        if Layout::new(header.settings.shape).len != header.len {
            return Err(format!(
                "{}: {} weights do not make the shape it names",
                dir.display(),
                header.len
            ));
        }
        Ok(State {
            header,
            params,
            adam,
        })
    }

    /// Saves the run into `dir`.
    pub fn save(&self, dir: &Path) -> Result<(), String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        checkpoint::save(
            &dir.join(CHECKPOINT),
            &self.header,
            &self.params,
            &self.adam,
        )
        .map_err(|e| format!("cannot write the checkpoint in {}: {e}", dir.display()))
    }
}

/// Trains `state` up to step `until` (at most the run's steps) on `corpus`, printing progress
/// through `say`, probing and checkpointing into `dir` (when given) at the run's intervals and
/// at the end. Returns the probes' reports by step.
pub fn train(
    state: &mut State,
    corpus: &Corpus,
    dir: Option<&Path>,
    until: usize,
    say: &mut dyn FnMut(&str),
) -> Result<Vec<(usize, Report)>, String> {
    let s = state.header.settings.clone();
    let layout = Layout::new(s.shape);
    let t = s.shape.context;
    let until = until.min(s.steps);
    let mut trainer = Trainer::new(layout.clone(), s.batch, s.threads);
    let probes = Probes::new(corpus, t);
    let mut pws = Workspace::new(s.shape, 1, t);
    let mut rng = Xoshiro256::from_state(state.header.rng)
        .ok_or("the checkpoint's generator state is zero")?;
    let mut log = match dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
            Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(d.join(LOG))
                    .map_err(|e| format!("{}: {e}", d.join(LOG).display()))?,
            )
        }
        None => None,
    };
    let mut reports = Vec::new();
    let started = Instant::now();
    let seconds_before = state.header.seconds;
    let step_before = state.header.step;
    let mut loss_sum = 0.0;
    let mut loss_n = 0usize;
    while state.header.step < until {
        let step = state.header.step;
        let (x, y) = s.mixture.batch(&corpus.train, &mut rng, s.batch, t);
        let (loss, grad) = trainer.loss_and_grad(&state.params, &x, &y);
        state.adam.step(&mut state.params, grad, s.lr_at(step));
        state.header.step += 1;
        state.header.rng = rng.state();
        state.header.seconds = seconds_before + started.elapsed().as_secs_f64();
        loss_sum += loss;
        loss_n += 1;
        let done = state.header.step;
        if done.is_multiple_of(50) || done == until {
            let secs = started.elapsed().as_secs_f64();
            let rate = ((done - step_before) * s.batch * t) as f64 / secs.max(1e-9);
            let left = (s.steps - done) as f64 * (s.batch * t) as f64 / rate.max(1e-9);
            say(&format!(
                "step {done:6}/{}  loss {:.3}  lr {:.2e}  {:.0} bytes/s  {:.1} min left",
                s.steps,
                loss_sum / loss_n as f64,
                s.lr_at(step),
                rate,
                left / 60.0
            ));
            loss_sum = 0.0;
            loss_n = 0;
        }
        if done.is_multiple_of(s.probe_every.max(1)) || done == until {
            let report = probes.run(&state.params, &layout, &trainer.rope, &mut pws);
            say(&format!("probe {done:6}  {}", report.line()));
            if let Some(f) = log.as_mut() {
                let line = serde_json::json!({
                    "step": done, "seconds": state.header.seconds.round(), "probes": report,
                });
                writeln!(f, "{line}").map_err(|e| format!("the log: {e}"))?;
            }
            reports.push((done, report));
        }
        if let Some(d) = dir {
            if done.is_multiple_of(s.checkpoint_every.max(1)) || done == until {
                state.save(d)?;
            }
        }
    }
    Ok(reports)
}

/// The weights rounded to f16 and back (what the page loads).
pub fn rounded(params: &[f32]) -> Vec<f32> {
    params
        .iter()
        .map(|&v| half::f16::from_f32(v).to_f32())
        .collect()
}

/// Writes the finished model into `out`: `model.safetensors` (f16), `model.json` (its card:
/// config, run, held-out loss and probes measured on the f16 weights, the tasks it was trained
/// on), `reference.json` (every position's logits of [`REFERENCE_PROMPTS`] from the candle
/// model on the f16 weights) and `heldout.txt`.
pub fn export(state: &State, corpus: &Corpus, out: &Path) -> Result<Report, String> {
    let s = &state.header.settings;
    let layout = Layout::new(s.shape);
    let r16 = rounded(&state.params);
    let rope = crate::params::Rope::new(&s.shape);
    let mut ws = Workspace::new(s.shape, 1, s.shape.context);
    let report = Probes::new(corpus, s.shape.context).run(&r16, &layout, &rope, &mut ws);
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let io = |e: &dyn std::fmt::Display| format!("writing {}: {e}", out.display());
    // safetensors, f16, names and shapes as kvlab's loader reads them
    let halves: Vec<(String, Vec<usize>, Vec<u8>)> = layout
        .entries
        .iter()
        .map(|(name, dims, r)| {
            let bytes = state.params[r.clone()]
                .iter()
                .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                .collect();
            (name.clone(), dims.clone(), bytes)
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = halves
        .iter()
        .map(|(n, dims, b)| {
            safetensors::tensor::TensorView::new(safetensors::Dtype::F16, dims.clone(), b)
                .map(|v| (n.clone(), v))
                .map_err(|e| io(&e))
        })
        .collect::<Result<_, _>>()?;
    safetensors::serialize_to_file(views, None, &out.join("model.safetensors"))
        .map_err(|e| io(&e))?;
    std::fs::write(out.join("heldout.txt"), corpus.heldout_slice()).map_err(|e| io(&e))?;
    let reference = Reference::new(&layout, &r16).map_err(|e| io(&e))?;
    let mut references = Vec::new();
    for prompt in REFERENCE_PROMPTS {
        let mut ids = vec![0u8];
        ids.extend(prompt.bytes());
        let logits = reference
            .logits(&ids, 1)
            .and_then(|l| l.squeeze(0))
            .and_then(|l| l.to_vec2::<f32>())
            .map_err(|e| io(&e))?;
        references.push(serde_json::json!({ "prompt": prompt, "logits": logits }));
    }
    std::fs::write(
        out.join("reference.json"),
        serde_json::to_string(&serde_json::json!({ "references": references }))
            .map_err(|e| io(&e))?,
    )
    .map_err(|e| io(&e))?;
    let c = s.shape;
    let card = serde_json::json!({
        "config": {
            "d_model": c.d_model, "layers": c.layers, "heads": c.heads, "mlp": c.mlp,
            "context": c.context, "vocab": c.vocab, "rope_base": c.rope_base,
            "norm_eps": crate::grad::EPS, "activation": "gelu-tanh", "bos": 0,
        },
        "training": {
            "parameters": layout.len, "steps": state.header.step, "batch": s.batch, "seed": s.seed,
            "seconds": state.header.seconds.round(), "train_bytes": corpus.train.len(),
            "threads": s.threads, "mixture": s.mixture, "peak_lr": s.peak_lr,
            "warmup": s.warmup, "adamw": s.adamw,
            "bytes_seen": state.header.step * s.batch * c.context,
        },
        "heldout_loss": report.heldout_loss,
        "probes": report,
        "tasks": [
            {
                "name": "fact",
                "fact": tasks::FACT,
                "question": tasks::QUESTION,
                "key": "a made-up name: 2 to 4 syllables of a consonant and a vowel, capitalised",
                "value": "4 digits",
            },
            {
                "name": "copy",
                "span": "8 to 48 random lowercase letters or bytes of the text spliced into the text, or 16 to 96 random letters among random letters, repeated later in the window",
            },
        ],
    });
    std::fs::write(
        out.join("model.json"),
        serde_json::to_string_pretty(&card).map_err(|e| io(&e))?,
    )
    .map_err(|e| io(&e))?;
    Ok(report)
}
