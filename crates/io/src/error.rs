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
    #[error("{file}: no loadable float tensor: {}", Reasons(.skipped))]
    NoLoadableTensor {
        /// File name.
        file: String,
        /// Each tensor listed, and why it was skipped (none: the header lists no tensors).
        skipped: Vec<super::SkippedTensor>,
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
    #[error("{file}: {axis} {index} is out of range: must be between 0 and {} ({len} {axis}s)", .len.saturating_sub(1))]
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
    /// A list of token texts whose length is not the data's `T`: the charts show indices.
    #[error(
        "{file} holds {count} token texts but the data has T={tokens}: tokens are shown by index"
    )]
    TokenCount {
        /// The file of the texts.
        file: String,
        /// How many texts it holds.
        count: usize,
        /// The data's `T`.
        tokens: usize,
    },
}

/// The shapes an attention matrix may have ([`LoadError::WrongRank`]'s `expected`).
pub(crate) const ATTENTION_SHAPES: &str = "[S, T] (S query steps over T tokens), [T, T] (a full \
    causal matrix) or [H, S, T] (per head); from a [B, H, S, T] batch of B > 1 save element [0]";

/// The shapes a K or V tensor may have ([`LoadError::WrongRank`]'s `expected`).
pub(crate) const KV_SHAPES: &str =
    "[T, d] (tokens x channels), [H, T, d] (per head) or [L, H, T, d] (per layer and head)";

/// A [`LoadError`]'s fields for a page that words it in its own language: the variant's kind
/// and its values as text (numbers in decimal, shapes as `[2, 3]`, lists joined with `, `), named
/// as the page's templates name them (`LOAD_ZH`, `www/i18n/load-zh.json`: a test below checks that every
/// kind has a template there naming exactly these fields).
pub type LoadParts = (&'static str, Vec<(&'static str, String)>);

/// A shape as [`fmt_shape`] writes it.
struct Shape<'a>(&'a [usize]);

impl std::fmt::Display for Shape<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&fmt_shape(self.0))
    }
}

/// A shape's element count as [`fmt_count`] writes it.
struct Count<'a>(&'a [usize]);

impl std::fmt::Display for Count<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&fmt_count(self.0))
    }
}

/// Bytes in MiB with one decimal, as [`fmt_bytes`] writes them.
struct Mib(u64);

impl std::fmt::Display for Mib {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // (display only: a lossy cast is fine)
        write!(f, "{:.1}", self.0 as f64 / (1024.0 * 1024.0))
    }
}

/// Texts joined with a separator.
struct Joined<'a>(&'a [String], &'static str);

impl std::fmt::Display for Joined<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join(self.1))
    }
}

/// The reasons of skipped tensors, joined (or that there were none to skip).
struct Reasons<'a>(&'a [super::SkippedTensor]);

impl std::fmt::Display for Reasons<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("the header lists no tensors");
        }
        for (i, t) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            f.write_str(&t.reason)?;
        }
        Ok(())
    }
}

/// What [`LoadError::visit`] hands each field to.
pub type FieldSink<'a> = dyn FnMut(&'static str, &dyn std::fmt::Display) + 'a;

