//! numpy `.npy` reader (issue 3, "Loaders"): versions 1.0, 2.0 and 3.0, a small strict parser.
//!
//! Layout (numpy's `format.py`): the magic `\x93NUMPY`, a major and a minor version byte, the
//! header length (`u16` LE for 1.0, `u32` LE for 2.0 / 3.0), then the header — a Python dict
//! literal `{'descr': '<f4', 'fortran_order': False, 'shape': (8, 64), }` padded with spaces and a
//! newline (latin-1 for 1.0 / 2.0, UTF-8 for 3.0) — and then the raw data, `product(shape)` items.
//!
//! Accepted dtypes: `f2 f4 f8` (float16/32/64), `i1 i2 i4 i8`, `u1 u2 u4 u8` and `b1` (bool),
//! little (`<`) or big (`>`) endian (`|` for one-byte types), all cast to `f32`; C or Fortran
//! order (Fortran is converted to C order); rank 0..=4. The header must hold exactly the keys
//! `descr`, `fortran_order` and `shape`; anything else is an error naming the field.

use super::{check_shape, escape_bytes, le_array, Limits, LoadError, Tensor};

/// The six bytes every `.npy` file starts with.
pub const MAGIC: &[u8] = b"\x93NUMPY";

/// Deepest nesting of tuples / lists accepted in a header value (a shape needs 1).
const MAX_NESTING: usize = 8;

/// What an axis length must be, for messages.
const AXIS_RANGE: &str =
    "axis lengths that are non-negative integers that fit in usize (below 2^64; 2^32 in the browser)";

/// The supported dtypes, for messages.
const SUPPORTED: &str =
    "f2, f4, f8, i1..i8, u1..u8, b1 (little '<' or big '>' endian; '|' for one-byte types)";

/// The kind of an element type (`descr`'s letter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `f`: IEEE float of 2, 4 or 8 bytes.
    Float,
    /// `i`: signed integer of 1, 2, 4 or 8 bytes.
    Int,
    /// `u`: unsigned integer of 1, 2, 4 or 8 bytes.
    Uint,
    /// `b`: bool, 1 byte (0 is false, anything else true).
    Bool,
}

/// A supported `descr`: kind, item size in bytes (1, 2, 4 or 8) and byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NpyDtype {
    /// Float, signed, unsigned or bool.
    pub kind: Kind,
    /// Bytes per item: 2/4/8 for floats, 1/2/4/8 for integers, 1 for bool.
    pub size: usize,
    /// `true` for `>` (big endian); one-byte types are `false`.
    pub big_endian: bool,
}

impl NpyDtype {
    /// The canonical `descr` string, e.g. `<f4`, `>i2`, `|u1`.
    pub fn descr(&self) -> String {
        let order = if self.size == 1 {
            '|'
        } else if self.big_endian {
            '>'
        } else {
            '<'
        };
        let letter = match self.kind {
            Kind::Float => 'f',
            Kind::Int => 'i',
            Kind::Uint => 'u',
            Kind::Bool => 'b',
        };
        format!("{order}{letter}{}", self.size)
    }

    /// numpy's name for the type: `float32`, `int8`, `bool`...
    pub fn name(&self) -> String {
        let bits = self.size * 8;
        match self.kind {
            Kind::Float => format!("float{bits}"),
            Kind::Int => format!("int{bits}"),
            Kind::Uint => format!("uint{bits}"),
            Kind::Bool => "bool".to_string(),
        }
    }

    /// `descr` and name together: `<f4 (float32)`.
    pub fn label(&self) -> String {
        format!("{} ({})", self.descr(), self.name())
    }
}

/// A parsed `.npy` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    /// Format version: (1, 0), (2, 0) or (3, 0).
    pub version: (u8, u8),
    /// The element type.
    pub dtype: NpyDtype,
    /// Whether the data is stored in Fortran (column-major) order.
    pub fortran_order: bool,
    /// The shape, rank 0..=4 not yet enforced here (see [`load`]).
    pub shape: Vec<usize>,
    /// Byte offset of the first data byte (`8 + length field + header length`).
    pub data_offset: usize,
}

