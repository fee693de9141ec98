//! Byte accounting: the note's budget (§1), `R_quant` (§2.4), `R_token` (§3.3) and
//! `R_overall` (§4), with metadata and index bytes counted (math-spec §1).
//!
//! ```text
//! M_KV,final = T_kept x bytes_token_codes + M_meta + M_index
//! bytes_token_fp = 2 x L x n_kv_heads x d_head x s_fp
//! R_overall = T_total x bytes_token_fp / M_KV,final
//! ```
//!
//! Scales and zero points are counted once, in `M_meta` (the note's `bytes_token_quant` is
//! reported too: codes plus the per-token share of the metadata). Codes are bit-packed. A
//! sliding-window layer never holds more than its window; MLA stores one latent per token per
//! layer and no V.

use crate::quant::{metadata_bytes, packed_code_bytes, Granularity, MetaDtype, Scheme};
use thiserror::Error;

/// Why a budget could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BudgetError {
    /// A model dimension is zero.
    #[error("{field} {value} is out of range: must be between 1 and {max}")]
    Dimension {
        /// Which field (`layers`, `n_kv_heads`, `d_head`, `batch`, ...).
        field: &'static str,
        /// The value given.
        value: u64,
        /// Largest allowed value.
        max: u64,
    },
    /// `T_kept` outside `1..=T_total`.
    #[error(
        "kept tokens {kept} is out of range: must be between 1 and {total} (the total tokens)"
    )]
    Kept {
        /// Kept tokens.
        kept: u64,
        /// Total tokens.
        total: u64,
    },
    /// Bits outside the scheme's range.
    #[error(
        "bits {bits} is out of range: must be between {min} and 16 for {scheme:?} quantization"
    )]
    Bits {
        /// Bits.
        bits: u8,
        /// Scheme.
        scheme: Scheme,
        /// Smallest valid value.
        min: u8,
    },
    /// Group size zero.
    #[error("group size 0 is out of range: must be at least 1")]
    GroupSize,
    /// A byte count above [`MAX_BYTES`] (8 PiB): more than the page can show exactly (a
    /// JavaScript number holds integers exactly up to 2^53 - 1).
    #[error("the cache size is above 2^53 - 1 bytes (8 PiB), the largest byte count shown exactly: reduce batch, context or the model's dimensions")]
    Overflow,
}

/// The largest byte count a breakdown holds, `2^53 - 1` (8 PiB): every count and sum is an
/// integer a JavaScript number holds exactly (the page shows them; a larger count could not even
/// be handed to it). Counts are computed in `u128` and checked against it.
pub const MAX_BYTES: u64 = (1 << 53) - 1;

/// `v` as a byte count of a breakdown, or [`BudgetError::Overflow`] above [`MAX_BYTES`].
pub fn byte_count(v: u128) -> Result<u64, BudgetError> {
    u64::try_from(v)
        .ok()
        .filter(|&v| v <= MAX_BYTES)
        .ok_or(BudgetError::Overflow)
}

/// The sum of byte counts, checked as [`byte_count`] checks one.
pub fn byte_sum(xs: &[u64]) -> Result<u64, BudgetError> {
    byte_count(xs.iter().map(|&x| u128::from(x)).sum())
}

/// How the KV cache of one model is shaped.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelConfig {
    /// Display name.
    pub name: String,
    /// Transformer layers `L`.
    pub layers: u64,
    /// KV heads per layer (GQA: fewer than query heads).
    pub n_kv_heads: u64,
    /// Query heads per layer (for per-query-head selection copies).
    pub n_heads: u64,
    /// Head dimension `d_head`, from the config (never hidden/heads).
    pub d_head: u64,
    /// Bytes per stored element in full precision `s_fp` (2 for fp16/bf16, 4 for fp32).
    pub fp_bytes: u64,
    /// MLA latent width per token per layer (DeepSeek-V2: 512 + 64 = 576); `None` for MHA/GQA.
    pub mla_latent: Option<u64>,
    /// Sliding-window layers: how many of the `L` layers, and their window in tokens.
    pub sliding: Option<SlidingWindow>,
}

/// Layers that only ever hold the last `window` tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SlidingWindow {
    /// Number of sliding-window layers (the rest are global).
    pub layers: u64,
    /// Window length in tokens.
    pub window: u64,
}

