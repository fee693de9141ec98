//! The page's model, in plain Rust: the loaded or generated data, the current settings, and
//! every number the page shows, recomputed only where a control changed something.
//!
//! `web` wraps a [`Lab`] for JavaScript; everything here is natively testable and
//! benchmarkable. [`Lab::update`] is transactional: on any error nothing changes, so the last
//! good view stays on screen, and the error says which control caused it ([`LabError::field`]).
//!
//! Dependencies between sections follow the note: bits never change the selection, B never
//! changes the quantization, and the budget (cheap) is always recomputed.

use crate::budget::{
    breakdown, gib, tokens_that_fit, Breakdown, BudgetError, Compression, FitKind, IndexKind,
    ModelConfig, QuantAccounting,
};
use crate::io::{LoadError, TokenMismatch};
use crate::kivi::{
    channel_vs_token_error, kivi_quantize, KiviBytes, KiviConfig, StreamBytes, TensorError,
};
use crate::policy::{
    self, Evaluator, Policy, PolicyError, PolicyScores, QualityReport, SelectionScope, SweepCurve,
};
use crate::quant::{
    quantize, ErrorStats, Granularity, GroupError, QuantConfig, QuantError, Quantized, RowError,
};
use crate::select::{
    heavy_plus_recent, observation_scores, streaming_llm, Pooling, Role, SelectError, Selection,
};
use crate::state::{
    model_slug, IndexChoice, KvPick, Method, PoolKind, Scope, Settings, StateWarning,
};
use crate::synth::{self, AttentionSpec, KvSpec, SynthError};
use crate::upload::{Chosen, Uploads};
use crate::Matrix;
use serde::Serialize;
use std::sync::Arc;
use thiserror::Error;

/// Why an update was refused. [`LabError::field`] names the control to show it next to.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LabError {
    /// Generating data failed.
    #[error("{0}")]
    Synth(#[from] SynthError),
    /// Quantization was refused.
    #[error("{0}")]
    Quant(#[from] QuantError),
    /// Selection was refused; `field` is the control.
    #[error("{error}")]
    Select {
        /// The control.
        field: &'static str,
        /// The error.
        error: SelectError,
    },
    /// Budget accounting was refused.
    #[error("{0}")]
    Budget(#[from] BudgetError),
    /// A file could not be used: the [`LoadError`]'s message (or a [`TokenMismatch`]'s), made
    /// when the error is, so that a build which never reads a file (the page's module) does not
    /// carry every reader's message. (Shared: a comparison that failed hands its error to every
    /// policy, so it is cloned.)
    #[error("{0}")]
    Load(Arc<str>),
    /// A setting outside its absolute range (see [`Settings::validate`]).
    #[error("{message}")]
    Setting {
        /// The settings key.
        field: String,
        /// The message, naming the value and the range.
        message: String,
        /// What the message says, as fields (the page words them in its language).
        repair: Box<crate::state::Repair>,
    },
    /// The channel shown is not one of the data's `0..=max` (`max = d - 1`), e.g. from a link made
    /// for wider data.
    #[error("channel {channel} is out of range: must be between 0 and {max} (d - 1)")]
    Channel {
        /// The channel asked for.
        channel: usize,
        /// The data's last channel, `d - 1`.
        max: usize,
    },
    /// A parameter outside its data-dependent range.
    #[error("{message}")]
    Range {
        /// The control.
        field: &'static str,
        /// The message, naming the value and the range.
        message: String,
    },
}

impl From<LoadError> for LabError {
    fn from(e: LoadError) -> Self {
        LabError::Load(e.to_string().into())
    }
}

impl From<TokenMismatch> for LabError {
    fn from(e: TokenMismatch) -> Self {
        LabError::Load(e.to_string().into())
    }
}

impl LabError {
    /// The settings key of the control that caused the error (`"file"` for uploads).
    pub fn field(&self) -> &str {
        match self {
            LabError::Setting { field, .. } => field,
            LabError::Synth(_) => "tokens",
            LabError::Quant(QuantError::Bits { .. }) => "bits",
            LabError::Quant(QuantError::GroupSize { .. })
            | LabError::Quant(QuantError::GroupWithPerTensor { .. }) => "group",
            LabError::Quant(_) => "file",
            LabError::Select { field, .. } | LabError::Range { field, .. } => field,
            LabError::Channel { .. } => "channel",
            LabError::Budget(_) => "model",
            LabError::Load(_) => "file",
        }
    }
}

/// Where the data came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DataFigures {
    /// `T`.
    pub tokens: usize,
    /// `S`.
    pub steps: usize,
    /// `d`.
    pub channels: usize,
    /// True when generated from the settings (and so reproducible from the URL).
    pub generated: bool,
    /// A one-line description (generator settings or file shapes), in English.
    pub description: String,
    /// The generator's settings when the data is generated, or when an upload left parts to
    /// generate (`None` when every part was uploaded): what `description` says, as fields, so
    /// the page can say it in its own language.
    pub generator: Option<GeneratorFigures>,
    /// Which parts were uploaded, when any was.
    pub uploaded: Option<UploadedParts>,
}

/// The settings generated data was made with (see [`DataFigures::generator`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GeneratorFigures {
    /// The attention pattern's name ([`synth::AttentionPreset::name`]).
    pub pattern: &'static str,
    /// The seed.
    pub seed: u64,
    /// Key outlier channels (at most `d`).
    pub outlier_channels: usize,
    /// Skewed channels (at most `d`).
    pub skewed_channels: usize,
}

/// The quantization section's numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuantFigures {
    /// Bits `b`.
    pub bits: u8,
    /// `qmax`: `2^(b-1) - 1` symmetric, `2^b - 1` asymmetric.
    pub qmax: i64,
    /// The fewest bits the scheme takes (2 symmetric, 1 asymmetric): the Bits slider starts
    /// there.
    pub bits_min: u8,
    /// Number of groups (stored scales).
    pub groups: usize,
    /// Group length along the grouped axis.
    pub group_size: usize,
    /// The channel shown ("Channel shown"): its first group per channel, token 0's group that
    /// holds it per token.
    pub channel: usize,
    /// The group whose scale, grid and bound the section shows, and its values in the
    /// histogram: the shown channel's first group per channel, token 0's group holding that
    /// channel per token, the whole tensor per tensor.
    pub group: ShownGroup,
    /// `max |x|` over the shown group.
    pub group_max_abs: f64,
    /// `min x` over that group.
    pub group_min: f64,
    /// `max x` over that group.
    pub group_max: f64,
    /// The scale of the shown channel's first group.
    pub scale: f64,
    /// Its zero point (asymmetric only).
    pub zero_point: Option<i64>,
    /// Error statistics over the whole tensor.
    pub stats: ErrorStats,
    /// Largest per-element bound `scale / 2` over the groups.
    pub bound_max: f64,
    /// Every element within `scale/2`, up to its group's `f32` round-off allowance
    /// ([`crate::quant::GroupError::limit`]).
    pub element_bound_holds: bool,
    /// Every row within `1/4 sum scale^2`, up to its elements' `f32` round-off allowances
    /// ([`crate::quant::RowError::limit`]).
    pub row_bound_holds: bool,
    /// Rows (tokens) quantized.
    pub rows: usize,
    /// Bit-packed code bytes.
    pub code_bytes: u64,
    /// Scale + zero-point bytes.
    pub meta_bytes: u64,
    /// fp16 bytes of the same tensor.
    pub fp_bytes: u64,
}

/// Which group of values section 2 shows (its scale, grid, bound and histogram), so that
/// every formula names the group it is about: a run of tokens of one channel (per channel),
/// a run of channels of one token (per token), or the whole tensor.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShownGroup {
    /// How the values are grouped: `per-channel`, `per-token` or `per-tensor`.
    pub granularity: &'static str,
    /// The channel (per channel) or the token (per token, always 0) the group belongs to.
    pub index: usize,
    /// First and last position of the group along its axis (tokens per channel, channels per
    /// token), counted from 0; `0..=T*d-1` elements per tensor.
    pub from: usize,
    /// The last position, inclusive.
    pub to: usize,
    /// The axis's length (`T` per channel, `d` per token, `T*d` per tensor): the group is the
    /// whole axis when `from = 0` and `to = len - 1`.
    pub len: usize,
    /// `max |x - x_hat|` over the group.
    pub max_error: f64,
    /// Its bound `scale / 2`.
    pub bound: f64,
    /// Groups whose every element is within its bound (up to round-off), of [`QuantFigures::groups`].
    pub groups_within: usize,
}

/// The selection section's numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectFigures {
    /// `|kept|`.
    pub kept_count: usize,
    /// Kept indices as compact ranges, e.g. `0-3,17,480-511`.
    pub kept_ranges: String,
    /// `|dropped|`.
    pub dropped_count: usize,
    /// Kept as heavy hitters.
    pub heavy_count: usize,
    /// Kept as recent.
    pub recent_count: usize,
    /// Kept as sinks.
    pub sink_count: usize,
    /// `R_token = T / |kept|`.
    pub r_token: f64,
    /// Mean attention mass retained over steps.
    pub mass_mean: f64,
    /// Worst step's attention mass retained.
    pub mass_worst: f64,
    /// The lowest score among kept heavy hitters (the top-k threshold), if any.
    pub threshold: Option<f64>,
    /// Recent window actually kept `[start, T)`.
    pub recent_start: usize,
    /// The smallest budget the method takes here: StreamingLLM keeps its sinks, so
    /// `max(1, sinks)`; 1 otherwise. The B slider starts there (it never rests on a refused B).
    pub budget_min: usize,
}

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

/// One lever of the "which lever first" comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lever {
    /// What the lever does, as a short machine-readable tag (`bits-1`, `tokens-10pct`).
    pub lever: &'static str,
    /// Bytes of `M_KV,final` (on the data) before.
    pub bytes_before: u64,
    /// Bytes after pulling the lever.
    pub bytes_after: u64,
    /// Quality before: the attention output's relative error, mean over steps, with V
    /// quantized as section 2 sets it and section 3's kept set (see [`LeverErrors`]). The same
    /// measure for both levers, so their costs compare.
    pub quality_before: f64,
    /// The same error after pulling the lever.
    pub quality_after: f64,
    /// Whether the lever can be pulled at all (bits already minimal, B already 1).
    pub possible: bool,
    /// The errors are not computed yet (an update deferred them, see [`LeverErrors::Pending`]):
    /// `bytes_after` then holds `bytes_before`, and both qualities are 0.
    pub pending: bool,
    /// The output error's rise per KiB saved (`(after - before) / (saved / 1024)`, a fraction
    /// per KiB); `None` when the lever is not possible, pending, or saves no byte here (one
    /// bit fewer of a 1 x 1 tensor's one packed byte).
    pub cost_per_kib: Option<f64>,
}

/// Which lever costs less output error per byte saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LeverChoice {
    /// One bit fewer (a tie goes to quantization: the note's safer first step).
    Bits,
    /// 10% fewer kept tokens.
    Tokens,
}

/// Section 4: both levers together.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TogetherFigures {
    /// `R_overall` on the data.
    pub r_overall: f64,
    /// One bit fewer.
    pub fewer_bits: Lever,
    /// 10% fewer kept tokens.
    pub fewer_tokens: Lever,
    /// The lever with the lower [`Lever::cost_per_kib`]; `None` unless both have one.
    pub verdict: Option<LeverChoice>,
}

/// One policy's row of the comparison table (issue: beyond the note).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRow {
    /// Policy tag (`h2o-sum`, `h2o-mean`, `snapkv`, `streaming-llm`, `tova`, `random`, `oracle`).
    pub policy: &'static str,
    /// Quality on the evaluation rows, or the reason it could not be computed.
    pub quality: Option<QualityReport>,
    /// Why the policy could not run here (e.g. the oracle with no future rows).
    pub error: Option<String>,
}

/// The policy comparison at the current B and r.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompareFigures {
    /// Rows the policies see (`S - future`).
    pub observed_rows: usize,
    /// Rows the quality is measured on.
    pub eval_rows: usize,
    /// One row per policy.
    pub rows: Vec<PolicyRow>,
    /// Whether the output error was computed (it is skipped above [`OUTPUT_ERROR_MAX_WORK`]).
    pub output_error: bool,
}

/// KIVI-style mixed precision on the loaded K and V (beyond the note).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KiviFigures {
    /// The configuration.
    pub config: KiviConfig,
    /// Byte accounting of each part.
    pub bytes: KiviBytes,
    /// Error of the de-quantized keys.
    pub key_error: TensorError,
    /// Error of the de-quantized values.
    pub value_error: TensorError,
    /// Keys quantized per-channel vs per-token at the key bits and group: why KIVI picks
    /// per-channel for keys.
    pub keys_channel_vs_token: [GranularitySummary; 2],
    /// Which of the two wins on each measure, and whether these keys have the outlier channels
    /// that make per-channel win: what the caption beside the table says.
    pub keys_verdict: KeysVerdict,
}

/// Per-channel against per-token on the keys, measure by measure (see
/// [`KiviFigures::keys_verdict`]): each measure is `channel`, `token` (the lower error) or
/// `tie`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeysVerdict {
    /// RMSE over all elements.
    pub rmse: &'static str,
    /// The largest error.
    pub max_abs: &'static str,
    /// The mean over channels of each channel's relative RMSE.
    pub relative: &'static str,
    /// The largest channel's `max |x_j|` over the lower quartile of the channels' (a typical
    /// ordinary channel's): how far an outlier channel stretches a per-token grid.
    pub outlier_ratio: f64,
    /// `outlier_ratio` is at least [`OUTLIER_RATIO`]: the keys have outlier channels.
    pub outliers: bool,
}

/// A channel whose `max |x|` is this many times a typical channel's (the lower quartile) is an
/// outlier channel (the generator's are 10x the others; real keys' several-fold, KIVI's
/// Figure 2; the generator's ordinary channels differ by up to 3x).
pub const OUTLIER_RATIO: f64 = 4.0;

impl KeysVerdict {
    /// The verdict for `pc` (per-channel) against `pt` (per-token) on keys whose channels'
    /// `max |x_j|` are `channel_max_abs` (finite, as the data's values are).
    pub fn of(pc: &GranularitySummary, pt: &GranularitySummary, channel_max_abs: &[f64]) -> Self {
        let lower = |c: f64, t: f64| match c.partial_cmp(&t) {
            Some(std::cmp::Ordering::Less) => "channel",
            Some(std::cmp::Ordering::Greater) => "token",
            _ => "tie",
        };
        // The lower quartile: outlier channels do not move it even when they are half of them,
        // as the generator's 4 of 8 are. It is found by dropping the smallest n/4 values one
        // by one (at most 1,024 channels): a sort would add its code to the page for this.
        let mut rest = channel_max_abs.to_vec();
        for _ in 0..rest.len() / 4 {
            let smallest = (0..rest.len()).fold(0, |m, i| if rest[i] < rest[m] { i } else { m });
            rest.swap_remove(smallest);
        }
        let quartile = rest.iter().copied().fold(f64::INFINITY, f64::min);
        let top = channel_max_abs.iter().copied().fold(0.0, f64::max);
        let outlier_ratio = if quartile > 0.0 && quartile.is_finite() {
            top / quartile
        } else {
            1.0
        };
        KeysVerdict {
            rmse: lower(pc.rmse, pt.rmse),
            max_abs: lower(pc.max_abs, pt.max_abs),
            relative: lower(pc.mean_channel_relative_rmse, pt.mean_channel_relative_rmse),
            outlier_ratio,
            outliers: outlier_ratio >= OUTLIER_RATIO,
        }
    }
}

/// One granularity's error on the keys.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GranularitySummary {
    /// `per-channel` or `per-token`.
    pub granularity: Granularity,
    /// RMSE over all elements.
    pub rmse: f64,
    /// Largest error.
    pub max_abs: f64,
    /// Mean over channels of the channel's RMSE relative to its RMS value.
    pub mean_channel_relative_rmse: f64,
}

/// The KIVI settings, with the group fitted to the data (at most `T` tokens per key group and
/// `d` channels per value group): the panel shows the group it used.
fn kivi_config(s: &Settings, data: &Data) -> KiviConfig {
    KiviConfig {
        key_bits: s.kivi_kbits,
        key_group: s.kivi_group.min(data.keys.rows()).max(1),
        value_bits: s.kivi_vbits,
        value_group: s.kivi_group.min(data.values.cols()).max(1),
        residual: s.kivi_residual,
        meta: s.meta,
    }
}

