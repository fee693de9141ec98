//! Seeded generators of attention histories and KV tensors (issue 3, "Generators"; the data
//! that note §3 selects from and note §2 quantizes, when the learner has no capture of their own).
//!
//! # Attention history `A` (`S x T`)
//!
//! Row `r` (0-based) of `S` rows is the attention of the query at position `p = T - S + r`. It is
//! causal: it sees the `v = p + 1` tokens `0..=p`, and the last row sees all `T`. Each row is a
//! softmax over its visible tokens, `a[r][i] = exp(l_i) / sum_{k<=p} exp(l_k)`, zero for `i > p`,
//! with logits
//!
//! ```text
//! l_i =  noise           * 2 * z_{r,i}                       z ~ N(0,1) per element
//!      + sink_strength   * g              if i < sinks        attention sinks (StreamingLLM)
//!      + local_strength  * g * e^{-(p-i)/local_width}         local band (decays with distance)
//!      + heavy_strength  * g * amp_j      if i = heavy_j      heavy hitters (H2O), amp_j in [0.9, 1)
//!      + needle_strength * g * 1.5        if i = needle and r >= S - needle_steps
//! g   = ln v
//! ```
//!
//! Every structured term is scaled by `g = ln v` so that a pattern takes about the same share of
//! a row at any context length: a bonus of `s * ln v` multiplies a token's weight by `v^s`, and
//! there are `v` tokens to compete with. At strength 1 one sink token weighs about as much as all
//! unstructured tokens together.
//!
//! Only a few logits per row (sinks, the band, heavy hitters, the needle) are structured; the rest
//! are pure noise. So a row is made in one pass that draws each noise weight `exp(2 noise z)`
//! straight from a precomputed inverse-CDF table (4097 quantiles, linear interpolation between
//! them, so the weights are continuous and `z` is effectively truncated at `±3.7`), sums the
//! weights in `f64`, then multiplies the few structured weights by `exp(bonus)`, fixing the sum,
//! and normalises. The band is cut at `10 * local_width` tokens, where its bonus is below
//! `e^-10 * g < 6e-4`. Logits are bounded (`-7.4 < l < 64`), so weights stay within `f32` and
//! no max-subtraction is needed.
//!
//! # KV tensors `X` (`T x d`)
//!
//! ```text
//! keys   k[t][j] = c_j * o_j * f_j(z_{t,j})          o_j = outlier_scale on outlier channels, else 1
//! values v[t][j] = c_j * s_t * f_j(z_{t,j})          s_t = exp(token_scale_variation * z_t)
//! f_j(z) = |z| with probability skew on skewed channels (all > 0 at skew = 1), else z
//! ```
//!
//! `c_j` in `[0.5, 1.5)` is a per-channel base scale. Keys have a few fixed outlier channels, as
//! KIVI and KVQuant report (so per-channel key quantization wins); values have no outlier channels
//! but a per-token scale `s_t` (so per-token value quantization wins). Skewed channels are where
//! an asymmetric grid beats a symmetric one.
//!
//! # Determinism across platforms
//!
//! Same seed and same spec give bit-identical data on native targets and on `wasm32`. Randomness
//! comes from our own xoshiro256** seeded by SplitMix64 (no `rand`, whose streams may change
//! between versions). `f64::exp` and `ln` from `std` are *not* used: they call the platform's
//! libm on native targets and Rust's libm port on `wasm32`, which may round differently in the
//! last bit; the `libm` crate's (pure Rust, `+ - * /` and bit operations, which IEEE 754 defines
//! exactly on every target) are. Rust never fuses `a * b + c` into an FMA on its own, and no
//! value here is ever NaN (whose bit patterns `wasm32` leaves open). `usize` is 32 bits on `wasm32`, so sizes are checked in `u64` and random
//! numbers never depend on `usize`. Normal variates invert one uniform with Acklam's rational
//! approximation of the inverse normal CDF (relative error < 1.2e-9, far below `f32`
//! resolution; only its tails need `ln` and `sqrt`), read for speed from a cubic-Hermite table in
//! the central 97% (within 5e-9 of it). [`fingerprint`] hashes a matrix so tests can compare
//! platforms.

use crate::{Matrix, ShapeError};
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;
use thiserror::Error;

/// Largest number of tokens `T` a generator accepts (256 Ki).
pub const MAX_TOKENS: usize = 262_144;
/// Largest number of channels `d` a KV generator accepts.
pub const MAX_CHANNELS: usize = 1024;
/// Largest number of values (`S * T` or `T * d`) one generated matrix may hold (64 Mi = 256 MiB
/// of `f32`).
pub const MAX_ELEMENTS: u64 = 64 * 1024 * 1024;
/// Largest number of attention-sink tokens.
pub const MAX_SINKS: usize = 64;
/// Largest number of heavy-hitter tokens.
pub const MAX_HEAVY: usize = 4096;
/// Largest local band decay length, in tokens.
pub const MAX_LOCAL_WIDTH: usize = 65_536;

/// Standard deviation of the logit noise at `noise = 1`.
const NOISE_SIGMA_MAX: f64 = 2.0;
/// Needle bonus relative to `g = ln v` at `needle_strength = 1`: above a sink's, so the needle
/// dominates the rows that look for it.
const NEEDLE_AMP: f64 = 1.5;
/// Heavy-hitter amplitudes `amp_j` are drawn in `[HEAVY_AMP_MIN, 1)`.
const HEAVY_AMP_MIN: f64 = 0.9;
/// The band is cut after this many decay lengths.
const BAND_CUT_WIDTHS: usize = 10;
/// Intervals of the noise-weight inverse-CDF table (a power of two: the index is the top bits).
const NOISE_TABLE_BITS: u32 = 12;

