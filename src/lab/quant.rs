//! Section 2, quantization: the chosen tensor quantized under the settings, its error
//! statistics, the group the formulas show, and the keys' verdict on granularity.

use super::*;
use crate::quant::{ErrorStats, Granularity, GroupError, QuantConfig, Quantized, RowError};
use crate::state::{KvPick, Settings};
use crate::Matrix;
use serde::Serialize;
use std::sync::Arc;

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

/// The quantization result the charts draw.
#[derive(Debug, Clone)]
pub struct QuantView {
    pub(super) key: QuantKey,
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
    pub(super) group_values: Vec<f32>,
    /// The shown group's grid.
    pub group_grid: Vec<f64>,
    /// The figures.
    pub figures: QuantFigures,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct QuantKey {
    pub(super) config: QuantConfig,
    pub(super) tensor: KvPick,
    pub(super) channel: Option<usize>,
    pub(super) meta: crate::quant::MetaDtype,
}

/// The tensor-sized buffers of a [`QuantView`] (codes, `|x - x_hat|`, per-row errors). The lab
/// keeps the last replaced view's set and quantizes into it, so moving a quantization control
/// allocates none of them (at 32,768 x 128 each of the first two is 16 MiB: allocated afresh,
/// the system hands the pages back and faults them in again on every change).
#[derive(Debug, Default)]
pub(super) struct QuantBuffers {
    pub(super) codes: Vec<i32>,
    pub(super) abs_err: Vec<f32>,
    pub(super) rows: Vec<RowError>,
}

/// The quantization view an update replaced, with the identity of the data it was computed
/// on ([`Lab::data_id`]). A change back to it (toggling the scheme, a bits step back) shows it
/// again without quantizing; any other quantization change fills its buffers
/// ([`QuantBuffers`]). It costs no memory the lab would not hold anyway: the buffers are
/// the spare set a new view is computed into.
#[derive(Debug, Default)]
pub(super) struct Previous {
    pub(super) view: Option<QuantView>,
    pub(super) data_id: u64,
}

impl Previous {
    /// The view itself when it was computed for `key` on the data `data_id` (`None`: new
    /// data); otherwise its buffers (empty when there is none). Leaves `self` empty.
    pub(super) fn take(
        &mut self,
        key: &QuantKey,
        data_id: Option<u64>,
    ) -> Result<QuantView, QuantBuffers> {
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
    pub(super) fn into_buffers(self) -> QuantBuffers {
        QuantBuffers {
            codes: self.quantized.into_codes(),
            abs_err: self.abs_err,
            rows: self.rows,
        }
    }
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
pub(super) struct DataMemo {
    pub(super) outputs: Option<Arc<crate::policy::Outputs>>,
    /// Keys, values.
    pub(super) channel: [Option<usize>; 2],
    /// Keys, values.
    pub(super) extremes: [Option<std::sync::Arc<crate::quant::Extremes>>; 2],
    /// `sum x^2` of the keys, of the values (for [`crate::quant::analyze_memo`]).
    pub(super) sig_sq: [Option<f64>; 2],
}

impl DataMemo {
    /// The exact outputs of `data` (computed on first use).
    pub(super) fn outputs(&mut self, data: &Data) -> Result<Arc<crate::policy::Outputs>, LabError> {
        if let Some(o) = &self.outputs {
            return Ok(Arc::clone(o));
        }
        let o = crate::policy::Outputs::new(&data.attention, &data.values).map_err(policy_error)?;
        let o = Arc::new(o);
        self.outputs = Some(Arc::clone(&o));
        Ok(o)
    }

    /// The extremes slot of `tensor` (for [`crate::quant::quantize_memo`]).
    pub(super) fn extremes(
        &mut self,
        tensor: KvPick,
    ) -> &mut Option<std::sync::Arc<crate::quant::Extremes>> {
        &mut self.extremes[tensor_slot(tensor)]
    }

    /// The `sum x^2` slot of `tensor` (for [`crate::quant::analyze_memo`]).
    pub(super) fn sig_sq(&mut self, tensor: KvPick) -> &mut Option<f64> {
        &mut self.sig_sq[tensor_slot(tensor)]
    }

    /// The default channel of `x` (the tensor `tensor`): the largest `max |x|`, the lowest
    /// index on a tie.
    pub(super) fn channel(&mut self, x: &Matrix, tensor: KvPick) -> usize {
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
pub(super) fn tensor_slot(tensor: KvPick) -> usize {
    match tensor {
        KvPick::K => 0,
        KvPick::V => 1,
    }
}

pub(super) fn quant_config(s: &Settings) -> QuantConfig {
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
pub(super) fn quant_view(
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

/// `max_t |x[t][c]|` of every column `c`, in one row-major pass (a max is exact, so the order
/// does not matter).
pub(super) fn col_max_abs(x: &Matrix) -> Vec<f32> {
    let mut out = vec![0f32; x.cols()];
    for row in x.iter_rows() {
        for (m, &v) in out.iter_mut().zip(row) {
            *m = m.max(v.abs());
        }
    }
    out
}
