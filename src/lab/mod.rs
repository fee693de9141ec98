//! The page's model, in plain Rust: the loaded or generated data, the current settings, and
//! every number the page shows, recomputed only where a control changed something.
//!
//! `web` wraps a [`Lab`] for JavaScript; everything here is natively testable and
//! benchmarkable. [`Lab::update`] is transactional: on any error nothing changes, so the last
//! good view stays on screen, and the error says which control caused it ([`LabError::field`]).
//!
//! Dependencies between sections follow the note: bits never change the selection, B never
//! changes the quantization, and the budget (cheap) is always recomputed.

mod budget;
mod compare;
mod data;
mod export;
mod kivi;
mod model;
mod quant;
mod select;
mod together;
pub use budget::*;
pub use compare::*;
pub use data::*;
pub use export::*;
pub use kivi::*;
pub use model::*;
pub use quant::*;
pub use select::*;
pub use together::*;
#[cfg(test)]
mod tests;

use crate::budget::BudgetError;
use crate::io::{LoadError, TokenMismatch};
use crate::kivi::KiviConfig;
use crate::policy::PolicyError;
use crate::quant::{Granularity, QuantError};
use crate::select::SelectError;
use crate::state::{KvPick, Settings, StateWarning};
use crate::synth::SynthError;
use crate::upload::Uploads;
use serde::Serialize;
use std::sync::Arc;
use thiserror::Error;

/// Why an update was refused. [`LabError::field`] names the control to show it next to.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LabError {
    /// Generating data failed.
    #[error("{0}")]
    Synth(#[from] SynthError),
    /// Quantization was refused.
    #[error("{0}")]
    Quant(#[from] QuantError),
    /// Selection was refused; `field` is the control.
    #[error("{error}")]
    Select {
        /// The control.
        field: &'static str,
        /// The error.
        error: SelectError,
    },
    /// Budget accounting was refused.
    #[error("{0}")]
    Budget(#[from] BudgetError),
    /// A file could not be used: the [`LoadError`]'s message (or a [`TokenMismatch`]'s), made
    /// when the error is, so that a build which never reads a file (the page's module) does not
    /// carry every reader's message. (Shared: a comparison that failed hands its error to every
    /// policy, so it is cloned.)
    #[error("{0}")]
    Load(Arc<str>),
    /// A setting outside its absolute range (see [`Settings::validate`]).
    #[error("{message}")]
    Setting {
        /// The settings key.
        field: String,
        /// The message, naming the value and the range.
        message: String,
        /// What the message says, as fields (the page words them in its language).
        repair: Box<crate::state::Repair>,
    },
    /// The channel shown is not one of the data's `0..=max` (`max = d - 1`), e.g. from a link made
    /// for wider data.
    #[error("channel {channel} is out of range: must be between 0 and {max} (d - 1)")]
    Channel {
        /// The channel asked for.
        channel: usize,
        /// The data's last channel, `d - 1`.
        max: usize,
    },
    /// A parameter outside its data-dependent range.
    #[error("{message}")]
    Range {
        /// The control.
        field: &'static str,
        /// The message, naming the value and the range.
        message: String,
    },
}

impl From<LoadError> for LabError {
    fn from(e: LoadError) -> Self {
        LabError::Load(e.to_string().into())
    }
}

impl From<TokenMismatch> for LabError {
    fn from(e: TokenMismatch) -> Self {
        LabError::Load(e.to_string().into())
    }
}

impl LabError {
    /// The settings key of the control that caused the error (`"file"` for uploads).
    pub fn field(&self) -> &str {
        match self {
            LabError::Setting { field, .. } => field,
            LabError::Synth(_) => "tokens",
            LabError::Quant(QuantError::Bits { .. }) => "bits",
            LabError::Quant(QuantError::GroupSize { .. })
            | LabError::Quant(QuantError::GroupWithPerTensor { .. }) => "group",
            LabError::Quant(_) => "file",
            LabError::Select { field, .. } | LabError::Range { field, .. } => field,
            LabError::Channel { .. } => "channel",
            LabError::Budget(_) => "model",
            LabError::Load(_) => "file",
        }
    }
}

/// Everything the page shows as numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    /// The data.
    pub data: DataFigures,
    /// Section 2.
    pub quant: QuantFigures,
    /// Section 3.
    pub select: SelectFigures,
    /// Section 1.
    pub budget: BudgetFigures,
    /// Section 4.
    pub together: TogetherFigures,
    /// Policies side by side.
    pub compare: CompareFigures,
    /// KIVI-style mixed precision.
    pub kivi: KiviFigures,
    /// True while the policy comparison is not computed for these settings: `compare` holds
    /// empty placeholders (a staged lab, [`Lab::new_staged_with_progress`]) or the figures of
    /// earlier settings (an update that deferred it, [`Lab::update_deferring`]).
    /// [`Lab::complete_with_progress`] computes it.
    pub pending: bool,
    /// True while `kivi` holds placeholders (a staged lab not yet completed).
    pub kivi_pending: bool,
}

/// What an update may leave for [`Lab::complete_with_progress`] ([`Lab::update_deferring`]):
/// the page defers what is off screen while a control moves, and completes it once the controls
/// rest. Nothing by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Defer {
    /// The policy comparison, when the change makes it stale: its figures and charts keep the
    /// earlier settings' values and [`Figures::pending`] is true until
    /// [`Lab::complete_with_progress`] (or an update) computes it. At 64 x 4,096 a bits change
    /// spends about 80 % of its time there.
    pub comparison: bool,
    /// The levers' output errors ([`LeverErrors::Pending`]).
    pub levers: bool,
}

