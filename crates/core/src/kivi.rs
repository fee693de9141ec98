//! KIVI-style mixed precision (issue 5, "Mixed precision (KIVI style)"; Liu et al. 2024, *KIVI: A
//! Tuning-Free Asymmetric 2bit Quantization for KV Cache*), built on the note's asymmetric
//! quantizer (note §2.3, math-spec §2: [`quant::quantize`]) and its byte accounting (note §2.4,
//! math-spec §1).
//!
//! * **Keys per channel**: each channel `j` is split into runs of `G_k = key_group` tokens, each
//!   run with its own `(scale, zero_point)`. Keys have a few outlier channels (KIVI, KVQuant); a
//!   per-channel grid confines each outlier to its own channel ([`channel_vs_token_error`]).
//! * **Values per token**: each token is split into runs of `G_v = value_group` channels.
//! * **Asymmetric**, `scale = (max - min) / (2^b - 1)`, `zp = round(-min / scale)`. KIVI stores
//!   scale and min in fp16; we store scale and zero point: the same bytes.
//! * **Full-precision residual**: the `R = residual` most recent tokens stay in fp16.
//!
//! # Which tokens are quantized (the remainder rule)
//!
//! Of `T` tokens, the first `n_v = max(T - R, 0)` are candidates. Values are quantized per token,
//! so all `n_v` are quantized and exactly `min(R, T)` stay in fp16. Keys are grouped along tokens,
//! and KIVI quantizes a key group only once it is full: the first
//! `n_k = floor(n_v / G_k) * G_k` tokens are quantized and the other `T - n_k` (the residual plus
//! the `n_v mod G_k` tokens of the unfinished group) stay in fp16. A value group whose run of
//! channels is cut by `d_v` (when `G_v` does not divide `d_v`) is quantized as a shorter group.
//!
//! # Bytes (bit-packed codes, [`quant::packed_code_bytes`], [`quant::metadata_bytes`])
//!
//! ```text
//! keys:   codes = ceil(n_k d_k b_k / 8)   groups = d_k n_k / G_k     residual = (T - n_k) d_k 2
//! values: codes = ceil(n_v d_v b_v / 8)   groups = n_v ceil(d_v/G_v) residual = (T - n_v) d_v 2
//! scales = zero points = groups x meta bytes (2 for fp16)
//! effective bits = 8 x total bytes / elements
//! ```
//!
//! On the quantized part alone that is `b + 2 x 16 / G` bits per element with fp16 metadata
//! (2 bits, group 32 -> 3 bits), [`budget::effective_bits`].
//!
//! [`quant::quantize`]: crate::quant::quantize
//! [`quant::packed_code_bytes`]: crate::quant::packed_code_bytes
//! [`quant::metadata_bytes`]: crate::quant::metadata_bytes
//! [`budget::effective_bits`]: crate::budget::effective_bits

use crate::budget::{Compression, QuantAccounting};
use crate::quant::{
    error_stats, metadata_bytes, packed_code_bytes, quantize, ErrorStats, Granularity, MetaDtype,
    QuantConfig, QuantError, Scheme,
};
use crate::{Matrix, ShapeError};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Bytes of one full-precision (fp16) residual element.
pub const RESIDUAL_BYTES: u64 = 2;

