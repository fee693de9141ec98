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

/// [`quantize`], writing the codes into `codes` (its contents are dropped, its capacity kept):
/// give it [`Quantized::into_codes`] of a tensor no longer needed and a repeated quantization
/// of the same shape allocates no code buffer. The result is the same as [`quantize`]'s.
///
/// ```
/// use kvlab_core::quant::{quantize, quantize_reusing, QuantConfig};
/// use kvlab_core::Matrix;
/// let x = Matrix::new(2, 2, vec![1.0, -2.0, 0.5, 4.0]).unwrap();
/// let q4 = quantize(&x, &QuantConfig::per_channel_symmetric(4)).unwrap();
/// let codes = q4.into_codes();
/// let q3 = quantize_reusing(&x, &QuantConfig::per_channel_symmetric(3), codes).unwrap();
/// assert_eq!(q3, quantize(&x, &QuantConfig::per_channel_symmetric(3)).unwrap());
/// ```
pub fn quantize_reusing(
    x: &Matrix,
    config: &QuantConfig,
    codes: Vec<i32>,
) -> Result<Quantized, QuantError> {
    quantize_view(View::head(x, x.rows()), config, codes, None)
}

/// The per-group minima and maxima of one tensor under one [`GroupLayout`], and whether the
/// tensor is finite: the first pass of a quantization. Bits and scheme do not change them,
/// only the layout does, so a caller that quantizes the same tensor again and again (the page,
/// as a bits or scheme control moves) keeps them in a slot given to [`quantize_memo`].
#[derive(Debug, Clone, PartialEq)]
pub struct Extremes {
    layout: GroupLayout,
    lo: Vec<f32>,
    hi: Vec<f32>,
    finite: bool,
}

impl Extremes {
    /// The smallest and largest value of group `group` under `layout`, if these are that
    /// layout's extremes.
    pub fn of(&self, layout: &GroupLayout, group: usize) -> Option<(f32, f32)> {
        if self.layout != *layout {
            return None;
        }
        Some((*self.lo.get(group)?, *self.hi.get(group)?))
    }
}

/// [`quantize_reusing`], taking the per-group extremes from `memo` when they were found for
/// this layout, else finding them and leaving them there. `memo` must only ever be given the
/// same `x` (the lab keeps one per tensor of its data and clears it with the data). The result
/// is the same as [`quantize`]'s.
pub fn quantize_memo(
    x: &Matrix,
    config: &QuantConfig,
    codes: Vec<i32>,
    memo: &mut Option<std::sync::Arc<Extremes>>,
) -> Result<Quantized, QuantError> {
    quantize_view(View::head(x, x.rows()), config, codes, Some(memo))
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

/// Error statistics of one quantized tensor (math-spec §2).
///
/// The sums behind `mean_abs`, `rmse` and `snr_db` (`sum |x - x_hat|`, `sum (x - x_hat)^2`,
/// `sum x^2`) are `f64` and added in a fixed order that depends only on the shape, so every
/// target (native, wasm32, wasm32 + simd128) gives the same bits: element `(r, c)` goes to lane
/// `c % 8`, each lane adds its elements in row-major order starting from 0, and the lanes are
/// combined as `((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))`. The sum behind
/// `expected_mse` is `sum_g n_g (scale_g^2 / 12)` over the groups in group order (`n_g`: the
/// group's element count). The maxima are exact.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ErrorStats {
    /// `max |x - x_hat|`.
    pub max_abs: f64,
    /// `mean |x - x_hat|`.
    pub mean_abs: f64,
    /// `sqrt(mean (x - x_hat)^2)`.
    pub rmse: f64,
    /// `10 log10(||x||^2 / ||x - x_hat||^2)` in dB; `+inf` when the error is 0, `-inf` when `x` is 0
    /// and the error is not.
    pub snr_db: f64,
    /// Expected MSE under the uniform-noise model: `scale^2 / 12` averaged over elements.
    pub expected_mse: f64,
    /// Largest `|x - x_hat| / (scale/2)` over all elements: at most `1 + roundoff`.
    pub worst_bound_use: f64,
    /// How far `f32` arithmetic may move the bounds, relative to them, at most: every element
    /// has `|x - x_hat| <= (scale/2) (1 + roundoff)` and every row `||x - x_hat||^2 <= (1/4
    /// sum_j scale_j^2) (1 + roundoff)^2`. The largest over the groups of their allowance
    /// `a = scale 2^-23 (qmax + m + 1) + qmax 2^-149` relative to `scale/2`, where
    /// `m = max(|zp|, |qmax - zp|)` (`zp = 0` for symmetric) bounds `|x_hat| / scale` (see
    /// [`Quantized::roundoff`]). `6.1e-5` at 8 bits symmetric, about `9e-5` asymmetric, for
    /// data centred on zero; larger when a group's values lie far from zero compared with their
    /// spread (a large `|zp|`). One such group sets it for all: checks use each group's own
    /// [`GroupError::limit`] and each row's [`RowError::limit`].
    pub roundoff: f64,
    /// `fp16 bytes / (packed code bytes + metadata bytes)`, fp16 source and fp16 metadata.
    pub compression_ratio: f64,
    /// `16 / bits`: the note's `R_quant ~ s_fp / s_q` ignoring metadata, from fp16.
    pub compression_ratio_no_meta: f64,
}