impl ModelConfig {
    /// The model presets, with their published configs.
    pub fn presets() -> Vec<ModelConfig> {
        fn m(
            name: &str,
            layers: u64,
            n_heads: u64,
            n_kv_heads: u64,
            d_head: u64,
            fp_bytes: u64,
        ) -> ModelConfig {
            ModelConfig {
                name: name.to_string(),
                layers,
                n_kv_heads,
                n_heads,
                d_head,
                fp_bytes,
                mla_latent: None,
                sliding: None,
            }
        }
        let mut v = vec![
            m("Llama-2-7B", 32, 32, 32, 128, 2),
            m("Llama-3-8B", 32, 32, 8, 128, 2),
            m("Llama-3-70B", 80, 64, 8, 128, 2),
            ModelConfig {
                sliding: Some(SlidingWindow {
                    layers: 32,
                    window: 4096,
                }),
                ..m("Mistral-7B-v0.1", 32, 32, 8, 128, 2)
            },
            m("Qwen2.5-7B", 28, 28, 4, 128, 2),
            ModelConfig {
                sliding: Some(SlidingWindow {
                    layers: 21,
                    window: 4096,
                }),
                ..m("Gemma-2-9B", 42, 16, 8, 256, 2)
            },
            m("GPT-2 small", 12, 12, 12, 64, 4),
        ];
        v.push(ModelConfig {
            mla_latent: Some(576),
            ..m("DeepSeek-V2 (MLA)", 60, 128, 128, 128, 2)
        });
        // The largest models the README names: Llama-3.1-405B (126 layers, 128 query heads over
        // 8 KV heads), DeepSeek-V3 (61 layers of MLA: a 512-wide latent and a 64-wide RoPE key,
        // 576 a token a layer) and Gemma-3-27B (62 layers, 5 local of every 6 with a 1,024-token
        // window: 52 sliding, 10 global), from their published configs.
        v.push(m("Llama-3.1-405B", 126, 128, 8, 128, 2));
        v.push(ModelConfig {
            mla_latent: Some(576),
            ..m("DeepSeek-V3 (MLA)", 61, 128, 128, 128, 2)
        });
        v.push(ModelConfig {
            sliding: Some(SlidingWindow {
                layers: 52,
                window: 1024,
            }),
            ..m("Gemma-3-27B", 62, 32, 16, 128, 2)
        });
        v
    }

    /// `bytes_token_fp = 2 x L x n_kv_heads x d_head x s_fp` (MLA: `L x latent x s_fp`),
    /// ignoring sliding windows: the note's per-token cost.
    pub fn bytes_token_fp(&self) -> u64 {
        self.elements_per_token_per_layer()
            .saturating_mul(self.layers)
            .saturating_mul(self.fp_bytes)
    }

    fn elements_per_token_per_layer(&self) -> u64 {
        match self.mla_latent {
            Some(w) => w,
            None => 2 * self.n_kv_heads * self.d_head,
        }
    }

    fn validate(&self) -> Result<(), BudgetError> {
        let dims = [
            ("layers", self.layers, 1024),
            ("n_kv_heads", self.n_kv_heads, 1024),
            ("n_heads", self.n_heads, 4096),
            ("d_head", self.d_head, 4096),
            ("fp_bytes", self.fp_bytes, 8),
        ];
        for (field, value, max) in dims {
            if value == 0 || value > max {
                return Err(BudgetError::Dimension { field, value, max });
            }
        }
        if let Some(w) = self.mla_latent {
            if w == 0 || w > 65536 {
                return Err(BudgetError::Dimension {
                    field: "mla_latent",
                    value: w,
                    max: 65536,
                });
            }
        }
        if let Some(s) = self.sliding {
            if s.layers > self.layers {
                return Err(BudgetError::Dimension {
                    field: "sliding layers",
                    value: s.layers,
                    max: self.layers,
                });
            }
            if s.window == 0 {
                return Err(BudgetError::Dimension {
                    field: "sliding window",
                    value: 0,
                    max: u64::MAX,
                });
            }
        }
        Ok(())
    }

    /// Streams of one layer: (copies per layer, channels per copy). K and V of each KV head, or
    /// one MLA latent.
    fn streams(&self) -> Vec<(u64, u64)> {
        match self.mla_latent {
            Some(w) => vec![(1, w)],
            None => vec![
                (self.n_kv_heads, self.d_head),
                (self.n_kv_heads, self.d_head),
            ],
        }
    }
}

/// How one stream (K or V) is quantized, for byte counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct QuantAccounting {
    /// Bits per code.
    pub bits: u8,
    /// Symmetric (scale only) or asymmetric (scale + zero point).
    pub scheme: Scheme,
    /// Which elements share a scale.
    pub granularity: Granularity,
    /// Group length along the grouped axis; `None` = whole axis.
    pub group_size: Option<u64>,
    /// Dtype of stored scales and zero points.
    pub meta: MetaDtype,
}

/// What records which tokens were kept (`M_index`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IndexKind {
    /// No index (nothing dropped, or positions implied as in StreamingLLM).
    None,
    /// A list of kept positions: `T_kept x 4` bytes per selection copy.
    #[default]
    List,
    /// A keep-mask: `ceil(T_total / 8)` bytes per selection copy.
    Mask,
}

