//! Property tests of the math core's invariants (math-spec §2 and §3) and a comparison with
//! an independent f64 reference implementation written from the spec's formulas.

mod common;
use common::*;
use kvlab::quant::{
    error_stats, group_errors, quantize, round_half_even, row_errors, Granularity, QuantConfig,
    Quantized, Scheme,
};
use kvlab::select::{
    compression_ratio, cumulative_scores, h2o, mass_retained, observation_scores, snapkv,
    streaming_llm, Pooling, Role,
};
use kvlab::Matrix;
use proptest::prelude::*;

fn matrix(max_rows: usize, max_cols: usize) -> impl Strategy<Value = Matrix> {
    (1..=max_rows, 1..=max_cols).prop_flat_map(|(r, c)| {
        prop::collection::vec(
            prop_oneof![
                4 => f32_in(-10.0, 10.0),
                1 => f32_in(-1e4, 1e4),
                1 => Just(0.0f32),
                1 => f32_in(-1e-3, 1e-3),
            ],
            r * c,
        )
        .prop_map(move |d| Matrix::new(r, c, d).unwrap())
    })
}

fn config() -> impl Strategy<Value = QuantConfig> {
    (
        prop_oneof![Just(Scheme::Symmetric), Just(Scheme::Asymmetric)],
        prop_oneof![
            Just(Granularity::PerChannel),
            Just(Granularity::PerToken),
            Just(Granularity::PerTensor)
        ],
        1u8..=16,
        prop::option::of(1usize..=8),
    )
        .prop_map(|(scheme, granularity, bits, g)| QuantConfig {
            bits: if scheme == Scheme::Symmetric {
                bits.max(2)
            } else {
                bits
            },
            scheme,
            granularity,
            group_size: if granularity == Granularity::PerTensor {
                None
            } else {
                g
            },
        })
}

fn fit_group(x: &Matrix, mut c: QuantConfig) -> QuantConfig {
    let axis = match c.granularity {
        Granularity::PerChannel => x.rows(),
        Granularity::PerToken => x.cols(),
        Granularity::PerTensor => return c,
    };
    c.group_size = c.group_size.map(|g| g.min(axis));
    c
}

