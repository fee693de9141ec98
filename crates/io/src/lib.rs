//! Loaders: bring your own attention matrix or KV tensor (issue 3, "Inputs").
//!
//! A learner uploads a file captured from a real model; [`load`] turns its bytes into one or more
//! named n-D [`Tensor`]s, and [`interpret_attention`] / [`interpret_kv`] turn a tensor into the
//! [`Matrix`] the note's formulas use (`A` is `S x T`, `X` is `T x d`), with a
//! shape description the page shows before use.
//!
//! | format | module | what is read |
//! |---|---|---|
//! | `.npy` 1.0 / 2.0 / 3.0 | [`npy`] | f2/f4/f8, i1..i8, u1..u8, b1; `<` / `>`; C / Fortran order; rank 0..=4 |
//! | `.safetensors` | [`safetensors`] | every tensor listed; F16, BF16, F32, F64 loaded |
//! | `.csv` / `.tsv` / `.txt` | [`csv`] | a 2-D matrix; `,` `\t` `;` or spaces; optional header row |
//! | `.json` | [`json`] | nested lists (rank 1 to 4) or `{"shape": [...], "data": [...]}` |
//!
//! Every parser is strict and total: any byte string gives `Ok` or a [`LoadError`] naming the
//! file, the field, the bad value and what was expected; none panics. Sizes are checked against
//! [`Limits`] before reading (bytes) and before allocating (elements).

use kvlab_core::Matrix;

mod error;
mod interpret;
pub mod upload;

pub mod csv;
pub mod json;
pub mod lm;
pub mod model_report;
pub mod needle_report;
pub mod npy;
pub mod safetensors;

pub use error::{collect_parts, FieldSink, LoadError, LoadParts, LoadWarning, TokenMismatch};
pub(crate) use interpret::check_k_v_tokens;
pub use interpret::{
    check_kv_pair, check_same_tokens, interpret_attention, interpret_kv, normalise_rows, squeezed,
    AttentionAbout, AttentionKind, AttentionView, HeadPick, KvAbout, KvPick, KvView,
    ROW_SUM_TOLERANCE,
};

pub(crate) use error::fmt_shape;

/// The most axes a loaded tensor may have: attention is at most `[H, S, T]`, KV at most
/// `[L, H, T, d]`.
pub const MAX_RANK: usize = 4;

/// Caps applied before reading and before allocating.
///
/// `max_bytes` is checked against the file's size before its bytes are read ([`check_size`]) and
/// again by [`load`]; `max_elements` is checked against every declared shape before any buffer
/// is allocated, so a 100-byte file that claims a `[10^12]` array costs nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest file accepted, in bytes. Default 256 MiB (`268_435_456`); any value `>= 1`.
    pub max_bytes: usize,
    /// Largest element count of one file's loaded tensors, summed. Default 64 Mi
    /// (`67_108_864` f32 values = 256 MiB); any value `>= 1`.
    pub max_elements: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bytes: 256 * 1024 * 1024,
            max_elements: 64 * 1024 * 1024,
        }
    }
}

/// A dense n-D `f32` tensor in row-major (C) order: `data.len() == product(shape)`.
///
/// Rank 0 (a scalar, `shape == []`, one value) up to any rank is representable; the loaders
/// produce rank `0..=`[`MAX_RANK`]. Fortran-ordered input is converted to C order on load, so
/// the value at multi-index `[i0, .., ik]` is `data[((i0 * s1 + i1) * s2 + ..) + ik]`.
///
/// ```
/// use kvlab_io::Tensor;
/// let t = Tensor::new(vec![2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
/// assert_eq!(t.get(&[1, 0]), Some(3.0));
/// assert_eq!(t.rank(), 2);
/// assert!(Tensor::new(vec![2, 2], vec![1.0]).is_err());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    shape: Vec<usize>,
    data: Vec<f32>,
}

