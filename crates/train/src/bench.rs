//! `kvlab-train bench`: both trainers on the model's shape, the same batches, in one process,
//! so that their bytes per second are compared on the same machine at the same moment.

use crate::adamw::AdamW;
use crate::checkpoint::Settings;
use crate::data::{Corpus, Mixture};
use crate::grad::Trainer;
use crate::params::{Layout, Shape};
use crate::reference::Reference;
use kvlab_core::rng::Xoshiro256;
use std::time::Instant;

/// One trainer's measure.
#[derive(Debug, Clone, Copy)]
pub struct Speed {
    /// Seconds per step, each step timed alone: the median and the fastest.
    pub median: f64,
    pub fastest: f64,
    /// Bytes per second at the median.
    pub bytes_per_second: f64,
}

fn speed(mut times: Vec<f64>, bytes: usize) -> Speed {
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    Speed {
        median,
        fastest: times[0],
        bytes_per_second: bytes as f64 / median,
    }
}

/// Times `steps` steps of each trainer (after one untimed), batch `batch` of the model's
/// context, the hand-written one on `threads` threads. Returns (candle, hand-written).
pub fn run(
    corpus: &Corpus,
    steps: usize,
    batch: usize,
    threads: usize,
    say: &mut dyn FnMut(&str),
) -> Result<(Speed, Speed), String> {
    let shape = Shape::MODEL;
    let layout = Layout::new(shape);
    let params = layout.init(&mut Xoshiro256::stream(1, 0));
    let settings = Settings {
        shape,
        mixture: Mixture::Kjv,
        steps: steps + 1,
        batch,
        seed: 1,
        threads,
        peak_lr: 2e-3,
        warmup: 1,
        adamw: Default::default(),
        probe_every: usize::MAX,
        checkpoint_every: usize::MAX,
        init: None,
    };
    let t = shape.context;
    let mut rng = Xoshiro256::stream(1, 1);
    let batches: Vec<(Vec<u8>, Vec<u8>)> = (0..=steps)
        .map(|_| Mixture::Kjv.batch(&corpus.train, &mut rng, batch, t))
        .collect();
    let bytes = batch * t;
    let e = |e: candle_core::Error| e.to_string();
    let reference = Reference::new(&layout, &params).map_err(e)?;
    let mut opt = reference
        .optimizer(settings.adamw, settings.lr_at(0))
        .map_err(e)?;
    let mut times = Vec::new();
    for (i, (x, y)) in batches.iter().enumerate() {
        let at = Instant::now();
        let loss = reference
            .step(&mut opt, x, y, batch, settings.lr_at(i))
            .map_err(e)?;
        if i > 0 {
            times.push(at.elapsed().as_secs_f64());
        }
        say(&format!(
            "candle       step {i}: loss {loss:.4}, {:.3} s",
            at.elapsed().as_secs_f64()
        ));
    }
    let candle = speed(times, bytes);
    let mut trainer = Trainer::new(layout.clone(), batch, threads);
    let mut ours = params.clone();
    let mut adam = AdamW::new(settings.adamw, layout.len);
    let mut times = Vec::new();
    for (i, (x, y)) in batches.iter().enumerate() {
        let at = Instant::now();
        let (loss, g) = trainer.loss_and_grad(&ours, x, y);
        adam.step(&mut ours, g, settings.lr_at(i));
        if i > 0 {
            times.push(at.elapsed().as_secs_f64());
        }
        say(&format!(
            "hand-written step {i}: loss {loss:.4}, {:.3} s",
            at.elapsed().as_secs_f64()
        ));
    }
    Ok((candle, speed(times, bytes)))
}
