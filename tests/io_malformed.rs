//! Malformed inputs (tests/fixtures/malformed/, written by scripts/make_fixtures.py): each gives
//! its specific `LoadError` variant and a message naming the file, never a panic. Also the
//! limits, and the shape-interpretation checks on files that load but cannot be used as-is.

use std::path::{Path, PathBuf};

use kvlab::io::{
    self, check_kv_pair, check_same_tokens, interpret_attention, interpret_kv, normalise_rows,
    safetensors, HeadPick, KvPick, Limits, LoadError, LoadWarning, Tensor, TokenMismatch,
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn load_err(name: &str) -> LoadError {
    match io::load(
        name,
        &read(&format!("malformed/{name}")),
        &Limits::default(),
    ) {
        Ok(f) => panic!("{name} loaded: {}", f.summary),
        Err(e) => e,
    }
}

macro_rules! malformed {
    ($($test:ident: $file:literal => $pat:pat),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                let e = load_err($file);
                assert!(matches!(e, $pat), "{}: wrong variant: {e:?}", $file);
                let message = e.to_string();
                assert!(message.starts_with($file), "{}: message does not name the file: {message}", $file);
            }
        )*
        /// Every malformed fixture that has a test of its own.
        const NAMED: &[&str] = &[$($file),*];
    };
}

malformed! {
    npy_bad_magic: "npy_bad_magic.npy" => LoadError::NpyMagic { .. },
    npy_png_renamed: "npy_png_renamed.npy" => LoadError::NpyMagic { .. },
    npy_truncated_magic: "npy_truncated_magic.npy" => LoadError::Truncated { needed: 8, available: 5, .. },
    npy_bad_version: "npy_bad_version.npy" => LoadError::NpyVersion { major: 4, minor: 0, .. },
    npy_truncated_header: "npy_truncated_header.npy" => LoadError::Truncated { available: 60, .. },
    npy_header_syntax: "npy_header_syntax.npy" => LoadError::HeaderSyntax { .. },
    npy_missing_shape: "npy_missing_shape.npy" => LoadError::MissingField { .. },
    npy_extra_key: "npy_extra_key.npy" => LoadError::UnknownField { .. },
    npy_duplicate_key: "npy_duplicate_key.npy" => LoadError::Duplicate { .. },
    npy_complex64: "npy_complex64.npy" => LoadError::UnsupportedDtype { .. },
    npy_unicode: "npy_unicode.npy" => LoadError::UnsupportedDtype { .. },
    npy_structured: "npy_structured.npy" => LoadError::UnsupportedDtype { .. },
    npy_float128_descr: "npy_float128_descr.npy" => LoadError::UnsupportedDtype { .. },
    npy_fortran_not_bool: "npy_fortran_not_bool.npy" => LoadError::BadField { .. },
    npy_shape_list: "npy_shape_list.npy" => LoadError::BadField { .. },
    npy_shape_negative: "npy_shape_negative.npy" => LoadError::BadField { .. },
    npy_shape_int_overflow: "npy_shape_int_overflow.npy" => LoadError::BadField { .. },
    npy_rank5: "npy_rank5.npy" => LoadError::RankTooHigh { .. },
    npy_huge_shape: "npy_huge_shape.npy" => LoadError::TooManyElements { .. },
    npy_data_short: "npy_data_short.npy" => LoadError::DataLength { expected_bytes: 48, actual_bytes: 44, .. },
    npy_data_long: "npy_data_long.npy" => LoadError::DataLength { expected_bytes: 48, actual_bytes: 52, .. },
    npy_nan: "npy_nan.npy" => LoadError::NonFinite { .. },
    npy_f64_beyond_f32: "npy_f64_beyond_f32.npy" => LoadError::NonFinite { .. },
    npy_empty_axis: "npy_empty_axis.npy" => LoadError::EmptyTensor { .. },
    npy_v3_bad_utf8: "npy_v3_bad_utf8.npy" => LoadError::HeaderEncoding { offset: 0, .. },
    npy_unterminated_string: "npy_unterminated_string.npy" => LoadError::HeaderSyntax { .. },
    st_too_short: "st_too_short.safetensors" => LoadError::Truncated { needed: 8, available: 3, .. },
    st_header_beyond_file: "st_header_beyond_file.safetensors" => LoadError::HeaderLength { declared: 4096, .. },
    st_bad_json: "st_bad_json.safetensors" => LoadError::Json { .. },
    st_header_not_utf8: "st_header_not_utf8.safetensors" => LoadError::HeaderEncoding { offset: 2, .. },
    st_overlap: "st_overlap.safetensors" => LoadError::OffsetsOverlap { begin: 4, other_end: 8, .. },
    st_gap: "st_gap.safetensors" => LoadError::OffsetsGap { from: 4, to: 8, .. },
    st_offsets_beyond_data: "st_offsets_beyond_data.safetensors" => LoadError::OffsetsBeyondData { end: 16, data_len: 8, .. },
    st_offsets_reversed: "st_offsets_reversed.safetensors" => LoadError::OffsetsReversed { begin: 4, end: 0, .. },
    st_size_mismatch: "st_size_mismatch.safetensors" => LoadError::OffsetsSize { expected_bytes: 12, .. },
    st_unknown_dtype: "st_unknown_dtype.safetensors" => LoadError::UnsupportedDtype { .. },
    st_missing_offsets: "st_missing_offsets.safetensors" => LoadError::MissingField { .. },
    st_duplicate_name: "st_duplicate_name.safetensors" => LoadError::Duplicate { .. },
    st_bad_metadata: "st_bad_metadata.safetensors" => LoadError::BadField { .. },
    st_only_ints: "st_only_ints.safetensors" => LoadError::NoLoadableTensor { .. },
    st_nan: "st_nan.safetensors" => LoadError::NonFinite { .. },
    csv_latin1: "csv_latin1.csv" => LoadError::NotUtf8 { line: 2, column: 8, byte: 0xe9, utf16: false, .. },
    csv_utf16: "csv_utf16.csv" => LoadError::NotUtf8 { utf16: true, .. },
    csv_ragged: "csv_ragged.csv" => LoadError::Ragged { line: 2, found: 2, expected: 3, .. },
    csv_nan: "csv_nan.csv" => LoadError::NonFinite { .. },
    csv_inf: "csv_inf.tsv" => LoadError::NonFinite { .. },
    csv_text_cell: "csv_text_cell.csv" => LoadError::NotANumber { line: 2, column: 2, .. },
    csv_decimal_comma: "csv_decimal_comma.csv" => LoadError::NotANumber { line: 1, column: 1, .. },
    csv_header_only: "csv_header_only.csv" => LoadError::EmptyTensor { .. },
    json_ragged: "json_ragged.json" => LoadError::JsonRagged { found: 2, expected: 3, .. },
    json_syntax: "json_syntax.json" => LoadError::Json { .. },
    json_string_leaf: "json_string_leaf.json" => LoadError::JsonStructure { .. },
    json_rank5: "json_rank5.json" => LoadError::JsonStructure { .. },
    json_shape_mismatch: "json_shape_mismatch.json" => LoadError::ShapeDataMismatch { expected: 6, found: 5, .. },
    json_missing_data: "json_missing_data.json" => LoadError::MissingField { .. },
    json_huge_shape: "json_huge_shape.json" => LoadError::TooManyElements { .. },
    json_beyond_f32: "json_beyond_f32.json" => LoadError::NonFinite { .. },
    json_scalar: "json_scalar.json" => LoadError::JsonStructure { .. },
    empty_file: "empty.npy" => LoadError::EmptyFile { .. },
    unknown_format: "unknown_format.bin" => LoadError::UnknownFormat { .. },
}