impl Tensor {
    /// Builds a tensor; errors with [`LoadError::TensorShape`] when `data.len()` is not
    /// `product(shape)` (or the product overflows).
    pub fn new(shape: Vec<usize>, data: Vec<f32>) -> Result<Self, LoadError> {
        match checked_numel(&shape) {
            Some(n) if n == data.len() => Ok(Self { shape, data }),
            _ => Err(LoadError::TensorShape {
                len: data.len(),
                shape,
            }),
        }
    }

    /// The shape, outermost axis first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of axes (`0` for a scalar).
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of values, `product(shape)`.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the tensor has no values (some axis is 0).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The values in C order.
    pub fn data(&self) -> &[f32] {
        &self.data
    }

    /// Consumes the tensor and returns `(shape, data)`.
    pub fn into_parts(self) -> (Vec<usize>, Vec<f32>) {
        (self.shape, self.data)
    }

    /// The value at multi-index `index` (one entry per axis), or `None` when out of range.
    pub fn get(&self, index: &[usize]) -> Option<f32> {
        if index.len() != self.shape.len() {
            return None;
        }
        let mut flat = 0usize;
        for (&i, &d) in index.iter().zip(&self.shape) {
            if i >= d {
                return None;
            }
            flat = flat.checked_mul(d)?.checked_add(i)?;
        }
        self.data.get(flat).copied()
    }

    /// The first NaN or infinite value as `(multi-index, value)`, if any.
    pub fn first_non_finite(&self) -> Option<(Vec<usize>, f32)> {
        let pos = self.data.iter().position(|v| !v.is_finite())?;
        let value = self.data.get(pos).copied()?;
        Some((multi_index(&self.shape, pos), value))
    }
}

/// The file formats [`load`] understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// numpy `.npy`, versions 1.0, 2.0 and 3.0.
    Npy,
    /// Hugging Face `.safetensors`.
    Safetensors,
    /// Delimited text: `.csv`, `.tsv`, `.txt`.
    Csv,
    /// `.json`: nested lists or `{"shape", "data"}`.
    Json,
}

impl Format {
    /// A short name for messages (`npy`, `safetensors`, `csv`, `json`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Npy => "npy",
            Format::Safetensors => "safetensors",
            Format::Csv => "csv",
            Format::Json => "json",
        }
    }
}

/// One loaded tensor with its name and source dtype.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedTensor {
    /// The tensor's name: the key in a `.safetensors` file, else the file name.
    pub name: String,
    /// The element type as stored in the file (`<f4 (float32)`, `BF16`, `text`), before the cast
    /// to f32.
    pub dtype: String,
    /// The values, as f32 in C order.
    pub tensor: Tensor,
}

/// A tensor that is listed in a file but was not loaded, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SkippedTensor {
    /// The tensor's name.
    pub name: String,
    /// Its dtype as stored.
    pub dtype: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Why it was not loaded (the [`LoadError`]'s message, without the file name, and with
    /// a note when `file_cap`).
    pub reason: String,
    /// That error's fields, which the page words in its language ([`LoadError::parts`]; the
    /// fields, not the error, so that code which only keeps files, such as the page's module,
    /// does not carry every error's drop code).
    pub why: LoadParts,
    /// Whether it is the element cap counted over the file's tensors together (the tensors
    /// loaded before it took the rest), not this tensor alone.
    pub file_cap: bool,
}

/// What [`load`] found in one file: one or more tensors, each finite and non-empty.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedFile {
    /// The file name as given.
    pub file_name: String,
    /// The format it was read as.
    pub format: Format,
    /// The loaded tensors, at least one unless the file holds the token texts alone; in file
    /// order (safetensors: data-offset order).
    pub tensors: Vec<NamedTensor>,
    /// The prompt's token texts, one per token: a `.json` list of strings, or a safetensors
    /// file's `__metadata__` entry `tokens` (a JSON list of strings as text).
    pub tokens: Option<Vec<String>>,
    /// Tensors listed but not loaded (safetensors only: integer dtypes, empty, rank > 4, NaN).
    pub skipped: Vec<SkippedTensor>,
    /// One line for the page, e.g. `attn.npy: npy 1.0, <f4 (float32), C order, shape [8, 64, 512]`
    /// ([`FileAbout::english`] of `about`).
    pub summary: String,
    /// What `summary` says, as fields, so the page can say it in its own language.
    pub about: FileAbout,
}

