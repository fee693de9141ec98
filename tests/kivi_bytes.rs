//! Hand-worked byte counts of `kvlab::kivi` (issue 5, "Mixed precision (KIVI style)"), checked
//! against `budget::effective_bits` and `budget::breakdown`.

mod common;
use common::*;
use kvlab::budget::{breakdown, effective_bits, ModelConfig};
use kvlab::kivi::{kivi_bytes, KiviConfig, KiviError};
use kvlab::quant::{MetaDtype, Scheme};
use proptest::prelude::*;

/// K 2 bits in groups of 4 tokens, V 4 bits in groups of 2 channels, 2 fp16 residual tokens.
fn small() -> KiviConfig {
    KiviConfig {
        key_bits: 2,
        key_group: 4,
        value_bits: 4,
        value_group: 2,
        residual: 2,
        meta: MetaDtype::F16,
    }
}

#[test]
fn ten_tokens_four_channels() {
    // T = 10, R = 2: 8 candidates, 8 = 2 full key groups.
    // keys:   codes 8 x 4 x 2 bits = 64 bits = 8 B; groups 4 ch x 2 = 8 -> scales 16 B, zps 16 B;
    //         residual 2 x 4 x 2 B = 16 B; total 56 B.
    // values: codes 8 x 4 x 4 bits = 16 B; groups 8 tokens x 2 = 16 -> 32 B + 32 B;
    //         residual 16 B; total 96 B.
    let b = kivi_bytes(10, 4, 4, &small()).unwrap();
    let k = b.keys;
    assert_eq!(
        (k.quantized_tokens, k.residual_tokens, k.channels),
        (8, 2, 4)
    );
    assert_eq!(
        (
            k.groups,
            k.codes,
            k.scales,
            k.zero_points,
            k.residual,
            k.total
        ),
        (8, 8, 16, 16, 16, 56)
    );
    assert_eq!(k.effective_bits, 56.0 * 8.0 / 40.0);
    assert_eq!(k.quantized_bits, 10.0); // 2 + 32 / 4
    let v = b.values;
    assert_eq!((v.quantized_tokens, v.residual_tokens), (8, 2));
    assert_eq!(
        (
            v.groups,
            v.codes,
            v.scales,
            v.zero_points,
            v.residual,
            v.total
        ),
        (16, 16, 32, 32, 16, 96)
    );
    assert_eq!(v.quantized_bits, 20.0); // 4 + 32 / 2
    assert_eq!((b.total, b.fp16), (152, 160));
    assert_eq!(b.effective_bits, 152.0 * 8.0 / 80.0);
    assert_eq!(b.compression_ratio, 160.0 / 152.0);
    assert_eq!(
        k.quantized_bits,
        effective_bits(2, Scheme::Asymmetric, 4, MetaDtype::F16)
    );
    assert_eq!(
        v.quantized_bits,
        effective_bits(4, Scheme::Asymmetric, 2, MetaDtype::F16)
    );
}

#[test]
fn an_unfinished_key_group_stays_in_fp16() {
    // T = 11, R = 2: 9 candidates. Keys: 2 full groups (8 tokens) quantized, tokens 8, 9, 10
    // in fp16 -> residual 3 x 4 x 2 = 24 B, total 8 + 16 + 16 + 24 = 64 B.
    // Values: all 9 quantized: codes 9 x 4 x 4 bits = 18 B, 18 groups -> 36 + 36 B,
    // residual 16 B, total 106 B.
    let b = kivi_bytes(11, 4, 4, &small()).unwrap();
    assert_eq!((b.keys.quantized_tokens, b.keys.residual_tokens), (8, 3));
    assert_eq!((b.keys.residual, b.keys.total), (24, 64));
    assert_eq!(
        (b.values.quantized_tokens, b.values.residual_tokens),
        (9, 2)
    );
    assert_eq!(
        (b.values.codes, b.values.groups, b.values.total),
        (18, 18, 106)
    );
    assert_eq!((b.total, b.fp16), (170, 176));
    // 15 tokens: 13 candidates -> 12 key tokens in 3 groups, 3 key tokens in fp16
    let b = kivi_bytes(15, 4, 4, &small()).unwrap();
    assert_eq!((b.keys.quantized_tokens, b.keys.residual_tokens), (12, 3));
}

