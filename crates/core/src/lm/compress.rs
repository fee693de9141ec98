//! The model under a compressed cache: the note's two levers applied to the real model's KV
//! cache, and what they cost in the model's own output (the note's closing question, in one
//! currency).
//!
//! The protocol ([`Protocol`]): the prompt's first `P` tokens are the prefill, run with the
//! full cache; then the cache is compressed once (each layer's and head's kept set chosen by
//! the policy from that head's own attention over the prefill, then the kept rows of K and V
//! quantized), as the note's one-shot selection does; then the last `E` tokens of the prompt
//! are teacher-forced under the compressed cache (their own keys and values join it at full
//! precision) and each one's next-token distribution is compared with the full cache's.

use super::{log_softmax_at, KvCache, Lm, LmError, LmRun};
use crate::budget::{self, BudgetError, Compression, IndexKind, ModelConfig, QuantAccounting};
use crate::kivi::KiviConfig;
use crate::policy::{policy_scores, select_with, Policy, PolicyError};
use crate::quant::{quantize, QuantConfig, QuantError};
use crate::rng::Xoshiro256;
use crate::Matrix;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The most positions evaluated after the prefill.
pub const EVALUATED: usize = 64;

/// Why the model's quality under a compression could not be measured.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum EvalError {
    /// Nothing to keep and evaluate.
    #[error("a prompt of {tokens} token(s) with the BOS: measuring the compressed cache needs at least 2, one kept and one evaluated; type a longer prompt")]
    TooShort {
        /// Tokens, BOS included.
        tokens: usize,
    },
    /// The run and the tokens do not belong together (a bug of the caller, said).
    #[error("the model's run has {run} positions but {tokens} tokens were given")]
    Mismatch {
        /// Positions of the run.
        run: usize,
        /// Tokens given.
        tokens: usize,
    },
    /// The model refused the tokens.
    #[error(transparent)]
    Model(#[from] LmError),
    /// The quantization refused its settings on a head's kept rows.
    #[error("quantizing the model's cache ({what} of {rows} kept tokens x {cols} channels per head): {error}")]
    Quant {
        /// `keys` or `values`.
        what: &'static str,
        /// Rows quantized.
        rows: usize,
        /// Channels.
        cols: usize,
        /// The refusal.
        error: QuantError,
    },
    /// The policy refused its settings on the prefill.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The byte accounting refused.
    #[error(transparent)]
    Budget(#[from] BudgetError),
}

/// Which tokens of a prompt are the prefill and which are evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Protocol {
    /// Tokens, BOS included (`T`).
    pub tokens: usize,
    /// The prefill `P`: the tokens whose cache is compressed.
    pub prefill: usize,
    /// The positions evaluated under the compressed cache, `E = T - P`: a quarter of the
    /// tokens, 1 to [`EVALUATED`].
    pub evaluated: usize,
}

impl Protocol {
    /// The protocol for `tokens` tokens (BOS included, at least 2).
    pub fn of(tokens: usize) -> Result<Protocol, EvalError> {
        if tokens < 2 {
            return Err(EvalError::TooShort { tokens });
        }
        let evaluated = (tokens / 4).clamp(1, EVALUATED);
        Ok(Protocol {
            tokens,
            prefill: tokens - evaluated,
            evaluated,
        })
    }
}

/// Which prefill tokens each head keeps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Keep {
    /// Every token (only quantization compresses).
    All,
    /// Every token but the first (the BOS): what an attention sink is worth.
    DropFirst,
    /// `budget` tokens per head chosen by `policy` from the head's attention over the prefill.
    Policy {
        /// The policy (the oracle ranks by the evaluated positions' attention).
        policy: Policy,
    },
}

/// How the heads of a layer share the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Allocation {
    /// `B` tokens in every head.
    #[default]
    Uniform,
    /// `B x heads` tokens per layer, shared as Ada-KV does: each head keeps its recent window,
    /// the rest go to the highest scores of all the layer's heads, each head's scores
    /// normalised to sum to 1 (a head that spreads its attention gets more tokens than one
    /// that looks at few).
    ScoreMass,
}

/// A compression of the model's cache.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CacheSpec {
    /// How K is quantized; `None`: full precision.
    pub keys: Option<QuantAccounting>,
    /// How V is quantized; `None`: full precision.
    pub values: Option<QuantAccounting>,
    /// Which tokens are kept.
    pub keep: Keep,
    /// `B`: tokens kept per head, of the prefill's (all of them when `B >= P`).
    pub budget: usize,
    /// The recent window `r` of the heavy + recent policies.
    pub recent: usize,
    /// How the heads share the budget.
    #[serde(default)]
    pub allocation: Allocation,
}

impl CacheSpec {
    /// Nothing compressed.
    pub fn full() -> CacheSpec {
        CacheSpec {
            keys: None,
            values: None,
            keep: Keep::All,
            budget: usize::MAX,
            recent: 0,
            allocation: Allocation::Uniform,
        }
    }
}

/// The prefill's cache, compressed.
#[derive(Debug, Clone, PartialEq)]
pub struct Compressed {
    /// The cache (positions after the prefill's).
    pub cache: KvCache,
    /// `kept[layer][head]`: the prefill tokens kept, ascending.
    pub kept: Vec<Vec<Vec<usize>>>,
}