#[test]
fn at_least_thirty_named_cases() {
    assert!(NAMED.len() >= 30, "{}", NAMED.len());
}

/// Every file in malformed/ has a test above, or is a fuzz regression (`fuzz-*`), and none of
/// them panics any loader, whatever the extension it is given.
#[test]
fn every_malformed_file_is_named_and_never_panics() {
    let limits = Limits::default();
    for entry in std::fs::read_dir(root().join("malformed")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        assert!(
            NAMED.contains(&name.as_str()) || name.starts_with("fuzz-"),
            "{name} has no test"
        );
        let bytes = std::fs::read(&path).unwrap();
        for ext in ["npy", "safetensors", "csv", "json", "bin"] {
            let _ = io::load(&format!("x.{ext}"), &bytes, &limits);
        }
        let _ = io::npy::load("x", &bytes, &limits);
        let _ = safetensors::list("x", &bytes);
        let _ = safetensors::load_tensor("x", &bytes, "a", &limits);
        let _ = io::csv::load("x", &bytes, &limits);
        let _ = io::json::load("x", &bytes, &limits);
    }
}

#[test]
fn messages_name_field_value_and_expectation() {
    let e = load_err("npy_complex64.npy");
    assert_eq!(
        e.to_string(),
        "npy_complex64.npy: header field 'descr' is '<c8' (complex64): supported dtypes are \
         f2, f4, f8, i1..i8, u1..u8, b1 (little '<' or big '>' endian; '|' for one-byte types)"
    );
    let e = load_err("npy_nan.npy");
    assert_eq!(
        e.to_string(),
        "npy_nan.npy: data: value NaN at index [0, 1] is not finite: NaN, ±inf and values beyond \
         ±3.4e38 cannot be used"
    );
    let e = load_err("csv_ragged.csv");
    assert_eq!(
        e.to_string(),
        "csv_ragged.csv: line 2 has 2 cells but line 1 has 3: every row must have the same number \
         of columns"
    );
    let e = load_err("csv_nan.csv");
    assert_eq!(
        e,
        LoadError::NonFinite {
            file: "csv_nan.csv".into(),
            field: "line 3, column 2".into(),
            index: vec![1, 1],
            value: "NaN".into()
        }
    );
    let e = load_err("st_overlap.safetensors");
    assert_eq!(
        e.to_string(),
        "st_overlap.safetensors: tensor 'b' data_offsets [4, 12] overlap tensor 'a' [0, 8]: each \
         byte belongs to one tensor"
    );
    let e = load_err("npy_shape_list.npy");
    assert!(e.to_string().contains("is [3, 4]: expected a tuple"), "{e}");
    let e = load_err("json_ragged.json");
    assert_eq!(
        e.to_string(),
        "json_ragged.json: list at [1] has 2 items but its siblings have 3: nested lists must be \
         rectangular"
    );
    let e = load_err("csv_utf16.csv");
    assert!(e.to_string().contains("UTF-16"), "{e}");
}