/// The compression being accounted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Compression {
    /// Tokens in the context `T_total`.
    pub t_total: u64,
    /// Tokens kept `T_kept` in `1..=T_total`.
    pub t_kept: u64,
    /// Sequences in the batch (every term is multiplied by it).
    pub batch: u64,
    /// Quantization of K (and of the MLA latent); `None` = full precision.
    pub k: Option<QuantAccounting>,
    /// Quantization of V; `None` = full precision.
    pub v: Option<QuantAccounting>,
    /// KIVI residual: the most recent `residual` kept tokens stay in full precision.
    pub residual: u64,
    /// How the kept set is recorded.
    pub index: IndexKind,
    /// Independent selections: 1 when shared, `L x n_kv_heads` per KV head, `L x n_heads` per
    /// query head (SnapKV's reference).
    pub selection_copies: u64,
    /// Bytes of score state kept per kept token per selection copy (H2O: one fp32 score = 4;
    /// 0 for policies that keep none).
    pub score_state_bytes: u64,
}

impl Compression {
    /// Nothing compressed: all `t_total` tokens in full precision, no index.
    pub fn none(t_total: u64) -> Self {
        Self {
            t_total,
            t_kept: t_total,
            batch: 1,
            k: None,
            v: None,
            residual: 0,
            index: IndexKind::None,
            selection_copies: 1,
            score_state_bytes: 0,
        }
    }
}

/// `M_KV,final` as named terms, plus the ratios (note §1, §2.4, §3.3, §4). Bytes, whole batch.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Breakdown {
    /// `T_total`.
    pub t_total: u64,
    /// `T_kept`.
    pub t_kept: u64,
    /// `bytes_token_fp` (all layers, K and V; ignores sliding windows).
    pub bytes_token_fp: u64,
    /// Code bytes per kept token (`2 L H d bits / 8`, fp for the residual share).
    pub bytes_token_codes: f64,
    /// The note's `bytes_token_quant`: codes plus the per-token share of scales and zero points.
    pub bytes_token_quant: f64,
    /// Full-precision cache `T_total x bytes_token_fp` (sliding layers capped at their window).
    pub m_fp: u64,
    /// Bit-packed codes of the quantized part.
    pub m_codes: u64,
    /// Full-precision tokens kept as they are (unquantized streams and the KIVI residual).
    pub m_fp_kept: u64,
    /// Stored scales.
    pub m_scales: u64,
    /// Stored zero points (0 for symmetric).
    pub m_zero_points: u64,
    /// Per-token score state a policy keeps (H2O).
    pub m_score_state: u64,
    /// `M_meta = scales + zero points + score state`.
    pub m_meta: u64,
    /// `M_index`.
    pub m_index: u64,
    /// Which index is counted.
    pub index: IndexKind,
    /// `M_KV,final = codes + fp kept + M_meta + M_index`.
    pub m_final: u64,
    /// `R_quant ~ s_fp / s_q` ignoring metadata (K's bits; 1 when unquantized).
    pub r_quant: f64,
    /// `R_quant` with scales and zero points counted, on the kept tokens.
    pub r_quant_with_meta: f64,
    /// `R_token = T_total / T_kept`.
    pub r_token: f64,
    /// `R_overall = m_fp / m_final`.
    pub r_overall: f64,
}

fn check_quant(q: &Option<QuantAccounting>) -> Result<(), BudgetError> {
    if let Some(q) = q {
        let min = match q.scheme {
            Scheme::Symmetric => 2,
            Scheme::Asymmetric => 1,
        };
        if q.bits < min || q.bits > 16 {
            return Err(BudgetError::Bits {
                bits: q.bits,
                scheme: q.scheme,
                min,
            });
        }
        if q.group_size == Some(0) {
            return Err(BudgetError::GroupSize);
        }
    }
    Ok(())
}

/// Terms of one stream (one copy per layer-class) for `tokens` quantized tokens.
fn stream_terms(
    q: &QuantAccounting,
    copies: u128,
    width: u128,
    tokens: u128,
) -> (u128, u128, u128) {
    let n = copies * width * tokens;
    let codes = u128::from(packed_code_bytes(
        u64::try_from(n).unwrap_or(u64::MAX),
        q.bits,
    ));
    let g = q.group_size.map(u128::from);
    let groups = if tokens == 0 {
        0
    } else {
        match q.granularity {
            Granularity::PerChannel => copies * width * g.map_or(1, |g| tokens.div_ceil(g)),
            Granularity::PerToken => copies * tokens * g.map_or(1, |g| width.div_ceil(g)),
            Granularity::PerTensor => copies,
        }
    };
    let groups64 = u64::try_from(groups).unwrap_or(u64::MAX);
    let scales = u128::from(metadata_bytes(groups64, Scheme::Symmetric, q.meta));
    let zps = u128::from(metadata_bytes(groups64, q.scheme, q.meta)) - scales;
    (codes, scales, zps)
}