/// Why a KIVI quantization or accounting was refused. Every message names the bad value and the
/// valid range.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum KiviError {
    /// Bits outside `1..=16` (the asymmetric range). KIVI uses 2; if unsure use 4.
    #[error("{which} bits {bits} is out of range: must be between 1 and 16 (asymmetric quantization; KIVI uses 2)")]
    Bits {
        /// `"key"` or `"value"`.
        which: &'static str,
        /// Bits asked for.
        bits: u8,
    },
    /// Key group of 0 tokens.
    #[error("key group {group} is out of range: must be at least 1 token (KIVI uses 32 to 128)")]
    KeyGroup {
        /// Group asked for.
        group: usize,
    },
    /// Value group of 0 channels or more than the value channels.
    #[error("value group {group} is out of range: must be between 1 and {channels} (the value channels; KIVI uses 32 to 128)")]
    ValueGroup {
        /// Group asked for.
        group: usize,
        /// Value channels `d_v`.
        channels: usize,
    },
    /// Group of [`channel_vs_token_error`] that one of the two granularities cannot use.
    #[error("group {group} is out of range: must be between 1 and {max} (the smaller of tokens and channels, so both granularities can use it)")]
    Group {
        /// Group asked for.
        group: usize,
        /// `min(T, d)`.
        max: usize,
    },
    /// Keys and values disagree on the number of tokens.
    #[error(
        "keys have {keys} tokens but values have {values}: K and V need the same number of tokens"
    )]
    Tokens {
        /// Key rows.
        keys: usize,
        /// Value rows.
        values: usize,
    },
    /// A dimension of [`kivi_bytes`] is zero.
    #[error("{field} {value} is out of range: must be at least 1")]
    Dimension {
        /// `"tokens"`, `"key channels"` or `"value channels"`.
        field: &'static str,
        /// The value given.
        value: usize,
    },
    /// A key or value is NaN or infinite.
    #[error("{which} at row {row}, column {col} is {value}: quantization needs finite numbers")]
    NonFinite {
        /// `"keys"` or `"values"`.
        which: &'static str,
        /// Row (token) of the first bad value.
        row: usize,
        /// Column (channel) of the first bad value.
        col: usize,
        /// The value.
        value: f32,
    },
    /// A byte count does not fit in 64 bits.
    #[error("the byte count overflows 64 bits: reduce tokens or channels")]
    Overflow,
    /// The quantizer refused a group (e.g. a range whose scale overflows `f32`).
    #[error(transparent)]
    Quant(#[from] QuantError),
    /// A sub-matrix could not be built (cannot happen for valid inputs; kept for totality).
    #[error(transparent)]
    Shape(#[from] ShapeError),
}

/// KIVI's settings: bits and group of each stream, the fp16 residual, the metadata dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KiviConfig {
    /// Key bits `b_k`, `1..=16` (KIVI-2: 2, KIVI-4: 4).
    pub key_bits: u8,
    /// Key group `G_k`: tokens per `(scale, zero_point)` of a channel, `>= 1` (KIVI: 32..128).
    pub key_group: usize,
    /// Value bits `b_v`, `1..=16`.
    pub value_bits: u8,
    /// Value group `G_v`: channels per `(scale, zero_point)` of a token, `1..=d_v`.
    pub value_group: usize,
    /// Residual `R`: the most recent tokens kept in fp16, `>= 0` (KIVI: 32..128).
    pub residual: usize,
    /// Dtype of the stored scales and zero points (fp16 in KIVI).
    pub meta: MetaDtype,
}

impl Default for KiviConfig {
    /// KIVI-2 as in the paper: 2 bits, groups of 32, a residual of 128 tokens, fp16 metadata.
    fn default() -> Self {
        Self {
            key_bits: 2,
            key_group: 32,
            value_bits: 2,
            value_group: 32,
            residual: 128,
            meta: MetaDtype::F16,
        }
    }
}

impl KiviConfig {
    /// The quantizer config of the keys: asymmetric, per channel, groups of `key_group` tokens.
    pub fn key_quant(&self) -> QuantConfig {
        QuantConfig {
            bits: self.key_bits,
            scheme: Scheme::Asymmetric,
            granularity: Granularity::PerChannel,
            group_size: Some(self.key_group),
        }
    }

    /// The quantizer config of the values: asymmetric, per token, groups of `value_group`
    /// channels.
    pub fn value_quant(&self) -> QuantConfig {
        QuantConfig {
            bits: self.value_bits,
            scheme: Scheme::Asymmetric,
            granularity: Granularity::PerToken,
            group_size: Some(self.value_group),
        }
    }

    /// `(n_k, n_v)`: how many of `tokens` leading tokens have quantized keys and values, by the
    /// module's remainder rule: `n_v = max(T - R, 0)`, `n_k = floor(n_v / G_k) * G_k`.
    ///
    /// ```
    /// use kvlab_core::kivi::KiviConfig;
    /// let c = KiviConfig { key_group: 4, residual: 2, ..KiviConfig::default() };
    /// assert_eq!(c.quantized_tokens(11), (8, 9)); // keys: 2 full groups; 3 key tokens stay fp16
    /// assert_eq!(c.quantized_tokens(2), (0, 0));
    /// ```
    pub fn quantized_tokens(&self, tokens: usize) -> (usize, usize) {
        let n_v = tokens.saturating_sub(self.residual);
        let g = self.key_group.max(1);
        ((n_v / g) * g, n_v)
    }