fn quant_config(q: &QuantAccounting) -> QuantConfig {
    QuantConfig {
        bits: q.bits,
        scheme: q.scheme,
        granularity: q.granularity,
        group_size: q
            .group_size
            .map(|g| usize::try_from(g).unwrap_or(usize::MAX)),
    }
}

/// Rows `rows` of `m`'s columns `0..cols` (the columns are tokens).
fn block(m: &Matrix, rows: std::ops::Range<usize>, cols: usize) -> Result<Matrix, EvalError> {
    let n = rows.len();
    // (row by row into room made once, not an element-wise collect: a block is copied for
    // every head of every answer the needle test generates)
    let mut data = Vec::with_capacity(n * cols);
    for r in m.iter_rows().skip(rows.start).take(n) {
        data.extend_from_slice(&r[..cols]);
    }
    Matrix::new(n, cols, data).map_err(|e| EvalError::Policy(e.into()))
}

/// `policy` on a prefill of `p` tokens: SnapKV's window observes at most the prefill's rows.
fn fit(policy: Policy, p: usize) -> Policy {
    match policy {
        Policy::SnapKv { window, pooling } => Policy::SnapKv {
            window: window.min(p),
            pooling,
        },
        Policy::H2oSum
        | Policy::H2oMean
        | Policy::StreamingLlm { .. }
        | Policy::Tova
        | Policy::Random { .. }
        | Policy::Oracle => policy,
    }
}

/// The kept set of one head: `policy` on the head's attention `a` (`T x T`) over the prefill
/// `0..p`, `budget < p` tokens.
fn select_head(
    policy: &Policy,
    a: &Matrix,
    p: usize,
    budget: usize,
    recent: usize,
) -> Result<Vec<usize>, EvalError> {
    let sel = if matches!(policy, Policy::Oracle) {
        // (the evaluated positions' attention on the prefill: the upper bound)
        select_with(policy, &block(a, 0..a.rows(), p)?, budget, 0, p)?
    } else {
        select_with(policy, &block(a, 0..p, p)?, budget, recent.min(p), p)?
    };
    Ok(sel.kept)
}

/// [`Allocation::ScoreMass`] for one layer: each head's recent window, then the layer's
/// `heads x (budget - r)` other slots to the highest normalised scores of any head (ties to
/// the lower head, then the lower token). `scores[h]` has `p` entries.
fn share_by_mass(scores: &[Vec<f32>], p: usize, budget: usize, recent: usize) -> Vec<Vec<usize>> {
    let r = recent.min(budget).min(p);
    let prefix = p - r;
    let mut pool: Vec<(f64, usize, usize)> = Vec::new();
    for (h, s) in scores.iter().enumerate() {
        let total: f64 = s[..prefix].iter().map(|&v| f64::from(v.max(0.0))).sum();
        for (i, &v) in s[..prefix].iter().enumerate() {
            let share = if total > 0.0 {
                f64::from(v.max(0.0)) / total
            } else {
                0.0
            };
            pool.push((share, h, i));
        }
    }
    // (a total order, every tie broken: unstable gives the same order without bringing a
    // stable sort's code into the model's module)
    pool.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let slots = scores.len() * (budget - r);
    let mut kept: Vec<Vec<usize>> = vec![(prefix..p).collect(); scores.len()];
    for &(_, h, i) in pool.iter().take(slots) {
        kept[h].push(i);
    }
    for k in &mut kept {
        k.sort_unstable();
    }
    kept
}

/// Rows `keep` of `m` (one head's K or V), quantized and dequantized with `q` when given.
fn kept_rows(
    m: &Matrix,
    keep: &[usize],
    q: Option<&QuantAccounting>,
    what: &'static str,
) -> Result<Vec<f32>, EvalError> {
    let hd = m.cols();
    let data: Vec<f32> = keep
        .iter()
        .flat_map(|&r| m.row(r).unwrap_or(&[]).iter().copied())
        .collect();
    match q {
        Some(q) if !keep.is_empty() => {
            let x = Matrix::new(keep.len(), hd, data).map_err(|e| EvalError::Policy(e.into()))?;
            let quantized = quantize(&x, &quant_config(q)).map_err(|error| EvalError::Quant {
                what,
                rows: keep.len(),
                cols: hd,
                error,
            })?;
            Ok(quantized.dequantize().data().to_vec())
        }
        _ => Ok(data),
    }
}