/// Computes `M_KV,final` and the ratios for `model` under `c` (note §1 and §4).
///
/// ```
/// use kvlab_core::budget::{breakdown, Compression, ModelConfig};
/// let llama2 = &ModelConfig::presets()[0];
/// assert_eq!(llama2.bytes_token_fp(), 524_288); // 2 x 32 x 32 x 128 x 2 bytes
/// let b = breakdown(llama2, &Compression { t_kept: 1024, ..Compression::none(4096) }).unwrap();
/// assert_eq!(b.m_fp, 4096 * 524_288);
/// assert_eq!(b.r_token, 4.0);
/// ```
pub fn breakdown(model: &ModelConfig, c: &Compression) -> Result<Breakdown, BudgetError> {
    model.validate()?;
    if c.t_total == 0 || c.t_total > 1 << 32 {
        return Err(BudgetError::Dimension {
            field: "context tokens",
            value: c.t_total,
            max: 1 << 32,
        });
    }
    if c.t_kept == 0 || c.t_kept > c.t_total {
        return Err(BudgetError::Kept {
            kept: c.t_kept,
            total: c.t_total,
        });
    }
    if c.batch == 0 || c.batch > 1 << 20 {
        return Err(BudgetError::Dimension {
            field: "batch",
            value: c.batch,
            max: 1 << 20,
        });
    }
    check_quant(&c.k)?;
    check_quant(&c.v)?;
    // Layer classes: (layers, token cap).
    let mut classes = vec![];
    let sliding = model.sliding.map_or(0, |s| s.layers);
    if model.layers > sliding {
        classes.push((model.layers - sliding, u64::MAX));
    }
    if let Some(s) = model.sliding {
        if s.layers > 0 {
            classes.push((s.layers, s.window));
        }
    }
    let fp = u128::from(model.fp_bytes);
    let (mut m_fp, mut m_codes, mut m_fp_kept, mut m_scales, mut m_zps) = (0u128, 0, 0, 0, 0);
    let mut held_kept_tokens_by_copy = 0u128; // for score state: sum over layers of tokens held
    for &(layers, cap) in &classes {
        let total = u128::from(c.t_total.min(cap));
        let kept = u128::from(c.t_kept.min(cap));
        let residual = u128::from(c.residual).min(kept);
        held_kept_tokens_by_copy += u128::from(layers) * kept;
        for (si, (per_layer, width)) in model.streams().into_iter().enumerate() {
            let copies = u128::from(layers) * u128::from(per_layer);
            let width = u128::from(width);
            m_fp += copies * width * total * fp;
            let q = if si == 0 { c.k } else { c.v };
            match q {
                None => m_fp_kept += copies * width * kept * fp,
                Some(q) => {
                    m_fp_kept += copies * width * residual * fp;
                    let (codes, s, z) = stream_terms(&q, copies, width, kept - residual);
                    m_codes += codes;
                    m_scales += s;
                    m_zps += z;
                }
            }
        }
    }
    // Score state: per kept token, per selection copy. Copies are counted over all layers, so
    // scale the per-layer-average of held tokens.
    let copies = u128::from(c.selection_copies.max(1));
    let avg_kept = held_kept_tokens_by_copy / u128::from(model.layers);
    let m_score = copies * avg_kept * u128::from(c.score_state_bytes);
    // The index records the tokens the cache holds. Copies made per layer (per layer, KV head
    // or query head) each index their own layer's tokens: a sliding layer's copy holds at most
    // its window. Copies shared across layers index what the layers with the longest reach
    // hold (where every layer slides, a token the window dropped has no entry).
    let index_entries = |cap: u64| -> u128 {
        match c.index {
            IndexKind::None => 0,
            IndexKind::List => u128::from(c.t_kept.min(cap)) * 4,
            IndexKind::Mask => u128::from(c.t_total.min(cap)).div_ceil(8),
        }
    };
    let layers = u128::from(model.layers);
    let m_index = if copies >= layers && copies % layers == 0 {
        let per_layer = copies / layers;
        classes
            .iter()
            .map(|&(n, cap)| per_layer * u128::from(n) * index_entries(cap))
            .sum()
    } else {
        let reach = classes
            .iter()
            .map(|&(_, cap)| cap)
            .max()
            .unwrap_or(u64::MAX);
        copies * index_entries(reach)
    };
    let b = u128::from(c.batch);
    let to64 = |v: u128| byte_count(v * b);
    let m_fp = to64(m_fp)?;
    let m_codes = to64(m_codes)?;
    let m_fp_kept = to64(m_fp_kept)?;
    let m_scales = to64(m_scales)?;
    let m_zero_points = to64(m_zps)?;
    let m_score_state = to64(m_score)?;
    let m_index = to64(m_index)?;
    let m_meta = byte_sum(&[m_scales, m_zero_points, m_score_state])?;
    let m_final = byte_sum(&[m_codes, m_fp_kept, m_meta, m_index])?;
    let kept_tokens = (c.t_kept * c.batch) as f64;
    let bytes_token_codes = (m_codes + m_fp_kept) as f64 / kept_tokens;
    let bytes_token_quant = (m_codes + m_fp_kept + m_scales + m_zero_points) as f64 / kept_tokens;
    let r_quant = match c.k {
        Some(q) => (model.fp_bytes * 8) as f64 / f64::from(q.bits),
        None => 1.0,
    };
    // Full-precision bytes of the kept tokens, with the same sliding caps.
    let fp_kept_all: u128 = classes
        .iter()
        .map(|&(layers, cap)| {
            u128::from(layers)
                * u128::from(model.elements_per_token_per_layer())
                * u128::from(c.t_kept.min(cap))
                * fp
        })
        .sum::<u128>()
        * b;
    let quant_part = m_codes + m_fp_kept + m_scales + m_zero_points;
    Ok(Breakdown {
        t_total: c.t_total,
        t_kept: c.t_kept,
        bytes_token_fp: model.bytes_token_fp(),
        bytes_token_codes,
        bytes_token_quant,
        m_fp,
        m_codes,
        m_fp_kept,
        m_scales,
        m_zero_points,
        m_score_state,
        m_meta,
        m_index,
        index: c.index,
        m_final,
        r_quant,
        r_quant_with_meta: fp_kept_all as f64 / quant_part.max(1) as f64,
        r_token: c.t_total as f64 / c.t_kept as f64,
        r_overall: m_fp as f64 / m_final.max(1) as f64,
    })
}

