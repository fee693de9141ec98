//! The quantizer's specialised kernels (per-channel / per-tensor row blocks, per-token runs,
//! lane-split sums) against straightforward element-by-element references written from the
//! formulas in `src/quant.rs`: codes, scales, zero points and `x_hat` bit for bit; the error
//! statistics bit for bit against the documented summation order (element `(r, c)` in lane
//! `c % 8`, lanes combined as `((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))`, the expected
//! MSE per group in group order) and to 1e-12 against plain element-order sums.

mod common;
use common::*;
use kvlab::chart::{error_heatmap_rgba, Colormap};
use kvlab::kivi::{kivi_quantize, KiviConfig};
use kvlab::quant::{
    analyze, error_stats, quantize, round_half_even, try_error_stats, ErrorStats, Granularity,
    MetaDtype, QuantConfig, Quantized, Scheme,
};
use kvlab::Matrix;
use proptest::prelude::*;

/// The reference quantizer: per group, then per element, straight from the formulas.
fn reference(x: &Matrix, c: &QuantConfig) -> (Vec<i32>, Vec<f32>, Vec<i64>) {
    let q = quantize(x, c).expect("valid config");
    let layout = q.layout();
    let n_groups = layout.groups();
    let mut lo = vec![f32::INFINITY; n_groups];
    let mut hi = vec![f32::NEG_INFINITY; n_groups];
    for r in 0..x.rows() {
        for col in 0..x.cols() {
            let g = layout.group_of(r, col);
            let v = x.get(r, col).unwrap();
            lo[g] = lo[g].min(v);
            hi[g] = hi[g].max(v);
        }
    }
    let qmax = c.qmax() as f64;
    let mut scales = vec![0f32; n_groups];
    let mut zps = vec![0i64; n_groups];
    for g in 0..n_groups {
        let (mn, mx) = (lo[g], hi[g]);
        if mn == mx {
            scales[g] = mn.abs();
            zps[g] = if mn > 0.0 {
                -1
            } else if mn < 0.0 {
                1
            } else {
                0
            };
            continue;
        }
        let raw = match c.scheme {
            Scheme::Symmetric => f64::from(mn.abs().max(mx.abs())) / qmax,
            Scheme::Asymmetric => (f64::from(mx) - f64::from(mn)) / qmax,
        };
        let mut s = raw as f32;
        if s == 0.0 {
            s = f32::from_bits(1);
        }
        scales[g] = s;
        zps[g] = round_half_even(-f64::from(mn) / f64::from(s)) as i64;
    }
    let mut codes = Vec::new();
    for r in 0..x.rows() {
        for col in 0..x.cols() {
            let g = layout.group_of(r, col);
            let v = x.get(r, col).unwrap();
            let s = f64::from(scales[g]);
            let constant = lo[g] == hi[g];
            codes.push(match c.scheme {
                Scheme::Symmetric if constant => {
                    if v > 0.0 {
                        1
                    } else if v < 0.0 {
                        -1
                    } else {
                        0
                    }
                }
                Scheme::Symmetric => round_half_even((f64::from(v) / s).clamp(-qmax, qmax)) as i32,
                Scheme::Asymmetric if constant => 0,
                Scheme::Asymmetric => {
                    round_half_even((f64::from(v) / s + zps[g] as f64).clamp(0.0, qmax)) as i32
                }
            });
        }
    }
    if c.scheme == Scheme::Symmetric {
        zps.clear();
    }
    (codes, scales, zps)
}

/// `x_hat` element by element: `(scale * (q - zp)) as f32` with `q - zp` in integers.
fn reference_hat(q: &Quantized) -> Vec<f32> {
    let mut out = Vec::new();
    for r in 0..q.rows() {
        for col in 0..q.cols() {
            let g = q.layout().group_of(r, col);
            let code = q.codes()[r * q.cols() + col];
            let zp = q.zero_points().get(g).copied().unwrap_or(0);
            out.push((f64::from(q.scales()[g]) * (i64::from(code) - zp) as f64) as f32);
        }
    }
    out
}

fn combine(a: &[f64; 8]) -> f64 {
    ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}

