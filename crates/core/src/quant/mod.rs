//! Quantization: make each token cheaper (note §2, math-spec §2).
//!
//! * symmetric (note §2.1): `scale = max|x| / (2^(b-1) - 1)`, `q = clamp(round(x/scale), -qmax, qmax)`,
//!   `x_hat = scale * q`;
//! * asymmetric (note §2.3): `scale = (max - min) / (2^b - 1)`, `zp = round(-min/scale)`,
//!   `q = clamp(round(x/scale + zp), 0, 2^b - 1)`, `x_hat = scale * (q - zp)`;
//! * error bounds (note §2.2): `|x - x_hat| <= scale/2` per element and
//!   `||x - x_hat||^2 <= 1/4 sum_j scale_j^2` per row, reported per group and per row;
//! * error statistics and the compression ratio with metadata counted (note §2.4).
//!
//! `round` is round-half-to-even (numpy's `np.round`). Scales are computed in `f64` and stored
//! as `f32`; codes are computed in `f64` from the stored `f32` scale, so dequantizing from the
//! stored metadata gives exactly [`Quantized::dequantize`].
//!
//! Two cases the note's formulas leave open are defined here so nothing divides by zero:
//! * a group whose values all equal `c` (including 0) is stored with `scale = |c|` (0 for
//!   `c = 0`), codes `±1` (symmetric) or zero point `-sign(c)` (asymmetric), and round-trips
//!   exactly;
//! * a scale that would underflow to 0 for tiny non-zero data is raised to the smallest
//!   positive `f32`, which makes the grid as fine as `f32` itself.
//!
//! The note's asymmetric zero point is not clamped to the code range: for one-sided data
//! (all positive) it is negative. It is kept as `i64`, which holds every value it can take.

use crate::Matrix;
use thiserror::Error;

// The quantizer's rooms: schemes, granularities and the quantization itself here; the error
// statistics and bounds (one pass over the tensor) in `stats`; the paths that reuse what an
// earlier quantization of the same tensor found in `memo`.
mod memo;
mod stats;
#[cfg(test)]
mod tests;

pub use memo::{quantize_memo, quantize_reusing, Extremes};
pub use stats::{
    analyze, analyze_memo, analyze_reusing, error_stats, flat_error_sums, group_errors, row_errors,
    try_error_stats, try_error_stats_head, Analysis, ErrorStats, GroupError, RowError,
    ShapeMismatch,
};

/// How the grid is placed around the data (note §2.1 vs §2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    /// Signed codes in `-qmax..=qmax`, `qmax = 2^(b-1) - 1`, grid centred on 0. `bits` in `2..=16`.
    Symmetric,
    /// Unsigned codes in `0..=2^b - 1` with a zero point, grid spans `[min, max]`. `bits` in `1..=16`.
    Asymmetric,
}

impl Scheme {
    /// Its name in messages (and its serde form): `symmetric` or `asymmetric`.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Symmetric => "symmetric",
            Scheme::Asymmetric => "asymmetric",
        }
    }
}

/// Which elements share one `(scale, zero_point)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Granularity {
    /// One group per channel (column `j`, over all tokens), optionally split into runs of
    /// `group_size` tokens. The note's `quantize_per_channel_*`; KIVI's choice for keys.
    PerChannel,
    /// One group per token (row), optionally split into runs of `group_size` channels.
    /// KIVI's choice for values.
    PerToken,
    /// One group for the whole tensor (for comparison). Takes no group size.
    PerTensor,
}

impl Granularity {
    /// Its serde form: `per-channel`, `per-token` or `per-tensor`.
    pub fn name(self) -> &'static str {
        match self {
            Granularity::PerChannel => "per-channel",
            Granularity::PerToken => "per-token",
            Granularity::PerTensor => "per-tensor",
        }
    }
}

/// What to quantize with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuantConfig {
    /// Bit width `b`: `2..=16` symmetric, `1..=16` asymmetric.
    pub bits: u8,
    /// Symmetric or asymmetric grid.
    pub scheme: Scheme,
    /// Which elements share a scale.
    pub granularity: Granularity,
    /// Run length `g` along the grouped axis (tokens for per-channel, channels for per-token);
    /// `None` = the whole axis. Must be in `1..=axis length`; not allowed for per-tensor.
    pub group_size: Option<usize>,
}

impl QuantConfig {
    /// A per-channel symmetric config with `bits` and no grouping (the note's main formula).
    pub fn per_channel_symmetric(bits: u8) -> Self {
        Self {
            bits,
            scheme: Scheme::Symmetric,
            granularity: Granularity::PerChannel,
            group_size: None,
        }
    }

    /// Largest code magnitude: `2^(b-1) - 1` (symmetric) or `2^b - 1` (asymmetric).
    pub fn qmax(&self) -> i64 {
        match self.scheme {
            Scheme::Symmetric => (1i64 << self.bits.saturating_sub(1).min(62)) - 1,
            Scheme::Asymmetric => (1i64 << self.bits.min(62)) - 1,
        }
    }

    /// The valid bit range of this scheme.
    pub fn bits_range(scheme: Scheme) -> std::ops::RangeInclusive<u8> {
        match scheme {
            Scheme::Symmetric => 2..=16,
            Scheme::Asymmetric => 1..=16,
        }
    }
}