/// Why a generator refused its spec. Every message names the bad value and the valid range.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SynthError {
    /// `tokens` is 0 or above [`MAX_TOKENS`]. Pick a context length in `1..=262144`.
    #[error("tokens {tokens} is out of range: must be between 1 and {max}", max = MAX_TOKENS)]
    Tokens {
        /// The value given.
        tokens: usize,
    },
    /// `steps` is 0 or more than `tokens`: an attention history has at most one row per token.
    #[error("steps {steps} is out of range: must be in 1..=tokens ({tokens})")]
    Steps {
        /// The value given.
        steps: usize,
        /// The spec's `tokens`, the largest valid `steps`.
        tokens: usize,
    },
    /// `channels` is 0 or above [`MAX_CHANNELS`]. Real heads use 64..=256.
    #[error("channels {channels} is out of range: must be between 1 and {max}", max = MAX_CHANNELS)]
    Channels {
        /// The value given.
        channels: usize,
    },
    /// The matrix would hold more than [`MAX_ELEMENTS`] values; lower `tokens`, `steps` or
    /// `channels`.
    #[error(
        "{rows} x {cols} = {elements} values is too many: must be at most {max} (64 Mi); \
         use fewer tokens, steps or channels",
        max = MAX_ELEMENTS
    )]
    TooLarge {
        /// Rows asked for (`steps` or `tokens`).
        rows: usize,
        /// Columns asked for (`tokens` or `channels`).
        cols: usize,
        /// `rows * cols`.
        elements: u64,
    },
    /// A count (`sinks`, `heavy_count`, `local_width`, `needle_steps`, `outlier_channels`,
    /// `skewed_channels`) is outside `min..=max`; the range may depend on the shape (e.g.
    /// `heavy_count <= tokens`).
    #[error("{name} {value} is out of range: must be between {min} and {max}")]
    Count {
        /// The field's name.
        name: &'static str,
        /// The value given.
        value: usize,
        /// Smallest valid value.
        min: usize,
        /// Largest valid value.
        max: usize,
    },
    /// A real-valued knob is NaN, infinite or outside `min..=max`.
    #[error("{name} {value} is out of range: must be a finite number between {min} and {max}")]
    Knob {
        /// The field's name.
        name: &'static str,
        /// The value given.
        value: f32,
        /// Smallest valid value.
        min: f32,
        /// Largest valid value.
        max: f32,
    },
    /// A preset name that [`AttentionPreset::from_str`] does not know.
    #[error(
        "unknown attention preset {name:?}: must be one of sink-local, heavy-hitters, uniform, needle"
    )]
    UnknownPreset {
        /// The name given.
        name: String,
    },
    /// The generated data did not form a matrix (cannot happen for a validated spec).
    #[error(transparent)]
    Shape(#[from] ShapeError),
}

// ---------------------------------------------------------------------------------------------
// Attention

/// Generator settings for an attention history `A` (`steps x tokens`); see the module docs for
/// the logit formula each knob enters. Check with [`AttentionSpec::validate`].
///
/// ```
/// use kvlab_core::synth::{attention, AttentionPreset, AttentionSpec};
/// let spec = AttentionSpec::preset(AttentionPreset::SinkLocal, 8, 64, 7);
/// let a = attention(&spec).unwrap();
/// assert_eq!((a.rows(), a.cols()), (8, 64));
/// // Row 0 sees tokens 0..=56 only (causal), and sums to 1.
/// let row = a.row(0).unwrap();
/// assert_eq!(row[57], 0.0);
/// assert!((row.iter().map(|&x| x as f64).sum::<f64>() - 1.0).abs() < 1e-5);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionSpec {
    /// Query steps `S` (rows), `1..=tokens`. Row `r` sees tokens `0..=T - S + r`.
    pub steps: usize,
    /// Tokens `T` (columns), `1..=262144`; `steps * tokens <= 64 Mi`.
    pub tokens: usize,
    /// Seed of the generator; same seed and spec give bit-identical data on every platform.
    pub seed: u64,
    /// Number of attention-sink tokens at the start, `0..=min(64, tokens)`.
    pub sinks: usize,
    /// Sink logit bonus `sink_strength * ln v`, `0..=1`.
    pub sink_strength: f32,
    /// Local band peak bonus `local_strength * ln v` on the query's own position, `0..=1`.
    pub local_strength: f32,
    /// Local band decay length in tokens, `1..=65536`: the bonus falls by `1/e` every
    /// `local_width` tokens back from the query.
    pub local_width: usize,
    /// Number of heavy-hitter tokens, `0..=min(4096, tokens)`; placed by the seed after the
    /// sinks, among the tokens every row sees (or, when `steps` is close to `tokens`, the first
    /// half of the tokens) when there is room.
    pub heavy_count: usize,
    /// Heavy-hitter bonus `heavy_strength * amp_j * ln v` (`amp_j` in `[0.9, 1)`), `0..=1`.
    pub heavy_strength: f32,
    /// Needle bonus `1.5 * needle_strength * ln v` in the last `needle_steps` rows, `0..=1`.
    pub needle_strength: f32,
    /// How many of the last rows attend to the needle, `0..=steps` (0: no needle).
    pub needle_steps: usize,
    /// Logit noise: standard deviation `2 * noise`, `0..=1` (0: no noise).
    pub noise: f32,
}