/// The cached entry when its key is `key`, else `make()` (then cached).
fn cached<K: PartialEq, V>(
    slot: &mut Option<(K, Arc<V>)>,
    key: K,
    make: impl FnOnce() -> V,
) -> Arc<V> {
    match slot {
        Some((k, v)) if *k == key => v.clone(),
        _ => {
            let v = Arc::new(make());
            *slot = Some((key, v.clone()));
            v
        }
    }
}

/// The page's model: data, settings and derived views.
#[derive(Debug, Clone)]
pub struct Lab {
    data: Data,
    settings: Settings,
    quant: QuantView,
    select: SelectView,
    compare: CompareView,
    kivi: (KiviConfig, KiviFigures),
    figures: Figures,
    uploads: Uploads,
    data_memo: DataMemo,
    compare_cache: CompareCache,
    select_cache: SelectCache,
    /// The quantization view last replaced: shown again when a control returns to it, else
    /// its buffers are filled by the next view.
    previous: Previous,
    data_id: u64,
    /// The comparison is not computed for the current settings (staged, or deferred).
    compare_pending: bool,
    /// KIVI is not computed (staged and not yet completed).
    kivi_pending: bool,
    /// The levers' output errors, with the settings they were computed for.
    levers: (LeverKey, LeverErrors),
    /// Section 5's measurements of the real model, with the data they were made on.
    model: Option<(u64, ModelView)>,
    /// The model's curves against `R_overall` ([`Lab::model_sweep`]: its KL, its facts
    /// recalled), each with the data it was measured on.
    model_sweep: [Option<(u64, Vec<ModelCurve>)>; 2],
}

/// A policy evaluation of the data itself that failed (it cannot on data the lab accepted:
/// attention and V are finite and share `T`), said as the data's error.
fn policy_error(e: PolicyError) -> LabError {
    LabError::Range {
        field: "file",
        message: e.to_string(),
    }
}

/// The stages of a recompute, in order, as reported to a progress callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Generating or reading the data.
    Data,
    /// Quantizing the chosen tensor and its statistics.
    Quantization,
    /// Scoring and selecting tokens.
    Selection,
    /// The byte breakdowns (cheap: recomputed on every update, reported only by a full compute).
    Budget,
    /// The policy comparison and its trade-off sweep.
    Compare,
    /// The KIVI panel.
    Kivi,
}

impl Stage {
    /// Every stage, in the order a full recompute runs them.
    pub const ALL: [Stage; 6] = [
        Stage::Data,
        Stage::Quantization,
        Stage::Selection,
        Stage::Budget,
        Stage::Compare,
        Stage::Kivi,
    ];

    /// The stage's key (`data`, `quantization`, ...), used by the page's text.
    pub fn key(self) -> &'static str {
        match self {
            Stage::Data => "data",
            Stage::Quantization => "quantization",
            Stage::Selection => "selection",
            Stage::Budget => "budget",
            Stage::Compare => "compare",
            Stage::Kivi => "kivi",
        }
    }
}

impl Lab {
    /// A lab on data generated from `settings`.
    pub fn new(settings: Settings) -> Result<Lab, LabError> {
        Lab::new_with_progress(settings, &mut |_| {})
    }

