//! kvlab's upload module: the file readers as a second WebAssembly module.
//!
//! The page's own module (the `kvlab` crate with its `page` feature) holds no file reader: the
//! readers and the JSON parser behind them are a fifth of its code, and most visits never
//! upload a file. The page's engine (`www/engine.js`) fetches this module on the first upload;
//! it reads files and keeps them ([`kvlab_io::upload::Uploads`]), and turns the learner's choice of
//! tensors into the three matrices the note works with ([`kvlab_io::upload::Uploads::choose`]),
//! which the page's module then takes as typed arrays (`Page.useChosen`).
//!
//! Everything here is a thin wasm32 wrapper; the logic lives in `kvlab-io` (`crates/io`, which
//! depends on the core only) and is tested there.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(target_arch = "wasm32")]
mod web {
    use js_sys::{Array, Float32Array, Object, Reflect};
    use kvlab_io::upload::{
        Assignment, Chosen as Picked, FileSummary, Role, UploadChoice, UploadError, UploadFigures,
    };
    use kvlab_io::{FieldSink, FileAbout, KvAbout, LoadError, LoadWarning, SkippedTensor};

    /// A JavaScript `Error` with `message` and a `field` property naming the control to show it
    /// next to (as the page's module gives its errors).
    fn error(field: &str, message: &str) -> JsValue {
        let e = js_sys::Error::new(message);
        // (a property on a fresh Error object: cannot fail)
        let _ = js_sys::Reflect::set(&e, &"field".into(), &field.into());
        e.into()
    }
    use wasm_bindgen::prelude::*;

    /// Installs the panic hook once, when the module is instantiated.
    #[wasm_bindgen(start)]
    pub fn start() {
        console_error_panic_hook::set_once();
    }

    /// Every refusal concerns the file control. Its fields ([`UploadError::visit`]) go with
    /// it as `refusal` (`{kind, file, ...}`, every value text) with `refusalOf: "load"`, so
    /// the page can word it in its language. A file with no loadable tensor adds each tensor's
    /// own refusal (`skipped`, as [`skipped_why`] gives them).
    fn refused(e: &UploadError) -> JsValue {
        let out = error("file", &e.to_string());
        let fields = refusal_fields(|f| e.visit(f));
        if let UploadError::Load(load) = e {
            if let LoadError::NoLoadableTensor { skipped, .. } = &**load {
                let _ = Reflect::set(&fields, &"skipped".into(), &skipped_why(skipped));
            }
        }
        // (properties on a fresh Error object: cannot fail)
        let _ = Reflect::set(&out, &"refusal".into(), &fields);
        let _ = Reflect::set(&out, &"refusalOf".into(), &"load".into());
        out
    }