/// Why quantization was refused.
///
/// Serialized for the page (which words the ranges a learner can type past in its language) as
/// `{kind: "bits", bits, scheme, min, max}`, `{kind: "groupSize", ...}` and so on.
#[derive(Debug, Clone, PartialEq, Error, serde::Serialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum QuantError {
    /// Bit width outside the scheme's range. Symmetric needs at least 2 bits (1 bit leaves
    /// `qmax = 0`: no grid); if unsure use 8.
    #[error("bits {bits} is out of range: must be between {min} and {max} for {} quantization", scheme.name())]
    Bits {
        /// The bits asked for.
        bits: u8,
        /// The scheme.
        scheme: Scheme,
        /// Smallest valid value.
        min: u8,
        /// Largest valid value.
        max: u8,
    },
    /// Group size 0 or longer than the axis it splits.
    #[error("group size {group_size} is out of range: must be between 1 and {axis_len} ({axis})")]
    GroupSize {
        /// The group size asked for.
        group_size: usize,
        /// Length of the grouped axis.
        axis_len: usize,
        /// What that axis is ("tokens per channel" or "channels per token").
        axis: &'static str,
    },
    /// A group size was given with per-tensor granularity.
    #[error("group size {group_size} cannot be used with per-tensor quantization: choose per-channel or per-token, or no group size")]
    GroupWithPerTensor {
        /// The group size asked for.
        group_size: usize,
    },
    /// The input holds NaN or an infinity.
    #[error("value at row {row}, column {col} is {value}: quantization needs finite numbers")]
    NonFinite {
        /// Row of the first bad value.
        row: usize,
        /// Column of the first bad value.
        col: usize,
        /// The value.
        value: f32,
    },
    /// The range of a group is too wide for the bits: the scale overflows `f32`.
    #[error("group {group} spans {min} to {max}: its scale overflows f32 at {bits} bits; rescale the data (|x| below 1e38)")]
    RangeOverflow {
        /// The group index.
        group: usize,
        /// Its minimum.
        min: f32,
        /// Its maximum.
        max: f32,
        /// Bits asked for.
        bits: u8,
    },
}

/// Layout of groups over a `rows x cols` tensor: which group each element belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupLayout {
    rows: usize,
    cols: usize,
    granularity: Granularity,
    group_size: usize,
    blocks: usize,
}

impl GroupLayout {
    /// Validates `config` against a `rows x cols` shape and returns the layout.
    pub fn new(rows: usize, cols: usize, config: &QuantConfig) -> Result<Self, QuantError> {
        let (axis_len, axis) = match config.granularity {
            Granularity::PerChannel => (rows, "tokens per channel"),
            Granularity::PerToken => (cols, "channels per token"),
            Granularity::PerTensor => (rows.saturating_mul(cols), "elements"),
        };
        let group_size = match (config.granularity, config.group_size) {
            (Granularity::PerTensor, Some(g)) => {
                return Err(QuantError::GroupWithPerTensor { group_size: g })
            }
            (_, None) => axis_len.max(1),
            (_, Some(g)) if g == 0 || g > axis_len => {
                return Err(QuantError::GroupSize {
                    group_size: g,
                    axis_len,
                    axis,
                })
            }
            (_, Some(g)) => g,
        };
        let blocks = axis_len.div_ceil(group_size).max(1);
        Ok(Self {
            rows,
            cols,
            granularity: config.granularity,
            group_size,
            blocks,
        })
    }

    /// Number of groups, i.e. of stored scales.
    pub fn groups(&self) -> usize {
        match self.granularity {
            Granularity::PerChannel => self.cols * self.blocks,
            Granularity::PerToken => self.rows * self.blocks,
            Granularity::PerTensor => 1,
        }
    }

    /// Run length along the grouped axis.
    pub fn group_size(&self) -> usize {
        self.group_size
    }

    /// Groups per channel (per-channel) or per token (per-token); 1 for per-tensor.
    pub fn blocks(&self) -> usize {
        self.blocks
    }

    /// Fills `out[c]` with the group of element (`row`, `c`) for every column: the same as
    /// [`GroupLayout::group_of`] without a division per element (hot loops use this).
    pub fn row_groups(&self, row: usize, out: &mut Vec<usize>) {
        out.clear();
        match self.granularity {
            Granularity::PerChannel => {
                let block = row / self.group_size;
                out.extend((0..self.cols).map(|c| c * self.blocks + block));
            }
            Granularity::PerToken => {
                let base = row * self.blocks;
                let g = self.group_size;
                for b in 0..self.blocks {
                    let n = g.min(self.cols - b * g);
                    out.extend(std::iter::repeat(base + b).take(n));
                }
            }
            Granularity::PerTensor => out.resize(self.cols, 0),
        }
    }

    /// Group of element (`row`, `col`). Per-channel groups are numbered channel-major
    /// (`col * blocks + row / g`), per-token groups token-major (`row * blocks + col / g`).
    #[inline]
    pub fn group_of(&self, row: usize, col: usize) -> usize {
        match self.granularity {
            Granularity::PerChannel => col * self.blocks + row / self.group_size,
            Granularity::PerToken => row * self.blocks + col / self.group_size,
            Granularity::PerTensor => 0,
        }
    }
}

/// A quantized tensor: codes plus the metadata needed to dequantize them.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantized {
    config: QuantConfig,
    layout: GroupLayout,
    codes: Vec<i32>,
    scales: Vec<f32>,
    zero_points: Vec<i64>,
}

/// Round half to even, like numpy's `np.round` and IEEE's default mode.
#[inline]
pub fn round_half_even(x: f64) -> f64 {
    x.round_ties_even()
}