/// The prefill `0..prefill` of `run` (the full forward of the prompt) with its cache
/// compressed by `spec`.
pub fn compress(run: &LmRun, prefill: usize, spec: &CacheSpec) -> Result<Compressed, EvalError> {
    let layers = run.keys.len();
    let mut kept = Vec::with_capacity(layers);
    for attention in &run.attention {
        let p = prefill;
        let b = spec.budget.min(p);
        let layer: Vec<Vec<usize>> = match spec.keep {
            Keep::All => vec![(0..p).collect(); attention.len()],
            Keep::DropFirst => vec![(1..p).collect(); attention.len()],
            Keep::Policy { .. } if b >= p => vec![(0..p).collect(); attention.len()],
            Keep::Policy { policy } => {
                let policy = fit(policy, p);
                // (the policies whose scores rank tokens share the budget by score mass;
                // StreamingLLM keeps positions, and the oracle's scores are the future's)
                let ranks = match policy {
                    Policy::H2oSum
                    | Policy::H2oMean
                    | Policy::SnapKv { .. }
                    | Policy::Tova
                    | Policy::Random { .. } => true,
                    Policy::StreamingLlm { .. } | Policy::Oracle => false,
                };
                if spec.allocation == Allocation::ScoreMass && ranks {
                    let scores = attention
                        .iter()
                        .map(|a| {
                            Ok(policy_scores(&policy, &block(a, 0..p, p)?, p)?.unwrap_or_default())
                        })
                        .collect::<Result<Vec<_>, EvalError>>()?;
                    share_by_mass(&scores, p, b, spec.recent)
                } else {
                    attention
                        .iter()
                        .map(|a| select_head(&policy, a, p, b, spec.recent))
                        .collect::<Result<_, _>>()?
                }
            }
        };
        kept.push(layer);
    }
    let mut cache = KvCache {
        keys: Vec::with_capacity(layers),
        values: Vec::with_capacity(layers),
        position: prefill,
        head_dim: run
            .keys
            .first()
            .and_then(|l| l.first())
            .map_or(0, |m| m.cols()),
    };
    for (l, layer) in kept.iter().enumerate() {
        let mut ks = Vec::with_capacity(layer.len());
        let mut vs = Vec::with_capacity(layer.len());
        for (h, keep) in layer.iter().enumerate() {
            ks.push(kept_rows(
                &run.keys[l][h],
                keep,
                spec.keys.as_ref(),
                "keys",
            )?);
            vs.push(kept_rows(
                &run.values[l][h],
                keep,
                spec.values.as_ref(),
                "values",
            )?);
        }
        cache.keys.push(ks);
        cache.values.push(vs);
    }
    Ok(Compressed { cache, kept })
}

/// What the compressed cache did to the model, position by position.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Quality {
    /// Which positions.
    pub protocol: Protocol,
    /// `KL(full || compressed)` of the next-token distribution at each evaluated position,
    /// nats.
    pub kl: Vec<f64>,
    /// Whether the most likely next byte is the same.
    pub top1: Vec<bool>,
    /// The loss of the true next byte with the full cache, nats, at each evaluated position
    /// that has one (`E - 1`: the last token's next byte is not in the prompt).
    pub nll_full: Vec<f64>,
    /// The same with the compressed cache.
    pub nll: Vec<f64>,
    /// `kept[layer][head]`: the prefill tokens kept.
    pub kept: Vec<Vec<Vec<usize>>>,
    /// The compressed cache's bytes as the note counts them (codes, scales and zero points,
    /// score state, index; fp16 for what is not quantized), and the full cache's.
    pub bytes: u64,
    /// The prefill's full cache in fp16, bytes.
    pub bytes_full: u64,
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

impl Quality {
    /// Mean KL, nats.
    pub fn mean_kl(&self) -> f64 {
        mean(&self.kl)
    }
    /// Share of positions whose top-1 byte is unchanged.
    pub fn top1_rate(&self) -> f64 {
        let n = self.top1.len().max(1);
        self.top1.iter().filter(|&&t| t).count() as f64 / n as f64
    }
    /// Mean loss of the true next byte, full cache.
    pub fn mean_nll_full(&self) -> f64 {
        mean(&self.nll_full)
    }
    /// Mean loss of the true next byte, compressed cache.
    pub fn mean_nll(&self) -> f64 {
        mean(&self.nll)
    }
}

/// `KL(p || q)` of the softmaxes of two logit rows, nats (f64).
pub fn kl_divergence(p_logits: &[f32], q_logits: &[f32]) -> f64 {
    let lse = |row: &[f32]| {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f64 = row.iter().map(|&v| f64::from(v - max).exp()).sum();
        f64::from(max) + sum.ln()
    };
    let (lp, lq) = (lse(p_logits), lse(q_logits));
    p_logits
        .iter()
        .zip(q_logits)
        .map(|(&a, &b)| {
            let log_p = f64::from(a) - lp;
            log_p.exp() * (log_p - (f64::from(b) - lq))
        })
        .sum::<f64>()
        .max(0.0)
}

fn argmax(row: &[f32]) -> usize {
    row.iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |best, (i, &v)| {
            if v > best.1 {
                (i, v)
            } else {
                best
            }
        })
        .0
}

/// The model as the byte accounting sees it: its layers and heads, fp16.
fn model_config(run: &LmRun) -> ModelConfig {
    let heads = run.keys.first().map_or(1, Vec::len) as u64;
    ModelConfig {
        name: "kvlab".into(),
        layers: run.keys.len() as u64,
        n_kv_heads: heads,
        n_heads: heads,
        d_head: run
            .keys
            .first()
            .and_then(|l| l.first())
            .map_or(1, |m| m.cols()) as u64,
        fp_bytes: 2,
        mla_latent: None,
        sliding: None,
    }
}