/// What the page says about a loaded file (its format's details), as fields; the page words them
/// in its language, and [`FileAbout::english`] is the English line ([`LoadedFile::summary`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(
    tag = "format",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum FileAbout {
    /// A `.npy` file.
    Npy {
        /// Format version, `1.0`, `2.0` or `3.0`.
        version: String,
        /// The stored dtype, e.g. `<f4 (float32)`.
        dtype: String,
        /// Stored in Fortran (column-major) order.
        fortran_order: bool,
        /// The shape.
        shape: Vec<usize>,
    },
    /// A text table.
    Csv {
        /// The delimiter (as `comma`, `tab`, `semicolon` or `space`).
        delimiter: csv::Delimiter,
        /// Whether a header row was found (and skipped).
        header_row: bool,
        /// The shape.
        shape: Vec<usize>,
    },
    /// A `.json` file.
    Json {
        /// The shape.
        shape: Vec<usize>,
    },
    /// A `.json` list of strings: the prompt's token texts.
    Tokens {
        /// How many.
        count: usize,
    },
    /// A `.safetensors` file.
    Safetensors {
        /// Tensors loaded.
        loaded: usize,
        /// Tensors listed but not loaded.
        skipped: usize,
    },
}

impl FileAbout {
    /// The English line for `file_name`, e.g. `k.csv: comma-separated text, no header row, shape
    /// [40, 8]`.
    ///
    /// ```
    /// use kvlab_io::FileAbout;
    /// let about = FileAbout::Json { shape: vec![2, 3] };
    /// assert_eq!(about.english("a.json"), "a.json: json, shape [2, 3]");
    /// ```
    pub fn english(&self, file_name: &str) -> String {
        match self {
            FileAbout::Npy {
                version,
                dtype,
                fortran_order,
                shape,
            } => format!(
                "{file_name}: npy {version}, {dtype}, {} order, shape {}",
                if *fortran_order { "Fortran" } else { "C" },
                fmt_shape(shape)
            ),
            FileAbout::Csv {
                delimiter,
                header_row,
                shape,
            } => format!(
                "{file_name}: {} text, {}, shape {}",
                delimiter.name(),
                if *header_row {
                    "header row skipped"
                } else {
                    "no header row"
                },
                fmt_shape(shape)
            ),
            FileAbout::Json { shape } => format!("{file_name}: json, shape {}", fmt_shape(shape)),
            FileAbout::Tokens { count } => format!("{file_name}: the text of {count} tokens"),
            FileAbout::Safetensors { loaded, skipped } => {
                format!("{file_name}: safetensors, {loaded} tensor(s) loaded, {skipped} skipped")
            }
        }
    }
}

impl LoadedFile {
    /// The tensor called `name`, if loaded.
    pub fn get(&self, name: &str) -> Option<&NamedTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

/// Checks a file's size against `limits.max_bytes` before its bytes are read (the page knows
/// `File.size` up front). Errors with [`LoadError::TooLarge`].
///
/// ```
/// use kvlab_io::{check_size, Limits, LoadError};
/// let limits = Limits::default();
/// assert!(check_size("a.npy", 1000, &limits).is_ok());
/// assert!(matches!(check_size("a.npy", 300 << 20, &limits), Err(LoadError::TooLarge { .. })));
/// ```
pub fn check_size(file_name: &str, size: u64, limits: &Limits) -> Result<(), LoadError> {
    let too_big = usize::try_from(size).map_or(true, |s| s > limits.max_bytes);
    if too_big {
        return Err(LoadError::TooLarge {
            file: file_name.to_string(),
            bytes: size,
            max_bytes: limits.max_bytes,
        });
    }
    Ok(())
}

/// The lower-cased extension of `file_name` (after the last `.`), or `""`.
fn extension(file_name: &str) -> String {
    match file_name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext.to_ascii_lowercase(),
        _ => String::new(),
    }
}