/// `round_half_even(z) as i32` for `|z| <= 2^31 - 1` (codes: `|z| <= 2^16` after clamping),
/// without a rounding instruction or a saturating conversion, so that the quantizer's loop
/// vectorises on every target: adding `1.5 * 2^52` moves `z` to where the `f64` spacing is
/// exactly 1, so the addition itself rounds it (to nearest, ties to even, the default mode),
/// and the low 32 bits of the sum's mantissa are the integer in two's complement.
#[inline]
fn round_to_i32(z: f64) -> i32 {
    const SHIFT: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52
    (z + SHIFT).to_bits() as u32 as i32
}

/// How a layout's groups lie over the rows, as the kernels walk them (row-major).
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// Per-channel and per-tensor: consecutive blocks of `block_rows` rows (the last may be
    /// shorter) in which every column keeps one group
    /// ([`GroupLayout::column_group`]). The kernels load per-column parameters once per block
    /// and run straight passes over contiguous rows.
    Columns { block_rows: usize },
    /// Per-token: each row is cut into runs of `run` columns (the last may be shorter), one
    /// group per run, numbered `row * blocks + k`. The kernels take a run's parameters as
    /// scalars.
    Runs { run: usize },
}

/// `round_half_even(z) as i64` without a call to the library's `rint` (baseline x86-64 has no
/// rounding instruction, and grouped layouts round one zero point per group): for
/// `|z| < 2^51` the sum `z + 1.5 * 2^52` lies where the `f64` spacing is 1, so the addition
/// rounds `z` (to nearest, ties to even: `1.5 * 2^52` is even) and subtracting it back is
/// exact.
#[inline]
fn round_to_i64(z: f64) -> i64 {
    const SHIFT: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52
    const LIMIT: f64 = 2_251_799_813_685_248.0; // 2^51
    if z.abs() < LIMIT {
        ((z + SHIFT) - SHIFT) as i64
    } else {
        round_half_even(z) as i64
    }
}

impl GroupLayout {
    /// See [`Shape`].
    #[inline]
    fn shape(&self) -> Shape {
        match self.granularity {
            Granularity::PerChannel => Shape::Columns {
                block_rows: self.group_size,
            },
            Granularity::PerTensor => Shape::Columns {
                block_rows: self.rows.max(1),
            },
            Granularity::PerToken => Shape::Runs {
                run: self.group_size,
            },
        }
    }

    /// The group of column `col` in row block `block` of a [`Shape::Columns`] layout.
    #[inline]
    fn column_group(&self, block: usize, col: usize) -> usize {
        match self.granularity {
            Granularity::PerChannel => col * self.blocks + block,
            _ => 0,
        }
    }

    /// Number of elements in group `group`.
    fn group_len(&self, group: usize) -> usize {
        let g = self.group_size;
        match self.granularity {
            Granularity::PerChannel => g.min(self.rows - (group % self.blocks) * g),
            Granularity::PerToken => g.min(self.cols - (group % self.blocks) * g),
            Granularity::PerTensor => self.rows * self.cols,
        }
    }
}

/// Lanes of the kernels' explicit accumulators: element `c` of a run goes to lane `c % LANES`.
const LANES: usize = 8;

/// Minimum and maximum of `v` (NaN skipped; `(inf, -inf)` when empty or all NaN) and whether
/// every value is finite, with `LANES` running extremes (exact, so the order does not matter)
/// so that the loop vectorises.
#[inline]
fn min_max(v: &[f32]) -> (f32, f32, bool) {
    let mut lo = [f32::INFINITY; LANES];
    let mut hi = [f32::NEG_INFINITY; LANES];
    // `x * 0` is ±0 for a finite x and NaN for NaN or an infinity; NaN stays NaN in a sum.
    let mut nan = [0f32; LANES];
    let mut chunks = v.chunks_exact(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            let x = c[l];
            lo[l] = if x < lo[l] { x } else { lo[l] };
            hi[l] = if x > hi[l] { x } else { hi[l] };
            nan[l] += x * 0.0;
        }
    }
    for (l, &x) in chunks.remainder().iter().enumerate() {
        lo[l] = if x < lo[l] { x } else { lo[l] };
        hi[l] = if x > hi[l] { x } else { hi[l] };
        nan[l] += x * 0.0;
    }
    let lo = lo
        .iter()
        .fold(f32::INFINITY, |a, &b| if b < a { b } else { a });
    let hi = hi
        .iter()
        .fold(f32::NEG_INFINITY, |a, &b| if b > a { b } else { a });
    (lo, hi, nan.iter().all(|&n| n == 0.0))
}

/// Largest of `v` (all `>= 0`, no NaN), 0 when empty, with `LANES` running maxima.
#[inline]
fn max_lanes<T: Copy + PartialOrd + Default>(v: &[T]) -> T {
    let mut m = [T::default(); LANES];
    let mut chunks = v.chunks_exact(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            m[l] = if c[l] > m[l] { c[l] } else { m[l] };
        }
    }
    for (l, &x) in chunks.remainder().iter().enumerate() {
        m[l] = if x > m[l] { x } else { m[l] };
    }
    m.iter()
        .fold(T::default(), |a, &b| if b > a { b } else { a })
}

/// The rows a kernel reads: all of a [`Matrix`] or its first rows, without a copy.
#[derive(Debug, Clone, Copy)]
struct View<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
}