    /// A refusal's `{kind, ...fields}` as `visit` gives them, every value as text.
    fn refusal_fields(visit: impl FnOnce(&mut FieldSink<'_>) -> &'static str) -> JsValue {
        let fields = Object::new();
        let kind = visit(&mut |k, v| {
            let _ = Reflect::set(&fields, &k.into(), &v.to_string().into());
        });
        let _ = Reflect::set(&fields, &"kind".into(), &kind.into());
        fields.into()
    }

    /// `{key: value, ...}` (setting a property on a fresh plain object cannot fail).
    fn object(fields: &[(&str, JsValue)]) -> JsValue {
        let o = Object::new();
        for (k, v) in fields {
            let _ = Reflect::set(&o, &(*k).into(), v);
        }
        o.into()
    }

    fn num(n: usize) -> JsValue {
        JsValue::from(n as f64)
    }

    fn shape(s: &[usize]) -> JsValue {
        s.iter().map(|&d| num(d)).collect::<Array>().into()
    }

    fn opt(n: Option<usize>) -> JsValue {
        n.map_or(JsValue::NULL, num)
    }

    // The fields the page words in its language, built by hand like `summary_object` (a serde
    // converter would cost more than all of them), named as their serde forms are.

    /// [`FileAbout`] as `{format, ...}`.
    fn file_about(a: &FileAbout) -> JsValue {
        match a {
            FileAbout::Npy {
                version,
                dtype,
                fortran_order,
                shape: s,
            } => object(&[
                ("format", "npy".into()),
                ("version", version.as_str().into()),
                ("dtype", dtype.as_str().into()),
                ("fortranOrder", (*fortran_order).into()),
                ("shape", shape(s)),
            ]),
            FileAbout::Csv {
                delimiter,
                header_row,
                shape: s,
            } => object(&[
                ("format", "csv".into()),
                ("delimiter", delimiter.key().into()),
                ("headerRow", (*header_row).into()),
                ("shape", shape(s)),
            ]),
            FileAbout::Json { shape: s } => {
                object(&[("format", "json".into()), ("shape", shape(s))])
            }
            FileAbout::Tokens { count } => {
                object(&[("format", "tokens".into()), ("count", num(*count))])
            }
            FileAbout::Safetensors { loaded, skipped } => object(&[
                ("format", "safetensors".into()),
                ("loaded", num(*loaded)),
                ("skipped", num(*skipped)),
            ]),
        }
    }

    /// [`KvAbout`] as `{layers, heads, tokens, channels, layer, head}`.
    fn kv_about(k: &KvAbout) -> JsValue {
        object(&[
            ("layers", opt(k.layers)),
            ("heads", opt(k.heads)),
            ("tokens", num(k.tokens)),
            ("channels", num(k.channels)),
            ("layer", num(k.layer)),
            ("head", num(k.head)),
        ])
    }

    /// [`UploadFigures`] as `{attention, keys, values, warnings}` (`null` for a part the lab
    /// generates).
    fn upload_about(u: &UploadFigures) -> JsValue {
        let attention = u.attention.as_ref().map_or(JsValue::NULL, |a| {
            object(&[
                ("heads", opt(a.heads)),
                ("steps", num(a.steps)),
                ("tokens", num(a.tokens)),
                ("causal", a.causal.into()),
                ("pick", a.pick.into()),
                ("head", num(a.head)),
            ])
        });
        let warnings: Array = u
            .warnings
            .iter()
            .map(|w| match w {
                LoadWarning::RowSums {
                    file,
                    rows_off,
                    rows,
                    worst_row,
                    worst_sum,
                    tolerance,
                } => object(&[
                    ("english", w.to_string().into()),
                    ("kind", "rowSums".into()),
                    ("file", file.as_str().into()),
                    ("rowsOff", num(*rows_off)),
                    ("rows", num(*rows)),
                    ("worstRow", shape(worst_row)),
                    ("worstSum", (*worst_sum).into()),
                    ("tolerance", (*tolerance).into()),
                ]),
                LoadWarning::TokenCount {
                    file,
                    count,
                    tokens,
                } => object(&[
                    ("english", w.to_string().into()),
                    ("kind", "tokenCount".into()),
                    ("file", file.as_str().into()),
                    ("count", num(*count)),
                    ("tokens", num(*tokens)),
                ]),
            })
            .collect();
        object(&[
            ("attention", attention),
            ("keys", u.keys.as_ref().map_or(JsValue::NULL, kv_about)),
            ("values", u.values.as_ref().map_or(JsValue::NULL, kv_about)),
            (
                "tokensFrom",
                u.tokens_from
                    .as_deref()
                    .map_or(JsValue::NULL, JsValue::from),
            ),
            ("warnings", warnings.into()),
        ])
    }

    /// Each skipped tensor's error as fields, for the page's language: `[{name, fileCap,
    /// refusal}]`.
    fn skipped_why(skipped: &[SkippedTensor]) -> JsValue {
        skipped
            .iter()
            .map(|t| {
                object(&[
                    ("name", t.name.as_str().into()),
                    ("fileCap", t.file_cap.into()),
                    (
                        "refusal",
                        refusal_fields(|f| {
                            for (k, v) in &t.why.1 {
                                f(k, v);
                            }
                            t.why.0
                        }),
                    ),
                ])
            })
            .collect::<Array>()
            .into()
    }

    /// `{file, summary, about, tensors: [{name, shape, dtype}], skipped, skippedWhy: [{name,
    /// fileCap, refusal}]}`, built by hand: a serde
    /// converter would be the largest part of this module after the readers.
    fn summary_object(s: &FileSummary) -> JsValue {
        let tensors: Array = s
            .tensors
            .iter()
            .map(|t| {
                let shape: Array = t.shape.iter().map(|&d| JsValue::from(d as f64)).collect();
                object(&[
                    ("name", t.name.as_str().into()),
                    ("shape", shape.into()),
                    ("dtype", t.dtype.as_str().into()),
                ])
            })
            .collect();
        object(&[
            ("file", s.file.as_str().into()),
            ("summary", s.summary.as_str().into()),
            ("about", file_about(&s.about)),
            ("tensors", tensors.into()),
            (
                "skipped",
                s.skipped
                    .iter()
                    .map(|t| JsValue::from(format!("{}: {}", t.name, t.reason)))
                    .collect::<Array>()
                    .into(),
            ),
            // (`skipped` says the same in English)
            ("skippedWhy", skipped_why(&s.skipped)),
        ])
    }

    /// [`Assignment`] as `{attention, keys, values, reasons: [{role, id, name, shape, why,
    /// tokens}], ambiguities: [{kind, ...fields}]}` (every field of an ambiguity as text) (`attention`, `keys`, `values`: the ids
    /// proposed, `""` for generated). The page words them in its language; their English
    /// (`Reason::english`, `Ambiguity::english`, tested natively) stays out of this module.
    fn assignment_object(a: &Assignment) -> JsValue {
        let reasons: Array = a
            .reasons
            .iter()
            .map(|r| {
                let t = r.tensor.as_ref();
                object(&[
                    ("role", r.role.key().into()),
                    ("id", t.map_or(JsValue::NULL, |t| t.id.as_str().into())),
                    ("name", t.map_or(JsValue::NULL, |t| t.name.as_str().into())),
                    ("shape", t.map_or(JsValue::NULL, |t| shape(&t.shape))),
                    ("why", r.why.key().into()),
                    ("tokens", opt(r.tokens)),
                ])
            })
            .collect();
        let ambiguities: Array = a
            .ambiguities
            .iter()
            .map(|x| refusal_fields(|f| x.visit(f)))
            .collect();
        let id = |role| JsValue::from(a.id(role).unwrap_or(""));
        object(&[
            ("attention", id(Role::Attention)),
            ("keys", id(Role::Keys)),
            ("values", id(Role::Values)),
            ("reasons", reasons.into()),
            ("ambiguities", ambiguities.into()),
        ])
    }

    /// The files uploaded so far, in this module's memory.
    #[wasm_bindgen]
    #[derive(Default)]
    pub struct Uploads {
        inner: kvlab_io::upload::Uploads,
    }

    #[wasm_bindgen]
    impl Uploads {
        /// No files yet.
        #[wasm_bindgen(constructor)]
        pub fn new() -> Uploads {
            Uploads::default()
        }

        /// Reads a file (bytes copied once into wasm) and keeps its tensors; returns what it
        /// holds: `{file, summary, tensors: [{name, shape, dtype}], skipped}`.
        pub fn load(&mut self, name: &str, bytes: &[u8]) -> Result<JsValue, JsValue> {
            let s = self.inner.load(name, bytes).map_err(|e| refused(&e))?;
            Ok(summary_object(&s))
        }

        /// Forgets the file called `name`; returns whether there was one.
        pub fn remove(&mut self, name: &str) -> bool {
            self.inner.remove(name)
        }

        /// The roles proposed for the files kept ([`kvlab_io::upload::Uploads::assign`]).
        pub fn assign(&self) -> JsValue {
            assignment_object(&self.inner.assign())
        }

        /// The tensors named (`file::tensor` or bare names; an empty name or absent `values`
        /// for a part the lab generates), interpreted with `head_mode` (`head`, `mean`, `max`,
        /// `sum`) and `head` for `[H,S,T]` attention, `layer` and `kv_head` for KV, and checked.
        #[allow(clippy::too_many_arguments)] // (the fields of one choice, as plain values)
        pub fn choose(
            &self,
            attention: String,
            keys: String,
            values: Option<String>,
            head_mode: String,
            head: usize,
            layer: usize,
            kv_head: usize,
            normalise: bool,
        ) -> Result<Chosen, JsValue> {
            let choice = UploadChoice {
                attention,
                keys,
                values,
                head_mode,
                head,
                layer,
                kv_head,
                normalise,
            };
            let (picked, about) = self
                .inner
                .choose_described(&choice)
                .map_err(|e| refused(&e))?;
            Ok(Chosen {
                picked,
                about: Some(about),
            })
        }
    }

    /// Tensors chosen for use, handed to the page's module as typed arrays (each getter copies
    /// straight out of this module's memory).
    #[wasm_bindgen]
    pub struct Chosen {
        picked: Picked,
        /// What an upload's description says as fields; `None` for the model's data.
        about: Option<UploadFigures>,
    }

    #[wasm_bindgen]
    impl Chosen {
        /// `A`, row-major (`steps` rows), or `undefined` when generated.
        pub fn attention(&self) -> Option<Float32Array> {
            self.picked
                .attention()
                .map(|a| Float32Array::from(a.data()))
        }

        /// `S`, the attention's rows (0 without attention).
        #[wasm_bindgen(getter)]
        pub fn steps(&self) -> usize {
            self.picked.attention().map_or(0, |a| a.rows())
        }

        /// `K`, row-major (`T` rows of `channels`), or `undefined` when generated.
        pub fn keys(&self) -> Option<Float32Array> {
            self.picked.keys().map(|k| Float32Array::from(k.data()))
        }

        /// `d`, the keys' width (0 without keys).
        #[wasm_bindgen(getter)]
        pub fn channels(&self) -> usize {
            self.picked.keys().map_or(0, |k| k.cols())
        }

        /// `V`, row-major, or `undefined` when generated.
        pub fn values(&self) -> Option<Float32Array> {
            self.picked.values().map(|v| Float32Array::from(v.data()))
        }

        /// The prompt's token texts, one per token, or `undefined`.
        pub fn tokens(&self) -> Option<Vec<String>> {
            self.picked.token_texts().map(<[String]>::to_vec)
        }

        /// `V`'s width (0 without V).
        #[wasm_bindgen(getter, js_name = valuesWidth)]
        pub fn values_width(&self) -> usize {
            self.picked.values().map_or(0, |v| v.cols())
        }

        /// What is in use, for the page.
        #[wasm_bindgen(getter)]
        pub fn description(&self) -> String {
            self.picked.description().to_string()
        }

        /// Warnings (rows not summing to 1, ...).
        pub fn warnings(&self) -> Vec<String> {
            self.picked.warnings().to_vec()
        }

        /// What the description and the warnings say, as fields
        /// ([`UploadFigures`]: `{attention, keys, values, warnings}`), for the page to word
        /// in its language.
        pub fn about(&self) -> JsValue {
            self.about.as_ref().map_or(JsValue::UNDEFINED, upload_about)
        }
    }

    /// kvlab's trained model ([`kvlab_core::lm::Lm`], fetched with the page's `model/`), and
    /// its last run: switching the layer or head does not run it again.
    #[wasm_bindgen]
    pub struct Model {
        lm: kvlab_core::lm::Lm,
        last: Option<(String, Vec<u8>, Option<String>, kvlab_core::lm::LmRun)>,
        /// The learner's fact case, its forward and the answers met on it ([`Model::needle`]).
        needle: Option<(
            kvlab_core::lm::tasks::Case,
            kvlab_core::lm::LmRun,
            kvlab_core::lm::needle::Answers,
        )>,
        /// The accuracy chart's built-in cases, each run when first asked for, and the
        /// answers met on each.
        builtin: Vec<(
            kvlab_core::lm::tasks::Case,
            Option<kvlab_core::lm::LmRun>,
            kvlab_core::lm::needle::Answers,
        )>,
    }

    /// A case as the page draws it: its text, the fact's bytes, where the question starts and
    /// the answer's bytes (byte offsets of `text`).
    #[derive(serde::Serialize)]
    struct CaseView {
        text: String,
        fact: [usize; 2],
        asked: usize,
        answer: [usize; 2],
        /// The longest distance this fact and question allow.
        most: usize,
    }

    /// One case of one accuracy curve, for [`Model::needle_point`].
    #[derive(serde::Serialize)]
    struct NeedleCurveCase {
        name: &'static str,
        cases: usize,
        points: Vec<kvlab_io::needle_report::NeedlePoint>,
    }

    fn asked(before: bool) -> kvlab_core::lm::needle::Asked {
        if before {
            kvlab_core::lm::needle::Asked::Before
        } else {
            kvlab_core::lm::needle::Asked::After
        }
    }

    /// A report as JSON text (the engine parses it), or its refusal as the model's error.
    fn json<T: serde::Serialize, E: std::fmt::Display>(
        report: Result<T, E>,
    ) -> Result<String, JsValue> {
        let report = report.map_err(|e| error("model", &e.to_string()))?;
        serde_json::to_string(&report).map_err(|e| error("model", &e.to_string()))
    }

    /// One point of a trade-off curve, for [`Model::sweep`].
    #[derive(serde::Serialize)]
    struct SweepAnswer {
        name: &'static str,
        of: usize,
        point: Option<kvlab_io::model_report::SweepPoint>,
        error: Option<String>,
    }

    /// What the page's settings (as JSON) ask of the model.
    fn specs_of(settings: &str) -> Result<kvlab::lab::ModelSpecs, JsValue> {
        let settings: kvlab::state::Settings = serde_json::from_str(settings)
            .map_err(|e| error("model", &format!("the page's settings: {e}")))?;
        Ok(kvlab::lab::model_specs(&settings))
    }

    /// A fact the needle test cannot ask, with its fields (`refusal`: `{kind, ...}`,
    /// `refusalOf: "needle"`) for the page to word in its language.
    fn needle_error(e: &kvlab_io::needle_report::NeedleError) -> JsValue {
        let out = error("needle", &e.to_string());
        if let Ok(fields) = serde_json::to_string(e) {
            if let Ok(fields) = js_sys::JSON::parse(&fields) {
                let _ = js_sys::Reflect::set(&out, &"refusal".into(), &fields);
                let _ = js_sys::Reflect::set(&out, &"refusalOf".into(), &"needle".into());
            }
        }
        out
    }

    fn model_error(e: &kvlab_io::lm::ModelError) -> JsValue {
        error("model", &e.to_string())
    }

    #[wasm_bindgen]
    impl Model {
        /// The model of the card `card` (`model.json`) with `weights` (`model.safetensors`).
        #[wasm_bindgen(constructor)]
        pub fn new(card: &str, weights: &[u8]) -> Result<Model, JsValue> {
            let card = kvlab_io::lm::card(card).map_err(|e| model_error(&e))?;
            let lm = kvlab_io::lm::load(&card, weights).map_err(|e| model_error(&e))?;
            Ok(Model {
                lm,
                last: None,
                needle: None,
                builtin: Vec::new(),
            })
        }

        /// Its layers.
        #[wasm_bindgen(getter)]
        pub fn layers(&self) -> usize {
            self.lm.config().layers
        }

        /// Heads per layer.
        #[wasm_bindgen(getter)]
        pub fn heads(&self) -> usize {
            self.lm.config().heads
        }

        /// The longest prompt it reads, in bytes (its context less the BOS).
        #[wasm_bindgen(getter, js_name = promptBytes)]
        pub fn prompt_bytes(&self) -> usize {
            self.lm.config().context - 1
        }

        /// Every layer's and head's attention of the last run, each pooled to `size x size`
        /// (the largest weight in each cell, so a sink's column or a band stays visible):
        /// `layers x heads x size x size`, row-major, layer by layer; empty before a run.
        pub fn thumbnails(&self, size: usize) -> Float32Array {
            let Some((_, _, _, run)) = &self.last else {
                return Float32Array::new_with_length(0);
            };
            let size = size.clamp(1, 64);
            let mut out = Vec::new();
            for layer in &run.attention {
                for a in layer {
                    let t = a.rows();
                    let mut cells = vec![0f32; size * size];
                    for (i, row) in a.iter_rows().enumerate() {
                        let ci = i * size / t;
                        for (j, &w) in row.iter().enumerate().take(i + 1) {
                            let cell = &mut cells[ci * size + j * size / t];
                            *cell = cell.max(w);
                        }
                    }
                    out.extend(cells);
                }
            }
            Float32Array::from(out.as_slice())
        }

        /// Every position's next-byte logits of `prompt` (BOS first), row-major `len + 1` rows
        /// of 256: the tests compare them with the trainer's and the native forward's.
        pub fn logits(&self, prompt: &str) -> Result<Float32Array, JsValue> {
            let run = self
                .lm
                .forward(&kvlab_core::lm::Lm::tokens(prompt))
                .map_err(|e| error("model", &e.to_string()))?;
            Ok(Float32Array::from(run.logits.data()))
        }

        /// Section 5's first figures: the model's quality on its last run under the page's
        /// compression (`settings`: the page's settings in use, `Page.settings()`, as JSON),
        /// with the kept marks of `layer`'s head `head` (negative: all its heads), as JSON
        /// ([`kvlab_io::model_report::QualityReport`]).
        pub fn quality(&self, settings: &str, layer: usize, head: i32) -> Result<String, JsValue> {
            let (lm, run, tokens, specs) = self.measured(settings)?;
            let r = kvlab_io::model_report::quality_report(
                lm,
                run,
                tokens,
                &specs.current,
                layer,
                usize::try_from(head).ok(),
            );
            json(r)
        }

        /// Section 5's table: every policy and the two sink cases at the page's `B` and
        /// quantization, then KIVI with section 2's KIVI settings, as JSON ([`kvlab_io::model_report::PolicyRow`]s).
        pub fn policies(&self, settings: &str) -> Result<String, JsValue> {
            let (lm, run, tokens, specs) = self.measured(settings)?;
            let named: Vec<_> = specs.policies.iter().map(|n| (n.name, &n.spec)).collect();
            let mut rows = kvlab_io::model_report::policy_rows(lm, run, tokens, &named);
            rows.push(kvlab_io::model_report::kivi_row(
                lm,
                run,
                tokens,
                &specs.kivi,
            ));
            json(Ok::<_, String>(rows))
        }

        /// Point `point` of the trade-off chart's curve `index` (in the order of section 5's
        /// table, of the compressions with a budget: the policies and the window alone): the
        /// model's KL at budget `point` of [`kvlab_io::model_report::sweep_budgets`], with the
        /// page's quantization, as JSON `{name, of, point}` (`of`: the curve's points; `point` a
        /// [`kvlab_io::model_report::SweepPoint`]) or `{name, of, error}`; `null` past the
        /// last curve. One run of the model: the page asks point by point, so that a change of
        /// the controls waits behind one at most.
        pub fn sweep(&self, settings: &str, index: usize, point: usize) -> Result<String, JsValue> {
            let (lm, run, tokens, specs) = self.measured(settings)?;
            let Some(named) = specs
                .policies
                .iter()
                .filter(|n| matches!(n.spec.keep, kvlab_core::lm::compress::Keep::Policy { .. }))
                .nth(index)
            else {
                return Ok("null".into());
            };
            let p = kvlab_core::lm::compress::Protocol::of(tokens.len())
                .map_err(|e| error("model", &e.to_string()))?
                .prefill;
            let budgets = kvlab_io::model_report::sweep_budgets(p);
            let Some(&budget) = budgets.get(point) else {
                return Err(error(
                    "model",
                    &format!("no point {point}: the curve has {}", budgets.len()),
                ));
            };
            let r = kvlab_io::model_report::sweep_point(lm, run, tokens, &named.spec, budget);
            json(Ok::<_, String>(SweepAnswer {
                name: named.name,
                of: budgets.len(),
                point: r.as_ref().ok().copied(),
                error: r.err().map(|e| e.to_string()),
            }))
        }

        /// Section 5's levers: one bit fewer against 10% fewer tokens, in the model's KL, as
        /// JSON ([`kvlab_io::model_report::LeverReport`]).
        pub fn levers(&self, settings: &str) -> Result<String, JsValue> {
            let (lm, run, tokens, specs) = self.measured(settings)?;
            let r = kvlab_io::model_report::lever_report(lm, run, tokens, &specs.current);
            json(r)
        }

        /// Section 5's heads' budgets, uniform against by score mass, as JSON
        /// ([`kvlab_io::model_report::AllocationReport`], `null` for StreamingLLM).
        pub fn allocation(
            &self,
            settings: &str,
            layer: usize,
            head: i32,
        ) -> Result<String, JsValue> {
            let (lm, run, tokens, specs) = self.measured(settings)?;
            let r = kvlab_io::model_report::allocation_report(
                lm,
                run,
                tokens,
                &specs.current,
                layer,
                usize::try_from(head).ok(),
            )
            .transpose();
            json(r)
        }

        /// Section 5's texts: 64 bytes after the prefill from the full cache, the cache
        /// compressed once and the cache held at `B`, as JSON
        /// ([`kvlab_io::model_report::TextReport`]).
        pub fn text(&self, settings: &str) -> Result<String, JsValue> {
            let (lm, run, tokens, specs) = self.measured(settings)?;
            let r = kvlab_io::model_report::text_report(
                lm,
                run,
                tokens,
                &specs.current,
                &specs.sampling,
            );
            json(r)
        }

        /// Builds the learner's fact (`key` is `value`, asked `distance` bytes of `text` later,
        /// the prompt the model's whole context) and runs the model on it, for
        /// [`Model::needle_answers`]: the case as JSON (`{text, fact, asked, answer}`), or a
        /// refusal in words naming the value and what is allowed.
        pub fn needle(
            &mut self,
            key: &str,
            value: &str,
            distance: usize,
            text: &str,
        ) -> Result<String, JsValue> {
            let len = self.lm.config().context - 1;
            let case =
                kvlab_io::needle_report::learner_case(text.as_bytes(), key, value, distance, len)
                    .map_err(|e| needle_error(&e))?;
            let run = self
                .lm
                .forward(&kvlab_core::lm::needle::tokens(&case))
                .map_err(|e| error("model", &e.to_string()))?;
            let view = CaseView {
                text: String::from_utf8_lossy(&case.bytes).into_owned(),
                fact: [case.source.start, case.source.end],
                asked: case.asked,
                answer: [case.answer.start, case.answer.end],
                most: kvlab_io::needle_report::longest_distance(key, value, len),
            };
            self.needle = Some((case, run, Default::default()));
            json(Ok::<_, String>(view))
        }

        /// A new fact for the learner: a made-up name and a 4-digit number, of the kind the
        /// model was trained on, from a stream (`seed`) that neither the trainer nor the
        /// built-in cases draw from, as JSON `[name, number]`.
        pub fn needle_draw(seed: u32) -> String {
            let mut rng = kvlab_core::rng::Xoshiro256::stream(
                kvlab_io::needle_report::NEEDLE_SEED,
                2 + u64::from(seed),
            );
            let key = kvlab_core::lm::tasks::draw_key(&mut rng);
            let value = kvlab_core::lm::tasks::draw_value(&mut rng);
            serde_json::to_string(&[key, value]).unwrap_or_default()
        }

        /// The answers of the full cache and of every policy of section 5's table (at the
        /// page's `B` and quantization) to the learner's fact, the question read before the
        /// compression (`before`) or after it, as JSON
        /// ([`kvlab_io::needle_report::NeedleAnswer`]s).
        pub fn needle_answers(&mut self, settings: &str, before: bool) -> Result<String, JsValue> {
            let Some((case, run, memo)) = &mut self.needle else {
                return Err(error("needle", "no fact has been asked yet"));
            };
            let specs = specs_of(settings)?;
            let named: Vec<_> = specs
                .policies
                .iter()
                .filter(|n| matches!(n.spec.keep, kvlab_core::lm::compress::Keep::Policy { .. }))
                .map(|n| (n.name, &n.spec))
                .collect();
            json(kvlab_io::needle_report::needle_answers(
                &self.lm,
                run,
                case,
                &named,
                Some(&specs.kivi),
                asked(before),
                memo,
            ))
        }

        /// Case `case` of the accuracy chart's curve `index` on the built-in cases, their text
        /// from `text` (the held-out slice), as JSON `{name, cases, points}`: curve 0 is the
        /// full cache (`full`, one point), then the policies of section 5's table with a
        /// budget in its order (the case's points over the budgets, then the prefill), then
        /// the current setting (`current`, one point at the page's `B`); `null` past it. One
        /// case of one curve a request, so that a change of the controls waits behind one at
        /// most.
        pub fn needle_point(
            &mut self,
            settings: &str,
            text: &str,
            index: usize,
            case: usize,
            before: bool,
        ) -> Result<String, JsValue> {
            use kvlab_io::needle_report::{needle_at, needle_row};
            if self.builtin.is_empty() {
                self.builtin = kvlab_io::needle_report::needle_cases(text.as_bytes())
                    .into_iter()
                    .map(|c| (c, None, kvlab_core::lm::needle::Answers::scoring()))
                    .collect();
            }
            let specs = specs_of(settings)?;
            let policies: Vec<_> = specs
                .policies
                .iter()
                .filter(|n| matches!(n.spec.keep, kvlab_core::lm::compress::Keep::Policy { .. }))
                .collect();
            if index > policies.len() + 1 {
                return Ok("null".into());
            }
            let cases = self.builtin.len();
            let Some((c, run, memo)) = self.builtin.get_mut(case) else {
                return Err(error(
                    "needle",
                    &format!("no case {case}: the chart has {cases}"),
                ));
            };
            if run.is_none() {
                let r = self
                    .lm
                    .forward(&kvlab_core::lm::needle::tokens(c))
                    .map_err(|e| error("model", &e.to_string()))?;
                *run = Some(r);
            }
            let Some(run) = run.as_ref() else {
                return Err(error("model", "the case did not run"));
            };
            let (lm, asked) = (&self.lm, asked(before));
            let full = kvlab_core::lm::compress::CacheSpec::full();
            let (name, points) = match index.checked_sub(1).map(|i| policies.get(i)) {
                None => (
                    "full",
                    needle_at(lm, run, c, &full, asked, memo).map(|p| vec![p]),
                ),
                Some(Some(named)) => (named.name, needle_row(lm, run, c, &named.spec, asked, memo)),
                Some(None) => (
                    "current",
                    needle_at(lm, run, c, &specs.current, asked, memo).map(|p| vec![p]),
                ),
            };
            let points = points.map_err(|e| error("model", &e.to_string()))?;
            json(Ok::<_, String>(NeedleCurveCase {
                name,
                cases,
                points,
            }))
        }

        /// The model, its last run and tokens, and what `settings` (the page's, as JSON) ask.
        #[allow(clippy::type_complexity)]
        fn measured(
            &self,
            settings: &str,
        ) -> Result<
            (
                &kvlab_core::lm::Lm,
                &kvlab_core::lm::LmRun,
                &[u8],
                kvlab::lab::ModelSpecs,
            ),
            JsValue,
        > {
            let Some((_, tokens, _, run)) = &self.last else {
                return Err(error("model", "the model has not run"));
            };
            Ok((&self.lm, run, tokens, specs_of(settings)?))
        }

        /// Runs `prompt` (again only when it changed) and gives layer `layer`, head `head`
        /// (negative: the heads' mean attention and the layer's whole cache) as tensors chosen
        /// for the page, their warnings saying where a long prompt was cut.
        pub fn choose(&mut self, prompt: &str, layer: usize, head: i32) -> Result<Chosen, JsValue> {
            let fresh = !matches!(&self.last, Some((p, ..)) if p == prompt);
            if fresh {
                let context = self.lm.config().context;
                let (tokens, note) =
                    kvlab_io::lm::prompt_tokens(prompt, context).map_err(|e| model_error(&e))?;
                let run = self
                    .lm
                    .forward(&tokens)
                    .map_err(|e| error("model", &e.to_string()))?;
                self.last = Some((prompt.to_string(), tokens, note, run));
            }
            let Some((_, tokens, note, run)) = &self.last else {
                return Err(error("model", "the model has not run"));
            };
            let head = usize::try_from(head).ok();
            let picked =
                kvlab_io::lm::chosen(run, tokens, layer, head).map_err(|e| model_error(&e))?;
            let picked = match note {
                Some(n) => picked.with_warning(n.clone()),
                None => picked,
            };
            Ok(Chosen {
                picked,
                about: None,
            })
        }
    }
}
