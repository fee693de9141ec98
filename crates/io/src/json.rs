//! JSON reader (issue 3, "Loaders"): nested lists, or `{"shape": [...], "data": [...]}`.
//!
//! - Nested lists of numbers, rank 1 to 4, rectangular: `[[0.5, 0.5], [0.25, 0.75]]` is
//!   `[2, 2]`. A list whose length differs from its siblings' is [`LoadError::JsonRagged`]; a
//!   number where a list belongs (or the reverse), a string, `null` or `true` is
//!   [`LoadError::JsonStructure`], naming the JSON path such as `[3][1]`.
//! - An object with exactly `shape` (a list of 0..=4 non-negative integers) and `data` (a flat
//!   list of `product(shape)` numbers in C order).
//!
//! The document is streamed (serde's visitor API) straight into one `Vec<f32>`: no JSON value
//! tree is built, and the element cap is checked before each value is stored, so a huge file
//! cannot make us allocate more than `limits.max_elements` floats.

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use super::safetensors::Json;
use super::{check_finite, check_shape, utf8_text, Limits, LoadError, Tensor, MAX_RANK};

/// Parse state shared by the visitors; `error` carries a structured error out through serde.
struct State<'a> {
    file: &'a str,
    max_elements: usize,
    data: Vec<f32>,
    /// Length of the lists at each depth, set by the first list completed at that depth.
    dims: [Option<usize>; MAX_RANK],
    /// Depth of the leaves, set by the first number.
    rank: Option<usize>,
    /// Index path of the value being read.
    path: Vec<usize>,
    /// The `shape` field of the object form.
    object_shape: Option<Vec<usize>>,
    object_form: bool,
    error: Option<LoadError>,
}

impl State<'_> {
    /// Records `e` and returns a serde error that unwinds the parse.
    fn fail<E: de::Error>(&mut self, e: LoadError) -> E {
        self.error = Some(e);
        E::custom("kvlab structured error")
    }

    fn path_text(&self) -> String {
        if self.path.is_empty() {
            "the top level".to_string()
        } else {
            self.path.iter().map(|i| format!("[{i}]")).collect()
        }
    }

    fn structure<E: de::Error>(&mut self, path: String, found: &str, expected: &str) -> E {
        let e = LoadError::JsonStructure {
            file: self.file.to_string(),
            path,
            found: found.to_string(),
            expected: expected.to_string(),
        };
        self.fail(e)
    }

    /// Stores one number, enforcing the element cap first.
    fn push<E: de::Error>(&mut self, value: f64, field: &str) -> Result<(), E> {
        if self.data.len() >= self.max_elements {
            let e = LoadError::TooManyElements {
                file: self.file.to_string(),
                field: field.to_string(),
                shape: vec![self.data.len().saturating_add(1)],
                max_elements: self.max_elements,
            };
            return Err(self.fail(e));
        }
        // Values beyond f32's range become infinite here and are reported by check_finite.
        self.data.push(value as f32);
        Ok(())
    }
}

/// Describes an unexpected JSON value for messages.
fn found_text(kind: &str, value: &str) -> String {
    let mut v: String = value.chars().take(30).collect();
    if value.chars().nth(30).is_some() {
        v.push_str("...");
    }
    format!("{kind} {v}")
}