impl<'a> View<'a> {
    /// The first `n` rows of `x` (at most all of them).
    fn head(x: &'a Matrix, n: usize) -> Self {
        let rows = n.min(x.rows());
        Self {
            data: &x.data()[..rows * x.cols()],
            rows,
            cols: x.cols(),
        }
    }

    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    fn data(&self) -> &'a [f32] {
        self.data
    }

    fn iter_rows(&self) -> std::slice::ChunksExact<'a, f32> {
        self.data.chunks_exact(self.cols.max(1))
    }

    /// As [`Matrix::first_non_finite`], with the value.
    fn first_non_finite(&self) -> Option<(usize, usize, f32)> {
        let cols = self.cols.max(1);
        self.data
            .iter()
            .position(|v| !v.is_finite())
            .map(|i| (i / cols, i % cols, self.data[i]))
    }
}

/// Per-group minimum and maximum of `x` (`(lo, hi)`), and whether every value is finite.
/// Column layouts keep running per-column extremes over each block of rows; per-token runs
/// are reduced one by one. Min and max are exact, so the order does not matter.
fn group_extremes(x: View<'_>, layout: &GroupLayout) -> (Vec<f32>, Vec<f32>, bool) {
    let n_groups = layout.groups();
    let cols = x.cols();
    let mut lo = vec![f32::INFINITY; n_groups];
    let mut hi = vec![f32::NEG_INFINITY; n_groups];
    let mut finite = true;
    match layout.shape() {
        Shape::Runs { run } => {
            let blocks = layout.blocks;
            let groups = lo.chunks_exact_mut(blocks).zip(hi.chunks_exact_mut(blocks));
            for (row, (lo_r, hi_r)) in x.iter_rows().zip(groups) {
                for ((v, l), h) in row.chunks(run).zip(lo_r).zip(hi_r) {
                    let (a, b, ok) = min_max(v);
                    (*l, *h) = (a, b);
                    finite &= ok;
                }
            }
        }
        Shape::Columns { block_rows } => {
            let mut lo_c = vec![f32::INFINITY; cols];
            let mut hi_c = vec![f32::NEG_INFINITY; cols];
            for (b, block) in x.data().chunks(block_rows * cols).enumerate() {
                lo_c.fill(f32::INFINITY);
                hi_c.fill(f32::NEG_INFINITY);
                let mut ok = true;
                for row in block.chunks_exact(cols) {
                    for ((l, h), &v) in lo_c.iter_mut().zip(hi_c.iter_mut()).zip(row) {
                        *l = if v < *l { v } else { *l };
                        *h = if v > *h { v } else { *h };
                        ok &= v.is_finite();
                    }
                }
                finite &= ok;
                for (c, (&l, &h)) in lo_c.iter().zip(&hi_c).enumerate() {
                    let g = layout.column_group(b, c);
                    if let (Some(gl), Some(gh)) = (lo.get_mut(g), hi.get_mut(g)) {
                        *gl = gl.min(l);
                        *gh = gh.max(h);
                    }
                }
            }
        }
    }
    (lo, hi, finite)
}

/// Quantizes `x` with `config` (note §2.1 / §2.3).
///
/// ```
/// use kvlab_core::{Matrix, quant::{quantize, QuantConfig}};
/// // one channel [1.5, -3.0, 0.5] at 3 bits: qmax = 3, scale = 3/3 = 1
/// let x = Matrix::new(3, 1, vec![1.5, -3.0, 0.5]).unwrap();
/// let q = quantize(&x, &QuantConfig::per_channel_symmetric(3)).unwrap();
/// assert_eq!(q.codes(), &[2, -3, 0]); // 1.5 rounds to 2 and 0.5 to 0 (half to even)
/// assert_eq!(q.scales(), &[1.0]);
/// assert_eq!(q.dequantize().data(), &[2.0, -3.0, 0.0]);
/// ```
pub fn quantize(x: &Matrix, config: &QuantConfig) -> Result<Quantized, QuantError> {
    quantize_view(View::head(x, x.rows()), config, Vec::new(), None)
}
/// [`quantize`] of the first `n` rows of `x` (`1..=rows`; more is taken as all), without copying
/// them out.
pub fn quantize_head(x: &Matrix, n: usize, config: &QuantConfig) -> Result<Quantized, QuantError> {
    quantize_view(View::head(x, n.max(1)), config, Vec::new(), None)
}

