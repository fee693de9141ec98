//! Loaders against fixtures written by numpy (scripts/make_fixtures.py): every dtype, byte
//! order, memory order, rank and .npy version, plus safetensors, CSV/TSV/text and JSON, compared
//! value by value with the closed forms the script used (`i * 0.5 - 3`, `i - 3`, `i`,
//! `i % 3 == 0` over the C-order flat index `i`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kvlab::io::{
    self, check_kv_pair, check_same_tokens, interpret_attention, interpret_kv, npy, safetensors,
    AttentionKind, Format, HeadPick, KvPick, Limits, LoadError,
};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn manifest() -> Vec<Value> {
    let text = std::fs::read_to_string(root().join("manifest.json")).unwrap();
    serde_json::from_str::<Vec<Value>>(&text).unwrap()
}

fn entries(format: &str) -> Vec<Value> {
    let all: Vec<Value> = manifest()
        .into_iter()
        .filter(|e| e["format"] == format)
        .collect();
    assert!(!all.is_empty(), "no {format} fixtures in the manifest");
    all
}

fn shape_of(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect()
}

/// The closed form the fixture script used, evaluated in f64 and rounded once to f32.
fn expected(kind: &str, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let i = i as f64;
            let v = match kind {
                "half_minus_3" => i * 0.5 - 3.0,
                "minus_3" => i - 3.0,
                "arange" => i,
                "mod3" => f64::from(u8::from(i % 3.0 == 0.0)),
                other => panic!("unknown formula {other}"),
            };
            v as f32
        })
        .collect()
}

fn assert_values(label: &str, got: &[f32], kind: &str) {
    let want = expected(kind, got.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            g.to_bits(),
            w.to_bits(),
            "{label}: flat index {i}: got {g}, want {w}"
        );
    }
}

#[test]
fn every_npy_fixture_matches_its_formula() {
    let limits = Limits::default();
    let mut count = 0;
    for e in entries("npy") {
        let rel = e["file"].as_str().unwrap();
        let bytes = read(rel);
        let header = npy::read_header(rel, &bytes).unwrap();
        assert_eq!(header.dtype.descr(), e["descr"].as_str().unwrap(), "{rel}");
        assert_eq!(
            header.fortran_order,
            e["fortran_order"].as_bool().unwrap(),
            "{rel}"
        );
        let version = shape_of(&e["version"]);
        assert_eq!(
            vec![header.version.0 as usize, header.version.1 as usize],
            version,
            "{rel}"
        );
        let file = io::load(rel, &bytes, &limits).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(file.format, Format::Npy);
        assert_eq!(file.tensors.len(), 1);
        let t = &file.tensors[0].tensor;
        assert_eq!(t.shape(), shape_of(&e["shape"]).as_slice(), "{rel}");
        assert_values(rel, t.data(), e["values"].as_str().unwrap());
        count += 1;
    }
    assert_eq!(count, 210);
}

#[test]
fn npy_fixtures_cover_every_dtype_order_rank_and_version() {
    // descr -> {(rank, fortran, major version)}
    let mut seen: BTreeMap<String, BTreeSet<(usize, bool, usize)>> = BTreeMap::new();
    for e in entries("npy") {
        seen.entry(e["descr"].as_str().unwrap().to_string())
            .or_default()
            .insert((
                shape_of(&e["shape"]).len(),
                e["fortran_order"].as_bool().unwrap(),
                shape_of(&e["version"])[0],
            ));
    }
    let mut descrs = Vec::new();
    for letter in ["f", "i", "u", "b"] {
        let sizes: &[usize] = match letter {
            "f" => &[2, 4, 8],
            "b" => &[1],
            _ => &[1, 2, 4, 8],
        };
        for &size in sizes {
            if size == 1 {
                descrs.push(format!("|{letter}{size}"));
            } else {
                descrs.push(format!("<{letter}{size}"));
                descrs.push(format!(">{letter}{size}"));
            }
        }
    }
    assert_eq!(
        seen.keys().cloned().collect::<BTreeSet<_>>(),
        descrs.into_iter().collect()
    );
    for (descr, combos) in &seen {
        for rank in 0..=4 {
            assert!(
                combos.contains(&(rank, false, 1)),
                "{descr}: rank {rank} C order"
            );
        }
        for rank in 2..=4 {
            assert!(
                combos.contains(&(rank, true, 1)),
                "{descr}: rank {rank} Fortran order"
            );
        }
        for version in 1..=3 {
            assert!(
                combos.iter().any(|c| c.2 == version),
                "{descr}: version {version}.0"
            );
        }
    }
}