/// A value at `depth` inside the nested-list form (depth 0 is the whole document).
struct Nested<'s, 'a> {
    st: &'s mut State<'a>,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Nested<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Nested<'_, '_> {
    fn leaf<E: de::Error>(self, value: f64, text: &str) -> Result<(), E> {
        let st = self.st;
        if self.depth == 0 {
            let p = st.path_text();
            return Err(st.structure(
                p,
                &found_text("the number", text),
                "a list of numbers (rank 1 to 4) or {\"shape\": [...], \"data\": [...]}",
            ));
        }
        match st.rank {
            None => st.rank = Some(self.depth),
            Some(r) if r != self.depth => {
                let p = st.path_text();
                return Err(st.structure(
                    p,
                    &found_text("the number", text),
                    &format!("a list (the first number sits {r} lists deep)"),
                ));
            }
            Some(_) => {}
        }
        st.push(value, "nested lists")
    }

    fn other<E: de::Error>(self, what: String) -> Result<(), E> {
        let st = self.st;
        let p = st.path_text();
        Err(st.structure(p, &what, "a number or a list of numbers"))
    }
}

impl<'de> Visitor<'de> for Nested<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("nested lists of numbers, or {\"shape\": [...], \"data\": [...]}")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.leaf(v as f64, &v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.leaf(v as f64, &v.to_string())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.leaf(v, &v.to_string())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.other(found_text("the string", &format!("\"{v}\"")))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.other(format!("the boolean {v}"))
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.other("null".to_string())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let depth = self.depth;
        let st = self.st;
        if depth >= MAX_RANK {
            let p = st.path_text();
            return Err(st.structure(
                p,
                "a list nested 5 deep",
                "at most 4 levels of lists (rank 1 to 4)",
            ));
        }
        if let Some(r) = st.rank {
            if depth >= r {
                let p = st.path_text();
                return Err(st.structure(
                    p,
                    "a list",
                    &format!("a number (the first number sits {r} lists deep)"),
                ));
            }
        }
        let expected = st.dims.get(depth).copied().flatten();
        let mut count = 0usize;
        loop {
            st.path.push(count);
            let more = seq.next_element_seed(Nested {
                st: &mut *st,
                depth: depth + 1,
            })?;
            st.path.pop();
            if more.is_none() {
                break;
            }
            count += 1;
            if let Some(n) = expected {
                if count > n {
                    break;
                }
            }
        }
        match expected {
            Some(n) if n != count => {
                let e = LoadError::JsonRagged {
                    file: st.file.to_string(),
                    path: st.path_text(),
                    // When we stopped early the list is longer still; say "more than".
                    found: count,
                    expected: n,
                };
                Err(st.fail(e))
            }
            Some(_) => Ok(()),
            None => {
                if let Some(slot) = st.dims.get_mut(depth) {
                    *slot = Some(count);
                }
                Ok(())
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let st = self.st;
        if self.depth != 0 {
            let p = st.path_text();
            return Err(st.structure(p, "an object", "a number or a list of numbers"));
        }
        st.object_form = true;
        let mut data_seen = false;
        while let Some(key) = map.next_key::<String>()? {
            let duplicate = match key.as_str() {
                "shape" => st.object_shape.is_some(),
                "data" => data_seen,
                _ => {
                    let e = LoadError::UnknownField {
                        file: st.file.to_string(),
                        field: format!("field '{key}'"),
                        expected: "the fields 'shape' and 'data'".to_string(),
                    };
                    return Err(st.fail(e));
                }
            };
            if duplicate {
                let e = LoadError::Duplicate {
                    file: st.file.to_string(),
                    field: format!("field '{key}'"),
                };
                return Err(st.fail(e));
            }
            if key == "shape" {
                let shape = map.next_value_seed(ShapeSeed { st: &mut *st })?;
                st.object_shape = Some(shape);
            } else {
                map.next_value_seed(Flat {
                    st: &mut *st,
                    index: None,
                })?;
                data_seen = true;
            }
        }
        let missing = if st.object_shape.is_none() {
            Some("shape")
        } else if !data_seen {
            Some("data")
        } else {
            None
        };
        if let Some(field) = missing {
            let e = LoadError::MissingField {
                file: st.file.to_string(),
                field: format!("field '{field}'"),
            };
            return Err(st.fail(e));
        }
        Ok(())
    }
}

/// The object form's `data`: a flat list (`index == None`) or one of its numbers.
struct Flat<'s, 'a> {
    st: &'s mut State<'a>,
    index: Option<usize>,
}

impl<'de> DeserializeSeed<'de> for Flat<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Flat<'_, '_> {
    fn path(&self) -> String {
        match self.index {
            Some(i) => format!("data[{i}]"),
            None => "data".to_string(),
        }
    }

    fn number<E: de::Error>(self, v: f64, text: &str) -> Result<(), E> {
        if self.index.is_none() {
            let p = self.path();
            return Err(self.st.structure(
                p,
                &found_text("the number", text),
                "a flat list of numbers",
            ));
        }
        self.st.push(v, "field 'data'")
    }

    fn other<E: de::Error>(self, what: String) -> Result<(), E> {
        let p = self.path();
        let expected = if self.index.is_some() {
            "a number ('data' is flat, in C order; for nested lists drop the {shape, data} wrapper)"
        } else {
            "a flat list of numbers"
        };
        Err(self.st.structure(p, &what, expected))
    }
}

impl<'de> Visitor<'de> for Flat<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a flat list of numbers")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.number(v as f64, &v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.number(v as f64, &v.to_string())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.number(v, &v.to_string())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.other(found_text("the string", &format!("\"{v}\"")))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.other(format!("the boolean {v}"))
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.other("null".to_string())
    }
    fn visit_map<A: MapAccess<'de>>(self, _map: A) -> Result<(), A::Error> {
        self.other("an object".to_string())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if self.index.is_some() {
            return self.other("a list".to_string());
        }
        let st = self.st;
        let mut i = 0usize;
        while seq
            .next_element_seed(Flat {
                st: &mut *st,
                index: Some(i),
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }
}