/// Error statistics of `q` against the original `x` (fp16 source, fp16 metadata).
///
/// When the shapes differ every statistic is NaN (use [`try_error_stats`] to get an error).
pub fn error_stats(x: &Matrix, q: &Quantized) -> ErrorStats {
    try_error_stats(x, q, 2, MetaDtype::F16).unwrap_or(ErrorStats {
        max_abs: f64::NAN,
        mean_abs: f64::NAN,
        rmse: f64::NAN,
        snr_db: f64::NAN,
        expected_mse: f64::NAN,
        worst_bound_use: f64::NAN,
        roundoff: f64::NAN,
        compression_ratio: f64::NAN,
        compression_ratio_no_meta: f64::NAN,
    })
}

/// Shape mismatch between an original tensor and its quantized form.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "shape mismatch: original is {rows} x {cols} but the quantized tensor is {q_rows} x {q_cols}"
)]
pub struct ShapeMismatch {
    /// Original rows.
    pub rows: usize,
    /// Original cols.
    pub cols: usize,
    /// Quantized rows.
    pub q_rows: usize,
    /// Quantized cols.
    pub q_cols: usize,
}

fn check_shape(x: View<'_>, q: &Quantized) -> Result<(), ShapeMismatch> {
    if x.rows() != q.rows() || x.cols() != q.cols() {
        return Err(ShapeMismatch {
            rows: x.rows(),
            cols: x.cols(),
            q_rows: q.rows(),
            q_cols: q.cols(),
        });
    }
    Ok(())
}

/// Error statistics with the source element size `source_bytes` (2 for fp16/bf16, 4 for fp32)
/// and the metadata dtype given.
pub fn try_error_stats(
    x: &Matrix,
    q: &Quantized,
    source_bytes: u64,
    meta: MetaDtype,
) -> Result<ErrorStats, ShapeMismatch> {
    try_error_stats_view(View::head(x, x.rows()), q, source_bytes, meta)
}

/// [`try_error_stats`] of the first `n` rows of `x` (`1..=rows`), without copying them out.
pub fn try_error_stats_head(
    x: &Matrix,
    n: usize,
    q: &Quantized,
    source_bytes: u64,
    meta: MetaDtype,
) -> Result<ErrorStats, ShapeMismatch> {
    try_error_stats_view(View::head(x, n.max(1)), q, source_bytes, meta)
}

fn try_error_stats_view(
    x: View<'_>,
    q: &Quantized,
    source_bytes: u64,
    meta: MetaDtype,
) -> Result<ErrorStats, ShapeMismatch> {
    check_shape(x, q)?;
    let pass = error_pass::<false>(x, q, &mut Vec::new(), &mut Vec::new(), None);
    Ok(pass.stats(x, q, source_bytes, meta))
}

/// Sums of `f64` terms over the elements of a tensor in a fixed order that depends only on the
/// shape, not on the target or its SIMD width (so native, wasm32 and wasm32 + simd128 give
/// the same bits): element `(r, c)` goes to lane `c % 8`; each lane adds its elements in
/// row-major order, starting from 0; the lanes are combined at the end as
/// `((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))`. Eight independent accumulators
/// instead of one running sum: the adds no longer wait for each other, and they vectorise.
#[derive(Debug, Clone, Copy)]
struct Lanes([f64; LANES]);

impl Lanes {
    const ZERO: Lanes = Lanes([0.0; LANES]);

    /// Adds `v` to `self` and `v^2` to `sq`, element `c` to lane `c % 8`.
    #[inline]
    fn add_sq(&mut self, sq: &mut Lanes, v: &[f64]) {
        let mut unused = Lanes::ZERO;
        self.add_sq_to::<false>(sq, &mut unused, v);
    }

    /// [`Lanes::add_sq`], also adding `v^2` to `row`.
    #[inline]
    fn add_sq_row(&mut self, sq: &mut Lanes, row: &mut Lanes, v: &[f64]) {
        self.add_sq_to::<true>(sq, row, v);
    }

    /// [`Lanes::add_sq`]; with `ROW`, also `v^2` to `row` (without, `row` is left alone).
    #[inline]
    fn add_sq_to<const ROW: bool>(&mut self, sq: &mut Lanes, row: &mut Lanes, v: &[f64]) {
        let mut chunks = v.chunks_exact(LANES);
        for c in &mut chunks {
            for (((a, s), r), &e) in self.0.iter_mut().zip(&mut sq.0).zip(&mut row.0).zip(c) {
                *a += e;
                *s += e * e;
                if ROW {
                    *r += e * e;
                }
            }
        }
        let rest = chunks.remainder();
        for (((a, s), r), &e) in self.0.iter_mut().zip(&mut sq.0).zip(&mut row.0).zip(rest) {
            *a += e;
            *s += e * e;
            if ROW {
                *r += e * e;
            }
        }
    }

    /// Adds `v^2` (in `f64`) to `self`, element `c` to lane `c % 8`.
    #[inline]
    fn add_sq_f32(&mut self, v: &[f32]) {
        let mut chunks = v.chunks_exact(LANES);
        for c in &mut chunks {
            for (a, &x) in self.0.iter_mut().zip(c) {
                let x = f64::from(x);
                *a += x * x;
            }
        }
        for (a, &x) in self.0.iter_mut().zip(chunks.remainder()) {
            let x = f64::from(x);
            *a += x * x;
        }
    }

    /// The lanes combined in the fixed order.
    fn total(&self) -> f64 {
        let a = &self.0;
        ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
    }
}