impl Default for AttentionSpec {
    /// The "sink + local" preset, 32 steps over 128 tokens, seed 1.
    fn default() -> Self {
        Self::preset(AttentionPreset::SinkLocal, 32, 128, 1)
    }
}

/// Named settings of the attention knobs, each showing one pattern real models have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttentionPreset {
    /// Four attention sinks plus a local band (StreamingLLM's picture): keeping the first and
    /// the last tokens works.
    SinkLocal,
    /// Eight heavy hitters that every step attends to, a weak sink and band (H2O's picture):
    /// cumulative scores find them.
    HeavyHitters,
    /// No structure and no noise: every row is uniform over its visible tokens.
    Uniform,
    /// Sinks, band and heavy hitters, plus one far "needle" token that only the last
    /// `max(1, steps/32)` steps attend to: cumulative (H2O) scores under-rate it, a SnapKV
    /// observation window over the last steps catches it.
    Needle,
}

impl AttentionPreset {
    /// All presets, in menu order.
    pub const ALL: [AttentionPreset; 4] = [
        AttentionPreset::SinkLocal,
        AttentionPreset::HeavyHitters,
        AttentionPreset::Uniform,
        AttentionPreset::Needle,
    ];

    /// Stable kebab-case name (for URLs): `sink-local`, `heavy-hitters`, `uniform`, `needle`.
    pub fn name(self) -> &'static str {
        match self {
            AttentionPreset::SinkLocal => "sink-local",
            AttentionPreset::HeavyHitters => "heavy-hitters",
            AttentionPreset::Uniform => "uniform",
            AttentionPreset::Needle => "needle",
        }
    }
}

impl fmt::Display for AttentionPreset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AttentionPreset {
    type Err = SynthError;

    /// Parses a [`AttentionPreset::name`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| SynthError::UnknownPreset { name: s.to_owned() })
    }
}

impl AttentionSpec {
    /// The knobs of preset `p` for a `steps x tokens` history. Counts are clamped to what the
    /// shape allows, so the result is valid whenever `steps` and `tokens` are.
    pub fn preset(p: AttentionPreset, steps: usize, tokens: usize, seed: u64) -> Self {
        let base = Self {
            steps,
            tokens,
            seed,
            sinks: 0,
            sink_strength: 0.0,
            local_strength: 0.0,
            local_width: 16,
            heavy_count: 0,
            heavy_strength: 0.0,
            needle_strength: 0.0,
            needle_steps: 0,
            noise: 0.0,
        };
        match p {
            AttentionPreset::SinkLocal => Self {
                sinks: 4.min(tokens),
                sink_strength: 0.9,
                local_strength: 0.8,
                local_width: 16,
                noise: 0.35,
                ..base
            },
            AttentionPreset::HeavyHitters => Self {
                sinks: 1.min(tokens),
                sink_strength: 0.3,
                local_strength: 0.4,
                local_width: 8,
                heavy_count: 8.min(tokens),
                heavy_strength: 0.9,
                noise: 0.35,
                ..base
            },
            AttentionPreset::Uniform => base,
            AttentionPreset::Needle => Self {
                sinks: 4.min(tokens),
                sink_strength: 0.9,
                local_strength: 0.6,
                local_width: 8,
                heavy_count: 4.min(tokens),
                heavy_strength: 1.0,
                needle_strength: 0.9,
                needle_steps: (steps / 32).clamp(1, steps.max(1)),
                noise: 0.35,
                ..base
            },
        }
    }

    /// Checks every field against its documented range, shape first.
    pub fn validate(&self) -> Result<(), SynthError> {
        let (s, t) = (self.steps, self.tokens);
        check_tokens(t)?;
        if s == 0 || s > t {
            return Err(SynthError::Steps {
                steps: s,
                tokens: t,
            });
        }
        check_elements(s, t)?;
        check_count("sinks", self.sinks, 0, MAX_SINKS.min(t))?;
        check_count("local_width", self.local_width, 1, MAX_LOCAL_WIDTH)?;
        check_count("heavy_count", self.heavy_count, 0, MAX_HEAVY.min(t))?;
        check_count("needle_steps", self.needle_steps, 0, s)?;
        check_knob("sink_strength", self.sink_strength, 0.0, 1.0)?;
        check_knob("local_strength", self.local_strength, 0.0, 1.0)?;
        check_knob("heavy_strength", self.heavy_strength, 0.0, 1.0)?;
        check_knob("needle_strength", self.needle_strength, 0.0, 1.0)?;
        check_knob("noise", self.noise, 0.0, 1.0)?;
        Ok(())
    }
}

/// Where the seed put the structured tokens of an attention history.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionLayout {
    /// Sink tokens are `0..sinks`.
    pub sinks: usize,
    /// Heavy-hitter token indices, ascending.
    pub heavy: Vec<usize>,
    /// Amplitude `amp_j` in `[0.9, 1)` of each heavy hitter, same order as `heavy`.
    pub heavy_amp: Vec<f32>,
    /// The needle token, when `needle_steps > 0` and `needle_strength > 0`: drawn from the first
    /// half of the tokens the needle rows see (far from their queries), after the sinks and not
    /// a heavy hitter when there is room.
    pub needle: Option<usize>,
    /// First row that attends to the needle (`steps - needle_steps`).
    pub needle_from_row: usize,
}

/// The structured tokens [`attention`] uses for `spec` (same seed, same layout).
pub fn attention_layout(spec: &AttentionSpec) -> Result<AttentionLayout, SynthError> {
    spec.validate()?;
    Ok(layout_unchecked(spec))
}