/// The bytes of the prefill's cache under `spec` with `kept` (the mean kept per head, which
/// the per-head allocation keeps on average), and of the full prefill cache.
pub(crate) fn cache_bytes(
    run: &LmRun,
    prefill: usize,
    spec: &CacheSpec,
    kept: &[Vec<Vec<usize>>],
) -> Result<(u64, u64), EvalError> {
    let model = model_config(run);
    let copies = (model.layers * model.n_kv_heads).max(1);
    let kept_total: u64 = kept.iter().flatten().map(|k| k.len() as u64).sum();
    let t_kept = (kept_total / copies).max(1);
    let template = Compression {
        k: spec.keys,
        v: spec.values,
        selection_copies: copies,
        ..Compression::none(prefill as u64)
    };
    let c = match spec.keep {
        Keep::All => template,
        Keep::DropFirst => Compression {
            t_kept,
            index: IndexKind::List,
            ..template
        },
        Keep::Policy { policy } if t_kept < prefill as u64 => Compression {
            index: IndexKind::List,
            ..policy.compression(&template, prefill as u64, t_kept)
        },
        Keep::Policy { .. } => template,
    };
    let b = budget::breakdown(&model, &c)?;
    Ok((b.m_final, b.m_fp))
}

/// The protocol for `tokens`, once `run` is known to be their forward.
fn protocol_of(run: &LmRun, tokens: &[u8]) -> Result<Protocol, EvalError> {
    let t = tokens.len();
    if run.logits.rows() != t {
        return Err(EvalError::Mismatch {
            run: run.logits.rows(),
            tokens: t,
        });
    }
    Protocol::of(t)
}

/// The model's quality under `spec` on `tokens` (BOS first), whose full forward is `run`.
pub fn quality(
    lm: &Lm,
    run: &LmRun,
    tokens: &[u8],
    spec: &CacheSpec,
) -> Result<Quality, EvalError> {
    let protocol = protocol_of(run, tokens)?;
    let p = protocol.prefill;
    let compressed = compress(run, p, spec)?;
    let (bytes, bytes_full) = cache_bytes(run, p, spec, &compressed.kept)?;
    evaluate(lm, run, tokens, protocol, compressed, (bytes, bytes_full))
}

/// The model's quality under KIVI (section 2's streaming quantizer, beyond the note): every
/// prefill token kept; in every head the keys quantized per channel in groups of `key_group`
/// tokens and the values per token in groups of `value_group` channels (capped at the head's
/// width), except the last `residual` prefill tokens (and a last partial key group), which stay
/// in full precision. The bytes are KIVI's accounting of the prefill cache.
pub fn kivi_quality(
    lm: &Lm,
    run: &LmRun,
    tokens: &[u8],
    kivi: &KiviConfig,
) -> Result<Quality, EvalError> {
    let protocol = protocol_of(run, tokens)?;
    let (compressed, bytes) = kivi_compress(run, protocol.prefill, kivi)?;
    evaluate(lm, run, tokens, protocol, compressed, bytes)
}

/// KIVI's cache of `run`'s first `p` tokens (as [`kivi_quality`] says) and its bytes,
/// compressed and in fp16.
pub fn kivi_compress(
    run: &LmRun,
    p: usize,
    kivi: &KiviConfig,
) -> Result<(Compressed, (u64, u64)), EvalError> {
    let full = compress(run, p, &CacheSpec::full())?;
    let hd = full.cache.head_dim;
    let cfg = KiviConfig {
        value_group: kivi.value_group.min(hd).max(1),
        ..*kivi
    };
    // (KIVI's rule for which tokens are quantized, `KiviConfig::quantized_tokens`, with the
    // quantizer the policies' rows use: `kivi_quantize` would bring its error statistics, which
    // the model does not need, into the model's on-demand module)
    let (n_k, n_v) = cfg.quantized_tokens(p);
    let mut cache = full.cache;
    for (ks, vs) in cache.keys.iter_mut().zip(cache.values.iter_mut()) {
        for (k, v) in ks.iter_mut().zip(vs.iter_mut()) {
            quantize_leading(k, n_k, hd, &cfg.key_quant(), "keys")?;
            quantize_leading(v, n_v, hd, &cfg.value_quant(), "values")?;
        }
    }
    let model = model_config(run);
    let b = budget::breakdown(&model, &cfg.compression(p as u64, p as u64))?;
    let compressed = Compressed {
        cache,
        kept: full.kept,
    };
    Ok((compressed, (b.m_final, b.m_fp)))
}

/// The first `n` rows of `rows` (`hd` wide) quantized with `q` and de-quantized, in place.
fn quantize_leading(
    rows: &mut [f32],
    n: usize,
    hd: usize,
    q: &QuantConfig,
    what: &'static str,
) -> Result<(), EvalError> {
    if n == 0 {
        return Ok(());
    }
    let head = &mut rows[..n * hd];
    let x = Matrix::new(n, hd, head.to_vec()).map_err(|e| EvalError::Policy(e.into()))?;
    let quantized = quantize(&x, q).map_err(|error| EvalError::Quant {
        what,
        rows: n,
        cols: hd,
        error,
    })?;
    head.copy_from_slice(quantized.dequantize().data());
    Ok(())
}