#[test]
fn codes_are_bit_packed_and_short_value_groups_count() {
    // 3 bits: 5 tokens x 3 channels = 15 codes = 45 bits -> 6 bytes
    let cfg = KiviConfig {
        key_bits: 3,
        key_group: 5,
        value_bits: 3,
        value_group: 3,
        residual: 0,
        meta: MetaDtype::F16,
    };
    let b = kivi_bytes(5, 3, 3, &cfg).unwrap();
    assert_eq!((b.keys.codes, b.keys.groups, b.keys.total), (6, 3, 6 + 12));
    assert_eq!(
        (b.values.codes, b.values.groups, b.values.total),
        (6, 5, 6 + 20)
    );
    // value group 2 over 5 channels: groups of 2, 2, 1 -> 3 per token; T = 3, R = 1 -> 2 tokens
    let cfg = KiviConfig {
        value_group: 2,
        residual: 1,
        ..cfg
    };
    let b = kivi_bytes(3, 3, 5, &cfg).unwrap();
    assert_eq!(b.values.groups, 6);
    // fp32 metadata doubles scales and zero points
    let f32_meta = kivi_bytes(
        10,
        4,
        4,
        &KiviConfig {
            meta: MetaDtype::F32,
            ..small()
        },
    )
    .unwrap();
    assert_eq!((f32_meta.keys.scales, f32_meta.keys.zero_points), (32, 32));
    assert_eq!(f32_meta.keys.quantized_bits, 2.0 + 64.0 / 4.0);
}

#[test]
fn residual_covering_everything_or_a_group_larger_than_the_context() {
    // R >= T: nothing quantized, fp16 everywhere
    let b = kivi_bytes(
        10,
        4,
        4,
        &KiviConfig {
            residual: 10,
            ..small()
        },
    )
    .unwrap();
    assert_eq!((b.total, b.fp16, b.effective_bits), (160, 160, 16.0));
    assert_eq!(
        (b.keys.groups, b.keys.codes, b.keys.quantized_bits),
        (0, 0, 0.0)
    );
    // key group 16 > 8 candidates: no key group is full, keys all fp16; values quantized
    let b = kivi_bytes(
        10,
        4,
        4,
        &KiviConfig {
            key_group: 16,
            ..small()
        },
    )
    .unwrap();
    assert_eq!((b.keys.quantized_tokens, b.keys.total), (0, 80));
    assert_eq!(b.values.quantized_tokens, 8);
}

#[test]
fn kivi_2_has_3_effective_bits() {
    // The example: 2 bits, group 32, fp16 scale + min = 2 + 32/32 = 3 bits.
    let cfg = KiviConfig::default();
    assert_eq!(
        (cfg.key_bits, cfg.key_group, cfg.value_group, cfg.residual),
        (2, 32, 32, 128)
    );
    let b = kivi_bytes(4096 + 128, 128, 128, &cfg).unwrap();
    let want = effective_bits(2, Scheme::Asymmetric, 32, MetaDtype::F16);
    assert_eq!(want, 3.0);
    assert_eq!(b.keys.quantized_bits, want);
    assert_eq!(b.values.quantized_bits, want);
    // with the 128-token fp16 residual: (4096 x 3 + 128 x 16) / 4224 bits per element
    let whole = (4096.0 * 3.0 + 128.0 * 16.0) / 4224.0;
    assert!((b.keys.effective_bits - whole).abs() < 1e-12);
    assert!((b.effective_bits - whole).abs() < 1e-12);
    assert_eq!(b.keys.codes, 4096 * 128 * 2 / 8);
    assert_eq!(b.keys.groups, 128 * 4096 / 32);
    assert_eq!(b.values.groups, 4096 * 128 / 32);
}

#[test]
fn the_model_breakdown_matches_when_the_key_groups_are_full() {
    // 1 layer, 1 KV head, d_head 4, fp16: the same cache as `ten_tokens_four_channels`
    let m = ModelConfig {
        name: "tiny".into(),
        layers: 1,
        n_kv_heads: 1,
        n_heads: 1,
        d_head: 4,
        fp_bytes: 2,
        mla_latent: None,
        sliding: None,
    };
    let b = breakdown(&m, &small().compression(10, 10)).unwrap();
    assert_eq!(b.m_final, 152);
    assert_eq!(b.m_codes, 8 + 16);
    assert_eq!(b.m_scales + b.m_zero_points, 32 + 64);
    assert_eq!(b.m_fp_kept, 16 + 16);
    assert_eq!(b.m_fp, 160);
    // a partial key group: the model-level count quantizes it, kivi keeps it in fp16
    let b = breakdown(&m, &small().compression(11, 11)).unwrap();
    assert_ne!(b.m_final, kivi_bytes(11, 4, 4, &small()).unwrap().total);
}

