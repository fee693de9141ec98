//! The page's state: every control, the generator settings and the seed, as one plain struct
//! that round-trips through a URL query string (TensorFlow Playground's `state.ts` idea).
//!
//! Parsing never fails and never panics: unknown keys are ignored, a value that does not parse
//! falls back to its default, and a number outside its range is clamped; each such repair is
//! reported as a [`StateWarning`] naming the key, the value and the valid range, so the page can
//! say what it changed. Only values that differ from the defaults are written back, so links
//! stay short. Ranges that depend on the loaded data (`budget <= T`) are checked later by the
//! computations themselves, which return errors the page shows next to the control.

use crate::quant::{Granularity, MetaDtype, QuantConfig, Scheme};
use crate::synth::{AttentionPreset, MAX_ELEMENTS};
use serde::{Deserialize, Serialize};

/// Which section the page shows alone in embed mode
/// (`?embed=budget|quant|select|compare|together|model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Embed {
    /// The quantization section.
    Quant,
    /// The token-selection section.
    Select,
    /// The budget section.
    Budget,
    /// The policy comparison (3b).
    Compare,
    /// Both levers together (section 4).
    Together,
    /// The model under compression (section 5).
    Model,
}

/// How the real model's heads share the token budget (section 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HeadBudget {
    /// `B` tokens in every head.
    Uniform,
    /// `B x heads` per layer, shared by the heads' score mass (Ada-KV).
    Mass,
}

/// How the real model's text is generated (section 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decoding {
    /// The most likely byte each step.
    Greedy,
    /// Sampled at temperature 0.8, seed 1 (the same draws for both caches).
    Sample,
}

/// The token-selection method of the selection section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// H2O: cumulative scores, heavy hitters + recent window.
    H2o,
    /// SnapKV: observation-window scores (pooled), heavy + recent.
    Snapkv,
    /// StreamingLLM: sinks + recent.
    Streaming,
}

/// Pooling choice of SnapKV in the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PoolKind {
    /// No pooling.
    None,
    /// Average pooling.
    Avg,
    /// Max pooling.
    Max,
}

/// Which KV tensor the quantization section shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KvPick {
    /// Keys.
    K,
    /// Values.
    V,
}

/// How the kept set is recorded in the budget (`M_index`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IndexChoice {
    /// `T_kept x 4` bytes.
    List,
    /// `ceil(T/8)` bytes.
    Mask,
}

/// How the kept tokens follow the model's context in the extrapolation (section 1): H2O's and
/// SnapKV's budgets are absolute in their papers (keep B tokens whatever the length); the
/// note's ratios read as a fraction (keep B/T of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeepChoice {
    /// The same fraction `|K| / T` of the context.
    Fraction,
    /// The same `|K|` tokens (all of them when the context is shorter).
    Tokens,
}

/// Which heads share one kept set, for the model extrapolation (GQA).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// One kept set per layer, shared by all heads.
    Layer,
    /// One kept set per KV head, shared by its group of query heads.
    KvHead,
    /// One kept set per query head (SnapKV's reference): the cache holds a copy of K/V per
    /// query head.
    QueryHead,
}

/// Which section of the page a setting changes: the page redraws that section's charts when it
/// does ([`Affects`]; `www/fields.js`, generated from [`fields`], tells the page).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Section {
    /// Section 1, the budget and the model calculator.
    Budget,
    /// Section 2, quantization (and the KIVI panel).
    Quant,
    /// Section 3, token selection.
    Select,
    /// Section 3b, the policy comparison.
    Compare,
    /// Section 5, the real model under compression (computed by the model's module, beside
    /// the lab, when the model is the data).
    Model,
    /// Section 3b's trade-off on the real model: measured by the model's module a point at a
    /// time, not by the lab; its curves are measured again when one of these settings changes
    /// (B and the method only move its ring).
    ModelTradeoff,
}

impl Section {
    /// The page's sections an update redraws, each a `data-section` of `www/index.html`
    /// (the model's trade-off is drawn in section 3b's).
    pub const PAGE: [Section; 5] = [
        Section::Budget,
        Section::Quant,
        Section::Select,
        Section::Compare,
        Section::Model,
    ];
}

impl Method {
    /// The policy of the comparison this method is (its name in section 3b's table and in
    /// `policy::Policy::name`): `h2o-sum`, `snapkv` or `streaming-llm`.
    pub fn policy(self) -> &'static str {
        match self {
            Method::H2o => "h2o-sum",
            Method::Snapkv => "snapkv",
            Method::Streaming => "streaming-llm",
        }
    }
}

/// What changing a setting recomputes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Affects {
    /// The data itself (generated or read): every section.
    Data,
    /// Only these sections.
    Only(&'static [Section]),
    /// Nothing computed: how the page is shown (its language, a section embedded alone).
    Page,
}

/// The values a setting takes: the parser enforces it, links are repaired to it, the reference
/// (`docs/settings.md`) states it. Bounds that another setting sets (`budget <= tokens`) are
/// applied after every key is read, by [`Settings::from_query`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// A whole number in `lo..=hi`.
    Int(u64, u64),
    /// An odd whole number in `lo..=hi` (an even one is raised by one).
    Odd(u64, u64),
    /// `auto` or a whole number in `lo..=hi` (`auto` is written as no key at all).
    AutoOr(u64, u64),
    /// One of these numbers.
    Numbers(&'static [u64]),
    /// One of these words.
    Words(&'static [&'static str]),
    /// One of the options of the setting's type (its names in links).
    Named,
    /// A model preset's slug ([`model_slug`]) or `custom`.
    Model,
}

/// One setting as the table declares it: its URL key, its values, what it changes, what it is.
#[derive(Debug, Clone)]
pub struct Field {
    /// The URL key, also the field's name in [`Settings`] and in the page's settings object.
    pub key: &'static str,
    /// The values it takes.
    pub rule: Rule,
    /// The values by name when the rule is [`Rule::Named`] or [`Rule::Words`], else empty.
    pub options: Vec<&'static str>,
    /// What changing it recomputes.
    pub affects: Affects,
    /// The default, as a link writes it (empty for `auto` or none).
    pub default: String,
    /// What it is (the field's doc comment).
    pub doc: &'static str,
}

/// A value as a query writes it: a number, or a name (percent-encoded).
enum Written<'a> {
    N(u64),
    S(&'a str),
}

/// A setting's type: how a link's text becomes its value and back, under its [`Rule`]. One
/// implementation per type, not per field, so the page's module carries a handful of parsers.
trait Value: Sized + PartialEq {
    fn read(p: &mut Parser, key: &str, raw: &str, rule: Rule) -> Option<Self>;
    fn write(&self) -> Written<'_>;
    /// The option names of a [`Rule::Named`] type (for [`fields`]).
    fn names() -> Vec<&'static str> {
        Vec::new()
    }
}

/// Reads a whole number under `rule` (an integer rule: [`Rule::Int`], [`Rule::Odd`],
/// [`Rule::Numbers`]); one copy for every integer type.
fn read_number(p: &mut Parser, key: &str, raw: &str, rule: Rule) -> Option<u64> {
    match rule {
        Rule::Int(lo, hi) | Rule::AutoOr(lo, hi) => p.int(key, raw, lo, hi),
        Rule::Odd(lo, hi) => {
            let v = p.int(key, raw, lo, hi)?;
            if v % 2 == 1 {
                return Some(v);
            }
            let as_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
            p.warn(
                key,
                Repair::Even {
                    value: as_usize(v),
                    lo: as_usize(lo),
                    hi: as_usize(hi),
                    used: as_usize(v + 1),
                },
            );
            Some(v + 1)
        }
        Rule::Numbers(options) => {
            if let Some(n) = options.iter().find(|n| n.to_string() == raw) {
                return Some(*n);
            }
            p.warn(
                key,
                Repair::NotOneOf {
                    raw: raw.to_string(),
                    options: options.iter().map(|n| n.to_string()).collect(),
                },
            );
            None
        }
        Rule::Words(_) | Rule::Named | Rule::Model => None,
    }
}

macro_rules! whole_number {
    ($($t:ty),*) => {$(
        impl Value for $t {
            fn read(p: &mut Parser, key: &str, raw: &str, rule: Rule) -> Option<Self> {
                read_number(p, key, raw, rule).and_then(|v| <$t>::try_from(v).ok())
            }
            fn write(&self) -> Written<'_> {
                Written::N(*self as u64)
            }
        }
    )*};
}
whole_number!(u8, usize, u64);

