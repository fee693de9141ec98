//! The data every section reads: generated from the settings or adopted from an upload,
//! and what the page says about it (section "Data").

use super::*;
use crate::state::Settings;
use crate::synth::{self, AttentionSpec, KvSpec};
use crate::upload::Chosen;
use crate::Matrix;
use serde::Serialize;

/// Where the data came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DataFigures {
    /// `T`.
    pub tokens: usize,
    /// `S`.
    pub steps: usize,
    /// `d`.
    pub channels: usize,
    /// True when generated from the settings (and so reproducible from the URL).
    pub generated: bool,
    /// A one-line description (generator settings or file shapes), in English.
    pub description: String,
    /// The generator's settings when the data is generated, or when an upload left parts to
    /// generate (`None` when every part was uploaded): what `description` says, as fields, so
    /// the page can say it in its own language.
    pub generator: Option<GeneratorFigures>,
    /// Which parts were uploaded, when any was.
    pub uploaded: Option<UploadedParts>,
}

/// The settings generated data was made with (see [`DataFigures::generator`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GeneratorFigures {
    /// The attention pattern's name ([`synth::AttentionPreset::name`]).
    pub pattern: &'static str,
    /// The seed.
    pub seed: u64,
    /// Key outlier channels (at most `d`).
    pub outlier_channels: usize,
    /// Skewed channels (at most `d`).
    pub skewed_channels: usize,
}

/// The data the sections work on.
#[derive(Debug, Clone, PartialEq)]
pub struct Data {
    /// Attention history `A`, `S x T`.
    pub attention: Matrix,
    /// Keys, `T x d`.
    pub keys: Matrix,
    /// Values, `T x d`.
    pub values: Matrix,
    /// The generator settings it came from, or `None` when uploaded.
    pub generated: Option<GenKey>,
    /// Which parts were uploaded (`None` when generated): the others were generated at the
    /// upload's `T` with [`Data::filled_with`]'s settings.
    pub uploaded: Option<UploadedParts>,
    /// The generator settings of the parts an upload did not give (`None` when generated, or
    /// when the upload gave every part).
    pub filled_with: Option<GenKey>,
    /// The prompt's token texts, one per token, when an upload gave them.
    pub tokens: Option<Vec<String>>,
    /// Description for the page.
    pub description: String,
}

/// Which parts of the data in use were uploaded (the rest is generated at their `T`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct UploadedParts {
    /// The attention `A`.
    pub attention: bool,
    /// The keys `K`.
    pub keys: bool,
    /// The values `V`.
    pub values: bool,
}

/// The settings that decide generated data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenKey {
    pub(super) pattern: synth::AttentionPreset,
    pub(super) seed: u64,
    pub(super) tokens: usize,
    pub(super) steps: usize,
    pub(super) channels: usize,
    pub(super) outliers: usize,
    pub(super) skewed: usize,
}

impl GenKey {
    pub(super) fn of(s: &Settings) -> Self {
        Self {
            pattern: s.pattern,
            seed: s.seed,
            tokens: s.tokens,
            steps: s.steps.min(s.tokens),
            channels: s.channels,
            outliers: s.outliers,
            skewed: s.skewed,
        }
    }
}

/// Generates the data the settings describe.
pub fn generate(s: &Settings) -> Result<Data, LabError> {
    let key = GenKey::of(s);
    let attention = synth::attention(&AttentionSpec::preset(
        key.pattern,
        key.steps,
        key.tokens,
        key.seed,
    ))?;
    let kv = KvSpec {
        tokens: key.tokens,
        channels: key.channels,
        seed: key.seed,
        // (at most d: the settings' checks say so)
        outlier_channels: key.outliers,
        skewed_channels: key.skewed,
        ..KvSpec::default()
    };
    let keys = synth::keys(&kv)?;
    let values = synth::values(&kv)?;
    let description = format!(
        "generated: {} attention S={} x T={}, K and V T={} x d={} ({} outlier channels, {} skewed), seed {}",
        key.pattern.name(),
        key.steps,
        key.tokens,
        key.tokens,
        key.channels,
        kv.outlier_channels,
        kv.skewed_channels,
        key.seed
    );
    Ok(Data {
        attention,
        keys,
        values,
        generated: Some(key),
        uploaded: None,
        filled_with: None,
        tokens: None,
        description,
    })
}

