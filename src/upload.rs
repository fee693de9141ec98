//! Uploaded files, and the choice of tensors from them that the lab then uses.
//!
//! Two steps, kept apart so that the page can load them separately: [`Uploads`] reads files
//! ([`crate::io::load`]) and turns a [`UploadChoice`] into the three matrices the note works
//! with ([`Uploads::choose`] gives a [`Chosen`]); [`crate::lab::Lab::use_chosen`] then makes
//! them the data in use. Natively, [`crate::lab::Lab::use_uploaded`] does both. On the page the
//! first step runs in a second WebAssembly module (the `upload/` crate), fetched on the first
//! upload: the file parsers are a fifth of the code, and most visits never upload a file.

use crate::io::{
    self, AttentionAbout, FieldSink, HeadPick, KvAbout, Limits, LoadError, LoadParts, LoadWarning,
    LoadedFile, NamedTensor, TokenMismatch,
};
use crate::lab::{FileSummary, LabError, TensorSummary, UploadChoice};
use crate::Matrix;
use std::sync::Arc;
use thiserror::Error;

/// Why a file or a choice of tensors was refused (the lab shows it next to the file control).
///
/// Its own type, not [`LabError`], so that the upload module links the readers' messages only.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum UploadError {
    /// A file could not be read, or the chosen tensors cannot be used together (shared, as in
    /// [`LabError::Load`]).
    #[error("{0}")]
    Load(Arc<LoadError>),
    /// No uploaded tensor has the chosen name.
    #[error("no uploaded tensor is called '{name}': upload it first")]
    Missing {
        /// The name asked for (`file::tensor` or a bare tensor name).
        name: String,
    },
}

impl UploadError {
    /// This refusal's fields for the page's templates, as [`LoadError::visit`] gives them; a
    /// missing tensor is `uploadMissing`, with its `name`.
    pub fn visit(&self, field: &mut FieldSink<'_>) -> &'static str {
        match self {
            UploadError::Load(e) => e.visit(field),
            UploadError::Missing { name } => {
                field("name", name);
                "uploadMissing"
            }
        }
    }

    /// [`UploadError::visit`]'s fields collected (see [`LoadError::parts`]).
    pub fn parts(&self) -> LoadParts {
        io::collect_parts(|f| self.visit(f))
    }
}

impl From<LoadError> for UploadError {
    fn from(e: LoadError) -> Self {
        UploadError::Load(Arc::new(e))
    }
}

impl From<TokenMismatch> for UploadError {
    fn from(e: TokenMismatch) -> Self {
        LoadError::from(e).into()
    }
}

impl From<UploadError> for LabError {
    fn from(e: UploadError) -> Self {
        match e {
            UploadError::Load(e) => LabError::Load(e.to_string().into()),
            missing @ UploadError::Missing { .. } => LabError::Range {
                field: "file",
                message: missing.to_string(),
            },
        }
    }
}

/// The files uploaded so far (a file uploaded again under the same name replaces the old one).
#[derive(Debug, Clone, Default)]
pub struct Uploads {
    files: Vec<LoadedFile>,
}

/// Uploaded tensors interpreted for use: `A` (`S x T`), `K` (`T x d`) and optionally `V`
/// (`T x d_v`), with a description and warnings for the page. The constructor checks that the
/// three agree on `T`.
#[derive(Debug, Clone, PartialEq)]
pub struct Chosen {
    attention: Matrix,
    keys: Matrix,
    values: Option<Matrix>,
    description: String,
    warnings: Vec<String>,
}

/// What [`Chosen::description`] and [`Chosen::warnings`] say, as fields, so the page can say
/// it in its own language ([`UploadFigures::english`] is the description).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UploadFigures {
    /// The attention matrix.
    pub attention: AttentionAbout,
    /// The keys.
    pub keys: KvAbout,
    /// The values, when given (else the keys stand in for them).
    pub values: Option<KvAbout>,
    /// The warnings.
    pub warnings: Vec<LoadWarning>,
}