fn layout_unchecked(spec: &AttentionSpec) -> AttentionLayout {
    let (s, t) = (spec.steps, spec.tokens);
    let mut rng = Rng::stream(spec.seed, STREAM_ATT_LAYOUT);
    let sinks = spec.sinks.min(t);
    // Heavy hitters go after the sinks among the tokens every row sees (0..t-s+1), so every
    // step can attend to them; when those are too few (s close to t), among the first half of
    // the tokens (seen by at least half the rows), else anywhere.
    let k = spec.heavy_count.min(t);
    let region = (t - s + 1).max(t / 2);
    let (lo, hi) = if region.saturating_sub(sinks) >= k {
        (sinks, region)
    } else if t - sinks >= k {
        (sinks, t)
    } else {
        (0, t)
    };
    let heavy = sample_distinct(&mut rng, lo, hi, k);
    let heavy_amp = heavy
        .iter()
        .map(|_| (HEAVY_AMP_MIN + (1.0 - HEAVY_AMP_MIN) * rng.uniform()) as f32)
        .collect();
    let needle_steps = spec.needle_steps.min(s);
    let needle = if needle_steps > 0 && spec.needle_strength > 0.0 {
        // Far from the queries that look for it: in the first half of what the first of them
        // sees, after the sinks, and (when there is room) not a heavy hitter.
        let seen = t - needle_steps + 1;
        let (mut lo, mut hi) = (sinks, seen / 2);
        if hi <= lo {
            (lo, hi) = (0, seen);
        }
        let mut pos = lo + rng.below((hi - lo) as u64) as usize;
        for _ in 0..32 {
            if heavy.binary_search(&pos).is_err() {
                break;
            }
            pos = lo + rng.below((hi - lo) as u64) as usize;
        }
        Some(pos)
    } else {
        None
    };
    AttentionLayout {
        sinks,
        heavy,
        heavy_amp,
        needle,
        needle_from_row: s - needle_steps,
    }
}

/// Generates an attention history `A` (`steps x tokens`): causal rows, each a softmax
/// distribution over its visible tokens (see the module docs for the logits).
///
/// Errors when the spec is out of range ([`AttentionSpec::validate`]). Runs in
/// `O(S * T)` with one random draw and no `exp` per unstructured element.
pub fn attention(spec: &AttentionSpec) -> Result<Matrix, SynthError> {
    spec.validate()?;
    let layout = layout_unchecked(spec);
    let (s, t) = (spec.steps, spec.tokens);
    let table = NoiseTable::new(NOISE_SIGMA_MAX * f64::from(spec.noise));
    // decay[dd] = e^{-dd / local_width} for the band's distances, dd < 10 * local_width.
    let band_len = if spec.local_strength > 0.0 {
        spec.local_width.saturating_mul(BAND_CUT_WIDTHS).min(t)
    } else {
        0
    };
    let inv_w = 1.0 / spec.local_width as f64;
    let decay: Vec<f64> = (0..band_len).map(|dd| exp(-(dd as f64) * inv_w)).collect();
    let sink_s = f64::from(spec.sink_strength);
    let local_s = f64::from(spec.local_strength);
    let heavy_s = f64::from(spec.heavy_strength);
    let needle_s = f64::from(spec.needle_strength) * NEEDLE_AMP;

    let mut rng = Rng::stream(spec.seed, STREAM_ATT_ROWS);
    let mut data = vec![0.0f32; s * t];
    for (r, full_row) in data.chunks_exact_mut(t).enumerate() {
        let p = t - s + r;
        let v = p + 1;
        let row = &mut full_row[..v];
        let g = ln(v as f64);
        let mut sum = table.fill(&mut rng, row);
        // Multiplies token i's weight by e^{bonus}, keeping `sum` in step.
        let mut bump = |row: &mut [f32], i: usize, bonus: f64| {
            if bonus > 0.0 {
                if let Some(x) = row.get_mut(i) {
                    let old = f64::from(*x);
                    let new = (old * exp(bonus)) as f32;
                    sum += f64::from(new) - old;
                    *x = new;
                }
            }
        };
        if sink_s > 0.0 {
            for i in 0..layout.sinks.min(v) {
                bump(row, i, sink_s * g);
            }
        }
        for (dd, d) in decay.iter().take(v).enumerate() {
            bump(row, p - dd, local_s * g * d);
        }
        if heavy_s > 0.0 {
            for (&i, &amp) in layout.heavy.iter().zip(&layout.heavy_amp) {
                if i >= v {
                    break;
                }
                bump(row, i, heavy_s * f64::from(amp) * g);
            }
        }
        if let Some(i) = layout.needle {
            if r >= layout.needle_from_row {
                bump(row, i, needle_s * g);
            }
        }
        let inv = 1.0 / sum;
        for x in row.iter_mut() {
            *x = (f64::from(*x) * inv) as f32;
        }
    }
    Ok(Matrix::new(s, t, data)?)
}

/// Inverse-CDF table of the noise weight `w = exp(sigma * z)`, `z ~ N(0, 1)`: `q[k]` is `w` at
/// probability `(k + 0.5) / (N + 1)`, `k = 0..=N`, `N = 2^12`. A draw takes an interval by the top
/// 12 bits and a point inside it by the next 40 bits, so weights are continuous.
struct NoiseTable {
    q: Vec<f64>,
    dq: Vec<f64>,
    flat: bool,
}

impl NoiseTable {
    fn new(sigma: f64) -> Self {
        let n = 1usize << NOISE_TABLE_BITS;
        let flat = sigma == 0.0;
        let q: Vec<f64> = (0..=n)
            .map(|k| {
                if flat {
                    1.0
                } else {
                    exp(sigma * inverse_normal_cdf((k as f64 + 0.5) / (n as f64 + 1.0)))
                }
            })
            .collect();
        let dq = q.windows(2).map(|w| w[1] - w[0]).collect();
        Self { q, dq, flat }
    }