/// `R_quant ~ s_fp / s_q` ignoring metadata (note §2.4): `fp_bytes * 8 / bits`.
///
/// ```
/// assert_eq!(kvlab_core::budget::r_quant(2, 8), 2.0); // BF16 -> INT8
/// ```
pub fn r_quant(fp_bytes: u64, bits: u8) -> f64 {
    (fp_bytes * 8) as f64 / f64::from(bits.max(1))
}

/// Effective bits per element of a quantized stream with metadata counted:
/// `bits + groups x meta bits / elements` (e.g. 2 bits, group 32, fp16 scale + min = 3 bits).
///
/// ```
/// use kvlab_core::{budget::effective_bits, quant::{MetaDtype, Scheme}};
/// assert_eq!(effective_bits(2, Scheme::Asymmetric, 32, MetaDtype::F16), 3.0);
/// ```
pub fn effective_bits(bits: u8, scheme: Scheme, group_size: u64, meta: MetaDtype) -> f64 {
    let per_group = metadata_bytes(1, scheme, meta) * 8;
    f64::from(bits) + per_group as f64 / group_size.max(1) as f64
}

/// Bytes of `b` in GiB (`2^30`).
pub fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

/// What [`tokens_that_fit`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FitKind {
    /// At most [`Fit::tokens`] tokens fit (0: not even one).
    Tokens,
    /// Every layer slides: the cache stops growing at the window ([`Fit::tokens`]), and that
    /// fits, so a context of any length does.
    AnyLength,
    /// Even the longest context that can be counted ([`Fit::tokens`]) fits: the search's
    /// limit, [`FIT_LIMIT`] tokens, or the last context before the count passes
    /// [`MAX_BYTES`]. More would fit too, or cannot be counted.
    Beyond,
    /// The compressed cache keeps a fixed number of tokens ([`Keep::Tokens`], [`Fit::tokens`])
    /// and nothing else in it grows with the context (an index list, no score state): a
    /// context of any length fits.
    Capped,
}

/// How the kept tokens follow the context when a cache is counted at another length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The kept fraction `t_kept / t_total` stays.
    Fraction,
    /// The kept count `t_kept` stays (all tokens when the context is shorter).
    Tokens,
}

/// How much context fits in a memory budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Fit {
    /// The tokens that fit ([`FitKind::Tokens`]), the window ([`FitKind::AnyLength`]), the kept
    /// count ([`FitKind::Capped`]) or the longest context counted ([`FitKind::Beyond`]).
    pub tokens: u64,
    /// Which of these `tokens` is.
    pub kind: FitKind,
}

/// The longest context [`tokens_that_fit`] tries: [`breakdown`]'s own limit, `2^32` tokens.
pub const FIT_LIMIT: u64 = 1 << 32;

/// [`tokens_that_fit_keeping`] with the kept fraction kept ([`Keep::Fraction`]).
pub fn tokens_that_fit(
    model: &ModelConfig,
    c: &Compression,
    memory_bytes: u64,
) -> Result<Fit, BudgetError> {
    tokens_that_fit_keeping(model, c, memory_bytes, Keep::Fraction)
}