/// What an upload left to the generator, in English (`None` when it gave every part), e.g.
/// `generated: K and V T=50 x d=64 (4 outlier channels, 0 skewed), seed 42`.
pub(super) fn filled_english(uploaded: UploadedParts, key: &GenKey) -> Option<String> {
    use std::fmt::Write;
    let kv = match (uploaded.keys, uploaded.values) {
        (true, true) => "",
        (false, false) => "K and V",
        (false, true) => "K",
        (true, false) => "V",
    };
    if uploaded.attention && kv.is_empty() {
        return None;
    }
    // (one String written in place: this runs once per upload, and its code ships in the page)
    let mut out = String::from("generated: ");
    if !uploaded.attention {
        let _ = write!(
            out,
            "{} attention S={} x T={}{}",
            key.pattern.name(),
            key.steps,
            key.tokens,
            if kv.is_empty() { "" } else { "; " }
        );
    }
    if !kv.is_empty() {
        let _ = write!(out, "{kv} T={} x d={} (", key.tokens, key.channels);
        // (V is generated without outlier channels: only K's count is said when K is)
        if !uploaded.keys {
            let _ = write!(
                out,
                "{} outlier channels, {} skewed)",
                key.outliers, key.skewed
            );
        } else {
            let _ = write!(out, "{} skewed channels)", key.skewed);
        }
    }
    let _ = write!(out, ", seed {}", key.seed);
    Some(out)
}