/// Every element within its group's limit, the stats' worst use within `1 + roundoff`, and
/// each group's allowance no larger than a bound computed from the group's own data (so the
/// allowance cannot grow into a blanket): with `|x_hat| / scale <= m`, `m scale <= qmax scale +
/// max|x| + scale`, the allowance `scale 2^-23 (qmax + m + 1) + qmax 2^-149` is at most
/// `2^-23 (2 qmax scale + max|x| + 2 scale) + qmax 2^-149`.
fn within_limits(x: &Matrix, q: &Quantized) -> Result<(), TestCaseError> {
    let hat = q.dequantize();
    let groups = group_errors(x, q).unwrap();
    let qmax = q.config().qmax() as f64;
    let mut group_abs = vec![0f64; groups.len()];
    for r in 0..x.rows() {
        for col in 0..x.cols() {
            let (v, h) = (x.get(r, col).unwrap(), hat.get(r, col).unwrap());
            let g = q.layout().group_of(r, col);
            let e = (f64::from(v) - f64::from(h)).abs();
            prop_assert!(
                e <= groups[g].limit,
                "e={e} at ({r},{col}) {:?} {:?}",
                groups[g],
                q.config()
            );
            group_abs[g] = group_abs[g].max(f64::from(v.abs()));
        }
    }
    for (g, ge) in groups.iter().enumerate() {
        let s = f64::from(q.scales()[g]);
        prop_assert!(f64::from(ge.max_abs) <= ge.limit, "{ge:?}");
        let most = (2.0 * qmax * s + group_abs[g] + 2.0 * s) / (1u64 << 23) as f64
            + qmax * f64::from(f32::from_bits(1));
        prop_assert!(
            ge.limit - s / 2.0 <= most * (1.0 + 1e-9),
            "{ge:?}: allowance above {most}"
        );
    }
    let st = error_stats(x, q);
    prop_assert!(st.worst_bound_use <= 1.0 + st.roundoff, "{st:?}");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// `|x - x_hat| <= limit` of the element's group for every element, the limit being
    /// `scale/2` plus the allowance the quantizer derives (a fixed slack fails: at 15 bits the
    /// stored scale's rounding alone moves the grid's end by `qmax 2^-24 scale`); each row within
    /// its own limit; and the stats' worst use within `1 + roundoff`.
    #[test]
    fn element_error_within_half_scale(x in matrix(12, 9), c in config()) {
        let c = fit_group(&x, c);
        let q = quantize(&x, &c).unwrap();
        within_limits(&x, &q)?;
    }

    #[test]
    fn row_bound_holds(x in matrix(10, 10), c in config()) {
        let c = fit_group(&x, c);
        let q = quantize(&x, &c).unwrap();
        for (i, r) in row_errors(&x, &q).unwrap().iter().enumerate() {
            prop_assert!(r.sq_err <= r.limit, "row {i}: {r:?}");
            prop_assert!(r.limit >= r.bound, "row {i}: {r:?}");
        }
    }

    /// The same on data far from zero compared with its spread (large zero points, ties near
    /// the grid's ends), where the allowance matters.
    #[test]
    fn bound_use_within_the_round_off_allowance(
        rows in 1usize..12,
        cols in 1usize..12,
        centre in f32_in(-1e3, 1e3),
        spread in prop_oneof![Just(1e-4f32), f32_in(1e-4, 1.0), f32_in(1.0, 100.0)],
        seed in any::<u64>(),
        c in config(),
    ) {
        let mut s = seed | 1;
        let data = (0..rows * cols)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                centre + spread * ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
            })
            .collect();
        let x = Matrix::new(rows, cols, data).unwrap();
        let c = fit_group(&x, c);
        let q = quantize(&x, &c).unwrap();
        within_limits(&x, &q)?;
        for r in row_errors(&x, &q).unwrap() {
            prop_assert!(r.sq_err <= r.limit, "{r:?}");
        }
    }

    #[test]
    fn codes_stay_in_range(x in matrix(8, 8), c in config()) {
        let c = fit_group(&x, c);
        let q = quantize(&x, &c).unwrap();
        let qmax = c.qmax();
        for &code in q.codes() {
            let code = i64::from(code);
            match c.scheme {
                Scheme::Symmetric => prop_assert!((-qmax..=qmax).contains(&code)),
                Scheme::Asymmetric => prop_assert!((0..=qmax).contains(&code)),
            }
        }
        let st = error_stats(&x, &q);
        prop_assert!(st.compression_ratio_no_meta >= 1.0);
        prop_assert!(st.max_abs.is_finite() && st.rmse <= st.max_abs + 1e-12);
    }

    #[test]
    fn asymmetric_uses_the_range_no_worse_on_positive_data(
        (r, c) in (1usize..10, 1usize..6),
        seed in prop::collection::vec(f32_in(0.01, 100.0), 60),
        bits in 2u8..=8,
    ) {
        let d: Vec<f32> = seed.iter().cycle().take(r * c).copied().collect();
        let x = Matrix::new(r, c, d).unwrap();
        let mk = |scheme| QuantConfig { bits, scheme, granularity: Granularity::PerChannel, group_size: None };
        let qs = quantize(&x, &mk(Scheme::Symmetric)).unwrap();
        let qa = quantize(&x, &mk(Scheme::Asymmetric)).unwrap();
        // On all-positive data the asymmetric grid step is never coarser.
        for (a, s) in qa.scales().iter().zip(qs.scales()) {
            prop_assert!(f64::from(*a) <= f64::from(*s) * (1.0 + 1e-6), "asym {a} sym {s}");
        }
        // Range use per channel: the fraction of the code range the channel's codes span.
        let span = |q: &kvlab::quant::Quantized, col: usize| {
            let codes: Vec<i32> = (0..r).map(|row| q.codes()[row * c + col]).collect();
            let lo = *codes.iter().min().unwrap();
            let hi = *codes.iter().max().unwrap();
            f64::from(hi - lo) / (2 * q.config().qmax().max(1)) as f64
        };
        for col in 0..c {
            let column = x.column(col).unwrap();
            if column.iter().all(|&v| v == column[0]) { continue; }
            let asym = span(&qa, col) * 2.0; // asymmetric range is 0..=qmax, not -qmax..=qmax
            prop_assert!(asym + 1e-9 >= span(&qs, col), "channel {col}: asym {asym} sym {}", span(&qs, col));
        }
    }

    #[test]
    fn selection_invariants(
        scores in prop::collection::vec(prop_oneof![f32_in(0.0, 1.0), Just(0.5f32)], 1..60),
        b in 1usize..70, r in 0usize..70,
    ) {
        let t = scores.len();
        let b = b.min(t);
        let s = snapkv(&scores, b, r).unwrap();
        prop_assert_eq!(s.kept.len(), b.min(t));
        let mut all: Vec<usize> = s.kept.iter().chain(&s.dropped).copied().collect();
        all.sort();
        prop_assert_eq!(all, (0..t).collect::<Vec<_>>());
        prop_assert!(s.kept.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(s.dropped.windows(2).all(|w| w[0] < w[1]));
        if r <= b {
            for i in t.saturating_sub(r)..t {
                prop_assert!(s.kept.contains(&i), "recent token {i} dropped");
            }
        }
        // every kept heavy hitter scores at least as high as every dropped older token
        for (&k, role) in s.kept.iter().zip(&s.roles) {
            if *role == Role::Heavy {
                for &d in &s.dropped {
                    prop_assert!(scores[k] > scores[d] || (scores[k] == scores[d] && k < d));
                }
            }
        }
        let ratio = compression_ratio(t, s.kept.len()).unwrap();
        prop_assert!(ratio >= 1.0);
    }

    #[test]
    fn streaming_invariants(t in 1usize..80, b in 1usize..80, s in 0usize..10) {
        let b = b.min(t);
        let s = s.min(b);
        let sel = streaming_llm(t, b, s).unwrap();
        prop_assert_eq!(sel.kept.len(), b);
        for i in 0..s { prop_assert!(sel.kept.contains(&i)); }
        prop_assert!(sel.kept.contains(&(t - 1)) || b == s);
    }

    #[test]
    fn mass_retained_is_monotone_in_budget(a in matrix(6, 30)) {
        let a = Matrix::new(a.rows(), a.cols(), a.data().iter().map(|v| v.abs()).collect()).unwrap();
        let t = a.cols();
        let mut last = -1.0f64;
        for b in 1..=t {
            let sel = h2o(&a, b, 0).unwrap();
            let m: f64 = mass_retained(&a, &sel.kept).unwrap().iter().sum();
            prop_assert!(m >= last - 1e-9, "B={b}: {m} < {last}");
            last = m;
        }
    }
}