    /// [`Lab::new`], calling `progress` before each stage it computes (the page shows them).
    pub fn new_with_progress(
        settings: Settings,
        progress: &mut dyn FnMut(Stage),
    ) -> Result<Lab, LabError> {
        Lab::generated(settings, progress, false)
    }

    /// A lab on data generated from `settings` with every section but the policy comparison
    /// and KIVI, which are left as empty placeholders ([`Figures::pending`] is true) until
    /// [`Lab::complete_with_progress`] (or any [`Lab::update`]) computes them. The page draws
    /// its first screen from such a lab, then completes it. Once completed it equals
    /// [`Lab::new`] on the same settings.
    pub fn new_staged_with_progress(
        settings: Settings,
        progress: &mut dyn FnMut(Stage),
    ) -> Result<Lab, LabError> {
        Lab::generated(settings, progress, true)
    }

    /// A lab on data generated from `settings`; `staged` as in [`Lab::new_staged_with_progress`].
    fn generated(
        settings: Settings,
        progress: &mut dyn FnMut(Stage),
        staged: bool,
    ) -> Result<Lab, LabError> {
        check(&settings)?;
        progress(Stage::Data);
        let data = generate(&settings)?;
        Lab::with_data(data, settings, progress, staged)
    }

    /// Whether the comparison, KIVI or the bits lever's RMSE at one bit fewer still wait to be
    /// computed (see [`Lab::new_staged_with_progress`] and [`Lab::update_deferring`]).
    pub fn is_pending(&self) -> bool {
        self.compare_pending || self.kivi_pending || self.levers.1 == LeverErrors::Pending
    }

    /// Computes what a staged lab or a deferring update left out (the comparison, KIVI),
    /// calling `progress` before each; a lab that is not pending is returned as it is.
    pub fn complete_with_progress(
        &mut self,
        progress: &mut dyn FnMut(Stage),
    ) -> Result<&Figures, LabError> {
        if self.is_pending() {
            let s = self.settings.clone();
            self.apply(&s, progress, Defer::default())?;
        }
        Ok(&self.figures)
    }

    fn with_data(
        data: Data,
        settings: Settings,
        progress: &mut dyn FnMut(Stage),
        staged: bool,
    ) -> Result<Lab, LabError> {
        progress(Stage::Quantization);
        let mut data_memo = DataMemo::default();
        let quant = quant_view(&data, &settings, &mut data_memo, QuantBuffers::default())?;
        progress(Stage::Selection);
        let mut select_cache = SelectCache::default();
        let select = select_view(&data, &settings, &mut select_cache)?;
        progress(Stage::Budget);
        let budget = budget_figures(&data, &settings, select.selection.kept.len())?;
        // (A staged lab leaves the levers' errors for `complete` too.)
        let lever_errors = if staged {
            LeverErrors::Pending
        } else {
            lever_errors(&data, &settings, &select, &mut data_memo)?
        };
        let together = together(&data, &settings, lever_errors, &select, &budget)?;
        let lever_key = LeverKey::of(&settings);
        let mut compare_cache = CompareCache::default();
        let kivi_cfg = kivi_config(&settings, &data);
        let (compare, kivi) = if staged {
            (
                CompareView {
                    key: compare_key(&data, &settings, &quant),
                    curves: Vec::new(),
                    selections: Vec::new(),
                    figures: CompareFigures {
                        observed_rows: 0,
                        eval_rows: 0,
                        rows: Vec::new(),
                        output_error: false,
                    },
                },
                pending_kivi(kivi_cfg),
            )
        } else {
            progress(Stage::Compare);
            let compare = compare_view(&data, &settings, &quant, &mut compare_cache)?;
            progress(Stage::Kivi);
            (compare, kivi_figures(&data, &settings)?)
        };
        let figures = Figures {
            data: data_figures(&data),
            quant: quant.figures.clone(),
            select: select.figures.clone(),
            budget,
            together,
            compare: compare.figures.clone(),
            kivi: kivi.clone(),
            pending: staged,
            kivi_pending: staged,
        };
        Ok(Lab {
            data,
            settings,
            quant,
            select,
            compare,
            kivi: (kivi_cfg, kivi),
            figures,
            uploads: Uploads::new(),
            data_memo,
            compare_cache,
            select_cache,
            previous: Previous::default(),
            data_id: next_data_id(),
            compare_pending: staged,
            kivi_pending: staged,
            levers: (lever_key, lever_errors),
            model: None,
            model_sweep: [None, None],
        })
    }

