//! Section 5, the real model under compression: what the page's settings ask of the model's
//! cache ([`model_specs`], which the upload module, where the model runs, calls on the page's
//! settings) and what came back to draw ([`ModelView`]).

use super::{accounting, policies_of, Lab};
use crate::kivi::KiviConfig;
use crate::lm::compress::{Allocation, CacheSpec, Keep, Sampling};
use crate::policy::Policy;
use crate::state::{Decoding, HeadBudget, Settings};

/// One compression of the model's cache, named for the page (`policy.{name}` texts).
#[derive(Debug, Clone, PartialEq)]
pub struct NamedSpec {
    /// A policy's name ([`Policy::name`]), `window-only` or `drop-first`.
    pub name: &'static str,
    /// The compression.
    pub spec: CacheSpec,
}

/// What the settings ask of the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpecs {
    /// The settings' own compression: section 2's quantization on K and V, section 3's method.
    pub current: CacheSpec,
    /// The method's policy name.
    pub policy: &'static str,
    /// Every policy at the same `B` and quantization, then the two that teach attention sinks:
    /// the recent window alone (no sinks) and the full cache less its first token (at full
    /// precision: what the token alone is worth).
    pub policies: Vec<NamedSpec>,
    /// How text is generated.
    pub sampling: Sampling,
    /// Section 2's KIVI settings, for the model's KIVI row (the value group is capped at a
    /// head's width where it is measured).
    pub kivi: KiviConfig,
}

/// The compressions section 5 measures for `s`.
pub fn model_specs(s: &Settings) -> ModelSpecs {
    let q = Some(accounting(s, s.bits));
    let with = |keep: Keep| CacheSpec {
        keys: q,
        values: q,
        keep,
        budget: s.budget,
        recent: s.recent,
        allocation: match s.heads_budget {
            HeadBudget::Uniform => Allocation::Uniform,
            HeadBudget::Mass => Allocation::ScoreMass,
        },
    };
    // (every policy as section 3b has it, but SnapKV's window not capped by section 3b's held
    // out rows: the model observes its whole prefill, and the core caps the window at it)
    let all = policies_of(s, usize::MAX);
    let name = s.method.policy();
    let policy = all
        .iter()
        .copied()
        .find(|p| p.name() == name)
        .unwrap_or(Policy::H2oSum);
    let mut policies: Vec<NamedSpec> = all
        .into_iter()
        .map(|p| NamedSpec {
            name: p.name(),
            spec: with(Keep::Policy { policy: p }),
        })
        .collect();
    policies.push(NamedSpec {
        name: "window-only",
        spec: with(Keep::Policy {
            policy: Policy::StreamingLlm { sinks: 0 },
        }),
    });
    // (at full precision: the row says what token 0 alone is worth, apart from the bits)
    policies.push(NamedSpec {
        name: "drop-first",
        spec: CacheSpec {
            keep: Keep::DropFirst,
            keys: None,
            values: None,
            ..with(Keep::All)
        },
    });
    ModelSpecs {
        current: with(Keep::Policy { policy }),
        policy: policy.name(),
        policies,
        sampling: Sampling {
            temperature: match s.decoding {
                Decoding::Greedy => 0.0,
                Decoding::Sample => 0.8,
            },
            seed: 1,
        },
        kivi: KiviConfig {
            key_bits: s.kivi_kbits,
            key_group: s.kivi_group.max(1),
            value_bits: s.kivi_vbits,
            value_group: s.kivi_group.max(1),
            residual: s.kivi_residual,
            meta: s.meta,
        },
    }
}

/// What the model's module measured, for the KL chart.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelView {
    /// Tokens `T` of the prompt, BOS included.
    pub tokens: usize,
    /// The prefill `P`.
    pub prefill: usize,
    /// KL at each evaluated position `P..T`, nats.
    pub kl: Vec<f64>,
    /// For each prefill token, the share of the shown heads that keep it (one head: 0 or 1).
    pub marks: Vec<f32>,
    /// The prefill cache's `R_overall` under the compression (fp16 bytes over compressed).
    pub r_overall: f64,
}

impl ModelView {
    /// The mean KL over the evaluated positions (0 with none).
    pub fn mean_kl(&self) -> f64 {
        if self.kl.is_empty() {
            0.0
        } else {
            self.kl.iter().sum::<f64>() / self.kl.len() as f64
        }
    }
}

/// One policy's curve on the model against the prefill cache's `R_overall`: `(R_overall,
/// mean KL)` over budgets on the trade-off, `(R_overall, share of facts recalled)` on the
/// needle test's accuracy.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCurve {
    /// The policy's name ([`Policy::name`] or `window-only`); on the accuracy, `full` (the
    /// full cache's level) and `current` (the current setting, one point) too.
    pub name: String,
    /// `(R_overall, y)`, one per budget.
    pub points: Vec<(f64, f64)>,
}

/// Which of the model's curves ([`Lab::set_model_sweep`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelCurves {
    /// Mean KL (section 3b's `model-tradeoff`).
    Kl = 0,
    /// Facts recalled (section 5's `needle`).
    Facts = 1,
}

impl Lab {
    /// Takes what the model's module measured for the current data.
    pub fn set_model_view(&mut self, view: ModelView) {
        self.model = Some((self.data_id(), view));
    }

    /// Takes the model's curves `which` measured so far for the current data and settings
    /// (the upload module's, a policy at a time; none: not measured yet).
    pub fn set_model_sweep(&mut self, which: ModelCurves, curves: Vec<ModelCurve>) {
        self.model_sweep[which as usize] = Some((self.data_id(), curves));
    }

    /// The model's curves `which`, while they belong to the data in use.
    pub fn model_sweep(&self, which: ModelCurves) -> &[ModelCurve] {
        match &self.model_sweep[which as usize] {
            Some((id, c)) if *id == self.data_id() => c,
            _ => &[],
        }
    }

    /// The model's measurements, while they belong to the data in use.
    pub fn model_view(&self) -> Option<&ModelView> {
        self.model
            .as_ref()
            .filter(|(id, _)| *id == self.data_id())
            .map(|(_, v)| v)
    }
}