    /// Writes one weight per element of `row` and returns their sum (of the stored `f32`s).
    fn fill(&self, rng: &mut Rng, row: &mut [f32]) -> f64 {
        if self.flat {
            row.fill(1.0);
            return row.len() as f64;
        }
        const FRAC_SCALE: f64 = 1.0 / (1u64 << 40) as f64;
        let mut sum = 0.0f64;
        for x in row.iter_mut() {
            let u = rng.next_u64();
            let k = (u >> (64 - NOISE_TABLE_BITS)) as usize;
            let frac = ((u >> (64 - NOISE_TABLE_BITS - 40)) & ((1 << 40) - 1)) as f64 * FRAC_SCALE;
            let (q, dq) = match (self.q.get(k), self.dq.get(k)) {
                (Some(&q), Some(&dq)) => (q, dq),
                _ => (1.0, 0.0), // unreachable: k < 2^12 = dq.len()
            };
            let w = (q + frac * dq) as f32;
            *x = w;
            sum += f64::from(w);
        }
        sum
    }
}

// ---------------------------------------------------------------------------------------------
// KV tensors

/// Generator settings for a KV tensor `X` (`tokens x channels`), used for both [`keys`] and
/// [`values`] (they draw from different streams, so `K != V`). Check with [`KvSpec::validate`].
///
/// ```
/// use kvlab_core::synth::{keys, kv_layout, values, KvSpec};
/// let spec = KvSpec { skewed_channels: 2, skew: 1.0, ..KvSpec::default() };
/// let (k, v) = (keys(&spec).unwrap(), values(&spec).unwrap());
/// assert_eq!((k.rows(), k.cols()), (128, 64));
/// let layout = kv_layout(&spec).unwrap();
/// let j = layout.skewed_channels[0];
/// assert!(v.column(j).unwrap().iter().all(|&x| x >= 0.0));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct KvSpec {
    /// Tokens `T` (rows), `1..=262144`; `tokens * channels <= 64 Mi`.
    pub tokens: usize,
    /// Channels `d` (columns), `1..=1024`.
    pub channels: usize,
    /// Seed of the generator; same seed and spec give bit-identical data on every platform.
    pub seed: u64,
    /// Number of key outlier channels (fixed per seed), `0..=channels`. Keys only.
    pub outlier_channels: usize,
    /// Magnitude multiplier `o_j` of the outlier channels, `1..=100` (KIVI/KVQuant see ~10x).
    pub outlier_scale: f32,
    /// Log-standard deviation of the per-token value scale `s_t = exp(variation * z_t)`,
    /// `0..=2` (0: all tokens alike). Values only.
    pub token_scale_variation: f32,
    /// Number of skewed channels (fixed per seed, drawn independently of the outliers),
    /// `0..=channels`. Keys and values.
    pub skewed_channels: usize,
    /// Skew of those channels, `0..=1`: the share of their values folded to `|z|` (so
    /// `(1 - skew) / 2` of them are negative). At 1 they are all positive (half-normal), where an
    /// asymmetric grid needs half the range of a symmetric one. The fold reuses bits of the same
    /// draw, so moving `skew` changes only the signs of some values.
    pub skew: f32,
}

impl Default for KvSpec {
    /// 128 tokens x 64 channels, seed 1, 4 key outlier channels at 10x, value token-scale
    /// variation 0.5, no skewed channels (skew 1 once some are asked for).
    fn default() -> Self {
        Self {
            tokens: 128,
            channels: 64,
            seed: 1,
            outlier_channels: 4,
            outlier_scale: 10.0,
            token_scale_variation: 0.5,
            skewed_channels: 0,
            skew: 1.0,
        }
    }
}

impl KvSpec {
    /// Checks every field against its documented range, shape first.
    pub fn validate(&self) -> Result<(), SynthError> {
        check_tokens(self.tokens)?;
        if self.channels == 0 || self.channels > MAX_CHANNELS {
            return Err(SynthError::Channels {
                channels: self.channels,
            });
        }
        check_elements(self.tokens, self.channels)?;
        check_count("outlier_channels", self.outlier_channels, 0, self.channels)?;
        check_count("skewed_channels", self.skewed_channels, 0, self.channels)?;
        check_knob("outlier_scale", self.outlier_scale, 1.0, 100.0)?;
        check_knob(
            "token_scale_variation",
            self.token_scale_variation,
            0.0,
            2.0,
        )?;
        check_knob("skew", self.skew, 0.0, 1.0)?;
        Ok(())
    }
}

/// Which channels the seed made special, and the per-channel base scales.
#[derive(Debug, Clone, PartialEq)]
pub struct KvLayout {
    /// Key outlier channels, ascending.
    pub outlier_channels: Vec<usize>,
    /// Skewed channels, ascending.
    pub skewed_channels: Vec<usize>,
    /// Base scale `c_j` in `[0.5, 1.5)` of every channel.
    pub channel_scale: Vec<f32>,
}

/// The channel layout [`keys`] and [`values`] use for `spec`.
pub fn kv_layout(spec: &KvSpec) -> Result<KvLayout, SynthError> {
    spec.validate()?;
    Ok(kv_layout_unchecked(spec))
}