fn kivi_figures(data: &Data, s: &Settings) -> Result<KiviFigures, LabError> {
    let cfg = kivi_config(s, data);
    let err = |e: crate::kivi::KiviError| LabError::Range {
        field: "kivi_group",
        message: e.to_string(),
    };
    let r = kivi_quantize(&data.keys, &data.values, &cfg).map_err(err)?;
    let group = cfg.key_group.min(data.keys.rows()).min(data.keys.cols());
    let c = channel_vs_token_error(&data.keys, cfg.key_bits, Some(group.max(1))).map_err(err)?;
    let summary = |g: &crate::kivi::GranularityError| GranularitySummary {
        granularity: g.granularity,
        rmse: g.rmse,
        max_abs: g.max_abs,
        mean_channel_relative_rmse: g.mean_channel_relative_rmse,
    };
    let (pc, pt) = (summary(&c.per_channel), summary(&c.per_token));
    let keys = &data.keys;
    let channel_max_abs: Vec<f64> = (0..keys.cols())
        .map(|j| {
            keys.iter_rows()
                .filter_map(|row| row.get(j))
                .fold(0.0f64, |m, &v| m.max(f64::from(v.abs())))
        })
        .collect();
    Ok(KiviFigures {
        config: cfg,
        bytes: r.bytes,
        key_error: r.key_error,
        value_error: r.value_error,
        keys_verdict: KeysVerdict::of(&pc, &pt, &channel_max_abs),
        keys_channel_vs_token: [pc, pt],
    })
}

/// KIVI's figures before they are computed (a staged lab): `config` and zeros.
fn pending_kivi(config: KiviConfig) -> KiviFigures {
    let stream = StreamBytes {
        quantized_tokens: 0,
        residual_tokens: 0,
        channels: 0,
        groups: 0,
        codes: 0,
        scales: 0,
        zero_points: 0,
        residual: 0,
        total: 0,
        effective_bits: 0.0,
        quantized_bits: 0.0,
    };
    let error = TensorError {
        max_abs: 0.0,
        mean_abs: 0.0,
        rmse: 0.0,
        snr_db: 0.0,
    };
    let none = |granularity| GranularitySummary {
        granularity,
        rmse: 0.0,
        max_abs: 0.0,
        mean_channel_relative_rmse: 0.0,
    };
    KiviFigures {
        config,
        bytes: KiviBytes {
            keys: stream,
            values: stream,
            total: 0,
            fp16: 0,
            effective_bits: 0.0,
            compression_ratio: 0.0,
        },
        key_error: error,
        value_error: error,
        keys_channel_vs_token: [none(Granularity::PerChannel), none(Granularity::PerToken)],
        keys_verdict: KeysVerdict {
            rmse: "tie",
            max_abs: "tie",
            relative: "tie",
            outlier_ratio: 1.0,
            outliers: false,
        },
    }
}

/// Everything the page shows as numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    /// The data.
    pub data: DataFigures,
    /// Section 2.
    pub quant: QuantFigures,
    /// Section 3.
    pub select: SelectFigures,
    /// Section 1.
    pub budget: BudgetFigures,
    /// Section 4.
    pub together: TogetherFigures,
    /// Policies side by side.
    pub compare: CompareFigures,
    /// KIVI-style mixed precision.
    pub kivi: KiviFigures,
    /// True while the policy comparison is not computed for these settings: `compare` holds
    /// empty placeholders (a staged lab, [`Lab::new_staged_with_progress`]) or the figures of
    /// earlier settings (an update that deferred it, [`Lab::update_deferring`]).
    /// [`Lab::complete_with_progress`] computes it.
    pub pending: bool,
    /// True while `kivi` holds placeholders (a staged lab not yet completed).
    pub kivi_pending: bool,
}

/// The data the sections work on.
#[derive(Debug, Clone, PartialEq)]
pub struct Data {
    /// Attention history `A`, `S x T`.
    pub attention: Matrix,
    /// Keys, `T x d`.
    pub keys: Matrix,
    /// Values, `T x d`.
    pub values: Matrix,
    /// The generator settings it came from, or `None` when uploaded.
    pub generated: Option<GenKey>,
    /// Which parts were uploaded (`None` when generated): the others were generated at the
    /// upload's `T` with [`Data::filled_with`]'s settings.
    pub uploaded: Option<UploadedParts>,
    /// The generator settings of the parts an upload did not give (`None` when generated, or
    /// when the upload gave every part).
    pub filled_with: Option<GenKey>,
    /// The prompt's token texts, one per token, when an upload gave them.
    pub tokens: Option<Vec<String>>,
    /// Description for the page.
    pub description: String,
}

/// Which parts of the data in use were uploaded (the rest is generated at their `T`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct UploadedParts {
    /// The attention `A`.
    pub attention: bool,
    /// The keys `K`.
    pub keys: bool,
    /// The values `V`.
    pub values: bool,
}

/// The settings that decide generated data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenKey {
    pattern: synth::AttentionPreset,
    seed: u64,
    tokens: usize,
    steps: usize,
    channels: usize,
    outliers: usize,
    skewed: usize,
}

impl GenKey {
    fn of(s: &Settings) -> Self {
        Self {
            pattern: s.pattern,
            seed: s.seed,
            tokens: s.tokens,
            steps: s.steps.min(s.tokens),
            channels: s.channels,
            outliers: s.outliers,
            skewed: s.skewed,
        }
    }
}

/// Generates the data the settings describe.
pub fn generate(s: &Settings) -> Result<Data, LabError> {
    let key = GenKey::of(s);
    let attention = synth::attention(&AttentionSpec::preset(
        key.pattern,
        key.steps,
        key.tokens,
        key.seed,
    ))?;
    let kv = KvSpec {
        tokens: key.tokens,
        channels: key.channels,
        seed: key.seed,
        // (at most d: the settings' checks say so)
        outlier_channels: key.outliers,
        skewed_channels: key.skewed,
        ..KvSpec::default()
    };
    let keys = synth::keys(&kv)?;
    let values = synth::values(&kv)?;
    let description = format!(
        "generated: {} attention S={} x T={}, K and V T={} x d={} ({} outlier channels, {} skewed), seed {}",
        key.pattern.name(),
        key.steps,
        key.tokens,
        key.tokens,
        key.channels,
        kv.outlier_channels,
        kv.skewed_channels,
        key.seed
    );
    Ok(Data {
        attention,
        keys,
        values,
        generated: Some(key),
        uploaded: None,
        filled_with: None,
        tokens: None,
        description,
    })
}

/// What an upload left to the generator, in English (`None` when it gave every part), e.g.
/// `generated: K and V T=50 x d=64 (4 outlier channels, 0 skewed), seed 42`.
fn filled_english(uploaded: UploadedParts, key: &GenKey) -> Option<String> {
    use std::fmt::Write;
    let kv = match (uploaded.keys, uploaded.values) {
        (true, true) => "",
        (false, false) => "K and V",
        (false, true) => "K",
        (true, false) => "V",
    };
    if uploaded.attention && kv.is_empty() {
        return None;
    }
    // (one String written in place: this runs once per upload, and its code ships in the page)
    let mut out = String::from("generated: ");
    if !uploaded.attention {
        let _ = write!(
            out,
            "{} attention S={} x T={}{}",
            key.pattern.name(),
            key.steps,
            key.tokens,
            if kv.is_empty() { "" } else { "; " }
        );
    }
    if !kv.is_empty() {
        let _ = write!(out, "{kv} T={} x d={} (", key.tokens, key.channels);
        // (V is generated without outlier channels: only K's count is said when K is)
        if !uploaded.keys {
            let _ = write!(
                out,
                "{} outlier channels, {} skewed)",
                key.outliers, key.skewed
            );
        } else {
            let _ = write!(out, "{} skewed channels)", key.skewed);
        }
    }
    let _ = write!(out, ", seed {}", key.seed);
    Some(out)
}

/// The quantization result the charts draw.
#[derive(Debug, Clone)]
pub struct QuantView {
    key: QuantKey,
    /// The quantized tensor.
    pub quantized: Quantized,
    /// Per-group max error vs `scale/2`.
    pub groups: Vec<GroupError>,
    /// Per-row squared error vs `1/4 sum scale^2`.
    pub rows: Vec<RowError>,
    /// `|x - x_hat|`, `T x d` row-major.
    pub abs_err: Vec<f32>,
    /// The shown group's values ([`QuantFigures::group`]); empty per tensor (the group is the
    /// whole tensor: [`Lab::shown_group_values`]).
    group_values: Vec<f32>,
    /// The shown group's grid.
    pub group_grid: Vec<f64>,
    /// The figures.
    pub figures: QuantFigures,
}

/// The quality side of "which lever first", on one measure both levers move: the attention
/// output's relative error ([`crate::policy::output_error`]), mean over all steps, with V
/// quantized by section 2's settings and section 3's kept set. Quantizing K would also move
/// the attention weights; the data's attention is given, not recomputed from K, so the bits
/// lever is measured by V's share.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LeverErrors {
    /// Not computed yet: an update deferred it ([`Lab::update_deferring`]) while the levers
    /// were off screen (it costs two quantizations of V and three passes over the kept
    /// attention); [`Lab::complete_with_progress`] computes it.
    Pending,
    /// The errors.
    Ready {
        /// At the current bits and `B`.
        before: f64,
        /// At one bit fewer; `None` when the bits are at the scheme's minimum.
        fewer_bits: Option<f64>,
        /// At `floor(0.9 B)`; `None` when that keeps no fewer tokens.
        fewer_tokens: Option<f64>,
    },
}

/// The settings [`LeverErrors`] depend on (besides the data).
#[derive(Debug, Clone, PartialEq)]
struct LeverKey {
    config: QuantConfig,
    select: SelectKey,
}

impl LeverKey {
    fn of(s: &Settings) -> Self {
        Self {
            config: quant_config(s),
            select: SelectKey::of(s),
        }
    }
}

/// What an update may leave for [`Lab::complete_with_progress`] ([`Lab::update_deferring`]):
/// the page defers what is off screen while a control moves, and completes it once the controls
/// rest. Nothing by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Defer {
    /// The policy comparison, when the change makes it stale: its figures and charts keep the
    /// earlier settings' values and [`Figures::pending`] is true until
    /// [`Lab::complete_with_progress`] (or an update) computes it. At 64 x 4,096 a bits change
    /// spends about 80 % of its time there.
    pub comparison: bool,
    /// The levers' output errors ([`LeverErrors::Pending`]).
    pub levers: bool,
}

#[derive(Debug, Clone, PartialEq)]
struct QuantKey {
    config: QuantConfig,
    tensor: KvPick,
    channel: Option<usize>,
    meta: crate::quant::MetaDtype,
}

/// The selection result the charts draw.
#[derive(Debug, Clone)]
pub struct SelectView {
    key: SelectKey,
    /// The score vector the method ranked (cumulative, observation-window, or position).
    pub scores: Vec<f32>,
    /// The selection.
    pub selection: Selection,
    /// Attention mass retained per step.
    pub mass: Vec<f64>,
    /// The kept set at `floor(0.9 B)` (the "which lever" comparison), if smaller.
    pub fewer_tokens: Option<Vec<usize>>,
    /// The figures.
    pub figures: SelectFigures,
}

#[derive(Debug, Clone, PartialEq)]
struct SelectKey {
    method: Method,
    budget: usize,
    recent: usize,
    window: usize,
    pool: PoolKind,
    kernel: usize,
    sinks: usize,
}

impl SelectKey {
    fn of(s: &Settings) -> Self {
        Self {
            method: s.method,
            budget: s.budget,
            recent: s.recent,
            window: s.window,
            pool: s.pool,
            kernel: s.kernel,
            sinks: s.sinks,
        }
    }
}

/// The policy comparison and the trade-off sweep the charts draw.
#[derive(Debug, Clone)]
pub struct CompareView {
    key: (SelectKey, Option<QuantConfig>, usize),
    /// Trade-off curves: one per policy, over budgets, mass retained vs `R_overall`.
    pub curves: Vec<SweepCurve>,
    /// The kept sets of each policy at the current B (for token strips).
    pub selections: Vec<(Policy, Option<Selection>)>,
    /// The figures.
    pub figures: CompareFigures,
}

fn policies_of(s: &Settings, steps: usize) -> Vec<Policy> {
    let window = s.window.min(steps.saturating_sub(s.future)).max(1);
    vec![
        Policy::H2oSum,
        Policy::H2oMean,
        Policy::SnapKv {
            window,
            pooling: match s.pool {
                PoolKind::None => Pooling::None,
                PoolKind::Avg => Pooling::Avg { kernel: s.kernel },
                PoolKind::Max => Pooling::Max { kernel: s.kernel },
            },
        },
        Policy::StreamingLlm {
            sinks: s.sinks.min(s.budget),
        },
        Policy::Tova,
        Policy::Random { seed: s.seed },
        Policy::Oracle,
    ]
}

/// Budgets of the trade-off sweep: 32 points from 1 to `T`, spaced evenly in `log B`.
pub fn sweep_budgets(t: usize) -> Vec<usize> {
    let mut out: Vec<usize> = (0..32)
        .map(|i| {
            let f = i as f64 / 31.0;
            ((t as f64).powf(f).round() as usize).clamp(1, t)
        })
        .collect();
    out.dedup();
    out
}

/// Fills each sweep point's `R_overall` on the data with the current bits, scheme, groups and
/// index kind (cheap: redone on every update so the x axis follows the quantization).
fn annotate(curves: &mut [SweepCurve], data: &Data, s: &Settings) -> Result<(), LabError> {
    let model = data_model(data);
    let t = data.attention.cols() as u64;
    let template = compression(s, t, s.budget.min(t as usize) as u64, s.bits);
    policy::annotate_r_overall(curves, &model, &template, SelectionScope::PerKvHead).map_err(|e| {
        LabError::Range {
            field: "future",
            message: e.to_string(),
        }
    })
}

/// What the comparison depends on: the selection controls, the future rows, and the
/// quantization only when the output error (which uses V at the current bits) is computed.
fn compare_key(
    data: &Data,
    s: &Settings,
    quant: &QuantView,
) -> (SelectKey, Option<QuantConfig>, usize) {
    let a = &data.attention;
    let observed = a.rows() - s.future.min(a.rows() - 1);
    let eval = if observed < a.rows() {
        a.rows() - observed
    } else {
        a.rows()
    };
    let with_values = eval
        .saturating_mul(a.cols())
        .saturating_mul(data.values.cols())
        <= OUTPUT_ERROR_MAX_WORK;
    (
        SelectKey::of(s),
        // (the quantization's config only, as the table's cache key: the tensor shown, its
        // channel and the scales' dtype change no figure of the comparison's own)
        with_values.then_some(quant.key.config),
        s.future,
    )
}

/// Largest `eval rows x T x d` for which the comparison computes the output error.
pub const OUTPUT_ERROR_MAX_WORK: usize = 1 << 24;

/// What the comparison reuses between updates on the same data, each part keyed by the settings
/// it depends on (a change of B alone recomputes only the table's selections and reports).
/// Shared, so that keeping the last good copy for a failed update costs nothing.
#[derive(Debug, Clone, Default)]
struct CompareCache {
    /// The policies' scores and rankings (keyed by the policies and the observed rows).
    scores: Option<Arc<PolicyScores>>,
    /// The table's evaluation when the output error is computed, by observed rows and the
    /// quantization of V (without values the table uses `sweep_eval`).
    table: Option<(TableKey, Arc<Result<Evaluator, PolicyError>>)>,
    /// The sweep's evaluation (mass only), by observed rows.
    sweep_eval: Option<(usize, Arc<Result<Evaluator, PolicyError>>)>,
    /// The sweep's curves before [`annotate`], by policies, recent window and observed rows.
    curves: Option<(CurvesKey, Arc<SweepResult>)>,
}

/// The sweep's curves, or why it was refused.
type SweepResult = Result<Vec<SweepCurve>, PolicyError>;

/// Observed rows and the quantization of V (when the output error is computed).
type TableKey = (usize, Option<QuantConfig>);
/// Policies, recent window, observed rows.
type CurvesKey = (Vec<Policy>, usize, usize);

/// The cached entry when its key is `key`, else `make()` (then cached).
fn cached<K: PartialEq, V>(
    slot: &mut Option<(K, Arc<V>)>,
    key: K,
    make: impl FnOnce() -> V,
) -> Arc<V> {
    match slot {
        Some((k, v)) if *k == key => v.clone(),
        _ => {
            let v = Arc::new(make());
            *slot = Some((key, v.clone()));
            v
        }
    }
}