/// Element counts of each group.
fn group_counts(q: &Quantized) -> Vec<usize> {
    let mut n = vec![0usize; q.scales().len()];
    for r in 0..q.rows() {
        for col in 0..q.cols() {
            n[q.layout().group_of(r, col)] += 1;
        }
    }
    n
}

/// The error statistics in the documented order, element by element.
fn reference_stats(x: &Matrix, q: &Quantized, hat: &[f32]) -> ErrorStats {
    let (mut abs, mut sq, mut sig) = ([0f64; 8], [0f64; 8], [0f64; 8]);
    let mut gmax = vec![0f64; q.scales().len()];
    for r in 0..x.rows() {
        for col in 0..x.cols() {
            let v = f64::from(x.get(r, col).unwrap());
            let e = (v - f64::from(hat[r * x.cols() + col])).abs();
            abs[col % 8] += e;
            sq[col % 8] += e * e;
            sig[col % 8] += v * v;
            let g = q.layout().group_of(r, col);
            gmax[g] = gmax[g].max(e);
        }
    }
    let n = x.data().len() as f64;
    let (sum_abs, sum_sq, sig_sq) = (combine(&abs), combine(&sq), combine(&sig));
    let exp = q
        .scales()
        .iter()
        .zip(group_counts(q))
        .fold(0f64, |acc, (&s, count)| {
            let s = f64::from(s);
            acc + count as f64 * (s * s / 12.0)
        });
    let worst = gmax
        .iter()
        .zip(q.scales())
        .filter(|&(_, &s)| s > 0.0)
        .map(|(&e, &s)| e / (f64::from(s) / 2.0))
        .fold(0f64, f64::max);
    let st = error_stats(x, q);
    ErrorStats {
        max_abs: gmax.iter().copied().fold(0f64, f64::max),
        mean_abs: sum_abs / n,
        rmse: (sum_sq / n).sqrt(),
        snr_db: if sum_sq == 0.0 {
            f64::INFINITY
        } else {
            10.0 * (sig_sq / sum_sq).log10()
        },
        expected_mse: exp / n,
        worst_bound_use: worst,
        roundoff: q.roundoff(),
        // byte accounting is not what this file tests
        compression_ratio: st.compression_ratio,
        compression_ratio_no_meta: st.compression_ratio_no_meta,
    }
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

/// Checks every output of `quantize`, `dequantize`, `error_stats` and `analyze` against the
/// references.
fn check(x: &Matrix, c: &QuantConfig) -> Result<(), TestCaseError> {
    let q = quantize(x, c).unwrap();
    let (codes, scales, zps) = reference(x, c);
    prop_assert_eq!(q.codes(), &codes[..], "codes {:?}", c);
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    prop_assert_eq!(bits(q.scales()), bits(&scales), "scales {:?}", c);
    prop_assert_eq!(q.zero_points(), &zps[..], "zero points {:?}", c);
    let hat = reference_hat(&q);
    prop_assert_eq!(bits(q.dequantize().data()), bits(&hat), "x_hat {:?}", c);
    let mut into = vec![f32::NAN; hat.len()];
    q.dequantize_into(&mut into);
    prop_assert_eq!(bits(&into), bits(&hat));
    // a shorter buffer is filled as far as it goes
    let mut short = vec![f32::NAN; hat.len() / 2 + 1];
    q.dequantize_into(&mut short);
    prop_assert_eq!(bits(&short), bits(&hat[..short.len()]));

    let want = reference_stats(x, &q, &hat);
    let got = error_stats(x, &q);
    prop_assert_eq!(got, want, "stats {:?}", c);
    prop_assert_eq!(try_error_stats(x, &q, 2, MetaDtype::F16).unwrap(), got);
    // and close to plain element-order sums
    let (mut sa, mut ss, mut sg) = (0f64, 0f64, 0f64);
    for (&v, &h) in x.data().iter().zip(&hat) {
        let e = (f64::from(v) - f64::from(h)).abs();
        sa += e;
        ss += e * e;
        sg += f64::from(v) * f64::from(v);
    }
    let n = x.data().len() as f64;
    prop_assert!(
        close(got.mean_abs, sa / n),
        "{} vs {}",
        got.mean_abs,
        sa / n
    );
    prop_assert!(close(got.rmse, (ss / n).sqrt()));
    if ss > 0.0 && sg > 0.0 {
        prop_assert!((got.snr_db - 10.0 * (sg / ss).log10()).abs() < 1e-9);
    }

    let a = analyze(x, &q, 2, MetaDtype::F16).unwrap();
    prop_assert_eq!(a.stats, got);
    let want_err: Vec<f32> = x
        .data()
        .iter()
        .zip(&hat)
        .map(|(v, h)| (v - h).abs())
        .collect();
    prop_assert_eq!(bits(&a.abs_err), bits(&want_err));
    let mut gmax = vec![0f32; q.scales().len()];
    prop_assert_eq!(a.rows.len(), x.rows());
    for r in 0..x.rows() {
        // The row's squared error in the lanes order (channel c to lane c % 8); its bound
        // in channel order.
        let (mut sq, mut bound) = ([0f64; 8], 0f64);
        for col in 0..x.cols() {
            let i = r * x.cols() + col;
            let g = q.layout().group_of(r, col);
            gmax[g] = gmax[g].max(want_err[i]);
            sq[col % 8] += (f64::from(x.data()[i]) - f64::from(hat[i])).powi(2);
            bound += f64::from(q.scale_of(r, col)).powi(2) / 4.0;
        }
        prop_assert_eq!(a.rows[r].sq_err, combine(&sq), "row {} {:?}", r, c);
        prop_assert_eq!(a.rows[r].bound, bound, "row {} {:?}", r, c);
    }
    for (g, m) in gmax.iter().enumerate() {
        prop_assert_eq!(a.groups[g].max_abs, *m);
        prop_assert_eq!(a.groups[g].bound, q.scales()[g] / 2.0);
    }
    Ok(())
}

/// Values of one of several kinds: mixed signs, positive only, negative only, few distinct
/// values (constant groups, exact ties at half steps), tiny, large.
fn values(n: usize) -> impl Strategy<Value = Vec<f32>> {
    prop_oneof![
        prop::collection::vec(f32_in(-10.0, 10.0), n),
        prop::collection::vec(f32_in(0.5, 100.0), n),
        prop::collection::vec(f32_in(-100.0, -0.01), n),
        prop::collection::vec((-4i32..=4).prop_map(|k| k as f32 * 0.25), n),
        prop::collection::vec(prop_oneof![Just(0.0f32), Just(3.5), Just(-1.0)], n),
        prop::collection::vec(f32_in(-1e-30, 1e-30), n),
        prop::collection::vec(prop_oneof![f32_in(-1e4, 1e4), Just(0.0)], n),
    ]
}

fn matrix() -> impl Strategy<Value = Matrix> {
    (1usize..=40, 1usize..=40)
        .prop_flat_map(|(r, c)| values(r * c).prop_map(move |d| Matrix::new(r, c, d).unwrap()))
}

fn config(x: &Matrix) -> impl Strategy<Value = QuantConfig> {
    let (rows, cols) = (x.rows(), x.cols());
    (
        prop_oneof![Just(Scheme::Symmetric), Just(Scheme::Asymmetric)],
        prop_oneof![
            Just(Granularity::PerChannel),
            Just(Granularity::PerToken),
            Just(Granularity::PerTensor)
        ],
        prop_oneof![4 => 2u8..=8, 1 => Just(1u8), 1 => Just(16u8)],
        prop::option::of(1usize..=40),
    )
        .prop_map(move |(scheme, granularity, bits, g)| {
            let axis = match granularity {
                Granularity::PerChannel => rows,
                Granularity::PerToken => cols,
                Granularity::PerTensor => 1,
            };
            QuantConfig {
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
                    g.map(|g| g.min(axis))
                },
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn kernels_match_the_element_by_element_reference(
        (x, c) in matrix().prop_flat_map(|x| { let c = config(&x); (Just(x), c) })
    ) {
        check(&x, &c)?;
    }
}

/// Larger shapes (full 8-lane chunks and remainders, groups that do not divide the axis,
/// row counts that are not a multiple of 8), every bit width 2..=8, both schemes, every layout.
#[test]
fn larger_shapes_match_the_reference() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    for (rows, cols) in [(1, 131), (131, 1), (67, 45), (100, 128), (33, 64)] {
        let data: Vec<f32> = (0..rows * cols)
            .map(|i| {
                let v = (next() * 2.0 - 1.0) * if i % 37 == 0 { 40.0 } else { 3.0 };
                v as f32
            })
            .collect();
        let x = Matrix::new(rows, cols, data).unwrap();
        for scheme in [Scheme::Symmetric, Scheme::Asymmetric] {
            for bits in 2..=8u8 {
                for (granularity, group) in [
                    (Granularity::PerChannel, None),
                    (Granularity::PerChannel, Some(32)),
                    (Granularity::PerChannel, Some(7)),
                    (Granularity::PerToken, None),
                    (Granularity::PerToken, Some(32)),
                    (Granularity::PerToken, Some(5)),
                    (Granularity::PerTensor, None),
                ] {
                    let axis = if granularity == Granularity::PerChannel {
                        rows
                    } else {
                        cols
                    };
                    let c = QuantConfig {
                        bits,
                        scheme,
                        granularity,
                        group_size: group.map(|g: usize| g.min(axis)),
                    };
                    check(&x, &c).unwrap_or_else(|e| panic!("{rows}x{cols} {c:?}: {e}"));
                }
            }
        }
    }
}

/// Narrow one-sided ranges far from zero give zero points beyond 2^24 at high bit widths, which
/// take the `f64` (not the `f32`) dequantization path; both must match the reference.
#[test]
fn large_zero_points_match_the_reference() {
    for (rows, cols) in [(9, 5), (40, 33)] {
        let data: Vec<f32> = (0..rows * cols)
            .map(|i| 1000.0 + ((i * 37) % 23) as f32 * 0.000_061)
            .collect();
        let x = Matrix::new(rows, cols, data).unwrap();
        for bits in [8u8, 12, 16] {
            for (granularity, group) in [
                (Granularity::PerChannel, None),
                (Granularity::PerChannel, Some(4)),
                (Granularity::PerToken, Some(4)),
                (Granularity::PerTensor, None),
            ] {
                let c = QuantConfig {
                    bits,
                    scheme: Scheme::Asymmetric,
                    granularity,
                    group_size: group,
                };
                let q = quantize(&x, &c).unwrap();
                if bits == 16 && granularity == Granularity::PerTensor {
                    assert!(q.zero_points()[0].abs() > 1 << 24, "{:?}", q.zero_points());
                }
                check(&x, &c).unwrap_or_else(|e| panic!("{rows}x{cols} {c:?}: {e}"));
            }
        }
    }
}

/// KIVI's tensor errors: the documented order (flat index `i` in lane `i % 8`, lanes combined
/// as above) bit for bit, and close to plain sums.
#[test]
fn kivi_tensor_error_uses_the_documented_order() {
    let (t, d) = (203, 21);
    let k: Vec<f32> = (0..t * d)
        .map(|i| ((i * 7919) % 113) as f32 * 0.37 - 20.0)
        .collect();
    let v: Vec<f32> = (0..t * d)
        .map(|i| ((i * 104_729) % 97) as f32 * -0.11 + 3.0)
        .collect();
    let k = Matrix::new(t, d, k).unwrap();
    let v = Matrix::new(t, d, v).unwrap();
    let cfg = KiviConfig {
        key_group: 32,
        value_group: 8,
        residual: 17,
        ..KiviConfig::default()
    };
    let r = kivi_quantize(&k, &v, &cfg).unwrap();
    for (x, hat, e) in [
        (&k, &r.keys_hat, r.key_error),
        (&v, &r.values_hat, r.value_error),
    ] {
        let (mut abs, mut sq, mut sig) = ([0f64; 8], [0f64; 8], [0f64; 8]);
        let mut max = 0f64;
        for (i, (&a, &b)) in x.data().iter().zip(hat.data()).enumerate() {
            let err = (f64::from(a) - f64::from(b)).abs();
            max = max.max(err);
            abs[i % 8] += err;
            sq[i % 8] += err * err;
            sig[i % 8] += f64::from(a) * f64::from(a);
        }
        let n = x.data().len() as f64;
        assert_eq!(e.max_abs, max);
        assert_eq!(e.mean_abs, combine(&abs) / n);
        assert_eq!(e.rmse, (combine(&sq) / n).sqrt());
        assert_eq!(e.snr_db, 10.0 * (combine(&sig) / combine(&sq)).log10());
    }
}

/// Max-pooling `|x - x_hat|` to pixels (tokens along x, channels down y), cell by cell: the
/// pixel `(px, py)` covers tokens `floor(px T / W) .. max(that + 1, floor((px + 1) T / W))`
/// and likewise channels (when the output is larger than the grid each pixel takes the cell it
/// falls in); colour index `round(255 v (1 / max))` clamped, a step at 0 when `max` is 0.
fn reference_error_pixels(
    err: &[f32],
    t: usize,
    d: usize,
    w: usize,
    h: usize,
    max_err: f32,
) -> Vec<u8> {
    let range = |o: usize, n: usize, m: usize| {
        let start = (o * n / m).min(n - 1);
        start..((o + 1) * n / m).max(start + 1).min(n)
    };
    let lut = Colormap::Viridis.lut();
    let mut out = Vec::new();
    for py in 0..h {
        for px in 0..w {
            let mut m = f32::NEG_INFINITY;
            for tok in range(px, t, w) {
                for ch in range(py, d, h) {
                    let v = err[tok * d + ch];
                    if v > m {
                        m = v;
                    }
                }
            }
            if m == f32::NEG_INFINITY {
                out.extend_from_slice(&[0, 0, 0, 0]);
                continue;
            }
            let idx = if max_err > 0.0 {
                let u = m * (1.0 / max_err);
                if u >= 1.0 {
                    255
                } else if u > 0.0 {
                    (u * 255.0 + 0.5) as usize
                } else {
                    0
                }
            } else if m > 0.0 {
                255
            } else {
                0
            };
            let [r, g, b] = lut[idx.min(255)];
            out.extend_from_slice(&[r, g, b, 255]);
        }
    }
    out
}

#[test]
fn error_heatmap_pixels_match_cell_by_cell_pooling() {
    let mut s = 7u32;
    for (t, d) in [(1, 1), (1, 9), (9, 1), (37, 11), (300, 17), (1000, 128)] {
        let err: Vec<f32> = (0..t * d)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 8) as f32 / (1u32 << 24) as f32
            })
            .collect();
        let max_err = err.iter().copied().fold(0f32, f32::max);
        for (w, h) in [
            (1, 1),
            (3, 2),
            (7, 5),
            (40, 12),
            (123, 64),
            (1500, 200),
            (64, 300),
        ] {
            for m in [max_err, max_err * 0.5, 0.0] {
                let got = error_heatmap_rgba(&err, t, d, w, h, Colormap::Viridis, m).unwrap();
                let want = reference_error_pixels(&err, t, d, w as usize, h as usize, m);
                assert_eq!(got, want, "{t}x{d} -> {w}x{h}, max {m}");
            }
        }
    }
}