/// `(max |x - y|, sum |x - y|, sum (x - y)^2, sum x^2)` over two equally long slices (the
/// shorter length if not), in `f64`, the sums in the `Lanes` order of the flat index:
/// element `i` in lane `i % 8`, lanes combined as `((l0 + l1) + (l2 + l3)) + ((l4 + l5) +
/// (l6 + l7))`.
pub fn flat_error_sums(x: &[f32], y: &[f32]) -> (f64, f64, f64, f64) {
    const BLOCK: usize = 64 * LANES;
    let (mut abs, mut sq, mut sig) = (Lanes::ZERO, Lanes::ZERO, Lanes::ZERO);
    let mut max = 0f64;
    let mut err = [0f64; BLOCK];
    for (xb, yb) in x.chunks(BLOCK).zip(y.chunks(BLOCK)) {
        let n = xb.len().min(yb.len());
        let err = &mut err[..n];
        for ((e, &a), &b) in err.iter_mut().zip(xb).zip(yb) {
            *e = (f64::from(a) - f64::from(b)).abs();
        }
        abs.add_sq(&mut sq, err);
        sig.add_sq_f32(&xb[..n]);
        max = max.max(max_lanes(err));
    }
    (max, abs.total(), sq.total(), sig.total())
}

/// The sums of one pass over `x` and its quantization `q` (see [`error_pass`]).
struct ErrorPass {
    /// `sum |x - x_hat|`, in the [`Lanes`] order.
    sum_abs: f64,
    /// `sum (x - x_hat)^2`, in the [`Lanes`] order.
    sum_sq: f64,
    /// `sum x^2`, in the [`Lanes`] order.
    sig_sq: f64,
    /// Per group: `max |x - x_hat|` computed in `f64` (exactly; as `f32`, it is the maximum of
    /// the errors computed in `f32`: see [`f32_error_of`]).
    group_max64: Vec<f64>,
}

impl ErrorPass {
    fn stats(&self, x: View<'_>, q: &Quantized, source_bytes: u64, meta: MetaDtype) -> ErrorStats {
        let n = x.data().len();
        let nf = n as f64;
        let snr_db = if self.sum_sq == 0.0 {
            f64::INFINITY
        } else {
            10.0 * (self.sig_sq / self.sum_sq).log10()
        };
        let max_abs = self.group_max64.iter().copied().fold(0f64, f64::max);
        // max_e e / (s/2) = (max_e e) / (s/2): division by a positive number is monotone, so
        // the worst element of each group is the one with the largest error.
        let worst = self
            .group_max64
            .iter()
            .zip(&q.scales)
            .map(|(&e, &s)| (e, f64::from(s)))
            .filter(|&(_, s)| s > 0.0)
            .map(|(e, s)| e / (s / 2.0))
            .fold(0f64, f64::max);
        // sum over elements of scale^2 / 12: per group, its element count times its term,
        // added in group order.
        let exp_mse = q.scales.iter().enumerate().fold(0f64, |acc, (g, &s)| {
            let s = f64::from(s);
            acc + q.layout.group_len(g) as f64 * (s * s / 12.0)
        });
        let bits = q.config.bits;
        let stored = packed_code_bytes(n as u64, bits)
            + metadata_bytes(q.scales.len() as u64, q.config.scheme, meta);
        ErrorStats {
            max_abs,
            mean_abs: self.sum_abs / nf,
            rmse: (self.sum_sq / nf).sqrt(),
            snr_db,
            expected_mse: exp_mse / nf,
            worst_bound_use: worst,
            roundoff: q.roundoff(),
            compression_ratio: (n as u64 * source_bytes) as f64 / stored as f64,
            compression_ratio_no_meta: (source_bytes * 8) as f64 / f64::from(bits),
        }
    }
}

/// `1/4 sum_j scale_j^2` and the limit `sum_j (scale_j/2 + allowance_j)^2` of rows
/// `r0 .. r0 + n` (`n <= 8`) of a per-token layout, each row's sums in column order (the order
/// that defines them), the rows side by side in lanes so the adds vectorise.
fn run_bounds(q: &Quantized, r0: usize, n: usize, run: usize) -> ([f64; LANES], [f64; LANES]) {
    let (blocks, cols) = (q.layout.blocks, q.layout.cols);
    let (mut acc, mut lim) = ([0f64; LANES], [0f64; LANES]);
    for k in 0..blocks {
        let (mut t, mut u) = ([0f64; LANES], [0f64; LANES]);
        for l in 0..n.min(LANES) {
            let g = (r0 + l) * blocks + k;
            let s = f64::from(q.scales.get(g).copied().unwrap_or(0.0));
            t[l] = s * s / 4.0;
            let e = s / 2.0 + q.allowance_of(g);
            u[l] = e * e;
        }
        for _ in 0..run.min(cols - k * run) {
            for l in 0..LANES {
                acc[l] += t[l];
                lim[l] += u[l];
            }
        }
    }
    (acc, lim)
}

/// `|x - x_hat|` computed in `f32`, from the same error computed in `f64`
/// (`|f64(x) - f64(x_hat)|`) for `f32` values `x`, `x_hat`: rounding the f64 difference to f32
/// gives the correctly rounded f32 difference, because f64 carries more than twice f32's 24
/// significand bits plus two (53 >= 2 * 24 + 2), which makes the double rounding of a sum or
/// difference innocuous (S. A. Figueroa, "When is double rounding innocuous?", 1995). Rounding
/// is monotone, so the f32 maximum of a group is the f64 maximum rounded. The pass keeps one
/// error per element, in f64, and derives the f32 values from it.
#[inline]
fn f32_error_of(e64: f64) -> f32 {
    e64 as f32
}

