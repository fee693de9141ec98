//! KIVI, in section 2: keys per channel and values per token, with a full-precision
//! residual window, and its bytes against the plain schemes.

use super::*;
use crate::kivi::{
    channel_vs_token_error, kivi_quantize, KiviBytes, KiviConfig, StreamBytes, TensorError,
};
use crate::quant::Granularity;
use crate::state::Settings;
use serde::Serialize;

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

/// The KIVI settings, with the group fitted to the data (at most `T` tokens per key group and
/// `d` channels per value group): the panel shows the group it used.
pub(super) fn kivi_config(s: &Settings, data: &Data) -> KiviConfig {
    KiviConfig {
        key_bits: s.kivi_kbits,
        key_group: s.kivi_group.min(data.keys.rows()).max(1),
        value_bits: s.kivi_vbits,
        value_group: s.kivi_group.min(data.values.cols()).max(1),
        residual: s.kivi_residual,
        meta: s.meta,
    }
}

pub(super) fn kivi_figures(data: &Data, s: &Settings) -> Result<KiviFigures, LabError> {
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
pub(super) fn pending_kivi(config: KiviConfig) -> KiviFigures {
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
