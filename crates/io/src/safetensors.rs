//! Hugging Face `.safetensors` reader (issue 3, "Loaders"): list every tensor, load one by name.
//!
//! Layout: an 8-byte little-endian header length `n`, `n` bytes of UTF-8 JSON mapping each tensor
//! name to `{"dtype", "shape", "data_offsets": [begin, end]}` (plus an optional `__metadata__`
//! map of strings), then the data section. Offsets are relative to the data section; the tensors
//! must tile it exactly (sorted by offset: the first begins at 0, each begins where the previous
//! ends, the last ends at the end of the file), and `end - begin = product(shape) x dtype size`.
//! Data is little-endian, C order.
//!
//! The rules are those of the reference `safetensors` crate (which builds for wasm32 too; the
//! tests check both agree on every fixture and on random files). This module is a parser of its
//! own because the crate's errors do not say which tensor, field or value failed
//! (`TensorInvalidInfo`, `InvalidOffset(name)`), and the page must say exactly that.
//!
//! Every dtype of the format can be listed; F16, BF16, F32 and F64 are loaded (cast to f32).

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::{check_finite, check_shape, le_array, Limits, LoadError, Tensor};

/// Largest JSON header accepted, in bytes (4 MiB; a 7B model's header is about 30 KB). Parsing
/// builds a JSON value tree proportional to the header, so this bounds that memory.
pub const MAX_HEADER_BYTES: usize = 4 * 1024 * 1024;

/// A safetensors element type. Names are those written in the file (`"BF16"`).
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// `BOOL`, 8 bits.
    BOOL,
    /// `U8`.
    U8,
    /// `I8`.
    I8,
    /// `I16`.
    I16,
    /// `U16`.
    U16,
    /// `I32`.
    I32,
    /// `U32`.
    U32,
    /// `I64`.
    I64,
    /// `U64`.
    U64,
    /// `F16`: IEEE half, loadable.
    F16,
    /// `BF16`: bfloat16, loadable.
    BF16,
    /// `F32`: loadable.
    F32,
    /// `F64`: loadable (cast to f32).
    F64,
    /// `C64`: complex of two f32.
    C64,
    /// `F8_E5M2`.
    F8_E5M2,
    /// `F8_E4M3`.
    F8_E4M3,
    /// `F8_E8M0`.
    F8_E8M0,
    /// `F8_E4M3FNUZ`.
    F8_E4M3FNUZ,
    /// `F8_E5M2FNUZ`.
    F8_E5M2FNUZ,
    /// `F6_E2M3`, 6 bits.
    F6_E2M3,
    /// `F6_E3M2`, 6 bits.
    F6_E3M2,
    /// `F4`, 4 bits.
    F4,
}

const ALL: [Dtype; 22] = [
    Dtype::BOOL,
    Dtype::U8,
    Dtype::I8,
    Dtype::I16,
    Dtype::U16,
    Dtype::I32,
    Dtype::U32,
    Dtype::I64,
    Dtype::U64,
    Dtype::F16,
    Dtype::BF16,
    Dtype::F32,
    Dtype::F64,
    Dtype::C64,
    Dtype::F8_E5M2,
    Dtype::F8_E4M3,
    Dtype::F8_E8M0,
    Dtype::F8_E4M3FNUZ,
    Dtype::F8_E5M2FNUZ,
    Dtype::F6_E2M3,
    Dtype::F6_E3M2,
    Dtype::F4,
];