    /// The byte-accounting inputs of `budget::breakdown` for a model cache under this config, at
    /// `t_kept` of `t_total` tokens: K per channel and V per token, asymmetric, with this config's
    /// groups, metadata dtype and residual; nothing else compressed.
    ///
    /// The model-level breakdown keeps `residual` tokens of both K and V in fp16 and counts a
    /// partial last key group as a group of its own, where [`kivi_quantize`] keeps those (fewer
    /// than `G_k`) key tokens in fp16: at model scale the two differ by under `G_k` tokens per
    /// layer.
    pub fn compression(&self, t_total: u64, t_kept: u64) -> Compression {
        let acc = |q: QuantConfig| QuantAccounting {
            bits: q.bits,
            scheme: q.scheme,
            granularity: q.granularity,
            group_size: q.group_size.map(|g| g as u64),
            meta: self.meta,
        };
        Compression {
            t_total,
            t_kept,
            k: Some(acc(self.key_quant())),
            v: Some(acc(self.value_quant())),
            residual: self.residual as u64,
            ..Compression::none(t_total)
        }
    }

    fn validate(&self, value_channels: usize) -> Result<(), KiviError> {
        for (which, bits) in [("key", self.key_bits), ("value", self.value_bits)] {
            if !(1..=16).contains(&bits) {
                return Err(KiviError::Bits { which, bits });
            }
        }
        if self.key_group == 0 {
            return Err(KiviError::KeyGroup { group: 0 });
        }
        if self.value_group == 0 || self.value_group > value_channels {
            return Err(KiviError::ValueGroup {
                group: self.value_group,
                channels: value_channels,
            });
        }
        Ok(())
    }
}

/// Bytes of one stream (K or V) under KIVI.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StreamBytes {
    /// Tokens quantized (`n_k` or `n_v`).
    pub quantized_tokens: usize,
    /// Tokens kept in fp16 (`T - n_k` or `T - n_v`).
    pub residual_tokens: usize,
    /// Channels `d` of the stream.
    pub channels: usize,
    /// Stored `(scale, zero_point)` pairs: `d_k n_k / G_k` (keys), `n_v ceil(d_v / G_v)`
    /// (values).
    pub groups: u64,
    /// Bit-packed codes: `ceil(n d b / 8)` bytes.
    pub codes: u64,
    /// Scales: `groups x meta bytes`.
    pub scales: u64,
    /// Zero points (KIVI: mins): `groups x meta bytes`.
    pub zero_points: u64,
    /// fp16 residual: `residual_tokens x d x 2` bytes.
    pub residual: u64,
    /// `codes + scales + zero_points + residual`.
    pub total: u64,
    /// `8 x total / (T d)`: bits per element of the whole stream, residual included.
    pub effective_bits: f64,
    /// `8 x (codes + scales + zero_points) / (n d)`: bits per element of the quantized part
    /// (`budget::effective_bits` when the groups are full); 0 when nothing is quantized.
    pub quantized_bits: f64,
}

/// Bytes of a KIVI cache of K and V, against fp16.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KiviBytes {
    /// Keys.
    pub keys: StreamBytes,
    /// Values.
    pub values: StreamBytes,
    /// `keys.total + values.total`.
    pub total: u64,
    /// The same tokens in fp16: `T (d_k + d_v) x 2` bytes.
    pub fp16: u64,
    /// `8 x total / (T (d_k + d_v))`.
    pub effective_bits: f64,
    /// `fp16 / total`.
    pub compression_ratio: f64,
}