fn quantize_view(
    x: View<'_>,
    config: &QuantConfig,
    codes: Vec<i32>,
    memo: Option<&mut Option<std::sync::Arc<Extremes>>>,
) -> Result<Quantized, QuantError> {
    let range = QuantConfig::bits_range(config.scheme);
    if !range.contains(&config.bits) {
        return Err(QuantError::Bits {
            bits: config.bits,
            scheme: config.scheme,
            min: *range.start(),
            max: *range.end(),
        });
    }
    let non_finite = |x: View<'_>| {
        x.first_non_finite()
            .map(|(row, col, value)| QuantError::NonFinite { row, col, value })
    };
    // A non-finite value is reported before a bad group size.
    let layout = match GroupLayout::new(x.rows(), x.cols(), config) {
        Ok(l) => l,
        Err(e) => return Err(non_finite(x).unwrap_or(e)),
    };
    let find = || {
        let (lo, hi, finite) = group_extremes(x, &layout);
        Extremes {
            layout,
            lo,
            hi,
            finite,
        }
    };
    let extremes = match memo {
        Some(slot) => match slot {
            Some(e) if e.layout == layout => std::sync::Arc::clone(e),
            _ => {
                let e = std::sync::Arc::new(find());
                *slot = Some(std::sync::Arc::clone(&e));
                e
            }
        },
        None => std::sync::Arc::new(find()),
    };
    let (lo, hi, finite) = (&extremes.lo, &extremes.hi, extremes.finite);
    if !finite {
        if let Some(e) = non_finite(x) {
            return Err(e);
        }
    }
    let n_groups = layout.groups();
    let qmax = config.qmax();
    let mut scales = vec![0f32; n_groups];
    let mut zero_points = match config.scheme {
        Scheme::Symmetric => Vec::new(),
        Scheme::Asymmetric => vec![0i64; n_groups],
    };
    // Constant groups use a special exact encoding (see the module docs).
    let mut constant = vec![false; n_groups];
    for g in 0..n_groups {
        let (mn, mx) = (lo[g], hi[g]);
        if mn == mx {
            constant[g] = true;
            scales[g] = mn.abs();
            if let Some(zp) = zero_points.get_mut(g) {
                *zp = if mn > 0.0 {
                    -1
                } else if mn < 0.0 {
                    1
                } else {
                    0
                };
            }
            continue;
        }
        let raw = match config.scheme {
            Scheme::Symmetric => f64::from(mn.abs().max(mx.abs())) / qmax as f64,
            Scheme::Asymmetric => (f64::from(mx) - f64::from(mn)) / qmax as f64,
        };
        let mut s = raw as f32;
        if !s.is_finite() {
            return Err(QuantError::RangeOverflow {
                group: g,
                min: mn,
                max: mx,
                bits: config.bits,
            });
        }
        if s == 0.0 {
            s = f32::from_bits(1);
        }
        scales[g] = s;
        if let Some(zp) = zero_points.get_mut(g) {
            *zp = round_to_i64(-f64::from(mn) / f64::from(s));
        }
    }
    let codes = encode(codes, x, &layout, config, &scales, &zero_points, &constant);
    Ok(Quantized {
        config: *config,
        layout,
        codes,
        scales,
        zero_points,
    })
}

/// The codes of every element, row-major: `clamp(round(x / scale), -qmax, qmax)` (symmetric)
/// or `clamp(round(x / scale + zp), 0, qmax)` (asymmetric), computed in `f64` from the stored
/// `f32` scale; constant groups get `sign(x)` (symmetric) or 0 (asymmetric).
///
/// Column layouts load the per-column scale, zero point and constant flag once per block of
/// rows; per-token runs take theirs as scalars. Either way the inner loop is a straight pass
/// over contiguous arrays (it vectorises). Each row is encoded into a buffer and appended, so
/// the codes are written once (no zero fill first), into `codes` (cleared first, its capacity
/// reused).
fn encode(
    mut codes: Vec<i32>,
    x: View<'_>,
    layout: &GroupLayout,
    config: &QuantConfig,
    scales: &[f32],
    zero_points: &[i64],
    constant: &[bool],
) -> Vec<i32> {
    let cols = x.cols();
    codes.clear();
    codes.reserve(x.data().len());
    let mut buf = vec![0i32; cols];
    let scheme = config.scheme;
    let qmax = config.qmax() as f64;
    let scale_of = |g: usize| f64::from(scales.get(g).copied().unwrap_or(0.0));
    let zp_of = |g: usize| zero_points.get(g).copied().unwrap_or(0) as f64;
    let const_of = |g: usize| constant.get(g).copied().unwrap_or(false);
    match layout.shape() {
        Shape::Runs { run } => {
            for (r, row) in x.iter_rows().enumerate() {
                let base = r * layout.blocks;
                for (k, (v, out)) in row.chunks(run).zip(buf.chunks_mut(run)).enumerate() {
                    let g = base + k;
                    let (s, k) = (scale_of(g), const_of(g));
                    match scheme {
                        Scheme::Symmetric if k => {
                            for (q, &v) in out.iter_mut().zip(v) {
                                *q = sign(v);
                            }
                        }
                        Scheme::Symmetric => {
                            for (q, &v) in out.iter_mut().zip(v) {
                                *q = round_to_i32((f64::from(v) / s).clamp(-qmax, qmax));
                            }
                        }
                        Scheme::Asymmetric if k => out.fill(0),
                        Scheme::Asymmetric => {
                            let zp = zp_of(g);
                            for (q, &v) in out.iter_mut().zip(v) {
                                *q = round_to_i32((f64::from(v) / s + zp).clamp(0.0, qmax));
                            }
                        }
                    }
                }
                codes.extend_from_slice(&buf);
            }
        }
        Shape::Columns { block_rows } => {
            let mut scale_c = vec![0f64; cols];
            let mut zp_c = vec![0f64; cols];
            let mut const_c = vec![false; cols];
            for (b, block) in x.data().chunks(block_rows * cols).enumerate() {
                for c in 0..cols {
                    let g = layout.column_group(b, c);
                    (scale_c[c], zp_c[c], const_c[c]) = (scale_of(g), zp_of(g), const_of(g));
                }
                let params = scale_c.iter().zip(&zp_c).zip(&const_c);
                // Without a constant group in the block the loops need no selection.
                let any_const = const_c.iter().any(|&k| k);
                for row in block.chunks_exact(cols) {
                    let params = params.clone();
                    // Each row's codes are appended straight into `codes`.
                    match scheme {
                        Scheme::Symmetric if !any_const => {
                            codes.extend(row.iter().zip(&scale_c).map(|(&v, &s)| {
                                round_to_i32((f64::from(v) / s).clamp(-qmax, qmax))
                            }));
                        }
                        Scheme::Asymmetric if !any_const => {
                            let params = scale_c.iter().zip(&zp_c);
                            codes.extend(row.iter().zip(params).map(|(&v, (&s, &zp))| {
                                round_to_i32((f64::from(v) / s + zp).clamp(0.0, qmax))
                            }));
                        }
                        Scheme::Symmetric => {
                            codes.extend(row.iter().zip(params).map(|(&v, ((&s, _), &k))| {
                                // clamp(round(z)) = round(clamp(z)): the bounds are integers.
                                let code = round_to_i32((f64::from(v) / s).clamp(-qmax, qmax));
                                if k {
                                    sign(v)
                                } else {
                                    code
                                }
                            }));
                        }
                        Scheme::Asymmetric => {
                            codes.extend(row.iter().zip(params).map(|(&v, ((&s, &zp), &k))| {
                                let code = round_to_i32((f64::from(v) / s + zp).clamp(0.0, qmax));
                                if k {
                                    0
                                } else {
                                    code
                                }
                            }));
                        }
                    }
                }
            }
        }
    }
    codes
}

