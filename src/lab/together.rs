//! Section 4, both levers together: the overall ratio and which lever to pull first, both
//! measured by the attention output's error.

use super::*;
use crate::quant::QuantConfig;
use crate::state::{KvPick, Settings};
use crate::Matrix;
use serde::Serialize;

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
pub(super) struct LeverKey {
    pub(super) config: QuantConfig,
    pub(super) select: SelectKey,
}

impl LeverKey {
    pub(super) fn of(s: &Settings) -> Self {
        Self {
            config: quant_config(s),
            select: SelectKey::of(s),
        }
    }
}

/// The levers' output errors ([`LeverErrors`]) for `s`, `select` (its kept sets at `B` and
/// `floor(0.9 B)`) on `data`; `memo` holds the exact outputs and V's extremes.
pub(super) fn lever_errors(
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

pub(super) fn together(
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