/// A new identity for data put into a lab (see [`Lab::data_id`]).
pub(super) fn next_data_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Lab {
    /// Reads an uploaded file and keeps its tensors for [`Lab::use_uploaded`]; the data in use
    /// does not change. Returns what the file holds. (See [`Uploads::load`].)
    pub fn load_file(&mut self, name: &str, bytes: &[u8]) -> Result<FileSummary, LabError> {
        Ok(self.uploads.load(name, bytes)?)
    }

    /// Uses uploaded tensors: `attention` (`[S,T]`, `[T,T]` or `[H,S,T]` with `head`),
    /// `keys` and optionally `values` (`[T,d]`, `[H,T,d]`, `[L,H,T,d]` with `layer`/`head`).
    /// Without values, the keys stand in for them. Checks that `T` agrees. On error the data
    /// in use stays.
    pub fn use_uploaded(&mut self, choice: &UploadChoice) -> Result<UseSummary, LabError> {
        self.use_uploaded_with_progress(choice, &mut |_| {})
    }

    /// [`Lab::use_uploaded`] with progress reports (see [`Stage`]).
    pub fn use_uploaded_with_progress(
        &mut self,
        choice: &UploadChoice,
        progress: &mut dyn FnMut(Stage),
    ) -> Result<UseSummary, LabError> {
        progress(Stage::Data);
        let chosen = self.uploads.choose(choice)?;
        self.adopt(chosen, progress)
    }

    /// Makes tensors chosen from uploads ([`Uploads::choose`]) the data in use: the settings keep
    /// everything that still fits the new shape (B, the window, the group size and the channel
    /// are clamped to it). On error the data in use stays. The page calls this with what its
    /// upload module chose.
    pub fn use_chosen(&mut self, chosen: Chosen) -> Result<UseSummary, LabError> {
        self.use_chosen_with_progress(chosen, &mut |_| {})
    }

    /// [`Lab::use_chosen`] with progress reports (see [`Stage`]).
    pub fn use_chosen_with_progress(
        &mut self,
        chosen: Chosen,
        progress: &mut dyn FnMut(Stage),
    ) -> Result<UseSummary, LabError> {
        progress(Stage::Data);
        self.adopt(chosen, progress)
    }

    /// The data stage after its reading part: `chosen` in use, with what it does not give
    /// generated at its `T` from the current generator settings; every view computed anew.
    pub(super) fn adopt(
        &mut self,
        chosen: Chosen,
        progress: &mut dyn FnMut(Stage),
    ) -> Result<UseSummary, LabError> {
        let t = chosen.tokens();
        let (attention, keys, values, tokens, uploaded_text, warnings) = chosen.into_parts();
        let uploaded = UploadedParts {
            attention: attention.is_some(),
            keys: keys.is_some(),
            values: values.is_some(),
        };
        let mut s = self.settings.clone();
        s.tokens = t;
        // A generated part keeps the generator's S and d where the upload does not fix them,
        // bounded as a link's are (S <= T, and at most 64 Mi values a matrix).
        let per_row = usize::try_from(synth::MAX_ELEMENTS / t.max(1) as u64).unwrap_or(usize::MAX);
        s.steps = attention
            .as_ref()
            .map_or(s.steps.min(t).min(per_row).max(1), Matrix::rows);
        s.channels = keys
            .as_ref()
            .or(values.as_ref())
            .map_or(s.channels.min(per_row).max(1), Matrix::cols);
        // (what the data's shape bounds follows it: the page sends these settings back)
        s.budget = s.budget.min(s.tokens);
        s.recent = s.recent.min(s.tokens);
        s.kernel = s.kernel.min(2 * s.tokens + 1);
        s.outliers = s.outliers.min(s.channels);
        s.skewed = s.skewed.min(s.channels);
        s.window = s.window.min(s.steps);
        s.future = s.future.min(s.steps - 1);
        s.channel = s.channel.filter(|&c| c < s.channels);
        s.group = if s.group > 0 && s.group <= s.tokens.min(s.channels) {
            s.group
        } else {
            0
        };
        let fill = GenKey::of(&s);
        let kv_spec = KvSpec {
            tokens: t,
            channels: s.channels,
            seed: s.seed,
            outlier_channels: s.outliers,
            skewed_channels: s.skewed,
            ..KvSpec::default()
        };
        // (what `generate` makes at this shape, for the parts not uploaded)
        let attention = match attention {
            Some(a) => a,
            None => synth::attention(&AttentionSpec::preset(s.pattern, s.steps, t, s.seed))?,
        };
        let keys = match keys {
            Some(k) => k,
            None => synth::keys(&kv_spec)?,
        };
        let values = match values {
            Some(v) => v,
            None => synth::values(&kv_spec)?,
        };
        let description = match filled_english(uploaded, &fill) {
            Some(filled) => format!("{uploaded_text}; {filled}"),
            None => uploaded_text,
        };
        let all = uploaded.attention && uploaded.keys && uploaded.values;
        let data = Data {
            attention,
            keys,
            values,
            generated: None,
            uploaded: Some(uploaded),
            filled_with: (!all).then_some(fill),
            tokens,
            description: description.clone(),
        };
        let fresh = Lab::with_data(data, s, progress, false)?;
        let uploads = std::mem::take(&mut self.uploads);
        *self = Lab { uploads, ..fresh };
        Ok(UseSummary {
            description,
            warnings,
        })
    }

    /// Leaves uploaded data and goes back to data generated from the current settings.
    pub fn use_generated(&mut self, s: &Settings) -> Result<&Figures, LabError> {
        self.use_generated_with_progress(s, &mut |_| {})
    }

    /// [`Lab::use_generated`] with progress reports (see [`Stage`]).
    pub fn use_generated_with_progress(
        &mut self,
        s: &Settings,
        progress: &mut dyn FnMut(Stage),
    ) -> Result<&Figures, LabError> {
        let fresh = Lab::new_with_progress(s.clone(), progress)?;
        let uploads = std::mem::take(&mut self.uploads);
        *self = Lab { uploads, ..fresh };
        Ok(&self.figures)
    }
}

pub(super) fn data_figures(d: &Data) -> DataFigures {
    DataFigures {
        tokens: d.attention.cols(),
        steps: d.attention.rows(),
        channels: d.keys.cols(),
        generated: d.generated.is_some(),
        description: d.description.clone(),
        generator: d
            .generated
            .as_ref()
            .or(d.filled_with.as_ref())
            .map(|k| GeneratorFigures {
                pattern: k.pattern.name(),
                seed: k.seed,
                outlier_channels: k.outliers,
                skewed_channels: k.skewed,
            }),
        uploaded: d.uploaded,
    }
}
