//! Section 1, the budget: the byte breakdown of the data's cache and its extrapolation to a
//! real model, with metadata and index bytes counted.

use super::*;
use crate::budget::{
    breakdown, gib, tokens_that_fit, Breakdown, Compression, FitKind, IndexKind, ModelConfig,
    QuantAccounting,
};
use crate::policy::{self, SelectionScope};
use crate::state::{model_slug, IndexChoice, Method, Scope, Settings};
use serde::Serialize;

/// The budget section's numbers: on the data, and extrapolated to a model.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetFigures {
    /// On the loaded data: one layer, one KV head, `d_head = d`, fp16.
    pub data: Breakdown,
    /// The model: its name.
    pub model_name: String,
    /// The model's config.
    pub model: ModelConfig,
    /// On the model at the chosen context and batch, with the data's kept fraction.
    pub extrapolated: Breakdown,
    /// `M_fp` of the model in GiB.
    pub model_gib_fp: f64,
    /// `M_KV,final` of the model in GiB.
    pub model_gib_final: f64,
    /// Tokens of context that fit in `memory_gib` with this compression (whole batch): see
    /// `context_fit_kind` for what the number is.
    pub context_fit: u64,
    /// Whether `context_fit` is a count of tokens, the window of a model whose every layer
    /// slides (any length fits), or the search's limit (more fit).
    pub context_fit_kind: FitKind,
    /// Tokens of context that fit uncompressed.
    pub context_fit_fp: u64,
    /// What `context_fit_fp` is, as `context_fit_kind`.
    pub context_fit_fp_kind: FitKind,
    /// Kept tokens at the model's context: the data's kept fraction of it, or the data's kept
    /// count (`keep`), at most the context.
    pub kept_at_context: u64,
    /// How it follows the context (the `keep` setting).
    pub keep: crate::state::KeepChoice,
    /// Independent kept sets in the model (per layer, per KV head or per query head).
    pub selection_copies: u64,
    /// How many copies of K/V the scope makes the cache hold (n_heads / n_kv for per query head).
    pub kv_copy_factor: u64,
}

pub(super) fn accounting(s: &Settings, bits: u8) -> QuantAccounting {
    let c = quant_config(s);
    QuantAccounting {
        bits,
        scheme: c.scheme,
        granularity: c.granularity,
        group_size: c.group_size.map(|g| g as u64),
        meta: s.meta,
    }
}

/// The model the budget section extrapolates to.
pub fn model_of(s: &Settings) -> ModelConfig {
    if s.model != "custom" {
        if let Some(m) = ModelConfig::presets()
            .into_iter()
            .find(|m| model_slug(&m.name) == s.model)
        {
            return m;
        }
    }
    // (MLA stores its latent and its RoPE key, `(d_c + d_R)` a token a layer; sliding layers
    // hold their window)
    ModelConfig {
        name: "custom".into(),
        layers: s.layers,
        n_kv_heads: s.kv_heads,
        n_heads: if s.q_heads == 0 {
            s.kv_heads
        } else {
            s.q_heads
        },
        d_head: s.head_dim,
        fp_bytes: s.fp_bytes,
        mla_latent: (s.mla_latent > 0).then_some(s.mla_latent + s.mla_rope),
        sliding: (s.sliding_layers > 0).then_some(crate::budget::SlidingWindow {
            layers: s.sliding_layers,
            window: s.sliding_window,
        }),
    }
}

/// The loaded data as a "model": one layer, one KV head, `d_head = d`, fp16.
pub(super) fn data_model(data: &Data) -> ModelConfig {
    ModelConfig {
        name: "data".into(),
        layers: 1,
        n_kv_heads: 1,
        n_heads: 1,
        d_head: data.keys.cols() as u64,
        fp_bytes: 2,
        mla_latent: None,
        sliding: None,
    }
}

pub(super) fn data_breakdown(
    data: &Data,
    s: &Settings,
    kept: usize,
    bits: u8,
) -> Result<Breakdown, LabError> {
    let model = data_model(data);
    Ok(breakdown(
        &model,
        &compression(s, data.attention.cols() as u64, kept as u64, bits),
    )?)
}

pub(super) fn compression(s: &Settings, total: u64, kept: u64, bits: u8) -> Compression {
    let q = accounting(s, bits);
    Compression {
        t_total: total,
        t_kept: kept.clamp(1, total.max(1)),
        batch: 1,
        k: Some(q),
        v: Some(q),
        residual: 0,
        index: if kept >= total {
            IndexKind::None
        } else {
            match s.index {
                IndexChoice::List => IndexKind::List,
                IndexChoice::Mask => IndexKind::Mask,
            }
        },
        selection_copies: 1,
        score_state_bytes: if s.method == Method::H2o && kept < total {
            4
        } else {
            0
        },
    }
}

pub(super) fn budget_figures(
    data: &Data,
    s: &Settings,
    kept: usize,
) -> Result<BudgetFigures, LabError> {
    let on_data = data_breakdown(data, s, kept, s.bits)?;
    let model = model_of(s);
    let t = data.attention.cols() as f64;
    let ctx = s.context;
    let keep = match s.keep {
        crate::state::KeepChoice::Fraction => crate::budget::Keep::Fraction,
        crate::state::KeepChoice::Tokens => crate::budget::Keep::Tokens,
    };
    let kept_ctx = match keep {
        crate::budget::Keep::Fraction => ((ctx as f64) * kept as f64 / t).ceil() as u64,
        crate::budget::Keep::Tokens => kept as u64,
    }
    .clamp(1, ctx);
    let mut c = compression(s, ctx, kept_ctx, s.bits);
    c.batch = s.batch;
    let scope = match s.scope {
        Scope::Layer => SelectionScope::PerLayer,
        Scope::KvHead => SelectionScope::PerKvHead,
        Scope::QueryHead => SelectionScope::PerQueryHead,
    };
    // Per-query-head selection (SnapKV's reference) stores K/V once per query head: the scoped
    // breakdown multiplies the cache by n_heads / n_kv_heads and counts one index per copy.
    let scoped = policy::scoped_breakdown(&model, &c, scope).map_err(|e| LabError::Range {
        field: "scope",
        message: e.to_string(),
    })?;
    let extrapolated = scoped.breakdown;
    c.selection_copies = scoped.memory.selection_copies;
    let memory = s.memory_gib.saturating_mul(1 << 30);
    // (the search counts what the scoped total counts: every copy of K/V, not one)
    let fit = policy::scoped_tokens_that_fit(&model, &c, memory, keep, scope).map_err(|e| {
        LabError::Range {
            field: "scope",
            message: e.to_string(),
        }
    })?;
    let fp = Compression {
        batch: s.batch,
        ..Compression::none(ctx)
    };
    let fit_fp = tokens_that_fit(&model, &fp, memory)?;
    Ok(BudgetFigures {
        kept_at_context: kept_ctx,
        keep: s.keep,
        selection_copies: scoped.memory.selection_copies,
        kv_copy_factor: scoped.memory.kv_copy_factor,
        context_fit: fit.tokens,
        context_fit_kind: fit.kind,
        context_fit_fp: fit_fp.tokens,
        context_fit_fp_kind: fit_fp.kind,
        data: on_data,
        model_name: model.name.clone(),
        model_gib_fp: gib(extrapolated.m_fp),
        model_gib_final: gib(extrapolated.m_final),
        model,
        extrapolated,
    })
}