/// One row-major pass over `x` (shape already checked against `q`): the sums of the error
/// statistics ([`Lanes`] order) and the per-group maximum errors; with `FULL`, also
/// `|x - x_hat|` appended to `abs_err` and each row's squared error and bound to `rows`.
///
/// Per row: the errors `|x - x_hat|` in f64 (`x_hat` as [`Quantized::dequantize`]; for column
/// layouts with f32 zero points, computed in the same loop as the errors and the running
/// maxima), then one layout-independent loop for the sums, then the other maxima (per column
/// over a block of rows for the other column layouts, per run for per-token). A row's squared
/// error is summed in the [`Lanes`] order within the row (element `c` to lane `c % 8`), in the
/// same loop as the tensor's sums. The f32 errors and maxima are the f64 ones rounded
/// ([`f32_error_of`]). `sig_sq_known`: `sum x^2`, when the caller has it (the loop for it is
/// skipped).
fn error_pass<const FULL: bool>(
    x: View<'_>,
    q: &Quantized,
    abs_err: &mut Vec<f32>,
    rows: &mut Vec<RowError>,
    sig_sq_known: Option<f64>,
) -> ErrorPass {
    let cols = x.cols();
    let n_groups = q.scales.len();
    let mut group_max64 = vec![0f64; n_groups];
    let shape = q.layout.shape();
    let columns = matches!(shape, Shape::Columns { .. });
    let mut d = Dequant::new(q);
    // Column layouts: the running maxima of the current block, per column.
    let mut max64_c = vec![0f64; if columns { cols } else { 0 }];
    let flush = |block: usize, max64_c: &mut [f64], group_max64: &mut [f64]| {
        for (c, m) in max64_c.iter_mut().enumerate() {
            if let Some(x) = group_max64.get_mut(q.layout.column_group(block, c)) {
                *x = x.max(*m);
            }
            *m = 0.0;
        }
    };
    let (mut sum_abs, mut sum_sq, mut sig_sq) = (Lanes::ZERO, Lanes::ZERO, Lanes::ZERO);
    // FULL: the bound of the current block (column layouts), the bounds of the current eight
    // rows, and their squared errors (`sq8[slot * cols + c]`).
    let (mut block_bound, mut block_limit) = (0f64, 0f64);
    let (mut bound8, mut limit8) = ([0f64; LANES], [0f64; LANES]);
    let qmax = q.config.qmax() as f64;
    if FULL {
        rows.reserve(x.rows());
        abs_err.reserve(x.data().len());
    }
    // The current row's x_hat and |x - x_hat| in f64.
    let mut hat = vec![0f32; cols];
    let mut err = vec![0f64; cols];
    let n_rows = x.rows();
    for (r, (row, qrow)) in x.iter_rows().zip(q.codes.chunks_exact(cols)).enumerate() {
        let slot = r % LANES;
        let prev_block = d.block;
        if d.load(r) {
            if prev_block != usize::MAX {
                flush(prev_block, &mut max64_c, &mut group_max64);
            }
            if FULL {
                (block_bound, block_limit) = (0.0, 0.0);
                for (&s, &zp) in d.scale.iter().zip(&d.zero_point) {
                    block_bound += s * s / 4.0;
                    let e = s / 2.0 + allowance(s, zp, qmax);
                    block_limit += e * e;
                }
            }
        }
        if FULL {
            match shape {
                Shape::Columns { .. } => {
                    bound8[slot] = block_bound;
                    limit8[slot] = block_limit;
                }
                Shape::Runs { run } if slot == 0 => {
                    (bound8, limit8) = run_bounds(q, r, LANES.min(n_rows - r), run);
                }
                Shape::Runs { .. } => {}
            }
        }
        // Column layouts (the common case): x_hat, |x - x_hat| and the running maxima in one
        // loop over the row (x_hat as in `Dequant::row`); otherwise x_hat first.
        let fused = columns && d.f32_zero_points;
        if fused {
            let params = d.scale32.iter().zip(&d.zero_point32);
            let out = err.iter_mut().zip(max64_c.iter_mut());
            for (((e, m), (&s, &zp)), (&v, &q)) in out.zip(params).zip(row.iter().zip(qrow)) {
                let h = dequantize_f32(q, s, zp);
                let x = (f64::from(v) - f64::from(h)).abs();
                *e = x;
                *m = if x > *m { x } else { *m };
            }
        } else {
            d.row(r, qrow, &mut hat);
            for ((e, &v), &h) in err.iter_mut().zip(row).zip(&hat) {
                *e = (f64::from(v) - f64::from(h)).abs();
            }
        }
        // The sums (layout independent; each loop vectorises); FULL: also the row's squared
        // error, in the same lanes.
        let mut row_sq = Lanes::ZERO;
        if FULL {
            sum_abs.add_sq_row(&mut sum_sq, &mut row_sq, &err);
        } else {
            sum_abs.add_sq(&mut sum_sq, &err);
        }
        if sig_sq_known.is_none() {
            sig_sq.add_sq_f32(row);
        }
        // FULL: |x - x_hat| in f32, written straight into `abs_err`: the f64 error rounded to
        // f32 is the error computed in f32 (`f32_error_of`).
        if FULL {
            abs_err.extend(err.iter().map(|&e| f32_error_of(e)));
            rows.push(RowError {
                sq_err: row_sq.total(),
                bound: bound8[slot],
                limit: limit8[slot],
            });
        }
        // The maxima.
        match shape {
            Shape::Columns { .. } if fused => {}
            Shape::Columns { .. } => {
                for (m, &e) in max64_c.iter_mut().zip(&err) {
                    *m = if e > *m { e } else { *m };
                }
            }
            Shape::Runs { run } => {
                let base = r * q.layout.blocks;
                for (k, e) in err.chunks(run).enumerate() {
                    if let Some(m) = group_max64.get_mut(base + k) {
                        *m = max_lanes(e);
                    }
                }
            }
        }
    }
    if d.block != usize::MAX {
        flush(d.block, &mut max64_c, &mut group_max64);
    }
    ErrorPass {
        sum_abs: sum_abs.total(),
        sum_sq: sum_sq.total(),
        sig_sq: sig_sq_known.unwrap_or_else(|| sig_sq.total()),
        group_max64,
    }
}