fn compare_view(
    data: &Data,
    s: &Settings,
    quant: &QuantView,
    cache: &mut CompareCache,
) -> Result<CompareView, LabError> {
    let a = &data.attention;
    let observed = a.rows() - s.future.min(a.rows() - 1);
    let policies = policies_of(s, a.rows());
    let v = &data.values;
    let eval = if observed < a.rows() {
        a.rows() - observed
    } else {
        a.rows()
    };
    // The output error costs eval rows x T x d per policy: above OUTPUT_ERROR_MAX_WORK the
    // table shows mass only, so a slider never blocks the page for seconds at long contexts.
    let with_values =
        eval.saturating_mul(a.cols()).saturating_mul(v.cols()) <= OUTPUT_ERROR_MAX_WORK;
    let scores = match &cache.scores {
        Some(sc) if sc.is_for(&policies, observed) => sc.clone(),
        previous => {
            let sc = Arc::new(PolicyScores::new(
                &policies,
                a,
                observed,
                previous.as_deref(),
            ));
            cache.scores = Some(sc.clone());
            sc
        }
    };
    let table_key = (observed, with_values.then_some(quant.key.config));
    let table = match &cache.table {
        // Without values the table's evaluation is the sweep's: share it.
        _ if !with_values => cached(&mut cache.sweep_eval, observed, || {
            Evaluator::new(a, None, None, observed)
        }),
        Some((k, ev)) if *k == table_key => ev.clone(),
        _ => {
            // V at the current bits, with the current quantization settings.
            let v_hat = if with_values {
                Some(quantize(v, &quant.key.config)?.dequantize())
            } else {
                None
            };
            let ev = Evaluator::new(a, with_values.then_some(v), v_hat.as_ref(), observed);
            cached(&mut cache.table, table_key, || ev)
        }
    };
    let budget = s.budget.min(a.cols());
    // One selection per policy serves both the table and the strips.
    let reports = match &*table {
        Err(e) => policies.iter().map(|p| (*p, Err(e.clone()))).collect(),
        Ok(ev) => policy::compare_prepared(ev, &scores, budget, s.recent),
    };
    let mut rows = Vec::new();
    let mut selections = Vec::new();
    let mut eval_rows = a.rows() - observed;
    for (p, r) in reports {
        let (sel, quality, error) = match r {
            Ok((sel, q)) => {
                eval_rows = q.eval_rows;
                (Some(sel), Some(q), None)
            }
            // No report: the strip still shows the kept set when the policy can select.
            Err(e) => (
                policy::select_with(&p, a, budget, s.recent, observed).ok(),
                None,
                Some(e.to_string()),
            ),
        };
        rows.push(PolicyRow {
            policy: p.name(),
            quality,
            error,
        });
        selections.push((p, sel));
    }
    let curves_key = (policies.clone(), s.recent, observed);
    let curves = match &cache.curves {
        Some((k, c)) if *k == curves_key => c.clone(),
        _ => {
            let sweep_eval = cached(&mut cache.sweep_eval, observed, || {
                Evaluator::new(a, None, None, observed)
            });
            let c = match &*sweep_eval {
                Err(e) => Err(e.clone()),
                Ok(ev) => policy::sweep_prepared(ev, &scores, &sweep_budgets(a.cols()), s.recent),
            };
            cached(&mut cache.curves, curves_key, || c)
        }
    };
    let mut curves = (*curves).clone().map_err(|e| LabError::Range {
        field: "future",
        message: e.to_string(),
    })?;
    annotate(&mut curves, data, s)?;
    Ok(CompareView {
        key: compare_key(data, s, quant),
        curves,
        selections,
        figures: CompareFigures {
            observed_rows: observed,
            eval_rows,
            rows,
            output_error: with_values,
        },
    })
}

/// The page's model: data, settings and derived views.
#[derive(Debug, Clone)]
pub struct Lab {
    data: Data,
    settings: Settings,
    quant: QuantView,
    select: SelectView,
    compare: CompareView,
    kivi: (KiviConfig, KiviFigures),
    figures: Figures,
    uploads: Uploads,
    data_memo: DataMemo,
    compare_cache: CompareCache,
    select_cache: SelectCache,
    /// The quantization view last replaced: shown again when a control returns to it, else
    /// its buffers are filled by the next view.
    previous: Previous,
    data_id: u64,
    /// The comparison is not computed for the current settings (staged, or deferred).
    compare_pending: bool,
    /// KIVI is not computed (staged and not yet completed).
    kivi_pending: bool,
    /// The levers' output errors, with the settings they were computed for.
    levers: (LeverKey, LeverErrors),
}

/// The tensor-sized buffers of a [`QuantView`] (codes, `|x - x_hat|`, per-row errors). The lab
/// keeps the last replaced view's set and quantizes into it, so moving a quantization control
/// allocates none of them (at 32,768 x 128 each of the first two is 16 MiB: allocated afresh,
/// the system hands the pages back and faults them in again on every change).
#[derive(Debug, Default)]
struct QuantBuffers {
    codes: Vec<i32>,
    abs_err: Vec<f32>,
    rows: Vec<RowError>,
}

/// The quantization view an update replaced, with the identity of the data it was computed
/// on ([`Lab::data_id`]). A change back to it (toggling the scheme, a bits step back) shows it
/// again without quantizing; any other quantization change fills its buffers
/// ([`QuantBuffers`]). It costs no memory the lab would not hold anyway: the buffers are
/// the spare set a new view is computed into.
#[derive(Debug, Default)]
struct Previous {
    view: Option<QuantView>,
    data_id: u64,
}

impl Previous {
    /// The view itself when it was computed for `key` on the data `data_id` (`None`: new
    /// data); otherwise its buffers (empty when there is none). Leaves `self` empty.
    fn take(&mut self, key: &QuantKey, data_id: Option<u64>) -> Result<QuantView, QuantBuffers> {
        match self.view.take() {
            Some(v) if v.key == *key && Some(self.data_id) == data_id => Ok(v),
            Some(v) => Err(v.into_buffers()),
            None => Err(QuantBuffers::default()),
        }
    }
}

/// A cloned lab starts without the previous view: a clone only needs the current one.
impl Clone for Previous {
    fn clone(&self) -> Self {
        Previous::default()
    }
}

impl QuantView {
    /// Its buffers, for the next view to fill.
    fn into_buffers(self) -> QuantBuffers {
        QuantBuffers {
            codes: self.quantized.into_codes(),
            abs_err: self.abs_err,
            rows: self.rows,
        }
    }
}

/// A new identity for data put into a lab (see [`Lab::data_id`]).
fn next_data_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Figures already computed on the current data, cleared with it:
/// * The exact attention outputs the levers' output errors are measured against
///   ([`crate::policy::Outputs`]): `O(S T d)`, and no control changes them.
/// * The channel shown by default for each tensor (the one with the largest `|x|`): finding it
///   reads the whole tensor, and it does not depend on any quantization control.
/// * Each tensor's per-group extremes under the last layout quantized, and its `sum x^2`:
///   bits and scheme do not change them, so a bits or scheme change skips that work (the
///   extremes are shared, not copied, when the memo is cloned for an update).
#[derive(Debug, Clone, Default)]
struct DataMemo {
    outputs: Option<Arc<crate::policy::Outputs>>,
    /// Keys, values.
    channel: [Option<usize>; 2],
    /// Keys, values.
    extremes: [Option<std::sync::Arc<crate::quant::Extremes>>; 2],
    /// `sum x^2` of the keys, of the values (for [`crate::quant::analyze_memo`]).
    sig_sq: [Option<f64>; 2],
}

impl DataMemo {
    /// The exact outputs of `data` (computed on first use).
    fn outputs(&mut self, data: &Data) -> Result<Arc<crate::policy::Outputs>, LabError> {
        if let Some(o) = &self.outputs {
            return Ok(Arc::clone(o));
        }
        let o = crate::policy::Outputs::new(&data.attention, &data.values).map_err(policy_error)?;
        let o = Arc::new(o);
        self.outputs = Some(Arc::clone(&o));
        Ok(o)
    }

    /// The extremes slot of `tensor` (for [`crate::quant::quantize_memo`]).
    fn extremes(&mut self, tensor: KvPick) -> &mut Option<std::sync::Arc<crate::quant::Extremes>> {
        &mut self.extremes[tensor_slot(tensor)]
    }

    /// The `sum x^2` slot of `tensor` (for [`crate::quant::analyze_memo`]).
    fn sig_sq(&mut self, tensor: KvPick) -> &mut Option<f64> {
        &mut self.sig_sq[tensor_slot(tensor)]
    }

    /// The default channel of `x` (the tensor `tensor`): the largest `max |x|`, the lowest
    /// index on a tie.
    fn channel(&mut self, x: &Matrix, tensor: KvPick) -> usize {
        let slot = &mut self.channel[tensor_slot(tensor)];
        *slot.get_or_insert_with(|| {
            let max_abs = col_max_abs(x);
            (0..x.cols())
                .max_by(|&a, &b| max_abs[a].total_cmp(&max_abs[b]).then(b.cmp(&a)))
                .unwrap_or(0)
        })
    }
}

/// The index of a tensor in [`DataMemo`]'s per-tensor arrays.
fn tensor_slot(tensor: KvPick) -> usize {
    match tensor {
        KvPick::K => 0,
        KvPick::V => 1,
    }
}

fn quant_config(s: &Settings) -> QuantConfig {
    QuantConfig {
        bits: s.bits,
        scheme: s.scheme,
        granularity: s.granularity,
        group_size: if s.group == 0 || s.granularity == Granularity::PerTensor {
            None
        } else {
            Some(s.group)
        },
    }
}

/// The quantization section on `data` with `s`; `memo` holds RMSEs already computed on this
/// data (see [`DataMemo`]) and gains this view's.
/// The buffers in `spare` are filled (see [`QuantBuffers`]).
fn quant_view(
    data: &Data,
    s: &Settings,
    memo: &mut DataMemo,
    spare: QuantBuffers,
) -> Result<QuantView, LabError> {
    let config = quant_config(s);
    let x = match s.tensor {
        KvPick::K => &data.keys,
        KvPick::V => &data.values,
    };
    let quantized = crate::quant::quantize_memo(x, &config, spare.codes, memo.extremes(s.tensor))?;
    // One pass for the statistics, the per-group and per-row bounds and |x - x_hat|.
    let analysis = crate::quant::analyze_memo(
        x,
        &quantized,
        2,
        s.meta,
        spare.abs_err,
        spare.rows,
        memo.sig_sq(s.tensor),
    )
    .map_err(|e| LabError::Range {
        field: "file",
        message: e.to_string(),
    })?;
    let crate::quant::Analysis {
        stats,
        groups,
        rows,
        abs_err,
    } = analysis;
    let channel = match s.channel {
        Some(c) if c < x.cols() => c,
        Some(c) => {
            return Err(LabError::Channel {
                channel: c,
                max: x.cols() - 1,
            })
        }
        None => memo.channel(x, s.tensor),
    };
    let layout = quantized.layout();
    let g0 = layout.group_of(0, channel);
    let size = layout.group_size();
    let (group_values, group) = match config.granularity {
        Granularity::PerChannel => {
            let to = size.min(x.rows()).saturating_sub(1);
            let column = x.column(channel).unwrap_or_default();
            let values = column.get(..=to).map(<[f32]>::to_vec).unwrap_or_default();
            (values, ("per-channel", channel, 0, to, x.rows()))
        }
        Granularity::PerToken => {
            let from = channel / size.max(1) * size;
            let to = (from + size).min(x.cols()).saturating_sub(1);
            let row = x
                .data()
                .get(from..=to)
                .map(<[f32]>::to_vec)
                .unwrap_or_default();
            (row, ("per-token", 0, from, to, x.cols()))
        }
        Granularity::PerTensor => {
            // (not copied: the whole tensor is the data's, see `Lab::shown_group_values`)
            let n = x.data().len();
            (Vec::new(), ("per-tensor", 0, 0, n.saturating_sub(1), n))
        }
    };
    let whole = matches!(config.granularity, Granularity::PerTensor);
    let (mn, mx) = (if whole { x.data() } else { &group_values })
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    let group_grid: Vec<f64> = quantized.grid(g0).into_iter().map(f64::from).collect();
    let scale = quantized.scales().get(g0).copied().unwrap_or(0.0);
    // The extremes the shown scale was computed from (its group's: the channel's first block
    // per channel, token 0's run holding the channel per token, the whole tensor per tensor).
    let (group_min, group_max) = memo
        .extremes(s.tensor)
        .as_ref()
        .and_then(|e| e.of(quantized.layout(), g0))
        .unwrap_or((mn, mx));
    let zero_point = quantized.zero_points().get(g0).copied();
    let n = x.data().len() as u64;
    let code_bytes = crate::quant::packed_code_bytes(n, config.bits);
    let meta_bytes =
        crate::quant::metadata_bytes(quantized.scales().len() as u64, config.scheme, s.meta);
    let bound_max = groups
        .iter()
        .map(|g| f64::from(g.bound))
        .fold(0.0, f64::max);
    let figures = QuantFigures {
        bits: config.bits,
        qmax: config.qmax(),
        bits_min: *QuantConfig::bits_range(config.scheme).start(),
        groups: quantized.scales().len(),
        group_size: quantized.layout().group_size(),
        channel,
        group: ShownGroup {
            granularity: group.0,
            index: group.1,
            from: group.2,
            to: group.3,
            len: group.4,
            max_error: groups.get(g0).map_or(0.0, |g| f64::from(g.max_abs)),
            bound: groups.get(g0).map_or(0.0, |g| f64::from(g.bound)),
            groups_within: groups
                .iter()
                .filter(|g| f64::from(g.max_abs) <= g.limit)
                .count(),
        },
        group_max_abs: f64::from(group_min.abs().max(group_max.abs())),
        group_min: f64::from(group_min),
        group_max: f64::from(group_max),
        scale: f64::from(scale),
        zero_point,
        stats,
        bound_max,
        element_bound_holds: groups.iter().all(|g| f64::from(g.max_abs) <= g.limit),
        row_bound_holds: rows.iter().all(|r| r.sq_err <= r.limit),
        rows: x.rows(),
        code_bytes,
        meta_bytes,
        fp_bytes: n * 2,
    };
    Ok(QuantView {
        key: QuantKey {
            config,
            tensor: s.tensor,
            channel: s.channel,
            meta: s.meta,
        },
        quantized,
        groups,
        rows,
        abs_err,
        group_values,
        group_grid,
        figures,
    })
}

/// The levers' output errors ([`LeverErrors`]) for `s`, `select` (its kept sets at `B` and
/// `floor(0.9 B)`) on `data`; `memo` holds the exact outputs and V's extremes.
fn lever_errors(
    data: &Data,
    s: &Settings,
    select: &SelectView,
    memo: &mut DataMemo,
) -> Result<LeverErrors, LabError> {
    let outputs = memo.outputs(data)?;
    let config = quant_config(s);
    let mut v_hat = |cfg: &QuantConfig| -> Result<Matrix, LabError> {
        let q =
            crate::quant::quantize_memo(&data.values, cfg, Vec::new(), memo.extremes(KvPick::V))?;
        Ok(q.dequantize())
    };
    let now = v_hat(&config)?;
    let kept = &select.selection.kept;
    let error = |v: &Matrix, kept: &[usize]| outputs.mean_error(v, kept).map_err(policy_error);
    let before = error(&now, kept)?;
    let fewer_tokens = match &select.fewer_tokens {
        Some(k) => Some(error(&now, k)?),
        None => None,
    };
    let fewer_bits = if config.bits > *QuantConfig::bits_range(config.scheme).start() {
        let fewer = v_hat(&QuantConfig {
            bits: config.bits - 1,
            ..config
        })?;
        Some(error(&fewer, kept)?)
    } else {
        None
    };
    Ok(LeverErrors::Ready {
        before,
        fewer_bits,
        fewer_tokens,
    })
}

/// A policy evaluation of the data itself that failed (it cannot on data the lab accepted:
/// attention and V are finite and share `T`), said as the data's error.
fn policy_error(e: PolicyError) -> LabError {
    LabError::Range {
        field: "file",
        message: e.to_string(),
    }
}

/// `max_t |x[t][c]|` of every column `c`, in one row-major pass (a max is exact, so the order
/// does not matter).
fn col_max_abs(x: &Matrix) -> Vec<f32> {
    let mut out = vec![0f32; x.cols()];
    for row in x.iter_rows() {
        for (m, &v) in out.iter_mut().zip(row) {
            *m = m.max(v.abs());
        }
    }
    out
}

