//! The quantizer's unit tests (the property tests are in `tests/`).

use super::stats::{f32_error_of, Lanes};
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