impl Dtype {
    /// The name as written in the header (`"F16"`).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::BOOL => "BOOL",
            Dtype::U8 => "U8",
            Dtype::I8 => "I8",
            Dtype::I16 => "I16",
            Dtype::U16 => "U16",
            Dtype::I32 => "I32",
            Dtype::U32 => "U32",
            Dtype::I64 => "I64",
            Dtype::U64 => "U64",
            Dtype::F16 => "F16",
            Dtype::BF16 => "BF16",
            Dtype::F32 => "F32",
            Dtype::F64 => "F64",
            Dtype::C64 => "C64",
            Dtype::F8_E5M2 => "F8_E5M2",
            Dtype::F8_E4M3 => "F8_E4M3",
            Dtype::F8_E8M0 => "F8_E8M0",
            Dtype::F8_E4M3FNUZ => "F8_E4M3FNUZ",
            Dtype::F8_E5M2FNUZ => "F8_E5M2FNUZ",
            Dtype::F6_E2M3 => "F6_E2M3",
            Dtype::F6_E3M2 => "F6_E3M2",
            Dtype::F4 => "F4",
        }
    }

    /// Parses a header dtype name; `None` if the format does not define it.
    pub fn from_name(name: &str) -> Option<Self> {
        ALL.into_iter().find(|d| d.name() == name)
    }

    /// Bits per element: 4, 6, 8, 16, 32 or 64.
    pub fn bits(self) -> usize {
        match self {
            Dtype::F4 => 4,
            Dtype::F6_E2M3 | Dtype::F6_E3M2 => 6,
            Dtype::BOOL
            | Dtype::U8
            | Dtype::I8
            | Dtype::F8_E5M2
            | Dtype::F8_E4M3
            | Dtype::F8_E8M0
            | Dtype::F8_E4M3FNUZ
            | Dtype::F8_E5M2FNUZ => 8,
            Dtype::I16 | Dtype::U16 | Dtype::F16 | Dtype::BF16 => 16,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 32,
            Dtype::I64 | Dtype::U64 | Dtype::F64 | Dtype::C64 => 64,
        }
    }

    /// Whether kvlab loads this dtype: F16, BF16, F32, F64.
    pub fn is_loadable(self) -> bool {
        matches!(self, Dtype::F16 | Dtype::BF16 | Dtype::F32 | Dtype::F64)
    }
}

/// One tensor as listed in the header, validated against the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// The tensor's name (the JSON key).
    pub name: String,
    /// Its element type.
    pub dtype: Dtype,
    /// Its shape (any rank; loading needs rank 0..=4).
    pub shape: Vec<usize>,
    /// `[begin, end)` in bytes, relative to the data section.
    pub data_offsets: (usize, usize),
    /// Where the data section starts in the file (`8 + header length`).
    pub data_start: usize,
}

/// Cheap sniff: an 8-byte length `n` with `2 <= n <= len - 8` followed by `{`.
pub fn looks_like(bytes: &[u8]) -> bool {
    match read_len(bytes) {
        Some(n) => {
            n >= 2
                && usize::try_from(n).is_ok_and(|n| n <= bytes.len().saturating_sub(8))
                && bytes.get(8) == Some(&b'{')
        }
        None => false,
    }
}

fn read_len(bytes: &[u8]) -> Option<u64> {
    let head: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(head))
}

