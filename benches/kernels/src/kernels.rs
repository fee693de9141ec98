//! The core kernels the performance issue times, on its workloads, as one piece of code that
//! builds natively (`benches/core.rs` includes this file) and for wasm32 (this crate's module,
//! timed in Chromium by `benches/wasm.mjs`), so that the two timings are of the same code on the
//! same inputs.
//!
//! Each kernel returns a checksum of what it computed. kvlab's kernels give the same bits on
//! every target (native, wasm32, wasm32 + simd128: see `kvlab::quant::ErrorStats` and
//! `kvlab::select`), so the checksums of a native and a wasm run must be equal, and the harness
//! checks they are: a timing of a kernel that computed something else would be no comparison.

use kvlab::quant::{error_stats, quantize, quantize_reusing, QuantConfig};
use kvlab::select::{h2o, observation_scores, snapkv, Pooling};
use kvlab::synth::{attention, keys, AttentionPreset, AttentionSpec, KvSpec};
use kvlab::Matrix;

/// A workload's shape: attention `steps x tokens`, keys `tokens x channels`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Its name in the output.
    pub name: &'static str,
    /// Attention rows `S` (query steps).
    pub steps: usize,
    /// Tokens `T`.
    pub tokens: usize,
    /// Channels `d` of the keys.
    pub channels: usize,
}

/// The performance issue's W1 "lecture" and W2 "long context".
pub const WORKLOADS: [Shape; 2] = [
    Shape {
        name: "W1",
        steps: 64,
        tokens: 4096,
        channels: 128,
    },
    Shape {
        name: "W2",
        steps: 64,
        tokens: 32_768,
        channels: 128,
    },
];

/// The kernels by name, in the order [`Bench::run`] numbers them. The first word of each is how
/// `benches/numpy_compare.py` matches them with its numpy implementations.
pub const KERNELS: [&str; 4] = [
    "quantize+dequantize+stats (4-bit)",
    // what the page does on every quantization change (see `Lab`): the codes and x_hat written
    // into buffers kept from the previous call
    "quantize+dequantize+stats/reused (4-bit)",
    "h2o (B=T/8, r=T/32)",
    "snapkv (w=32, avg k=7)",
];

/// SnapKV's observation window (the last `w` attention rows).
pub const SNAPKV_WINDOW: usize = 32;
/// SnapKV's pooling of the scores.
pub const SNAPKV_POOLING: Pooling = Pooling::Avg { kernel: 7 };

/// One workload's inputs (the page's synthetic heavy-hitter attention and keys, seed 7) and the
/// buffers the "reused" kernel keeps between calls.
pub struct Bench {
    /// Attention `S x T`.
    pub attention: Matrix,
    /// Keys `T x d`.
    pub keys: Matrix,
    /// Budget `B = T / 8`.
    pub budget: usize,
    /// Recent window `r = T / 32`.
    pub recent: usize,
    /// 4-bit per-channel symmetric.
    pub config: QuantConfig,
    codes: Vec<i32>,
    hat: Vec<f32>,
}

impl Bench {
    /// The inputs of a workload of this shape; a message naming the shape when the generators
    /// refuse it.
    pub fn new(shape: Shape) -> Result<Self, String> {
        let attention = attention(&AttentionSpec::preset(
            AttentionPreset::HeavyHitters,
            shape.steps,
            shape.tokens,
            7,
        ))
        .map_err(|e| format!("attention {} x {}: {e}", shape.steps, shape.tokens))?;
        let keys = keys(&KvSpec {
            tokens: shape.tokens,
            channels: shape.channels,
            seed: 7,
            ..KvSpec::default()
        })
        .map_err(|e| format!("keys {} x {}: {e}", shape.tokens, shape.channels))?;
        Ok(Self {
            budget: shape.tokens / 8,
            recent: shape.tokens / 32,
            config: QuantConfig::per_channel_symmetric(4),
            hat: vec![0.0; keys.data().len()],
            codes: Vec::new(),
            attention,
            keys,
        })
    }

    /// Runs kernel `kernel` (an index into [`KERNELS`]) once and returns its checksum:
    /// for the quantization, the RMSE plus the middle element of `x_hat`; for a selection, the
    /// sum of the kept indices. `Err` for an index out of `0..KERNELS.len()` or a kernel's
    /// error (none on the workloads' inputs).
    pub fn run(&mut self, kernel: usize) -> Result<f64, String> {
        match kernel {
            0 => {
                let q = quantize(&self.keys, &self.config).map_err(|e| e.to_string())?;
                let hat = q.dequantize();
                let stats = error_stats(&self.keys, &q);
                Ok(stats.rmse + f64::from(hat.data()[hat.data().len() / 2]))
            }
            1 => {
                let codes = std::mem::take(&mut self.codes);
                let q =
                    quantize_reusing(&self.keys, &self.config, codes).map_err(|e| e.to_string())?;
                q.dequantize_into(&mut self.hat);
                let stats = error_stats(&self.keys, &q);
                self.codes = q.into_codes();
                Ok(stats.rmse + f64::from(self.hat[self.hat.len() / 2]))
            }
            2 => {
                let s =
                    h2o(&self.attention, self.budget, self.recent).map_err(|e| e.to_string())?;
                Ok(index_sum(&s.kept))
            }
            3 => {
                let scores = observation_scores(&self.attention, SNAPKV_WINDOW, SNAPKV_POOLING)
                    .map_err(|e| e.to_string())?;
                let s = snapkv(&scores, self.budget, self.recent).map_err(|e| e.to_string())?;
                Ok(index_sum(&s.kept))
            }
            other => Err(format!(
                "no kernel {other}: the kernels are 0..={}",
                KERNELS.len() - 1
            )),
        }
    }
}

/// The sum of token indices, exact in `f64` (below 2^53 for any `T` a page can hold).
fn index_sum(kept: &[usize]) -> f64 {
    kept.iter().map(|&i| i as f64).sum()
}