fn stream_bytes(
    tokens: usize,
    channels: usize,
    quantized: usize,
    groups: u64,
    bits: u8,
    meta: MetaDtype,
) -> Result<StreamBytes, KiviError> {
    let mul = |a: u64, b: u64| a.checked_mul(b).ok_or(KiviError::Overflow);
    let n = mul(quantized as u64, channels as u64)?;
    let codes = packed_code_bytes(n, bits);
    let scales = metadata_bytes(groups, Scheme::Symmetric, meta);
    let zero_points = metadata_bytes(groups, Scheme::Asymmetric, meta).saturating_sub(scales);
    let residual_tokens = tokens - quantized.min(tokens);
    let residual = mul(
        mul(residual_tokens as u64, channels as u64)?,
        RESIDUAL_BYTES,
    )?;
    let total = [codes, scales, zero_points, residual]
        .iter()
        .try_fold(0u64, |a, &x| a.checked_add(x))
        .ok_or(KiviError::Overflow)?;
    let elements = mul(tokens as u64, channels as u64)?;
    Ok(StreamBytes {
        quantized_tokens: quantized,
        residual_tokens,
        channels,
        groups,
        codes,
        scales,
        zero_points,
        residual,
        total,
        effective_bits: 8.0 * total as f64 / elements.max(1) as f64,
        quantized_bits: if n == 0 {
            0.0
        } else {
            8.0 * (codes + scales + zero_points) as f64 / n as f64
        },
    })
}

/// The byte accounting of `tokens` tokens of keys (`key_channels` wide) and values
/// (`value_channels` wide) under `cfg`, without data (see the module docs for the formulas).
///
/// Errors: a zero dimension, bits outside `1..=16`, `key_group` 0, `value_group` outside
/// `1..=value_channels`, a count that overflows 64 bits.
///
/// ```
/// use kvlab_core::kivi::{kivi_bytes, KiviConfig};
/// // KIVI-2 on 4096 + 128 tokens of d = 128: the quantized part costs 2 + 32/32 = 3 bits
/// let b = kivi_bytes(4224, 128, 128, &KiviConfig::default()).unwrap();
/// assert_eq!(b.keys.quantized_bits, 3.0);
/// assert_eq!(b.keys.residual_tokens, 128);
/// assert_eq!(b.keys.codes, 4096 * 128 * 2 / 8);
/// ```
pub fn kivi_bytes(
    tokens: usize,
    key_channels: usize,
    value_channels: usize,
    cfg: &KiviConfig,
) -> Result<KiviBytes, KiviError> {
    for (field, value) in [
        ("tokens", tokens),
        ("key channels", key_channels),
        ("value channels", value_channels),
    ] {
        if value == 0 {
            return Err(KiviError::Dimension { field, value });
        }
    }
    cfg.validate(value_channels)?;
    let (n_k, n_v) = cfg.quantized_tokens(tokens);
    let key_groups = (key_channels as u64)
        .checked_mul((n_k / cfg.key_group) as u64)
        .ok_or(KiviError::Overflow)?;
    let value_groups = (n_v as u64)
        .checked_mul(value_channels.div_ceil(cfg.value_group) as u64)
        .ok_or(KiviError::Overflow)?;
    let keys = stream_bytes(
        tokens,
        key_channels,
        n_k,
        key_groups,
        cfg.key_bits,
        cfg.meta,
    )?;
    let values = stream_bytes(
        tokens,
        value_channels,
        n_v,
        value_groups,
        cfg.value_bits,
        cfg.meta,
    )?;
    let total = keys
        .total
        .checked_add(values.total)
        .ok_or(KiviError::Overflow)?;
    let elements = key_channels
        .checked_add(value_channels)
        .and_then(|d| (tokens as u64).checked_mul(d as u64))
        .ok_or(KiviError::Overflow)?;
    let fp16 = elements
        .checked_mul(RESIDUAL_BYTES)
        .ok_or(KiviError::Overflow)?;
    Ok(KiviBytes {
        keys,
        values,
        total,
        fp16,
        effective_bits: 8.0 * total as f64 / elements.max(1) as f64,
        compression_ratio: fp16 as f64 / total.max(1) as f64,
    })
}

/// Error of a reconstructed tensor against the original, over all its elements.
///
/// The sums are `f64` in a fixed order (the same bits on every target): element `i` of the
/// row-major data goes to lane `i % 8`, each lane adds in index order, and the lanes are combined
/// as `((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TensorError {
    /// `max |x - x_hat|`.
    pub max_abs: f64,
    /// `mean |x - x_hat|`.
    pub mean_abs: f64,
    /// `sqrt(mean (x - x_hat)^2)`.
    pub rmse: f64,
    /// `10 log10(||x||^2 / ||x - x_hat||^2)` dB; `+inf` when exact (`null` in JSON).
    pub snr_db: f64,
}