fn kv_layout_unchecked(spec: &KvSpec) -> KvLayout {
    let d = spec.channels;
    let mut rng = Rng::stream(spec.seed, STREAM_KV_LAYOUT);
    let channel_scale = (0..d).map(|_| (0.5 + rng.uniform()) as f32).collect();
    let outlier_channels = sample_distinct(&mut rng, 0, d, spec.outlier_channels.min(d));
    let skewed_channels = sample_distinct(&mut rng, 0, d, spec.skewed_channels.min(d));
    KvLayout {
        outlier_channels,
        skewed_channels,
        channel_scale,
    }
}

/// Per-channel factors `(m_j, fold_j)`: `x = m_j * |z|` when the draw's coin is below `fold_j`
/// (of [`COIN_SIDES`]), else `m_j * z`.
fn channel_factors(spec: &KvSpec, layout: &KvLayout, outliers: bool) -> Vec<(f64, u64)> {
    let fold = (f64::from(spec.skew) * COIN_SIDES as f64 + 0.5) as u64;
    let mut f: Vec<(f64, u64)> = layout
        .channel_scale
        .iter()
        .map(|&c| (f64::from(c), 0))
        .collect();
    if outliers {
        for &j in &layout.outlier_channels {
            if let Some(e) = f.get_mut(j) {
                e.0 *= f64::from(spec.outlier_scale);
            }
        }
    }
    for &j in &layout.skewed_channels {
        if let Some(e) = f.get_mut(j) {
            e.1 = fold;
        }
    }
    f
}

/// Generates keys `K` (`tokens x channels`): `k[t][j] = c_j * o_j * f_j(z)`, with the outlier
/// channels of [`kv_layout`] `outlier_scale` times larger. Errors when the spec is out of range.
pub fn keys(spec: &KvSpec) -> Result<Matrix, SynthError> {
    spec.validate()?;
    let layout = kv_layout_unchecked(spec);
    let f = channel_factors(spec, &layout, true);
    let table = normal_table();
    let mut rng = Rng::stream(spec.seed, STREAM_KEYS);
    let mut data = vec![0.0f32; spec.tokens * spec.channels];
    for row in data.chunks_exact_mut(spec.channels) {
        for (x, &(m, fold)) in row.iter_mut().zip(&f) {
            let (z, coin) = rng.normal_and_coin(table);
            *x = (m * if coin < fold { z.abs() } else { z }) as f32;
        }
    }
    Ok(Matrix::new(spec.tokens, spec.channels, data)?)
}

/// Generates values `V` (`tokens x channels`): `v[t][j] = c_j * s_t * f_j(z)`, with a per-token
/// scale `s_t = exp(token_scale_variation * z_t)` and no outlier channels. Errors when the spec is
/// out of range.
pub fn values(spec: &KvSpec) -> Result<Matrix, SynthError> {
    spec.validate()?;
    let layout = kv_layout_unchecked(spec);
    let f = channel_factors(spec, &layout, false);
    let variation = f64::from(spec.token_scale_variation);
    let table = normal_table();
    let mut rng = Rng::stream(spec.seed, STREAM_VALUES);
    let mut data = vec![0.0f32; spec.tokens * spec.channels];
    for row in data.chunks_exact_mut(spec.channels) {
        let s_t = exp(variation * rng.normal());
        for (x, &(m, fold)) in row.iter_mut().zip(&f) {
            let (z, coin) = rng.normal_and_coin(table);
            *x = (s_t * m * if coin < fold { z.abs() } else { z }) as f32;
        }
    }
    Ok(Matrix::new(spec.tokens, spec.channels, data)?)
}

// ---------------------------------------------------------------------------------------------
// Fingerprint

/// 64-bit FNV-1a hash of a matrix: its `rows` and `cols` (each as `u64` little-endian), then every
/// value's `f32` bit pattern (little-endian), row-major. Equal fingerprints mean (with
/// overwhelming probability) bit-identical matrices; tests compare them across platforms.
///
/// ```
/// use kvlab_core::{synth::fingerprint, Matrix};
/// let a = Matrix::new(1, 2, vec![0.5, 0.25]).unwrap();
/// let b = Matrix::new(2, 1, vec![0.5, 0.25]).unwrap();
/// assert_ne!(fingerprint(&a), fingerprint(&b));
/// ```
pub fn fingerprint(m: &Matrix) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(PRIME);
        }
    };
    eat(&(m.rows() as u64).to_le_bytes());
    eat(&(m.cols() as u64).to_le_bytes());
    for &x in m.data() {
        eat(&x.to_bits().to_le_bytes());
    }
    h
}

// ---------------------------------------------------------------------------------------------
// Validation helpers

fn check_tokens(t: usize) -> Result<(), SynthError> {
    if t == 0 || t > MAX_TOKENS {
        return Err(SynthError::Tokens { tokens: t });
    }
    Ok(())
}

fn check_elements(rows: usize, cols: usize) -> Result<(), SynthError> {
    // u64: on wasm32 `usize` is 32 bits and 262144^2 would overflow it.
    let elements = (rows as u64).saturating_mul(cols as u64);
    if elements > MAX_ELEMENTS {
        return Err(SynthError::TooLarge {
            rows,
            cols,
            elements,
        });
    }
    Ok(())
}

fn check_count(name: &'static str, value: usize, min: usize, max: usize) -> Result<(), SynthError> {
    if value < min || value > max {
        return Err(SynthError::Count {
            name,
            value,
            min,
            max,
        });
    }
    Ok(())
}