/// `sign(v)` as a code: 1, -1 or 0.
#[inline]
fn sign(v: f32) -> i32 {
    if v > 0.0 {
        1
    } else if v < 0.0 {
        -1
    } else {
        0
    }
}

impl Quantized {
    /// The config this tensor was quantized with.
    pub fn config(&self) -> &QuantConfig {
        &self.config
    }

    /// The group layout (which element shares which scale).
    pub fn layout(&self) -> &GroupLayout {
        &self.layout
    }

    /// Rows (tokens) of the quantized tensor.
    pub fn rows(&self) -> usize {
        self.layout.rows
    }

    /// Columns (channels) of the quantized tensor.
    pub fn cols(&self) -> usize {
        self.layout.cols
    }

    /// Integer codes `q`, row-major like the input: `-qmax..=qmax` symmetric, `0..=2^b-1` asymmetric.
    pub fn codes(&self) -> &[i32] {
        &self.codes
    }

    /// One scale per group (see [`GroupLayout::group_of`] for the numbering).
    pub fn scales(&self) -> &[f32] {
        &self.scales
    }

    /// One zero point per group for asymmetric quantization; empty for symmetric (none stored).
    pub fn zero_points(&self) -> &[i64] {
        &self.zero_points
    }

    /// The code buffer, for [`quantize_reusing`] to fill again.
    pub fn into_codes(self) -> Vec<i32> {
        self.codes
    }

    /// The largest relative round-off allowance of the bounds over the groups with a positive
    /// scale, `allowance / (scale/2)` (0 when there are none): [`ErrorStats::roundoff`]. Each
    /// group's own allowance is in [`GroupError::limit`] and [`RowError::limit`].
    pub fn roundoff(&self) -> f64 {
        (0..self.scales.len())
            .filter(|&g| self.scales[g] > 0.0)
            .map(|g| self.allowance_of(g) / (f64::from(self.scales[g]) / 2.0))
            .fold(0.0, f64::max)
    }

    /// [`allowance`] of group `g`.
    fn allowance_of(&self, g: usize) -> f64 {
        let scale = f64::from(self.scales.get(g).copied().unwrap_or(0.0));
        let zp = self.zero_points.get(g).copied().unwrap_or(0);
        allowance(scale, zp, self.config.qmax() as f64)
    }

    /// Scale of element (`row`, `col`); 0 when out of range.
    pub fn scale_of(&self, row: usize, col: usize) -> f32 {
        self.scales
            .get(self.layout.group_of(row, col))
            .copied()
            .unwrap_or(0.0)
    }

    /// `x_hat = scale * q` (symmetric) or `scale * (q - zp)` (asymmetric), written into `out`
    /// (length `rows * cols`; shorter buffers are filled as far as they go).
    pub fn dequantize_into(&self, out: &mut [f32]) {
        let cols = self.layout.cols.max(1);
        let mut d = Dequant::new(self);
        for (r, (orow, qrow)) in out
            .chunks_mut(cols)
            .zip(self.codes.chunks(cols))
            .enumerate()
        {
            d.row(r, qrow, orow);
        }
    }

    /// Calls `f(row, x_hat_row)` for every row in order, `x_hat` as [`Quantized::dequantize`],
    /// without building the whole tensor.
    pub fn for_each_dequantized_row(&self, mut f: impl FnMut(usize, &[f32])) {
        let cols = self.layout.cols.max(1);
        let mut buf = vec![0f32; cols];
        let mut d = Dequant::new(self);
        for (r, qrow) in self.codes.chunks(cols).enumerate() {
            let buf = &mut buf[..qrow.len()];
            d.row(r, qrow, buf);
            f(r, buf);
        }
    }

    /// The de-quantized tensor `x_hat`.
    pub fn dequantize(&self) -> Matrix {
        // Row by row through a buffer, so the output is written once (no zero fill first).
        let cols = self.layout.cols.max(1);
        let mut out = Vec::with_capacity(self.codes.len());
        let mut buf = vec![0f32; cols];
        let mut d = Dequant::new(self);
        for (r, qrow) in self.codes.chunks(cols).enumerate() {
            let buf = &mut buf[..qrow.len()];
            d.row(r, qrow, buf);
            out.extend_from_slice(buf);
        }
        Matrix::new(self.layout.rows, self.layout.cols, out)
            .unwrap_or_else(|_| unreachable_matrix())
    }