/// The error heatmap's colour range is the largest per-group maximum of the analysis (one pass
/// over the groups): it must equal the largest `|x - x_hat|` over every element.
#[test]
fn largest_group_error_is_the_largest_element_error() {
    use kvlab::lab::Lab;
    use kvlab::state::Settings;
    let base = Settings {
        tokens: 300,
        steps: 20,
        channels: 12,
        budget: 60,
        recent: 10,
        window: 4,
        future: 4,
        ..Settings::default()
    };
    for (granularity, group) in [
        (Granularity::PerChannel, 1),
        (Granularity::PerChannel, 32),
        (Granularity::PerToken, 5),
        (Granularity::PerTensor, 1),
    ] {
        for (scheme, bits) in [(Scheme::Symmetric, 2), (Scheme::Asymmetric, 5)] {
            let s = Settings {
                granularity,
                group,
                scheme,
                bits,
                ..base.clone()
            };
            let lab = Lab::new(s).unwrap();
            let q = lab.quant();
            let by_element = q.abs_err.iter().copied().fold(0f32, f32::max);
            let by_group = q.groups.iter().map(|g| g.max_abs).fold(0f32, f32::max);
            assert_eq!(
                by_group.to_bits(),
                by_element.to_bits(),
                "{granularity:?} {scheme:?}"
            );
            if granularity == Granularity::PerTensor {
                assert!(by_element > 0.0);
            }
        }
    }
}