/// `0-3,17,480-511`: ascending indices as compact ranges.
///
/// Written into one string (no string per range: at W2 a selection has thousands of ranges,
/// and this runs on every B or r change and for every policy of the comparison).
pub fn compact_ranges(indices: &[usize]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(indices.len() * 4);
    let mut i = 0;
    while i < indices.len() {
        let start = indices[i];
        let mut end = start;
        while i + 1 < indices.len() && indices[i + 1] == end + 1 {
            i += 1;
            end = indices[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        // Writing to a String cannot fail.
        let _ = if start == end {
            write!(out, "{start}")
        } else {
            write!(out, "{start}-{end}")
        };
        i += 1;
    }
    out
}

/// What the selection section reuses between updates on the same data: B and r change only
/// the top-k, not the scores or the rows' total mass.
#[derive(Debug, Clone, Default)]
struct SelectCache {
    /// `sum_i a[t][i]` of every attention row (the denominators of the mass retained).
    row_sums: Option<Arc<Vec<f64>>>,
    /// The section's score vector, by the settings it depends on.
    scores: Option<(ScoreKey, Arc<ScoresResult>)>,
}

/// A score vector, or why it could not be computed.
type ScoresResult = Result<Vec<f32>, LabError>;

/// Method, and for SnapKV its window, pooling and kernel (unused fields are zeroed).
type ScoreKey = (Method, usize, PoolKind, usize);

impl SelectCache {
    fn row_sums(&mut self, data: &Data) -> Arc<Vec<f64>> {
        self.row_sums
            .get_or_insert_with(|| Arc::new(crate::select::row_sums(&data.attention)))
            .clone()
    }

    fn scores(&mut self, data: &Data, s: &Settings) -> Arc<ScoresResult> {
        let key = match s.method {
            Method::Snapkv => (s.method, s.window, s.pool, s.kernel),
            _ => (s.method, 0, PoolKind::None, 0),
        };
        cached(&mut self.scores, key, || section_scores(data, s))
    }
}

/// The score vector the section ranks (cumulative for H2O, observation-window for SnapKV) or
/// shows (cumulative, for StreamingLLM), or why it cannot be computed; errors name the control
/// as [`select_view_at`] reports them.
fn section_scores(data: &Data, s: &Settings) -> ScoresResult {
    let a = &data.attention;
    let err = |field: &'static str| move |error: SelectError| LabError::Select { field, error };
    match s.method {
        Method::H2o => {
            // select::h2o's check: H2O refuses non-finite weights before scoring.
            if let Some((row, col)) = a.first_non_finite() {
                return Err(err("budget")(SelectError::NonFinite {
                    what: "attention weight",
                    index: row * a.cols() + col,
                    value: a.get(row, col).unwrap_or(f32::NAN),
                }));
            }
            Ok(crate::select::cumulative_scores(a))
        }
        Method::Snapkv => {
            let pooling = match s.pool {
                PoolKind::None => Pooling::None,
                PoolKind::Avg => Pooling::Avg { kernel: s.kernel },
                PoolKind::Max => Pooling::Max { kernel: s.kernel },
            };
            let field = if s.window > a.rows() {
                "window"
            } else {
                "kernel"
            };
            observation_scores(a, s.window, pooling).map_err(err(field))
        }
        Method::Streaming => Ok(crate::select::cumulative_scores(a)),
    }
}

fn select_view(data: &Data, s: &Settings, cache: &mut SelectCache) -> Result<SelectView, LabError> {
    let scores = cache.scores(data, s);
    let row_sums = cache.row_sums(data);
    let mut v = select_view_at(data, s, &scores, &row_sums)?;
    let smaller = (s.budget as f64 * 0.9).floor() as usize;
    if smaller >= 1 && smaller < s.budget {
        let s2 = Settings {
            budget: smaller,
            sinks: s.sinks.min(smaller),
            ..s.clone()
        };
        let w = select_view_at(data, &s2, &scores, &row_sums)?;
        v.fewer_tokens = Some(w.selection.kept);
    }
    Ok(v)
}

/// The section at `s.budget` and `s.recent`, from the section's `scores` ([`section_scores`]
/// with the same settings) and the attention's `row_sums`.
fn select_view_at(
    data: &Data,
    s: &Settings,
    scores: &ScoresResult,
    row_sums: &[f64],
) -> Result<SelectView, LabError> {
    let a = &data.attention;
    let t = a.cols();
    let err = |field: &'static str| move |error: SelectError| LabError::Select { field, error };
    if s.budget > t {
        return Err(LabError::Select {
            field: "budget",
            error: SelectError::Budget {
                budget: s.budget,
                total: t,
            },
        });
    }
    let (scores, selection) = match s.method {
        // select::h2o and select::snapkv are this rule on the section's scores.
        Method::H2o | Method::Snapkv => {
            let sc = scores.as_ref().map_err(Clone::clone)?;
            let sel = heavy_plus_recent(sc, s.budget, s.recent).map_err(err("budget"))?;
            (sc.clone(), sel)
        }
        Method::Streaming => {
            let sel = streaming_llm(t, s.budget, s.sinks).map_err(err("sinks"))?;
            (scores.as_ref().map_err(Clone::clone)?.clone(), sel)
        }
    };
    let mass =
        crate::select::mass_retained_with(a, row_sums, &selection.kept).map_err(err("budget"))?;
    let mass_mean = mass.iter().sum::<f64>() / mass.len().max(1) as f64;
    let mass_worst = mass.iter().copied().fold(1.0, f64::min);
    let count = |r: Role| selection.roles.iter().filter(|&&x| x == r).count();
    let threshold = selection
        .kept
        .iter()
        .zip(&selection.roles)
        .filter(|(_, &r)| r == Role::Heavy)
        .map(|(&i, _)| f64::from(scores[i]))
        .reduce(f64::min);
    let recent_start = match s.method {
        Method::Streaming => t - (s.budget - s.sinks.min(s.budget)),
        _ => t.saturating_sub(s.recent).max(t - s.budget),
    };
    let figures = SelectFigures {
        kept_count: selection.kept.len(),
        kept_ranges: compact_ranges(&selection.kept),
        dropped_count: selection.dropped.len(),
        heavy_count: count(Role::Heavy),
        recent_count: count(Role::Recent),
        sink_count: count(Role::Sink),
        r_token: selection.r_token(),
        mass_mean,
        mass_worst,
        threshold,
        recent_start,
        budget_min: match s.method {
            Method::Streaming => s.sinks.max(1),
            _ => 1,
        },
    };
    Ok(SelectView {
        key: SelectKey::of(s),
        scores,
        selection,
        mass,
        fewer_tokens: None,
        figures,
    })
}

fn accounting(s: &Settings, bits: u8) -> QuantAccounting {
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
    ModelConfig {
        name: "custom".into(),
        layers: s.layers,
        n_kv_heads: s.kv_heads,
        n_heads: s.kv_heads,
        d_head: s.head_dim,
        fp_bytes: s.fp_bytes,
        mla_latent: None,
        sliding: None,
    }
}

/// The loaded data as a "model": one layer, one KV head, `d_head = d`, fp16.
fn data_model(data: &Data) -> ModelConfig {
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

fn data_breakdown(data: &Data, s: &Settings, kept: usize, bits: u8) -> Result<Breakdown, LabError> {
    let model = data_model(data);
    Ok(breakdown(
        &model,
        &compression(s, data.attention.cols() as u64, kept as u64, bits),
    )?)
}

fn compression(s: &Settings, total: u64, kept: u64, bits: u8) -> Compression {
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

fn budget_figures(data: &Data, s: &Settings, kept: usize) -> Result<BudgetFigures, LabError> {
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
    let fit = crate::budget::tokens_that_fit_keeping(&model, &c, memory, keep)?;
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

fn together(
    data: &Data,
    s: &Settings,
    errors: LeverErrors,
    select: &SelectView,
    budget: &BudgetFigures,
) -> Result<TogetherFigures, LabError> {
    let before = budget.data.m_final;
    let (error_before, after_bits, after_tokens, pending) = match errors {
        LeverErrors::Ready {
            before,
            fewer_bits,
            fewer_tokens,
        } => (before, fewer_bits, fewer_tokens, false),
        LeverErrors::Pending => (0.0, None, None, true),
    };
    let possible_bits = s.bits > *QuantConfig::bits_range(quant_config(s).scheme).start();
    let lever = |tag, possible, after: Option<(u64, f64)>| {
        let (bytes_after, quality_after) = after.unwrap_or((before, error_before));
        let saved = before.saturating_sub(bytes_after);
        let cost_per_kib = (after.is_some() && saved > 0)
            .then(|| (quality_after - error_before) / (saved as f64 / 1024.0));
        Lever {
            lever: tag,
            bytes_before: before,
            bytes_after,
            quality_before: error_before,
            quality_after,
            possible,
            pending,
            cost_per_kib,
        }
    };
    let kept = select.selection.kept.len();
    let bits_after = match after_bits {
        Some(e) => Some((data_breakdown(data, s, kept, s.bits - 1)?.m_final, e)),
        None => None,
    };
    let tokens_after = match (after_tokens, &select.fewer_tokens) {
        (Some(e), Some(k)) => Some((data_breakdown(data, s, k.len(), s.bits)?.m_final, e)),
        _ => None,
    };
    let fewer_bits = lever("bits-1", possible_bits, bits_after);
    let fewer_tokens = lever("tokens-10pct", select.fewer_tokens.is_some(), tokens_after);
    let verdict = match (fewer_bits.cost_per_kib, fewer_tokens.cost_per_kib) {
        (Some(b), Some(t)) if b <= t => Some(LeverChoice::Bits),
        (Some(_), Some(_)) => Some(LeverChoice::Tokens),
        _ => None,
    };
    Ok(TogetherFigures {
        r_overall: budget.data.r_overall,
        fewer_bits,
        fewer_tokens,
        verdict,
    })
}

/// The stages of a recompute, in order, as reported to a progress callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Generating or reading the data.
    Data,
    /// Quantizing the chosen tensor and its statistics.
    Quantization,
    /// Scoring and selecting tokens.
    Selection,
    /// The byte breakdowns (cheap: recomputed on every update, reported only by a full compute).
    Budget,
    /// The policy comparison and its trade-off sweep.
    Compare,
    /// The KIVI panel.
    Kivi,
}

impl Stage {
    /// Every stage, in the order a full recompute runs them.
    pub const ALL: [Stage; 6] = [
        Stage::Data,
        Stage::Quantization,
        Stage::Selection,
        Stage::Budget,
        Stage::Compare,
        Stage::Kivi,
    ];

    /// The stage's key (`data`, `quantization`, ...), used by the page's text.
    pub fn key(self) -> &'static str {
        match self {
            Stage::Data => "data",
            Stage::Quantization => "quantization",
            Stage::Selection => "selection",
            Stage::Budget => "budget",
            Stage::Compare => "compare",
            Stage::Kivi => "kivi",
        }
    }
}

impl Lab {
    /// A lab on data generated from `settings`.
    pub fn new(settings: Settings) -> Result<Lab, LabError> {
        Lab::new_with_progress(settings, &mut |_| {})
    }

    /// [`Lab::new`], calling `progress` before each stage it computes (the page shows them).
    pub fn new_with_progress(
        settings: Settings,
        progress: &mut dyn FnMut(Stage),
    ) -> Result<Lab, LabError> {
        Lab::generated(settings, progress, false)
    }

    /// A lab on data generated from `settings` with every section but the policy comparison
    /// and KIVI, which are left as empty placeholders ([`Figures::pending`] is true) until
    /// [`Lab::complete_with_progress`] (or any [`Lab::update`]) computes them. The page draws
    /// its first screen from such a lab, then completes it. Once completed it equals
    /// [`Lab::new`] on the same settings.
    pub fn new_staged_with_progress(
        settings: Settings,
        progress: &mut dyn FnMut(Stage),
    ) -> Result<Lab, LabError> {
        Lab::generated(settings, progress, true)
    }

    /// A lab on data generated from `settings`; `staged` as in [`Lab::new_staged_with_progress`].
    fn generated(
        settings: Settings,
        progress: &mut dyn FnMut(Stage),
        staged: bool,
    ) -> Result<Lab, LabError> {
        check(&settings)?;
        progress(Stage::Data);
        let data = generate(&settings)?;
        Lab::with_data(data, settings, progress, staged)
    }

    /// Whether the comparison, KIVI or the bits lever's RMSE at one bit fewer still wait to be
    /// computed (see [`Lab::new_staged_with_progress`] and [`Lab::update_deferring`]).
    pub fn is_pending(&self) -> bool {
        self.compare_pending || self.kivi_pending || self.levers.1 == LeverErrors::Pending
    }

    /// Computes what a staged lab or a deferring update left out (the comparison, KIVI),
    /// calling `progress` before each; a lab that is not pending is returned as it is.
    pub fn complete_with_progress(
        &mut self,
        progress: &mut dyn FnMut(Stage),
    ) -> Result<&Figures, LabError> {
        if self.is_pending() {
            let s = self.settings.clone();
            self.apply(&s, progress, Defer::default())?;
        }
        Ok(&self.figures)
    }

    fn with_data(
        data: Data,
        settings: Settings,
        progress: &mut dyn FnMut(Stage),
        staged: bool,
    ) -> Result<Lab, LabError> {
        progress(Stage::Quantization);
        let mut data_memo = DataMemo::default();
        let quant = quant_view(&data, &settings, &mut data_memo, QuantBuffers::default())?;
        progress(Stage::Selection);
        let mut select_cache = SelectCache::default();
        let select = select_view(&data, &settings, &mut select_cache)?;
        progress(Stage::Budget);
        let budget = budget_figures(&data, &settings, select.selection.kept.len())?;
        // (A staged lab leaves the levers' errors for `complete` too.)
        let lever_errors = if staged {
            LeverErrors::Pending
        } else {
            lever_errors(&data, &settings, &select, &mut data_memo)?
        };
        let together = together(&data, &settings, lever_errors, &select, &budget)?;
        let lever_key = LeverKey::of(&settings);
        let mut compare_cache = CompareCache::default();
        let kivi_cfg = kivi_config(&settings, &data);
        let (compare, kivi) = if staged {
            (
                CompareView {
                    key: compare_key(&data, &settings, &quant),
                    curves: Vec::new(),
                    selections: Vec::new(),
                    figures: CompareFigures {
                        observed_rows: 0,
                        eval_rows: 0,
                        rows: Vec::new(),
                        output_error: false,
                    },
                },
                pending_kivi(kivi_cfg),
            )
        } else {
            progress(Stage::Compare);
            let compare = compare_view(&data, &settings, &quant, &mut compare_cache)?;
            progress(Stage::Kivi);
            (compare, kivi_figures(&data, &settings)?)
        };
        let figures = Figures {
            data: data_figures(&data),
            quant: quant.figures.clone(),
            select: select.figures.clone(),
            budget,
            together,
            compare: compare.figures.clone(),
            kivi: kivi.clone(),
            pending: staged,
            kivi_pending: staged,
        };
        Ok(Lab {
            data,
            settings,
            quant,
            select,
            compare,
            kivi: (kivi_cfg, kivi),
            figures,
            uploads: Uploads::new(),
            data_memo,
            compare_cache,
            select_cache,
            previous: Previous::default(),
            data_id: next_data_id(),
            compare_pending: staged,
            kivi_pending: staged,
            levers: (lever_key, lever_errors),
        })
    }

    /// Applies `s`: regenerates data if its generator settings changed (and the data is
    /// generated), re-quantizes if a quantization control changed, re-selects if a selection
    /// control changed, and recomputes the budget. On error nothing changes.
    pub fn update(&mut self, s: &Settings) -> Result<&Figures, LabError> {
        self.update_with_progress(s, &mut |_| {})
    }

    /// [`Lab::update`], calling `progress` before each stage it recomputes (stages a change
    /// does not touch are not reported).
    pub fn update_with_progress(
        &mut self,
        s: &Settings,
        progress: &mut dyn FnMut(Stage),
    ) -> Result<&Figures, LabError> {
        self.apply(s, progress, Defer::default())
    }

    /// [`Lab::update_with_progress`] that leaves what `defer` names for
    /// [`Lab::complete_with_progress`] (see [`Defer`]), as the page does for what is off
    /// screen.
    pub fn update_deferring(
        &mut self,
        s: &Settings,
        progress: &mut dyn FnMut(Stage),
        defer: Defer,
    ) -> Result<&Figures, LabError> {
        self.apply(s, progress, defer)
    }

    /// The update: `defer` says what to leave pending when it would be recomputed.
    fn apply(
        &mut self,
        s: &Settings,
        progress: &mut dyn FnMut(Stage),
        defer: Defer,
    ) -> Result<&Figures, LabError> {
        check(s)?;
        let regenerate = match &self.data.generated {
            Some(key) => *key != GenKey::of(s),
            None => false,
        };
        let new_data = if regenerate {
            progress(Stage::Data);
            Some(generate(s)?)
        } else {
            None
        };
        let data = new_data.as_ref().unwrap_or(&self.data);
        let qkey = QuantKey {
            config: quant_config(s),
            tensor: s.tensor,
            channel: s.channel,
            meta: s.meta,
        };
        // Committed with the rest below: on an error the lab keeps its old memo.
        let mut data_memo = if regenerate {
            DataMemo::default()
        } else {
            self.data_memo.clone()
        };
        let new_quant = if regenerate || qkey != self.quant.key {
            // (On new data the previous view is never the one: it gives its buffers.)
            let data_id = (!regenerate).then_some(self.data_id);
            match self.previous.take(&qkey, data_id) {
                Ok(view) => Some(view),
                Err(spare) => {
                    progress(Stage::Quantization);
                    // On an error the buffers are dropped with it; the next change allocates
                    // anew.
                    Some(quant_view(data, s, &mut data_memo, spare)?)
                }
            }
        } else {
            None
        };
        let mut select_cache = if regenerate {
            SelectCache::default()
        } else {
            self.select_cache.clone()
        };
        let new_select = if regenerate || SelectKey::of(s) != self.select.key {
            progress(Stage::Selection);
            Some(select_view(data, s, &mut select_cache)?)
        } else {
            None
        };
        let quant = new_quant.as_ref().unwrap_or(&self.quant);
        let select = new_select.as_ref().unwrap_or(&self.select);
        // The levers' errors when stale or pending: computed now, unless this update defers them.
        let lever_key = LeverKey::of(s);
        let lever_errors =
            if regenerate || lever_key != self.levers.0 || self.levers.1 == LeverErrors::Pending {
                if defer.levers {
                    LeverErrors::Pending
                } else {
                    lever_errors(data, s, select, &mut data_memo)?
                }
            } else {
                self.levers.1
            };
        let budget = budget_figures(data, s, select.selection.kept.len())?;
        let together = together(data, s, lever_errors, select, &budget)?;
        let mut compare_cache = if regenerate {
            CompareCache::default()
        } else {
            self.compare_cache.clone()
        };
        let compare_stale =
            regenerate || self.compare_pending || compare_key(data, s, quant) != self.compare.key;
        let deferred = compare_stale && defer.comparison;
        let new_compare = if compare_stale && !defer.comparison {
            progress(Stage::Compare);
            Some(compare_view(data, s, quant, &mut compare_cache)?)
        } else {
            None
        };
        let compare = new_compare.as_ref().unwrap_or(&self.compare);
        // The x axis follows the quantization and the index kind even when the curves do not
        // (deferred curves keep the axis of the settings they were computed for).
        let curves = if deferred {
            None
        } else {
            let mut curves = compare.curves.clone();
            annotate(&mut curves, data, s)?;
            Some(curves)
        };
        let new_kivi = if regenerate || self.kivi_pending || kivi_config(s, data) != self.kivi.0 {
            progress(Stage::Kivi);
            Some((kivi_config(s, data), kivi_figures(data, s)?))
        } else {
            None
        };
        let kivi = new_kivi.as_ref().unwrap_or(&self.kivi);
        let figures = Figures {
            data: data_figures(data),
            quant: quant.figures.clone(),
            select: select.figures.clone(),
            budget,
            together,
            compare: compare.figures.clone(),
            kivi: kivi.1.clone(),
            pending: deferred,
            kivi_pending: false,
        };
        let view_data_id = self.data_id;
        if let Some(d) = new_data {
            self.data = d;
            self.data_id = next_data_id();
        }
        if let Some(q) = new_quant {
            let old = std::mem::replace(&mut self.quant, q);
            // Kept only while about the right size: after new, smaller data the old view's
            // buffers would pin memory the next view never fills.
            let needed = self.quant.abs_err.len();
            self.previous = if old.abs_err.capacity() <= 2 * needed.max(1) {
                Previous {
                    view: Some(old),
                    data_id: view_data_id,
                }
            } else {
                Previous::default()
            };
        }
        self.levers = (lever_key, lever_errors);
        if let Some(v) = new_select {
            self.select = v;
        }
        if let Some(c) = new_compare {
            self.compare = c;
        }
        if let Some(curves) = curves {
            self.compare.curves = curves;
        }
        self.compare_cache = compare_cache;
        self.select_cache = select_cache;
        if let Some(k) = new_kivi {
            self.kivi = k;
        }
        self.figures = figures;
        self.settings = s.clone();
        self.data_memo = data_memo;
        self.compare_pending = deferred;
        self.kivi_pending = false;
        Ok(&self.figures)
    }

    /// An identity of the data in use: it changes whenever the data does (new data, uploads,
    /// regeneration), and never repeats, so views derived from the data alone can be cached by it.
    pub fn data_id(&self) -> u64 {
        self.data_id
    }

    /// The values of the group section 2 shows ([`QuantFigures::group`]): a run of the shown
    /// channel, of token 0, or the whole tensor.
    pub fn shown_group_values(&self) -> &[f32] {
        match self.quant.key.config.granularity {
            Granularity::PerTensor => match self.quant.key.tensor {
                KvPick::K => self.data.keys.data(),
                KvPick::V => self.data.values.data(),
            },
            _ => &self.quant.group_values,
        }
    }

    /// The current figures.
    pub fn figures(&self) -> &Figures {
        &self.figures
    }

    /// The current data.
    pub fn data(&self) -> &Data {
        &self.data
    }

    /// The settings of the current view.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The quantization view.
    pub fn quant(&self) -> &QuantView {
        &self.quant
    }

    /// The selection view.
    pub fn select(&self) -> &SelectView {
        &self.select
    }

    /// The policy comparison and trade-off curves.
    pub fn compare(&self) -> &CompareView {
        &self.compare
    }

    /// Reads an uploaded file and keeps its tensors for [`Lab::use_uploaded`]; the data in use
    /// does not change. Returns what the file holds. (See [`Uploads::load`].)
    pub fn load_file(&mut self, name: &str, bytes: &[u8]) -> Result<FileSummary, LabError> {
        Ok(self.uploads.load(name, bytes)?)
    }

    /// Uses uploaded tensors: `attention` (`[S,T]`, `[T,T]` or `[H,S,T]` with `head`),
    /// `keys` and optionally `values` (`[T,d]`, `[H,T,d]`, `[L,H,T,d]` with `layer`/`head`).
    /// Without values, the keys stand in for them. Checks that `T` agrees. On error the data
    /// in use stays.
    pub fn use_uploaded(&mut self, choice: &UploadChoice) -> Result<UseSummary, LabError> {
        self.use_uploaded_with_progress(choice, &mut |_| {})
    }

    /// [`Lab::use_uploaded`] with progress reports (see [`Stage`]).
    pub fn use_uploaded_with_progress(
        &mut self,
        choice: &UploadChoice,
        progress: &mut dyn FnMut(Stage),
    ) -> Result<UseSummary, LabError> {
        progress(Stage::Data);
        let chosen = self.uploads.choose(choice)?;
        self.adopt(chosen, progress)
    }

    /// Makes tensors chosen from uploads ([`Uploads::choose`]) the data in use: the settings keep
    /// everything that still fits the new shape (B, the window, the group size and the channel
    /// are clamped to it). On error the data in use stays. The page calls this with what its
    /// upload module chose.
    pub fn use_chosen(&mut self, chosen: Chosen) -> Result<UseSummary, LabError> {
        self.use_chosen_with_progress(chosen, &mut |_| {})
    }

    /// [`Lab::use_chosen`] with progress reports (see [`Stage`]).
    pub fn use_chosen_with_progress(
        &mut self,
        chosen: Chosen,
        progress: &mut dyn FnMut(Stage),
    ) -> Result<UseSummary, LabError> {
        progress(Stage::Data);
        self.adopt(chosen, progress)
    }

    /// The data stage after its reading part: `chosen` in use, with what it does not give
    /// generated at its `T` from the current generator settings; every view computed anew.
    fn adopt(
        &mut self,
        chosen: Chosen,
        progress: &mut dyn FnMut(Stage),
    ) -> Result<UseSummary, LabError> {
        let t = chosen.tokens();
        let (attention, keys, values, tokens, uploaded_text, warnings) = chosen.into_parts();
        let uploaded = UploadedParts {
            attention: attention.is_some(),
            keys: keys.is_some(),
            values: values.is_some(),
        };
        let mut s = self.settings.clone();
        s.tokens = t;
        // A generated part keeps the generator's S and d where the upload does not fix them,
        // bounded as a link's are (S <= T, and at most 64 Mi values a matrix).
        let per_row = usize::try_from(synth::MAX_ELEMENTS / t.max(1) as u64).unwrap_or(usize::MAX);
        s.steps = attention
            .as_ref()
            .map_or(s.steps.min(t).min(per_row).max(1), Matrix::rows);
        s.channels = keys
            .as_ref()
            .or(values.as_ref())
            .map_or(s.channels.min(per_row).max(1), Matrix::cols);
        // (what the data's shape bounds follows it: the page sends these settings back)
        s.budget = s.budget.min(s.tokens);
        s.recent = s.recent.min(s.tokens);
        s.kernel = s.kernel.min(2 * s.tokens + 1);
        s.outliers = s.outliers.min(s.channels);
        s.skewed = s.skewed.min(s.channels);
        s.window = s.window.min(s.steps);
        s.future = s.future.min(s.steps - 1);
        s.channel = s.channel.filter(|&c| c < s.channels);
        s.group = if s.group > 0 && s.group <= s.tokens.min(s.channels) {
            s.group
        } else {
            0
        };
        let fill = GenKey::of(&s);
        let kv_spec = KvSpec {
            tokens: t,
            channels: s.channels,
            seed: s.seed,
            outlier_channels: s.outliers,
            skewed_channels: s.skewed,
            ..KvSpec::default()
        };
        // (what `generate` makes at this shape, for the parts not uploaded)
        let attention = match attention {
            Some(a) => a,
            None => synth::attention(&AttentionSpec::preset(s.pattern, s.steps, t, s.seed))?,
        };
        let keys = match keys {
            Some(k) => k,
            None => synth::keys(&kv_spec)?,
        };
        let values = match values {
            Some(v) => v,
            None => synth::values(&kv_spec)?,
        };
        let description = match filled_english(uploaded, &fill) {
            Some(filled) => format!("{uploaded_text}; {filled}"),
            None => uploaded_text,
        };
        let all = uploaded.attention && uploaded.keys && uploaded.values;
        let data = Data {
            attention,
            keys,
            values,
            generated: None,
            uploaded: Some(uploaded),
            filled_with: (!all).then_some(fill),
            tokens,
            description: description.clone(),
        };
        let fresh = Lab::with_data(data, s, progress, false)?;
        let uploads = std::mem::take(&mut self.uploads);
        *self = Lab { uploads, ..fresh };
        Ok(UseSummary {
            description,
            warnings,
        })
    }

    /// Leaves uploaded data and goes back to data generated from the current settings.
    pub fn use_generated(&mut self, s: &Settings) -> Result<&Figures, LabError> {
        self.use_generated_with_progress(s, &mut |_| {})
    }

    /// [`Lab::use_generated`] with progress reports (see [`Stage`]).
    pub fn use_generated_with_progress(
        &mut self,
        s: &Settings,
        progress: &mut dyn FnMut(Stage),
    ) -> Result<&Figures, LabError> {
        let fresh = Lab::new_with_progress(s.clone(), progress)?;
        let uploads = std::mem::take(&mut self.uploads);
        *self = Lab { uploads, ..fresh };
        Ok(&self.figures)
    }

    /// Kept and dropped indices, each compared policy's kept set (as compact ranges, empty where
    /// the policy cannot select here), the view's query and its figures: what
    /// [`Lab::export_json`] writes. (The page converts it to a JavaScript object and writes the
    /// JSON there, so its module carries no JSON serializer.)
    pub fn export(&self) -> Export<'_> {
        // (Kept here, not in the figures: the page never reads them, and at long contexts they
        // were tens of kB of text per policy on every update.)
        let policies = self
            .compare
            .selections
            .iter()
            .map(|(p, sel)| PolicyKept {
                policy: p.name(),
                kept_ranges: sel
                    .as_ref()
                    .map_or_else(String::new, |x| compact_ranges(&x.kept)),
            })
            .collect();
        Export {
            settings_query: self.settings.to_query(),
            kept: &self.select.selection.kept,
            dropped: &self.select.selection.dropped,
            policies,
            figures: &self.figures,
        }
    }

    /// [`Lab::export`] as pretty-printed JSON.
    pub fn export_json(&self) -> String {
        serde_json::to_string_pretty(&self.export())
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// `token,state,score` per token, then the breakdown terms as `term,bytes` rows.
    pub fn export_csv(&self) -> String {
        let texts = self.data.tokens.as_deref();
        let mut out = String::from(if texts.is_some() {
            "token,kept,role,score,text\n"
        } else {
            "token,kept,role,score\n"
        });
        let mask = self.select.selection.mask();
        let mut roles = vec![""; mask.len()];
        for (&i, r) in self
            .select
            .selection
            .kept
            .iter()
            .zip(&self.select.selection.roles)
        {
            if let Some(x) = roles.get_mut(i) {
                *x = match r {
                    Role::Heavy => "heavy",
                    Role::Recent => "recent",
                    Role::Sink => "sink",
                };
            }
        }
        for (i, (&k, score)) in mask.iter().zip(&self.select.scores).enumerate() {
            out.push_str(&format!("{i},{},{},{score}", u8::from(k), roles[i]));
            // (the prompt's token text, quoted as CSV quotes: any comma, quote or line break
            // stays inside its field)
            if let Some(t) = texts.and_then(|t| t.get(i)) {
                out.push_str(&format!(",\"{}\"", t.replace('"', "\"\"")));
            }
            out.push('\n');
        }
        let b = &self.figures.budget.data;
        out.push_str("\nterm,bytes\n");
        for (name, v) in [
            ("m_fp", b.m_fp),
            ("m_codes", b.m_codes),
            ("m_fp_kept", b.m_fp_kept),
            ("m_scales", b.m_scales),
            ("m_zero_points", b.m_zero_points),
            ("m_score_state", b.m_score_state),
            ("m_index", b.m_index),
            ("m_final", b.m_final),
        ] {
            out.push_str(&format!("{name},{v}\n"));
        }
        out.push_str(&format!(
            "r_token,{}\nr_overall,{}\n",
            b.r_token, b.r_overall
        ));
        out
    }
}

fn check(s: &Settings) -> Result<(), LabError> {
    s.validate().map_err(LabError::from)
}

impl From<StateWarning> for LabError {
    /// A setting refused by [`Settings::checked`] or [`Settings::validate`].
    fn from(w: StateWarning) -> Self {
        LabError::Setting {
            field: w.key,
            message: w.message,
            repair: w.repair,
        }
    }
}

fn data_figures(d: &Data) -> DataFigures {
    DataFigures {
        tokens: d.attention.cols(),
        steps: d.attention.rows(),
        channels: d.keys.cols(),
        generated: d.generated.is_some(),
        description: d.description.clone(),
        generator: d
            .generated
            .as_ref()
            .or(d.filled_with.as_ref())
            .map(|k| GeneratorFigures {
                pattern: k.pattern.name(),
                seed: k.seed,
                outlier_channels: k.outliers,
                skewed_channels: k.skewed,
            }),
        uploaded: d.uploaded,
    }
}

/// What the JSON export holds ([`Lab::export`]).
#[derive(Debug, Serialize)]
pub struct Export<'a> {
    /// The view's settings as a query string.
    pub settings_query: String,
    /// Kept token indices, ascending.
    pub kept: &'a [usize],
    /// Dropped token indices, ascending.
    pub dropped: &'a [usize],
    /// Each compared policy's kept set, in the comparison's order.
    pub policies: Vec<PolicyKept>,
    /// The view's figures.
    pub figures: &'a Figures,
}

/// One compared policy's kept set in the export.
#[derive(Debug, Serialize)]
pub struct PolicyKept {
    /// The policy's name.
    pub policy: &'static str,
    /// Its kept tokens as compact ranges (`0-3,17`), empty where it cannot select here.
    pub kept_ranges: String,
}

pub use crate::upload::{FileSummary, TensorSummary, UploadChoice};

impl From<crate::upload::UploadError> for LabError {
    fn from(e: crate::upload::UploadError) -> Self {
        match e {
            crate::upload::UploadError::Load(e) => LabError::Load(e.to_string().into()),
            other => LabError::Range {
                field: "file",
                message: other.to_string(),
            },
        }
    }
}

impl From<crate::upload::ChosenError> for LabError {
    fn from(e: crate::upload::ChosenError) -> Self {
        match e {
            crate::upload::ChosenError::Tokens(m) => m.into(),
            crate::upload::ChosenError::Nothing => LabError::Range {
                field: "file",
                message: e.to_string(),
            },
        }
    }
}

/// The result of using uploaded tensors.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UseSummary {
    /// What is now in use.
    pub description: String,
    /// Warnings (rows not summing to 1, ...).
    pub warnings: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stages_of(lab: &mut Lab, s: &Settings) -> Vec<Stage> {
        let mut seen = Vec::new();
        lab.update_with_progress(s, &mut |st| seen.push(st))
            .expect("valid settings");
        seen
    }

    #[test]
    fn progress_reports_exactly_the_stages_a_change_recomputes() {
        let mut seen = Vec::new();
        let mut lab = Lab::new_with_progress(small(), &mut |st| seen.push(st)).expect("lab");
        assert_eq!(
            seen,
            Stage::ALL.to_vec(),
            "a new lab runs every stage in order"
        );
        let mut s = small();
        assert_eq!(stages_of(&mut lab, &s), vec![], "no change, no stage");
        s.bits = 2;
        assert_eq!(
            stages_of(&mut lab, &s),
            vec![Stage::Quantization, Stage::Compare],
            "bits change the codes and the comparison's output error, not the selection"
        );
        s.budget = 8;
        assert_eq!(
            stages_of(&mut lab, &s),
            vec![Stage::Selection, Stage::Compare]
        );
        s.seed += 1;
        assert_eq!(
            stages_of(&mut lab, &s),
            vec![
                Stage::Data,
                Stage::Quantization,
                Stage::Selection,
                Stage::Compare,
                Stage::Kivi
            ]
        );
    }

    /// The settings table says which sections each setting changes (the page redraws their
    /// charts, `www/fields.js`): every stage a change recomputes must be in a section it names,
    /// else a chart of that section would stay stale on the page.
    #[test]
    fn each_setting_recomputes_only_the_sections_its_table_row_names() {
        use crate::state::{fields, Affects, Rule, Section};
        let base = small();
        let query = base.to_query();
        for field in fields() {
            // (the value small() gives it, else its default)
            let now = query
                .split('&')
                .find_map(|kv| kv.strip_prefix(field.key)?.strip_prefix('='))
                .map_or(field.default.clone(), str::to_string);
            let other = match field.rule {
                Rule::Int(lo, hi) | Rule::Odd(lo, hi) => {
                    let d: u64 = now.parse().expect("a number");
                    let step = if matches!(field.rule, Rule::Odd(..)) {
                        2
                    } else {
                        1
                    };
                    if d + step <= hi {
                        d + step
                    } else {
                        d.max(lo + step) - step
                    }
                    .to_string()
                }
                Rule::AutoOr(..) => "0".into(),
                Rule::Numbers(n) => n
                    .iter()
                    .find(|v| v.to_string() != field.default)
                    .expect("two")
                    .to_string(),
                Rule::Words(_) | Rule::Named => field
                    .options
                    .iter()
                    .find(|o| **o != field.default)
                    .expect("two options")
                    .to_string(),
                Rule::Model => "custom".into(),
            };
            let query = format!("{}&{}={other}", base.to_query(), field.key);
            let parsed = Settings::from_query(&query);
            assert!(parsed.warnings.is_empty(), "{query}: {:?}", parsed.warnings);
            let mut lab = Lab::new(base.clone()).expect("lab");
            let stages = stages_of(&mut lab, &parsed.settings);
            let section = |st: Stage| match st {
                Stage::Quantization | Stage::Kivi => Some(Section::Quant),
                Stage::Selection => Some(Section::Select),
                Stage::Budget => Some(Section::Budget),
                Stage::Compare => Some(Section::Compare),
                Stage::Data => None,
            };
            match field.affects {
                Affects::Data => {
                    assert!(stages.contains(&Stage::Data), "{}: {stages:?}", field.key)
                }
                Affects::Page => assert_eq!(stages, vec![], "{}", field.key),
                Affects::Only(sections) => {
                    // (the budget's figures are recomputed on every update, unreported)
                    let budget_only = sections.contains(&Section::Budget);
                    assert!(
                        !stages.is_empty() || budget_only,
                        "{}={other}: nothing",
                        field.key
                    );
                    for st in stages {
                        let named = section(st).is_some_and(|s| sections.contains(&s));
                        assert!(
                            named,
                            "{}={other} recomputes {st:?}, not in {sections:?}",
                            field.key
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn generated_data_figures_hold_the_generator_settings_the_description_states() {
        let mut s = small();
        s.pattern = crate::synth::AttentionPreset::Needle;
        s.seed = 9_007_199_254_740_992; // 2^53, the largest seed
        s.outliers = s.channels + 3; // more than d: refused, naming d
        let e = Lab::new(s.clone()).expect_err("outliers above d");
        assert_eq!(e.field(), "outliers");
        assert_eq!(
            e.to_string(),
            format!(
                "outliers {} is out of range: must be at most channels ({})",
                s.channels + 3,
                s.channels
            )
        );
        s.outliers = s.channels; // every channel an outlier
        s.skewed = 2;
        let lab = Lab::new(s.clone()).expect("lab");
        let d = &lab.figures().data;
        let g = d
            .generator
            .as_ref()
            .expect("generated data has its generator");
        assert_eq!(
            g,
            &GeneratorFigures {
                pattern: "needle",
                seed: 9_007_199_254_740_992,
                outlier_channels: s.channels,
                skewed_channels: 2,
            }
        );
        let want = format!(
            "generated: needle attention S={} x T={}, K and V T={} x d={} ({} outlier channels, \
             2 skewed), seed 9007199254740992",
            s.steps, s.tokens, s.tokens, s.channels, s.channels
        );
        assert_eq!(d.description, want);
    }

    #[test]
    fn the_page_path_chosen_elsewhere_equals_use_uploaded() {
        // The page chooses in its upload module and hands the matrices to use_chosen; natively
        // use_uploaded does both: the two must give the same view.
        let csv = |rows: usize, cols: usize, f: &dyn Fn(usize, usize) -> f32| {
            let mut text = String::new();
            for r in 0..rows {
                let row: Vec<String> = (0..cols).map(|c| f(r, c).to_string()).collect();
                text.push_str(&row.join(","));
                text.push('\n');
            }
            text.into_bytes()
        };
        let attn = csv(6, 20, &|r, c| {
            if c <= 14 + r {
                1.0 + (c % 3) as f32
            } else {
                0.0
            }
        });
        let keys = csv(20, 4, &|r, c| ((r * 7 + c * 3) % 11) as f32 - 5.0);
        let choice = UploadChoice {
            attention: "a.csv".into(),
            keys: "k.csv".into(),
            head_mode: "head".into(),
            normalise: true,
            ..UploadChoice::default()
        };
        let mut native = Lab::new(small()).expect("lab");
        assert!(native.figures().data.generator.is_some());
        native.load_file("a.csv", &attn).expect("a");
        native.load_file("k.csv", &keys).expect("k");
        let used = native.use_uploaded(&choice).expect("use_uploaded");

        let mut uploads = Uploads::new();
        uploads.load("a.csv", &attn).expect("a");
        uploads.load("k.csv", &keys).expect("k");
        let mut page = Lab::new(small()).expect("lab");
        let chosen = page.use_chosen(uploads.choose(&choice).expect("choose"));
        assert_eq!(chosen.expect("use_chosen"), used);
        // V was not uploaded: it is generated at the upload's T and d, and said so.
        let d = &native.figures().data;
        assert_eq!(
            d.uploaded,
            Some(UploadedParts {
                attention: true,
                keys: true,
                values: false
            })
        );
        assert_eq!(d.generator.as_ref().map(|g| g.seed), Some(small().seed));
        assert!(
            d.description.ends_with(&format!(
                "; generated: V T=20 x d=4 (0 skewed channels), seed {}",
                small().seed
            )),
            "{}",
            d.description
        );
        assert_eq!(page.settings(), native.settings());
        assert_eq!(page.figures(), native.figures());
        assert_eq!(page.data().keys, native.data().keys);
    }

    #[test]
    fn one_tensor_alone_is_used_and_the_rest_generated_at_its_t() {
        // attention [3, 4] alone (the note's example): K and V generated at T = 4 with the
        // generator's d; keys [50, 6] alone: attention generated over T = 50 with S <= T.
        let mut lab = Lab::new(small()).expect("lab");
        lab.load_file(
            "a.csv",
            b"0.6,0.2,0.1,0.1
0.7,0.1,0.1,0.1
0.05,0.05,0.1,0.8
",
        )
        .expect("a");
        let keys: String = (0..50)
            .map(|r| {
                let row: Vec<String> = (0..6)
                    .map(|c| format!("{}", (r * 6 + c) as f32 * 0.1 - 7.0))
                    .collect();
                row.join(",")
                    + "
"
            })
            .collect();
        lab.load_file("k.csv", keys.as_bytes()).expect("k");
        let only = |a: &str, k: &str| UploadChoice {
            attention: a.into(),
            keys: k.into(),
            head_mode: "head".into(),
            ..UploadChoice::default()
        };
        lab.use_uploaded(&only("a.csv", ""))
            .expect("attention alone");
        let d = &lab.figures().data;
        assert_eq!((d.steps, d.tokens, d.channels), (3, 4, small().channels));
        assert_eq!(lab.data().attention.row(0), Some(&[0.6, 0.2, 0.1, 0.1][..]));
        assert_eq!(lab.data().keys.rows(), 4);
        let mut want = small();
        want.tokens = 4;
        let generated = generate(&Settings { steps: 3, ..want }).expect("generated");
        assert_eq!(
            lab.data().keys,
            generated.keys,
            "the generator's own K at T = 4"
        );
        assert!(
            d.description.contains("; generated: K and V T=4 x d="),
            "{}",
            d.description
        );
        assert_eq!(
            lab.figures().select.kept_count,
            4.min(lab.settings().budget)
        );

        // (a fresh lab: the generator's S is the settings' in use, and the upload above set 3)
        let mut lab = Lab::new(small()).expect("lab");
        lab.load_file("k.csv", keys.as_bytes()).expect("k");
        lab.use_uploaded(&only("", "k.csv")).expect("keys alone");
        let d = &lab.figures().data;
        assert_eq!((d.tokens, d.channels), (50, 6));
        assert!(
            d.steps <= 50 && d.steps == small().steps.min(50),
            "S = {}",
            d.steps
        );
        assert_eq!(lab.data().keys.row(0).map(|r| r[0]), Some(-7.0));
        assert!(
            d.description
                .starts_with("uploaded: KV [T=50, d=6]: 50 tokens x 6 channels; generated: "),
            "{}",
            d.description
        );
        assert!(d.description.contains("attention S="), "{}", d.description);
        assert!(lab.use_uploaded(&only("", "")).is_err(), "nothing chosen");
        assert!(
            lab.export_csv().starts_with("token,kept,role,score\n"),
            "no texts, no column"
        );
        let texts: String = (0..50)
            .map(|i| format!("\"t{i},\\\"q\\\"\""))
            .collect::<Vec<_>>()
            .join(",");
        lab.load_file("t.json", format!("[{texts}]").as_bytes())
            .expect("texts");
        lab.use_uploaded(&only("", "k.csv"))
            .expect("keys with texts");
        let csv = lab.export_csv();
        assert!(csv.starts_with("token,kept,role,score,text\n"), "{csv}");
        assert!(
            csv.lines()
                .nth(2)
                .is_some_and(|l| l.ends_with(",\"t1,\"\"q\"\"\"")),
            "{csv}"
        );
        assert_eq!(
            lab.figures().data.tokens,
            50,
            "a refused choice keeps the data in use"
        );
    }

    #[test]
    fn settings_after_an_upload_are_in_range_for_the_uploaded_shape() {
        // The page sends `page.settings()` straight back as its next update: every setting
        // bounded by the data's shape must follow the uploaded shape (T = 20, S = 6, d = 4),
        // or that update is refused.
        let attn = "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20\n".repeat(6);
        let keys = "1,2,3,4\n".repeat(20);
        let mut s = small();
        s.recent = 40;
        s.budget = 50;
        s.window = 12;
        s.outliers = 8;
        s.skewed = 6;
        let mut lab = Lab::new(s).expect("lab");
        // Attention and keys uploaded as CSV files and used.
        let upload = |lab: &mut Lab, name: &str, attention: &str, keys: &str| {
            let (a, k) = (format!("{name}.a.csv"), format!("{name}.k.csv"));
            lab.load_file(&a, attention.as_bytes()).expect("attention");
            lab.load_file(&k, keys.as_bytes()).expect("keys");
            let choice = UploadChoice {
                attention: a,
                keys: k,
                ..UploadChoice::default()
            };
            lab.use_uploaded(&choice).expect("use_uploaded");
            lab.settings().clone()
        };
        let after = upload(&mut lab, "first", &attn, &keys);
        assert_eq!((after.tokens, after.steps, after.channels), (20, 6, 4));
        assert_eq!(after.validate(), Ok(()));
        assert_eq!((after.budget, after.recent, after.window), (20, 20, 6));
        assert_eq!((after.outliers, after.skewed), (4, 4));
        lab.update(&after).expect("the page's next update");
        // Two tokens: SnapKV's pooling kernel (7) follows to 2 T + 1 = 5.
        let after = upload(&mut lab, "two-tokens", "1,2\n3,4\n", "1\n2\n");
        assert_eq!((after.tokens, after.kernel), (2, 5));
        assert_eq!(after.validate(), Ok(()));
        lab.update(&Settings {
            method: Method::Snapkv,
            ..after
        })
        .expect("SnapKV on two tokens");
    }

    /// The comparison deferred, as the page does while its section is off screen.
    const COMPARISON: Defer = Defer {
        comparison: true,
        levers: false,
    };

    fn small() -> Settings {
        Settings {
            tokens: 64,
            steps: 16,
            channels: 8,
            budget: 16,
            recent: 4,
            window: 4,
            future: 4,
            ..Settings::default()
        }
    }

    /// The scale formula's numbers are those of the group whose scale it shows: its extremes
    /// give that scale, in every granularity and scheme (the page showed the channel's
    /// extremes beside a per-token or per-tensor scale: "44.6 / 7 = 2.302").
    #[test]
    fn the_shown_scale_comes_from_the_shown_extremes() {
        use crate::quant::{Granularity, Scheme};
        for granularity in [
            Granularity::PerChannel,
            Granularity::PerToken,
            Granularity::PerTensor,
        ] {
            for scheme in [Scheme::Symmetric, Scheme::Asymmetric] {
                for group in [0, 5] {
                    if group > 0 && granularity == Granularity::PerTensor {
                        continue;
                    }
                    let s = Settings {
                        granularity,
                        scheme,
                        group,
                        ..small()
                    };
                    let mut lab = Lab::new(small()).unwrap();
                    lab.update(&s).unwrap();
                    let q = &lab.figures().quant;
                    let from_extremes = match scheme {
                        Scheme::Symmetric => q.group_max_abs / q.qmax as f64,
                        Scheme::Asymmetric => (q.group_max - q.group_min) / q.qmax as f64,
                    };
                    let what = format!("{granularity:?} {scheme:?} group {group}");
                    assert!(
                        (from_extremes - q.scale).abs() <= 1e-6 * q.scale.abs(),
                        "{what}: extremes give {from_extremes}, the scale is {}",
                        q.scale
                    );
                    assert!(q.group_min <= q.group_max, "{what}");
                    // The histogram's values are the group's: their extremes are the formula's,
                    // and the grid drawn over them is theirs, so none runs past it by more than
                    // half a step (token 0's grid was drawn over the whole channel's values).
                    let values = lab.shown_group_values();
                    let lo = values.iter().copied().fold(f32::INFINITY, f32::min);
                    let hi = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    assert_eq!(
                        (q.group_min, q.group_max),
                        (f64::from(lo), f64::from(hi)),
                        "{what}"
                    );
                    let grid = &lab.quant().group_grid;
                    let (g_lo, g_hi) = (grid[0], grid[grid.len() - 1]);
                    let half = q.scale / 2.0 * (1.0 + 1e-6);
                    assert!(
                        f64::from(lo) >= g_lo - half && f64::from(hi) <= g_hi + half,
                        "{what}"
                    );
                    let g = &q.group;
                    assert_eq!(values.len(), g.to - g.from + 1, "{what}");
                    assert!(g.max_error <= g.bound * (1.0 + 1e-6) && g.groups_within == q.groups);
                    if granularity == Granularity::PerTensor {
                        let x = lab.data().keys.data();
                        let lo = x.iter().copied().fold(f32::INFINITY, f32::min);
                        let hi = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                        assert_eq!((q.group_min, q.group_max), (f64::from(lo), f64::from(hi)));
                    }
                }
            }
        }
    }

    /// The caches (scores, evaluations, curves, RMSEs) never leak a stale number: after every
    /// change an updated lab shows exactly what a fresh one does.
    #[test]
    fn updates_match_a_fresh_lab() {
        let mut lab = Lab::new(small()).unwrap();
        let mut s = small();
        let changes: Vec<fn(&mut Settings)> = vec![
            |s| s.bits = 3,
            |s| s.budget = 9,
            |s| s.bits = 4,
            |s| s.recent = 0,
            |s| s.scheme = crate::quant::Scheme::Asymmetric,
            |s| s.method = Method::Snapkv,
            |s| s.window = 2,
            |s| s.future = 2,
            |s| s.budget = 2,
            |s| s.sinks = 1,
            |s| s.bits = 3,
            |s| s.tensor = KvPick::V,
            |s| s.seed += 1,
            |s| s.budget = 12,
            |s| s.future = 0,
        ];
        for change in changes {
            change(&mut s);
            lab.update(&s).unwrap();
            let fresh = Lab::new(s.clone()).unwrap();
            assert_eq!(lab.figures(), fresh.figures(), "{}", s.to_query());
            assert_eq!(lab.compare().curves, fresh.compare().curves);
            assert_eq!(lab.compare().selections, fresh.compare().selections);
            assert_eq!(lab.select().scores, fresh.select().scores);
            assert_eq!(lab.quant().abs_err, fresh.quant().abs_err);
        }
    }

    /// Without a chosen channel the quantization section shows the one with the largest `|x|`
    /// (lowest index on a tie), per tensor, and finds it again for new data (it is memoised).
    #[test]
    fn the_default_channel_has_the_largest_magnitude() {
        let argmax = |x: &Matrix| {
            let mut best = (0usize, -1f32);
            for c in 0..x.cols() {
                let m = x
                    .column(c)
                    .unwrap()
                    .iter()
                    .fold(0f32, |m, v| m.max(v.abs()));
                if m > best.1 {
                    best = (c, m);
                }
            }
            best.0
        };
        let mut s = Settings::default();
        let mut lab = Lab::new(s.clone()).unwrap();
        assert_eq!(s.channel, None);
        assert_eq!(lab.figures().quant.channel, argmax(&lab.data().keys));
        s.tensor = KvPick::V;
        lab.update(&s).unwrap();
        assert_eq!(lab.figures().quant.channel, argmax(&lab.data().values));
        s.tensor = KvPick::K;
        s.bits = 3;
        lab.update(&s).unwrap();
        assert_eq!(lab.figures().quant.channel, argmax(&lab.data().keys));
        let first = s.seed;
        for seed in [first + 1, first + 2, first + 3] {
            s.seed = seed;
            s.tensor = KvPick::K;
            lab.update(&s).unwrap();
            assert_eq!(
                lab.figures().quant.channel,
                argmax(&lab.data().keys),
                "seed {seed}"
            );
            s.tensor = KvPick::V;
            lab.update(&s).unwrap();
            assert_eq!(
                lab.figures().quant.channel,
                argmax(&lab.data().values),
                "seed {seed}"
            );
        }
    }

    /// A quantization change fills the buffers of the view before last: after two changes
    /// the codes and `|x - x_hat|` are back in the first view's allocations, and the view is
    /// the one a fresh lab computes.
    #[test]
    fn quantization_changes_reuse_the_replaced_views_buffers() {
        let mut s = Settings::default();
        let mut lab = Lab::new(s.clone()).unwrap();
        let first = (
            lab.quant().quantized.codes().as_ptr(),
            lab.quant().abs_err.as_ptr(),
        );
        s.bits = 3;
        lab.update(&s).unwrap();
        s.bits = 5;
        lab.update(&s).unwrap();
        let third = (
            lab.quant().quantized.codes().as_ptr(),
            lab.quant().abs_err.as_ptr(),
        );
        assert_eq!(first, third);
        let fresh = Lab::new(s.clone()).unwrap();
        assert_eq!(lab.figures(), fresh.figures());
        assert_eq!(lab.quant().abs_err, fresh.quant().abs_err);
        assert_eq!(lab.quant().quantized, fresh.quant().quantized);
        // a clone starts without spare buffers and still updates to the same view
        let mut copy = lab.clone();
        s.bits = 2;
        copy.update(&s).unwrap();
        assert_eq!(copy.figures(), Lab::new(s.clone()).unwrap().figures());
        // an update that fails after taking the spare buffers leaves the view as it was, and
        // the next one still equals a fresh lab
        let shown = lab.figures().clone();
        let abs_err = lab.quant().abs_err.clone();
        let bad = Settings {
            channel: Some(s.channels + 5),
            ..s.clone()
        };
        assert!(lab.previous.view.is_some());
        // (a channel the data does not have: refused with its fields, next to the channel)
        let e = lab.update(&bad).unwrap_err();
        let (asked, last) = (s.channels + 5, s.channels - 1);
        assert_eq!(
            e,
            LabError::Channel {
                channel: asked,
                max: last
            }
        );
        assert_eq!(e.field(), "channel");
        assert_eq!(
            e.to_string(),
            format!("channel {asked} is out of range: must be between 0 and {last} (d - 1)")
        );
        // it failed after quantizing into the previous view's buffers (they went with the
        // error)
        assert!(lab.previous.view.is_none());
        assert_eq!(lab.figures(), &shown);
        assert_eq!(lab.quant().abs_err, abs_err);
        s.bits = 6;
        lab.update(&s).unwrap();
        let fresh = Lab::new(s.clone()).unwrap();
        assert_eq!(lab.figures(), fresh.figures());
        assert_eq!(lab.quant().abs_err, fresh.quant().abs_err);
        // much smaller data: the big buffers are not kept as spares
        s.tokens = 64;
        s.budget = 16;
        s.recent = 4;
        lab.update(&s).unwrap();
        s.bits = 5;
        lab.update(&s).unwrap();
        let kept = lab
            .previous
            .view
            .as_ref()
            .map_or(0, |v| v.abs_err.capacity());
        assert!(kept <= 2 * lab.quant().abs_err.len());
        assert_eq!(lab.figures(), Lab::new(s.clone()).unwrap().figures());
    }

    #[test]
    fn a_change_back_shows_the_previous_quantization_without_computing_it() {
        let base = small(); // 4 bits, symmetric
        let mut lab = Lab::new(base.clone()).unwrap();
        let codes_of = |lab: &Lab| lab.quant().quantized.codes().as_ptr();
        let at_4 = codes_of(&lab);
        let asym = Settings {
            scheme: crate::quant::Scheme::Asymmetric,
            ..base.clone()
        };
        lab.update(&asym).unwrap();
        // Back to symmetric: the earlier view itself, and no quantization reported.
        let mut seen = Vec::new();
        lab.update_with_progress(&base, &mut |st| seen.push(st))
            .unwrap();
        assert!(!seen.contains(&Stage::Quantization), "{seen:?}");
        assert_eq!(codes_of(&lab), at_4);
        assert_same_view(&lab, &Lab::new(base.clone()).unwrap(), "back to symmetric");
        // And forth again: the asymmetric view, the same as a fresh lab's.
        lab.update(&asym).unwrap();
        assert_same_view(&lab, &Lab::new(asym.clone()).unwrap(), "asymmetric again");
        // A change to a third view quantizes (into the previous view's buffers).
        let mut seen = Vec::new();
        let three = Settings {
            bits: 3,
            ..asym.clone()
        };
        lab.update_with_progress(&three, &mut |st| seen.push(st))
            .unwrap();
        assert!(seen.contains(&Stage::Quantization), "{seen:?}");
        assert_same_view(&lab, &Lab::new(three.clone()).unwrap(), "3 bits");
        // New data with the previous view's settings: quantized anew, on the new data.
        let new_data = Settings {
            seed: base.seed + 1,
            ..asym.clone()
        };
        lab.update(&new_data).unwrap();
        assert_same_view(&lab, &Lab::new(new_data.clone()).unwrap(), "new data");
        // ... and back to the settings of the view before the new data: not that view either.
        let back = Settings {
            bits: 3,
            ..new_data.clone()
        };
        lab.update(&back).unwrap();
        assert_same_view(&lab, &Lab::new(back).unwrap(), "3 bits on the new data");
    }

    /// Everything a lab shows, for comparing two labs.
    fn assert_same_view(lab: &Lab, fresh: &Lab, what: &str) {
        assert_eq!(lab.figures(), fresh.figures(), "{what}");
        assert_eq!(lab.compare().curves, fresh.compare().curves, "{what}");
        assert_eq!(
            lab.compare().selections,
            fresh.compare().selections,
            "{what}"
        );
        assert_eq!(lab.export_json(), fresh.export_json(), "{what}");
        assert_eq!(lab.export_csv(), fresh.export_csv(), "{what}");
    }

    #[test]
    fn a_staged_lab_computes_the_comparison_and_kivi_last_and_then_equals_a_new_lab() {
        for s in [
            small(),
            Settings {
                future: 0,
                method: Method::Snapkv,
                bits: 3,
                ..small()
            },
        ] {
            let mut seen = Vec::new();
            let mut lab = Lab::new_staged_with_progress(s.clone(), &mut |st| seen.push(st))
                .expect("staged lab");
            assert_eq!(
                seen,
                [
                    Stage::Data,
                    Stage::Quantization,
                    Stage::Selection,
                    Stage::Budget
                ]
            );
            assert!(lab.is_pending() && lab.figures().pending);
            let fresh = Lab::new(s.clone()).unwrap();
            // The first screen's sections are already final; the levers' errors (section 4)
            // are left for `complete` too.
            let (f, g) = (lab.figures(), fresh.figures());
            assert_eq!(
                (&f.data, &f.quant, &f.select, &f.budget),
                (&g.data, &g.quant, &g.select, &g.budget)
            );
            assert_eq!(f.together.r_overall, g.together.r_overall);
            assert!(f.together.fewer_bits.pending && f.together.fewer_tokens.pending);
            assert!(f.compare.rows.is_empty() && lab.compare().curves.is_empty());
            let mut rest = Vec::new();
            lab.complete_with_progress(&mut |st| rest.push(st))
                .expect("complete");
            assert_eq!(rest, [Stage::Compare, Stage::Kivi]);
            assert!(!lab.is_pending() && !lab.figures().pending);
            assert_same_view(&lab, &fresh, &s.to_query());
            // Completing again computes nothing.
            let mut again = Vec::new();
            lab.complete_with_progress(&mut |st| again.push(st))
                .expect("complete");
            assert!(again.is_empty());
        }
    }

    #[test]
    fn deferred_levers_are_computed_by_complete_and_equal_an_update() {
        let base = small(); // 4 bits
        let levers = |lab: &Lab| {
            let t = &lab.figures().together;
            (t.fewer_bits.clone(), t.fewer_tokens.clone())
        };
        let only_levers = Defer {
            comparison: false,
            levers: true,
        };
        // 4 -> 3, and a B change: the levers' errors are left pending, both rows together.
        for down in [
            Settings {
                bits: 3,
                ..base.clone()
            },
            Settings {
                budget: 12,
                ..base.clone()
            },
        ] {
            let mut lab = Lab::new(base.clone()).unwrap();
            lab.update_deferring(&down, &mut |_| {}, only_levers)
                .unwrap();
            let (b, t) = levers(&lab);
            assert!(b.pending && t.pending && lab.is_pending(), "{b:?} {t:?}");
            assert!(b.possible && t.possible && b.cost_per_kib.is_none());
            assert_eq!(lab.figures().together.verdict, None);
            // Everything else is final.
            let direct = Lab::new(down.clone()).unwrap();
            let (f, g) = (lab.figures(), direct.figures());
            assert_eq!(
                (&f.quant, &f.select, &f.budget),
                (&g.quant, &g.select, &g.budget)
            );
            // Completing computes them: the same figures as a fresh lab's.
            let mut seen = Vec::new();
            lab.complete_with_progress(&mut |st| seen.push(st)).unwrap();
            assert!(!lab.is_pending() && !levers(&lab).0.pending);
            assert_eq!(lab.figures(), direct.figures());
            assert_eq!(seen, Vec::<Stage>::new(), "no stage recomputed");
            // A later update that does not defer computes them too.
            let mut lab = Lab::new(base.clone()).unwrap();
            lab.update_deferring(&down, &mut |_| {}, only_levers)
                .unwrap();
            let model = Settings {
                model: "qwen2.5-7b".into(),
                ..down.clone()
            };
            lab.update(&model).unwrap();
            assert_eq!(lab.figures(), Lab::new(model).unwrap().figures());
        }
        // A change they do not depend on (the model) leaves them as they are: nothing pending.
        let mut lab = Lab::new(base.clone()).unwrap();
        let model = Settings {
            model: "qwen2.5-7b".into(),
            ..base.clone()
        };
        lab.update_deferring(&model, &mut |_| {}, only_levers)
            .unwrap();
        assert!(!levers(&lab).0.pending && !lab.is_pending());
        // A staged lab leaves them for `complete` with the comparison.
        let mut staged = Lab::new_staged_with_progress(base.clone(), &mut |_| {}).unwrap();
        assert!(levers(&staged).0.pending);
        staged.complete_with_progress(&mut |_| {}).unwrap();
        assert_eq!(staged.figures(), Lab::new(base).unwrap().figures());
    }

    #[test]
    fn a_deferring_update_leaves_only_the_comparison_and_completing_it_equals_an_update() {
        let base = small();
        // A change the comparison depends on (B), one it does not (the model), one that
        // regenerates the data (T), and one of bits (the output error uses V at these bits).
        let changes = [
            Settings {
                budget: 9,
                ..base.clone()
            },
            Settings {
                model: "qwen2.5-7b".into(),
                ..base.clone()
            },
            Settings {
                tokens: 48,
                budget: 12,
                ..base.clone()
            },
            Settings {
                bits: 3,
                ..base.clone()
            },
        ];
        for s in changes {
            let mut lab = Lab::new(base.clone()).unwrap();
            let before = lab.figures().clone();
            let before_curves = lab.compare().curves.clone();
            let mut seen = Vec::new();
            let f = lab
                .update_deferring(&s, &mut |st| seen.push(st), COMPARISON)
                .unwrap()
                .clone();
            assert!(!seen.contains(&Stage::Compare), "{seen:?}");
            let direct = Lab::new(s.clone()).unwrap();
            let g = direct.figures();
            // Everything but the comparison is final.
            assert_eq!(
                (
                    &f.data,
                    &f.quant,
                    &f.select,
                    &f.budget,
                    &f.together,
                    &f.kivi
                ),
                (
                    &g.data,
                    &g.quant,
                    &g.select,
                    &g.budget,
                    &g.together,
                    &g.kivi
                ),
                "{}",
                s.to_query()
            );
            let changed = f.compare != g.compare || lab.compare().curves != direct.compare().curves;
            if changed {
                // Deferred: the earlier settings' comparison stays, marked pending.
                assert!(f.pending && lab.is_pending() && !f.kivi_pending);
                assert_eq!(f.compare, before.compare);
                assert_eq!(lab.compare().curves, before_curves);
                let mut rest = Vec::new();
                lab.complete_with_progress(&mut |st| rest.push(st)).unwrap();
                assert_eq!(rest, [Stage::Compare], "{}", s.to_query());
            } else {
                assert!(!f.pending && !lab.is_pending(), "{}", s.to_query());
            }
            assert!(!lab.is_pending() && !lab.figures().pending);
            assert_same_view(&lab, &direct, &s.to_query());
        }
        // The model changes neither the comparison nor its inputs: nothing was deferred.
        let mut lab = Lab::new(base.clone()).unwrap();
        let s = Settings {
            model: "qwen2.5-7b".into(),
            ..base.clone()
        };
        assert!(
            !lab.update_deferring(&s, &mut |_| {}, COMPARISON)
                .unwrap()
                .pending
        );
    }

    #[test]
    fn deferred_changes_add_up_and_a_plain_update_completes_them() {
        let mut lab = Lab::new(small()).unwrap();
        let b = Settings {
            budget: 9,
            ..small()
        };
        let both = Settings {
            recent: 2,
            ..b.clone()
        };
        lab.update_deferring(&b, &mut |_| {}, COMPARISON).unwrap();
        // A second deferred change on top of the first: still pending.
        assert!(
            lab.update_deferring(&both, &mut |_| {}, COMPARISON)
                .unwrap()
                .pending
        );
        // An ordinary update computes the comparison even if it changes nothing it depends on.
        let mut seen = Vec::new();
        lab.update_with_progress(&both, &mut |st| seen.push(st))
            .unwrap();
        assert_eq!(seen, [Stage::Compare]);
        assert_same_view(&lab, &Lab::new(both.clone()).unwrap(), &both.to_query());
        // A staged lab updated with deferral computes KIVI but not the comparison.
        let mut staged = Lab::new_staged_with_progress(small(), &mut |_| {}).unwrap();
        let f = staged
            .update_deferring(&b, &mut |_| {}, COMPARISON)
            .unwrap();
        assert!(f.pending && !f.kivi_pending);
        assert!(f.compare.rows.is_empty());
        staged.complete_with_progress(&mut |_| {}).unwrap();
        assert_same_view(&staged, &Lab::new(b.clone()).unwrap(), &b.to_query());
    }

    #[test]
    fn a_staged_lab_updated_before_completing_equals_a_new_lab() {
        let mut lab = Lab::new_staged_with_progress(small(), &mut |_| {}).unwrap();
        let s = Settings {
            bits: 3,
            budget: 9,
            ..small()
        };
        lab.update(&s).unwrap();
        assert!(!lab.is_pending());
        assert_same_view(&lab, &Lab::new(s.clone()).unwrap(), &s.to_query());
    }

    #[test]
    fn halving_budget_halves_kept_count() {
        let mut lab = Lab::new(small()).unwrap();
        assert_eq!(lab.figures().select.kept_count, 16);
        let s = Settings {
            budget: 8,
            ..small()
        };
        assert_eq!(lab.update(&s).unwrap().select.kept_count, 8);
    }

    /// An upload's refusals reach the page as the lab's errors, at the file control, with the
    /// upload's own words.
    #[test]
    fn upload_refusals_are_the_file_controls_errors() {
        use crate::upload::{Chosen, ChosenError, UploadError, Uploads};
        let mut up = Uploads::new();
        up.load("k.csv", b"1,2\n3,4\n").expect("keys");
        let choice = UploadChoice {
            keys: "nope.csv".into(),
            ..UploadChoice::default()
        };
        let e = up.choose(&choice).unwrap_err();
        assert!(matches!(e, UploadError::Missing { .. }));
        let lab = LabError::from(e.clone());
        assert_eq!((lab.field(), lab.to_string()), ("file", e.to_string()));
        let m = |r, c| Some(Matrix::new(r, c, vec![0.25; r * c]).unwrap());
        let e = Chosen::new(m(2, 4), m(3, 2), None, "d".into(), vec![]).unwrap_err();
        assert!(matches!(e, ChosenError::Tokens(_)));
        let lab = LabError::from(e.clone());
        assert_eq!((lab.field(), lab.to_string()), ("file", e.to_string()));
        let lab = LabError::from(ChosenError::Nothing);
        assert_eq!(lab.field(), "file");
    }

    #[test]
    fn both_levers_are_measured_by_the_attention_output_error() {
        let s = small();
        let lab = Lab::new(s.clone()).unwrap();
        let (a, v) = (&lab.data().attention, &lab.data().values);
        // The reference: policy::output_error's mean, with V quantized as section 2 says.
        let mean = |bits: u8, kept: &[usize]| {
            let cfg = QuantConfig {
                bits,
                ..quant_config(&s)
            };
            let hat = crate::quant::quantize(v, &cfg).unwrap().dequantize();
            let e = crate::policy::output_error(a, v, Some(&hat), kept).unwrap();
            e.iter().sum::<f64>() / e.len() as f64
        };
        let kept = lab.select().selection.kept.clone();
        let fewer = Lab::new(Settings {
            budget: 14, // floor(0.9 x 16)
            ..s.clone()
        })
        .unwrap()
        .select()
        .selection
        .kept
        .clone();
        let t = &lab.figures().together;
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-12 * y.abs().max(1.0);
        for (l, after) in [
            (&t.fewer_bits, mean(3, &kept)),
            (&t.fewer_tokens, mean(4, &fewer)),
        ] {
            assert!(close(l.quality_before, mean(4, &kept)), "{l:?}");
            assert!(close(l.quality_after, after), "{l:?} vs {after}");
            let saved = (l.bytes_before - l.bytes_after) as f64 / 1024.0;
            let per = (l.quality_after - l.quality_before) / saved;
            assert!(close(l.cost_per_kib.unwrap(), per));
        }
        let (b, k) = (t.fewer_bits.cost_per_kib, t.fewer_tokens.cost_per_kib);
        let cheaper = if b <= k {
            LeverChoice::Bits
        } else {
            LeverChoice::Tokens
        };
        assert_eq!(t.verdict, Some(cheaper));
        // At the scheme's fewest bits there is no bit lever, and no verdict.
        let two = Lab::new(Settings { bits: 2, ..s }).unwrap();
        let t = &two.figures().together;
        assert!(!t.fewer_bits.possible && t.fewer_bits.cost_per_kib.is_none());
        assert_eq!(t.verdict, None);
    }

    #[test]
    fn fewer_bits_raise_error_and_ratio() {
        let mut lab = Lab::new(Settings { bits: 8, ..small() }).unwrap();
        let e8 = lab.figures().quant.stats.max_abs;
        let r8 = lab.figures().quant.stats.compression_ratio;
        let f = lab.update(&Settings { bits: 4, ..small() }).unwrap();
        assert!(f.quant.stats.max_abs > e8);
        assert!(f.quant.stats.compression_ratio > r8);
        assert!(f.quant.element_bound_holds && f.quant.row_bound_holds);
    }

    #[test]
    fn a_bad_update_changes_nothing() {
        let mut lab = Lab::new(small()).unwrap();
        let before = lab.figures().clone();
        let e = lab
            .update(&Settings {
                budget: 65,
                ..small()
            })
            .unwrap_err();
        assert_eq!(e.field(), "budget");
        assert_eq!(
            e.to_string(),
            "budget 65 is out of range: must be at most tokens (64)"
        );
        assert_eq!(lab.figures(), &before);
        let e = lab.update(&Settings { bits: 1, ..small() }).unwrap_err();
        assert_eq!(e.field(), "bits");
        let e = lab
            .update(&Settings {
                group: 100,
                ..small()
            })
            .unwrap_err();
        assert_eq!(e.field(), "group");
        assert_eq!(lab.figures(), &before);
    }

    #[test]
    fn bits_do_not_change_the_selection() {
        let mut lab = Lab::new(small()).unwrap();
        let kept = lab.select().selection.kept.clone();
        lab.update(&Settings { bits: 3, ..small() }).unwrap();
        assert_eq!(lab.select().selection.kept, kept);
    }

    #[test]
    fn levers_and_budget_are_consistent() {
        let lab = Lab::new(small()).unwrap();
        let f = lab.figures();
        assert!(f.together.fewer_bits.bytes_after < f.together.fewer_bits.bytes_before);
        assert!(f.together.fewer_tokens.bytes_after < f.together.fewer_tokens.bytes_before);
        // Fewer tokens and fewer bits both raise the one error they are measured by.
        for l in [&f.together.fewer_bits, &f.together.fewer_tokens] {
            assert!(
                l.quality_after > l.quality_before && l.quality_before > 0.0,
                "{l:?}"
            );
            assert!(l.cost_per_kib.is_some_and(|c| c > 0.0), "{l:?}");
        }
        assert_eq!(f.budget.data.t_kept, 16);
        assert!(f.budget.extrapolated.m_final < f.budget.extrapolated.m_fp);
        assert_eq!(f.budget.model_name, "Llama-3-8B");
    }

    #[test]
    fn compare_holds_every_policy_and_the_oracle_bounds_mass() {
        let lab = Lab::new(Settings {
            recent: 0,
            ..small()
        })
        .unwrap();
        let c = &lab.figures().compare;
        assert_eq!(c.rows.len(), 7);
        assert_eq!(c.observed_rows + c.eval_rows, 16);
        let mass = |p: &str| {
            c.rows
                .iter()
                .find(|r| r.policy == p)
                .and_then(|r| r.quality)
                .unwrap()
                .mass_mean
        };
        for p in [
            "h2o-sum",
            "h2o-mean",
            "snapkv",
            "streaming-llm",
            "tova",
            "random",
        ] {
            assert!(mass("oracle") >= mass(p) - 1e-6, "oracle < {p}");
        }
        assert_eq!(lab.compare().curves.len(), 7);
        assert!(lab.compare().curves[0]
            .points
            .iter()
            .all(|p| p.r_overall.is_some()));
    }

    #[test]
    fn kivi_and_context_fit() {
        let lab = Lab::new(small()).unwrap();
        let k = &lab.figures().kivi;
        // 64 tokens, residual 128 >= T: everything stays fp16
        assert_eq!(k.bytes.keys.residual_tokens, 64);
        let mut lab = lab;
        let f = lab
            .update(&Settings {
                kivi_residual: 0,
                kivi_group: 8,
                ..small()
            })
            .unwrap();
        // 2 bits + (2 + 2) B x 8 bits / 8 = 6 bits per quantized key element
        assert_eq!(f.kivi.bytes.keys.quantized_bits, 6.0);
        assert!(f.kivi.key_error.rmse > 0.0);
        let b = &f.budget;
        assert!(
            b.context_fit > b.context_fit_fp,
            "compression fits more context"
        );
        // Llama-3-8B fp16: 128 KiB per token, 80 GiB -> 655,360 tokens
        assert_eq!(b.context_fit_fp, 655_360);
    }

    #[test]
    fn the_kivi_verdict_follows_its_numbers() {
        // The defaults (4 outlier channels): per-token has the lower RMSE and max error, and
        // per-channel the lower relative error per channel; the caption said per-channel won.
        let mut lab = Lab::new(small()).unwrap();
        let v = lab.figures().kivi.keys_verdict;
        let [pc, pt] = &lab.figures().kivi.keys_channel_vs_token;
        let lower = |c: f64, t: f64| if c < t { "channel" } else { "token" };
        assert_eq!(v.rmse, lower(pc.rmse, pt.rmse));
        assert_eq!(v.max_abs, lower(pc.max_abs, pt.max_abs));
        assert_eq!(
            v.relative,
            lower(pc.mean_channel_relative_rmse, pt.mean_channel_relative_rmse)
        );
        assert!(
            v.outliers,
            "the generator's outlier channels: ratio {}",
            v.outlier_ratio
        );
        // Without outlier channels the keys are said to have none.
        let f = lab
            .update(&Settings {
                outliers: 0,
                ..small()
            })
            .unwrap();
        let v = f.kivi.keys_verdict;
        assert!(!v.outliers && v.outlier_ratio < OUTLIER_RATIO, "{v:?}");
        let pcs = GranularitySummary {
            granularity: Granularity::PerChannel,
            rmse: 1.0,
            max_abs: 2.0,
            mean_channel_relative_rmse: 0.5,
        };
        let pts = GranularitySummary {
            granularity: Granularity::PerToken,
            rmse: 1.0,
            max_abs: 3.0,
            mean_channel_relative_rmse: 0.4,
        };
        let v = KeysVerdict::of(&pcs, &pts, &[1.0, 1.0, 1.0, 9.0]);
        assert_eq!((v.rmse, v.max_abs, v.relative), ("tie", "channel", "token"));
        assert_eq!((v.outlier_ratio, v.outliers), (9.0, true));
        let v = KeysVerdict::of(&pcs, &pts, &[2.0, 1.0, 3.0, 1.5]);
        assert_eq!((v.outlier_ratio, v.outliers), (2.0, false));
    }

    #[test]
    fn the_extrapolation_keeps_the_fraction_or_the_count_of_tokens() {
        use crate::budget::FitKind;
        use crate::state::KeepChoice;
        // B = 128 of T = 512 on the data; Llama-3-8B at 32,768 tokens.
        let at = |keep| {
            let lab = Lab::new(Settings {
                keep,
                ..Settings::default()
            })
            .unwrap();
            lab.figures().budget.clone()
        };
        let fraction = at(KeepChoice::Fraction);
        assert_eq!(fraction.kept_at_context, 8192); // a quarter of 32,768
        assert_eq!(fraction.extrapolated.t_kept, 8192);
        let tokens = at(KeepChoice::Tokens);
        assert_eq!(tokens.kept_at_context, 128);
        assert_eq!(tokens.extrapolated.t_kept, 128);
        assert!(tokens.extrapolated.m_final < fraction.extrapolated.m_final);
        // The kept tokens, their score state and their index list stay the same at any
        // length: any context fits (the search's limit was no answer).
        assert_eq!(
            (tokens.context_fit_kind, tokens.context_fit),
            (FitKind::Capped, 128)
        );
        assert_eq!(fraction.context_fit_kind, FitKind::Tokens);
        // A keep-mask grows with the context (a bit per token): a finite, longer context fits.
        let mask = Lab::new(Settings {
            keep: KeepChoice::Tokens,
            index: crate::state::IndexChoice::Mask,
            ..Settings::default()
        })
        .unwrap();
        let mask = &mask.figures().budget;
        assert_eq!(mask.context_fit_kind, FitKind::Tokens);
        assert!(mask.context_fit > 100 * fraction.context_fit);
        // A context shorter than B keeps all of it.
        let short = Lab::new(Settings {
            keep: KeepChoice::Tokens,
            context: 100,
            ..Settings::default()
        })
        .unwrap();
        assert_eq!(short.figures().budget.kept_at_context, 100);
        // The choice goes in the link.
        let s = Settings {
            keep: KeepChoice::Tokens,
            ..Settings::default()
        };
        assert_eq!(s.to_query(), "keep=tokens");
    }

    #[test]
    fn the_calculator_takes_the_largest_published_models() {
        // Custom models with full multi-head attention: LLaMA-65B (80 x 64 x 128) at 32k and
        // GPT-3 175B (96 x 96 x 128) were refused ("above 2^53 - 1 bytes") by the context
        // search probing 2^32 tokens; Llama-3.1-405B at 128k with a batch of 1,024 too.
        let custom = |layers, kv_heads, context, batch| Settings {
            model: "custom".into(),
            layers,
            kv_heads,
            head_dim: 128,
            context,
            batch,
            ..small()
        };
        let mut lab = Lab::new(small()).unwrap();
        for (s, gib_fp) in [
            (custom(80, 64, 32_768, 1), 80.0),
            (custom(96, 96, 32_768, 1), 144.0),
            (custom(126, 8, 131_072, 1024), 63.0 * 1024.0),
        ] {
            let b = &lab.update(&s).expect("a real model is counted").budget;
            assert_eq!(b.model_gib_fp, gib_fp);
            assert_eq!(b.context_fit_fp_kind, FitKind::Tokens);
            // 80 GiB hold 80 GiB / bytes per token (whole batch)
            let per_token = 2 * s.layers * s.kv_heads * 128 * 2 * s.batch;
            assert_eq!(b.context_fit_fp, (80u64 << 30) / per_token);
        }
    }

    #[test]
    fn a_model_whose_every_layer_slides_fits_any_context() {
        // Mistral-7B: 32 layers, all with a 4,096-token window. It printed "335,003,136 tokens
        // (uncompressed: 4,294,967,296)": the search's limit as a result, and an index counting
        // tokens the window had dropped, so compression seemed to fit less.
        let mut lab = Lab::new(small()).unwrap();
        let s = Settings {
            model: "mistral-7b-v0.1".into(),
            context: 32_768,
            ..small()
        };
        let b = lab.update(&s).unwrap().budget.clone();
        assert_eq!(b.model_name, "Mistral-7B-v0.1");
        for (kind, tokens) in [
            (b.context_fit_kind, b.context_fit),
            (b.context_fit_fp_kind, b.context_fit_fp),
        ] {
            assert_eq!((kind, tokens), (FitKind::AnyLength, 4096));
        }
        // The index holds the tokens the cache holds: at most the window per copy.
        let e = b.extrapolated;
        assert!(
            e.m_index <= b.selection_copies * 4096 * 4,
            "index {} for {} copies",
            e.m_index,
            b.selection_copies
        );
    }

    #[test]
    fn per_query_head_selection_copies_the_cache() {
        let mut lab = Lab::new(small()).unwrap();
        let kv = lab.figures().budget.extrapolated;
        let f = lab
            .update(&Settings {
                scope: Scope::QueryHead,
                ..small()
            })
            .unwrap();
        // Llama-3-8B: 32 query heads share 8 KV heads, so per-query-head selection holds 4 copies
        assert_eq!(f.budget.kv_copy_factor, 4);
        assert_eq!(f.budget.extrapolated.m_codes, 4 * kv.m_codes);
        assert_eq!(f.budget.extrapolated.m_fp, kv.m_fp);
        assert!(f.budget.extrapolated.r_overall < kv.r_overall);
    }

    #[test]
    fn out_of_range_settings_are_refused_not_panicked_on() {
        let mut lab = Lab::new(small()).unwrap();
        let before = lab.figures().clone();
        for bad in [
            Settings {
                context: 0,
                ..small()
            },
            Settings {
                batch: 0,
                ..small()
            },
            Settings {
                kernel: 4,
                ..small()
            },
            Settings {
                memory_gib: 0,
                ..small()
            },
            Settings {
                steps: 0,
                ..small()
            },
            Settings {
                fp_bytes: 3,
                ..small()
            },
            Settings {
                lang: "fr".into(),
                ..small()
            },
        ] {
            let e = lab.update(&bad).unwrap_err();
            assert!(
                e.to_string().contains("out of range")
                    || e.to_string().contains("not one of")
                    || e.to_string().contains("even"),
                "{e}"
            );
            assert_eq!(lab.figures(), &before);
        }
        assert_eq!(
            lab.update(&Settings {
                context: 0,
                ..small()
            })
            .unwrap_err()
            .field(),
            "context"
        );
    }

    #[test]
    fn compact_ranges_compress_runs() {
        assert_eq!(compact_ranges(&[0, 1, 2, 3, 17, 30, 31]), "0-3,17,30-31");
        assert_eq!(compact_ranges(&[]), "");
    }

    #[test]
    fn exports_hold_the_selection() {
        let lab = Lab::new(small()).unwrap();
        let csv = lab.export_csv();
        assert_eq!(csv.lines().filter(|l| l.contains(",1,")).count(), 16);
        let json = lab.export_json();
        assert!(json.contains("\"kept\""));
        // Each compared policy's kept set, as the comparison selected it.
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let policies = v["policies"].as_array().unwrap();
        assert_eq!(policies.len(), lab.compare().selections.len());
        assert!(policies.len() >= 2);
        for (row, (p, sel)) in policies.iter().zip(&lab.compare().selections) {
            assert_eq!(row["policy"], p.name());
            let want = sel
                .as_ref()
                .map_or_else(String::new, |x| compact_ranges(&x.kept));
            assert_eq!(row["kept_ranges"], want.as_str());
        }
        assert!(policies
            .iter()
            .any(|r| !r["kept_ranges"].as_str().unwrap().is_empty()));
    }
}