#[test]
fn safetensors_per_tensor_errors() {
    let limits = Limits::default();
    let bytes = read("malformed/st_only_ints.safetensors");
    let listed = safetensors::list("ints", &bytes).unwrap();
    assert_eq!(listed.len(), 2);
    assert!(matches!(
        safetensors::load_tensor("ints", &bytes, "ids", &limits),
        Err(LoadError::NotFloat { ref dtype, .. }) if dtype == "I64"
    ));
    let bytes = read("malformed/st_nan.safetensors");
    assert_eq!(
        safetensors::load_tensor("n", &bytes, "a", &limits),
        Err(LoadError::NonFinite {
            file: "n".into(),
            field: "tensor 'a'".into(),
            index: vec![1],
            value: "inf".into()
        })
    );
}

#[test]
fn size_cap_is_checked_before_reading() {
    let small = Limits {
        max_bytes: 100,
        ..Limits::default()
    };
    let bytes = read("npy/f4_le_c_r2_v1.npy");
    assert!(matches!(
        io::load("a.npy", &bytes, &small),
        Err(LoadError::TooLarge {
            bytes: 176,
            max_bytes: 100,
            ..
        })
    ));
    assert!(io::check_size("a.npy", 256 * 1024 * 1024, &Limits::default()).is_ok());
    assert!(matches!(
        io::check_size("a.npy", 256 * 1024 * 1024 + 1, &Limits::default()),
        Err(LoadError::TooLarge { .. })
    ));
}

#[test]
fn element_cap_is_checked_before_allocating() {
    let tight = Limits {
        max_elements: 11,
        ..Limits::default()
    };
    for rel in [
        "npy/f4_le_c_r2_v1.npy",
        "text/comma_header.csv",
        "text/nested_r2.json",
        "text/object_r2.json",
    ] {
        let e = io::load(rel, &read(rel), &tight).unwrap_err();
        assert!(
            matches!(
                e,
                LoadError::TooManyElements {
                    max_elements: 11,
                    ..
                }
            ),
            "{rel}: {e:?}"
        );
    }
    // safetensors: the cap counts all tensors of a file together.
    let bytes = read("safetensors/all_dtypes.safetensors");
    let f = io::load("m.safetensors", &bytes, &tight).unwrap();
    let loaded: usize = f.tensors.iter().map(|t| t.tensor.len()).sum();
    assert!(loaded <= 11);
    assert!(f
        .skipped
        .iter()
        .any(|s| s.reason.contains("cap counts all tensors")));
}

fn npy_tensor(rel: &str) -> Tensor {
    io::load(rel, &read(rel), &Limits::default())
        .unwrap()
        .tensors
        .remove(0)
        .tensor
}

#[test]
fn negative_attention_weight_names_its_index() {
    let attn = npy_tensor("interpret/attn_negative.npy");
    assert_eq!(
        interpret_attention("attn_negative.npy", &attn, HeadPick::Mean),
        Err(LoadError::NegativeWeight {
            file: "attn_negative.npy".into(),
            index: vec![1, 2, 1],
            value: "-0.25".into()
        })
    );
    // Head 0 has no negative weight: picking it is fine.
    let v = interpret_attention("attn_negative.npy", &attn, HeadPick::Head(0)).unwrap();
    assert_eq!(
        v.description,
        "attention [H=2, T=4, T=4]: head 0 of 2 (heads 0 to 1); full causal matrix; the last rows \
         are the observation window"
    );
}