/// The object form's `shape`: at most `MAX_RANK` non-negative integers.
struct ShapeSeed<'s, 'a> {
    st: &'s mut State<'a>,
}

impl<'de> DeserializeSeed<'de> for ShapeSeed<'_, '_> {
    type Value = Vec<usize>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Vec<usize>, D::Error> {
        d.deserialize_any(self)
    }
}

impl ShapeSeed<'_, '_> {
    fn bad<E: de::Error>(self, value: String) -> E {
        let e = LoadError::BadField {
            file: self.st.file.to_string(),
            field: "field 'shape'".to_string(),
            value,
            expected: "a list of at most 4 non-negative integers, e.g. [8, 64, 512]".to_string(),
        };
        self.st.fail(e)
    }
}

impl<'de> Visitor<'de> for ShapeSeed<'_, '_> {
    type Value = Vec<usize>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of non-negative integers")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Vec<usize>, E> {
        Err(self.bad(v.to_string()))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Vec<usize>, E> {
        Err(self.bad(v.to_string()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Vec<usize>, E> {
        Err(self.bad(v.to_string()))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<usize>, E> {
        Err(self.bad(found_text("the string", &format!("\"{v}\""))))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Vec<usize>, E> {
        Err(self.bad(v.to_string()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Vec<usize>, E> {
        Err(self.bad("null".to_string()))
    }
    fn visit_map<A: MapAccess<'de>>(self, _map: A) -> Result<Vec<usize>, A::Error> {
        Err(self.bad("an object".to_string()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<usize>, A::Error> {
        let mut shape = Vec::new();
        // Items are read as generic numbers so a bad one is reported with the field's name.
        while let Some(item) = seq.next_element::<serde_json::Number>().map_err(|e| {
            let text = e.to_string();
            self.st.fail::<A::Error>(LoadError::BadField {
                file: self.st.file.to_string(),
                field: "field 'shape'".to_string(),
                value: format!("a list holding a non-number ({text})"),
                expected: "a list of at most 4 non-negative integers, e.g. [8, 64, 512]"
                    .to_string(),
            })
        })? {
            let Some(d) = item.as_u64().and_then(|u| usize::try_from(u).ok()) else {
                let mut text: Vec<String> = shape.iter().map(|d: &usize| d.to_string()).collect();
                text.push(item.to_string());
                return Err(self.bad(format!("[{}, ...]", text.join(", "))));
            };
            shape.push(d);
            if shape.len() > MAX_RANK {
                let e = LoadError::RankTooHigh {
                    file: self.st.file.to_string(),
                    field: "field 'shape'".to_string(),
                    shape,
                };
                return Err(self.st.fail(e));
            }
        }
        Ok(shape)
    }
}

/// Reads a JSON tensor: nested lists or `{"shape", "data"}`.
///
/// Errors: [`LoadError::Json`] (syntax, with line and column), [`LoadError::JsonStructure`],
/// [`LoadError::JsonRagged`], [`LoadError::UnknownField`], [`LoadError::MissingField`],
/// [`LoadError::Duplicate`], [`LoadError::BadField`] / [`LoadError::RankTooHigh`] (shape),
/// [`LoadError::ShapeDataMismatch`], [`LoadError::TooManyElements`],
/// [`LoadError::EmptyTensor`], [`LoadError::NonFinite`] (a number beyond f32's range).
///
/// A JSON list of strings, the prompt's token texts (`["<s>", "The", " cat"]`), or `None` when
/// the document is not a list that starts with a string (then it is a tensor: [`load`]). Errors:
/// [`LoadError::Json`] for a list of strings that is not well formed (a number among the
/// strings, a missing bracket), [`LoadError::TooManyElements`] past `limits.max_elements`.
///
/// ```
/// use kvlab_io::{json, Limits};
/// let t = json::load_token_texts("t.json", br#"["<s>", " cat"]"#, &Limits::default()).unwrap();
/// assert_eq!(t, Some(vec!["<s>".to_string(), " cat".to_string()]));
/// assert_eq!(json::load_token_texts("a.json", b"[[1, 2]]", &Limits::default()).unwrap(), None);
/// assert!(json::load_token_texts("b.json", br#"["a", 2]"#, &Limits::default()).is_err());
/// ```
pub fn load_token_texts(
    file: &str,
    bytes: &[u8],
    limits: &Limits,
) -> Result<Option<Vec<String>>, LoadError> {
    let mut rest = bytes.iter().skip_while(|b| b.is_ascii_whitespace());
    if rest.next() != Some(&b'[') || rest.find(|b| !b.is_ascii_whitespace()) != Some(&b'"') {
        return Ok(None);
    }
    // (read as the safetensors header is, from text into its JSON values: that reader is in the
    // upload module already, and one of its own for a list of strings would add its code)
    let text = utf8_text(file, bytes)?;
    let list: Json = serde_json::from_str(text).map_err(|e| LoadError::Json {
        file: file.to_string(),
        line: e.line(),
        column: e.column(),
        message: format!("in a list of token texts: {e}"),
    })?;
    let Json::Arr(items) = list else {
        return Ok(None);
    };
    let mut texts = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        match item {
            Json::Str(text) => texts.push(text),
            _ => {
                return Err(LoadError::JsonStructure {
                    file: file.to_string(),
                    path: format!("[{i}]"),
                    found: "a value that is not a string".to_string(),
                    expected: "a string (each token's text)".to_string(),
                })
            }
        }
    }
    if texts.len() > limits.max_elements {
        return Err(LoadError::TooManyElements {
            file: file.to_string(),
            field: "token texts".to_string(),
            shape: vec![texts.len()],
            max_elements: limits.max_elements,
        });
    }
    Ok(Some(texts))
}

/// ```
/// use kvlab_io::{json, Limits};
/// let a = json::load("a.json", b"[[1, 2], [3, 4]]", &Limits::default()).unwrap();
/// let b = json::load("b.json", br#"{"shape": [2, 2], "data": [1, 2, 3, 4]}"#, &Limits::default()).unwrap();
/// assert_eq!(a, b);
/// assert!(json::load("c.json", b"[[1, 2], [3]]", &Limits::default()).is_err());
/// ```
pub fn load(file: &str, bytes: &[u8], limits: &Limits) -> Result<Tensor, LoadError> {
    let mut st = State {
        file,
        max_elements: limits.max_elements,
        data: Vec::new(),
        dims: [None; MAX_RANK],
        rank: None,
        path: Vec::new(),
        object_shape: None,
        object_form: false,
        error: None,
    };
    // (from text, as every JSON the upload module reads: one instance of serde_json's parser)
    let mut de = serde_json::Deserializer::from_str(utf8_text(file, bytes)?);
    let parsed = Nested {
        st: &mut st,
        depth: 0,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end());
    if let Err(e) = parsed {
        return Err(st.error.take().unwrap_or_else(|| LoadError::Json {
            file: file.to_string(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        }));
    }
    let (shape, field) = if st.object_form {
        (st.object_shape.clone().unwrap_or_default(), "field 'shape'")
    } else {
        // Without any number the rank is the number of list levels seen (`[[], []]` is [2, 0]).
        let rank = st
            .rank
            .unwrap_or_else(|| st.dims.iter().take_while(|d| d.is_some()).count());
        let shape = st.dims.iter().take(rank).map(|d| d.unwrap_or(0)).collect();
        (shape, "nested lists")
    };
    let numel = check_shape(file, field, &shape, limits)?;
    if numel != st.data.len() {
        return Err(LoadError::ShapeDataMismatch {
            file: file.to_string(),
            shape,
            expected: numel,
            found: st.data.len(),
        });
    }
    let tensor = Tensor::new(shape, st.data)?;
    check_finite(file, "data", &tensor)?;
    Ok(tensor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(s: &str) -> Result<Tensor, LoadError> {
        load("t.json", s.as_bytes(), &Limits::default())
    }

    #[test]
    fn shapes() {
        assert_eq!(l("[1, 2.5, -3]").unwrap().shape(), &[3]);
        let t = l("[[[1],[2]],[[3],[4]],[[5],[6]]]").unwrap();
        assert_eq!(t.shape(), &[3, 2, 1]);
        assert_eq!(t.data(), &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(
            l(r#"{"data": [7], "shape": []}"#).unwrap().shape(),
            &[] as &[usize]
        );
    }

    #[test]
    fn structure_errors() {
        let e = l("[[1, 2], [3]]").unwrap_err();
        assert_eq!(
            e,
            LoadError::JsonRagged {
                file: "t.json".into(),
                path: "[1]".into(),
                found: 1,
                expected: 2
            }
        );
        assert!(
            matches!(l("[[1, 2], 3]"), Err(LoadError::JsonStructure { ref path, .. }) if path == "[1]")
        );
        assert!(
            matches!(l("[1, [2]]"), Err(LoadError::JsonStructure { ref path, .. }) if path == "[1]")
        );
        assert!(matches!(
            l(r#"[1, "a"]"#),
            Err(LoadError::JsonStructure { .. })
        ));
        assert!(matches!(
            l("[[[[[1]]]]]"),
            Err(LoadError::JsonStructure { .. })
        ));
        assert!(matches!(l("5"), Err(LoadError::JsonStructure { .. })));
        assert!(matches!(l("[[], []]"), Err(LoadError::EmptyTensor { .. })));
        assert!(matches!(l("[1, 2] x"), Err(LoadError::Json { .. })));
        assert!(matches!(l("[1e39]"), Err(LoadError::NonFinite { .. })));
        assert!(matches!(
            l(r#"{"shape": [2]}"#),
            Err(LoadError::MissingField { .. })
        ));
        assert!(matches!(
            l(r#"{"shape": [2], "data": [1], "x": 1}"#),
            Err(LoadError::UnknownField { .. })
        ));
        assert!(matches!(
            l(r#"{"shape": [3], "data": [1, 2]}"#),
            Err(LoadError::ShapeDataMismatch {
                expected: 3,
                found: 2,
                ..
            })
        ));
        assert!(matches!(
            l(r#"{"shape": [1,1,1,1,1], "data": [1]}"#),
            Err(LoadError::RankTooHigh { .. })
        ));
        assert!(matches!(
            l(r#"{"shape": [-1], "data": [1]}"#),
            Err(LoadError::BadField { .. })
        ));
        assert!(matches!(
            l(r#"{"shape": ["a"], "data": [1]}"#),
            Err(LoadError::BadField { .. })
        ));
        assert!(matches!(
            l(r#"{"shape": [1], "data": [[1]]}"#),
            Err(LoadError::JsonStructure { .. })
        ));
        let cap = Limits {
            max_bytes: 100,
            max_elements: 2,
        };
        assert!(matches!(
            load("t.json", b"[1, 2, 3]", &cap),
            Err(LoadError::TooManyElements { .. })
        ));
    }
}