/// Picks the format: magic bytes first (`\x93NUMPY`, or an 8-byte length followed by `{` for
/// safetensors), then the extension, then a JSON sniff for unknown extensions.
pub fn detect_format(file_name: &str, bytes: &[u8]) -> Result<Format, LoadError> {
    let ext = extension(file_name);
    if bytes.starts_with(npy::MAGIC) {
        return Ok(Format::Npy);
    }
    match ext.as_str() {
        "npy" => return Ok(Format::Npy),
        "safetensors" | "st" => return Ok(Format::Safetensors),
        "csv" | "tsv" | "txt" | "tab" => return Ok(Format::Csv),
        "json" => return Ok(Format::Json),
        _ => {}
    }
    if safetensors::looks_like(bytes) {
        return Ok(Format::Safetensors);
    }
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if matches!(first, Some(b'[') | Some(b'{')) {
        return Ok(Format::Json);
    }
    Err(LoadError::UnknownFormat {
        file: file_name.to_string(),
        extension: ext,
    })
}

/// Loads every tensor in a file.
///
/// Checks, in order: `bytes.len() <= limits.max_bytes` ([`LoadError::TooLarge`]), a non-empty
/// file, the format ([`detect_format`]), then the format's own rules. Every loaded tensor is
/// non-empty, has rank `0..=4`, holds only finite values, and all of them together have at most
/// `limits.max_elements` values. A safetensors file's other tensors (integer dtypes, empty,
/// rank > 4, non-finite) are listed in [`LoadedFile::skipped`]; if none loads, the error says
/// why for each.
///
/// ```
/// use kvlab_io::{load, Limits};
/// let f = load("m.csv", b"0.5,0.5\n0.25,0.75\n", &Limits::default()).unwrap();
/// assert_eq!(f.tensors[0].tensor.shape(), &[2, 2]);
/// assert!(load("m.csv", b"1,2\n3\n", &Limits::default()).is_err());
/// ```
pub fn load(file_name: &str, bytes: &[u8], limits: &Limits) -> Result<LoadedFile, LoadError> {
    check_size(file_name, bytes.len() as u64, limits)?;
    if bytes.is_empty() {
        return Err(LoadError::EmptyFile {
            file: file_name.to_string(),
        });
    }
    let format = detect_format(file_name, bytes)?;
    let file = file_name.to_string();
    match format {
        Format::Npy => {
            let (header, tensor) = npy::load_with_header(file_name, bytes, limits)?;
            let about = FileAbout::Npy {
                version: format!("{}.{}", header.version.0, header.version.1),
                dtype: header.dtype.label(),
                fortran_order: header.fortran_order,
                shape: header.shape.clone(),
            };
            Ok(single(file, format, header.dtype.label(), tensor, about))
        }
        Format::Csv => {
            let table = csv::load(file_name, bytes, limits)?;
            let about = FileAbout::Csv {
                delimiter: table.delimiter,
                header_row: table.header.is_some(),
                shape: table.tensor.shape().to_vec(),
            };
            Ok(single(file, format, "text".into(), table.tensor, about))
        }
        Format::Json => {
            if let Some(texts) = json::load_token_texts(file_name, bytes, limits)? {
                let about = FileAbout::Tokens { count: texts.len() };
                return Ok(LoadedFile {
                    summary: about.english(&file),
                    about,
                    file_name: file,
                    format,
                    tensors: Vec::new(),
                    tokens: Some(texts),
                    skipped: Vec::new(),
                });
            }
            let tensor = json::load(file_name, bytes, limits)?;
            let about = FileAbout::Json {
                shape: tensor.shape().to_vec(),
            };
            Ok(single(file, format, "json number".into(), tensor, about))
        }
        Format::Safetensors => load_safetensors(file_name, bytes, limits),
    }
}