/// How many tokens of context fit in `memory_bytes` under `c`'s ratios (`t_total` and
/// `t_kept` are replaced; `keep` says whether the kept fraction `t_kept / t_total` or the kept
/// count `t_kept` stays: with a fixed count the cache may stop growing, [`FitKind::Capped`]). Binary search over
/// `1..=2^32`. A context whose cache would count more bytes than [`MAX_BYTES`] does not fit
/// (no memory budget holds it), so only the model's own errors are errors. Where every layer
/// slides, the cache stops growing at the window: when the window fits, any length does.
///
/// ```
/// use kvlab_core::budget::{tokens_that_fit, Compression, FitKind, ModelConfig};
/// let mistral = ModelConfig::presets().into_iter().find(|m| m.name.starts_with("Mistral")).unwrap();
/// let fit = tokens_that_fit(&mistral, &Compression::none(32_768), 80 << 30).unwrap();
/// assert_eq!((fit.kind, fit.tokens), (FitKind::AnyLength, 4096));
/// ```
pub fn tokens_that_fit_keeping(
    model: &ModelConfig,
    c: &Compression,
    memory_bytes: u64,
    keep: Keep,
) -> Result<Fit, BudgetError> {
    fit_by(model, c, memory_bytes, keep, |c| {
        match breakdown(model, c) {
            Ok(b) => Ok(Some(b.m_final)),
            Err(BudgetError::Overflow) => Ok(None),
            Err(e) => Err(e),
        }
    })
}