/// Reads the evaluated tokens under `compressed` and compares each prediction with the full
/// cache's.
fn evaluate(
    lm: &Lm,
    run: &LmRun,
    tokens: &[u8],
    protocol: Protocol,
    compressed: Compressed,
    (bytes, bytes_full): (u64, u64),
) -> Result<Quality, EvalError> {
    let p = protocol.prefill;
    let Compressed { mut cache, kept } = compressed;
    let logits = lm.extend(&mut cache, &tokens[p..])?;
    let vocab = lm.config().vocab;
    let (mut kl, mut top1, mut nll_full, mut nll) = (vec![], vec![], vec![], vec![]);
    for (i, row) in logits.chunks_exact(vocab).enumerate() {
        let full = run.logits.row(p + i).unwrap_or(&[]);
        kl.push(kl_divergence(full, row));
        top1.push(argmax(full) == argmax(row));
        if let Some(&next) = tokens.get(p + i + 1) {
            nll_full.push(-log_softmax_at(full, usize::from(next)));
            nll.push(-log_softmax_at(row, usize::from(next)));
        }
    }
    Ok(Quality {
        protocol,
        kl,
        top1,
        nll_full,
        nll,
        kept,
        bytes,
        bytes_full,
    })
}

/// How the next byte is picked.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// 0: greedy (the most likely byte); above 0: sampled from `softmax(logits / temperature)`.
    pub temperature: f32,
    /// The sampler's seed: the full and the compressed cache draw the same random numbers, so
    /// where their texts part, the cache made the difference.
    pub seed: u64,
}

/// Text generated after the prompt with the full and with the compressed cache.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Generation {
    /// The prefill's length `P`: the prompt's tokens (generation starts after them).
    pub prefill: usize,
    /// With the full cache.
    pub full: Vec<u8>,
    /// With the prefill compressed once (the cache grows as it generates).
    pub once: Vec<u8>,
    /// With the cache held at `B` while generating, evicting as the policy does at decode
    /// time (H2O: the lowest cumulative score; StreamingLLM: the oldest after the sinks; TOVA:
    /// the lowest attention of the current step); `None` for the policies that select once by
    /// design (SnapKV, random, the oracle) and when nothing is dropped.
    pub evicting: Option<Vec<u8>>,
}

/// The index of the first byte where `a` and `b` differ (`None` when one is a prefix of the
/// other or they are equal).
pub fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y)
}

fn pick(logits: &[f32], sampling: &Sampling, rng: &mut Xoshiro256) -> u8 {
    if sampling.temperature <= 0.0 {
        return argmax(logits) as u8;
    }
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let weights: Vec<f64> = logits
        .iter()
        .map(|&v| (f64::from(v - max) / f64::from(sampling.temperature)).exp())
        .collect();
    let mut u = rng.uniform() * weights.iter().sum::<f64>();
    for (i, w) in weights.iter().enumerate() {
        if u < *w {
            return i as u8;
        }
        u -= w;
    }
    (weights.len() - 1) as u8
}

/// A decode-time eviction: the rule, the budget it holds the cache at, and each row's score
/// (`[layer][head][row]`).
type Eviction = (Evict, usize, Vec<Vec<Vec<f32>>>);

/// A decode-time eviction rule: which row of a head's cache goes when it holds one too many.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Evict {
    /// The lowest cumulative score outside the last `recent` rows.
    Heavy { recent: usize },
    /// The lowest score of the current step outside the last `recent` rows.
    Current { recent: usize },
    /// The oldest row after the first `sinks`.
    Oldest { sinks: usize },
}

fn eviction(spec: &CacheSpec) -> Option<Evict> {
    let Keep::Policy { policy } = spec.keep else {
        return None;
    };
    match policy {
        Policy::H2oSum | Policy::H2oMean => Some(Evict::Heavy {
            recent: spec.recent,
        }),
        Policy::Tova => Some(Evict::Current {
            recent: spec.recent,
        }),
        Policy::StreamingLlm { sinks } => Some(Evict::Oldest { sinks }),
        // (SnapKV selects once, from its window at the prefill; random and the oracle have no
        // rule to apply while generating: the cache is held at B only by the rules above)
        Policy::SnapKv { .. } | Policy::Random { .. } | Policy::Oracle => None,
    }
}