impl Value for Option<usize> {
    fn read(p: &mut Parser, key: &str, raw: &str, rule: Rule) -> Option<Self> {
        if raw == "auto" {
            return Some(None);
        }
        usize::read(p, key, raw, rule).map(Some)
    }
    fn write(&self) -> Written<'_> {
        Written::N(self.unwrap_or(0) as u64)
    }
}

impl Value for String {
    fn read(p: &mut Parser, key: &str, raw: &str, rule: Rule) -> Option<Self> {
        match rule {
            Rule::Words(words) => p
                .choice(
                    key,
                    raw,
                    &words.iter().map(|w| (*w, *w)).collect::<Vec<_>>(),
                )
                .map(str::to_string),
            _ => {
                let known = raw == "custom"
                    || crate::budget::ModelConfig::presets()
                        .iter()
                        .any(|m| model_slug(&m.name) == raw);
                if !known {
                    p.warn(
                        key,
                        Repair::UnknownModel {
                            raw: raw.to_string(),
                        },
                    );
                }
                known.then(|| raw.to_string())
            }
        }
    }
    fn write(&self) -> Written<'_> {
        Written::S(self)
    }
}

/// A setting whose values are a type's options, named in links by these tokens.
trait Named: Copy + PartialEq + 'static {
    const OPTIONS: &'static [(&'static str, Self)];
    /// The option's other name, its serde name, when it differs from its token (the page's
    /// settings objects hold `symmetric` for `sym`): both read the same, links keep the token.
    fn long_name(self) -> Option<&'static str> {
        None
    }
}

impl<T: Named> Value for T {
    fn read(p: &mut Parser, key: &str, raw: &str, _: Rule) -> Option<Self> {
        if let Some((_, v)) = T::OPTIONS.iter().find(|(_, v)| v.long_name() == Some(raw)) {
            return Some(*v);
        }
        p.choice(key, raw, T::OPTIONS)
    }
    fn write(&self) -> Written<'_> {
        Written::S(name_of(T::OPTIONS, *self))
    }
    fn names() -> Vec<&'static str> {
        T::OPTIONS.iter().map(|(n, _)| *n).collect()
    }
}

impl Value for Option<Embed> {
    fn read(p: &mut Parser, key: &str, raw: &str, rule: Rule) -> Option<Self> {
        Embed::read(p, key, raw, rule).map(Some)
    }
    fn write(&self) -> Written<'_> {
        self.as_ref().map_or(Written::S(""), Value::write)
    }
    fn names() -> Vec<&'static str> {
        Embed::names()
    }
}

