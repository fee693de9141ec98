//! Property tests of the loaders: arbitrary and mutated bytes never panic any parser; the
//! safetensors parser accepts exactly what the reference crate accepts; random tensors written
//! in every .npy layout (by an independent writer here) and as CSV / JSON load back exactly;
//! the attention interpretation keeps softmax rows distributions.

mod common;
use common::*;
use kvlab::io::{
    self, interpret_attention, normalise_rows, safetensors, HeadPick, Limits, LoadError, Tensor,
};
use proptest::prelude::*;

fn fixture(rel: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel);
    std::fs::read(path).unwrap()
}

/// Runs every loader on `bytes`; the point is that none panics.
fn run_all(bytes: &[u8]) {
    let limits = Limits {
        max_bytes: 1 << 20,
        max_elements: 1 << 16,
    };
    for name in ["x.npy", "x.safetensors", "x.csv", "x.json", "x"] {
        if let Ok(f) = io::load(name, bytes, &limits) {
            for t in &f.tensors {
                assert!(!t.tensor.is_empty());
                assert!(t.tensor.data().iter().all(|v| v.is_finite()));
                assert!(t.tensor.rank() <= 4);
                let _ = interpret_attention("a", &t.tensor, HeadPick::Max);
                let _ = io::interpret_kv("k", &t.tensor, io::KvPick { layer: 1, head: 1 });
            }
        }
    }
    let _ = io::npy::load("x", bytes, &limits);
    let _ = safetensors::load_tensor("x", bytes, "a", &limits);
    let _ = io::csv::load("x", bytes, &limits);
    let _ = io::json::load("x", bytes, &limits);
}

/// Flips, truncates or inserts bytes of a valid file.
fn mutate(mut bytes: Vec<u8>, edits: &[(u8, usize, u8)]) -> Vec<u8> {
    for &(kind, pos, value) in edits {
        let len = bytes.len().max(1);
        let at = pos % len;
        match kind % 4 {
            0 if !bytes.is_empty() => bytes[at] = value,
            1 => bytes.truncate(at),
            2 => bytes.insert(at.min(bytes.len()), value),
            _ if !bytes.is_empty() => bytes[at] ^= 1 << (value % 8),
            _ => {}
        }
    }
    bytes
}

const SEEDS: [&str; 8] = [
    "npy/f2_be_f_r3_v3.npy",
    "npy/i8_le_c_r4_v1.npy",
    "npy/b1_na_c_r0_v1.npy",
    "safetensors/all_dtypes.safetensors",
    "capture/head2_f16.safetensors",
    "text/comma_header.csv",
    "text/nested_r3.json",
    "text/object_r2.json",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        run_all(&bytes);
    }

    #[test]
    fn arbitrary_bytes_after_a_valid_prefix_never_panic(
        which in 0usize..4,
        tail in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut bytes = match which {
            0 => b"\x93NUMPY\x01\x00".to_vec(),
            1 => b"\x93NUMPY\x03\x00\x40\x00\x00\x00{'descr': '".to_vec(),
            2 => { let mut b = 40u64.to_le_bytes().to_vec(); b.extend_from_slice(b"{\"a\":{\"dtype\":\"F32\",\"shape\":["); b }
            _ => b"{\"shape\": [".to_vec(),
        };
        bytes.extend_from_slice(&tail);
        run_all(&bytes);
    }

    #[test]
    fn mutated_fixtures_never_panic(
        seed in 0usize..SEEDS.len(),
        edits in proptest::collection::vec((any::<u8>(), any::<usize>(), any::<u8>()), 1..6),
    ) {
        run_all(&mutate(fixture(SEEDS[seed]), &edits));
    }

    /// Same verdict as the reference `safetensors` crate on mutated files.
    #[test]
    fn safetensors_matches_reference_crate(
        seed in prop_oneof![Just("safetensors/all_dtypes.safetensors"), Just("safetensors/unsorted_keys.safetensors"), Just("capture/all_heads.safetensors")],
        edits in proptest::collection::vec((any::<u8>(), any::<usize>(), any::<u8>()), 1..4),
    ) {
        let bytes = mutate(fixture(seed), &edits);
        let ours = safetensors::list("f", &bytes);
        let reference = ::safetensors::SafeTensors::deserialize(&bytes);
        prop_assert_eq!(ours.is_ok(), reference.is_ok(), "ours {:?} reference {:?}", ours.err(), reference.err());
    }
}