/// Generates `n` bytes (fewer where the context ends) after the whole of `tokens` (the prompt
/// is the prefill, as a server has it), whose full forward is `run`: with the full cache, with
/// the prefill compressed once by `spec`, and with the cache held at `spec`'s budget by
/// decode-time eviction.
pub fn generate(
    lm: &Lm,
    run: &LmRun,
    tokens: &[u8],
    spec: &CacheSpec,
    n: usize,
    sampling: &Sampling,
) -> Result<Generation, EvalError> {
    let p = protocol_of(run, tokens)?.tokens;
    let n = n.min(lm.config().context.saturating_sub(p));
    let first = run.logits.row(p - 1).unwrap_or(&[]).to_vec();
    let text = |cache: &mut KvCache, evict: Option<Eviction>| {
        let mut rng = Xoshiro256::stream(sampling.seed, 0x006b_766c_6162);
        let mut logits = first.clone();
        let mut out = Vec::with_capacity(n);
        let mut evict = evict;
        for _ in 0..n {
            let byte = pick(&logits, sampling, &mut rng);
            out.push(byte);
            if out.len() == n {
                break;
            }
            let mut last: Vec<Vec<Vec<f32>>> = Vec::new();
            logits = lm.extend_seen(cache, &[byte], &mut |l, _, _, w| {
                if last.len() <= l {
                    last.push(Vec::new());
                }
                last[l].push(w.to_vec());
            })?;
            if let Some((rule, budget, scores)) = evict.as_mut() {
                evict_rows(cache, &last, *rule, *budget, scores);
            }
        }
        Ok::<_, EvalError>(out)
    };
    let mut full_cache = compress(run, p, &CacheSpec::full())?.cache;
    let full = text(&mut full_cache, None)?;
    let compressed = compress(run, p, spec)?;
    let once = text(&mut compressed.cache.clone(), None)?;
    let dropped = compressed.kept.iter().flatten().any(|k| k.len() < p);
    let evicting = match eviction(spec) {
        Some(rule) if dropped => {
            // (H2O's running scores start from each kept token's score on the prefill)
            let scores = run
                .attention
                .iter()
                .zip(&compressed.kept)
                .map(|(layer, kept)| {
                    layer
                        .iter()
                        .zip(kept)
                        .map(|(a, keep)| {
                            keep.iter()
                                .map(|&j| (0..p).filter_map(|t| a.row(t).map(|r| r[j])).sum())
                                .collect()
                        })
                        .collect()
                })
                .collect();
            let budget = spec.budget.min(p);
            let mut cache = compressed.cache;
            Some(text(&mut cache, Some((rule, budget, scores)))?)
        }
        _ => None,
    };
    Ok(Generation {
        prefill: p,
        full,
        once,
        evicting,
    })
}

/// After one decoded token: every head's row scores updated with its attention `last[l][h]`
/// (over the cache's rows, the new one last) and, where a head holds more than `budget` rows,
/// the rule's row dropped.
fn evict_rows(
    cache: &mut KvCache,
    last: &[Vec<Vec<f32>>],
    rule: Evict,
    budget: usize,
    scores: &mut [Vec<Vec<f32>>],
) {
    let hd = cache.head_dim;
    for (l, layer) in last.iter().enumerate() {
        for (h, w) in layer.iter().enumerate() {
            let s = &mut scores[l][h];
            s.push(0.0);
            for (acc, &wj) in s.iter_mut().zip(w) {
                *acc = match rule {
                    Evict::Current { .. } => wj,
                    _ => *acc + wj,
                };
            }
            let rows = s.len();
            if rows <= budget {
                continue;
            }
            let drop = match rule {
                Evict::Oldest { sinks } => sinks.min(rows - 1),
                Evict::Heavy { recent } | Evict::Current { recent } => {
                    let candidates = rows.saturating_sub(recent.min(budget)).max(1);
                    (0..candidates)
                        .min_by(|&a, &b| s[a].total_cmp(&s[b]).then(a.cmp(&b)))
                        .unwrap_or(0)
                }
            };
            s.remove(drop);
            cache.keys[l][h].drain(drop * hd..(drop + 1) * hd);
            cache.values[l][h].drain(drop * hd..(drop + 1) * hd);
        }
    }
}

/// What one lever costs against the current compression: the model's KL after it, and the
/// bytes it saves.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeverCost {
    /// Mean KL (full || compressed) with the lever pulled, nats.
    pub kl: f64,
    /// Mean loss of the true next byte with the lever pulled, nats.
    pub nll: f64,
    /// The cache's bytes with the lever pulled.
    pub bytes: u64,
    /// The KL added per KiB saved, nats (`None` when it saves nothing).
    pub kl_per_kib: Option<f64>,
}

/// `lever` measured against `base` ([`LeverCost`]).
pub fn lever_cost(base: &Quality, lever: &Quality) -> LeverCost {
    let saved = base.bytes as f64 - lever.bytes as f64;
    LeverCost {
        kl: lever.mean_kl(),
        nll: lever.mean_nll(),
        bytes: lever.bytes,
        kl_per_kib: (saved > 0.0).then(|| (lever.mean_kl() - base.mean_kl()) / (saved / 1024.0)),
    }
}