/// The table of settings. Each row is one setting, in URL key order: its doc comment, its field
/// and type, its default, its [`Rule`] and what it [`Affects`]. The struct [`Settings`], its
/// `Default`, the link parser, [`Settings::to_query`], [`fields`] (the page's manifest and the
/// reference in `docs/settings.md`) all come from here; a new setting is one row.
macro_rules! settings {
    ($($(#[doc = $doc:literal])+ $key:ident: $ty:ty = $default:expr, $rule:expr, $affects:expr;)+) => {
        /// Every control of the page. Field names are the URL keys; each field's values are its
        /// [`Rule`] in [`fields`] (listed in `docs/settings.md`).
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        pub struct Settings {
            $($(#[doc = $doc])+ pub $key: $ty,)+
        }

        impl Default for Settings {
            fn default() -> Self {
                Self { $($key: $default,)+ }
            }
        }

        impl Settings {
            /// Reads `raw` into the setting `key`, repairing (and saying so) under its rule; an
            /// unknown key is ignored (other tools may add their own).
            fn read_key(&mut self, p: &mut Parser, key: &str, raw: &str) {
                match key {
                    $(stringify!($key) => {
                        if let Some(v) = <$ty as Value>::read(p, stringify!($key), raw, $rule) {
                            self.$key = v;
                        }
                    })+
                    _ => {}
                }
            }

            /// Every setting that differs from `d`, in table order, as a query writes it.
            fn written(&self, d: &Settings) -> Vec<(&'static str, Written<'_>)> {
                let mut out = Vec::new();
                $(if self.$key != d.$key {
                    out.push((stringify!($key), self.$key.write()));
                })+
                out
            }
        }

        /// The table of settings, for the page's manifest and the reference (native tools and
        /// tests: the page's module parses links with the table itself, not with this list).
        pub fn fields() -> Vec<Field> {
            let d = Settings::default();
            let default = |w: Written<'_>| match w {
                Written::N(n) => n.to_string(),
                Written::S(s) => s.to_string(),
            };
            vec![$(Field {
                key: stringify!($key),
                rule: $rule,
                options: match $rule {
                    Rule::Words(w) => w.to_vec(),
                    _ => <$ty as Value>::names(),
                },
                affects: $affects,
                default: match $rule {
                    Rule::AutoOr(..) => String::new(),
                    _ => default(d.$key.write()),
                },
                doc: concat!($($doc, "\n"),+),
            },)+]
        }
    };
}

/// The reference of the page's URL keys (`docs/settings.md`), made from the table: each key,
/// the values it takes, its default and what changing it recomputes.
pub fn reference() -> String {
    let mut out = String::from(
        "# The page's settings (URL keys)\n\n\
         Generated from the table of settings in `src/state.rs` (`cargo test --lib \
         settings_reference` checks it; `KVLAB_BLESS=1` rewrites it). A link holds only the \
         values that differ from the defaults, e.g. `?bits=3&budget=64`. A value out of range \
         is repaired to the nearest allowed one and the page says so; an unknown key is \
         ignored. Bounds that depend on other settings or on the data (`budget` at most \
         `tokens`) are in the descriptions.\n\n\
         | Key | Values | Default | Changes | What it is |\n|---|---|---|---|---|\n",
    );
    for f in fields() {
        let values = match f.rule {
            Rule::Int(lo, hi) => format!("{lo} to {hi}"),
            Rule::Odd(lo, hi) => format!("odd, {lo} to {hi}"),
            Rule::AutoOr(lo, hi) => format!("`auto` or {lo} to {hi}"),
            Rule::Numbers(n) => n.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
            Rule::Words(_) | Rule::Named => f
                .options
                .iter()
                .map(|o| format!("`{o}`"))
                .collect::<Vec<_>>()
                .join(", "),
            Rule::Model => "a preset's slug (see the page's list) or `custom`".into(),
        };
        let changes = match f.affects {
            Affects::Data => "the data: every section".to_string(),
            Affects::Page => "the page only".to_string(),
            Affects::Only(s) => {
                let mut numbers: Vec<&str> = s
                    .iter()
                    .map(|s| match s {
                        Section::Budget => "1",
                        Section::Quant => "2",
                        Section::Select => "3",
                        Section::Compare | Section::ModelTradeoff => "3b",
                        Section::Model => "5",
                    })
                    .collect();
                numbers.sort_unstable();
                numbers.dedup();
                let plural = if numbers.len() > 1 { "s" } else { "" };
                format!("section{plural} {}", numbers.join(", "))
            }
        };
        let default = match f.rule {
            Rule::AutoOr(..) => "`auto`".to_string(),
            _ if f.default.is_empty() => "none".to_string(),
            _ => format!("`{}`", f.default),
        };
        // (one line, its pipes escaped for the table, intra-doc links as plain code)
        let doc = f.doc.split_whitespace().collect::<Vec<_>>().join(" ");
        let doc = doc
            .replace('|', "\\|")
            .replace("[`", "`")
            .replace("`]", "`");
        out.push_str(&format!(
            "| `{}` | {values} | {default} | {changes} | {doc} |\n",
            f.key
        ));
    }
    out.push_str(
        "\n## Keys a link carries beside the settings\n\n\
         Which data a view is on: the settings parser reads none of them (a file cannot travel \
         in a link), the page writes and reads them (`www/app/url.js`, \
         `www/sections/model-run.js`).\n\n\
         | Key | Values | What it is |\n|---|---|---|\n",
    );
    for k in LINK_KEYS {
        out.push_str(&format!("| `{}` | {} | {} |\n", k.key, k.values, k.doc));
    }
    out
}

/// A key a link carries beside the settings ([`LINK_KEYS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkKey {
    /// The URL key.
    pub key: &'static str,
    /// The values it takes, as the reference says them.
    pub values: &'static str,
    /// What it is.
    pub doc: &'static str,
}

/// The keys a link carries beside the settings: which data the view is on (an upload, which
/// the link cannot carry and the page says so, or the model's run, carried whole: its prompt,
/// layer and head, which the page runs again, and section 5's fact asked of it). Not settings:
/// [`Settings::from_query`] ignores them, and they are in no [`Settings`] the engine computes
/// from; the page writes and reads them (`www/app/url.js`, `www/sections/model-run.js`) under
/// these names.
pub const LINK_KEYS: [LinkKey; 8] = [
    LinkKey {
        key: "data",
        values: "`upload`, `model`",
        doc: "The view is on uploaded files (which the link cannot carry: the page says what \
              it shows instead) or on the model's run.",
    },
    LinkKey {
        key: "prompt",
        values: "text",
        doc: "With `data=model`: the prompt the model runs on.",
    },
    LinkKey {
        key: "model_layer",
        values: "a layer of the model",
        doc: "With `data=model`: the layer whose attention is the data.",
    },
    LinkKey {
        key: "model_head",
        values: "a head of the model",
        doc: "With `data=model`: the head whose attention is the data.",
    },
    LinkKey {
        key: "fact_name",
        values: "letters, digits and spaces",
        doc: "With `data=model`: the name of section 5's fact (\"The number of NAME is ...\").",
    },
    LinkKey {
        key: "fact_number",
        values: "letters, digits and spaces",
        doc: "With `data=model`: the number section 5's fact states and its question asks for.",
    },
    LinkKey {
        key: "fact_distance",
        values: "0 to the longest the fact allows (195 for a 7-letter name and 4 digits)",
        doc: "With `data=model`: the bytes of text between the fact and its question.",
    },
    LinkKey {
        key: "fact_asked",
        values: "`before`, `after`",
        doc: "With `data=model`: whether the policies read the question before the compression \
              (query-aware) or after it.",
    },
];

const DATA: Affects = Affects::Data;
const QUANT: Affects = Affects::Only(&[
    Section::Quant,
    Section::Budget,
    Section::Compare,
    Section::Model,
    Section::ModelTradeoff,
]);
const QUANT_ONLY: Affects = Affects::Only(&[Section::Quant]);
// (KIVI's settings: section 2's panel, and section 5's KIVI row on the model)
const KIVI: Affects = Affects::Only(&[Section::Quant, Section::Model]);
// (the method and B: the model's trade-off has every policy over every B, and rings this one)
const SELECT: Affects = Affects::Only(&[
    Section::Select,
    Section::Budget,
    Section::Compare,
    Section::Model,
]);
// (the other selection settings change every policy's curve on the model)
const SELECT_SWEPT: Affects = Affects::Only(&[
    Section::Select,
    Section::Budget,
    Section::Compare,
    Section::Model,
    Section::ModelTradeoff,
]);
const MODEL: Affects = Affects::Only(&[Section::Model]);
const MODEL_SWEPT: Affects = Affects::Only(&[Section::Model, Section::ModelTradeoff]);
const BUDGET: Affects = Affects::Only(&[Section::Budget]);
const COMPARE: Affects = Affects::Only(&[Section::Compare]);
const PAGE: Affects = Affects::Page;
const MAX: u64 = MAX_TOKENS as u64;

settings! {
    /// Attention pattern of the generator.
    pattern: AttentionPreset = AttentionPreset::HeavyHitters, Rule::Named, DATA;
    /// Generator seed (at most 2^53: exact in JavaScript numbers).
    seed: u64 = 1, Rule::Int(0, 1 << 53), DATA;
    /// Tokens `T`.
    tokens: usize = 512, Rule::Int(1, MAX), DATA;
    /// Attention rows (decode steps) `S`, at most `T`.
    steps: usize = 64, Rule::Int(1, MAX_STEPS as u64), DATA;
    /// Channels `d`.
    channels: usize = 64, Rule::Int(1, MAX_CHANNELS as u64), DATA;
    /// Outlier channels of the generated keys, at most `d`.
    outliers: usize = 4, Rule::Int(0, MAX_CHANNELS as u64), DATA;
    /// All-positive (skewed) channels of the generated KV, at most `d`.
    skewed: usize = 0, Rule::Int(0, MAX_CHANNELS as u64), DATA;
    /// Bit width `b` (symmetric needs 2 or more).
    bits: u8 = 4, Rule::Int(1, MAX_BITS as u64), QUANT;
    /// Symmetric or asymmetric.
    scheme: Scheme = Scheme::Symmetric, Rule::Named, QUANT;
    /// Per-channel, per-token or per-tensor.
    granularity: Granularity = Granularity::PerChannel, Rule::Named, QUANT;
    /// Group size, `0` = none (and at most the grouped axis).
    group: usize = 0, Rule::Int(0, 65536), QUANT;
    /// Which tensor is quantized and shown.
    tensor: KvPick = KvPick::K, Rule::Named, QUANT_ONLY;
    /// The channel whose histogram is drawn; `None` (`auto`) = the one with the largest `max|x|`.
    channel: Option<usize> = None, Rule::AutoOr(0, MAX_CHANNELS as u64 - 1), QUANT_ONLY;
    /// Scale / zero-point dtype.
    meta: MetaDtype = MetaDtype::F16, Rule::Named, QUANT;
    /// Selection method.
    method: Method = Method::H2o, Rule::Named, SELECT;
    /// Budget `B` (at most `T`).
    budget: usize = 128, Rule::Int(1, MAX), SELECT;
    /// Recent window `r` (at most `T`).
    recent: usize = 32, Rule::Int(0, MAX), SELECT_SWEPT;
    /// SnapKV observation window `w` (at most `S`).
    window: usize = 16, Rule::Int(1, MAX_STEPS as u64), SELECT_SWEPT;
    /// SnapKV pooling.
    pool: PoolKind = PoolKind::Max, Rule::Named, SELECT_SWEPT;
    /// SnapKV pooling kernel (odd, at most `2 T + 1`).
    kernel: usize = 7, Rule::Odd(1, 63), SELECT_SWEPT;
    /// StreamingLLM sinks (at most `B`).
    sinks: usize = 4, Rule::Int(0, 1024), SELECT_SWEPT;
    /// Steps held out as "the future" for the policy comparison: policies see the first
    /// `S - future` rows, quality is measured on the last `future` (the oracle's upper bound);
    /// `0` = every policy sees and is judged on all rows. Below `S`.
    future: usize = 16, Rule::Int(0, MAX_STEPS as u64 - 1), COMPARE;
    /// KIVI key bits.
    kivi_kbits: u8 = 2, Rule::Int(1, 16), KIVI;
    /// KIVI value bits.
    kivi_vbits: u8 = 2, Rule::Int(1, 16), KIVI;
    /// KIVI group size (tokens per key group, channels per value group).
    kivi_group: usize = 32, Rule::Int(1, 4096), KIVI;
    /// KIVI full-precision residual window R (most recent tokens).
    kivi_residual: usize = 128, Rule::Int(0, MAX), KIVI;
    /// How the real model's heads share the budget: `B` each, or `B x heads` per layer by
    /// their score mass (Ada-KV).
    heads_budget: HeadBudget = HeadBudget::Uniform, Rule::Named, MODEL_SWEPT;
    /// How the real model's text is generated: greedy, or sampled (temperature 0.8, seed 1).
    decoding: Decoding = Decoding::Greedy, Rule::Named, MODEL;
    /// GPU memory for the "context that fits" figure, GiB.
    memory_gib: u64 = 80, Rule::Int(1, 4096), BUDGET;
    /// Model preset slug (see [`crate::budget::ModelConfig::presets`]) or `custom`.
    model: String = "llama-3-8b".into(), Rule::Model, BUDGET;
    /// Custom model: layers.
    layers: u64 = 32, Rule::Int(1, 1024), BUDGET;
    /// Custom model: KV heads.
    kv_heads: u64 = 8, Rule::Int(1, 1024), BUDGET;
    /// Custom model: head dimension.
    head_dim: u64 = 128, Rule::Int(1, 4096), BUDGET;
    /// Custom model: query heads, a multiple of the KV heads (per-query-head selection keeps
    /// a set, and a copy of K/V, per query head); `0` = one per KV head (multi-head
    /// attention, what a custom model was before it had this field).
    q_heads: u64 = 0, Rule::Int(0, 4096), BUDGET;
    /// Custom model: how many of the layers slide (hold only the last `sliding_window`
    /// tokens), at most `layers`; `0` = none.
    sliding_layers: u64 = 0, Rule::Int(0, 1024), BUDGET;
    /// Custom model: the sliding layers' window, tokens.
    sliding_window: u64 = 4096, Rule::Int(1, 1 << 22), BUDGET;
    /// Custom model: MLA's compressed KV latent width per token per layer (`kv_lora_rank`,
    /// DeepSeek: 512); `0` = not MLA (K and V per KV head).
    mla_latent: u64 = 0, Rule::Int(0, 65536), BUDGET;
    /// Custom model: MLA's decoupled RoPE key width stored beside the latent
    /// (`qk_rope_head_dim`, DeepSeek: 64).
    mla_rope: u64 = 0, Rule::Int(0, 4096), BUDGET;
    /// Custom model: bytes per full-precision element.
    fp_bytes: u64 = 2, Rule::Numbers(&[1, 2, 4]), BUDGET;
    /// Context length for the model extrapolation, tokens.
    context: u64 = 32768, Rule::Int(1, 1 << 22), BUDGET;
    /// Batch size.
    batch: u64 = 1, Rule::Int(1, 1024), BUDGET;
    /// Index kind for `M_index`.
    index: IndexChoice = IndexChoice::List, Rule::Named, BUDGET;
    /// How the kept tokens follow the context in the extrapolation.
    keep: KeepChoice = KeepChoice::Fraction, Rule::Named, BUDGET;
    /// Which heads share a kept set (model extrapolation).
    scope: Scope = Scope::KvHead, Rule::Named, BUDGET;
    /// Page language.
    lang: String = "en".into(), Rule::Words(&["en", "zh"]), PAGE;
    /// Embed one section alone.
    embed: Option<Embed> = None, Rule::Named, PAGE;
}

impl Named for AttentionPreset {
    const OPTIONS: &'static [(&'static str, Self)] = &[
        ("sink-local", AttentionPreset::SinkLocal),
        ("heavy-hitters", AttentionPreset::HeavyHitters),
        ("uniform", AttentionPreset::Uniform),
        ("needle", AttentionPreset::Needle),
    ];
}
impl Named for Scheme {
    const OPTIONS: &'static [(&'static str, Self)] =
        &[("sym", Scheme::Symmetric), ("asym", Scheme::Asymmetric)];
    fn long_name(self) -> Option<&'static str> {
        Some(self.name())
    }
}
impl Named for Granularity {
    const OPTIONS: &'static [(&'static str, Self)] = &[
        ("channel", Granularity::PerChannel),
        ("token", Granularity::PerToken),
        ("tensor", Granularity::PerTensor),
    ];
    fn long_name(self) -> Option<&'static str> {
        Some(self.name())
    }
}
impl Named for KvPick {
    const OPTIONS: &'static [(&'static str, Self)] = &[("k", KvPick::K), ("v", KvPick::V)];
}
impl Named for MetaDtype {
    const OPTIONS: &'static [(&'static str, Self)] =
        &[("f16", MetaDtype::F16), ("f32", MetaDtype::F32)];
}
impl Named for HeadBudget {
    const OPTIONS: &'static [(&'static str, Self)] =
        &[("uniform", HeadBudget::Uniform), ("mass", HeadBudget::Mass)];
}
impl Named for Decoding {
    const OPTIONS: &'static [(&'static str, Self)] =
        &[("greedy", Decoding::Greedy), ("sample", Decoding::Sample)];
}
impl Named for Method {
    const OPTIONS: &'static [(&'static str, Self)] = &[
        ("h2o", Method::H2o),
        ("snapkv", Method::Snapkv),
        ("streaming", Method::Streaming),
    ];
}
impl Named for PoolKind {
    const OPTIONS: &'static [(&'static str, Self)] = &[
        ("none", PoolKind::None),
        ("avg", PoolKind::Avg),
        ("max", PoolKind::Max),
    ];
}
impl Named for IndexChoice {
    const OPTIONS: &'static [(&'static str, Self)] =
        &[("list", IndexChoice::List), ("mask", IndexChoice::Mask)];
}
impl Named for KeepChoice {
    const OPTIONS: &'static [(&'static str, Self)] = &[
        ("fraction", KeepChoice::Fraction),
        ("tokens", KeepChoice::Tokens),
    ];
}
impl Named for Scope {
    const OPTIONS: &'static [(&'static str, Self)] = &[
        ("layer", Scope::Layer),
        ("kv-head", Scope::KvHead),
        ("query-head", Scope::QueryHead),
    ];
}
impl Named for Embed {
    const OPTIONS: &'static [(&'static str, Self)] = &[
        ("quant", Embed::Quant),
        ("select", Embed::Select),
        ("budget", Embed::Budget),
        ("compare", Embed::Compare),
        ("together", Embed::Together),
        ("model", Embed::Model),
    ];
}