/// The kind and fields a `visit` (such as [`LoadError::visit`]) gives, collected.
pub fn collect_parts(visit: impl FnOnce(&mut FieldSink<'_>) -> &'static str) -> LoadParts {
    let mut fields = Vec::new();
    let kind = visit(&mut |name, value| fields.push((name, value.to_string())));
    (kind, fields)
}

impl LoadError {
    /// This error as a [`LoadParts`] (see [`LoadError::visit`]).
    pub fn parts(&self) -> LoadParts {
        collect_parts(|f| self.visit(f))
    }

    /// Hands each of this error's fields to `field` (name, value to write as text) and returns
    /// its kind: what [`LoadError::parts`] collects, without building it (the upload module
    /// writes each value straight into a JavaScript object). A variant whose English message
    /// adds a clause only in some cases (`NotUtf8` for UTF-16, `NotANumber` for decimal commas,
    /// `UnsupportedDtype` with a meaning, `WrongRank` for the two roles the readers check) has
    /// a kind of its own for that case, so that every template is plain.
    pub fn visit(&self, field: &mut FieldSink<'_>) -> &'static str {
        use LoadError as E;
        let f = field;
        match self {
            E::TooLarge {
                file,
                bytes,
                max_bytes,
            } => {
                f("file", file);
                f("mib", &Mib(*bytes));
                f("bytes", bytes);
                f("maxMib", &Mib(*max_bytes as u64));
                f("maxBytes", max_bytes);
                "tooLarge"
            }
            E::EmptyFile { file } => {
                f("file", file);
                "emptyFile"
            }
            E::UnknownFormat { file, extension } => {
                f("file", file);
                f("extension", extension);
                "unknownFormat"
            }
            E::TooManyElements {
                file,
                field,
                shape,
                max_elements,
            } => {
                f("file", file);
                f("field", field);
                f("shape", &Shape(shape));
                f("count", &Count(shape));
                f("maxElements", max_elements);
                "tooManyElements"
            }
            E::RankTooHigh { file, field, shape } => {
                f("file", file);
                f("field", field);
                f("shape", &Shape(shape));
                f("rank", &shape.len());
                "rankTooHigh"
            }
            E::EmptyTensor { file, field, shape } => {
                f("file", file);
                f("field", field);
                f("shape", &Shape(shape));
                "emptyTensor"
            }
            E::Truncated {
                file,
                field,
                needed,
                available,
            } => {
                f("file", file);
                f("field", field);
                f("needed", needed);
                f("available", available);
                "truncated"
            }
            E::DataLength {
                file,
                field,
                shape,
                dtype,
                expected_bytes,
                actual_bytes,
            } => {
                f("file", file);
                f("field", field);
                f("shape", &Shape(shape));
                f("dtype", dtype);
                f("expectedBytes", expected_bytes);
                f("actualBytes", actual_bytes);
                "dataLength"
            }
            E::ShapeDataMismatch {
                file,
                shape,
                expected,
                found,
            } => {
                f("file", file);
                f("shape", &Shape(shape));
                f("expected", expected);
                f("found", found);
                "shapeDataMismatch"
            }
            E::NpyMagic { file, found } => {
                f("file", file);
                f("found", found);
                f("magic", &"\\x93NUMPY");
                "npyMagic"
            }
            E::NpyVersion { file, major, minor } => {
                f("file", file);
                f("major", major);
                f("minor", minor);
                "npyVersion"
            }
            E::HeaderEncoding {
                file,
                field,
                expected,
                offset,
            } => {
                f("file", file);
                f("field", field);
                f("expected", expected);
                f("offset", offset);
                "headerEncoding"
            }
            E::HeaderSyntax {
                file,
                field,
                offset,
                expected,
                found,
            } => {
                f("file", file);
                f("field", field);
                f("offset", offset);
                f("expected", expected);
                f("found", found);
                "headerSyntax"
            }
            E::MissingField { file, field } => {
                f("file", file);
                f("field", field);
                "missingField"
            }
            E::UnknownField {
                file,
                field,
                expected,
            } => {
                f("file", file);
                f("field", field);
                f("expected", expected);
                "unknownField"
            }
            E::Duplicate { file, field } => {
                f("file", file);
                f("field", field);
                "duplicate"
            }
            E::BadField {
                file,
                field,
                value,
                expected,
            } => {
                f("file", file);
                f("field", field);
                f("value", value);
                f("expected", expected);
                "badField"
            }
            E::UnsupportedDtype {
                file,
                field,
                value,
                meaning,
                expected,
            } => {
                f("file", file);
                f("field", field);
                f("value", value);
                f("expected", expected);
                match meaning {
                    Some(m) => {
                        f("meaning", m);
                        "unsupportedDtypeMeaning"
                    }
                    None => "unsupportedDtype",
                }
            }
            E::NotFloat {
                file,
                tensor,
                dtype,
            } => {
                f("file", file);
                f("tensor", tensor);
                f("dtype", dtype);
                "notFloat"
            }
            E::HeaderLength {
                file,
                declared,
                available,
                max,
            } => {
                f("file", file);
                f("declared", declared);
                f("available", available);
                f("max", max);
                "headerLength"
            }
            E::OffsetsReversed {
                file,
                tensor,
                begin,
                end,
            } => {
                f("file", file);
                f("tensor", tensor);
                f("begin", begin);
                f("end", end);
                "offsetsReversed"
            }
            E::OffsetsSize {
                file,
                tensor,
                begin,
                end,
                dtype,
                shape,
                expected_bytes,
            } => {
                f("file", file);
                f("tensor", tensor);
                f("begin", begin);
                f("end", end);
                f("spans", &end.saturating_sub(*begin));
                f("shape", &Shape(shape));
                f("dtype", dtype);
                f("expectedBytes", expected_bytes);
                "offsetsSize"
            }
            E::OffsetsOverlap {
                file,
                tensor,
                begin,
                end,
                other,
                other_begin,
                other_end,
            } => {
                f("file", file);
                f("tensor", tensor);
                f("begin", begin);
                f("end", end);
                f("other", other);
                f("otherBegin", other_begin);
                f("otherEnd", other_end);
                "offsetsOverlap"
            }
            E::OffsetsGap { file, from, to } => {
                f("file", file);
                f("from", from);
                f("to", to);
                "offsetsGap"
            }
            E::OffsetsBeyondData {
                file,
                tensor,
                end,
                data_len,
            } => {
                f("file", file);
                f("tensor", tensor);
                f("end", end);
                f("dataLen", data_len);
                "offsetsBeyondData"
            }
            E::TensorNotFound {
                file,
                name,
                available,
            } => {
                f("file", file);
                f("name", name);
                f("available", &Joined(available, ", "));
                "tensorNotFound"
            }
            // (each skipped tensor's own fields: `skipped`'s `why`)
            E::NoLoadableTensor { file, skipped } => {
                f("file", file);
                f("reasons", &Reasons(skipped));
                "noLoadableTensor"
            }
            E::NotUtf8 {
                file,
                line,
                column,
                byte,
                utf16,
            } => {
                f("file", file);
                f("byte", &format_args!("{byte:02x}"));
                f("line", line);
                f("column", column);
                if *utf16 {
                    "notUtf8Utf16"
                } else {
                    "notUtf8"
                }
            }
            E::Ragged {
                file,
                line,
                found,
                expected,
                first_line,
            } => {
                f("file", file);
                f("line", line);
                f("found", found);
                f("expected", expected);
                f("firstLine", first_line);
                "ragged"
            }
            E::NotANumber {
                file,
                line,
                column,
                text,
            } => {
                f("file", file);
                f("line", line);
                f("column", column);
                f("text", text);
                if text.contains(',') {
                    "notANumberComma"
                } else {
                    "notANumber"
                }
            }
            E::NonFinite {
                file,
                field,
                index,
                value,
            } => {
                f("file", file);
                f("field", field);
                f("index", &Shape(index));
                f("value", value);
                "nonFinite"
            }
            E::Json { file, message, .. } => {
                f("file", file);
                f("message", message);
                "json"
            }
            E::JsonStructure {
                file,
                path,
                found,
                expected,
            } => {
                f("file", file);
                f("path", path);
                f("found", found);
                f("expected", expected);
                "jsonStructure"
            }
            E::JsonRagged {
                file,
                path,
                found,
                expected,
            } => {
                f("file", file);
                f("path", path);
                f("found", found);
                f("expected", expected);
                "jsonRagged"
            }
            E::TensorShape { shape, len } => {
                f("shape", &Shape(shape));
                f("count", &Count(shape));
                f("len", len);
                "tensorShape"
            }
            E::WrongRank {
                file,
                role,
                shape,
                expected,
            } => {
                f("file", file);
                f("role", role);
                f("shape", &Shape(shape));
                match (role.as_str(), expected.as_str()) {
                    ("attention", ATTENTION_SHAPES) => "wrongRankAttention",
                    ("KV", KV_SHAPES) => "wrongRankKv",
                    _ => {
                        f("expected", expected);
                        "wrongRank"
                    }
                }
            }
            E::PickOutOfRange {
                file,
                axis,
                index,
                len,
            } => {
                f("file", file);
                f("axis", axis);
                f("index", index);
                f("max", &len.saturating_sub(1));
                f("len", len);
                "pickOutOfRange"
            }
            E::NegativeWeight { file, index, value } => {
                f("file", file);
                f("index", &Shape(index));
                f("value", value);
                "negativeWeight"
            }
            E::TokenMismatch(m) => {
                f("left", &m.left);
                f("leftT", &m.left_t);
                f("right", &m.right);
                f("rightT", &m.right_t);
                "tokenMismatch"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// The page's Chinese templates of a file refusal by kind (`www/i18n/load-zh.json`, the
    /// page's `LOAD_ZH`).
    fn chinese_templates() -> BTreeMap<String, String> {
        serde_json::from_str(include_str!("../../../www/i18n/load-zh.json"))
            .expect("load-zh.json is an object of strings")
    }

    /// The `{name}`s of a template, sorted.
    fn placeholders(template: &str) -> Vec<String> {
        let mut out: Vec<String> = template
            .split('{')
            .skip(1)
            .filter_map(|p| p.split_once('}').map(|(name, _)| name.to_string()))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// One error of every variant (and of every kind a variant splits into). The match in
    /// `variant` has no wildcard, so a new variant does not compile until it is listed here.
    fn one_of_each() -> Vec<LoadError> {
        let f = || "a.npy".to_string();
        let s = |x: &str| x.to_string();
        let all = vec![
            LoadError::TooLarge {
                file: f(),
                bytes: 314_572_800,
                max_bytes: 268_435_456,
            },
            LoadError::EmptyFile { file: f() },
            LoadError::UnknownFormat {
                file: f(),
                extension: s("bin"),
            },
            LoadError::TooManyElements {
                file: f(),
                field: s("header field 'shape'"),
                shape: vec![100_000, 100_000],
                max_elements: 67_108_864,
            },
            LoadError::TooManyElements {
                file: f(),
                field: s("data"),
                shape: vec![usize::MAX, 3],
                max_elements: 67_108_864,
            },
            LoadError::RankTooHigh {
                file: f(),
                field: s("tensor 'k'"),
                shape: vec![1, 2, 3, 4, 5],
            },
            LoadError::EmptyTensor {
                file: f(),
                field: s("data"),
                shape: vec![0, 4],
            },
            LoadError::Truncated {
                file: f(),
                field: s("header length"),
                needed: 12,
                available: 9,
            },
            LoadError::DataLength {
                file: f(),
                field: s("data"),
                shape: vec![4, 8],
                dtype: s("<f4"),
                expected_bytes: 128,
                actual_bytes: 100,
            },
            LoadError::ShapeDataMismatch {
                file: f(),
                shape: vec![2, 3],
                expected: 6,
                found: 5,
            },
            LoadError::NpyMagic {
                file: f(),
                found: s("PK\\x03\\x04"),
            },
            LoadError::NpyVersion {
                file: f(),
                major: 4,
                minor: 1,
            },
            LoadError::HeaderEncoding {
                file: f(),
                field: s("header"),
                expected: s("UTF-8"),
                offset: 17,
            },
            LoadError::HeaderSyntax {
                file: f(),
                field: s("JSON header"),
                offset: 3,
                expected: s("':'"),
                found: s("x"),
            },
            LoadError::MissingField {
                file: f(),
                field: s("header field 'shape'"),
            },
            LoadError::UnknownField {
                file: f(),
                field: s("header field 'x'"),
                expected: s("'descr', 'fortran_order' and 'shape'"),
            },
            LoadError::Duplicate {
                file: f(),
                field: s("tensor name 'k'"),
            },
            LoadError::BadField {
                file: f(),
                field: s("header field 'fortran_order'"),
                value: s("1"),
                expected: s("True or False"),
            },
            LoadError::UnsupportedDtype {
                file: f(),
                field: s("header field 'descr'"),
                value: s("<c8"),
                meaning: Some(s("complex64")),
                expected: s("f2, f4, f8"),
            },
            LoadError::UnsupportedDtype {
                file: f(),
                field: s("tensor 'k' field 'dtype'"),
                value: s("Q4"),
                meaning: None,
                expected: s("F16, BF16, F32, F64"),
            },
            LoadError::NotFloat {
                file: f(),
                tensor: s("ids"),
                dtype: s("I64"),
            },
            LoadError::HeaderLength {
                file: f(),
                declared: 1 << 40,
                available: 100,
                max: 100_000_000,
            },
            LoadError::OffsetsReversed {
                file: f(),
                tensor: s("k"),
                begin: 8,
                end: 4,
            },
            LoadError::OffsetsSize {
                file: f(),
                tensor: s("k"),
                begin: 0,
                end: 10,
                dtype: s("F32"),
                shape: vec![2, 2],
                expected_bytes: 16,
            },
            LoadError::OffsetsOverlap {
                file: f(),
                tensor: s("k"),
                begin: 0,
                end: 16,
                other: s("v"),
                other_begin: 8,
                other_end: 24,
            },
            LoadError::OffsetsGap {
                file: f(),
                from: 16,
                to: 24,
            },
            LoadError::OffsetsBeyondData {
                file: f(),
                tensor: s("k"),
                end: 64,
                data_len: 32,
            },
            LoadError::TensorNotFound {
                file: f(),
                name: s("q"),
                available: vec![s("k"), s("v")],
            },
            LoadError::NoLoadableTensor {
                file: f(),
                skipped: vec![crate::SkippedTensor {
                    name: s("ids"),
                    dtype: s("I64"),
                    shape: vec![4],
                    reason: s("tensor 'ids' is I64"),
                    why: ("unsupportedDtype", vec![("dtype", s("I64"))]),
                    file_cap: false,
                }],
            },
            LoadError::NotUtf8 {
                file: f(),
                line: 2,
                column: 5,
                byte: 0xff,
                utf16: false,
            },
            LoadError::NotUtf8 {
                file: f(),
                line: 1,
                column: 1,
                byte: 0xfe,
                utf16: true,
            },
            LoadError::Ragged {
                file: f(),
                line: 4,
                found: 3,
                expected: 4,
                first_line: 1,
            },
            LoadError::NotANumber {
                file: f(),
                line: 3,
                column: 2,
                text: s("abc"),
            },
            LoadError::NotANumber {
                file: f(),
                line: 3,
                column: 2,
                text: s("0,5"),
            },
            LoadError::NonFinite {
                file: f(),
                field: s("line 5, column 2"),
                index: vec![4, 1],
                value: s("NaN"),
            },
            LoadError::Json {
                file: f(),
                line: 1,
                column: 7,
                message: s("expected value at line 1 column 7"),
            },
            LoadError::JsonStructure {
                file: f(),
                path: s("[2][0]"),
                found: s("a string"),
                expected: s("a number"),
            },
            LoadError::JsonRagged {
                file: f(),
                path: s("[1]"),
                found: 2,
                expected: 3,
            },
            LoadError::TensorShape {
                shape: vec![2, 3],
                len: 5,
            },
            LoadError::WrongRank {
                file: f(),
                role: s("attention"),
                shape: vec![7],
                expected: s(ATTENTION_SHAPES),
            },
            LoadError::WrongRank {
                file: f(),
                role: s("KV"),
                shape: vec![7],
                expected: s(KV_SHAPES),
            },
            LoadError::WrongRank {
                file: f(),
                role: s("V"),
                shape: vec![7],
                expected: s("[T, d]"),
            },
            LoadError::PickOutOfRange {
                file: f(),
                axis: s("head"),
                index: 9,
                len: 8,
            },
            LoadError::NegativeWeight {
                file: f(),
                index: vec![0, 3],
                value: s("-0.25"),
            },
            LoadError::TokenMismatch(TokenMismatch {
                left: s("attention"),
                left_t: 512,
                right: s("K"),
                right_t: 511,
            }),
        ];
        for e in &all {
            variant(e);
        }
        all
    }

    /// (No wildcard: see `one_of_each`.)
    fn variant(e: &LoadError) {
        match e {
            LoadError::TooLarge { .. }
            | LoadError::EmptyFile { .. }
            | LoadError::UnknownFormat { .. }
            | LoadError::TooManyElements { .. }
            | LoadError::RankTooHigh { .. }
            | LoadError::EmptyTensor { .. }
            | LoadError::Truncated { .. }
            | LoadError::DataLength { .. }
            | LoadError::ShapeDataMismatch { .. }
            | LoadError::NpyMagic { .. }
            | LoadError::NpyVersion { .. }
            | LoadError::HeaderEncoding { .. }
            | LoadError::HeaderSyntax { .. }
            | LoadError::MissingField { .. }
            | LoadError::UnknownField { .. }
            | LoadError::Duplicate { .. }
            | LoadError::BadField { .. }
            | LoadError::UnsupportedDtype { .. }
            | LoadError::NotFloat { .. }
            | LoadError::HeaderLength { .. }
            | LoadError::OffsetsReversed { .. }
            | LoadError::OffsetsSize { .. }
            | LoadError::OffsetsOverlap { .. }
            | LoadError::OffsetsGap { .. }
            | LoadError::OffsetsBeyondData { .. }
            | LoadError::TensorNotFound { .. }
            | LoadError::NoLoadableTensor { .. }
            | LoadError::NotUtf8 { .. }
            | LoadError::Ragged { .. }
            | LoadError::NotANumber { .. }
            | LoadError::NonFinite { .. }
            | LoadError::Json { .. }
            | LoadError::JsonStructure { .. }
            | LoadError::JsonRagged { .. }
            | LoadError::TensorShape { .. }
            | LoadError::WrongRank { .. }
            | LoadError::PickOutOfRange { .. }
            | LoadError::NegativeWeight { .. }
            | LoadError::TokenMismatch(_) => {}
        }
    }

    /// Every kind of refusal has a Chinese template on the page, which names exactly the
    /// fields the kind gives (none left unfilled, none dropped), and every template is some
    /// error's. (In English the page shows the message itself.)
    #[test]
    fn every_refusal_has_a_chinese_template_naming_its_fields() {
        let zh = chinese_templates();
        let missing = crate::upload::UploadError::Missing {
            name: "x::k".into(),
        };
        let mut parts: Vec<LoadParts> = one_of_each().iter().map(LoadError::parts).collect();
        parts.push(missing.parts());
        let two = crate::upload::UploadError::TwoRoles {
            name: "k.npy".into(),
            first: "keys",
            second: "values",
        };
        parts.push(two.parts());
        parts.push(crate::upload::UploadError::NothingChosen.parts());
        let mut used = std::collections::BTreeSet::new();
        for (kind, args) in parts {
            let template = zh
                .get(kind)
                .unwrap_or_else(|| panic!("no Chinese template {kind}"));
            let mut names: Vec<String> = args.iter().map(|(k, _)| k.to_string()).collect();
            let given = names.len();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), given, "{kind}: a field given twice");
            assert_eq!(
                placeholders(template),
                names,
                "{kind}: the template's fields"
            );
            assert!(
                template
                    .chars()
                    .any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)),
                "{kind} is in Chinese: {template}"
            );
            used.insert(kind);
        }
        let unused: Vec<&String> = zh.keys().filter(|k| !used.contains(k.as_str())).collect();
        assert!(unused.is_empty(), "templates no error uses: {unused:?}");
    }

    /// Each variant's fields are what its English message says: the values it names appear in
    /// it as given (so a template that names them says the same values).
    #[test]
    fn the_fields_are_the_messages_values() {
        for e in one_of_each() {
            let message = e.to_string();
            let (kind, args) = e.parts();
            for (name, value) in &args {
                assert!(
                    message.contains(value.as_str()),
                    "{kind}: {name} = {value:?} not in {message:?}"
                );
            }
        }
    }

    /// The two roles with their own kinds keep their shapes in the template: a role checked
    /// with other shapes takes the general kind, which names them.
    #[test]
    fn a_wrong_rank_names_its_shapes() {
        let kind = |role: &str, expected: &str| {
            LoadError::WrongRank {
                file: "f".into(),
                role: role.into(),
                shape: vec![1],
                expected: expected.into(),
            }
            .parts()
            .0
        };
        assert_eq!(kind("attention", ATTENTION_SHAPES), "wrongRankAttention");
        assert_eq!(kind("KV", KV_SHAPES), "wrongRankKv");
        assert_eq!(kind("attention", KV_SHAPES), "wrongRank");
        assert_eq!(kind("K", "[T, d]"), "wrongRank");
    }
}