#[test]
fn byte_errors_name_the_value_and_the_range() {
    let e = |cfg: KiviConfig| kivi_bytes(10, 4, 4, &cfg).unwrap_err().to_string();
    assert_eq!(
        e(KiviConfig {
            key_bits: 0,
            ..small()
        }),
        "key bits 0 is out of range: must be between 1 and 16 (asymmetric quantization; KIVI uses 2)"
    );
    assert_eq!(
        e(KiviConfig {
            value_bits: 17,
            ..small()
        }),
        "value bits 17 is out of range: must be between 1 and 16 (asymmetric quantization; KIVI uses 2)"
    );
    assert_eq!(
        e(KiviConfig {
            key_group: 0,
            ..small()
        }),
        "key group 0 is out of range: must be at least 1 token (KIVI uses 32 to 128)"
    );
    assert_eq!(
        e(KiviConfig {
            value_group: 5,
            ..small()
        }),
        "value group 5 is out of range: must be between 1 and 4 (the value channels; KIVI uses 32 to 128)"
    );
    assert_eq!(
        e(KiviConfig {
            value_group: 0,
            ..small()
        }),
        "value group 0 is out of range: must be between 1 and 4 (the value channels; KIVI uses 32 to 128)"
    );
    assert_eq!(
        kivi_bytes(0, 4, 4, &small()).unwrap_err().to_string(),
        "tokens 0 is out of range: must be at least 1"
    );
    assert_eq!(
        kivi_bytes(4, 0, 4, &small()).unwrap_err(),
        KiviError::Dimension {
            field: "key channels",
            value: 0
        }
    );
    assert_eq!(
        kivi_bytes(
            usize::MAX,
            usize::MAX,
            4,
            &KiviConfig {
                residual: 0,
                ..small()
            }
        )
        .unwrap_err(),
        KiviError::Overflow
    );
}

proptest! {
    /// The accounting adds up, follows the remainder rule, and the quantized part costs
    /// `budget::effective_bits` up to the last partly filled code byte.
    #[test]
    fn accounting_invariants(
        t in 1usize..600,
        dk in 1usize..40,
        dv in 1usize..40,
        kb in 1u8..=16,
        vb in 1u8..=16,
        kg in 1usize..70,
        vg_frac in f64_in(0.0, 1.0),
        r in 0usize..80,
        f32_meta in any::<bool>(),
    ) {
        let vg = 1 + ((dv - 1) as f64 * vg_frac) as usize;
        let meta = if f32_meta { MetaDtype::F32 } else { MetaDtype::F16 };
        let cfg = KiviConfig { key_bits: kb, key_group: kg, value_bits: vb, value_group: vg, residual: r, meta };
        let b = kivi_bytes(t, dk, dv, &cfg).unwrap();
        for (s, bits, g, d) in [(b.keys, kb, kg, dk), (b.values, vb, vg, dv)] {
            prop_assert_eq!(s.total, s.codes + s.scales + s.zero_points + s.residual);
            prop_assert_eq!(s.quantized_tokens + s.residual_tokens, t);
            prop_assert_eq!(s.scales, s.zero_points);
            prop_assert_eq!(s.residual, (s.residual_tokens * d * 2) as u64);
            let n = (s.quantized_tokens * d) as f64;
            if n > 0.0 && (s == b.keys || d % g == 0) {
                let want = effective_bits(bits, Scheme::Asymmetric, g as u64, meta);
                prop_assert!((s.quantized_bits - want).abs() <= 8.0 / n + 1e-12, "{} vs {}", s.quantized_bits, want);
            }
        }
        // remainder rule
        let (nk, nv) = (b.keys.quantized_tokens, b.values.quantized_tokens);
        prop_assert_eq!(nv, t.saturating_sub(r));
        prop_assert_eq!(nk % kg, 0);
        prop_assert!(nk <= nv && nv - nk < kg);
        prop_assert_eq!(b.fp16, (t * (dk + dv) * 2) as u64);
        prop_assert!(b.effective_bits > 0.0);
    }
}