/// One repair made while parsing a query: the key, the value given and what was used instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateWarning {
    /// The URL key.
    pub key: String,
    /// A human-readable message naming the value and the valid range ([`Repair::english`]).
    pub message: String,
    /// What the message says, as fields (the page words them in its own language).
    pub repair: Box<Repair>,
}

/// What was wrong with a value and what is used instead, as fields: the page words them in its
/// language, and [`Repair::english`] is the English message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Repair {
    /// An integer outside `lo..=hi`: `used` (the nearest in range) instead.
    OutOfRange {
        /// The value as given.
        raw: String,
        /// Lowest allowed.
        lo: String,
        /// Highest allowed.
        hi: String,
        /// What is used instead.
        used: String,
    },
    /// Not a number: the default is used.
    NotANumber {
        /// The value as given.
        raw: String,
        /// Lowest allowed.
        lo: String,
        /// Highest allowed.
        hi: String,
    },
    /// Not one of `options`: the default is used.
    NotOneOf {
        /// The value as given.
        raw: String,
        /// The allowed values.
        options: Vec<String>,
    },
    /// Not a known model preset nor `custom`: the default is used.
    UnknownModel {
        /// The value as given.
        raw: String,
    },
    /// An even value where an odd one in `lo..=hi` is needed: `used` (the next odd) instead.
    Even {
        /// The value given.
        value: usize,
        /// Lowest allowed.
        lo: usize,
        /// Highest allowed.
        hi: usize,
        /// What is used instead.
        used: usize,
    },
    /// More than another setting (`what`, whose value is `limit`) allows: `limit` is used.
    AtMost {
        /// The value given.
        value: usize,
        /// The setting it may not exceed (`tokens`, `steps`, `channels`), or `64 Mi / tokens`
        /// (a generated matrix holds at most 64 Mi values).
        what: String,
        /// That setting's value.
        limit: usize,
    },
    /// Not below another setting (`what`, whose value is `bound`): `used` instead.
    Below {
        /// The value given.
        value: usize,
        /// The setting it must stay below (`steps`).
        what: String,
        /// That setting's value.
        bound: usize,
        /// What is used instead.
        used: usize,
    },
}

impl Repair {
    /// The English message for `key`; with `repaired`, what is used instead too (a check that
    /// repairs nothing leaves that out).
    ///
    /// ```
    /// use kvlab::state::Repair;
    /// let r = Repair::NotOneOf { raw: "x".into(), options: vec!["sym".into(), "asym".into()] };
    /// assert_eq!(r.english("scheme", true), "scheme 'x' is not one of sym, asym; the default is used");
    /// assert_eq!(r.english("scheme", false), "scheme 'x' is not one of sym, asym");
    /// ```
    pub fn english(&self, key: &str, repaired: bool) -> String {
        let (said, used) = match self {
            Repair::OutOfRange { raw, lo, hi, used } => (
                format!(
                    "{key} {raw} is out of range: must be a whole number between {lo} and {hi}"
                ),
                Some(used.clone()),
            ),
            Repair::NotANumber { raw, lo, hi } => (
                format!(
                    "{key} '{raw}' is not a number: must be a whole number between {lo} and {hi}"
                ),
                None,
            ),
            Repair::NotOneOf { raw, options } => (
                format!("{key} '{raw}' is not one of {}", options.join(", ")),
                None,
            ),
            Repair::UnknownModel { raw } => (
                format!("{key} '{raw}' is not a known preset or 'custom'"),
                None,
            ),
            Repair::Even {
                value,
                lo,
                hi,
                used,
            } => (
                format!("{key} {value} is even: must be an odd number between {lo} and {hi}"),
                Some(used.to_string()),
            ),
            Repair::AtMost { value, what, limit } => (
                format!("{key} {value} is out of range: must be at most {what} ({limit})"),
                Some(limit.to_string()),
            ),
            Repair::Below {
                value,
                what,
                bound,
                used,
            } => (
                format!("{key} {value} is out of range: must be below {what} ({bound})"),
                Some(used.to_string()),
            ),
        };
        match (repaired, used) {
            (false, _) => said,
            (true, Some(used)) => format!("{said}; {used} is used"),
            (true, None) => format!("{said}; the default is used"),
        }
    }
}