#[test]
fn a_batch_of_one_is_dropped_and_a_larger_batch_refused() {
    // [B=1, H=1, 4, 4], as Hugging Face returns one prompt's attention: used as [4, 4]
    let attn = npy_tensor("interpret/attn_rank4.npy");
    let v = interpret_attention("a.npy", &attn, HeadPick::Mean).unwrap();
    assert_eq!((v.steps(), v.tokens(), v.heads), (4, 4, None));
    assert_eq!(v.matrix.data(), attn.data());
    // [B=2, H=1, 4, 4]: two prompts, which one is not for the page to guess
    let two = Tensor::new(vec![2, 1, 4, 4], [attn.data(), attn.data()].concat()).unwrap();
    let e = interpret_attention("a.npy", &two, HeadPick::Mean).unwrap_err();
    assert!(matches!(e, LoadError::WrongRank { ref shape, .. } if shape == &vec![2, 1, 4, 4]));
    assert!(
        e.to_string().contains("batch of B > 1 save element [0]"),
        "{e}"
    );
    // KV: [1, H=2, T=4, d=3] is [H=2, T=4, d=3]
    let kv = Tensor::new(vec![1, 2, 4, 3], (0..24).map(|i| i as f32).collect()).unwrap();
    let k = interpret_kv("k.npy", &kv, KvPick { layer: 0, head: 1 }).unwrap();
    assert_eq!(
        (k.layers, k.heads, k.tokens(), k.channels()),
        (None, Some(2), 4, 3)
    );
    assert_eq!(k.matrix.row(0), Some(&[12.0, 13.0, 14.0][..]));
}

#[test]
fn unnormalised_rows_warn_and_can_be_normalised() {
    let attn = npy_tensor("interpret/attn_unnormalised.npy");
    let mut v = interpret_attention("u.npy", &attn, HeadPick::Mean).unwrap();
    match v.warnings.as_slice() {
        [LoadWarning::RowSums {
            rows_off: 4,
            rows: 4,
            worst_sum,
            ..
        }] => assert!((worst_sum - 3.0).abs() < 1e-5),
        w => panic!("{w:?}"),
    }
    assert!(v.warnings[0].to_string().contains("Normalise rows"));
    assert_eq!(normalise_rows(&mut v.matrix), 0);
    let again = Tensor::new(vec![4, 4], v.matrix.data().to_vec()).unwrap();
    assert!(interpret_attention("u.npy", &again, HeadPick::Mean)
        .unwrap()
        .warnings
        .is_empty());
}

#[test]
fn mismatched_tokens_between_attention_and_kv() {
    let attn = interpret_attention(
        "a",
        &npy_tensor("interpret/attn_causal_t4.npy"),
        HeadPick::Mean,
    )
    .unwrap();
    let k5 = interpret_kv("k", &npy_tensor("interpret/kv_t5.npy"), KvPick::default()).unwrap();
    let v4 = interpret_kv(
        "v",
        &npy_tensor("interpret/kv_t4_d2.npy"),
        KvPick::default(),
    )
    .unwrap();
    let e = check_same_tokens(attn.tokens(), k5.tokens()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "attention covers T=4 tokens but the KV tensor has T=5: they must come from the same prompt"
    );
    assert!(check_same_tokens(attn.tokens(), v4.tokens()).is_ok());
    assert!(matches!(
        check_kv_pair(&k5, &v4),
        Err(TokenMismatch {
            left_t: 5,
            right_t: 4,
            ..
        })
    ));
}

#[test]
fn picks_out_of_range_and_wrong_kv_rank() {
    let attn = npy_tensor("interpret/attn_negative.npy");
    assert!(matches!(
        interpret_attention("a", &attn, HeadPick::Head(2)),
        Err(LoadError::PickOutOfRange {
            index: 2,
            len: 2,
            ..
        })
    ));
    let kv = npy_tensor("npy/f4_le_c_r4_v1.npy"); // [2, 3, 2, 2]
    assert!(matches!(
        interpret_kv("k", &kv, KvPick { layer: 1, head: 3 }),
        Err(LoadError::PickOutOfRange {
            index: 3,
            len: 3,
            ..
        })
    ));
    let e = interpret_kv("k", &npy_tensor("npy/f4_le_c_r1_v1.npy"), KvPick::default()).unwrap_err();
    assert!(matches!(e, LoadError::WrongRank { .. }), "{e:?}");
}
