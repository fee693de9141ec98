//! The page's state: every control, the generator settings and the seed, as one plain struct
//! that round-trips through a URL query string (TensorFlow Playground's `state.ts` idea).
//!
//! Parsing never fails and never panics: unknown keys are ignored, a value that does not parse
//! falls back to its default, and a number outside its range is clamped; each such repair is
//! reported as a [`StateWarning`] naming the key, the value and the valid range, so the page can
//! say what it changed. Only values that differ from the defaults are written back, so links
//! stay short. Ranges that depend on the loaded data (`budget <= T`) are checked later by the
//! computations themselves, which return errors the page shows next to the control.

use crate::quant::{Granularity, MetaDtype, Scheme};
use crate::synth::{AttentionPreset, MAX_ELEMENTS};
use serde::{Deserialize, Serialize};

/// Which section the page shows alone in embed mode
/// (`?embed=budget|quant|select|compare|together`).
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

/// Every control of the page. Field names are the URL keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Attention pattern of the generator.
    pub pattern: AttentionPreset,
    /// Generator seed, `0..=2^53` (exact in JavaScript numbers).
    pub seed: u64,
    /// Tokens `T`, `1..=131072`.
    pub tokens: usize,
    /// Attention rows (decode steps) `S`, `1..=4096` and at most `T`.
    pub steps: usize,
    /// Channels `d`, `1..=1024`.
    pub channels: usize,
    /// Outlier channels of the generated keys, `0..=1024` and at most `d`.
    pub outliers: usize,
    /// All-positive (skewed) channels of the generated KV, `0..=1024` and at most `d`.
    pub skewed: usize,
    /// Bit width `b`, `1..=16` (symmetric needs 2 or more).
    pub bits: u8,
    /// Symmetric or asymmetric.
    pub scheme: Scheme,
    /// Per-channel, per-token or per-tensor.
    pub granularity: Granularity,
    /// Group size, `0` = none, else `1..=65536` (and at most the grouped axis).
    pub group: usize,
    /// Which tensor is quantized and shown.
    pub tensor: KvPick,
    /// The channel whose histogram is drawn; `None` = the one with the largest `max|x|`.
    pub channel: Option<usize>,
    /// Scale / zero-point dtype.
    pub meta: MetaDtype,
    /// Selection method.
    pub method: Method,
    /// Budget `B`, `1..=131072` (and at most `T`).
    pub budget: usize,
    /// Recent window `r`, `0..=131072`.
    pub recent: usize,
    /// SnapKV observation window `w`, `1..=4096` (and at most `S`).
    pub window: usize,
    /// SnapKV pooling.
    pub pool: PoolKind,
    /// SnapKV pooling kernel, odd, `1..=63`.
    pub kernel: usize,
    /// StreamingLLM sinks, `0..=1024` (and at most `B`).
    pub sinks: usize,
    /// Steps held out as "the future" for the policy comparison: policies see the first
    /// `S - future` rows, quality is measured on the last `future` (the oracle's upper bound);
    /// `0` = every policy sees and is judged on all rows. `0..=4095`, below `S`.
    pub future: usize,
    /// KIVI key bits, `1..=16`.
    pub kivi_kbits: u8,
    /// KIVI value bits, `1..=16`.
    pub kivi_vbits: u8,
    /// KIVI group size (tokens per key group, channels per value group), `1..=4096`.
    pub kivi_group: usize,
    /// KIVI full-precision residual window R (most recent tokens), `0..=131072`.
    pub kivi_residual: usize,
    /// GPU memory for the "context that fits" figure, GiB, `1..=4096`.
    pub memory_gib: u64,
    /// Model preset slug (see [`crate::budget::ModelConfig::presets`]) or `custom`.
    pub model: String,
    /// Custom model: layers `1..=1024`.
    pub layers: u64,
    /// Custom model: KV heads `1..=1024`.
    pub kv_heads: u64,
    /// Custom model: head dimension `1..=4096`.
    pub head_dim: u64,
    /// Custom model: bytes per full-precision element, 1, 2 or 4.
    pub fp_bytes: u64,
    /// Context length for the model extrapolation, `1..=4194304` tokens.
    pub context: u64,
    /// Batch size, `1..=1024`.
    pub batch: u64,
    /// Index kind for `M_index`.
    pub index: IndexChoice,
    /// How the kept tokens follow the context in the extrapolation (`keep=fraction|tokens`).
    pub keep: KeepChoice,
    /// Which heads share a kept set (model extrapolation).
    pub scope: Scope,
    /// Page language, `en` or `zh`.
    pub lang: String,
    /// Embed one section alone.
    pub embed: Option<Embed>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            pattern: AttentionPreset::HeavyHitters,
            seed: 1,
            tokens: 512,
            steps: 64,
            channels: 64,
            outliers: 4,
            skewed: 0,
            bits: 4,
            scheme: Scheme::Symmetric,
            granularity: Granularity::PerChannel,
            group: 0,
            tensor: KvPick::K,
            channel: None,
            meta: MetaDtype::F16,
            method: Method::H2o,
            budget: 128,
            recent: 32,
            window: 16,
            pool: PoolKind::Max,
            kernel: 7,
            sinks: 4,
            future: 16,
            kivi_kbits: 2,
            kivi_vbits: 2,
            kivi_group: 32,
            kivi_residual: 128,
            memory_gib: 80,
            model: "llama-3-8b".into(),
            layers: 32,
            kv_heads: 8,
            head_dim: 128,
            fp_bytes: 2,
            context: 32768,
            batch: 1,
            index: IndexChoice::List,
            keep: KeepChoice::Fraction,
            scope: Scope::KvHead,
            lang: "en".into(),
            embed: None,
        }
    }
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

    /// Caps `value` (setting `key`) at `limit`, a bound another setting sets (`what`): said
    /// when the query gave `key` (`said`), followed silently when it did not.
    fn cap(&mut self, said: bool, key: &str, value: &mut usize, limit: usize, what: &str) {
        if *value > limit {
            if said {
                self.warn(
                    key,
                    Repair::AtMost {
                        value: *value,
                        what: what.into(),
                        limit,
                    },
                );
            }
            *value = limit;
        }
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

const PATTERNS: [(&str, AttentionPreset); 4] = [
    ("sink-local", AttentionPreset::SinkLocal),
    ("heavy-hitters", AttentionPreset::HeavyHitters),
    ("uniform", AttentionPreset::Uniform),
    ("needle", AttentionPreset::Needle),
];
const SCHEMES: [(&str, Scheme); 2] = [("sym", Scheme::Symmetric), ("asym", Scheme::Asymmetric)];
const GRANULARITIES: [(&str, Granularity); 3] = [
    ("channel", Granularity::PerChannel),
    ("token", Granularity::PerToken),
    ("tensor", Granularity::PerTensor),
];
const TENSORS: [(&str, KvPick); 2] = [("k", KvPick::K), ("v", KvPick::V)];
const METAS: [(&str, MetaDtype); 2] = [("f16", MetaDtype::F16), ("f32", MetaDtype::F32)];
const METHODS: [(&str, Method); 3] = [
    ("h2o", Method::H2o),
    ("snapkv", Method::Snapkv),
    ("streaming", Method::Streaming),
];
const POOLS: [(&str, PoolKind); 3] = [
    ("none", PoolKind::None),
    ("avg", PoolKind::Avg),
    ("max", PoolKind::Max),
];
const INDEXES: [(&str, IndexChoice); 2] =
    [("list", IndexChoice::List), ("mask", IndexChoice::Mask)];
const KEEPS: [(&str, KeepChoice); 2] = [
    ("fraction", KeepChoice::Fraction),
    ("tokens", KeepChoice::Tokens),
];
const SCOPES: [(&str, Scope); 3] = [
    ("layer", Scope::Layer),
    ("kv-head", Scope::KvHead),
    ("query-head", Scope::QueryHead),
];
const LANGS: [(&str, &str); 2] = [("en", "en"), ("zh", "zh")];
const EMBEDS: [(&str, Embed); 5] = [
    ("quant", Embed::Quant),
    ("select", Embed::Select),
    ("budget", Embed::Budget),
    ("compare", Embed::Compare),
    ("together", Embed::Together),
];

/// The URL token of `raw` when `raw` is an option's long name (its serde name, which the
/// page's settings objects hold: `symmetric` for `sym`, `per-channel` for `channel`), else
/// `raw`. Links keep the short tokens; both read the same.
fn long_name<'a, T: Copy>(
    raw: &'a str,
    options: &[(&'static str, T)],
    long: impl Fn(T) -> &'static str,
) -> &'a str {
    options
        .iter()
        .find(|(_, v)| long(*v) == raw)
        .map_or(raw, |(n, _)| *n)
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
            match key.as_str() {
                "pattern" => {
                    if let Some(v) = p.choice("pattern", raw, &PATTERNS) {
                        s.pattern = v;
                    }
                }
                "seed" => {
                    if let Some(v) = p.int("seed", raw, 0u64, 1u64 << 53) {
                        s.seed = v;
                    }
                }
                "tokens" => {
                    if let Some(v) = p.int("tokens", raw, 1usize, MAX_TOKENS) {
                        s.tokens = v;
                    }
                }
                "steps" => {
                    if let Some(v) = p.int("steps", raw, 1usize, MAX_STEPS) {
                        s.steps = v;
                    }
                }
                "channels" => {
                    if let Some(v) = p.int("channels", raw, 1usize, MAX_CHANNELS) {
                        s.channels = v;
                    }
                }
                "outliers" => {
                    if let Some(v) = p.int("outliers", raw, 0usize, MAX_CHANNELS) {
                        s.outliers = v;
                    }
                }
                "skewed" => {
                    if let Some(v) = p.int("skewed", raw, 0usize, MAX_CHANNELS) {
                        s.skewed = v;
                    }
                }
                "bits" => {
                    if let Some(v) = p.int("bits", raw, 1u8, MAX_BITS) {
                        s.bits = v;
                    }
                }
                "scheme" => {
                    let raw = long_name(raw, &SCHEMES, |v| v.name());
                    if let Some(v) = p.choice("scheme", raw, &SCHEMES) {
                        s.scheme = v;
                    }
                }
                "granularity" => {
                    let raw = long_name(raw, &GRANULARITIES, |v| v.name());
                    if let Some(v) = p.choice("granularity", raw, &GRANULARITIES) {
                        s.granularity = v;
                    }
                }
                "group" => {
                    if let Some(v) = p.int("group", raw, 0usize, 65536) {
                        s.group = v;
                    }
                }
                "tensor" => {
                    if let Some(v) = p.choice("tensor", raw, &TENSORS) {
                        s.tensor = v;
                    }
                }
                "channel" => {
                    if raw == "auto" {
                        s.channel = None;
                    } else if let Some(v) = p.int("channel", raw, 0usize, MAX_CHANNELS - 1) {
                        s.channel = Some(v);
                    }
                }
                "meta" => {
                    if let Some(v) = p.choice("meta", raw, &METAS) {
                        s.meta = v;
                    }
                }
                "method" => {
                    if let Some(v) = p.choice("method", raw, &METHODS) {
                        s.method = v;
                    }
                }
                "budget" => {
                    if let Some(v) = p.int("budget", raw, 1usize, MAX_TOKENS) {
                        s.budget = v;
                    }
                }
                "recent" => {
                    if let Some(v) = p.int("recent", raw, 0usize, MAX_TOKENS) {
                        s.recent = v;
                    }
                }
                "window" => {
                    if let Some(v) = p.int("window", raw, 1usize, MAX_STEPS) {
                        s.window = v;
                    }
                }
                "pool" => {
                    if let Some(v) = p.choice("pool", raw, &POOLS) {
                        s.pool = v;
                    }
                }
                "kernel" => {
                    if let Some(v) = p.int("kernel", raw, 1usize, 63) {
                        if v % 2 == 0 {
                            p.warn(
                                "kernel",
                                Repair::Even {
                                    value: v,
                                    lo: 1,
                                    hi: 63,
                                    used: v + 1,
                                },
                            );
                            s.kernel = v + 1;
                        } else {
                            s.kernel = v;
                        }
                    }
                }
                "sinks" => {
                    if let Some(v) = p.int("sinks", raw, 0usize, 1024) {
                        s.sinks = v;
                    }
                }
                "kivi_kbits" => {
                    if let Some(v) = p.int("kivi_kbits", raw, 1u8, 16) {
                        s.kivi_kbits = v;
                    }
                }
                "kivi_vbits" => {
                    if let Some(v) = p.int("kivi_vbits", raw, 1u8, 16) {
                        s.kivi_vbits = v;
                    }
                }
                "kivi_group" => {
                    if let Some(v) = p.int("kivi_group", raw, 1usize, 4096) {
                        s.kivi_group = v;
                    }
                }
                "kivi_residual" => {
                    if let Some(v) = p.int("kivi_residual", raw, 0usize, MAX_TOKENS) {
                        s.kivi_residual = v;
                    }
                }
                "memory_gib" => {
                    if let Some(v) = p.int("memory_gib", raw, 1u64, 4096) {
                        s.memory_gib = v;
                    }
                }
                "future" => {
                    if let Some(v) = p.int("future", raw, 0usize, MAX_STEPS - 1) {
                        s.future = v;
                    }
                }
                "model" => {
                    let known = raw == "custom"
                        || crate::budget::ModelConfig::presets()
                            .iter()
                            .any(|m| model_slug(&m.name) == raw);
                    if known {
                        s.model = raw.to_string();
                    } else {
                        p.warn(
                            "model",
                            Repair::UnknownModel {
                                raw: raw.to_string(),
                            },
                        );
                    }
                }
                "layers" => {
                    if let Some(v) = p.int("layers", raw, 1u64, 1024) {
                        s.layers = v;
                    }
                }
                "kv_heads" => {
                    if let Some(v) = p.int("kv_heads", raw, 1u64, 1024) {
                        s.kv_heads = v;
                    }
                }
                "head_dim" => {
                    if let Some(v) = p.int("head_dim", raw, 1u64, 4096) {
                        s.head_dim = v;
                    }
                }
                "fp_bytes" => {
                    if let Some(v) = p.choice("fp_bytes", raw, &[("1", 1u64), ("2", 2), ("4", 4)]) {
                        s.fp_bytes = v;
                    }
                }
                "context" => {
                    if let Some(v) = p.int("context", raw, 1u64, 1 << 22) {
                        s.context = v;
                    }
                }
                "batch" => {
                    if let Some(v) = p.int("batch", raw, 1u64, 1024) {
                        s.batch = v;
                    }
                }
                "keep" => {
                    if let Some(v) = p.choice("keep", raw, &KEEPS) {
                        s.keep = v;
                    }
                }
                "index" => {
                    if let Some(v) = p.choice("index", raw, &INDEXES) {
                        s.index = v;
                    }
                }
                "scope" => {
                    if let Some(v) = p.choice("scope", raw, &SCOPES) {
                        s.scope = v;
                    }
                }
                "lang" => {
                    if let Some(v) = p.choice("lang", raw, &LANGS) {
                        s.lang = v.to_string();
                    }
                }
                "embed" => {
                    if let Some(v) = p.choice("embed", raw, &EMBEDS) {
                        s.embed = Some(v);
                    }
                }
                _ => {} // unknown keys are ignored (other tools may add their own)
            }
        }
        let said = |key: &str| every_key_given || given.iter().any(|g| g == key);
        p.cap(said("steps"), "steps", &mut s.steps, s.tokens, "tokens");
        // Generated data holds at most MAX_ELEMENTS values per matrix: the attention S x T and
        // the keys and values T x d. Steps and channels are bounded by T (as steps is by T above).
        let per_token =
            usize::try_from(MAX_ELEMENTS / s.tokens.max(1) as u64).unwrap_or(usize::MAX);
        for (key, value) in [("steps", &mut s.steps), ("channels", &mut s.channels)] {
            p.cap(said(key), key, value, per_token, "64 Mi / tokens");
        }
        if s.future >= s.steps {
            let limit = s.steps - 1;
            if said("future") {
                p.warn(
                    "future",
                    Repair::Below {
                        value: s.future,
                        what: "steps".into(),
                        bound: s.steps,
                        used: limit,
                    },
                );
            }
            s.future = limit;
        }
        // Cross-field ranges of generated data: B and r at most T, w at most S, the outlier
        // and skewed channels at most d; SnapKV's pooling kernel at most 2 T + 1 (odd, as the
        // kernel must be; the selection refuses a wider one).
        for (key, value, limit, what) in [
            ("budget", &mut s.budget, s.tokens, "tokens"),
            ("kernel", &mut s.kernel, 2 * s.tokens + 1, "2 x tokens + 1"),
            ("recent", &mut s.recent, s.tokens, "tokens"),
            ("window", &mut s.window, s.steps, "steps"),
            ("outliers", &mut s.outliers, s.channels, "channels"),
            ("skewed", &mut s.skewed, s.channels, "channels"),
        ] {
            p.cap(said(key), key, value, limit, what);
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
        /// A value as the query writes it: a number, or a name (percent-encoded).
        enum V<'a> {
            N(u64),
            S(&'a str),
        }
        let d = Settings::default();
        let mut out: Vec<(&str, V)> = Vec::new();
        // (every number through one u64, not one formatter per field and type: the page's
        // module carries this function)
        macro_rules! num {
            ($field:ident) => {
                if self.$field != d.$field {
                    out.push((stringify!($field), V::N(self.$field as u64)));
                }
            };
        }
        macro_rules! pick {
            ($field:ident, $opts:expr) => {
                if self.$field != d.$field {
                    out.push((stringify!($field), V::S(name_of(&$opts, self.$field))));
                }
            };
        }
        pick!(pattern, PATTERNS);
        num!(seed);
        num!(tokens);
        num!(steps);
        num!(channels);
        num!(outliers);
        num!(skewed);
        num!(bits);
        pick!(scheme, SCHEMES);
        pick!(granularity, GRANULARITIES);
        num!(group);
        pick!(tensor, TENSORS);
        if let Some(c) = self.channel {
            out.push(("channel", V::N(c as u64)));
        }
        pick!(meta, METAS);
        pick!(method, METHODS);
        num!(budget);
        num!(recent);
        num!(window);
        pick!(pool, POOLS);
        num!(kernel);
        num!(sinks);
        num!(future);
        num!(kivi_kbits);
        num!(kivi_vbits);
        num!(kivi_group);
        num!(kivi_residual);
        num!(memory_gib);
        if self.model != d.model {
            out.push(("model", V::S(&self.model)));
        }
        num!(layers);
        num!(kv_heads);
        num!(head_dim);
        num!(fp_bytes);
        num!(context);
        num!(batch);
        pick!(index, INDEXES);
        pick!(keep, KEEPS);
        pick!(scope, SCOPES);
        if self.lang != d.lang {
            out.push(("lang", V::S(&self.lang)));
        }
        if let Some(e) = self.embed {
            out.push(("embed", V::S(name_of(&EMBEDS, e))));
        }
        let mut query = String::new();
        for (k, v) in out {
            if !query.is_empty() {
                query.push('&');
            }
            query.push_str(k);
            query.push('=');
            match v {
                V::N(n) => query.push_str(&n.to_string()),
                V::S(s) => query.push_str(&percent_encode(s)),
            }
        }
        query
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            memory_gib: 24,
            model: "custom".into(),
            layers: 3,
            kv_heads: 2,
            head_dim: 256,
            fp_bytes: 4,
            context: 1 << 20,
            batch: 8,
            index: IndexChoice::Mask,
            keep: KeepChoice::Tokens,
            scope: Scope::QueryHead,
            lang: "zh".into(),
            embed: Some(Embed::Select),
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
