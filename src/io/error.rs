//! `LoadError` and `LoadWarning`: everything that can go wrong (or look suspicious) when a
//! learner brings their own attention matrix or KV tensor (issue 3, "Checks with clear messages").
//!
//! Every message names the file (or the tensor inside it), the field that failed, the bad value
//! and what was expected, so the page can show it next to the file input as it is.

use thiserror::Error;

/// Formats a shape as `[2, 3, 4]` (`[]` for a scalar).
pub(crate) fn fmt_shape(shape: &[usize]) -> String {
    let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

/// The element count of `shape` as text: the product, or "more than usize::MAX" on overflow.
fn fmt_count(shape: &[usize]) -> String {
    match shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)) {
        Some(n) => n.to_string(),
        None => "more than usize::MAX".to_string(),
    }
}

/// Formats a byte count as "300.0 MiB (314572800 bytes)".
fn fmt_bytes(bytes: u64) -> String {
    // The division is only for display, so a lossy cast is fine here.
    let mib = bytes as f64 / (1024.0 * 1024.0);
    format!("{mib:.1} MiB ({bytes} bytes)")
}

/// Why a file or tensor could not be loaded or interpreted.
///
/// Each variant's doc says which constraint failed and how to fix it. `file` is the name the user
/// gave the file (for example `attn.npy`); for the interpretation checks it is the `source` label
/// the caller passed (for example `model.safetensors / attn`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LoadError {
    /// The file is larger than [`Limits::max_bytes`](super::Limits::max_bytes) (default 256 MiB).
    /// Checked from the file's size before its bytes are read. Fix: save only the layer / head
    /// you need, or in float16.
    #[error(
        "{file} is {}: the size cap is {}; save a smaller slice (one layer or head, or float16)",
        fmt_bytes(*.bytes),
        fmt_bytes(*.max_bytes as u64)
    )]
    TooLarge {
        /// File name.
        file: String,
        /// The file's size in bytes.
        bytes: u64,
        /// The cap in bytes.
        max_bytes: usize,
    },

    /// The file has no bytes at all.
    #[error("{file} is empty (0 bytes): expected a .npy, .safetensors, .csv, .tsv or .json file")]
    EmptyFile {
        /// File name.
        file: String,
    },

    /// Neither the extension nor the first bytes say which format the file is in.
    #[error(
        "{file}: cannot tell the format from extension '{extension}' or from the first bytes: \
         supported are .npy, .safetensors, .csv, .tsv, .txt and .json"
    )]
    UnknownFormat {
        /// File name.
        file: String,
        /// The extension found (empty when there is none).
        extension: String,
    },

    /// A declared shape has more elements than
    /// [`Limits::max_elements`](super::Limits::max_elements) (default 64 Mi), or the count
    /// overflows. Checked before any allocation.
    #[error(
        "{file}: {field} declares shape {} = {} elements: at most {max_elements} elements are \
         allowed; save a smaller slice",
        fmt_shape(.shape),
        fmt_count(.shape)
    )]
    TooManyElements {
        /// File name.
        file: String,
        /// Which field declared it (`header field 'shape'`, `tensor 'k'`, `data`).
        field: String,
        /// The declared shape (for text formats: the rows read so far and the columns).
        shape: Vec<usize>,
        /// The element cap.
        max_elements: usize,
    },

    /// The tensor has more than 4 axes; kvlab reads rank 0..=4 (attention up to `[H, S, T]`,
    /// KV up to `[L, H, T, d]`).
    #[error(
        "{file}: {field} is {} (rank {}): at most 4 axes are supported; save one layer / head",
        fmt_shape(.shape),
        .shape.len()
    )]
    RankTooHigh {
        /// File name.
        file: String,
        /// Which field declared it.
        field: String,
        /// The declared shape.
        shape: Vec<usize>,
    },

    /// The tensor has no elements (an axis of length 0).
    #[error("{file}: {field} has shape {} with no elements: every axis must be at least 1", fmt_shape(.shape))]
    EmptyTensor {
        /// File name.
        file: String,
        /// Which field or tensor.
        field: String,
        /// The shape.
        shape: Vec<usize>,
    },

    /// The file ends before a fixed-size field could be read: it is truncated or not this format.
    #[error("{file}: truncated in {field}: needs {needed} bytes from the start, the file has {available}")]
    Truncated {
        /// File name.
        file: String,
        /// The field being read (`magic and version`, `header length`, `header`).
        field: String,
        /// Bytes needed from the start of the file.
        needed: usize,
        /// Bytes the file has.
        available: usize,
    },

    /// The data section's length does not match `shape x dtype size`: the file is truncated or
    /// the header lies.
    #[error(
        "{file}: {field} has {actual_bytes} bytes but shape {} of {dtype} needs {expected_bytes}: \
         the file is truncated or corrupt",
        fmt_shape(.shape)
    )]
    DataLength {
        /// File name.
        file: String,
        /// Which data section.
        field: String,
        /// The declared shape.
        shape: Vec<usize>,
        /// The element type, as written in the file (`<f4`, `F16`).
        dtype: String,
        /// `product(shape) * item size`.
        expected_bytes: usize,
        /// Bytes present.
        actual_bytes: usize,
    },

    /// A `{"shape": [...], "data": [...]}` document whose data length is not `product(shape)`.
    #[error(
        "{file}: field 'data' has {found} values but field 'shape' {} needs {expected}",
        fmt_shape(.shape)
    )]
    ShapeDataMismatch {
        /// File name.
        file: String,
        /// The declared shape.
        shape: Vec<usize>,
        /// `product(shape)`.
        expected: usize,
        /// Values given.
        found: usize,
    },

    /// A `.npy` file that does not start with `\x93NUMPY`.
    #[error("{file}: magic is '{found}': a .npy file starts with '\\x93NUMPY' (save it with numpy.save)")]
    NpyMagic {
        /// File name.
        file: String,
        /// The first bytes, escaped.
        found: String,
    },

    /// A `.npy` format version other than 1.0, 2.0 or 3.0.
    #[error(
        "{file}: .npy format version {major}.{minor}: supported versions are 1.0, 2.0 and 3.0"
    )]
    NpyVersion {
        /// File name.
        file: String,
        /// Major version byte.
        major: u8,
        /// Minor version byte.
        minor: u8,
    },

    /// A header that is not valid text in the encoding its format requires.
    #[error("{file}: {field} is not valid {expected} (invalid byte at offset {offset})")]
    HeaderEncoding {
        /// File name.
        file: String,
        /// Which header.
        field: String,
        /// The encoding required (`UTF-8`).
        expected: String,
        /// Offset of the first invalid byte inside the header.
        offset: usize,
    },

    /// A header that does not parse: the `.npy` dict literal or the safetensors JSON.
    #[error("{file}: {field} at offset {offset}: expected {expected}, found '{found}'")]
    HeaderSyntax {
        /// File name.
        file: String,
        /// Which header.
        field: String,
        /// Offset inside the header (bytes).
        offset: usize,
        /// What the parser expected there.
        expected: String,
        /// What it found (a few characters, escaped).
        found: String,
    },

    /// A required header field is absent.
    #[error("{file}: {field} is missing")]
    MissingField {
        /// File name.
        file: String,
        /// The missing field (`header field 'shape'`).
        field: String,
    },

    /// A header field that the format does not define.
    #[error("{file}: {field} is not allowed here: expected only {expected}")]
    UnknownField {
        /// File name.
        file: String,
        /// The unexpected field.
        field: String,
        /// The fields allowed.
        expected: String,
    },

    /// A field or name that appears twice.
    #[error("{file}: {field} appears twice: each must appear once")]
    Duplicate {
        /// File name.
        file: String,
        /// The repeated field or tensor name.
        field: String,
    },

    /// A header field with a value of the wrong type or out of range.
    #[error("{file}: {field} is {value}: expected {expected}")]
    BadField {
        /// File name.
        file: String,
        /// The field.
        field: String,
        /// Its value, as text.
        value: String,
        /// What is allowed.
        expected: String,
    },

    /// An element type kvlab cannot read (complex, object, string, structured...).
    #[error("{file}: {field} is '{value}'{}: supported dtypes are {expected}", .meaning.as_ref().map(|m| format!(" ({m})")).unwrap_or_default())]
    UnsupportedDtype {
        /// File name.
        file: String,
        /// The field (`header field 'descr'`, `tensor 'k' field 'dtype'`).
        field: String,
        /// The dtype as written.
        value: String,
        /// What it means, when known (`complex64`).
        meaning: Option<String>,
        /// The supported dtypes.
        expected: String,
    },

    /// A safetensors tensor whose dtype is valid but not a float (it can be listed, not loaded).
    #[error("{file}: tensor '{tensor}' has dtype {dtype}, which is not a float: loadable dtypes are F16, BF16, F32 and F64")]
    NotFloat {
        /// File name.
        file: String,
        /// Tensor name.
        tensor: String,
        /// Its dtype.
        dtype: String,
    },

    /// The safetensors header length (first 8 bytes) exceeds the file or the header cap.
    #[error("{file}: header length is {declared} bytes but {available} bytes are available after the 8-byte length (cap {max}): the file is truncated or not a .safetensors file")]
    HeaderLength {
        /// File name.
        file: String,
        /// The declared length.
        declared: u64,
        /// Bytes present after the length field.
        available: usize,
        /// The header size cap.
        max: usize,
    },

    /// `data_offsets` with `begin > end`.
    #[error("{file}: tensor '{tensor}' field 'data_offsets' is [{begin}, {end}]: begin must not exceed end")]
    OffsetsReversed {
        /// File name.
        file: String,
        /// Tensor name.
        tensor: String,
        /// Declared begin.
        begin: usize,
        /// Declared end.
        end: usize,
    },

    /// `data_offsets` spanning a different byte count than `product(shape) x dtype size`.
    #[error(
        "{file}: tensor '{tensor}' field 'data_offsets' [{begin}, {end}] spans {} bytes but shape {} of {dtype} needs {expected_bytes}",
        .end.saturating_sub(*.begin),
        fmt_shape(.shape)
    )]
    OffsetsSize {
        /// File name.
        file: String,
        /// Tensor name.
        tensor: String,
        /// Declared begin.
        begin: usize,
        /// Declared end.
        end: usize,
        /// The tensor's dtype.
        dtype: String,
        /// The tensor's shape.
        shape: Vec<usize>,
        /// Bytes the shape needs (saturated at `usize::MAX` on overflow).
        expected_bytes: usize,
    },

    /// Two tensors whose byte ranges overlap.
    #[error("{file}: tensor '{tensor}' data_offsets [{begin}, {end}] overlap tensor '{other}' [{other_begin}, {other_end}]: each byte belongs to one tensor")]
    OffsetsOverlap {
        /// File name.
        file: String,
        /// Tensor name.
        tensor: String,
        /// Its begin.
        begin: usize,
        /// Its end.
        end: usize,
        /// The tensor it overlaps.
        other: String,
        /// The other's begin.
        other_begin: usize,
        /// The other's end.
        other_end: usize,
    },

    /// Bytes of the data section that belong to no tensor (safetensors requires the tensors to
    /// tile the data section exactly).
    #[error("{file}: bytes {from}..{to} of the data section belong to no tensor: tensors must cover the data section without holes")]
    OffsetsGap {
        /// File name.
        file: String,
        /// First uncovered byte (relative to the data section).
        from: usize,
        /// One past the last uncovered byte.
        to: usize,
    },

    /// A tensor whose `data_offsets` end past the end of the file.
    #[error("{file}: tensor '{tensor}' data_offsets end at {end} but the data section has {data_len} bytes: the file is truncated")]
    OffsetsBeyondData {
        /// File name.
        file: String,
        /// Tensor name.
        tensor: String,
        /// Declared end.
        end: usize,
        /// Bytes in the data section.
        data_len: usize,
    },

    /// No tensor of that name in the file.
    #[error("{file}: no tensor named '{name}': the file has {}", .available.join(", "))]
    TensorNotFound {
        /// File name.
        file: String,
        /// The name asked for.
        name: String,
        /// The names present.
        available: Vec<String>,
    },

    /// A file with no tensor that can be loaded (all integer, empty, or rank > 4).
    #[error("{file}: no loadable float tensor: {}", .reasons.join("; "))]
    NoLoadableTensor {
        /// File name.
        file: String,
        /// Why each tensor was skipped.
        reasons: Vec<String>,
    },

    /// A text file that is not UTF-8.
    #[error("{file} is not UTF-8 text: byte 0x{byte:02x} at line {line}, column {column}; save it as UTF-8 (\"CSV UTF-8\" in a spreadsheet){}", if *.utf16 { " — it looks like UTF-16" } else { "" })]
    NotUtf8 {
        /// File name.
        file: String,
        /// Line of the first invalid byte (from 1).
        line: usize,
        /// Byte column within that line (from 1).
        column: usize,
        /// The invalid byte.
        byte: u8,
        /// Whether the file starts with a UTF-16 byte-order mark.
        utf16: bool,
    },

    /// A CSV / TSV row with a different number of cells than the first row.
    #[error("{file}: line {line} has {found} cells but line {first_line} has {expected}: every row must have the same number of columns")]
    Ragged {
        /// File name.
        file: String,
        /// The offending line (from 1).
        line: usize,
        /// Its cell count.
        found: usize,
        /// The first row's cell count.
        expected: usize,
        /// The line that set the expected count.
        first_line: usize,
    },

    /// A CSV / TSV cell that is not a number.
    #[error("{file}: line {line}, column {column}: '{text}' is not a number{}", if .text.contains(',') { " (decimal commas are not supported: use '.')" } else { "" })]
    NotANumber {
        /// File name.
        file: String,
        /// Line (from 1).
        line: usize,
        /// Column (from 1).
        column: usize,
        /// The cell's text.
        text: String,
    },

    /// A NaN or infinite value (or one beyond f32's ±3.4e38). `index` is the first bad value's
    /// multi-index in the tensor (C order, from 0).
    #[error("{file}: {field}: value {value} at index {} is not finite: NaN, ±inf and values beyond ±3.4e38 cannot be used", fmt_shape(.index))]
    NonFinite {
        /// File name or source label.
        file: String,
        /// Where (`data`, `tensor 'k'`, `line 5, column 2`).
        field: String,
        /// Multi-index of the first bad value.
        index: Vec<usize>,
        /// The value as text.
        value: String,
    },

    /// A JSON document that does not parse.
    #[error("{file}: invalid JSON: {message}")]
    Json {
        /// File name.
        file: String,
        /// Line of the error (from 1; 0 when unknown).
        line: usize,
        /// Column of the error (from 1; 0 when unknown).
        column: usize,
        /// serde_json's message.
        message: String,
    },

    /// A JSON value of the wrong kind at some path (a string where a number belongs...).
    #[error("{file}: at {path}: found {found}, expected {expected}")]
    JsonStructure {
        /// File name.
        file: String,
        /// JSON path (`[2][0]`, `shape`).
        path: String,
        /// What was found.
        found: String,
        /// What was expected.
        expected: String,
    },

    /// Nested JSON lists of unequal lengths.
    #[error("{file}: list at {path} has {found} items but its siblings have {expected}: nested lists must be rectangular")]
    JsonRagged {
        /// File name.
        file: String,
        /// JSON path of the ragged list.
        path: String,
        /// Its length.
        found: usize,
        /// The length set by the first list at that depth.
        expected: usize,
    },

    /// `Tensor::new` with a data length that does not match the shape.
    #[error("shape {} needs {} values but the data has {len}", fmt_shape(.shape), fmt_count(.shape))]
    TensorShape {
        /// The shape given.
        shape: Vec<usize>,
        /// The data length given.
        len: usize,
    },

    /// A tensor whose rank does not fit the role it was given.
    #[error("{file}: {role} has shape {}: expected {expected}", fmt_shape(.shape))]
    WrongRank {
        /// Source label.
        file: String,
        /// `attention`, `KV`.
        role: String,
        /// The shape found.
        shape: Vec<usize>,
        /// The shapes accepted.
        expected: String,
    },

    /// A layer or head index past the end of its axis.
    #[error("{file}: {axis} {index} is out of range: must be in 0..={} ({len} {axis}s)", .len.saturating_sub(1))]
    PickOutOfRange {
        /// Source label.
        file: String,
        /// `head` or `layer`.
        axis: String,
        /// The index asked for.
        index: usize,
        /// The axis length.
        len: usize,
    },

    /// A negative attention weight: attention rows are probabilities.
    #[error("{file}: attention weight {value} at index {} is negative: attention weights are softmax probabilities in [0, 1]", fmt_shape(.index))]
    NegativeWeight {
        /// Source label.
        file: String,
        /// Multi-index of the first negative weight.
        index: Vec<usize>,
        /// The value as text.
        value: String,
    },

    /// Two tensors that must cover the same tokens do not.
    #[error(transparent)]
    TokenMismatch(#[from] TokenMismatch),
}