impl UploadFigures {
    /// The English description, e.g. `uploaded: attention [S=16, T=40]: 16 query steps over 40
    /// tokens; KV [T=40, d=8]: 40 tokens x 8 channels; no V given: K stands in for V`.
    pub fn english(&self) -> String {
        let values = match &self.values {
            Some(v) => format!("V: {}", v.english()),
            None => "no V given: K stands in for V".to_string(),
        };
        format!(
            "uploaded: {}; {}; {values}",
            self.attention.english(),
            self.keys.english()
        )
    }
}

impl Chosen {
    /// Checks that `keys` (and `values`, when given) have one row per column of `attention`
    /// (a [`Matrix`] is never empty). Errors name both token counts.
    ///
    /// ```
    /// use kvlab::upload::Chosen;
    /// use kvlab::Matrix;
    /// let a = Matrix::new(2, 3, vec![0.5; 6]).unwrap();
    /// let k = Matrix::new(3, 4, vec![1.0; 12]).unwrap();
    /// assert!(Chosen::new(a.clone(), k, None, "x".into(), vec![]).is_ok());
    /// let short = Matrix::new(2, 4, vec![1.0; 8]).unwrap();
    /// assert!(Chosen::new(a, short, None, "x".into(), vec![]).is_err());
    /// ```
    pub fn new(
        attention: Matrix,
        keys: Matrix,
        values: Option<Matrix>,
        description: String,
        warnings: Vec<String>,
    ) -> Result<Chosen, TokenMismatch> {
        // (TokenMismatch, not a LoadError: the page's module calls this, and a LoadError would
        // bring every reader's message into it)
        io::check_same_tokens(attention.cols(), keys.rows())?;
        if let Some(v) = &values {
            io::check_k_v_tokens(keys.rows(), v.rows())?;
        }
        Ok(Chosen {
            attention,
            keys,
            values,
            description,
            warnings,
        })
    }

    /// `A`, `S x T`.
    pub fn attention(&self) -> &Matrix {
        &self.attention
    }

    /// `K`, `T x d`.
    pub fn keys(&self) -> &Matrix {
        &self.keys
    }

    /// `V`, `T x d_v`, when one was chosen (else the keys stand in for it).
    pub fn values(&self) -> Option<&Matrix> {
        self.values.as_ref()
    }

    /// What is in use, for the page.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Warnings (rows not summing to 1, ...).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The parts: `(attention, keys, values, description, warnings)`.
    pub fn into_parts(self) -> (Matrix, Matrix, Option<Matrix>, String, Vec<String>) {
        (
            self.attention,
            self.keys,
            self.values,
            self.description,
            self.warnings,
        )
    }
}

impl Uploads {
    /// No files.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads an uploaded file ([`crate::io::load`] with the default [`Limits`]) and keeps its
    /// tensors for [`Uploads::choose`]. Returns what the file holds.
    pub fn load(&mut self, name: &str, bytes: &[u8]) -> Result<FileSummary, UploadError> {
        let loaded = io::load(name, bytes, &Limits::default())?;
        Ok(self.add(loaded))
    }

    /// Keeps a file read elsewhere (replacing one of the same name); returns what it holds
    /// (the skipped tensors move to the summary: nothing here needs them again).
    pub fn add(&mut self, mut loaded: LoadedFile) -> FileSummary {
        let summary = FileSummary {
            file: loaded.file_name.clone(),
            summary: loaded.summary.clone(),
            about: loaded.about.clone(),
            tensors: loaded
                .tensors
                .iter()
                .map(|t| TensorSummary {
                    name: t.name.clone(),
                    shape: t.tensor.shape().to_vec(),
                    dtype: t.dtype.clone(),
                })
                .collect(),
            skipped: std::mem::take(&mut loaded.skipped),
        };
        self.files.retain(|f| f.file_name != loaded.file_name);
        self.files.push(loaded);
        summary
    }