/// A [`LoadedFile`] holding one tensor named after the file.
fn single(
    file: String,
    format: Format,
    dtype: String,
    tensor: Tensor,
    about: FileAbout,
) -> LoadedFile {
    LoadedFile {
        summary: about.english(&file),
        tensors: vec![NamedTensor {
            name: file.clone(),
            dtype,
            tensor,
        }],
        file_name: file,
        format,
        skipped: Vec::new(),
        tokens: None,
        about,
    }
}

/// Loads every loadable tensor of a safetensors file; the others go to `skipped`.
fn load_safetensors(
    file_name: &str,
    bytes: &[u8],
    limits: &Limits,
) -> Result<LoadedFile, LoadError> {
    let (infos, tokens) = safetensors::list_with_tokens(file_name, bytes)?;
    let tokens = tokens
        .map(|text| {
            json::load_token_texts(file_name, text.as_bytes(), limits)?.ok_or_else(|| {
                LoadError::BadField {
                    file: file_name.to_string(),
                    field: "'__metadata__' entry 'tokens'".to_string(),
                    value: text.chars().take(60).collect(),
                    expected: "a JSON list of strings (the prompt's tokens)".to_string(),
                }
            })
        })
        .transpose()?;
    let mut tensors = Vec::new();
    let mut skipped = Vec::new();
    let mut budget = limits.max_elements;
    let prefix = format!("{file_name}: ");
    let reason = |e: &LoadError| {
        let m = e.to_string();
        m.strip_prefix(&prefix).map(str::to_string).unwrap_or(m)
    };
    if let [info] = infos.as_slice() {
        // One tensor: its own error is the most specific thing to say.
        let tensor = safetensors::load_info(file_name, bytes, info, limits)?;
        let about = FileAbout::Safetensors {
            loaded: 1,
            skipped: 0,
        };
        return Ok(LoadedFile {
            summary: about.english(file_name),
            about,
            file_name: file_name.to_string(),
            format: Format::Safetensors,
            tensors: vec![NamedTensor {
                name: info.name.clone(),
                dtype: info.dtype.name().to_string(),
                tensor,
            }],
            tokens,
            skipped: Vec::new(),
        });
    }
    for info in &infos {
        let remaining = Limits {
            max_bytes: limits.max_bytes,
            max_elements: budget,
        };
        match safetensors::load_info(file_name, bytes, info, &remaining) {
            Ok(tensor) => {
                budget = budget.saturating_sub(tensor.len());
                tensors.push(NamedTensor {
                    name: info.name.clone(),
                    dtype: info.dtype.name().to_string(),
                    tensor,
                });
            }
            // Running out of the element budget is about the file, not one tensor: say so.
            Err(e @ LoadError::TooManyElements { .. }) if !tensors.is_empty() => {
                skipped.push(SkippedTensor {
                    name: info.name.clone(),
                    dtype: info.dtype.name().to_string(),
                    shape: info.shape.clone(),
                    reason: format!(
                        "{} (the cap counts all tensors of the file together)",
                        reason(&e)
                    ),
                    why: e.parts(),
                    file_cap: true,
                });
            }
            Err(e) => skipped.push(SkippedTensor {
                name: info.name.clone(),
                dtype: info.dtype.name().to_string(),
                shape: info.shape.clone(),
                reason: reason(&e),
                why: e.parts(),
                file_cap: false,
            }),
        }
    }
    if tensors.is_empty() {
        return Err(LoadError::NoLoadableTensor {
            file: file_name.to_string(),
            skipped,
        });
    }
    let about = FileAbout::Safetensors {
        loaded: tensors.len(),
        skipped: skipped.len(),
    };
    Ok(LoadedFile {
        summary: about.english(file_name),
        about,
        file_name: file_name.to_string(),
        format: Format::Safetensors,
        tensors,
        tokens,
        skipped,
    })
}