    /// Applies `s`: regenerates data if its generator settings changed (and the data is
    /// generated), re-quantizes if a quantization control changed, re-selects if a selection
    /// control changed, and recomputes the budget. On error nothing changes.
    pub fn update(&mut self, s: &Settings) -> Result<&Figures, LabError> {
        self.update_with_progress(s, &mut |_| {})
    }

    /// [`Lab::update`], calling `progress` before each stage it recomputes (stages a change
    /// does not touch are not reported).
    pub fn update_with_progress(
        &mut self,
        s: &Settings,
        progress: &mut dyn FnMut(Stage),
    ) -> Result<&Figures, LabError> {
        self.apply(s, progress, Defer::default())
    }

    /// [`Lab::update_with_progress`] that leaves what `defer` names for
    /// [`Lab::complete_with_progress`] (see [`Defer`]), as the page does for what is off
    /// screen.
    pub fn update_deferring(
        &mut self,
        s: &Settings,
        progress: &mut dyn FnMut(Stage),
        defer: Defer,
    ) -> Result<&Figures, LabError> {
        self.apply(s, progress, defer)
    }

    /// The update: `defer` says what to leave pending when it would be recomputed.
    fn apply(
        &mut self,
        s: &Settings,
        progress: &mut dyn FnMut(Stage),
        defer: Defer,
    ) -> Result<&Figures, LabError> {
        check(s)?;
        let regenerate = match &self.data.generated {
            Some(key) => *key != GenKey::of(s),
            None => false,
        };
        let new_data = if regenerate {
            progress(Stage::Data);
            Some(generate(s)?)
        } else {
            None
        };
        let data = new_data.as_ref().unwrap_or(&self.data);
        let qkey = QuantKey {
            config: quant_config(s),
            tensor: s.tensor,
            channel: s.channel,
            meta: s.meta,
        };
        // Committed with the rest below: on an error the lab keeps its old memo.
        let mut data_memo = if regenerate {
            DataMemo::default()
        } else {
            self.data_memo.clone()
        };
        let new_quant = if regenerate || qkey != self.quant.key {
            // (On new data the previous view is never the one: it gives its buffers.)
            let data_id = (!regenerate).then_some(self.data_id);
            match self.previous.take(&qkey, data_id) {
                Ok(view) => Some(view),
                Err(spare) => {
                    progress(Stage::Quantization);
                    // On an error the buffers are dropped with it; the next change allocates
                    // anew.
                    Some(quant_view(data, s, &mut data_memo, spare)?)
                }
            }
        } else {
            None
        };
        let mut select_cache = if regenerate {
            SelectCache::default()
        } else {
            self.select_cache.clone()
        };
        let new_select = if regenerate || SelectKey::of(s) != self.select.key {
            progress(Stage::Selection);
            Some(select_view(data, s, &mut select_cache)?)
        } else {
            None
        };
        let quant = new_quant.as_ref().unwrap_or(&self.quant);
        let select = new_select.as_ref().unwrap_or(&self.select);
        // The levers' errors when stale or pending: computed now, unless this update defers them.
        let lever_key = LeverKey::of(s);
        let lever_errors =
            if regenerate || lever_key != self.levers.0 || self.levers.1 == LeverErrors::Pending {
                if defer.levers {
                    LeverErrors::Pending
                } else {
                    lever_errors(data, s, select, &mut data_memo)?
                }
            } else {
                self.levers.1
            };
        let budget = budget_figures(data, s, select.selection.kept.len())?;
        let together = together(data, s, lever_errors, select, &budget)?;
        let mut compare_cache = if regenerate {
            CompareCache::default()
        } else {
            self.compare_cache.clone()
        };
        let compare_stale =
            regenerate || self.compare_pending || compare_key(data, s, quant) != self.compare.key;
        let deferred = compare_stale && defer.comparison;
        let new_compare = if compare_stale && !defer.comparison {
            progress(Stage::Compare);
            Some(compare_view(data, s, quant, &mut compare_cache)?)
        } else {
            None
        };
        let compare = new_compare.as_ref().unwrap_or(&self.compare);
        // The x axis follows the quantization and the index kind even when the curves do not
        // (deferred curves keep the axis of the settings they were computed for).
        let curves = if deferred {
            None
        } else {
            let mut curves = compare.curves.clone();
            annotate(&mut curves, data, s)?;
            Some(curves)
        };
        let new_kivi = if regenerate || self.kivi_pending || kivi_config(s, data) != self.kivi.0 {
            progress(Stage::Kivi);
            Some((kivi_config(s, data), kivi_figures(data, s)?))
        } else {
            None
        };
        let kivi = new_kivi.as_ref().unwrap_or(&self.kivi);
        let figures = Figures {
            data: data_figures(data),
            quant: quant.figures.clone(),
            select: select.figures.clone(),
            budget,
            together,
            compare: compare.figures.clone(),
            kivi: kivi.1.clone(),
            pending: deferred,
            kivi_pending: false,
        };
        let view_data_id = self.data_id;
        if let Some(d) = new_data {
            self.data = d;
            self.data_id = next_data_id();
        }
        if let Some(q) = new_quant {
            let old = std::mem::replace(&mut self.quant, q);
            // Kept only while about the right size: after new, smaller data the old view's
            // buffers would pin memory the next view never fills.
            let needed = self.quant.abs_err.len();
            self.previous = if old.abs_err.capacity() <= 2 * needed.max(1) {
                Previous {
                    view: Some(old),
                    data_id: view_data_id,
                }
            } else {
                Previous::default()
            };
        }
        self.levers = (lever_key, lever_errors);
        if let Some(v) = new_select {
            self.select = v;
        }
        if let Some(c) = new_compare {
            self.compare = c;
        }
        if let Some(curves) = curves {
            self.compare.curves = curves;
        }
        self.compare_cache = compare_cache;
        self.select_cache = select_cache;
        if let Some(k) = new_kivi {
            self.kivi = k;
        }
        self.figures = figures;
        self.settings = s.clone();
        self.data_memo = data_memo;
        self.compare_pending = deferred;
        self.kivi_pending = false;
        Ok(&self.figures)
    }