/// Two tensors that must cover the same tokens do not ([`LoadError::TokenMismatch`], and what
/// [`Chosen::new`](crate::upload::Chosen::new) refuses). A type of its own, so that code which
/// only checks tokens (the page's module takes tensors read elsewhere) does not carry the
/// message of every [`LoadError`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{left} covers T={left_t} tokens but {right} has T={right_t}: they must come from the same prompt")]
pub struct TokenMismatch {
    /// First tensor's role (`attention`, `K`).
    pub left: String,
    /// Its token count.
    pub left_t: usize,
    /// Second tensor's role (`KV`, `V`).
    pub right: String,
    /// Its token count.
    pub right_t: usize,
}

/// Something suspicious that does not stop the data from being used. Serialized for the page
/// (which words it in its language) as `{kind: "rowSums", file, rowsOff, ...}`.
#[derive(Debug, Clone, PartialEq, Error, serde::Serialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum LoadWarning {
    /// Attention rows whose sums are not within `tolerance` of 1. The page offers
    /// [`normalise_rows`](super::normalise_rows), which divides each row by its sum.
    #[error(
        "{file}: {rows_off} of {rows} attention rows do not sum to 1 (±{tolerance}); the worst is row {} with sum {worst_sum}. Normalise rows to make them distributions?",
        fmt_shape(.worst_row)
    )]
    RowSums {
        /// Source label.
        file: String,
        /// Rows off by more than `tolerance`.
        rows_off: usize,
        /// Rows checked.
        rows: usize,
        /// Multi-index of the worst row (all axes but the last).
        worst_row: Vec<usize>,
        /// Its sum.
        worst_sum: f32,
        /// The tolerance used.
        tolerance: f32,
    },
}
