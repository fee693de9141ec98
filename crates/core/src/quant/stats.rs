//! The quantizer's error statistics and bounds (note §2.2, §2.4): `max |x - x_hat|`, mean,
//! RMSE and SNR, each group's error against `scale / 2` and each row's against
//! `1/4 sum_j scale_j^2`, and the compression ratio with metadata counted, from one pass over
//! the tensor in an order that gives every target the same bits.

use super::*;

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
pub(super) struct Lanes(pub(super) [f64; LANES]);

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
    pub(super) fn total(&self) -> f64 {
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
pub(super) fn f32_error_of(e64: f64) -> f32 {
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