/// A JSON value of the header. Objects keep their entries in file order, duplicates included
/// (lookups take the last, as a JSON map would); serde_json's own `Value` keeps them in a
/// `BTreeMap`, whose code the page's upload module would carry for this alone.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    /// A non-negative integer.
    U64(u64),
    /// A negative integer.
    I64(i64),
    /// Any other number (serde_json reads integers beyond 64 bits as floats too).
    F64(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value of `key` in an object (the last one of that name).
    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(entries) => entries.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct JsonVisitor;
        impl<'de> Visitor<'de> for JsonVisitor {
            type Value = Json;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<Json, E> {
                Ok(Json::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Json, E> {
                Ok(Json::Bool(b))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Json, E> {
                Ok(Json::U64(n))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Json, E> {
                Ok(u64::try_from(n).map_or(Json::I64(n), Json::U64))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Json, E> {
                Ok(Json::F64(n))
            }
            fn visit_str<E>(self, s: &str) -> Result<Json, E> {
                Ok(Json::Str(s.to_string()))
            }
            fn visit_string<E>(self, s: String) -> Result<Json, E> {
                Ok(Json::Str(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
                let mut items = Vec::new();
                while let Some(x) = seq.next_element()? {
                    items.push(x);
                }
                Ok(Json::Arr(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Json::Obj(entries))
            }
        }
        deserializer.deserialize_any(JsonVisitor)
    }
}

/// The header's top-level entries in file order (a plain JSON map would hide duplicates).
struct Entries(Vec<(String, Json)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor;
        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object mapping tensor names to {dtype, shape, data_offsets}")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, Json>()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor)
    }
}

/// Lists every tensor, validating the header and all offsets against the file (data-offset
/// order). Nothing is allocated per element.
///
/// Errors: [`LoadError::Truncated`] (under 8 bytes), [`LoadError::HeaderLength`] (beyond the file
/// or over [`MAX_HEADER_BYTES`]), [`LoadError::HeaderEncoding`], [`LoadError::Json`],
/// [`LoadError::Duplicate`], [`LoadError::MissingField`], [`LoadError::BadField`],
/// [`LoadError::UnsupportedDtype`], [`LoadError::OffsetsReversed`], [`LoadError::OffsetsSize`],
/// [`LoadError::OffsetsOverlap`], [`LoadError::OffsetsGap`], [`LoadError::OffsetsBeyondData`].
pub fn list(file: &str, bytes: &[u8]) -> Result<Vec<TensorInfo>, LoadError> {
    list_with_tokens(file, bytes).map(|(infos, _)| infos)
}

/// [`list`], and the text of the `__metadata__` entry `tokens` when there is one (a writer's
/// record of the prompt's token texts, e.g. `scripts/capture_kv.py`'s).
pub fn list_with_tokens(
    file: &str,
    bytes: &[u8],
) -> Result<(Vec<TensorInfo>, Option<String>), LoadError> {
    let declared = read_len(bytes).ok_or_else(|| LoadError::Truncated {
        file: file.to_string(),
        field: "header length".to_string(),
        needed: 8,
        available: bytes.len(),
    })?;
    let available = bytes.len().saturating_sub(8);
    let n = match usize::try_from(declared) {
        Ok(n) if n <= available && n <= MAX_HEADER_BYTES => n,
        _ => {
            return Err(LoadError::HeaderLength {
                file: file.to_string(),
                declared,
                available,
                max: MAX_HEADER_BYTES,
            })
        }
    };
    let data_start = 8 + n;
    let header = bytes.get(8..data_start).unwrap_or(&[]);
    let data_len = bytes.len().saturating_sub(data_start);
    let text = std::str::from_utf8(header).map_err(|e| LoadError::HeaderEncoding {
        file: file.to_string(),
        field: "JSON header".to_string(),
        expected: "UTF-8".to_string(),
        offset: e.valid_up_to(),
    })?;
    let Entries(entries) = serde_json::from_str(text).map_err(|e| LoadError::Json {
        file: file.to_string(),
        line: e.line(),
        column: e.column(),
        message: format!("in the header: {e}"),
    })?;

    let mut infos: Vec<TensorInfo> = Vec::with_capacity(entries.len());
    let mut seen_metadata = false;
    let mut tokens = None;
    for (name, value) in entries {
        if name == "__metadata__" {
            if seen_metadata {
                return Err(LoadError::Duplicate {
                    file: file.to_string(),
                    field: "'__metadata__'".to_string(),
                });
            }
            seen_metadata = true;
            check_metadata(file, &value)?;
            if let Json::Obj(entries) = value {
                tokens = entries.into_iter().find_map(|(k, v)| match v {
                    Json::Str(text) if k == "tokens" => Some(text),
                    _ => None,
                });
            }
            continue;
        }
        if infos.iter().any(|i| i.name == name) {
            return Err(LoadError::Duplicate {
                file: file.to_string(),
                field: format!("tensor name '{name}'"),
            });
        }
        infos.push(parse_info(file, name, &value, data_start)?);
    }
    infos.sort_by_key(|i| i.data_offsets);
    validate_offsets(file, &infos, data_len)?;
    Ok((infos, tokens))
}

/// `__metadata__` must be `null` or an object of strings (free-form notes from the writer).
fn check_metadata(file: &str, value: &Json) -> Result<(), LoadError> {
    let ok = match value {
        Json::Null => true,
        Json::Obj(entries) => entries.iter().all(|(_, v)| matches!(v, Json::Str(_))),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(LoadError::BadField {
            file: file.to_string(),
            field: "'__metadata__'".to_string(),
            value: short_json(value),
            expected: "an object whose values are all strings".to_string(),
        })
    }
}

/// A JSON value as compact JSON text, cut to 60 characters for messages.
///
/// Written here rather than with serde_json's serializer, which the page's upload module would
/// otherwise carry (with its float printer) for error messages alone; it stops writing past the
/// cut, so a huge header value costs nothing. Objects are written in file order.
fn short_json(value: &Json) -> String {
    const CUT: usize = 60;
    fn write_str(s: &str, out: &mut String, room: usize) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
                c => out.push(c),
            }
            if out.len() > room {
                return;
            }
        }
        out.push('"');
    }
    fn write(v: &Json, out: &mut String, room: usize) {
        if out.len() > room {
            return;
        }
        match v {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::U64(n) => out.push_str(&n.to_string()),
            Json::I64(n) => out.push_str(&n.to_string()),
            Json::F64(f) => out.push_str(&format!("{f:?}")),
            Json::Str(s) => write_str(s, out, room),
            Json::Arr(items) => {
                out.push('[');
                for (i, x) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(x, out, room);
                    if out.len() > room {
                        return;
                    }
                }
                out.push(']');
            }
            Json::Obj(entries) => {
                out.push('{');
                for (i, (k, x)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_str(k, out, room);
                    out.push(':');
                    write(x, out, room);
                    if out.len() > room {
                        return;
                    }
                }
                out.push('}');
            }
        }
    }
    let mut s = String::new();
    // (bytes, not characters: 4 bytes per character at most, then cut by characters)
    write(value, &mut s, 4 * CUT + 4);
    match s.char_indices().nth(CUT) {
        Some((i, _)) => format!("{}...", s.get(..i).unwrap_or("")),
        None => s,
    }
}

fn parse_info(
    file: &str,
    name: String,
    value: &Json,
    data_start: usize,
) -> Result<TensorInfo, LoadError> {
    let field = |f: &str| format!("tensor '{name}' field '{f}'");
    let Json::Obj(_) = value else {
        return Err(LoadError::BadField {
            file: file.to_string(),
            field: format!("tensor '{name}'"),
            value: short_json(value),
            expected: "an object {\"dtype\", \"shape\", \"data_offsets\"}".to_string(),
        });
    };
    let get = |f: &str| {
        value.get(f).ok_or_else(|| LoadError::MissingField {
            file: file.to_string(),
            field: field(f),
        })
    };
    let dtype_value = get("dtype")?;
    let dtype = match dtype_value.as_str() {
        Some(s) => Dtype::from_name(s).ok_or_else(|| LoadError::UnsupportedDtype {
            file: file.to_string(),
            field: field("dtype"),
            value: s.to_string(),
            meaning: None,
            expected: format!(
                "the format's dtypes ({}); kvlab loads F16, BF16, F32 and F64",
                ALL.map(Dtype::name).join(", ")
            ),
        })?,
        None => {
            return Err(LoadError::BadField {
                file: file.to_string(),
                field: field("dtype"),
                value: short_json(dtype_value),
                expected: "a dtype name string such as \"F16\"".to_string(),
            })
        }
    };
    let uint_list = |f: &str, v: &Json, exact: Option<usize>| -> Result<Vec<usize>, LoadError> {
        let bad = || LoadError::BadField {
            file: file.to_string(),
            field: field(f),
            value: short_json(v),
            expected: match exact {
                Some(2) => "a list [begin, end] of two non-negative byte offsets".to_string(),
                _ => "a list of non-negative integers (axis lengths)".to_string(),
            },
        };
        let Json::Arr(items) = v else {
            return Err(bad());
        };
        if exact.is_some_and(|n| n != items.len()) {
            return Err(bad());
        }
        items
            .iter()
            .map(|x| match x {
                Json::U64(u) => usize::try_from(*u).map_err(|_| bad()),
                _ => Err(bad()),
            })
            .collect()
    };
    let shape = uint_list("shape", get("shape")?, None)?;
    let offsets = uint_list("data_offsets", get("data_offsets")?, Some(2))?;
    let (begin, end) = match offsets.as_slice() {
        [b, e] => (*b, *e),
        _ => (0, 0),
    };
    Ok(TensorInfo {
        name,
        dtype,
        shape,
        data_offsets: (begin, end),
        data_start,
    })
}

/// The tensors (sorted by offset) must tile `[0, data_len)` exactly, each spanning its size.
fn validate_offsets(file: &str, infos: &[TensorInfo], data_len: usize) -> Result<(), LoadError> {
    let mut cursor = 0usize;
    let mut prev: Option<&TensorInfo> = None;
    for info in infos {
        let (begin, end) = info.data_offsets;
        if begin > end {
            return Err(LoadError::OffsetsReversed {
                file: file.to_string(),
                tensor: info.name.clone(),
                begin,
                end,
            });
        }
        let bits = super::checked_numel(&info.shape).and_then(|n| n.checked_mul(info.dtype.bits()));
        let expected = match bits {
            Some(b) if b % 8 == 0 => b / 8,
            Some(b) => {
                return Err(LoadError::BadField {
                    file: file.to_string(),
                    field: format!("tensor '{}' field 'shape'", info.name),
                    value: super::fmt_shape(&info.shape),
                    expected: format!(
                        "a whole number of bytes: {b} bits of {} is not",
                        info.dtype.name()
                    ),
                })
            }
            None => usize::MAX,
        };
        if end - begin != expected {
            return Err(LoadError::OffsetsSize {
                file: file.to_string(),
                tensor: info.name.clone(),
                begin,
                end,
                dtype: info.dtype.name().to_string(),
                shape: info.shape.clone(),
                expected_bytes: expected,
            });
        }
        if begin < cursor {
            let (other, (other_begin, other_end)) = prev
                .map(|p| (p.name.clone(), p.data_offsets))
                .unwrap_or_default();
            return Err(LoadError::OffsetsOverlap {
                file: file.to_string(),
                tensor: info.name.clone(),
                begin,
                end,
                other,
                other_begin,
                other_end,
            });
        }
        if begin > cursor {
            return Err(LoadError::OffsetsGap {
                file: file.to_string(),
                from: cursor,
                to: begin,
            });
        }
        if end > data_len {
            return Err(LoadError::OffsetsBeyondData {
                file: file.to_string(),
                tensor: info.name.clone(),
                end,
                data_len,
            });
        }
        cursor = end;
        prev = Some(info);
    }
    if cursor < data_len {
        return Err(LoadError::OffsetsGap {
            file: file.to_string(),
            from: cursor,
            to: data_len,
        });
    }
    Ok(())
}

/// Loads the tensor called `name`.
///
/// Errors as [`list`], then [`LoadError::TensorNotFound`] (listing the names present), then as
/// [`load_info`].
///
/// ```
/// use kvlab_io::{safetensors, Limits};
/// let header = br#"{"k":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
/// let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
/// bytes.extend_from_slice(header);
/// bytes.extend_from_slice(&0.5f32.to_le_bytes());
/// bytes.extend_from_slice(&2.0f32.to_le_bytes());
/// let t = safetensors::load_tensor("m.safetensors", &bytes, "k", &Limits::default()).unwrap();
/// assert_eq!(t.data(), &[0.5, 2.0]);
/// assert!(safetensors::load_tensor("m.safetensors", &bytes, "v", &Limits::default()).is_err());
/// ```
pub fn load_tensor(
    file: &str,
    bytes: &[u8],
    name: &str,
    limits: &Limits,
) -> Result<Tensor, LoadError> {
    let infos = list(file, bytes)?;
    let info = infos
        .iter()
        .find(|i| i.name == name)
        .ok_or_else(|| LoadError::TensorNotFound {
            file: file.to_string(),
            name: name.to_string(),
            available: infos.iter().map(|i| i.name.clone()).collect(),
        })?;
    load_info(file, bytes, info, limits)
}

/// Loads one listed tensor (from [`list`] on the same `bytes`) as f32 in C order.
///
/// Errors: [`LoadError::NotFloat`] (dtype other than F16 / BF16 / F32 / F64),
/// [`LoadError::RankTooHigh`], [`LoadError::TooManyElements`], [`LoadError::EmptyTensor`],
/// [`LoadError::DataLength`] (an `info` that does not match `bytes`), [`LoadError::NonFinite`].
pub fn load_info(
    file: &str,
    bytes: &[u8],
    info: &TensorInfo,
    limits: &Limits,
) -> Result<Tensor, LoadError> {
    if !info.dtype.is_loadable() {
        return Err(LoadError::NotFloat {
            file: file.to_string(),
            tensor: info.name.clone(),
            dtype: info.dtype.name().to_string(),
        });
    }
    let field = format!("tensor '{}'", info.name);
    let numel = check_shape(file, &field, &info.shape, limits)?;
    let size = info.dtype.bits() / 8;
    let (begin, end) = info.data_offsets;
    let range = info
        .data_start
        .checked_add(begin)
        .zip(info.data_start.checked_add(end));
    let data = range.and_then(|(b, e)| bytes.get(b..e)).unwrap_or(&[]);
    let expected = numel.checked_mul(size);
    if expected != Some(data.len()) {
        return Err(LoadError::DataLength {
            file: file.to_string(),
            field,
            shape: info.shape.clone(),
            dtype: info.dtype.name().to_string(),
            expected_bytes: expected.unwrap_or(usize::MAX),
            actual_bytes: data.len(),
        });
    }
    let values: Vec<f32> = match info.dtype {
        Dtype::F16 => data
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes(le_array(c)).to_f32())
            .collect(),
        Dtype::BF16 => data
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes(le_array(c)).to_f32())
            .collect(),
        Dtype::F32 => data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(le_array(c)))
            .collect(),
        _ => data
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(le_array(c)) as f32)
            .collect(),
    };
    let tensor = Tensor::new(info.shape.clone(), values)?;
    check_finite(file, &field, &tensor)?;
    Ok(tensor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_json_writes_what_serde_json_writes_and_cuts_at_60_characters() {
        for text in [
            r#"null"#,
            r#"true"#,
            r#"[1,-2,3.5,18446744073709551615]"#,
            r#"{"data_offsets":[0,24],"dtype":"F32","shape":[2,3]}"#,
            r#"[-7,1.5,0.1,-0.0]"#,
            r#""quote \" backslash \\ tab \t nl \n cr \r bs \b ff \f nul \u0000 us \u001f é""#,
            r#"[[],{},[{"a":[null,false]}]]"#,
        ] {
            let v: Json = serde_json::from_str(text).expect(text);
            let full = serde_json::from_str::<serde_json::Value>(text)
                .expect(text)
                .to_string();
            let expected = match full.char_indices().nth(60) {
                Some((i, _)) => format!("{}...", &full[..i]),
                None => full,
            };
            assert_eq!(short_json(&v), expected, "{text}");
        }
        let long_text = format!("[{}]", ["12345"; 40].join(","));
        let long: Json = serde_json::from_str(&long_text).unwrap();
        let s = short_json(&long);
        assert_eq!(s.chars().count(), 63, "{s}");
        assert!(s.starts_with("[12345,12345,") && s.ends_with("..."), "{s}");
        assert_eq!(s.trim_end_matches("..."), &long_text[..60]);
        // (floats in Rust's shortest round-trip form: serde_json writes `1e+300`)
        let big: Json = serde_json::from_str("[1e300, 18446744073709551616]").unwrap();
        assert_eq!(short_json(&big), "[1e300,1.8446744073709552e19]");
        // objects in file order, duplicates kept; lookups take the last
        let obj: Json = serde_json::from_str(r#"{"b":1,"a":2,"b":3}"#).unwrap();
        assert_eq!(short_json(&obj), r#"{"b":1,"a":2,"b":3}"#);
        assert_eq!(obj.get("b"), Some(&Json::U64(3)));
        assert_eq!(obj.get("c"), None);
        let wide = Json::Str("é".repeat(100));
        assert_eq!(short_json(&wide), format!("\"{}...", "é".repeat(59)));
    }

    fn st(header: &str, data_len: usize) -> Vec<u8> {
        let mut b = (header.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(header.as_bytes());
        b.extend(std::iter::repeat(0u8).take(data_len));
        b
    }

    #[test]
    fn dtype_names_round_trip() {
        for d in ALL {
            assert_eq!(Dtype::from_name(d.name()), Some(d));
        }
        assert_eq!(Dtype::from_name("f16"), None);
    }

    #[test]
    fn offsets_rules() {
        let e = list("m", &st(r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#, 12)).unwrap_err();
        assert!(
            matches!(e, LoadError::OffsetsOverlap { ref other, .. } if other == "a"),
            "{e}"
        );
        let e = list(
            "m",
            &st(
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#,
                8,
            ),
        )
        .unwrap_err();
        assert!(
            matches!(e, LoadError::OffsetsGap { from: 0, to: 4, .. }),
            "{e}"
        );
        let e = list(
            "m",
            &st(
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
                8,
            ),
        )
        .unwrap_err();
        assert!(
            matches!(e, LoadError::OffsetsGap { from: 4, to: 8, .. }),
            "{e}"
        );
        let e = list(
            "m",
            &st(
                r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
                4,
            ),
        )
        .unwrap_err();
        assert!(matches!(e, LoadError::OffsetsBeyondData { .. }), "{e}");
        let e = list(
            "m",
            &st(
                r#"{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}"#,
                2,
            ),
        )
        .unwrap_err();
        assert!(matches!(e, LoadError::BadField { .. }), "{e}");
        let infos = list(
            "m",
            &st(
                r#"{"__metadata__":{"x":"y"},"z":{"dtype":"F4","shape":[4],"data_offsets":[0,2]}}"#,
                2,
            ),
        )
        .unwrap();
        assert_eq!(infos[0].dtype, Dtype::F4);
        assert!(list("m", &st("{}", 0)).unwrap().is_empty());
    }
}