/// The error of `hat` against `x`, flat row-major slices of equal length. The sums are
/// `f64`, element `i` in lane `i % 8`, each lane in index order, the lanes combined as
/// `((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))` (a fixed order: the same bits on every
/// target).
fn tensor_error(x: &[f32], hat: &[f32]) -> TensorError {
    let (max_abs, sum_abs, sum_sq, sig) = crate::quant::flat_error_sums(x, hat);
    let n = x.len().max(1) as f64;
    TensorError {
        max_abs,
        mean_abs: sum_abs / n,
        rmse: (sum_sq / n).sqrt(),
        snr_db: if sum_sq == 0.0 {
            f64::INFINITY
        } else {
            10.0 * (sig / sum_sq).log10()
        },
    }
}

/// What [`kivi_quantize`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct KiviResult {
    /// De-quantized keys (`T x d_k`): the first `n_k` rows de-quantized, the rest exact.
    pub keys_hat: Matrix,
    /// De-quantized values (`T x d_v`): the first `n_v` rows de-quantized, the rest exact.
    pub values_hat: Matrix,
    /// Key error over all `T x d_k` elements (fp16 residual rows count as exact).
    pub key_error: TensorError,
    /// Value error over all `T x d_v` elements.
    pub value_error: TensorError,
    /// [`quant::try_error_stats`](crate::quant::try_error_stats) of the quantized keys alone
    /// (bound use, expected MSE, ratio); `None` when no key is quantized.
    pub key_stats: Option<ErrorStats>,
    /// The same for the quantized values; `None` when no value is quantized.
    pub value_stats: Option<ErrorStats>,
    /// The byte accounting ([`kivi_bytes`]).
    pub bytes: KiviBytes,
}

fn check_finite(m: &Matrix, which: &'static str) -> Result<(), KiviError> {
    // A straight pass first (it vectorises; finding the first bad value does not).
    let finite = m
        .data()
        .chunks(4096)
        .all(|c| c.iter().fold(true, |ok, v| ok & v.is_finite()));
    if finite {
        return Ok(());
    }
    match m.first_non_finite() {
        Some((row, col)) => Err(KiviError::NonFinite {
            which,
            row,
            col,
            value: m.get(row, col).unwrap_or(f32::NAN),
        }),
        None => Ok(()),
    }
}

/// Quantizes the first `n` rows of `x` with `q`, keeps the rest exact: `(x_hat, stats)`. The
/// head is quantized in place (no copy) and `x_hat` is built once at its full size.
fn quantize_head(
    x: &Matrix,
    n: usize,
    q: &QuantConfig,
    meta: MetaDtype,
) -> Result<(Matrix, Option<ErrorStats>), KiviError> {
    if n == 0 {
        return Ok((x.clone(), None));
    }
    let quantized = crate::quant::quantize_head(x, n, q)?;
    let stats = crate::quant::try_error_stats_head(x, n, &quantized, RESIDUAL_BYTES, meta).ok();
    let mut data = Vec::with_capacity(x.data().len());
    quantized.for_each_dequantized_row(|_, row| data.extend_from_slice(row));
    let tail = x.data().get(data.len()..).unwrap_or(&[]);
    data.extend_from_slice(tail);
    Ok((Matrix::new(x.rows(), x.cols(), data)?, stats))
}