    /// An identity of the data in use: it changes whenever the data does (new data, uploads,
    /// regeneration), and never repeats, so views derived from the data alone can be cached by it.
    pub fn data_id(&self) -> u64 {
        self.data_id
    }

    /// The values of the group section 2 shows ([`QuantFigures::group`]): a run of the shown
    /// channel, of token 0, or the whole tensor.
    pub fn shown_group_values(&self) -> &[f32] {
        match self.quant.key.config.granularity {
            Granularity::PerTensor => match self.quant.key.tensor {
                KvPick::K => self.data.keys.data(),
                KvPick::V => self.data.values.data(),
            },
            _ => &self.quant.group_values,
        }
    }

    /// The current figures.
    pub fn figures(&self) -> &Figures {
        &self.figures
    }

    /// The current data.
    pub fn data(&self) -> &Data {
        &self.data
    }

    /// The settings of the current view.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The quantization view.
    pub fn quant(&self) -> &QuantView {
        &self.quant
    }

    /// The selection view.
    pub fn select(&self) -> &SelectView {
        &self.select
    }

    /// The policy comparison and trade-off curves.
    pub fn compare(&self) -> &CompareView {
        &self.compare
    }
}

fn check(s: &Settings) -> Result<(), LabError> {
    s.validate().map_err(LabError::from)
}

impl From<StateWarning> for LabError {
    /// A setting refused by [`Settings::checked`] or [`Settings::validate`].
    fn from(w: StateWarning) -> Self {
        LabError::Setting {
            field: w.key,
            message: w.message,
            repair: w.repair,
        }
    }
}

pub use crate::upload::{FileSummary, TensorSummary, UploadChoice};

impl From<crate::upload::UploadError> for LabError {
    fn from(e: crate::upload::UploadError) -> Self {
        match e {
            crate::upload::UploadError::Load(e) => LabError::Load(e.to_string().into()),
            other => LabError::Range {
                field: "file",
                message: other.to_string(),
            },
        }
    }
}

impl From<crate::upload::ChosenError> for LabError {
    fn from(e: crate::upload::ChosenError) -> Self {
        match e {
            crate::upload::ChosenError::Tokens(m) => m.into(),
            crate::upload::ChosenError::Nothing => LabError::Range {
                field: "file",
                message: e.to_string(),
            },
        }
    }
}

/// The result of using uploaded tensors.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UseSummary {
    /// What is now in use.
    pub description: String,
    /// Warnings (rows not summing to 1, ...).
    pub warnings: Vec<String>,
}