/// Reads and validates the magic, version and header dict (not the data).
///
/// Errors: [`LoadError::NpyMagic`], [`LoadError::Truncated`], [`LoadError::NpyVersion`],
/// [`LoadError::HeaderEncoding`] (3.0 header not UTF-8), [`LoadError::HeaderSyntax`],
/// [`LoadError::MissingField`], [`LoadError::UnknownField`], [`LoadError::Duplicate`],
/// [`LoadError::BadField`], [`LoadError::UnsupportedDtype`].
pub fn read_header(file: &str, bytes: &[u8]) -> Result<NpyHeader, LoadError> {
    let prefix = bytes.get(..MAGIC.len()).unwrap_or(bytes);
    if prefix.is_empty() || !MAGIC.starts_with(prefix) {
        return Err(LoadError::NpyMagic {
            file: file.to_string(),
            found: escape_bytes(bytes, 8),
        });
    }
    let truncated = |field: &str, needed: usize| LoadError::Truncated {
        file: file.to_string(),
        field: field.to_string(),
        needed,
        available: bytes.len(),
    };
    let (major, minor) = match (bytes.get(6), bytes.get(7)) {
        (Some(&a), Some(&b)) => (a, b),
        _ => return Err(truncated("magic and version", 8)),
    };
    let len_size = match (major, minor) {
        (1, 0) => 2,
        (2, 0) | (3, 0) => 4,
        _ => {
            return Err(LoadError::NpyVersion {
                file: file.to_string(),
                major,
                minor,
            })
        }
    };
    let header_start = 8 + len_size;
    let len_bytes = bytes
        .get(8..header_start)
        .ok_or_else(|| truncated("header length", header_start))?;
    let header_len = len_bytes
        .iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    let header_end = usize::try_from(header_len)
        .ok()
        .and_then(|n| n.checked_add(header_start));
    let header = match header_end.and_then(|end| bytes.get(header_start..end)) {
        Some(h) => h,
        None => return Err(truncated("header", header_end.unwrap_or(usize::MAX))),
    };
    if major == 3 {
        if let Err(e) = std::str::from_utf8(header) {
            return Err(LoadError::HeaderEncoding {
                file: file.to_string(),
                field: "header".to_string(),
                expected: "UTF-8 (required by .npy 3.0)".to_string(),
                offset: e.valid_up_to(),
            });
        }
    }
    let dict = HeaderParser {
        file,
        bytes: header,
        pos: 0,
    }
    .parse_dict()?;
    let (dtype, fortran_order, shape) = dict_fields(file, dict)?;
    Ok(NpyHeader {
        version: (major, minor),
        dtype,
        fortran_order,
        shape,
        data_offset: header_start + header.len(),
    })
}

/// Loads a `.npy` file into a C-order `f32` [`Tensor`].
///
/// After [`read_header`]: rank `<= 4` ([`LoadError::RankTooHigh`]), `product(shape) <=
/// limits.max_elements` ([`LoadError::TooManyElements`]), non-empty
/// ([`LoadError::EmptyTensor`]), the data section exactly `product(shape) x size` bytes
/// ([`LoadError::DataLength`]), and every value finite after the cast
/// ([`LoadError::NonFinite`], naming the multi-index). Integers and bools are cast with `as f32`
/// (exact up to `2^24`).
///
/// ```
/// use kvlab_io::{npy, Limits};
/// let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
/// let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
/// let padded = format!("{header:<117}\n"); // 10 + 118 = 128 bytes
/// bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
/// bytes.extend_from_slice(padded.as_bytes());
/// bytes.extend_from_slice(&1.5f32.to_le_bytes());
/// bytes.extend_from_slice(&(-2.0f32).to_le_bytes());
/// let t = npy::load("x.npy", &bytes, &Limits::default()).unwrap();
/// assert_eq!(t.data(), &[1.5, -2.0]);
/// ```
pub fn load(file: &str, bytes: &[u8], limits: &Limits) -> Result<Tensor, LoadError> {
    load_with_header(file, bytes, limits).map(|(_, t)| t)
}