    /// The grid values `scale * (k - zp)` for every code `k` of group `group`, ascending
    /// (what the page draws over a channel's histogram). Capped at 4,097 points; empty when
    /// `group` is out of range.
    pub fn grid(&self, group: usize) -> Vec<f32> {
        let Some(&s) = self.scales.get(group) else {
            return Vec::new();
        };
        let qmax = self.config.qmax();
        let (lo, hi, zp) = match self.config.scheme {
            Scheme::Symmetric => (-qmax, qmax, 0),
            Scheme::Asymmetric => (0, qmax, self.zero_points.get(group).copied().unwrap_or(0)),
        };
        let step = ((hi - lo) / 4096).max(1);
        (0..)
            .map(|k| lo + k * step)
            .take_while(|&k| k <= hi)
            .map(|k| (f64::from(s) * (k - zp) as f64) as f32)
            .collect()
    }
}

/// A quantized tensor always has `rows, cols >= 1` because its input was a valid [`Matrix`].
fn unreachable_matrix() -> Matrix {
    Matrix::filled(1, 1, 0.0).unwrap_or_else(|_| unreachable!("1x1 is a valid shape"))
}

/// `x_hat = (scale * (q - zp)) as f32`, with the scale as `f64` and `zp = 0` for symmetric
/// (the one formula every reader of codes uses, so they all agree bit for bit).
#[inline]
fn dequantize_one(q: i32, scale: f64, zero_point: i64) -> f32 {
    (scale * (i64::from(q) - zero_point) as f64) as f32
}

/// How far `f32` arithmetic may move the bound `|x - x_hat| <= scale/2` of a group with this
/// `scale` (as stored) and zero point (0 for symmetric): its elements have
/// `|x - x_hat| <= scale/2 + allowance`.
///
/// In exact arithmetic the bound holds. Three roundings move it (`m = max(|zp|, |qmax - zp|)`,
/// so `|q - zp| <= m` and `|x_hat| <= scale m`):
/// * the stored `f32` scale is within `2^-24` of the exact `range / qmax` (relatively; `2^-150`
///   absolutely when subnormal), so the grid's far end may miss the data's end by `qmax` times
///   that;
/// * `x_hat` is rounded to `f32`: at most `2^-24 scale m` (or `2^-150`);
/// * `x / scale + zp` is computed in `f64`: at most `2^-52 (m + qmax + 1)` code steps.
///
/// Their sum is below `scale 2^-23 (qmax + m + 1) + qmax 2^-149` (about twice the sum, for
/// slack), which is what this returns.
fn allowance(scale: f64, zero_point: i64, qmax: f64) -> f64 {
    const EPS: f64 = 1.0 / (1u64 << 23) as f64; // 2^-23
    let tiny = f64::from(f32::from_bits(1)); // 2^-149
    let zp = zero_point as f64;
    let m = zp.abs().max((qmax - zp).abs());
    scale * EPS * (qmax + m + 1.0) + qmax * tiny
}

/// Zero points up to this size in magnitude make `q - zp` exact in `f64` (they always are in
/// practice: `|zp| <= |min| / scale` stays below about `2^41`).
const EXACT_ZERO_POINT: i64 = 1 << 52;

/// Rows of `x_hat` from a quantized tensor, each element [`dequantize_one`]'s number. Column
/// layouts keep the scale (as `f64`) and zero point (0 for symmetric) of each column for the
/// current block of rows ([`Shape::Columns`]); per-token runs read theirs as scalars.
struct Dequant<'a> {
    q: &'a Quantized,
    shape: Shape,
    /// The loaded row block (`usize::MAX` before the first; unused for runs).
    block: usize,
    scale: Vec<f64>,
    zero_point: Vec<i64>,
    /// The zero points as `f64`.
    zero_point_f64: Vec<f64>,
    /// Every loaded zero point is within [`EXACT_ZERO_POINT`].
    small_zero_points: bool,
    /// The scales as stored (`f32`) and the zero points as `i32` (see [`F32_ZERO_POINT`]).
    scale32: Vec<f32>,
    zero_point32: Vec<i32>,
    /// Every loaded zero point is within [`F32_ZERO_POINT`].
    f32_zero_points: bool,
}

/// Zero points up to this size in magnitude keep `|q - zp| < 2^24` for every code
/// (`|q| <= 2^16 - 1`), so `q - zp` is exact in `f32`, and then `x_hat` can be computed in
/// `f32`: the `f64` product of a 24-bit scale and a 24-bit integer is exact, so
/// `(scale * (q - zp)) as f32` rounds the exact product once, as the `f32` multiply does (the
/// same bits, including subnormal results and overflow). Twice the lanes per instruction.
const F32_ZERO_POINT: i64 = (1 << 24) - (1 << 16);

/// [`dequantize_one`] in `f32` for `|zp| <= F32_ZERO_POINT` (see there).
#[inline]
fn dequantize_f32(q: i32, scale: f32, zero_point: i32) -> f32 {
    (q - zero_point) as f32 * scale
}

impl<'a> Dequant<'a> {
    fn new(q: &'a Quantized) -> Self {
        let shape = q.layout.shape();
        let n = match shape {
            Shape::Columns { .. } => q.layout.cols,
            Shape::Runs { .. } => 0,
        };
        Self {
            q,
            shape,
            block: usize::MAX,
            scale: vec![0.0; n],
            zero_point: vec![0; n],
            zero_point_f64: vec![0.0; n],
            small_zero_points: true,
            scale32: vec![0.0; n],
            zero_point32: vec![0; n],
            f32_zero_points: true,
        }
    }

