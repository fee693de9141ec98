//! The hand-written trainer computes the first trainer's mathematics: its gradient equals
//! candle's autograd on the same model, its forward pass equals kvlab's own (the page's), and
//! its AdamW equals candle's. On tiny shapes, so that the test trains nothing real.

use kvlab_core::lm::{Lm, LmConfig};
use kvlab_core::rng::Xoshiro256;
use kvlab_train::adamw::{AdamW, AdamWConfig};
use kvlab_train::grad::{Trainer, Workspace, BLOCK};
use kvlab_train::params::{Layout, Rope, Shape};
use kvlab_train::reference::Reference;

/// Two blocks of two heads, 80 tokens: more than one [`BLOCK`] of causal attention rows,
/// the last one partial.
const TINY: Shape = Shape {
    d_model: 16,
    layers: 2,
    heads: 2,
    mlp: 32,
    context: 80,
    vocab: 256,
    rope_base: 10_000.0,
};

/// Weights with every parameter away from its initial value (norms and biases too, so that
/// their gradients are exercised), and larger than the init's 0.02 so that attention is not
/// uniform.
fn weights(layout: &Layout, seed: u64) -> Vec<f32> {
    let mut rng = Xoshiro256::stream(seed, 7);
    let mut p = layout.init(&mut rng);
    for v in &mut p {
        *v = *v * 10.0 + (rng.uniform() as f32 - 0.5) * 0.2;
    }
    p
}

fn batch(n: usize, t: usize, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let mut rng = Xoshiro256::stream(seed, 9);
    let mut x = Vec::new();
    let mut y = Vec::new();
    for _ in 0..n {
        let bytes: Vec<u8> = (0..t).map(|_| 1 + rng.below(255) as u8).collect();
        x.push(0);
        x.extend_from_slice(&bytes[..t - 1]);
        y.extend_from_slice(&bytes);
    }
    (x, y)
}

#[test]
fn the_gradient_equals_candles_autograd_within_1e_4_relative() {
    const { assert!(TINY.context > BLOCK && !TINY.context.is_multiple_of(BLOCK)) };
    let layout = Layout::new(TINY);
    let params = weights(&layout, 3);
    let (x, y) = batch(3, TINY.context, 4);
    let reference = Reference::new(&layout, &params).unwrap();
    let (want_loss, want) = reference.loss_and_grad(&x, &y, 3).unwrap();
    // three sequences on two threads: shares of 2 and 1
    let mut trainer = Trainer::new(layout.clone(), 3, 2);
    assert_eq!(trainer.threads(), 2);
    let (loss, got) = trainer.loss_and_grad(&params, &x, &y);
    assert!(
        (loss - want_loss).abs() < 1e-5 * want_loss,
        "loss {loss} vs {want_loss}"
    );
    for (name, _, r) in &layout.entries {
        let (g, w) = (&got[r.clone()], &want[r.clone()]);
        let scale = w.iter().fold(0f32, |m, v| m.max(v.abs()));
        let err = g.iter().zip(w).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(scale > 1e-6, "{name}: the reference gradient is zero");
        assert!(
            err <= 1e-4 * scale,
            "{name}: largest difference {err:e} against the gradient's largest {scale:e}"
        );
    }
}

#[test]
fn the_forward_pass_equals_kvlabs_own_within_1e_4() {
    let layout = Layout::new(TINY);
    let params = weights(&layout, 5);
    let lm = Lm::new(
        LmConfig {
            d_model: TINY.d_model,
            layers: TINY.layers,
            heads: TINY.heads,
            mlp: TINY.mlp,
            context: TINY.context,
            vocab: TINY.vocab,
            rope_base: TINY.rope_base,
            norm_eps: 1e-5,
        },
        |name, shape| {
            let r = layout.range(name).ok_or_else(Vec::new)?;
            let (_, dims, _) = layout.entries.iter().find(|(n, _, _)| n == name).unwrap();
            if dims.as_slice() != shape {
                return Err(dims.clone());
            }
            Ok(params[r].to_vec())
        },
    )
    .unwrap();
    let (x, _) = batch(2, TINY.context, 6);
    let mut ws = Workspace::new(TINY, 2, TINY.context);
    ws.forward(&params, &layout, &Rope::new(&TINY), &x, 2);
    for s in 0..2 {
        let run = lm
            .forward(&x[s * TINY.context..(s + 1) * TINY.context])
            .unwrap();
        for i in 0..TINY.context {
            let row = run.logits.row(i).unwrap();
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let sum: f32 = row.iter().map(|v| (v - max).exp()).sum();
            for (j, &p) in ws.probs(s, i).iter().enumerate() {
                // log-probabilities: the logits up to each row's constant
                let want = f64::from(row[j] - max) - f64::from(sum).ln();
                let got = f64::from(p.max(1e-30)).ln();
                assert!(
                    (got - want).abs() < 1e-4 * want.abs().max(1.0) || want < -30.0,
                    "sequence {s}, position {i}, byte {j}: ln p {got} vs {want}"
                );
            }
        }
        // and the attention the probes read is the page's
        for l in 0..TINY.layers {
            for h in 0..TINY.heads {
                let want = &run.attention[l][h];
                let got = ws.attention(l, s, h);
                for i in 0..TINY.context {
                    for j in 0..TINY.context {
                        let (g, w) = (got[i * TINY.context + j], want.row(i).unwrap()[j]);
                        assert!(
                            (g - w).abs() < 1e-4,
                            "layer {l} head {h} row {i} col {j}: {g} vs {w}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn adamw_steps_as_candles_does() {
    // The same gradient into both optimizers: a loss linear in the weights, sum(theta * G),
    // whose gradient is G exactly (a model's gradient would differ in its last bits, which
    // AdamW's first steps, about lr * sign(g), amplify where g is near zero).
    let layout = Layout::new(TINY);
    let params = weights(&layout, 8);
    let c = AdamWConfig::default();
    let reference = Reference::new(&layout, &params).unwrap();
    let mut opt = reference.optimizer(c, 1e-3).unwrap();
    let mut ours = params.clone();
    let mut adam = AdamW::new(c, layout.len);
    let mut rng = Xoshiro256::stream(10, 0);
    for lr in [1e-3, 2e-3, 5e-4] {
        let g: Vec<f32> = (0..layout.len)
            .map(|_| rng.uniform() as f32 - 0.5)
            .collect();
        adam.step(&mut ours, &g, lr);
        reference.linear_step(&mut opt, &g, lr).unwrap();
    }
    let theirs = reference.params().unwrap();
    let err = ours
        .iter()
        .zip(&theirs)
        .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(
        err < 1e-6,
        "after three steps the weights differ by {err:e}"
    );
}