fn check_knob(name: &'static str, value: f32, min: f32, max: f32) -> Result<(), SynthError> {
    if !(value.is_finite() && value >= min && value <= max) {
        return Err(SynthError::Knob {
            name,
            value,
            min,
            max,
        });
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Random numbers and portable math

const STREAM_ATT_LAYOUT: u64 = 0x6a09_e667_f3bc_c908;
const STREAM_ATT_ROWS: u64 = 0xbb67_ae85_84ca_a73b;
const STREAM_KV_LAYOUT: u64 = 0x3c6e_f372_fe94_f82b;
const STREAM_KEYS: u64 = 0xa54f_f53a_5f1d_36f1;
const STREAM_VALUES: u64 = 0x510e_527f_ade6_82d1;

/// The generators' random numbers: [`crate::rng`]'s xoshiro256**, one stream per purpose.
type Rng = crate::rng::Xoshiro256;

/// Normal draws on top of the uniform generator (the tables are the generators' own).
trait Normal {
    /// Standard normal.
    fn normal(&mut self) -> f64;
    /// A standard normal and an independent coin of [`COIN_SIDES`] sides from the same draw.
    fn normal_and_coin(&mut self, table: &[[f64; 4]]) -> (f64, u64);
}

impl Normal for Rng {
    /// Standard normal by inversion of one open uniform `p = (k + 0.5) / 2^53`: in the central
    /// `p` in `[1/64, 63/64)` (97% of draws) by the cubic-Hermite table of [`normal_table`], in
    /// the tails by [`inverse_normal_cdf`] directly.
    fn normal(&mut self) -> f64 {
        self.normal_and_coin(normal_table()).0
    }

    /// A standard normal and, from the 11 bits of the same draw it does not use, a fair coin
    /// with [`COIN_SIDES`] sides (`0..2048`), independent of it. `table` is [`normal_table`],
    /// passed in so hot loops fetch it once.
    fn normal_and_coin(&mut self, table: &[[f64; 4]]) -> (f64, u64) {
        let u = self.next_u64();
        (normal_from_bits(table, u >> 11), u & (COIN_SIDES - 1))
    }
}

/// The normal whose uniform is `p = (u + 0.5) / 2^53`, `u < 2^53`; `table` is [`normal_table`].
fn normal_from_bits(table: &[[f64; 4]], u: u64) -> f64 {
    let k = (u >> NORMAL_FRAC_BITS) as usize;
    if let Some(c) = table.get(k.wrapping_sub(NORMAL_TAIL)) {
        let t = ((u & ((1 << NORMAL_FRAC_BITS) - 1)) as f64 + 0.5)
            * (1.0 / (1u64 << NORMAL_FRAC_BITS) as f64);
        c[0] + t * (c[1] + t * (c[2] + t * c[3]))
    } else {
        inverse_normal_cdf((u as f64 + 0.5) * (1.0 / (1u64 << 53) as f64))
    }
}

/// Sides of the coin [`Rng::normal_and_coin`] returns (the 11 low bits of a draw).
const COIN_SIDES: u64 = 1 << 11;
/// Intervals of the normal quantile table: `p` in `[k/4096, (k+1)/4096)`.
const NORMAL_INTERVALS: usize = 4096;
/// Bits of `p` below the interval index (53 - 12).
const NORMAL_FRAC_BITS: u32 = 41;
/// Intervals at each end left to the exact tail formula (`p < 1/64` or `p >= 63/64`).
const NORMAL_TAIL: usize = 64;

/// Cubic-Hermite pieces of the inverse normal CDF on the central intervals
/// `k = 64..4032`: `z(p) = c0 + t (c1 + t (c2 + t c3))`, `p = (k + t) / 4096`, matching
/// [`inverse_normal_cdf`] and its slope `dz/dp = sqrt(2 pi) e^{z^2/2}` at both ends of each
/// interval (within 5e-9 of it). Built once from portable arithmetic, so the table is
/// the same on every platform; it replaces a division and two polynomials per draw by one cubic.
fn normal_table() -> &'static [[f64; 4]] {
    static TABLE: OnceLock<Vec<[f64; 4]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        const SQRT_2PI: f64 = 2.506_628_274_631_000_5;
        let h = 1.0 / NORMAL_INTERVALS as f64;
        let node = |k: usize| {
            let z = inverse_normal_cdf(k as f64 * h);
            (z, h * SQRT_2PI * exp(0.5 * z * z))
        };
        (NORMAL_TAIL..NORMAL_INTERVALS - NORMAL_TAIL)
            .map(|k| {
                let ((z0, m0), (z1, m1)) = (node(k), node(k + 1));
                let dz = z1 - z0;
                [z0, m0, 3.0 * dz - 2.0 * m0 - m1, m0 + m1 - 2.0 * dz]
            })
            .collect()
    })
}

/// `k` distinct integers from `lo..hi` (`k <= hi - lo`), ascending, by Floyd's algorithm:
/// `O(k log k)` whatever the range.
fn sample_distinct(rng: &mut Rng, lo: usize, hi: usize, k: usize) -> Vec<usize> {
    let n = hi.saturating_sub(lo);
    let k = k.min(n);
    let mut set = BTreeSet::new();
    for j in n - k..n {
        let x = rng.below(j as u64 + 1) as usize;
        if !set.insert(x) {
            set.insert(j);
        }
    }
    set.into_iter().map(|x| x + lo).collect()
}

/// `e^x`: libm's (a pure-Rust port of musl's), so the same bits on native targets and on
/// `wasm32` (std's `f64::exp` calls the platform's libm natively).
fn exp(x: f64) -> f64 {
    libm::exp(x)
}

/// Natural log (libm's, as [`exp`]).
fn ln(x: f64) -> f64 {
    libm::log(x)
}