    /// For column layouts, loads the parameters of `row`'s block; true when they were not
    /// loaded yet (always false for runs).
    #[inline]
    fn load(&mut self, row: usize) -> bool {
        let Shape::Columns { block_rows } = self.shape else {
            return false;
        };
        let b = row / block_rows;
        if b == self.block {
            return false;
        }
        self.block = b;
        let q = self.q;
        for (c, (s, zp)) in self
            .scale
            .iter_mut()
            .zip(self.zero_point.iter_mut())
            .enumerate()
        {
            let g = q.layout.column_group(b, c);
            *s = f64::from(q.scales.get(g).copied().unwrap_or(0.0));
            *zp = q.zero_points.get(g).copied().unwrap_or(0);
        }
        self.small_zero_points = self
            .zero_point
            .iter()
            .all(|z| (-EXACT_ZERO_POINT..=EXACT_ZERO_POINT).contains(z));
        for (f, &z) in self.zero_point_f64.iter_mut().zip(&self.zero_point) {
            *f = z as f64;
        }
        self.f32_zero_points = self
            .zero_point
            .iter()
            .all(|z| (-F32_ZERO_POINT..=F32_ZERO_POINT).contains(z));
        for ((s32, z32), (&s, &z)) in self
            .scale32
            .iter_mut()
            .zip(self.zero_point32.iter_mut())
            .zip(self.scale.iter().zip(&self.zero_point))
        {
            // exact: the scale came from an f32; the zero point is only used when small
            *s32 = s as f32;
            *z32 = z.clamp(-F32_ZERO_POINT, F32_ZERO_POINT) as i32;
        }
        true
    }

    /// `x_hat` of row `row` (its `codes`) into `out` (as far as both go).
    #[inline]
    fn row(&mut self, row: usize, codes: &[i32], out: &mut [f32]) {
        match self.shape {
            Shape::Columns { .. } => {
                self.load(row);
                if self.f32_zero_points {
                    let params = self.scale32.iter().zip(&self.zero_point32);
                    for ((o, &q), (&s, &zp)) in out.iter_mut().zip(codes).zip(params) {
                        *o = dequantize_f32(q, s, zp);
                    }
                } else if self.small_zero_points {
                    // q - zp is exact in f64 here, so this is dequantize_one's number; in f64
                    // the loop vectorises (i64 -> f64 conversions do not, before AVX-512).
                    let params = self.scale.iter().zip(&self.zero_point_f64);
                    for ((o, &q), (&s, &zp)) in out.iter_mut().zip(codes).zip(params) {
                        *o = (s * (f64::from(q) - zp)) as f32;
                    }
                } else {
                    let params = self.scale.iter().zip(&self.zero_point);
                    for ((o, &q), (&s, &zp)) in out.iter_mut().zip(codes).zip(params) {
                        *o = dequantize_one(q, s, zp);
                    }
                }
            }
            Shape::Runs { run } => {
                let q = self.q;
                let base = row * q.layout.blocks;
                for (k, (c, o)) in codes.chunks(run).zip(out.chunks_mut(run)).enumerate() {
                    let g = base + k;
                    let s32 = q.scales.get(g).copied().unwrap_or(0.0);
                    let s = f64::from(s32);
                    let zp = q.zero_points.get(g).copied().unwrap_or(0);
                    if (-F32_ZERO_POINT..=F32_ZERO_POINT).contains(&zp) {
                        let zp = zp as i32;
                        for (o, &q) in o.iter_mut().zip(c) {
                            *o = dequantize_f32(q, s32, zp);
                        }
                    } else if (-EXACT_ZERO_POINT..=EXACT_ZERO_POINT).contains(&zp) {
                        let zp = zp as f64;
                        for (o, &q) in o.iter_mut().zip(c) {
                            *o = (s * (f64::from(q) - zp)) as f32;
                        }
                    } else {
                        for (o, &q) in o.iter_mut().zip(c) {
                            *o = dequantize_one(q, s, zp);
                        }
                    }
                }
            }
        }
    }
}

/// Bytes that a stored scale or zero point takes (note §2.4: metadata is not free).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum MetaDtype {
    /// 2 bytes (the default, as KIVI stores them).
    #[default]
    F16,
    /// 4 bytes.
    F32,
}

impl MetaDtype {
    /// Size in bytes.
    pub fn bytes(self) -> u64 {
        match self {
            MetaDtype::F16 => 2,
            MetaDtype::F32 => 4,
        }
    }
}

/// Bytes of `n` codes of `bits` each, bit-packed: `ceil(n * bits / 8)`.
///
/// ```
/// assert_eq!(kvlab_core::quant::packed_code_bytes(10, 3), 4); // 30 bits -> 4 bytes
/// ```
pub fn packed_code_bytes(n: u64, bits: u8) -> u64 {
    (n.saturating_mul(u64::from(bits))).div_ceil(8)
}

/// Bytes of the metadata of `groups` groups: one scale each, plus one zero point each for
/// asymmetric quantization (symmetric stores none).
pub fn metadata_bytes(groups: u64, scheme: Scheme, dtype: MetaDtype) -> u64 {
    let per = match scheme {
        Scheme::Symmetric => dtype.bytes(),
        Scheme::Asymmetric => 2 * dtype.bytes(),
    };
    groups.saturating_mul(per)
}