/// The search of [`tokens_that_fit_keeping`] over any count of the cache: `m_final(c)` gives
/// `M_KV,final` of `c` at each context tried (`None` when it overflows the byte count), so that
/// a count with more in it than [`breakdown`] (a selection scope's copies of K/V,
/// `policy::scoped_breakdown`) is searched by the same rules and the context it reports is
/// one whose own `M_KV,final` fits.
pub fn fit_by<E: From<BudgetError>>(
    model: &ModelConfig,
    c: &Compression,
    memory_bytes: u64,
    keep: Keep,
    m_final: impl Fn(&Compression) -> Result<Option<u64>, E>,
) -> Result<Fit, E> {
    model.validate()?;
    let frac = c.t_kept as f64 / c.t_total.max(1) as f64;
    let bytes = |t: u64| -> Result<Option<u64>, E> {
        let kept = match keep {
            Keep::Fraction => (t as f64 * frac).ceil() as u64,
            Keep::Tokens => c.t_kept,
        };
        m_final(&Compression {
            t_total: t,
            t_kept: kept.clamp(1, t),
            ..*c
        })
    };
    let fits = |t: u64| -> Result<bool, E> { Ok(bytes(t)?.is_some_and(|b| b <= memory_bytes)) };
    let found = |tokens, kind| Ok(Fit { tokens, kind });
    if !fits(1)? {
        return found(0, FitKind::Tokens);
    }
    let mut hi = FIT_LIMIT;
    if let Some(s) = model.sliding.filter(|s| s.layers >= model.layers) {
        let window = s.window.clamp(1, FIT_LIMIT);
        if fits(window)? {
            return found(window, FitKind::AnyLength);
        }
        hi = window;
    } else {
        // A fixed count whose cache stops growing once the context passes it. The cache is
        // affine in the context past `held` (a mask's bytes round to whole bytes), so equal
        // counts at `held` and at more than 64 tokens beyond it mean it no longer grows. This
        // is asked before the limit is: the limit's count may overflow (the uncompressed
        // cache beside it passes MAX_BYTES) where the capped cache fits easily.
        let held = c.t_kept.clamp(1, hi);
        if keep == Keep::Tokens && fits(held)? {
            let past = held.saturating_mul(2).saturating_add(64).min(hi);
            if past > held + 64 && bytes(held)? == bytes(past)? {
                return found(held, FitKind::Capped);
            }
        }
        if fits(hi)? {
            return found(hi, FitKind::Beyond);
        }
    }
    let mut lo = 1u64;
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    // The search stopped where the count overflows, not where the memory runs out: `lo` is
    // the longest context that can be counted, and it fits.
    if bytes(hi)?.is_none() {
        return found(lo, FitKind::Beyond);
    }
    found(lo, FitKind::Tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> ModelConfig {
        ModelConfig {
            name: "tiny".into(),
            layers: 1,
            n_kv_heads: 1,
            n_heads: 1,
            d_head: 4,
            fp_bytes: 2,
            mla_latent: None,
            sliding: None,
        }
    }

    /// Byte counts up to 2^53 - 1 are given; one above is refused (before, counts up to 2^64
    /// were given, which the page could not be handed: its conversion failed with an internal
    /// message).
    #[test]
    fn byte_counts_stop_at_what_a_javascript_number_holds() {
        // m_fp = 2 (K and V) x d_head 4 x T x fp_bytes 2 x batch = 16 T batch bytes.
        let model = tiny();
        let at = |batch: u64| {
            breakdown(
                &model,
                &Compression {
                    batch,
                    ..Compression::none(1 << 32)
                },
            )
        };
        // 16 x 2^32 x (2^17 - 1) = 2^53 - 2^36 bytes: given, exactly.
        assert_eq!(at((1 << 17) - 1).unwrap().m_fp, (1 << 53) - (1 << 36));
        assert_eq!(at(1 << 17), Err(BudgetError::Overflow), "2^53 bytes");
        assert_eq!(
            at(1 << 20),
            Err(BudgetError::Overflow),
            "2^56 bytes fit a u64, not a number"
        );
        assert_eq!(byte_count(u128::from(MAX_BYTES)), Ok(MAX_BYTES));
        assert_eq!(
            byte_count(u128::from(MAX_BYTES) + 1),
            Err(BudgetError::Overflow)
        );
        assert_eq!(byte_count(u128::MAX), Err(BudgetError::Overflow));
    }

    /// Where the uncompressed count overflows before the compressed cache outgrows the
    /// memory, the search says what it can count (before, a fixed kept count whose cache
    /// stops growing was reported as "at most 2^29 tokens", the overflow's edge, and the
    /// context one token past it could not be counted at all).
    #[test]
    fn the_fit_stops_at_what_can_be_counted_not_at_an_overflow() {
        // m_fp = 16 T batch = 2^24 T bytes: past MAX_BYTES (2^53 - 1) from T = 2^29.
        let model = tiny();
        let c = Compression {
            t_kept: 100,
            batch: 1 << 20,
            ..Compression::none(1 << 20)
        };
        // 100 kept tokens x 2^24 bytes = 1.56 GiB, whatever the context: any length fits.
        let capped = tokens_that_fit_keeping(&model, &c, 2 << 30, Keep::Tokens).unwrap();
        assert_eq!((capped.kind, capped.tokens), (FitKind::Capped, 100));
        // With a mask the cache grows by T/8 bytes a sequence: 2^46 bytes at 2^29 tokens, well
        // inside 2^52 of memory, so the longest countable context fits and more may.
        let masked = Compression {
            index: IndexKind::Mask,
            ..c
        };
        let fit = tokens_that_fit_keeping(&model, &masked, 1 << 52, Keep::Tokens).unwrap();
        assert_eq!(fit.kind, FitKind::Beyond);
        assert_eq!(fit.tokens, (1 << 29) - 1);
        let at = |t: u64| {
            breakdown(
                &model,
                &Compression {
                    t_total: t,
                    ..masked
                },
            )
        };
        assert!(at(fit.tokens).unwrap().m_final <= 1 << 52);
        assert_eq!(at(fit.tokens + 1), Err(BudgetError::Overflow));
    }

    fn q(bits: u8, scheme: Scheme, granularity: Granularity, g: Option<u64>) -> QuantAccounting {
        QuantAccounting {
            bits,
            scheme,
            granularity,
            group_size: g,
            meta: MetaDtype::F16,
        }
    }

    #[test]
    fn hand_worked_tiny_model() {
        // 1 layer, 1 head, d=4, fp16: bytes_token_fp = 2*1*1*4*2 = 16
        let m = tiny();
        assert_eq!(m.bytes_token_fp(), 16);
        let c = Compression {
            t_total: 8,
            t_kept: 4,
            k: Some(q(4, Scheme::Symmetric, Granularity::PerChannel, None)),
            v: Some(q(4, Scheme::Asymmetric, Granularity::PerToken, None)),
            index: IndexKind::List,
            ..Compression::none(8)
        };
        let b = breakdown(&m, &c).unwrap();
        assert_eq!(b.m_fp, 8 * 16);
        // K codes: 4 tokens x 4 ch x 4 bits = 8 bytes; V same = 8
        assert_eq!(b.m_codes, 16);
        // K per-channel: 4 scales x 2 B = 8; V per-token: 4 scales = 8, 4 zps = 8
        assert_eq!(b.m_scales, 16);
        assert_eq!(b.m_zero_points, 8);
        assert_eq!(b.m_index, 16); // 4 kept x 4 B
        assert_eq!(b.m_final, 16 + 16 + 8 + 16);
        assert_eq!(b.r_overall, 128.0 / 56.0);
        assert_eq!(b.r_token, 2.0);
        assert_eq!(b.r_quant, 4.0);
        assert_eq!(b.bytes_token_quant, 40.0 / 4.0);
        // mask instead of list: ceil(8/8) = 1
        let b = breakdown(
            &m,
            &Compression {
                index: IndexKind::Mask,
                ..c
            },
        )
        .unwrap();
        assert_eq!(b.m_index, 1);
    }

    #[test]
    fn presets_have_the_published_shapes() {
        let p = ModelConfig::presets();
        let by = |n: &str| p.iter().find(|m| m.name.starts_with(n)).unwrap().clone();
        assert_eq!(by("Llama-3-8B").bytes_token_fp(), 2 * 32 * 8 * 128 * 2);
        assert_eq!(by("Gemma-2-9B").d_head, 256);
        assert_eq!(by("DeepSeek").bytes_token_fp(), 60 * 576 * 2);
        assert_eq!(by("GPT-2").bytes_token_fp(), 2 * 12 * 12 * 64 * 4);
        // the largest the README names
        assert_eq!(by("Llama-3.1-405B").bytes_token_fp(), 2 * 126 * 8 * 128 * 2);
        assert_eq!(by("DeepSeek-V3").bytes_token_fp(), 61 * 576 * 2);
        let gemma3 = by("Gemma-3-27B");
        assert_eq!(gemma3.bytes_token_fp(), 2 * 62 * 16 * 128 * 2);
        // at 128k, 10 global layers hold every token and 52 sliding ones their 1,024
        let b = breakdown(&gemma3, &Compression::none(131_072)).unwrap();
        assert_eq!(b.m_fp, 2 * 16 * 128 * 2 * (10 * 131_072 + 52 * 1024));
    }

    #[test]
    fn sliding_layers_cap_at_their_window() {
        let mut m = tiny();
        m.layers = 2;
        m.sliding = Some(SlidingWindow {
            layers: 1,
            window: 10,
        });
        let b = breakdown(&m, &Compression::none(100)).unwrap();
        // global layer: 100 tokens x 16 B; sliding layer: 10 x 16 B
        assert_eq!(b.m_fp, 100 * 16 + 10 * 16);
        assert_eq!(b.r_overall, 1.0);
    }

    /// A per-layer copy's index holds what its layer holds: Gemma-2-9B's 21 sliding layers
    /// index their 4,096-token window, not the 32,768 kept tokens of the global layers (before,
    /// every copy indexed 32,768: the index 2x too large, the total 1.2% high at 128k).
    #[test]
    fn a_sliding_layers_index_holds_its_window() {
        let gemma = ModelConfig::presets()
            .into_iter()
            .find(|m| m.name == "Gemma-2-9B")
            .unwrap();
        let s = gemma.sliding.unwrap();
        let per_layer = gemma.n_kv_heads;
        let c = Compression {
            t_kept: 32_768,
            index: IndexKind::List,
            selection_copies: gemma.layers * per_layer,
            ..Compression::none(131_072)
        };
        let b = breakdown(&gemma, &c).unwrap();
        let global = gemma.layers - s.layers;
        assert_eq!(
            b.m_index,
            per_layer * (global * 32_768 + s.layers * s.window) * 4
        );
        let mask = breakdown(
            &gemma,
            &Compression {
                index: IndexKind::Mask,
                ..c
            },
        )
        .unwrap();
        assert_eq!(
            mask.m_index,
            per_layer * (global * 131_072 / 8 + s.layers * s.window / 8)
        );
        // a selection shared by every layer indexes the longest reach once
        let shared = breakdown(
            &gemma,
            &Compression {
                selection_copies: 1,
                ..c
            },
        )
        .unwrap();
        assert_eq!(shared.m_index, 32_768 * 4);
    }

    #[test]
    fn residual_and_score_state() {
        let m = tiny();
        let c = Compression {
            t_total: 10,
            t_kept: 10,
            k: Some(q(2, Scheme::Asymmetric, Granularity::PerToken, Some(4))),
            v: None,
            residual: 2,
            score_state_bytes: 4,
            ..Compression::none(10)
        };
        let b = breakdown(&m, &c).unwrap();
        // K: 8 quantized tokens x 4 ch x 2 bits = 8 B codes, 8 groups x (2+2) B meta;
        // residual 2 tokens x 4 ch x 2 B = 16 B; V fp: 10 x 4 x 2 = 80 B
        assert_eq!(b.m_codes, 8);
        assert_eq!(b.m_scales + b.m_zero_points, 32);
        assert_eq!(b.m_fp_kept, 96);
        assert_eq!(b.m_score_state, 40);
    }

    #[test]
    fn errors_and_effective_bits() {
        let m = tiny();
        assert_eq!(
            breakdown(
                &m,
                &Compression {
                    t_kept: 0,
                    ..Compression::none(4)
                }
            )
            .unwrap_err()
            .to_string(),
            "kept tokens 0 is out of range: must be between 1 and 4 (the total tokens)"
        );
        let mut bad = tiny();
        bad.d_head = 0;
        assert!(breakdown(&bad, &Compression::none(4)).is_err());
        assert_eq!(
            effective_bits(4, Scheme::Symmetric, 128, MetaDtype::F16),
            4.125
        );
        let fit = tokens_that_fit(&m, &Compression::none(1), 160).unwrap();
        assert_eq!(
            fit,
            Fit {
                tokens: 10,
                kind: FitKind::Tokens
            }
        );
        assert_eq!(gib(1 << 30), 1.0);
    }
}