#[test]
fn safetensors_fixtures_list_and_load() {
    let limits = Limits::default();
    for e in entries("safetensors") {
        let rel = e["file"].as_str().unwrap();
        let bytes = read(rel);
        let listed = safetensors::list(rel, &bytes).unwrap();
        let want = e["tensors"].as_array().unwrap();
        let names: BTreeSet<&str> = listed.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names.len(), want.len(), "{rel}");
        let file = io::load(rel, &bytes, &limits).unwrap();
        assert_eq!(file.format, Format::Safetensors);
        for w in want {
            let name = w["name"].as_str().unwrap();
            let info = listed.iter().find(|i| i.name == name).unwrap();
            assert_eq!(
                info.dtype.name(),
                w["dtype"].as_str().unwrap(),
                "{rel}/{name}"
            );
            assert_eq!(info.shape, shape_of(&w["shape"]), "{rel}/{name}");
            match w["values"].as_str() {
                Some(kind) => {
                    let t = safetensors::load_tensor(rel, &bytes, name, &limits).unwrap();
                    assert_eq!(t.shape(), info.shape.as_slice());
                    assert_values(&format!("{rel}/{name}"), t.data(), kind);
                    assert_eq!(file.get(name).unwrap().tensor, t);
                }
                None => {
                    // Integer tensors are listed, not loaded, and say why.
                    let err = safetensors::load_tensor(rel, &bytes, name, &limits).unwrap_err();
                    assert!(matches!(err, LoadError::NotFloat { .. }), "{err:?}");
                    let skipped = file.skipped.iter().find(|s| s.name == name).unwrap();
                    assert!(skipped.reason.contains("not a float"), "{}", skipped.reason);
                }
            }
        }
    }
}

#[test]
fn safetensors_lists_in_offset_order_and_names_missing_tensors() {
    let rel = "safetensors/unsorted_keys.safetensors";
    let bytes = read(rel);
    let names: Vec<String> = safetensors::list(rel, &bytes)
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(names, ["first", "second"]);
    let err = safetensors::load_tensor(rel, &bytes, "third", &Limits::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "safetensors/unsorted_keys.safetensors: no tensor named 'third': the file has first, second"
    );
}