// ---- f64 reference, written from math-spec §2 directly ----

fn reference_quant(x: &[f64], bits: u8, scheme: Scheme) -> Vec<f64> {
    let mn = x.iter().copied().fold(f64::INFINITY, f64::min);
    let mx = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    match scheme {
        Scheme::Symmetric => {
            let qmax = f64::from((1u32 << (bits - 1)) - 1);
            let scale = f64::from((mn.abs().max(mx.abs()) / qmax) as f32);
            x.iter()
                .map(|&v| scale * round_half_even(v / scale).clamp(-qmax, qmax))
                .collect()
        }
        Scheme::Asymmetric => {
            let qmax = f64::from((1u32 << bits) - 1);
            let scale = f64::from(((mx - mn) / qmax) as f32);
            let zp = round_half_even(-mn / scale);
            x.iter()
                .map(|&v| scale * (round_half_even(v / scale + zp).clamp(0.0, qmax) - zp))
                .collect()
        }
    }
}

#[test]
fn quantization_matches_the_f64_reference() {
    // Deterministic pseudo-random inputs (xorshift), many shapes and bit widths.
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut checked = 0;
    for case in 0..200 {
        let rows = 1 + (next() * 40.0) as usize;
        let cols = 1 + (next() * 8.0) as usize;
        let spread = [1.0, 100.0, 1e-3][case % 3];
        let offset = if case % 4 == 0 { 5.0 * spread } else { 0.0 };
        let data: Vec<f32> = (0..rows * cols)
            .map(|_| ((next() * 2.0 - 1.0) * spread + offset) as f32)
            .collect();
        let x = Matrix::new(rows, cols, data).unwrap();
        for scheme in [Scheme::Symmetric, Scheme::Asymmetric] {
            for bits in [2u8, 3, 4, 8, 16] {
                let cfg = QuantConfig {
                    bits,
                    scheme,
                    granularity: Granularity::PerChannel,
                    group_size: None,
                };
                let q = quantize(&x, &cfg).unwrap();
                let hat = q.dequantize();
                for c in 0..cols {
                    let col: Vec<f64> =
                        x.column(c).unwrap().iter().map(|&v| f64::from(v)).collect();
                    if col.iter().all(|&v| v == col[0]) {
                        continue; // constant columns use the exact special case
                    }
                    let want = reference_quant(&col, bits, scheme);
                    for (r, w) in want.iter().enumerate() {
                        let got = f64::from(hat.get(r, c).unwrap());
                        assert_eq!(
                            got,
                            f64::from(*w as f32),
                            "case {case} {scheme:?} b={bits} ({r},{c})"
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 10_000);
}

#[test]
fn selection_matches_a_full_sort_reference() {
    let mut state = 7u64;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as f64 / (1u64 << 31) as f64
    };
    for _ in 0..300 {
        let rows = 1 + (next() * 6.0) as usize;
        let t = 1 + (next() * 50.0) as usize;
        // coarse values produce ties on purpose
        let data: Vec<f32> = (0..rows * t)
            .map(|_| ((next() * 4.0).floor() / 4.0) as f32)
            .collect();
        let a = Matrix::new(rows, t, data).unwrap();
        let b = 1 + (next() * t as f64) as usize;
        let b = b.min(t);
        let r = (next() * (t as f64 + 3.0)) as usize;
        // reference: f64 column sums, full sort by (score desc, index asc)
        let scores: Vec<f64> = (0..t)
            .map(|i| (0..rows).map(|s| f64::from(a.get(s, i).unwrap())).sum())
            .collect();
        let recent_start = t.saturating_sub(r);
        let mut older: Vec<usize> = (0..recent_start).collect();
        older.sort_by(|&x, &y| scores[y].partial_cmp(&scores[x]).unwrap().then(x.cmp(&y)));
        let n_heavy = b.saturating_sub(t - recent_start);
        let mut want: Vec<usize> = older
            .into_iter()
            .take(n_heavy)
            .chain(recent_start..t)
            .collect();
        want.sort();
        let want: Vec<usize> = want[want.len().saturating_sub(b)..].to_vec();
        let got = h2o(&a, b, r).unwrap();
        assert_eq!(got.kept, want, "T={t} B={b} r={r}");
        let cs = cumulative_scores(&a);
        for (g, w) in cs.iter().zip(&scores) {
            assert_eq!(*g, *w as f32);
        }
        // SnapKV with the whole history as the window and no pooling equals H2O
        let obs = observation_scores(&a, rows, Pooling::None).unwrap();
        assert_eq!(snapkv(&obs, b, r).unwrap().kept, got.kept);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The one-pass analysis the page uses gives exactly the separate functions' numbers.
    #[test]
    fn one_pass_analysis_matches_the_separate_functions(x in matrix(10, 7), c in config()) {
        let c = fit_group(&x, c);
        let q = quantize(&x, &c).unwrap();
        let a = kvlab::quant::analyze(&x, &q, 2, kvlab::quant::MetaDtype::F16).unwrap();
        prop_assert_eq!(a.stats, error_stats(&x, &q));
        // Reference per-group maxima and per-row sums, from dequantize() and scale_of().
        let hat = q.dequantize();
        let mut gmax = vec![0f32; q.scales().len()];
        for r in 0..x.rows() {
            // The row's squared error in the lanes order (channel c to lane c % 8, the lanes
            // combined pairwise); its bound in channel order.
            let (mut sq, mut bound) = ([0f64; 8], 0f64);
            for col in 0..x.cols() {
                let v = x.get(r, col).unwrap();
                let h = hat.get(r, col).unwrap();
                let g = q.layout().group_of(r, col);
                gmax[g] = gmax[g].max((v - h).abs());
                sq[col % 8] += (f64::from(v) - f64::from(h)).powi(2);
                bound += f64::from(q.scale_of(r, col)).powi(2) / 4.0;
            }
            let sq = ((sq[0] + sq[1]) + (sq[2] + sq[3])) + ((sq[4] + sq[5]) + (sq[6] + sq[7]));
            prop_assert_eq!(a.rows[r].sq_err, sq);
            prop_assert_eq!(a.rows[r].bound, bound);
        }
        for (g, m) in gmax.iter().enumerate() {
            prop_assert_eq!(a.groups[g].max_abs, *m);
            prop_assert_eq!(a.groups[g].bound, q.scales()[g] / 2.0);
        }
        let want: Vec<f32> = x.data().iter().zip(hat.data()).map(|(a, b)| (a - b).abs()).collect();
        prop_assert_eq!(a.abs_err, want);
    }

    /// Quantizing and analysing into buffers left over from another tensor (any size, any
    /// contents) gives what fresh buffers give.
    #[test]
    fn reused_buffers_give_the_same_results(
        x in matrix(10, 7),
        old in matrix(12, 9),
        c in config(),
        c_old in config(),
    ) {
        let c = fit_group(&x, c);
        let c_old = fit_group(&old, c_old);
        let prev_q = quantize(&old, &c_old).unwrap();
        let prev = kvlab::quant::analyze(&old, &prev_q, 2, kvlab::quant::MetaDtype::F16).unwrap();
        let q = kvlab::quant::quantize_reusing(&x, &c, prev_q.into_codes()).unwrap();
        prop_assert_eq!(&q, &quantize(&x, &c).unwrap());
        let a = kvlab::quant::analyze_reusing(
            &x, &q, 2, kvlab::quant::MetaDtype::F16, prev.abs_err, prev.rows,
        )
        .unwrap();
        prop_assert_eq!(a, kvlab::quant::analyze(&x, &q, 2, kvlab::quant::MetaDtype::F16).unwrap());
    }
}