/// Everything the page draws about one quantization, from a single pass over the tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// The error statistics ([`try_error_stats`]).
    pub stats: ErrorStats,
    /// Per-group max error and bound ([`group_errors`]).
    pub groups: Vec<GroupError>,
    /// Per-row squared error and bound ([`row_errors`]).
    pub rows: Vec<RowError>,
    /// `|x - x_hat|`, row-major.
    pub abs_err: Vec<f32>,
}

/// [`try_error_stats`], [`group_errors`], [`row_errors`] and `|x - x_hat|` in one pass (the
/// same numbers, computed once; the page calls this on every quantization change).
pub fn analyze(
    x: &Matrix,
    q: &Quantized,
    source_bytes: u64,
    meta: MetaDtype,
) -> Result<Analysis, ShapeMismatch> {
    analyze_reusing(x, q, source_bytes, meta, Vec::new(), Vec::new())
}

/// [`analyze`], writing `|x - x_hat|` into `abs_err` and the rows into `rows` (their contents
/// are dropped, their capacity kept): give it the buffers of an [`Analysis`] no longer needed
/// and a repeated analysis of the same shape allocates no large buffer. The result is the same
/// as [`analyze`]'s.
pub fn analyze_reusing(
    x: &Matrix,
    q: &Quantized,
    source_bytes: u64,
    meta: MetaDtype,
    abs_err: Vec<f32>,
    rows: Vec<RowError>,
) -> Result<Analysis, ShapeMismatch> {
    analyze_memo(x, q, source_bytes, meta, abs_err, rows, &mut None)
}

/// [`analyze_reusing`], taking `sum x^2` (in the `Lanes` order; it depends on `x` only) from
/// `sig_sq` when it holds it, else computing it and leaving it there: a caller that analyses
/// the same tensor again and again (the page, as a quantization control moves) skips that
/// part of the pass. `sig_sq` must only ever be given the same `x` (the lab keeps one per
/// tensor of its data and clears it with the data). The result is the same as [`analyze`]'s.
pub fn analyze_memo(
    x: &Matrix,
    q: &Quantized,
    source_bytes: u64,
    meta: MetaDtype,
    mut abs_err: Vec<f32>,
    mut rows: Vec<RowError>,
    sig_sq: &mut Option<f64>,
) -> Result<Analysis, ShapeMismatch> {
    let x = View::head(x, x.rows());
    check_shape(x, q)?;
    abs_err.clear();
    rows.clear();
    let pass = error_pass::<true>(x, q, &mut abs_err, &mut rows, *sig_sq);
    *sig_sq = Some(pass.sig_sq);
    let stats = pass.stats(x, q, source_bytes, meta);
    let groups = pass
        .group_max64
        .iter()
        .zip(&q.scales)
        .enumerate()
        .map(|(g, (&max64, &s))| GroupError {
            max_abs: f32_error_of(max64),
            bound: s / 2.0,
            limit: f64::from(s) / 2.0 + q.allowance_of(g),
        })
        .collect();
    Ok(Analysis {
        stats,
        groups,
        rows,
        abs_err,
    })
}

/// Measured error of one group against its bound `scale / 2` (note §2.2, per element).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct GroupError {
    /// `max |x - x_hat|` over the group's elements.
    pub max_abs: f32,
    /// The bound `scale / 2`.
    pub bound: f32,
    /// The bound with the group's `f32` round-off allowance, `scale/2 + allowance` in `f64`
    /// from the stored scale (see [`ErrorStats::roundoff`]): the group is within its bound when
    /// `max_abs <= limit`.
    pub limit: f64,
}

/// Per-group maximum error and its bound, in group order (see [`GroupLayout::group_of`]).
pub fn group_errors(x: &Matrix, q: &Quantized) -> Result<Vec<GroupError>, ShapeMismatch> {
    Ok(analyze(x, q, 2, MetaDtype::F16)?.groups)
}

/// Measured squared error of one row (token) against its bound (note §2.2, per vector).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct RowError {
    /// `||x - x_hat||_2^2` over the row's channels, in `f64`, summed in the [`ErrorStats`]
    /// lanes order within the row: channel `c` to lane `c % 8`, each lane in channel order,
    /// the lanes combined as `((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))`.
    pub sq_err: f64,
    /// `1/4 sum_j scale_j^2` with each channel's own group scale.
    pub bound: f64,
    /// The bound with each element's `f32` round-off allowance, `sum_j (scale_j/2 +
    /// allowance_j)^2` in column order (see [`GroupError::limit`]): the row is within its bound
    /// when `sq_err <= limit`.
    pub limit: f64,
}