/// `bytes` as UTF-8 text, or [`LoadError::NotUtf8`] naming the line and column of the first
/// byte that is not (and whether the file looks like UTF-16).
pub(crate) fn utf8_text<'a>(file: &str, bytes: &'a [u8]) -> Result<&'a str, LoadError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        let before = bytes.get(..at).unwrap_or(&[]);
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        LoadError::NotUtf8 {
            file: file.to_string(),
            line,
            column: at.saturating_sub(line_start) + 1,
            byte: bytes.get(at).copied().unwrap_or(0),
            utf16: bytes.starts_with(&[0xff, 0xfe]) || bytes.starts_with(&[0xfe, 0xff]),
        }
    })
}

/// `product(shape)`, or `None` on overflow. The empty shape (a scalar) has one element.
pub(crate) fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// The C-order multi-index of flat position `flat` in `shape` (`flat < product(shape)`).
pub(crate) fn multi_index(shape: &[usize], flat: usize) -> Vec<usize> {
    let mut index = vec![0usize; shape.len()];
    let mut rest = flat;
    for (slot, &d) in index.iter_mut().zip(shape).rev() {
        if d > 0 {
            *slot = rest % d;
            rest /= d;
        }
    }
    index
}

/// Checks rank `<= MAX_RANK`, `product(shape) <= max_elements` and a non-empty shape, in that
/// order, before anything is allocated. Returns `product(shape)`.
pub(crate) fn check_shape(
    file: &str,
    field: &str,
    shape: &[usize],
    limits: &Limits,
) -> Result<usize, LoadError> {
    if shape.len() > MAX_RANK {
        return Err(LoadError::RankTooHigh {
            file: file.to_string(),
            field: field.to_string(),
            shape: shape.to_vec(),
        });
    }
    let numel = match checked_numel(shape) {
        Some(n) if n <= limits.max_elements => n,
        _ => {
            return Err(LoadError::TooManyElements {
                file: file.to_string(),
                field: field.to_string(),
                shape: shape.to_vec(),
                max_elements: limits.max_elements,
            })
        }
    };
    if numel == 0 {
        return Err(LoadError::EmptyTensor {
            file: file.to_string(),
            field: field.to_string(),
            shape: shape.to_vec(),
        });
    }
    Ok(numel)
}

/// Errors with [`LoadError::NonFinite`] at the first NaN / infinite value of `tensor`.
pub(crate) fn check_finite(file: &str, field: &str, tensor: &Tensor) -> Result<(), LoadError> {
    match tensor.first_non_finite() {
        Some((index, value)) => Err(LoadError::NonFinite {
            file: file.to_string(),
            field: field.to_string(),
            index,
            value: value.to_string(),
        }),
        None => Ok(()),
    }
}

/// Copies the first `N` bytes of `chunk` into an array (zero-filled if shorter, which the
/// callers' `chunks_exact` rules out) without a panicking conversion.
pub(crate) fn le_array<const N: usize>(chunk: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    for (d, s) in a.iter_mut().zip(chunk) {
        *d = *s;
    }
    a
}