/// The reference `safetensors` crate accepts exactly the files this parser accepts.
#[test]
fn safetensors_agrees_with_reference_crate_on_fixtures() {
    let mut checked = 0;
    for dir in ["safetensors", "capture", "malformed"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("safetensors") {
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            let ours = safetensors::list("f", &bytes);
            let reference = ::safetensors::SafeTensors::deserialize(&bytes);
            assert_eq!(
                ours.is_ok(),
                reference.is_ok(),
                "{}: ours {:?}, reference {:?}",
                path.display(),
                ours.as_ref().err(),
                reference.as_ref().err()
            );
            if let (Ok(ours), Ok(reference)) = (ours, reference) {
                for info in ours {
                    let view = reference.tensor(&info.name).unwrap();
                    assert_eq!(view.shape(), info.shape.as_slice());
                    assert_eq!(format!("{:?}", view.dtype()), info.dtype.name());
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} safetensors files checked");
}

#[test]
fn text_fixtures_match_their_formula() {
    let limits = Limits::default();
    for format in ["csv", "json"] {
        for e in entries(format) {
            let rel = e["file"].as_str().unwrap();
            let file = io::load(rel, &read(rel), &limits).unwrap_or_else(|err| panic!("{err}"));
            let t = &file.tensors[0].tensor;
            assert_eq!(t.shape(), shape_of(&e["shape"]).as_slice(), "{rel}");
            assert_values(rel, t.data(), e["values"].as_str().unwrap());
        }
    }
}

#[test]
fn csv_reports_header_and_delimiter() {
    let limits = Limits::default();
    let t = io::csv::load("h.csv", &read("text/comma_header.csv"), &limits).unwrap();
    assert_eq!(t.delimiter, io::csv::Delimiter::Comma);
    assert_eq!(t.header.unwrap(), ["t0", "t1", "t2", "t3"]);
    let t = io::csv::load("t.tsv", &read("text/tab.tsv"), &limits).unwrap();
    assert_eq!((t.delimiter, t.header), (io::csv::Delimiter::Tab, None));
    let t = io::csv::load("s.csv", &read("text/semicolon.csv"), &limits).unwrap();
    assert_eq!(t.delimiter, io::csv::Delimiter::Semicolon);
    let t = io::csv::load("s.txt", &read("text/savetxt.txt"), &limits).unwrap();
    assert_eq!(t.delimiter, io::csv::Delimiter::Whitespace);
    let f = io::load("h.csv", &read("text/comma_header.csv"), &limits).unwrap();
    assert_eq!(
        f.summary,
        "h.csv: comma-separated text, header row skipped, shape [3, 4]"
    );
}

/// Files written by scripts/capture_kv.py from fake model outputs load and interpret as the
/// script's docs say: full causal [H, T, T] attention, [H_kv, T, d] K and V, same tokens.
#[test]
fn capture_script_output_is_read_as_documented() {
    let limits = Limits::default();
    for e in entries("capture") {
        let roles = e["roles"].as_object().unwrap();
        let load = |role: &str| {
            let rel = roles[role].as_str().unwrap();
            io::load(rel, &read(rel), &limits).unwrap()
        };
        let attn = load("attention").tensors.remove(0).tensor;
        let k = load("k").tensors.remove(0).tensor;
        let v = load("v").tensors.remove(0).tensor;
        let head = e["head"].as_u64();
        let view = interpret_attention("attention", &attn, HeadPick::Mean).unwrap();
        assert_eq!(view.kind, AttentionKind::FullCausal);
        assert!(view.warnings.is_empty(), "{:?}", view.warnings);
        let kv = interpret_kv("k", &k, KvPick::default()).unwrap();
        let vv = interpret_kv("v", &v, KvPick::default()).unwrap();
        check_same_tokens(view.tokens(), kv.tokens()).unwrap();
        check_kv_pair(&kv, &vv).unwrap();
        match head {
            None => {
                assert_eq!(attn.shape(), &[4, 6, 6]);
                assert_eq!(k.shape(), &[2, 6, 8]);
                assert_eq!(
                    view.description,
                    "attention [H=4, T=6, T=6]: mean over 4 heads; full causal matrix; the last \
                     rows are the observation window"
                );
            }
            Some(_) => {
                assert_eq!(attn.shape(), &[6, 6]);
                assert_eq!(k.shape(), &[6, 8]);
            }
        }
        // The .safetensors file holds the same three tensors.
        let st = load("safetensors");
        assert_eq!(st.tensors.len(), 3);
        assert_eq!(st.get("attention").unwrap().tensor, attn);
        assert_eq!(st.get("k").unwrap().tensor, k);
        assert_eq!(st.get("v").unwrap().tensor, v);
    }
}

#[test]
fn loaded_file_summaries_name_format_dtype_and_shape() {
    let limits = Limits::default();
    let f = io::load("x.npy", &read("npy/f8_be_f_r3_v2.npy"), &limits).unwrap();
    assert_eq!(
        f.summary,
        "x.npy: npy 2.0, >f8 (float64), Fortran order, shape [2, 3, 4]"
    );
    assert_eq!(f.tensors[0].dtype, ">f8 (float64)");
    let f = io::load(
        "m.safetensors",
        &read("safetensors/all_dtypes.safetensors"),
        &limits,
    )
    .unwrap();
    assert_eq!(
        f.summary,
        "m.safetensors: safetensors, 6 tensor(s) loaded, 2 skipped"
    );
}