/// An independent .npy writer: `values` in C order; writes Fortran order by permuting.
fn write_npy(descr: &str, shape: &[usize], fortran: bool, version: u8, values: &[i16]) -> Vec<u8> {
    let shape_text = match shape.len() {
        0 => "()".to_string(),
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let fortran_text = if fortran { "True" } else { "False" };
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': {fortran_text}, 'shape': {shape_text}, }}");
    let len_size = if version == 1 { 2 } else { 4 };
    while (10 + len_size - 2 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    // Storage order: C, or Fortran (first axis fastest).
    let n = values.len();
    let order: Vec<usize> = if fortran && shape.len() > 1 {
        let mut idx = Vec::with_capacity(n);
        for f in 0..n {
            // Fortran flat f -> multi-index (first axis fastest) -> C flat.
            let mut rest = f;
            let mut c = 0;
            let mut mults = vec![0; shape.len()];
            for (k, &d) in shape.iter().enumerate() {
                mults[k] = rest % d;
                rest /= d;
            }
            for (k, &d) in shape.iter().enumerate() {
                c = c * d + mults[k];
            }
            idx.push(c);
        }
        idx
    } else {
        (0..n).collect()
    };
    let big = descr.starts_with('>');
    for &i in &order {
        let v = values[i];
        let mut bytes: Vec<u8> = match &descr[1..] {
            "f2" => half::f16::from_f32(f32::from(v) * 0.25)
                .to_le_bytes()
                .to_vec(),
            "f4" => (f32::from(v) * 0.25).to_le_bytes().to_vec(),
            "f8" => (f64::from(v) * 0.25).to_le_bytes().to_vec(),
            "i1" => (v as i8).to_le_bytes().to_vec(),
            "i2" => v.to_le_bytes().to_vec(),
            "i4" => i32::from(v).to_le_bytes().to_vec(),
            "i8" => i64::from(v).to_le_bytes().to_vec(),
            "u1" => ((v + 100) as u8).to_le_bytes().to_vec(),
            "u2" => ((v + 100) as u16).to_le_bytes().to_vec(),
            "u4" => ((v + 100) as u32).to_le_bytes().to_vec(),
            "u8" => ((v + 100) as u64).to_le_bytes().to_vec(),
            "b1" => vec![u8::from(v % 2 != 0)],
            other => panic!("{other}"),
        };
        if big {
            bytes.reverse();
        }
        out.extend_from_slice(&bytes);
    }
    out
}

fn expected_value(descr: &str, v: i16) -> f32 {
    match &descr[1..2] {
        "f" => f32::from(v) * 0.25,
        "i" => f32::from(v),
        "u" => f32::from(v + 100),
        _ => f32::from(u8::from(v % 2 != 0)),
    }
}

fn descr_strategy() -> impl Strategy<Value = String> {
    let kinds = [
        "f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "b1",
    ];
    (0usize..kinds.len(), any::<bool>()).prop_map(move |(k, big)| {
        let kind = kinds[k];
        if kind.ends_with('1') {
            format!("|{kind}")
        } else if big {
            format!(">{kind}")
        } else {
            format!("<{kind}")
        }
    })
}

fn shape_and_values() -> impl Strategy<Value = (Vec<usize>, Vec<i16>)> {
    proptest::collection::vec(1usize..5, 0..=4).prop_flat_map(|shape| {
        let n = shape.iter().product::<usize>();
        (Just(shape), proptest::collection::vec(-100i16..=100, n..=n))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn npy_round_trips_every_layout(
        descr in descr_strategy(),
        (shape, values) in shape_and_values(),
        fortran in any::<bool>(),
        version in 1u8..=3,
    ) {
        let bytes = write_npy(&descr, &shape, fortran, version, &values);
        let t = io::npy::load("p.npy", &bytes, &Limits::default()).unwrap();
        prop_assert_eq!(t.shape(), shape.as_slice());
        let want: Vec<f32> = values.iter().map(|&v| expected_value(&descr, v)).collect();
        prop_assert_eq!(t.data(), want.as_slice());
    }

    #[test]
    fn csv_and_json_round_trip(
        rows in 1usize..6,
        cols in 1usize..6,
        seed in proptest::collection::vec(f32_in(-1.0e6, 1.0e6), 36),
        delim in prop_oneof![Just(","), Just("\t"), Just(";"), Just("  ")],
    ) {
        let values: Vec<f32> = seed.iter().copied().take(rows * cols).collect();
        prop_assume!(values.len() == rows * cols);
        let text: String = values
            .chunks(cols)
            .map(|r| r.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(delim) + "\n")
            .collect();
        let t = io::csv::load("p.csv", text.as_bytes(), &Limits::default()).unwrap().tensor;
        prop_assert_eq!(t.shape(), &[rows, cols]);
        prop_assert_eq!(t.data(), values.as_slice());
        let nested: Vec<Vec<f32>> = values.chunks(cols).map(|r| r.to_vec()).collect();
        let json = serde_json::to_vec(&nested).unwrap();
        let j = io::json::load("p.json", &json, &Limits::default()).unwrap();
        prop_assert_eq!(j, t);
    }

    #[test]
    fn softmax_heads_give_distributions(
        h in 1usize..4,
        s in 1usize..6,
        t in 1usize..8,
        logits in proptest::collection::vec(f32_in(-8.0, 8.0), 4 * 6 * 8),
        head in 0usize..4,
    ) {
        let mut data = Vec::with_capacity(h * s * t);
        for row in logits.chunks(t).take(h * s) {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let exp: Vec<f32> = row.iter().map(|v| (v - max).exp()).collect();
            let sum: f32 = exp.iter().sum();
            data.extend(exp.iter().map(|e| e / sum));
        }
        let tensor = Tensor::new(vec![h, s, t], data.clone()).unwrap();
        let mean = interpret_attention("a", &tensor, HeadPick::Mean).unwrap();
        prop_assert!(mean.warnings.is_empty());
        for row in mean.matrix.iter_rows() {
            let sum: f64 = row.iter().map(|&v| f64::from(v)).sum();
            prop_assert!((sum - 1.0).abs() < 1e-4, "row sum {}", sum);
        }
        let sum = interpret_attention("a", &tensor, HeadPick::Sum).unwrap();
        for (m, s) in mean.matrix.data().iter().zip(sum.matrix.data()) {
            prop_assert!((m * h as f32 - s).abs() < 1e-4);
        }
        let picked = interpret_attention("a", &tensor, HeadPick::Head(head));
        // (one head is no axis to pick from: [1, S, T] is used as [S, T], squeezed)
        if head < h || h == 1 {
            let view = picked.unwrap();
            let used = if h == 1 { 0 } else { head };
            prop_assert_eq!(view.matrix.data(), &data[used * s * t..(used + 1) * s * t]);
            let mut scaled = view.matrix.clone();
            let doubled = Tensor::new(vec![s, t], scaled.data().iter().map(|v| v * 2.0).collect()).unwrap();
            let warned = interpret_attention("a", &doubled, HeadPick::Mean).unwrap();
            prop_assert_eq!(warned.warnings.len(), 1);
            prop_assert_eq!(normalise_rows(&mut scaled), 0);
        } else {
            let is_out_of_range = matches!(picked, Err(LoadError::PickOutOfRange { .. }));
            prop_assert!(is_out_of_range);
        }
    }
}