/// [`load`], also returning the parsed header (for the page's summary line).
pub fn load_with_header(
    file: &str,
    bytes: &[u8],
    limits: &Limits,
) -> Result<(NpyHeader, Tensor), LoadError> {
    let header = read_header(file, bytes)?;
    let field = "header field 'shape'";
    let numel = check_shape(file, field, &header.shape, limits)?;
    let data = bytes.get(header.data_offset..).unwrap_or(&[]);
    let expected_bytes = numel.checked_mul(header.dtype.size);
    if expected_bytes != Some(data.len()) {
        return Err(LoadError::DataLength {
            file: file.to_string(),
            field: "data".to_string(),
            shape: header.shape.clone(),
            dtype: header.dtype.descr(),
            expected_bytes: expected_bytes.unwrap_or(usize::MAX),
            actual_bytes: data.len(),
        });
    }
    let values = decode(header.dtype, data);
    let values = if header.fortran_order && header.shape.len() > 1 {
        fortran_to_c(&header.shape, &values)
    } else {
        values
    };
    let tensor = Tensor::new(header.shape.clone(), values)?;
    super::check_finite(file, "data", &tensor)?;
    Ok((header, tensor))
}

/// Decodes `data` (a whole number of items, checked by the caller) into f32 values.
fn decode(dtype: NpyDtype, data: &[u8]) -> Vec<f32> {
    let big = dtype.big_endian;
    macro_rules! items {
        ($n:literal, $conv:expr) => {
            data.chunks_exact($n)
                .map(|c| {
                    let mut a: [u8; $n] = le_array(c);
                    if big {
                        a.reverse();
                    }
                    #[allow(clippy::redundant_closure_call)]
                    ($conv)(a)
                })
                .collect()
        };
    }
    match (dtype.kind, dtype.size) {
        (Kind::Float, 2) => items!(2, |a| half::f16::from_le_bytes(a).to_f32()),
        (Kind::Float, 4) => items!(4, f32::from_le_bytes),
        (Kind::Float, 8) => items!(8, |a| f64::from_le_bytes(a) as f32),
        (Kind::Int, 1) => items!(1, |a| f32::from(i8::from_le_bytes(a))),
        (Kind::Int, 2) => items!(2, |a| f32::from(i16::from_le_bytes(a))),
        (Kind::Int, 4) => items!(4, |a| i32::from_le_bytes(a) as f32),
        (Kind::Int, 8) => items!(8, |a| i64::from_le_bytes(a) as f32),
        (Kind::Uint, 1) => items!(1, |a| f32::from(u8::from_le_bytes(a))),
        (Kind::Uint, 2) => items!(2, |a| f32::from(u16::from_le_bytes(a))),
        (Kind::Uint, 4) => items!(4, |a| u32::from_le_bytes(a) as f32),
        (Kind::Uint, 8) => items!(8, |a| u64::from_le_bytes(a) as f32),
        (Kind::Bool, _) => data.iter().map(|&b| f32::from(u8::from(b != 0))).collect(),
        // parse_descr only builds the combinations above.
        _ => Vec::new(),
    }
}

/// Reorders Fortran-order values (first axis fastest) into C order (last axis fastest).
///
/// The value at multi-index `i` sits at `sum_k i_k * stride_k` with Fortran strides
/// `stride_0 = 1`, `stride_k = stride_{k-1} * shape_{k-1}`; we walk `i` in C order.
fn fortran_to_c(shape: &[usize], src: &[f32]) -> Vec<f32> {
    let rank = shape.len();
    let mut strides = vec![1usize; rank];
    for k in 1..rank {
        let prev = strides.get(k - 1).copied().unwrap_or(1);
        let dim = shape.get(k - 1).copied().unwrap_or(1);
        if let Some(s) = strides.get_mut(k) {
            *s = prev.saturating_mul(dim);
        }
    }
    let mut out = Vec::with_capacity(src.len());
    let mut index = vec![0usize; rank];
    let mut offset = 0usize;
    for _ in 0..src.len() {
        out.push(src.get(offset).copied().unwrap_or(f32::NAN));
        // Increment the C-order multi-index (last axis fastest), keeping `offset` in step.
        for k in (0..rank).rev() {
            let (Some(i), Some(&d), Some(&s)) = (index.get_mut(k), shape.get(k), strides.get(k))
            else {
                break;
            };
            *i += 1;
            offset = offset.wrapping_add(s);
            if *i < d {
                break;
            }
            *i = 0;
            offset = offset.wrapping_sub(s.wrapping_mul(d));
        }
    }
    out
}