/// Shows up to `max` bytes for a message: printable ASCII as is, anything else as `\xNN`
/// (`\x93NUMPY`).
pub(crate) fn escape_bytes(bytes: &[u8], max: usize) -> String {
    let shown = bytes.get(..max).unwrap_or(bytes);
    let mut s = String::new();
    for &b in shown {
        match b {
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(char::from(b)),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    if bytes.len() > shown.len() {
        s.push_str("...");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_about_holds_what_the_summary_says_for_every_format() {
        let limits = Limits::default();
        let csv = load("k.tsv", b"a\tb\n1\t2\n3\t4\n", &limits).expect("csv");
        let json = load("q.json", b"[[1, 2, 3]]", &limits).expect("json");
        let npy = load(
            "x.npy",
            &std::fs::read(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../tests/fixtures/interpret/kv_t4_d2.npy"
            ))
            .expect("fixture"),
            &limits,
        )
        .expect("npy");
        assert_eq!(
            csv.about,
            FileAbout::Csv {
                delimiter: csv::Delimiter::Tab,
                header_row: true,
                shape: vec![2, 2],
            }
        );
        assert_eq!(json.about, FileAbout::Json { shape: vec![1, 3] });
        assert!(matches!(
            &npy.about,
            FileAbout::Npy { version, fortran_order: false, shape, .. }
                if version == "1.0" && shape == &vec![4, 2]
        ));
        for f in [&csv, &json, &npy] {
            assert_eq!(f.summary, f.about.english(&f.file_name));
        }
        assert_eq!(
            csv.summary,
            "k.tsv: tab-separated text, header row skipped, shape [2, 2]"
        );
        // The page reads the delimiter by its key; the key is its serde name.
        for d in [
            csv::Delimiter::Comma,
            csv::Delimiter::Tab,
            csv::Delimiter::Semicolon,
            csv::Delimiter::Whitespace,
        ] {
            assert_eq!(
                serde_json::to_string(&d).expect("serialize"),
                format!("\"{}\"", d.key())
            );
        }
        let tags = serde_json::to_value(&json.about).expect("serialize");
        assert_eq!(tags["format"], "json");
    }

    #[test]
    fn multi_index_is_c_order() {
        assert_eq!(multi_index(&[2, 3, 4], 0), vec![0, 0, 0]);
        assert_eq!(multi_index(&[2, 3, 4], 23), vec![1, 2, 3]);
        assert_eq!(multi_index(&[2, 3, 4], 13), vec![1, 0, 1]);
        assert_eq!(multi_index(&[], 0), Vec::<usize>::new());
    }

    #[test]
    fn tensor_get_matches_multi_index() {
        let t = Tensor::new(vec![2, 3, 4], (0..24).map(|v| v as f32).collect()).unwrap();
        for flat in 0..24 {
            assert_eq!(t.get(&multi_index(&[2, 3, 4], flat)), Some(flat as f32));
        }
        assert_eq!(t.get(&[2, 0, 0]), None);
        assert_eq!(t.get(&[0, 0]), None);
        let scalar = Tensor::new(vec![], vec![7.0]).unwrap();
        assert_eq!(scalar.get(&[]), Some(7.0));
    }

    #[test]
    fn check_shape_order_of_checks() {
        let l = Limits {
            max_bytes: 100,
            max_elements: 10,
        };
        assert!(matches!(
            check_shape("f", "s", &[1, 1, 1, 1, 1], &l),
            Err(LoadError::RankTooHigh { .. })
        ));
        assert!(matches!(
            check_shape("f", "s", &[usize::MAX, 2], &l),
            Err(LoadError::TooManyElements { .. })
        ));
        assert!(matches!(
            check_shape("f", "s", &[11], &l),
            Err(LoadError::TooManyElements { .. })
        ));
        assert!(matches!(
            check_shape("f", "s", &[3, 0], &l),
            Err(LoadError::EmptyTensor { .. })
        ));
        assert_eq!(check_shape("f", "s", &[], &l), Ok(1));
        assert_eq!(check_shape("f", "s", &[2, 5], &l), Ok(10));
    }

    #[test]
    fn detect_format_prefers_magic() {
        assert_eq!(
            detect_format("x.csv", b"\x93NUMPY\x01\x00"),
            Ok(Format::Npy)
        );
        assert_eq!(detect_format("x.data", b"  [1, 2]"), Ok(Format::Json));
        assert_eq!(detect_format("x.TSV", b"1\t2"), Ok(Format::Csv));
        assert!(matches!(
            detect_format("noext", b"hello"),
            Err(LoadError::UnknownFormat { .. })
        ));
    }

    #[test]
    fn size_cap_message_says_mib() {
        let e = check_size("big.npy", 300 * 1024 * 1024, &Limits::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "big.npy is 300.0 MiB (314572800 bytes): the size cap is 256.0 MiB (268435456 bytes); \
             save a smaller slice (one layer or head, or float16)"
        );
    }
}