/// KIVI: keys per channel and values per token, asymmetric, each with its own bits and group,
/// the most recent `cfg.residual` tokens in fp16 (see the module docs for which tokens are
/// quantized and the byte formulas).
///
/// `keys` is `T x d_k`, `values` is `T x d_v` (the same `T`), finite.
///
/// ```
/// use kvlab_core::{Matrix, kivi::{kivi_quantize, KiviConfig}};
/// let k = Matrix::new(4, 1, vec![0.0, 1.0, 2.0, 3.0]).unwrap();
/// let v = Matrix::new(4, 2, vec![0.0, 3.0, 1.0, 2.0, 5.0, 5.0, 7.0, 1.0]).unwrap();
/// let cfg = KiviConfig { key_bits: 2, key_group: 2, value_bits: 2, value_group: 2,
///                        residual: 1, ..KiviConfig::default() };
/// let r = kivi_quantize(&k, &v, &cfg).unwrap();
/// // keys: 3 candidates, one full group of 2 quantized, tokens 2 and 3 exact in fp16
/// assert_eq!(r.bytes.keys.quantized_tokens, 2);
/// assert_eq!(r.keys_hat.data(), &[0.0, 1.0, 2.0, 3.0]);
/// // values: 3 tokens quantized, the last row exact
/// assert_eq!(r.values_hat.row(3), Some(&[7.0, 1.0][..]));
/// ```
pub fn kivi_quantize(
    keys: &Matrix,
    values: &Matrix,
    cfg: &KiviConfig,
) -> Result<KiviResult, KiviError> {
    if keys.rows() != values.rows() {
        return Err(KiviError::Tokens {
            keys: keys.rows(),
            values: values.rows(),
        });
    }
    let bytes = kivi_bytes(keys.rows(), keys.cols(), values.cols(), cfg)?;
    check_finite(keys, "keys")?;
    check_finite(values, "values")?;
    let (n_k, n_v) = cfg.quantized_tokens(keys.rows());
    let (keys_hat, key_stats) = quantize_head(keys, n_k, &cfg.key_quant(), cfg.meta)?;
    let (values_hat, value_stats) = quantize_head(values, n_v, &cfg.value_quant(), cfg.meta)?;
    Ok(KiviResult {
        key_error: tensor_error(keys.data(), keys_hat.data()),
        value_error: tensor_error(values.data(), values_hat.data()),
        keys_hat,
        values_hat,
        key_stats,
        value_stats,
        bytes,
    })
}

/// One side of [`ChannelVsToken`]: the error of one granularity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GranularityError {
    /// The granularity.
    pub granularity: Granularity,
    /// `sqrt(mean (x - x_hat)^2)` over all elements.
    pub rmse: f64,
    /// `max |x - x_hat|`.
    pub max_abs: f64,
    /// `mean |x - x_hat|`.
    pub mean_abs: f64,
    /// SNR in dB (`+inf` when exact).
    pub snr_db: f64,
    /// Stored `(scale, zero_point)` pairs.
    pub groups: u64,
    /// Bits per element with the fp16 metadata counted: `b + 32 x groups / (T d)`.
    pub effective_bits: f64,
    /// RMSE of each channel `j` over the tokens (length `d`): where the error lands.
    pub channel_rmse: Vec<f64>,
    /// Each channel's RMSE relative to its own size, `rmse_j / sqrt(mean_t x[t][j]^2)`
    /// (`0/0 = 0`, `x/0 = +inf`), length `d`: 1 means the channel is lost.
    pub channel_relative_rmse: Vec<f64>,
    /// Mean of `channel_relative_rmse` over the channels: how well a typical channel survives,
    /// whatever its magnitude.
    pub mean_channel_relative_rmse: f64,
}

/// Per-channel vs per-token quantization of the same keys, side by side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChannelVsToken {
    /// Per channel (KIVI's choice for keys).
    pub per_channel: GranularityError,
    /// Per token.
    pub per_token: GranularityError,
}

fn granularity_error(
    keys: &Matrix,
    bits: u8,
    granularity: Granularity,
    group: Option<usize>,
) -> Result<GranularityError, KiviError> {
    let cfg = QuantConfig {
        bits,
        scheme: Scheme::Asymmetric,
        granularity,
        group_size: group,
    };
    let q = quantize(keys, &cfg)?;
    let st = error_stats(keys, &q);
    let d = keys.cols();
    let mut sq = vec![0f64; d];
    let mut sig = vec![0f64; d];
    // Per channel, over the tokens in order; x_hat row by row (no T x d copy).
    let mut rows = keys.iter_rows();
    q.for_each_dequantized_row(|_, hrow| {
        let row = rows.next().unwrap_or(&[]);
        for (((s, g), &x), &h) in sq.iter_mut().zip(sig.iter_mut()).zip(row).zip(hrow) {
            let e = f64::from(x) - f64::from(h);
            *s += e * e;
            *g += f64::from(x) * f64::from(x);
        }
    });
    let t = keys.rows().max(1) as f64;
    let channel_relative_rmse: Vec<f64> = sq
        .iter()
        .zip(&sig)
        .map(|(&e, &x)| {
            if x > 0.0 {
                (e / x).sqrt()
            } else if e == 0.0 {
                0.0
            } else {
                f64::INFINITY
            }
        })
        .collect();
    let groups = q.scales().len() as u64;
    let n = keys.data().len().max(1) as f64;
    Ok(GranularityError {
        granularity,
        rmse: st.rmse,
        max_abs: st.max_abs,
        mean_abs: st.mean_abs,
        snr_db: st.snr_db,
        groups,
        effective_bits: f64::from(bits)
            + (metadata_bytes(groups, Scheme::Asymmetric, MetaDtype::F16) * 8) as f64 / n,
        channel_rmse: sq.into_iter().map(|s| (s / t).sqrt()).collect(),
        mean_channel_relative_rmse: channel_relative_rmse.iter().sum::<f64>()
            / channel_relative_rmse.len().max(1) as f64,
        channel_relative_rmse,
    })
}