/// A parsed query: the settings plus what was repaired.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Parsed {
    /// The settings, every field within its range.
    pub settings: Settings,
    /// Repairs made, in query order.
    pub warnings: Vec<StateWarning>,
}

/// A model preset as the page lists it: its URL slug and its config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelPreset {
    /// [`model_slug`] of the name.
    pub slug: String,
    /// The config (its fields flattened beside the slug).
    #[serde(flatten)]
    pub model: crate::budget::ModelConfig,
}

impl ModelPreset {
    /// Every preset of [`crate::budget::ModelConfig::presets`], in order.
    pub fn all() -> Vec<ModelPreset> {
        crate::budget::ModelConfig::presets()
            .into_iter()
            .map(|model| ModelPreset {
                slug: model_slug(&model.name),
                model,
            })
            .collect()
    }
}

/// The URL slug of a model preset name: lowercase, runs of other characters become `-`.
pub fn model_slug(name: &str) -> String {
    let mut out = String::new();
    for ch in name.chars() {
        if ch.is_ascii_alphanumeric() || ch == '.' {
            out.push(ch.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// Decodes `%XX` escapes and `+` (as space); invalid escapes are kept literally and invalid
/// UTF-8 is replaced, so decoding never fails.
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' if i + 2 < b.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 3;
                    }
                    _ => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for &c in s.as_bytes() {
        if c.is_ascii_alphanumeric() || b"-._~".contains(&c) {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

/// A bound one setting sets another: the parser checks every one of them after every key is
/// read ([`Settings::from_query`]), and the page's controls follow them (`www/fields.js`).
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    /// The bounded setting.
    pub key: &'static str,
    /// The setting whose value bounds it.
    pub by: &'static str,
    /// How its largest value follows from that value.
    pub limit: Limit,
    /// What a message calls the limit ([`Limit::what`] of `by`, written out in the row: the
    /// page's module then carries no formatting for it).
    pub what: &'static str,
}

/// The bounds between settings, written once: each row `key by by, limit` (a limit that is not
/// `by` itself says its words last, checked against [`Limit::what`]) makes a [`Bound`] of
/// [`BOUNDS`] and a step of [`follow_bounds`], which the parser runs; the row marked `[auto]` is
/// a setting that is `auto` or a number, whose bound the lab checks (not followed here). The
/// steps are written out rather than read from the table at run time: the page's module then
/// carries no table of pointers (it compressed 0.5 kB worse).
macro_rules! bounds {
    ($($key:ident by $by:ident, $limit:expr $(, $what:literal)?;)+
     [auto] $akey:ident by $aby:ident, $alimit:expr;) => {
        /// The bounds between settings, in the order the parser applies them (a bound applied
        /// first may lower the setting a later one reads: S is capped by T before w and the
        /// future by S). The data's shape bounds the selection (B and r at most T, w at most S,
        /// SnapKV's kernel at most `2 T + 1`) and the generator's own counts (S at most T; S and
        /// d at most 64 Mi / T, the values a generated matrix holds; the outlier and skewed
        /// channels at most d). The channel shown is below d too, but it is `auto` or a number,
        /// not a count: the lab refuses one the data lacks (a link's is replaced by `auto`, said
        /// with the lab's words), and the page's control goes back to `auto`.
        pub const BOUNDS: [Bound; 11] = [
            $(Bound {
                key: stringify!($key),
                by: stringify!($by),
                limit: $limit,
                what: bound_what!($by $($what)?),
            },)+
            Bound {
                key: stringify!($akey),
                by: stringify!($aby),
                limit: $alimit,
                what: stringify!($aby),
            },
        ];

        /// Follows every count's bound of [`BOUNDS`] in `s`, in order: a value above its limit
        /// is used at it, and said (`said(key)`: the query gave it).
        fn follow_bounds(s: &mut Settings, p: &mut Parser, said: &dyn Fn(&str) -> bool) {
            $(
                let by = s.$by as u64;
                follow_bound(p, said, stringify!($key), $limit, bound_what!($by $($what)?), &mut s.$key, by);
            )+
        }
    };
}

/// A [`Bound`]'s words for its limit: the bounding setting's name, or the row's own.
macro_rules! bound_what {
    ($by:ident) => {
        stringify!($by)
    };
    ($by:ident $what:literal) => {
        $what
    };
}

/// How a [`Bound`]'s largest allowed value follows from the value `v` of the setting that sets
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// At most `v`.
    AtMost,
    /// Below `v`: at most `v - 1`.
    Below,
    /// At most `2 v + 1` (SnapKV's odd pooling kernel over `v` tokens).
    TwicePlusOne,
    /// At most `n / v`, rounded down (a matrix of `v` rows holds at most `n` values).
    Share(u64),
}

impl Limit {
    /// The largest allowed value when the bounding setting is `v`.
    ///
    /// ```
    /// use kvlab::state::Limit;
    /// assert_eq!(Limit::Below.of(64), 63);
    /// assert_eq!(Limit::TwicePlusOne.of(3), 7);
    /// assert_eq!(Limit::Share(1 << 26).of(131_072), 512);
    /// ```
    pub fn of(self, v: u64) -> u64 {
        match self {
            Limit::AtMost => v,
            Limit::Below => v.saturating_sub(1),
            Limit::TwicePlusOne => v.saturating_mul(2).saturating_add(1),
            Limit::Share(n) => n / v.max(1),
        }
    }

    /// How a message names the limit set by `by`: `tokens`, `2 x tokens + 1`, `64 Mi / tokens`.
    pub fn what(self, by: &str) -> String {
        match self {
            Limit::AtMost | Limit::Below => by.to_string(),
            Limit::TwicePlusOne => format!("2 x {by} + 1"),
            Limit::Share(n) if n % (1 << 20) == 0 => format!("{} Mi / {by}", n >> 20),
            Limit::Share(n) => format!("{n} / {by}"),
        }
    }
}

/// One step of [`follow_bounds`]: `value` (setting `key`) above `limit`'s largest value when
/// the bounding setting is `by` is used at it, said as an [`Repair::AtMost`] (a [`Repair::Below`]
/// for [`Limit::Below`]) naming the limit as `what`.
fn follow_bound(
    p: &mut Parser,
    said: &dyn Fn(&str) -> bool,
    key: &str,
    limit: Limit,
    what: &str,
    value: &mut usize,
    by: u64,
) {
    let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    let most = limit.of(by);
    if *value as u64 <= most {
        return;
    }
    if said(key) {
        let repair = match limit {
            Limit::Below => Repair::Below {
                value: *value,
                what: what.to_string(),
                bound: size(by),
                used: size(most),
            },
            Limit::AtMost | Limit::TwicePlusOne | Limit::Share(_) => Repair::AtMost {
                value: *value,
                what: what.to_string(),
                limit: size(most),
            },
        };
        p.warn(key, repair);
    }
    *value = size(most);
}

bounds! {
    steps by tokens, Limit::AtMost;
    steps by tokens, Limit::Share(MAX_ELEMENTS), "64 Mi / tokens";
    channels by tokens, Limit::Share(MAX_ELEMENTS), "64 Mi / tokens";
    future by steps, Limit::Below;
    budget by tokens, Limit::AtMost;
    kernel by tokens, Limit::TwicePlusOne, "2 x tokens + 1";
    recent by tokens, Limit::AtMost;
    window by steps, Limit::AtMost;
    outliers by channels, Limit::AtMost;
    skewed by channels, Limit::AtMost;
    [auto] channel by channels, Limit::Below;
}

/// The settings a section shown alone (`?embed=`) depends on, besides the data's (every
/// setting whose change recomputes the section, by the table's "affects" column; section 4's
/// `R_overall` and levers are computed on the data's breakdown: the settings that change both
/// the budget and the quantization or the selection, and the index kind). The page states
/// them in the embedded section (`www/fields.js`'s `EMBED_KEYS`), so a link's "these bits" are
/// said. (Written for the page alone: the page's module carries none of it.)
///
/// ```
/// use kvlab::state::{embed_keys, Embed};
/// assert!(embed_keys(Embed::Together).contains(&"bits"));
/// assert!(embed_keys(Embed::Together).contains(&"index"));
/// assert!(!embed_keys(Embed::Together).contains(&"context"));
/// assert!(embed_keys(Embed::Budget).contains(&"context"));
/// ```
pub fn embed_keys(embed: Embed) -> Vec<&'static str> {
    let section = match embed {
        Embed::Quant => Section::Quant,
        Embed::Select => Section::Select,
        Embed::Budget => Section::Budget,
        Embed::Compare => Section::Compare,
        Embed::Model => Section::Model,
        Embed::Together => Section::Budget,
    };
    fields()
        .into_iter()
        .filter(|f| match f.affects {
            Affects::Only(s) if embed == Embed::Together => {
                f.key == "index"
                    || (s.contains(&section)
                        && (s.contains(&Section::Quant) || s.contains(&Section::Select)))
            }
            Affects::Only(s) => s.contains(&section),
            Affects::Data | Affects::Page => false,
        })
        .map(|f| f.key)
        .collect()
}

/// A bound a method sets that the others do not: `(method, key, by)`, `key` at most `by`
/// while `method` is used. StreamingLLM keeps its `sinks` within the budget `B`
/// (`select::streaming_llm` refuses more sinks than `B`); H2O and SnapKV read no sinks, so B
/// may go below them there. On a switch to the method the page brings the setting down to its
/// bound and says so beside it (`www/fields.js`'s `METHOD_BOUNDS`), so a switch never lands on a
/// value the new method refuses. (Written for the page alone: the page's module carries none
/// of it.)
pub const METHOD_BOUNDS: &[(Method, &str, &str)] = &[(Method::Streaming, "sinks", "budget")];

/// The fewest bits `scheme` takes ([`QuantConfig::bits_range`]): 2 symmetric, 1 asymmetric.
/// The parser raises bits below it to it (a [`Repair::OutOfRange`] of the scheme's range),
/// and the page's bits follow a scheme change the same way (`www/fields.js`'s `LEAST_BITS`).
///
/// ```
/// use kvlab::quant::Scheme;
/// use kvlab::state::{least_bits, Settings};
/// assert_eq!(least_bits(Scheme::Symmetric), 2);
/// let p = Settings::from_query("bits=1");
/// assert_eq!(p.settings.bits, 2);
/// assert_eq!(p.warnings[0].message, "bits 1 is out of range: must be a whole number between 2 and 16; 2 is used");
/// assert_eq!(Settings::from_query("bits=1&scheme=asym").settings.bits, 1);
/// ```
pub fn least_bits(scheme: Scheme) -> u8 {
    *QuantConfig::bits_range(scheme).start()
}

/// Upper bound of the bits control.
pub const MAX_BITS: u8 = 16;
/// Upper bound of `T`.
pub const MAX_TOKENS: usize = 131_072;
/// Upper bound of `S`.
pub const MAX_STEPS: usize = 4096;
/// Upper bound of `d`.
pub const MAX_CHANNELS: usize = 1024;

struct Parser {
    warnings: Vec<StateWarning>,
}

impl Parser {
    fn warn(&mut self, key: &str, repair: Repair) {
        self.warnings.push(StateWarning {
            key: key.to_string(),
            message: repair.english(key, true),
            repair: Box::new(repair),
        });
    }

    /// An integer setting in `lo..=hi`, repaired with a message when outside it or not one.
    fn int<T>(&mut self, key: &str, raw: &str, lo: T, hi: T) -> Option<T>
    where
        T: Copy + TryFrom<i128>,
        i128: TryFrom<T>,
    {
        let bound = |v: T| i128::try_from(v).unwrap_or(0);
        self.int_in(key, raw, bound(lo), bound(hi))
            .and_then(|v| T::try_from(v).ok())
    }

    /// [`Parser::int`] for every integer type at once (one copy in the page's module).
    fn int_in(&mut self, key: &str, raw: &str, lo: i128, hi: i128) -> Option<i128> {
        // Whole numbers are read exactly (an f64 would silently round 2^53 + 1).
        let out_of_range = |used: i128| Repair::OutOfRange {
            raw: raw.to_string(),
            lo: lo.to_string(),
            hi: hi.to_string(),
            used: used.to_string(),
        };
        if let Ok(n) = raw.trim().parse::<i128>() {
            let r = n.clamp(lo, hi);
            if r != n {
                self.warn(key, out_of_range(r));
            }
            return Some(r);
        }
        let parsed = raw.trim().parse::<f64>().ok().filter(|v| v.is_finite());
        let Some(v) = parsed else {
            self.warn(
                key,
                Repair::NotANumber {
                    raw: raw.to_string(),
                    lo: lo.to_string(),
                    hi: hi.to_string(),
                },
            );
            return None;
        };
        let r = v.round().clamp(lo as f64, hi as f64) as i128;
        if (r as f64) != v {
            self.warn(key, out_of_range(r));
        }
        Some(r)
    }

    fn choice<T: Copy>(&mut self, key: &str, raw: &str, options: &[(&str, T)]) -> Option<T> {
        if let Some((_, v)) = options.iter().find(|(n, _)| *n == raw) {
            return Some(*v);
        }
        self.warn(
            key,
            Repair::NotOneOf {
                raw: raw.to_string(),
                options: options.iter().map(|(n, _)| n.to_string()).collect(),
            },
        );
        None
    }
}

fn name_of<T: PartialEq + Copy>(options: &[(&'static str, T)], v: T) -> &'static str {
    options
        .iter()
        .find(|(_, x)| *x == v)
        .map_or("", |(n, _)| *n)
}

impl Settings {
    /// Parses a URL query (with or without the leading `?`). Never fails; see the module docs.
    ///
    /// ```
    /// use kvlab::state::Settings;
    /// let p = Settings::from_query("?bits=3&budget=64&bits_typo=1");
    /// assert_eq!(p.settings.bits, 3);
    /// assert_eq!(p.settings.budget, 64);
    /// let p = Settings::from_query("bits=99");
    /// assert_eq!(p.settings.bits, 16);
    /// assert_eq!(p.warnings[0].message, "bits 99 is out of range: must be a whole number between 1 and 16; 16 is used");
    /// ```
    pub fn from_query(query: &str) -> Parsed {
        Settings::parse(query, false)
    }

    /// [`Settings::from_query`]; with `every_key_given`, a value another setting bounds is
    /// reported when repaired also if the query left it out (its default was out of range).
    /// Without, such a default follows its bound silently, as the page's controls do (a link
    /// `?tokens=100` is not told about the default B = 128 it lowers).
    fn parse(query: &str, every_key_given: bool) -> Parsed {
        let mut given: Vec<String> = Vec::new();
        let mut s = Settings::default();
        let mut p = Parser {
            warnings: Vec::new(),
        };
        let query = query.strip_prefix('?').unwrap_or(query);
        // Bound the work a hostile link can cause.
        for pair in query.split('&').take(256) {
            if pair.is_empty() {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let key = percent_decode(k);
            given.push(key.clone());
            let raw: String = percent_decode(v).chars().take(200).collect();
            let raw = raw.as_str();
            s.read_key(&mut p, &key, raw);
        }
        let said = |key: &str| every_key_given || given.iter().any(|g| g == key);
        // (a bound on a setting that is not a count, the channel shown, is the lab's: see BOUNDS)
        follow_bounds(&mut s, &mut p, &said);
        // The bits from the scheme's fewest (1 bit only asymmetric): out of the scheme's range,
        // a repair as any other.
        let least = least_bits(s.scheme);
        if s.bits < least {
            if said("bits") {
                p.warn(
                    "bits",
                    Repair::OutOfRange {
                        raw: s.bits.to_string(),
                        lo: least.to_string(),
                        hi: MAX_BITS.to_string(),
                        used: least.to_string(),
                    },
                );
            }
            s.bits = least;
        }
        Parsed {
            settings: s,
            warnings: p.warnings,
        }
    }

    /// Settings sent whole as a query string (the page sends its settings object this way,
    /// `engine.js`'s `asQuery`): the same parse as a link's, but a value a link would have
    /// repaired is refused instead. The error names the key, the value and the valid range.
    /// Keys left out keep their defaults.
    ///
    /// ```
    /// use kvlab::state::Settings;
    /// assert_eq!(Settings::checked("bits=3&scheme=asymmetric").unwrap().bits, 3);
    /// let e = Settings::checked("seed=-5").unwrap_err();
    /// assert_eq!(e.key, "seed");
    /// assert_eq!(e.message, "seed -5 is out of range: must be a whole number between 0 and 9007199254740992");
    /// let e = Settings::checked("tokens=64&steps=600").unwrap_err();
    /// assert_eq!(e.message, "steps 600 is out of range: must be at most tokens (64)");
    /// ```
    pub fn checked(query: &str) -> Result<Settings, StateWarning> {
        let p = Settings::parse(query, true);
        match p.warnings.into_iter().next() {
            None => Ok(p.settings),
            Some(mut w) => {
                // A check reports; it does not repair: no "; X is used" tail.
                w.message = w.repair.english(&w.key, false);
                Err(w)
            }
        }
    }

    /// Checks every field against its range (the same ranges [`Settings::from_query`]
    /// enforces), for settings built in Rust. The error is [`Settings::checked`]'s.
    ///
    /// ```
    /// use kvlab::state::Settings;
    /// assert!(Settings::default().validate().is_ok());
    /// let bad = Settings { context: 0, ..Settings::default() };
    /// let e = bad.validate().unwrap_err();
    /// assert_eq!(e.key, "context");
    /// assert_eq!(e.message, "context 0 is out of range: must be a whole number between 1 and 4194304");
    /// ```
    pub fn validate(&self) -> Result<(), StateWarning> {
        Settings::checked(&self.to_query()).map(|_| ())
    }

    /// The query string (without `?`) holding every value that differs from the default, in a
    /// fixed key order. `from_query(to_query(s)) == s` for every in-range `s`.
    pub fn to_query(&self) -> String {
        let out = self.written(&Settings::default());
        let mut query = String::new();
        for (k, v) in out {
            if !query.is_empty() {
                query.push('&');
            }
            query.push_str(k);
            query.push('=');
            match v {
                Written::N(n) => query.push_str(&n.to_string()),
                Written::S(s) => query.push_str(&percent_encode(s)),
            }
        }
        query
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bound_words_its_limit_as_the_limit_does() {
        for b in &BOUNDS {
            assert_eq!(b.what, b.limit.what(b.by), "{} by {}", b.key, b.by);
        }
    }

    #[test]
    fn link_keys_are_not_settings() {
        let settings: Vec<&str> = fields().iter().map(|f| f.key).collect();
        for k in LINK_KEYS {
            assert!(!settings.contains(&k.key), "{} is a setting", k.key);
            let p = Settings::from_query(&format!("{}=1", k.key));
            assert_eq!(p, Settings::from_query(""), "{} is read", k.key);
        }
    }

    #[test]
    fn a_link_is_told_of_the_bounded_values_it_gave_not_of_defaults_that_follow() {
        // Lowering T or d takes the defaults it bounds along, as the page's controls do.
        for (q, key) in [
            ("tokens=100", "budget"),
            ("channels=2", "outliers"),
            ("steps=8", "future"),
        ] {
            let p = Settings::from_query(q);
            assert_eq!(p.warnings, [], "{q}");
            assert_eq!(
                Settings::checked(q).map(|_| ()).unwrap_err().key,
                key,
                "{q}: sent whole, refused"
            );
        }
        let p = Settings::from_query("tokens=100");
        assert_eq!((p.settings.budget, p.settings.recent), (100, 32));
        assert_eq!(Settings::from_query("channels=2").settings.outliers, 2);
        assert_eq!(Settings::from_query("steps=8").settings.future, 7);
        // A value the link gave is repaired with its message.
        let p = Settings::from_query("tokens=100&budget=128&channels=2&outliers=4");
        let said: Vec<_> = p.warnings.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(
            said,
            [
                "budget 128 is out of range: must be at most tokens (100); 100 is used",
                "outliers 4 is out of range: must be at most channels (2); 2 is used",
            ]
        );
    }

    #[test]
    fn long_option_names_read_as_their_tokens() {
        // (the page's settings objects hold serde's names; links the short tokens)
        for (q, scheme, granularity) in [
            (
                "scheme=asymmetric&granularity=per-token",
                Scheme::Asymmetric,
                Granularity::PerToken,
            ),
            (
                "scheme=asym&granularity=token",
                Scheme::Asymmetric,
                Granularity::PerToken,
            ),
            (
                "scheme=symmetric&granularity=per-tensor",
                Scheme::Symmetric,
                Granularity::PerTensor,
            ),
            (
                "granularity=per-channel",
                Scheme::Symmetric,
                Granularity::PerChannel,
            ),
        ] {
            let s = Settings::checked(q).unwrap_or_else(|w| panic!("{q}: {}", w.message));
            assert_eq!((s.scheme, s.granularity), (scheme, granularity), "{q}");
        }
        // Each long name is its serde name, and links keep the short tokens.
        for v in [Scheme::Symmetric, Scheme::Asymmetric] {
            assert_eq!(serde_json::to_value(v).unwrap(), v.name());
        }
        for v in [
            Granularity::PerChannel,
            Granularity::PerToken,
            Granularity::PerTensor,
        ] {
            assert_eq!(serde_json::to_value(v).unwrap(), v.name());
        }
        let s = Settings::checked("scheme=asymmetric&granularity=per-token").unwrap();
        assert_eq!(s.to_query(), "scheme=asym&granularity=token");
        // An unknown name is refused with the short tokens as the options.
        let w = Settings::checked("scheme=asymetric").unwrap_err();
        assert_eq!(w.message, "scheme 'asymetric' is not one of sym, asym");
    }

    #[test]
    fn every_repair_kind_says_its_message_and_carries_its_fields() {
        // One link hitting each kind (the page words each `kind`: i18n's `repair.<kind>`).
        let p = Settings::from_query(
            "bits=99&seed=x&scheme=odd&model=gpt-9&kernel=4&tokens=64&steps=100&future=80&budget=600",
        );
        let by_key = |k: &str| {
            p.warnings
                .iter()
                .find(|w| w.key == k)
                .unwrap_or_else(|| panic!("no warning for {k}: {:?}", p.warnings))
        };
        let cases = [
            ("bits", "outOfRange", "bits 99 is out of range: must be a whole number between 1 and 16; 16 is used"),
            ("seed", "notANumber", "seed 'x' is not a number: must be a whole number between 0 and 9007199254740992; the default is used"),
            ("scheme", "notOneOf", "scheme 'odd' is not one of sym, asym; the default is used"),
            ("model", "unknownModel", "model 'gpt-9' is not a known preset or 'custom'; the default is used"),
            ("kernel", "even", "kernel 4 is even: must be an odd number between 1 and 63; 5 is used"),
            ("steps", "atMost", "steps 100 is out of range: must be at most tokens (64); 64 is used"),
            ("future", "below", "future 80 is out of range: must be below steps (64); 63 is used"),
            ("budget", "atMost", "budget 600 is out of range: must be at most tokens (64); 64 is used"),
        ];
        for (key, kind, message) in cases {
            let w = by_key(key);
            assert_eq!(w.message, message);
            assert_eq!(w.repair.english(key, true), w.message);
            let fields = serde_json::to_value(&w.repair).expect("serialize");
            assert_eq!(fields["kind"], kind, "{key}");
        }
        // A check names the value and the range, and repairs nothing.
        let e = Settings {
            bits: 0,
            ..Settings::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(
            e.message,
            "bits 0 is out of range: must be a whole number between 1 and 16"
        );
        assert_eq!(e.message, e.repair.english("bits", false));
    }

    #[test]
    fn steps_and_channels_are_bounded_by_64_mi_values_per_generated_matrix() {
        // S x T and T x d hold at most 64 Mi values: at T = 131072, S and d at most 512.
        let p = Settings::from_query("tokens=131072&steps=2048&channels=1024");
        assert_eq!((p.settings.steps, p.settings.channels), (512, 512));
        let messages: Vec<&str> = p.warnings.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "steps 2048 is out of range: must be at most 64 Mi / tokens (512); 512 is used",
                "channels 1024 is out of range: must be at most 64 Mi / tokens (512); 512 is used",
            ]
        );
        assert_eq!(p.warnings[0].key, "steps");
        // At the bound exactly: nothing to say; below T = 16384 the bound is above the ranges.
        let p = Settings::from_query("tokens=65536&steps=1024&channels=1024");
        assert_eq!(
            (p.settings.steps, p.settings.channels, p.warnings.len()),
            (1024, 1024, 0)
        );
        let p = Settings::from_query("tokens=16384&steps=4096&channels=1024");
        assert_eq!(
            (p.settings.steps, p.settings.channels, p.warnings.len()),
            (4096, 1024, 0)
        );
        // The page's settings are refused, not repaired; a default that follows the bound (the
        // link did not set it) follows it silently, and what depends on steps follows it.
        let e = Settings::checked("tokens=131072&channels=1024").unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.message.as_str()),
            (
                "channels",
                "channels 1024 is out of range: must be at most 64 Mi / tokens (512)"
            )
        );
        let p = Settings::from_query("tokens=131072&steps=4096&window=1000");
        assert_eq!((p.settings.steps, p.settings.window), (512, 512));
        assert_eq!(crate::synth::MAX_ELEMENTS, 64 * 1024 * 1024);
    }

    #[test]
    fn the_pooling_kernel_is_bounded_by_the_tokens() {
        // SnapKV pools with stride 1 and padding k / 2: k at most 2 T + 1. The default k = 7
        // follows T = 2 silently; a kernel the link gave is said.
        let p = Settings::from_query("tokens=2&method=snapkv&bits=3");
        assert_eq!((p.settings.kernel, p.settings.bits), (5, 3));
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        let p = Settings::from_query("tokens=1&kernel=9");
        assert_eq!(p.settings.kernel, 3);
        assert_eq!(
            p.warnings[0].message,
            "kernel 9 is out of range: must be at most 2 x tokens + 1 (3); 3 is used"
        );
        assert_eq!(Settings::from_query("tokens=3").settings.kernel, 7);
    }

    /// `docs/settings.md` is the table's reference, so a new setting or range reaches it.
    #[test]
    fn the_settings_reference_in_docs_is_the_tables() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/settings.md");
        let want = reference();
        if std::env::var_os("KVLAB_BLESS").is_some() {
            std::fs::write(&path, &want).expect("docs/settings.md written");
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "docs/settings.md is not the table's reference: run \
             `KVLAB_BLESS=1 cargo test --lib settings_reference` and commit it"
        );
    }

    #[test]
    fn every_row_of_the_table_reads_its_default_and_its_bounds() {
        for f in fields() {
            let (lo, hi) = match f.rule {
                Rule::Int(lo, hi) | Rule::Odd(lo, hi) | Rule::AutoOr(lo, hi) => (lo, hi),
                _ => continue,
            };
            for v in [lo, hi] {
                let v = if matches!(f.rule, Rule::Odd(..)) && v % 2 == 0 {
                    v + 1
                } else {
                    v
                };
                let p = Settings::parse(&format!("{}={v}", f.key), false);
                let repaired: Vec<_> = p.warnings.iter().filter(|w| w.key == f.key).collect();
                // (a bound another setting sets may move it: said as AtMost or Below, or the
                // bits out of the scheme's range)
                assert!(
                    repaired.iter().all(|w| matches!(
                        (f.key, &*w.repair),
                        (_, Repair::AtMost { .. } | Repair::Below { .. })
                            | ("bits", Repair::OutOfRange { .. })
                    )),
                    "{}={v}: {repaired:?}",
                    f.key
                );
            }
            let p = Settings::parse(&format!("{}={}", f.key, hi + 1), false);
            assert!(
                p.warnings
                    .iter()
                    .any(|w| w.key == f.key && matches!(*w.repair, Repair::OutOfRange { .. })),
                "{} above {hi} is repaired",
                f.key
            );
        }
    }

    #[test]
    fn defaults_round_trip_to_an_empty_query() {
        let d = Settings::default();
        assert_eq!(d.to_query(), "");
        assert_eq!(Settings::from_query("").settings, d);
    }

    #[test]
    fn every_field_round_trips() {
        let s = Settings {
            pattern: AttentionPreset::Needle,
            seed: 1 << 53,
            tokens: 4096,
            steps: 100,
            channels: 128,
            outliers: 0,
            skewed: 3,
            bits: 2,
            scheme: Scheme::Asymmetric,
            granularity: Granularity::PerToken,
            group: 32,
            tensor: KvPick::V,
            channel: Some(5),
            meta: MetaDtype::F32,
            method: Method::Snapkv,
            budget: 1000,
            recent: 0,
            window: 32,
            pool: PoolKind::Avg,
            kernel: 5,
            sinks: 0,
            future: 7,
            kivi_kbits: 3,
            kivi_vbits: 4,
            kivi_group: 64,
            kivi_residual: 0,
            heads_budget: HeadBudget::Mass,
            decoding: Decoding::Sample,
            memory_gib: 24,
            model: "custom".into(),
            layers: 3,
            kv_heads: 2,
            head_dim: 256,
            q_heads: 6,
            sliding_layers: 2,
            sliding_window: 1024,
            mla_latent: 512,
            mla_rope: 64,
            fp_bytes: 4,
            context: 1 << 20,
            batch: 8,
            index: IndexChoice::Mask,
            keep: KeepChoice::Tokens,
            scope: Scope::QueryHead,
            lang: "zh".into(),
            embed: Some(Embed::Model),
        };
        let q = s.to_query();
        let p = Settings::from_query(&q);
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        assert_eq!(p.settings, s);
    }

    #[test]
    fn garbage_is_repaired_with_a_message() {
        let p = Settings::from_query(
            "?bits=NaN&budget=-5&tokens=1e99&method=magic&kernel=4&steps=9999&%ZZ=1&seed=&lang=fr",
        );
        let s = &p.settings;
        assert_eq!(s.bits, 4);
        assert_eq!(s.budget, 1);
        assert_eq!(s.tokens, MAX_TOKENS);
        assert_eq!(s.method, Method::H2o);
        assert_eq!(s.kernel, 5);
        // (steps: first into its range, then to what 64 Mi values allow at T = 131072)
        assert_eq!(s.steps, 512);
        assert_eq!(s.lang, "en");
        let keys: Vec<&str> = p.warnings.iter().map(|w| w.key.as_str()).collect();
        assert_eq!(
            keys,
            ["bits", "budget", "tokens", "method", "kernel", "steps", "seed", "lang", "steps"]
        );
        assert_eq!(
            p.warnings[3].message,
            "method 'magic' is not one of h2o, snapkv, streaming; the default is used"
        );
    }

    #[test]
    fn steps_never_exceed_tokens_and_models_are_known() {
        let p = Settings::from_query("tokens=16&steps=64&model=llama-2-7b");
        assert_eq!(p.settings.steps, 16);
        assert_eq!(p.settings.model, "llama-2-7b");
        let p = Settings::from_query("model=gpt-5");
        assert_eq!(p.settings.model, "llama-3-8b");
        assert_eq!(model_slug("DeepSeek-V2 (MLA)"), "deepseek-v2-mla");
        assert_eq!(model_slug("Qwen2.5-7B"), "qwen2.5-7b");
    }

    #[test]
    fn whole_numbers_are_read_exactly() {
        // 2^53 + 1 is not an f64: it must be refused with a message, not silently rounded.
        let p = Settings::from_query("seed=9007199254740993");
        assert_eq!(p.settings.seed, 1 << 53);
        assert_eq!(p.warnings.len(), 1);
        let s = Settings {
            seed: (1 << 53) + 1,
            ..Settings::default()
        };
        assert_eq!(s.validate().unwrap_err().key, "seed");
        assert_eq!(
            Settings::from_query("seed=12345678901").settings.seed,
            12_345_678_901
        );
    }

    #[test]
    fn percent_decoding_never_fails() {
        assert_eq!(percent_decode("a%20b+c"), "a b c");
        assert_eq!(percent_decode("%"), "%");
        assert_eq!(percent_decode("%4"), "%4");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%FF"), "\u{FFFD}");
        assert_eq!(percent_decode("..%2f"), "../");
    }
}