/// Inverse standard normal CDF by Acklam's rational approximation (relative error < 1.15e-9),
/// for `p` in `(0, 1)`. Only the tails (`p < 0.02425` or `p > 0.97575`) need `ln` and `sqrt`.
fn inverse_normal_cdf(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const P_LOW: f64 = 0.02425;
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < P_LOW {
        tail((-2.0 * ln(p)).sqrt())
    } else if p <= 1.0 - P_LOW {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -tail((-2.0 * ln(1.0 - p)).sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_normal_cdf_is_accurate_and_monotone() {
        // Known quantiles.
        for (p, z) in [
            (0.5, 0.0),
            (0.975, 1.959_963_984_540_054),
            (0.841_344_746_068_542_9, 1.0),
            (0.001, -3.090_232_306_167_813_5),
            (1e-10, -6.361_340_902_404_056),
        ] {
            assert!(
                (inverse_normal_cdf(p) - z).abs() < 2e-9 * z.abs().max(1.0),
                "p {p}: {} vs {z}",
                inverse_normal_cdf(p)
            );
        }
        let mut last = f64::NEG_INFINITY;
        for k in 1..10_000 {
            let z = inverse_normal_cdf(k as f64 / 10_000.0);
            assert!(z > last);
            last = z;
        }
    }

    #[test]
    fn normal_table_matches_the_exact_quantile() {
        let mut rng = Rng::stream(1, 1);
        let mut worst = 0.0f64;
        for _ in 0..1_000_000 {
            let u = rng.next_u64() >> 11;
            let z = normal_from_bits(normal_table(), u);
            let exact = inverse_normal_cdf((u as f64 + 0.5) / (1u64 << 53) as f64);
            worst = worst.max((z - exact).abs());
        }
        println!("worst |table - Acklam| = {worst:e}");
        assert!(worst < 5e-9, "{worst}");
    }

    #[test]
    fn normals_have_unit_moments() {
        let mut rng = Rng::stream(3, 4);
        let n = 200_000;
        let (mut s1, mut s2) = (0.0, 0.0);
        for _ in 0..n {
            let z = rng.normal();
            s1 += z;
            s2 += z * z;
        }
        let mean = s1 / n as f64;
        let var = s2 / n as f64 - mean * mean;
        assert!(
            mean.abs() < 0.01 && (var - 1.0).abs() < 0.02,
            "{mean} {var}"
        );
    }

    #[test]
    fn sample_distinct_is_distinct_sorted_and_in_range() {
        let mut rng = Rng::stream(9, 9);
        for (lo, hi, k) in [(0, 10, 10), (5, 6, 1), (3, 1000, 17), (0, 5, 0), (2, 4, 9)] {
            let v = sample_distinct(&mut rng, lo, hi, k);
            assert_eq!(v.len(), k.min(hi - lo));
            assert!(v.windows(2).all(|w| w[0] < w[1]));
            assert!(v.iter().all(|&x| x >= lo && x < hi));
        }
    }

    #[test]
    fn noise_table_is_monotone_with_median_one() {
        let t = NoiseTable::new(1.0);
        assert!(t.q.windows(2).all(|w| w[0] < w[1]));
        assert!((t.q[1 << (NOISE_TABLE_BITS - 1)] - 1.0).abs() < 1e-12);
        assert!(NoiseTable::new(0.0).q.iter().all(|&q| q == 1.0));
    }

    #[test]
    fn uniform_preset_gives_exact_uniform_rows() {
        let spec = AttentionSpec::preset(AttentionPreset::Uniform, 3, 5, 1);
        let a = attention(&spec).unwrap();
        assert_eq!(
            a.row(0).unwrap(),
            &[1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 0.0, 0.0]
        );
        assert_eq!(a.row(2).unwrap(), &[0.2; 5]);
    }

    #[test]
    fn layout_places_structure_where_documented() {
        let spec = AttentionSpec::preset(AttentionPreset::Needle, 64, 1024, 5);
        let l = attention_layout(&spec).unwrap();
        assert_eq!(l.sinks, 4);
        assert_eq!(l.heavy.len(), 4);
        let shared = 1024 - 64 + 1;
        assert!(l.heavy.iter().all(|&h| (4..shared).contains(&h)));
        let needle = l.needle.unwrap();
        let seen = 1024 - spec.needle_steps + 1;
        assert!((4..seen / 2).contains(&needle) && !l.heavy.contains(&needle));
        assert_eq!(spec.needle_steps, 2);
        assert_eq!(l.needle_from_row, 62);
        assert!(l.heavy_amp.iter().all(|&a| (0.9..1.0).contains(&a)));
    }

    #[test]
    fn presets_parse_by_name() {
        for p in AttentionPreset::ALL {
            assert_eq!(p.name().parse::<AttentionPreset>(), Ok(p));
            assert_eq!(p.to_string(), p.name());
        }
        let e = "sinks".parse::<AttentionPreset>().unwrap_err();
        assert!(e.to_string().contains("\"sinks\""));
    }

    #[test]
    fn presets_are_valid_for_tiny_shapes() {
        for p in AttentionPreset::ALL {
            for (s, t) in [(1, 1), (1, 2), (2, 2), (5, 5), (1, 100)] {
                let spec = AttentionSpec::preset(p, s, t, 0);
                assert_eq!(spec.validate(), Ok(()), "{p} {s}x{t}");
                attention(&spec).unwrap();
            }
        }
        assert_eq!(AttentionSpec::default().validate(), Ok(()));
        assert_eq!(KvSpec::default().validate(), Ok(()));
    }
}