/// Quantizes `keys` (`T x d`) asymmetrically at `bits` per channel and per token, with runs of
/// `group` (tokens per channel group, channels per token group; `None` = the whole axis), and
/// reports both errors side by side: RMSE, max, and each channel's error absolute and relative
/// to its own size.
///
/// Why per channel suits keys: keys have a few outlier channels (KIVI, KVQuant;
/// [`crate::synth::keys`] with `outlier_channels > 0`). A per-token grid must stretch over each
/// token's outlier value, so at low bits every ordinary channel of that token falls between two
/// grid points and is lost; a per-channel grid confines the outlier to its own channel. What the
/// figures show on synth keys (4 outlier channels at 10x, 128 x 64):
///
/// * the typical channel's relative error (`mean_channel_relative_rmse`) is 2-10x lower per
///   channel at 2..=8 bits (2 bits: 0.41 vs 0.85 with groups of 32); at 1 bit both lose every
///   channel (about 0.96);
/// * the absolute RMSE, which the few outlier channels dominate, is lower per channel from 3-4
///   bits up; at 2 bits per token can be lower, because the outlier channels' own per-channel
///   range spans all their tokens;
/// * the max error is lower per token: it sits on an outlier channel, whose per-channel scale
///   covers that channel's whole range, while a token's grid spans only one outlier value.
///
/// `bits` in `1..=16`; `group` in `1..=min(T, d)` (so both granularities use the same group
/// size and, when it divides both, the same metadata).
///
/// ```
/// use kvlab_core::{kivi::channel_vs_token_error, synth::{keys, KvSpec}};
/// let k = keys(&KvSpec { outlier_channels: 4, outlier_scale: 10.0, ..KvSpec::default() }).unwrap();
/// let c = channel_vs_token_error(&k, 2, Some(32)).unwrap();
/// assert!(c.per_channel.mean_channel_relative_rmse < 0.5 * c.per_token.mean_channel_relative_rmse);
/// let c = channel_vs_token_error(&k, 4, Some(32)).unwrap();
/// assert!(c.per_channel.rmse < c.per_token.rmse);
/// ```
pub fn channel_vs_token_error(
    keys: &Matrix,
    bits: u8,
    group: Option<usize>,
) -> Result<ChannelVsToken, KiviError> {
    if !(1..=16).contains(&bits) {
        return Err(KiviError::Bits { which: "key", bits });
    }
    if let Some(g) = group {
        let max = keys.rows().min(keys.cols());
        if g == 0 || g > max {
            return Err(KiviError::Group { group: g, max });
        }
    }
    check_finite(keys, "keys")?;
    Ok(ChannelVsToken {
        per_channel: granularity_error(keys, bits, Granularity::PerChannel, group)?,
        per_token: granularity_error(keys, bits, Granularity::PerToken, group)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remainder_rule() {
        let c = KiviConfig {
            key_group: 4,
            residual: 2,
            ..KiviConfig::default()
        };
        assert_eq!(c.quantized_tokens(10), (8, 8));
        assert_eq!(c.quantized_tokens(13), (8, 11));
        assert_eq!(c.quantized_tokens(0), (0, 0));
    }

    #[test]
    fn tensor_error_edge_cases() {
        let e = tensor_error(&[1.0, 2.0], &[1.0, 2.0]);
        assert_eq!(e.rmse, 0.0);
        assert!(e.snr_db.is_infinite());
        let e = tensor_error(&[0.0, 0.0], &[0.0, 1.0]);
        assert_eq!(e.max_abs, 1.0);
        assert_eq!(e.snr_db, f64::NEG_INFINITY);
    }
}