    /// The number of files kept.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether no file has been uploaded.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    fn find(&self, name: &str) -> Result<&NamedTensor, UploadError> {
        // `file::tensor` or a bare tensor name (the last match wins: the newest upload)
        self.files
            .iter()
            .rev()
            .flat_map(|f| {
                f.tensors
                    .iter()
                    .map(move |t| (format!("{}::{}", f.file_name, t.name), t))
            })
            .find(|(full, t)| full == name || t.name == name)
            .map(|(_, t)| t)
            .ok_or_else(|| UploadError::Missing {
                name: name.to_string(),
            })
    }

    /// Interprets the chosen tensors: `attention` (`[S,T]`, `[T,T]` or `[H,S,T]` with `head`),
    /// `keys` and optionally `values` (`[T,d]`, `[H,T,d]`, `[L,H,T,d]` with `layer`/`head`).
    /// Checks that `T` agrees; normalises the attention rows when asked.
    pub fn choose(&self, choice: &UploadChoice) -> Result<Chosen, UploadError> {
        self.choose_described(choice).map(|(chosen, _)| chosen)
    }

    /// [`Uploads::choose`], with what the chosen tensors' description and warnings say, as
    /// fields (for the page, which words them in its own language).
    pub fn choose_described(
        &self,
        choice: &UploadChoice,
    ) -> Result<(Chosen, UploadFigures), UploadError> {
        let head = match choice.head_mode.as_str() {
            "mean" => HeadPick::Mean,
            "max" => HeadPick::Max,
            "sum" => HeadPick::Sum,
            _ => HeadPick::Head(choice.head),
        };
        let a = self.find(&choice.attention)?;
        let mut att = io::interpret_attention(&a.name, &a.tensor, head)?;
        if choice.normalise {
            io::normalise_rows(&mut att.matrix);
        }
        let pick = io::KvPick {
            layer: choice.layer,
            head: choice.kv_head,
        };
        let k = self.find(&choice.keys)?;
        let kv = io::interpret_kv(&k.name, &k.tensor, pick)?;
        io::check_same_tokens(att.tokens(), kv.tokens())?;
        let vv = match &choice.values {
            Some(v) if !v.is_empty() => {
                let t = self.find(v)?;
                let vv = io::interpret_kv(&t.name, &t.tensor, pick)?;
                io::check_kv_pair(&kv, &vv)?;
                Some(vv)
            }
            _ => None,
        };
        let about = UploadFigures {
            attention: att.about,
            keys: kv.about,
            values: vv.as_ref().map(|v| v.about.clone()),
            warnings: att.warnings,
        };
        let warnings: Vec<String> = about.warnings.iter().map(|w| w.to_string()).collect();
        let chosen = Chosen::new(
            att.matrix,
            kv.matrix,
            vv.map(|v| v.matrix),
            about.english(),
            warnings,
        )?;
        Ok((chosen, about))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(attention: &str, keys: &str) -> UploadChoice {
        UploadChoice {
            attention: attention.into(),
            keys: keys.into(),
            head_mode: "head".into(),
            ..UploadChoice::default()
        }
    }

    #[test]
    fn the_description_and_warnings_are_the_english_of_their_fields() {
        let mut up = Uploads::new();
        // [H=2, S=2, T=3]: head 1's rows sum to 2
        up.load(
            "h.json",
            br#"{"shape": [2, 2, 3], "data": [0.5, 0.5, 0, 0.2, 0.3, 0.5, 1, 1, 0, 0.4, 0.6, 1]}"#,
        )
        .expect("attention");
        up.load(
            "k.json",
            br#"{"shape": [2, 3, 2], "data": [1,2,3,4,5,6,7,8,9,10,11,12]}"#,
        )
        .expect("keys");
        let mut c = choice("h.json", "k.json");
        c.head_mode = "max".into();
        c.kv_head = 1;
        c.values = Some("k.json".into());
        let (chosen, about) = up.choose_described(&c).expect("chosen");
        assert_eq!(chosen.description(), about.english());
        assert_eq!(
            about.english(),
            "uploaded: attention [H=2, S=2, T=3]: max over 2 heads (rows no longer sum to 1); \
             2 query steps over 3 tokens; KV [H=2, T=3, d=2]: head 1 of 2 (heads 0..=1); 3 tokens \
             x 2 channels; V: KV [H=2, T=3, d=2]: head 1 of 2 (heads 0..=1); 3 tokens x 2 channels"
        );
        assert_eq!(
            (about.attention.pick, about.attention.heads),
            ("max", Some(2))
        );
        assert_eq!((about.keys.head, about.keys.layers), (1, None));
        let warned: Vec<String> = about.warnings.iter().map(|w| w.to_string()).collect();
        assert_eq!(chosen.warnings(), warned.as_slice());
        assert!(matches!(
            about.warnings.as_slice(),
            [LoadWarning::RowSums { rows_off: 2, rows: 4, worst_row, .. }] if worst_row[0] == 1
        ));
        // choose is choose_described without the fields
        assert_eq!(up.choose(&c).expect("chosen"), chosen);
    }

    #[test]
    fn choose_interprets_and_checks_tokens() {
        let mut up = Uploads::new();
        assert!(up.is_empty());
        // (CSV: one row per line; the readers themselves are tested in io)
        let a = up
            .load("a.csv", b"0.5,0.5,0\n0.2,0.3,0.5\n")
            .expect("attention");
        assert_eq!(a.tensors[0].shape, vec![2, 3]);
        up.load("k.csv", b"1,2\n3,4\n5,6\n").expect("keys");
        up.load("k4.csv", b"1,1\n1,1\n1,1\n1,1\n").expect("4 keys");
        assert_eq!(up.len(), 3);
        let c = up.choose(&choice("a.csv", "k.csv")).expect("agree on T");
        assert_eq!((c.attention().rows(), c.attention().cols()), (2, 3));
        assert_eq!(c.keys().row(2), Some(&[5.0, 6.0][..]));
        assert!(c.values().is_none());
        assert!(
            c.description().contains("K stands in for V"),
            "{}",
            c.description()
        );
        let e = LabError::from(up.choose(&choice("a.csv", "k4.csv")).unwrap_err());
        assert_eq!(e.field(), "file");
        assert!(
            e.to_string().contains('3') && e.to_string().contains('4'),
            "{e}"
        );
        let e = up.choose(&choice("nope.csv", "k.csv")).unwrap_err();
        assert!(matches!(&e, UploadError::Missing { name } if name == "nope.csv"));
        let e = LabError::from(e);
        assert_eq!(e.field(), "file");
        assert!(e.to_string().contains("'nope.csv': upload it first"), "{e}");
    }

    #[test]
    fn a_file_uploaded_again_replaces_the_old_one() {
        let mut up = Uploads::new();
        up.load("a.csv", b"0.5,0.5\n").expect("first");
        up.load("a.csv", b"0.2,0.3,0.5\n").expect("second");
        assert_eq!(up.len(), 1);
        up.load("k.csv", b"1\n2\n3\n").expect("k");
        let c = up
            .choose(&choice("a.csv", "k.csv"))
            .expect("the newer a.csv");
        assert_eq!(c.attention().cols(), 3);
    }

    #[test]
    fn chosen_rejects_parts_that_disagree_on_tokens() {
        let m = |r: usize, c: usize| Matrix::new(r, c, vec![0.25; r * c]).expect("matrix");
        let ok = Chosen::new(m(2, 4), m(4, 3), Some(m(4, 5)), "d".into(), vec![]);
        assert!(ok.is_ok(), "V may have its own width");
        let e = Chosen::new(m(2, 4), m(4, 3), Some(m(3, 3)), "d".into(), vec![]).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains('K') && text.contains('4') && text.contains('3'),
            "{text}"
        );
        let mismatch = |e: &TokenMismatch, (l, r): (usize, usize)| (e.left_t, e.right_t) == (l, r);
        assert!(mismatch(&e, (4, 3)), "{e:?}");
        let e = Chosen::new(m(2, 4), m(5, 3), None, "d".into(), vec![]).unwrap_err();
        assert!(mismatch(&e, (4, 5)), "{e:?}");
        let lab = LabError::from(e.clone());
        assert_eq!((lab.field(), lab.to_string()), ("file", e.to_string()));
        let up = UploadError::from(e.clone());
        assert!(
            matches!(&up, UploadError::Load(x) if **x == LoadError::TokenMismatch(e.clone())),
            "{up:?}"
        );
        let (a, k, v, d, w) = Chosen::new(m(1, 2), m(2, 2), None, "desc".into(), vec!["w".into()])
            .expect("valid")
            .into_parts();
        assert_eq!(
            (a.cols(), k.rows(), v, d, w),
            (2, 2, None, "desc".to_string(), vec!["w".to_string()])
        );
    }
}