/// A value in the header's Python literal.
#[derive(Debug, Clone, PartialEq)]
enum PyValue {
    Str(String),
    Bool(bool),
    None,
    /// An integer literal, kept as text (it may not fit any Rust integer).
    Int(String),
    Tuple(Vec<PyValue>),
    List(Vec<PyValue>),
}

impl PyValue {
    /// Python-like text for messages.
    fn repr(&self) -> String {
        let join = |items: &[PyValue]| {
            items
                .iter()
                .map(PyValue::repr)
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            PyValue::Str(s) => format!("'{s}'"),
            PyValue::Bool(true) => "True".into(),
            PyValue::Bool(false) => "False".into(),
            PyValue::None => "None".into(),
            PyValue::Int(s) => s.clone(),
            PyValue::Tuple(items) if items.len() == 1 => format!("({},)", join(items)),
            PyValue::Tuple(items) => format!("({})", join(items)),
            PyValue::List(items) => format!("[{}]", join(items)),
        }
    }
}

/// Recursive-descent parser for the header's dict literal (bounded nesting, no allocation
/// beyond the header's own size).
struct HeaderParser<'a> {
    file: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl HeaderParser<'_> {
    fn syntax(&self, expected: &str) -> LoadError {
        let rest = self.bytes.get(self.pos..).unwrap_or(&[]);
        LoadError::HeaderSyntax {
            file: self.file.to_string(),
            field: "header".to_string(),
            offset: self.pos,
            expected: expected.to_string(),
            found: if rest.is_empty() {
                "end of header".to_string()
            } else {
                escape_bytes(rest, 12)
            },
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// `{ key: value, ... }` with an optional trailing comma, then only whitespace.
    fn parse_dict(mut self) -> Result<Vec<(String, PyValue, usize)>, LoadError> {
        if !self.eat(b'{') {
            return Err(self.syntax("'{' opening the header dict"));
        }
        let mut entries = Vec::new();
        loop {
            if self.eat(b'}') {
                break;
            }
            self.skip_ws();
            let at = self.pos;
            let key = match self.parse_value(0)? {
                PyValue::Str(s) => s,
                _ => {
                    self.pos = at;
                    return Err(self.syntax("a quoted key ('descr', 'fortran_order' or 'shape')"));
                }
            };
            if !self.eat(b':') {
                return Err(self.syntax(&format!("':' after key '{key}'")));
            }
            self.skip_ws();
            let value = self.parse_value(0)?;
            entries.push((key, value, at));
            if self.eat(b',') {
                continue;
            }
            if self.eat(b'}') {
                break;
            }
            return Err(self.syntax("',' or '}' after a value"));
        }
        self.skip_ws();
        if self.pos < self.bytes.len() {
            return Err(self.syntax("only spaces and a newline after the closing '}'"));
        }
        Ok(entries)
    }

    fn parse_value(&mut self, depth: usize) -> Result<PyValue, LoadError> {
        self.skip_ws();
        match self.peek() {
            Some(q @ (b'\'' | b'"')) => self.parse_string(q),
            Some(b'(') => self.parse_seq(depth, b')').map(|(items, is_tuple)| {
                if is_tuple {
                    PyValue::Tuple(items)
                } else {
                    // `(3)` is just `3` in Python.
                    items
                        .into_iter()
                        .next()
                        .unwrap_or(PyValue::Tuple(Vec::new()))
                }
            }),
            Some(b'[') => self
                .parse_seq(depth, b']')
                .map(|(items, _)| PyValue::List(items)),
            Some(b'0'..=b'9' | b'-' | b'+') => self.parse_int(),
            Some(b'A'..=b'Z' | b'a'..=b'z') => {
                let start = self.pos;
                while matches!(self.peek(), Some(b'A'..=b'Z' | b'a'..=b'z' | b'_')) {
                    self.pos += 1;
                }
                match self.bytes.get(start..self.pos) {
                    Some(b"True") => Ok(PyValue::Bool(true)),
                    Some(b"False") => Ok(PyValue::Bool(false)),
                    Some(b"None") => Ok(PyValue::None),
                    _ => {
                        self.pos = start;
                        Err(self.syntax(
                            "a literal: a quoted string, True, False, an integer or a tuple",
                        ))
                    }
                }
            }
            _ => Err(self.syntax("a literal: a quoted string, True, False, an integer or a tuple")),
        }
    }

    fn parse_string(&mut self, quote: u8) -> Result<PyValue, LoadError> {
        let start = self.pos;
        self.pos += 1;
        let content_start = self.pos;
        loop {
            match self.peek() {
                Some(c) if c == quote => break,
                Some(b'\\') => {
                    return Err(self.syntax("a plain string (escapes are not used in .npy headers)"))
                }
                Some(b'\n') | None => {
                    self.pos = start;
                    return Err(self.syntax("a string closed on the same line"));
                }
                Some(_) => self.pos += 1,
            }
        }
        let content = self.bytes.get(content_start..self.pos).unwrap_or(&[]);
        self.pos += 1;
        Ok(PyValue::Str(String::from_utf8_lossy(content).into_owned()))
    }

    fn parse_int(&mut self) -> Result<PyValue, LoadError> {
        let start = self.pos;
        if matches!(self.peek(), Some(b'-' | b'+')) {
            self.pos += 1;
        }
        let digits_start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        let digits = self.bytes.get(digits_start..self.pos).unwrap_or(&[]);
        let leading_zero = digits.len() > 1 && digits.first() == Some(&b'0');
        if digits.is_empty()
            || leading_zero
            || matches!(self.peek(), Some(b'.' | b'e' | b'E' | b'_' | b'L' | b'x'))
        {
            self.pos = start;
            return Err(self.syntax("a decimal integer such as 64"));
        }
        let text = self.bytes.get(start..self.pos).unwrap_or(&[]);
        Ok(PyValue::Int(String::from_utf8_lossy(text).into_owned()))
    }

    /// Items of a `(...)` or `[...]`; returns whether a comma was seen (what makes `(3,)` a tuple).
    fn parse_seq(&mut self, depth: usize, close: u8) -> Result<(Vec<PyValue>, bool), LoadError> {
        if depth >= MAX_NESTING {
            return Err(self.syntax("at most 8 nested tuples or lists"));
        }
        self.pos += 1;
        let mut items = Vec::new();
        let mut comma = false;
        loop {
            if self.eat(close) {
                break;
            }
            items.push(self.parse_value(depth + 1)?);
            if self.eat(b',') {
                comma = true;
                continue;
            }
            if self.eat(close) {
                break;
            }
            return Err(self.syntax(&format!("',' or '{}'", close as char)));
        }
        let is_tuple = comma || items.is_empty();
        Ok((items, is_tuple))
    }
}

/// Checks the dict has exactly `descr`, `fortran_order`, `shape` and converts them.
fn dict_fields(
    file: &str,
    entries: Vec<(String, PyValue, usize)>,
) -> Result<(NpyDtype, bool, Vec<usize>), LoadError> {
    let mut descr = None;
    let mut fortran = None;
    let mut shape = None;
    for (key, value, _) in entries {
        let slot = match key.as_str() {
            "descr" => &mut descr,
            "fortran_order" => &mut fortran,
            "shape" => &mut shape,
            _ => {
                return Err(LoadError::UnknownField {
                    file: file.to_string(),
                    field: format!("header field '{key}'"),
                    expected: "the keys 'descr', 'fortran_order' and 'shape'".to_string(),
                })
            }
        };
        if slot.is_some() {
            return Err(LoadError::Duplicate {
                file: file.to_string(),
                field: format!("header field '{key}'"),
            });
        }
        *slot = Some(value);
    }
    let missing = |name: &str| LoadError::MissingField {
        file: file.to_string(),
        field: format!("header field '{name}'"),
    };
    let descr = descr.ok_or_else(|| missing("descr"))?;
    let fortran = fortran.ok_or_else(|| missing("fortran_order"))?;
    let shape = shape.ok_or_else(|| missing("shape"))?;
    let dtype = parse_descr(file, &descr)?;
    let fortran = match fortran {
        PyValue::Bool(b) => b,
        other => {
            return Err(LoadError::BadField {
                file: file.to_string(),
                field: "header field 'fortran_order'".to_string(),
                value: other.repr(),
                expected: "True or False".to_string(),
            })
        }
    };
    let shape = parse_shape(file, &shape)?;
    Ok((dtype, fortran, shape))
}

fn parse_shape(file: &str, value: &PyValue) -> Result<Vec<usize>, LoadError> {
    let bad = |expected: &str| LoadError::BadField {
        file: file.to_string(),
        field: "header field 'shape'".to_string(),
        value: value.repr(),
        expected: expected.to_string(),
    };
    let PyValue::Tuple(items) = value else {
        return Err(bad(
            "a tuple of non-negative integers like (8, 64) or (512,) (a 1-element tuple needs its trailing comma)",
        ));
    };
    items
        .iter()
        .map(|item| match item {
            PyValue::Int(text) => text.parse::<usize>().map_err(|_| bad(AXIS_RANGE)),
            _ => Err(bad("a tuple of non-negative integers")),
        })
        .collect()
}

/// Maps a `descr` like `<f4` to an [`NpyDtype`], or says why it is not supported.
fn parse_descr(file: &str, value: &PyValue) -> Result<NpyDtype, LoadError> {
    let field = "header field 'descr'".to_string();
    let unsupported = |value: String, meaning: Option<String>| LoadError::UnsupportedDtype {
        file: file.to_string(),
        field: field.clone(),
        value,
        meaning,
        expected: SUPPORTED.to_string(),
    };
    let text = match value {
        PyValue::Str(s) => s.as_str(),
        PyValue::List(_) => {
            return Err(unsupported(
                value.repr(),
                Some("a structured dtype with named fields".into()),
            ))
        }
        _ => {
            return Err(LoadError::BadField {
                file: file.to_string(),
                field,
                value: value.repr(),
                expected: format!("a dtype string: {SUPPORTED}"),
            })
        }
    };
    let bytes = text.as_bytes();
    let (order, letter, size_text) = match bytes {
        [o @ (b'<' | b'>' | b'|' | b'='), l, rest @ ..] => (*o, *l, rest),
        _ => return Err(unsupported(text.to_string(), None)),
    };
    let size: Option<usize> = std::str::from_utf8(size_text)
        .ok()
        .and_then(|s| s.parse().ok());
    let kind = match letter {
        b'f' => Some(Kind::Float),
        b'i' => Some(Kind::Int),
        b'u' => Some(Kind::Uint),
        b'b' => Some(Kind::Bool),
        _ => None,
    };
    let ok_size = match (kind, size) {
        (Some(Kind::Float), Some(s @ (2 | 4 | 8))) => Some(s),
        (Some(Kind::Int | Kind::Uint), Some(s @ (1 | 2 | 4 | 8))) => Some(s),
        (Some(Kind::Bool), Some(1)) => Some(1),
        _ => None,
    };
    let (Some(kind), Some(size)) = (kind, ok_size) else {
        return Err(unsupported(text.to_string(), describe_descr(letter, size)));
    };
    // `|` means "byte order not applicable": only valid for one-byte items. `=` (native) is never
    // written by numpy; a file cannot say which machine was native, so it is refused too.
    let big_endian = match (order, size) {
        (b'<', _) => false,
        (b'>', _) => size > 1,
        (b'|' | b'=', 1) => false,
        _ => {
            return Err(unsupported(
                text.to_string(),
                Some(format!(
                    "byte order '{}' is ambiguous for {size}-byte items",
                    order as char
                )),
            ))
        }
    };
    Ok(NpyDtype {
        kind,
        size,
        big_endian,
    })
}

/// numpy's name for a dtype letter and size, for messages about unsupported types.
fn describe_descr(letter: u8, size: Option<usize>) -> Option<String> {
    let bits = size.and_then(|s| s.checked_mul(8));
    let with_bits = |name: &str| match bits {
        Some(b) => format!("{name}{b}"),
        None => name.to_string(),
    };
    Some(match letter {
        b'c' => with_bits("complex"),
        b'f' => with_bits("float"),
        b'i' => with_bits("int"),
        b'u' => with_bits("uint"),
        b'b' => "bool of an unusual size".to_string(),
        b'O' => "Python objects, which need pickle: save a numeric array".to_string(),
        b'U' => "unicode strings".to_string(),
        b'S' | b'a' => "byte strings".to_string(),
        b'V' => "raw void records".to_string(),
        b'M' => "datetime64".to_string(),
        b'm' => "timedelta64".to_string(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(version: u8, header: &str, data: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[version, 0]);
        let h = format!("{header}\n");
        if version == 1 {
            out.extend_from_slice(&(h.len() as u16).to_le_bytes());
        } else {
            out.extend_from_slice(&(h.len() as u32).to_le_bytes());
        }
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn fortran_to_c_reorders() {
        // C-order [[0,1,2],[3,4,5]] stored in Fortran order is 0,3,1,4,2,5.
        let f = [0.0, 3.0, 1.0, 4.0, 2.0, 5.0];
        assert_eq!(
            fortran_to_c(&[2, 3], &f),
            vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        );
        // 3-D: value = C flat index; Fortran storage enumerates first axis fastest.
        let shape = [2, 3, 4];
        let mut fort = Vec::new();
        for k in 0..4 {
            for j in 0..3 {
                for i in 0..2 {
                    fort.push((i * 12 + j * 4 + k) as f32);
                }
            }
        }
        let c: Vec<f32> = (0..24).map(|v| v as f32).collect();
        assert_eq!(fortran_to_c(&shape, &fort), c);
    }

    #[test]
    fn header_literals() {
        let h = npy(
            1,
            "{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }",
            &[0, 1, 255, 254],
        );
        let t = load("x.npy", &h, &Limits::default()).unwrap();
        assert_eq!(t.data(), &[1.0, -2.0]);
        let h = npy(
            2,
            "{\"shape\": (), \"fortran_order\": True, \"descr\": \"|b1\"}",
            &[3],
        );
        let t = load("x.npy", &h, &Limits::default()).unwrap();
        assert_eq!((t.shape(), t.data()), (&[][..], &[1.0][..]));
    }

    #[test]
    fn header_errors() {
        let f = |h: &str| read_header("x.npy", &npy(1, h, &[])).unwrap_err();
        assert!(matches!(
            f("{'descr': '<f4', 'fortran_order': False, 'shape': (3), }"),
            LoadError::BadField { .. }
        ));
        assert!(matches!(
            f("{'descr': '<f4', 'fortran_order': False, 'shape': [3], }"),
            LoadError::BadField { .. }
        ));
        assert!(matches!(
            f("{'descr': '<f4', 'fortran_order': 0, 'shape': (3,), }"),
            LoadError::BadField { .. }
        ));
        assert!(matches!(
            f("{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }"),
            LoadError::BadField { .. }
        ));
        assert!(matches!(
            f("{'descr': '<f4', 'fortran_order': False, 'shape': (03,), }"),
            LoadError::HeaderSyntax { .. }
        ));
        assert!(matches!(
            f("{'descr': '<f4', 'fortran_order': False}"),
            LoadError::MissingField { .. }
        ));
        assert!(matches!(
            f("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}"),
            LoadError::Duplicate { .. }
        ));
        assert!(matches!(
            f("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}"),
            LoadError::UnknownField { .. }
        ));
        assert!(matches!(
            f("{'descr': '<f4' 'fortran_order': False}"),
            LoadError::HeaderSyntax { .. }
        ));
        assert!(matches!(
            f("{'descr': '<f4', 'fortran_order': False, 'shape': ()} x"),
            LoadError::HeaderSyntax { .. }
        ));
        assert!(matches!(
            f("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}"),
            LoadError::UnsupportedDtype { .. }
        ));
        assert!(matches!(
            f("{'descr': '|f4', 'fortran_order': False, 'shape': ()}"),
            LoadError::UnsupportedDtype { .. }
        ));
        assert!(matches!(f("{'descr': '<f4', 'fortran_order': False, 'shape': ((((((((((1,),),),),),),),),),)}"), LoadError::HeaderSyntax { .. }));
        let e = f("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }");
        assert_eq!(
            e.to_string(),
            "x.npy: header field 'descr' is '<c8' (complex64): supported dtypes are f2, f4, f8, \
             i1..i8, u1..u8, b1 (little '<' or big '>' endian; '|' for one-byte types)"
        );
    }

    #[test]
    fn dtype_labels() {
        let d = NpyDtype {
            kind: Kind::Uint,
            size: 1,
            big_endian: false,
        };
        assert_eq!(d.label(), "|u1 (uint8)");
        let d = NpyDtype {
            kind: Kind::Float,
            size: 8,
            big_endian: true,
        };
        assert_eq!(d.label(), ">f8 (float64)");
    }
}
