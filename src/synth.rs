//! Seeded generators of attention histories and KV tensors (placeholder, being written).

use crate::Matrix;

/// Generator settings for an attention history `A` (`steps x tokens`).
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionSpec {
    /// Query steps `S` (rows), `1..=tokens`.
    pub steps: usize,
    /// Tokens `T` (columns).
    pub tokens: usize,
    /// Seed of the generator.
    pub seed: u64,
}

impl Default for AttentionSpec {
    fn default() -> Self {
        Self { steps: 32, tokens: 128, seed: 1 }
    }
}

/// Generator settings for a KV tensor `X` (`tokens x channels`).
#[derive(Debug, Clone, PartialEq)]
pub struct KvSpec {
    /// Tokens `T` (rows).
    pub tokens: usize,
    /// Channels `d` (columns).
    pub channels: usize,
    /// Seed of the generator.
    pub seed: u64,
}

impl Default for KvSpec {
    fn default() -> Self {
        Self { tokens: 128, channels: 64, seed: 1 }
    }
}

/// Generates an attention history (placeholder: uniform causal rows).
pub fn attention(spec: &AttentionSpec) -> Result<Matrix, crate::ShapeError> {
    let (s, t) = (spec.steps, spec.tokens);
    let mut d = vec![0.0f32; s.saturating_mul(t)];
    for r in 0..s {
        let vis = t - s + r + 1;
        for c in 0..vis {
            d[r * t + c] = 1.0 / vis as f32;
        }
    }
    Matrix::new(s, t, d)
}

/// Generates keys (placeholder).
pub fn keys(spec: &KvSpec) -> Result<Matrix, crate::ShapeError> {
    let mut x = spec.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let n = spec.tokens.saturating_mul(spec.channels);
    let d = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    Matrix::new(spec.tokens, spec.channels, d)
}