/// The note's two levers from `spec`: one bit fewer for K and V (where both are quantized
/// and one bit fewer is allowed), and 10% fewer tokens (`floor(0.9 min(B, P))`, at least 1).
pub fn levers(spec: &CacheSpec, prefill: usize) -> (Option<CacheSpec>, Option<CacheSpec>) {
    let fewer = |q: Option<QuantAccounting>| {
        q.and_then(|q| {
            let min = crate::quant::QuantConfig::bits_range(q.scheme)
                .start()
                .to_owned();
            (q.bits > min).then_some(QuantAccounting {
                bits: q.bits - 1,
                ..q
            })
        })
    };
    let bits = match (fewer(spec.keys), fewer(spec.values)) {
        (Some(k), Some(v)) => Some(CacheSpec {
            keys: Some(k),
            values: Some(v),
            ..*spec
        }),
        _ => None,
    };
    let kept = spec.budget.min(prefill);
    let tokens = (kept * 9 / 10).max(1);
    let tokens = match spec.keep {
        Keep::Policy { .. } if tokens < kept => Some(CacheSpec {
            budget: tokens,
            ..*spec
        }),
        _ => None,
    };
    (bits, tokens)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::lm::LmConfig;
    use crate::quant::{Granularity, MetaDtype, Scheme};

    /// A small model with pseudo-random weights (norms 1, biases 0), so that heads differ.
    fn model() -> Lm {
        model_of_context(24)
    }

    /// [`model`] with a context of `context` tokens.
    pub(crate) fn model_of_context(context: usize) -> Lm {
        let config = LmConfig {
            d_model: 8,
            layers: 2,
            heads: 2,
            mlp: 16,
            context,
            vocab: 256,
            rope_base: 10_000.0,
            norm_eps: 1e-5,
        };
        let mut state = 7u64;
        Lm::new(config, |name, shape| {
            let n = shape.iter().product();
            Ok(if name.ends_with("weight") {
                vec![1.0; n]
            } else if name.ends_with("bias") || name.contains(".b") {
                vec![0.0; n]
            } else {
                (0..n)
                    .map(|_| {
                        let r = crate::rng::splitmix64(&mut state);
                        ((r >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.8
                    })
                    .collect()
            })
        })
        .expect("the model")
    }

    fn prompt(lm: &Lm) -> (Vec<u8>, LmRun) {
        let tokens = Lm::tokens("the cat sat on the mat");
        let run = lm.forward(&tokens).expect("within the context");
        (tokens, run)
    }

    fn h2o(budget: usize, recent: usize) -> CacheSpec {
        CacheSpec {
            keep: Keep::Policy {
                policy: Policy::H2oSum,
            },
            budget,
            recent,
            ..CacheSpec::full()
        }
    }

    #[test]
    fn the_protocol_keeps_a_quarter_for_evaluation_and_refuses_a_bos_alone() {
        let p = |t| Protocol::of(t).map(|p| (p.prefill, p.evaluated));
        assert_eq!(p(2), Ok((1, 1)));
        assert_eq!(p(9), Ok((7, 2)));
        assert_eq!(p(256), Ok((192, 64)));
        assert_eq!(p(1000), Ok((936, EVALUATED)));
        let e = Protocol::of(1).unwrap_err();
        assert_eq!(e, EvalError::TooShort { tokens: 1 });
        assert!(e.to_string().contains("at least 2"), "{e}");
    }

    #[test]
    fn the_full_cache_measures_nothing_lost() {
        let lm = model();
        let (tokens, run) = prompt(&lm);
        let q = quality(&lm, &run, &tokens, &CacheSpec::full()).expect("quality");
        assert_eq!(q.protocol.prefill + q.protocol.evaluated, tokens.len());
        assert_eq!(q.kl.len(), q.protocol.evaluated);
        assert_eq!(q.nll.len(), q.protocol.evaluated - 1);
        assert!(q.mean_kl() < 1e-10, "KL {:e}", q.mean_kl());
        assert!(q.top1.iter().all(|&t| t));
        assert_eq!(q.nll, q.nll_full);
        assert_eq!(q.bytes, q.bytes_full, "nothing compressed: the fp16 cache");
    }

    #[test]
    fn each_head_keeps_its_budget_and_the_mass_allocation_keeps_the_layers() {
        let lm = model();
        let (tokens, run) = prompt(&lm);
        let p = Protocol::of(tokens.len()).unwrap().prefill;
        let uniform = compress(&run, p, &h2o(5, 2)).expect("uniform");
        for layer in &uniform.kept {
            for k in layer {
                assert_eq!(k.len(), 5);
                assert!(k.windows(2).all(|w| w[0] < w[1]), "ascending: {k:?}");
                assert!(k.ends_with(&[p - 2, p - 1]), "the recent window: {k:?}");
            }
        }
        let mass = compress(
            &run,
            p,
            &CacheSpec {
                allocation: Allocation::ScoreMass,
                ..h2o(5, 2)
            },
        )
        .expect("mass");
        for layer in &mass.kept {
            assert_eq!(layer.iter().map(Vec::len).sum::<usize>(), 5 * layer.len());
            assert!(layer.iter().all(|k| k.ends_with(&[p - 2, p - 1])));
        }
        assert_eq!(mass.cache.keys[0][0].len(), mass.kept[0][0].len() * 4);
        // Dropping the first token leaves every other one; a budget at P keeps every token.
        let first = compress(
            &run,
            p,
            &CacheSpec {
                keep: Keep::DropFirst,
                ..CacheSpec::full()
            },
        )
        .unwrap();
        assert!(first
            .kept
            .iter()
            .flatten()
            .all(|k| *k == (1..p).collect::<Vec<_>>()));
        let all = compress(&run, p, &h2o(p, 2)).unwrap();
        assert!(all.kept.iter().flatten().all(|k| k.len() == p));
    }

    #[test]
    fn a_group_longer_than_the_kept_rows_is_refused_in_words() {
        let lm = model();
        let (tokens, run) = prompt(&lm);
        let q = QuantAccounting {
            bits: 4,
            scheme: Scheme::Symmetric,
            granularity: Granularity::PerChannel,
            group_size: Some(64),
            meta: MetaDtype::F16,
        };
        let e = quality(
            &lm,
            &run,
            &tokens,
            &CacheSpec {
                keys: Some(q),
                ..h2o(5, 2)
            },
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("quantizing the model's cache (keys of 5 kept tokens x 4 channels"),
            "{e}"
        );
    }

    #[test]
    fn decode_time_eviction_drops_the_rules_row() {
        let row = |v: f32| vec![v; 2];
        let cache = || KvCache {
            keys: vec![vec![[row(0.0), row(1.0), row(2.0), row(3.0)].concat()]],
            values: vec![vec![[row(0.0), row(1.0), row(2.0), row(3.0)].concat()]],
            position: 9,
            head_dim: 2,
        };
        // Four rows held with a budget of 3 after this step's weights are added.
        let last = vec![vec![vec![0.1, 0.2, 0.3, 0.4]]];
        let scores = || vec![vec![vec![0.5, 0.0, 0.9]]];
        let kept = |rule| {
            let mut c = cache();
            evict_rows(&mut c, &last, rule, 3, &mut scores());
            c.keys[0][0].chunks(2).map(|r| r[0]).collect::<Vec<_>>()
        };
        // H2O: running scores 0.6, 0.2, 1.2, 0.4; the last row is recent: row 1 goes.
        assert_eq!(kept(Evict::Heavy { recent: 1 }), vec![0.0, 2.0, 3.0]);
        // TOVA: this step's weights, the lowest outside the recent row is row 0.
        assert_eq!(kept(Evict::Current { recent: 1 }), vec![1.0, 2.0, 3.0]);
        // StreamingLLM with one sink: the oldest after it, row 1.
        assert_eq!(kept(Evict::Oldest { sinks: 1 }), vec![0.0, 2.0, 3.0]);
    }

    #[test]
    fn generation_from_the_full_cache_is_the_same_text_three_ways() {
        // (room after the prompt to write: it is all prefill)
        let lm = model_of_context(40);
        let (tokens, run) = prompt(&lm);
        let greedy = Sampling {
            temperature: 0.0,
            seed: 1,
        };
        let g = generate(&lm, &run, &tokens, &CacheSpec::full(), 4, &greedy).unwrap();
        assert_eq!(g.full.len(), 4);
        assert_eq!(g.once, g.full);
        assert_eq!(g.evicting, None, "nothing dropped: no decode-time eviction");
        let s = CacheSpec {
            keep: Keep::Policy {
                policy: Policy::StreamingLlm { sinks: 1 },
            },
            budget: 3,
            ..CacheSpec::full()
        };
        let g = generate(&lm, &run, &tokens, &s, 100, &greedy).unwrap();
        // (the whole prompt is the prefill: the text continues what was typed)
        assert_eq!(g.prefill, tokens.len());
        assert_eq!(g.full.len(), 40 - tokens.len(), "stops at the context");
        assert!(g.evicting.is_some());
        // The full cache's text is greedy decoding of the prompt, one token at a time.
        let mut cache = KvCache::default();
        let mut logits = lm.extend(&mut cache, &tokens).unwrap();
        let mut greedy_text = Vec::new();
        for _ in 0..g.full.len() {
            let b = argmax(&logits[logits.len() - 256..]) as u8;
            greedy_text.push(b);
            logits = lm.decode(&mut cache, b).unwrap();
        }
        assert_eq!(g.full, greedy_text);
        // The same seed draws the same numbers for both caches.
        let warm = Sampling {
            temperature: 0.8,
            seed: 3,
        };
        let a = generate(&lm, &run, &tokens, &CacheSpec::full(), 4, &warm).unwrap();
        assert_eq!(a.full, a.once);
    }

    #[test]
    fn the_levers_are_one_bit_and_a_tenth_of_the_tokens() {
        let q = |bits| {
            Some(QuantAccounting {
                bits,
                scheme: Scheme::Symmetric,
                granularity: Granularity::PerChannel,
                group_size: None,
                meta: MetaDtype::F16,
            })
        };
        let spec = CacheSpec {
            keys: q(4),
            values: q(4),
            ..h2o(40, 8)
        };
        let (bits, tokens) = levers(&spec, 30);
        assert_eq!(bits.and_then(|s| s.keys).map(|k| k.bits), Some(3));
        assert_eq!(
            tokens.map(|s| s.budget),
            Some(27),
            "0.9 x min(B, P) = 0.9 x 30"
        );
        // At the scheme's fewest bits, and with every token kept, a lever cannot be pulled.
        let spec = CacheSpec {
            keys: q(2),
            values: q(2),
            keep: Keep::All,
            ..spec
        };
        assert_eq!(levers(&spec, 30), (None, None));
        assert_eq!(first_difference(b"abc", b"abd"), Some(2));
        assert_eq!(first_difference(b"ab", b"abc"), None);
    }
}