/// Per-row squared error and its bound `1/4 sum_j scale_j^2`.
pub fn row_errors(x: &Matrix, q: &Quantized) -> Result<Vec<RowError>, ShapeMismatch> {
    Ok(analyze(x, q, 2, MetaDtype::F16)?.rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(rows: usize, cols: usize, d: &[f32]) -> Matrix {
        Matrix::new(rows, cols, d.to_vec()).unwrap()
    }

    #[test]
    fn round_half_even_matches_numpy() {
        let cases = [
            (0.5, 0.0),
            (1.5, 2.0),
            (2.5, 2.0),
            (-0.5, -0.0),
            (-1.5, -2.0),
            (2.4, 2.0),
            (2.6, 3.0),
            (-2.5, -2.0),
        ];
        for (x, want) in cases {
            assert_eq!(round_half_even(x), want, "round({x})");
        }
    }

    #[test]
    fn round_to_i32_is_round_half_even() {
        let mut z = -70_000.25f64;
        while z < 70_000.0 {
            for x in [
                z,
                z + 0.5,
                z + 0.499_999_999_999,
                -z - 0.5,
                z.next_up(),
                z.next_down(),
            ] {
                assert_eq!(round_to_i32(x), round_half_even(x) as i32, "round({x})");
            }
            z += 12.375;
        }
        for x in [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            65535.5,
            -65535.5,
            2_147_483_647.0,
        ] {
            assert_eq!(round_to_i32(x), round_half_even(x) as i32, "round({x})");
        }
    }

    #[test]
    fn round_to_i64_is_round_half_even() {
        let big = 2_251_799_813_685_248.0f64; // 2^51
        for x in [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            2.5,
            -2.5,
            1e9 + 0.5,
            -1e12 - 0.5,
            big - 0.5,
            big,
            -big,
            big * 4.0 + 2.0,
            1e300,
            -1e300,
        ] {
            for x in [x, x.next_up(), x.next_down()] {
                assert_eq!(round_to_i64(x), round_half_even(x) as i64, "round({x})");
            }
        }
        let mut z = -1e6 - 0.25;
        while z < 1e6 {
            assert_eq!(round_to_i64(z), round_half_even(z) as i64, "round({z})");
            z += 1234.125;
        }
    }

    #[test]
    fn symmetric_hand_example() {
        // channel 0: [3.5, -7, 1.75] -> max 7, 4 bits qmax 7, scale 1
        // 3.5 -> 4 (half to even), -7, 1.75 -> 2; channel 1: [14, 0, -5] -> scale 2, -2.5 -> -2
        let x = m(3, 2, &[3.5, 14.0, -7.0, 0.0, 1.75, -5.0]);
        let q = quantize(&x, &QuantConfig::per_channel_symmetric(4)).unwrap();
        assert_eq!(q.codes(), &[4, 7, -7, 0, 2, -2]);
        assert_eq!(q.scales(), &[1.0, 2.0]);
        let hat = q.dequantize();
        assert_eq!(hat.data(), &[4.0, 14.0, -7.0, 0.0, 2.0, -4.0]);
        assert!(q.zero_points().is_empty());
    }

    #[test]
    fn asymmetric_hand_example() {
        // [0, 1, 2, 3] at 2 bits: scale = 3/3 = 1, zp = 0, codes = values
        let x = m(4, 1, &[0.0, 1.0, 2.0, 3.0]);
        let cfg = QuantConfig {
            bits: 2,
            scheme: Scheme::Asymmetric,
            granularity: Granularity::PerChannel,
            group_size: None,
        };
        let q = quantize(&x, &cfg).unwrap();
        assert_eq!(q.codes(), &[0, 1, 2, 3]);
        assert_eq!(q.zero_points(), &[0]);
        assert_eq!(q.dequantize().data(), x.data());
        // one-sided data [2, 4] at 1 bit: scale 2, zp = round(-1) = -1, codes 0 and 1
        let y = m(2, 1, &[2.0, 4.0]);
        let q = quantize(&y, &QuantConfig { bits: 1, ..cfg }).unwrap();
        assert_eq!(q.zero_points(), &[-1]);
        assert_eq!(q.codes(), &[0, 1]);
        assert_eq!(q.dequantize().data(), &[2.0, 4.0]);
    }

    #[test]
    fn granularity_and_groups() {
        // 4 tokens x 2 channels
        let x = m(4, 2, &[1.0, 10.0, 2.0, 20.0, 3.0, 30.0, 4.0, 40.0]);
        let base = QuantConfig::per_channel_symmetric(8);
        let q = quantize(&x, &base).unwrap();
        assert_eq!(q.scales(), &[4.0 / 127.0, 40.0 / 127.0]);
        let q = quantize(
            &x,
            &QuantConfig {
                group_size: Some(2),
                ..base
            },
        )
        .unwrap();
        // channel-major: ch0 rows0-1, ch0 rows2-3, ch1 rows0-1, ch1 rows2-3
        assert_eq!(
            q.scales(),
            &[2.0 / 127.0, 4.0 / 127.0, 20.0 / 127.0, 40.0 / 127.0]
        );
        let q = quantize(
            &x,
            &QuantConfig {
                granularity: Granularity::PerToken,
                ..base
            },
        )
        .unwrap();
        assert_eq!(q.scales().len(), 4);
        assert_eq!(q.scales()[3], 40.0 / 127.0);
        let q = quantize(
            &x,
            &QuantConfig {
                granularity: Granularity::PerTensor,
                ..base
            },
        )
        .unwrap();
        assert_eq!(q.scales(), &[40.0 / 127.0]);
    }

    #[test]
    fn constant_groups_round_trip_exactly() {
        for scheme in [Scheme::Symmetric, Scheme::Asymmetric] {
            for c in [0.0f32, 3.7, -1e-3, 65504.0, f32::from_bits(1)] {
                let x = m(3, 2, &[c; 6]);
                let cfg = QuantConfig {
                    bits: 2,
                    scheme,
                    granularity: Granularity::PerChannel,
                    group_size: None,
                };
                let q = quantize(&x, &cfg).unwrap();
                assert_eq!(q.dequantize().data(), x.data(), "{scheme:?} c={c}");
                let st = error_stats(&x, &q);
                assert_eq!(st.max_abs, 0.0);
                assert!(st.snr_db.is_infinite());
            }
        }
    }

    #[test]
    fn errors_name_value_and_range() {
        let x = m(2, 2, &[1.0, 2.0, 3.0, 4.0]);
        let e = quantize(&x, &QuantConfig::per_channel_symmetric(1)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "bits 1 is out of range: must be between 2 and 16 for symmetric quantization"
        );
        // (the fields the page words it from)
        let fields = serde_json::to_value(&e).expect("serialize");
        assert_eq!(
            fields,
            serde_json::json!({"kind": "bits", "bits": 1, "scheme": "symmetric", "min": 2, "max": 16})
        );
        assert!(quantize(&x, &QuantConfig::per_channel_symmetric(17)).is_err());
        let e = quantize(
            &x,
            &QuantConfig {
                group_size: Some(3),
                ..QuantConfig::per_channel_symmetric(8)
            },
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "group size 3 is out of range: must be between 1 and 2 (tokens per channel)"
        );
        let nan = m(1, 2, &[1.0, f32::NAN]);
        assert!(matches!(
            quantize(&nan, &QuantConfig::per_channel_symmetric(8)),
            Err(QuantError::NonFinite { row: 0, col: 1, .. })
        ));
        let big = m(2, 1, &[-3e38, 3e38]);
        let cfg = QuantConfig {
            bits: 1,
            scheme: Scheme::Asymmetric,
            granularity: Granularity::PerChannel,
            group_size: None,
        };
        assert!(matches!(
            quantize(&big, &cfg),
            Err(QuantError::RangeOverflow { .. })
        ));
    }

    /// Each group is checked against its own allowance: one channel far from zero (1000 ±
    /// 1e-3, where f32 cannot even hold the 8-bit grid) has a large one, and the other channel's
    /// limit stays within a hair of its `scale/2`. A subnormal scale's limit is computed in
    /// `f64`, where `scale/2` does not round to 0.
    #[test]
    fn allowances_are_per_group() {
        let mut d = Vec::new();
        for t in 0..64 {
            d.push(1000.0 + 1e-3 * ((t % 7) as f32 - 3.0) / 3.0);
            d.push(((t * 37) % 64) as f32 / 32.0 - 1.0);
        }
        let x = m(64, 2, &d);
        let cfg = QuantConfig {
            bits: 8,
            scheme: Scheme::Asymmetric,
            granularity: Granularity::PerChannel,
            group_size: None,
        };
        let q = quantize(&x, &cfg).unwrap();
        let a = analyze(&x, &q, 2, MetaDtype::F16).unwrap();
        assert!(a.stats.roundoff > 1.0, "{:?}", a.stats);
        let normal = a.groups[1];
        let half = f64::from(q.scales()[1]) / 2.0;
        assert!(
            normal.limit >= half && normal.limit <= half * (1.0 + 2e-4),
            "{normal:?}"
        );
        assert!(a.groups.iter().all(|g| f64::from(g.max_abs) <= g.limit));
        assert!(a
            .rows
            .iter()
            .all(|r| r.sq_err <= r.limit && r.limit >= r.bound));
        // the far channel's allowance is many times its scale/2 (f32's spacing near 1000 is
        // 6e-5, the grid's 8e-6), and that does not leak into the normal channel above
        assert!(
            a.groups[0].limit > 10.0 * f64::from(a.groups[0].bound),
            "{:?}",
            a.groups[0]
        );

        let tiny = f32::from_bits(1);
        let x = m(2, 1, &[0.0, 4.0 * tiny]);
        let cfg = QuantConfig { bits: 2, ..cfg };
        let q = quantize(&x, &cfg).unwrap();
        let g = group_errors(&x, &q).unwrap()[0];
        assert!(f64::from(g.max_abs) <= g.limit, "{g:?}");
        assert!(g.limit > 0.0);
    }

    #[test]
    fn stats_and_ratio() {
        let x = m(2, 2, &[1.0, -1.0, 0.5, 0.25]);
        let q = quantize(&x, &QuantConfig::per_channel_symmetric(8)).unwrap();
        let st = error_stats(&x, &q);
        // 4 codes x 8 bits = 4 bytes, 2 fp16 scales = 4 bytes; source 8 bytes -> 1.0
        assert_eq!(st.compression_ratio, 1.0);
        assert_eq!(st.compression_ratio_no_meta, 2.0);
        assert!(st.worst_bound_use <= 1.0 + 1e-6);
        // scale 1/127, qmax 127, m = 127: 2^-23 (127 + 127 + 1) / (1/2) = 255 * 2^-22, plus
        // 127 * 2^-149 / (scale/2), far below f64's resolution of that sum
        assert_eq!(st.roundoff, 255.0 / (1u64 << 22) as f64);
        let rows = row_errors(&x, &q).unwrap();
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.sq_err <= r.bound * (1.0 + 1e-6)));
        let wrong = m(1, 1, &[0.0]);
        assert!(error_stats(&wrong, &q).max_abs.is_nan());
        assert!(group_errors(&wrong, &q).is_err());
    }

    #[test]
    fn grid_covers_codes() {
        let x = m(2, 1, &[-1.0, 1.0]);
        let q = quantize(&x, &QuantConfig::per_channel_symmetric(3)).unwrap();
        let g = q.grid(0);
        assert_eq!(g.len(), 7);
        assert_eq!(g[0], -1.0);
        assert_eq!(g[6], 1.0);
        assert!(q.grid(5).is_empty());
    }

    #[test]
    fn the_f64_error_rounded_to_f32_is_the_f32_error() {
        // Random finite f32 pairs over the whole range (any exponent gap, subnormals, both
        // signs), values near one another, and the edges: the derived error must be bit for
        // bit the error computed in f32.
        let mut state = 7u64;
        let mut next = move || crate::rng::splitmix64(&mut state);
        let finite = |b: u32| {
            let v = f32::from_bits(b);
            if v.is_finite() {
                v
            } else {
                f32::MAX
            }
        };
        let check = |v: f32, h: f32| {
            let derived = f32_error_of((f64::from(v) - f64::from(h)).abs());
            let direct = (v - h).abs();
            assert_eq!(derived.to_bits(), direct.to_bits(), "{v:e} - {h:e}");
        };
        for _ in 0..1_000_000 {
            let r = next();
            let (v, h) = (finite(r as u32), finite((r >> 32) as u32));
            check(v, h);
            // A neighbour a few ulps away (what x and x_hat usually are).
            let near = finite(v.to_bits().wrapping_add((r >> 40) as u32 & 0xffff));
            check(v, near);
        }
        let edges = [
            0.0,
            -0.0,
            f32::MIN_POSITIVE,
            1e-45,
            -1e-45,
            f32::EPSILON,
            1.0,
            -1.0,
            1.0 + f32::EPSILON,
            f32::MAX,
            f32::MIN,
            3.4e38,
            16_777_217.0,
        ];
        for &v in &edges {
            for &h in &edges {
                check(v, h);
            }
        }
    }

    #[test]
    fn memoised_extremes_give_the_same_quantization_and_follow_the_layout() {
        // 40 x 6, values spread over signs and magnitudes, one constant column (a special
        // encoding that depends on the extremes).
        let data: Vec<f32> = (0..240)
            .map(|i| {
                if i % 6 == 5 {
                    0.75
                } else {
                    ((i * 37 % 101) as f32 - 50.0) * 0.173
                }
            })
            .collect();
        let x = m(40, 6, &data);
        let mut slot = None;
        let mut found = Vec::new();
        let layouts = [
            (Granularity::PerChannel, None),
            (Granularity::PerChannel, Some(8)),
            (Granularity::PerToken, Some(4)),
            (Granularity::PerTensor, None),
        ];
        for (granularity, group_size) in layouts {
            for scheme in [Scheme::Symmetric, Scheme::Asymmetric] {
                for bits in [2u8, 3, 4, 8] {
                    let c = QuantConfig {
                        bits,
                        scheme,
                        granularity,
                        group_size,
                    };
                    let codes = vec![7; 3]; // a used buffer: its contents must not matter
                    let q = quantize_memo(&x, &c, codes, &mut slot).unwrap();
                    assert_eq!(q, quantize(&x, &c).unwrap(), "{c:?}");
                    let e = slot.as_ref().unwrap();
                    assert_eq!(
                        e.layout,
                        *q.layout(),
                        "the slot holds this layout's extremes"
                    );
                    found.push(std::sync::Arc::as_ptr(e));
                }
            }
        }
        // Found once per layout, then reused for every bits and scheme of it.
        found.dedup();
        assert_eq!(found.len(), layouts.len());
    }

    #[test]
    fn memoised_extremes_keep_reporting_a_non_finite_value() {
        let x = m(2, 2, &[1.0, f32::NAN, 0.5, 2.0]);
        let c = QuantConfig::per_channel_symmetric(4);
        let mut slot = None;
        for _ in 0..2 {
            let err = quantize_memo(&x, &c, Vec::new(), &mut slot).unwrap_err();
            assert!(
                matches!(err, QuantError::NonFinite { row: 0, col: 1, .. }),
                "{err}"
            );
            assert_eq!(err.to_string(), quantize(&x, &c).unwrap_err().to_string());
        }
    }

    #[test]
    fn memoised_signal_energy_gives_the_same_analysis() {
        let data: Vec<f32> = (0..19 * 13)
            .map(|i| ((i * 53 % 89) as f32 - 44.0) * 0.0917)
            .collect();
        let x = m(19, 13, &data);
        let mut sig_sq = None;
        for (bits, scheme) in [
            (4, Scheme::Symmetric),
            (2, Scheme::Asymmetric),
            (8, Scheme::Symmetric),
        ] {
            let c = QuantConfig {
                bits,
                scheme,
                ..QuantConfig::per_channel_symmetric(bits)
            };
            let q = quantize(&x, &c).unwrap();
            let a = analyze_memo(
                &x,
                &q,
                2,
                MetaDtype::F16,
                vec![1.0; 5],
                Vec::new(),
                &mut sig_sq,
            )
            .unwrap();
            assert_eq!(a, analyze(&x, &q, 2, MetaDtype::F16).unwrap(), "{c:?}");
            // The slot holds sum x^2 in the lanes order.
            let mut lanes = [0f64; LANES];
            for (i, &v) in data.iter().enumerate() {
                lanes[i % 13 % LANES] += f64::from(v) * f64::from(v);
            }
            assert_eq!(sig_sq, Some(Lanes(lanes).total()));
        }
        // A held value is taken as it is (the pass skips that sum): here a wrong one shows.
        let q = quantize(&x, &QuantConfig::per_channel_symmetric(4)).unwrap();
        let fresh = analyze(&x, &q, 2, MetaDtype::F16).unwrap().stats;
        let mut held = sig_sq.map(|v| v * 10.0);
        let stats = analyze_memo(&x, &q, 2, MetaDtype::F16, Vec::new(), Vec::new(), &mut held)
            .unwrap()
            .stats;
        assert!((stats.snr_db - fresh.snr_db - 10.0).abs() < 1e-9);
    }
}
