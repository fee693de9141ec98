//! Section 3b, the policy comparison: every policy at the same budget, the oracle's bound,
//! and the trade-off sweep over budgets.

use super::*;
use crate::policy::PolicyParams;
use crate::policy::{
    self, Evaluator, Policy, PolicyError, PolicyScores, QualityReport, SelectionScope, SweepCurve,
};
use crate::quant::{quantize, QuantConfig};
use crate::select::{Pooling, Selection};
use crate::state::{PoolKind, Settings};
use serde::Serialize;
use std::sync::Arc;

/// One policy's row of the comparison table (issue: beyond the note).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRow {
    /// Policy tag (`h2o-sum`, `h2o-mean`, `snapkv`, `streaming-llm`, `tova`, `random`, `oracle`).
    pub policy: &'static str,
    /// Quality on the evaluation rows, or the reason it could not be computed.
    pub quality: Option<QualityReport>,
    /// Why the policy could not run here (e.g. the oracle with no future rows).
    pub error: Option<String>,
}

/// The policy comparison at the current B and r.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompareFigures {
    /// Rows the policies see (`S - future`).
    pub observed_rows: usize,
    /// Rows the quality is measured on.
    pub eval_rows: usize,
    /// One row per policy.
    pub rows: Vec<PolicyRow>,
    /// Whether the output error was computed (it is skipped above [`OUTPUT_ERROR_MAX_WORK`]).
    pub output_error: bool,
}

/// The policy comparison and the trade-off sweep the charts draw.
#[derive(Debug, Clone)]
pub struct CompareView {
    pub(super) key: (SelectKey, Option<QuantConfig>, usize),
    /// Trade-off curves: one per policy, over budgets, mass retained vs `R_overall`.
    pub curves: Vec<SweepCurve>,
    /// The kept sets of each policy at the current B (for token strips).
    pub selections: Vec<(Policy, Option<Selection>)>,
    /// The figures.
    pub figures: CompareFigures,
}

pub(super) fn policies_of(s: &Settings, steps: usize) -> Vec<Policy> {
    let window = s.window.min(steps.saturating_sub(s.future)).max(1);
    Policy::each(&PolicyParams {
        window,
        pooling: match s.pool {
            PoolKind::None => Pooling::None,
            PoolKind::Avg => Pooling::Avg { kernel: s.kernel },
            PoolKind::Max => Pooling::Max { kernel: s.kernel },
        },
        sinks: s.sinks.min(s.budget),
        seed: s.seed,
    })
}

/// Budgets of the trade-off sweep: 32 points from 1 to `T`, spaced evenly in `log B`.
pub fn sweep_budgets(t: usize) -> Vec<usize> {
    let mut out: Vec<usize> = (0..32)
        .map(|i| {
            let f = i as f64 / 31.0;
            ((t as f64).powf(f).round() as usize).clamp(1, t)
        })
        .collect();
    out.dedup();
    out
}

/// Fills each sweep point's `R_overall` on the data with the current bits, scheme, groups and
/// index kind (cheap: redone on every update so the x axis follows the quantization).
pub(super) fn annotate(
    curves: &mut [SweepCurve],
    data: &Data,
    s: &Settings,
) -> Result<(), LabError> {
    let model = data_model(data);
    let t = data.attention.cols() as u64;
    let template = compression(s, t, s.budget.min(t as usize) as u64, s.bits);
    policy::annotate_r_overall(curves, &model, &template, SelectionScope::PerKvHead).map_err(|e| {
        LabError::Range {
            field: "future",
            message: e.to_string(),
        }
    })
}

/// What the comparison depends on: the selection controls, the future rows, and the
/// quantization only when the output error (which uses V at the current bits) is computed.
pub(super) fn compare_key(
    data: &Data,
    s: &Settings,
    quant: &QuantView,
) -> (SelectKey, Option<QuantConfig>, usize) {
    let a = &data.attention;
    let observed = a.rows() - s.future.min(a.rows() - 1);
    let eval = if observed < a.rows() {
        a.rows() - observed
    } else {
        a.rows()
    };
    let with_values = eval
        .saturating_mul(a.cols())
        .saturating_mul(data.values.cols())
        <= OUTPUT_ERROR_MAX_WORK;
    (
        SelectKey::of(s),
        // (the quantization's config only, as the table's cache key: the tensor shown, its
        // channel and the scales' dtype change no figure of the comparison's own)
        with_values.then_some(quant.key.config),
        s.future,
    )
}

/// Largest `eval rows x T x d` for which the comparison computes the output error.
pub const OUTPUT_ERROR_MAX_WORK: usize = 1 << 24;

/// What the comparison reuses between updates on the same data, each part keyed by the settings
/// it depends on (a change of B alone recomputes only the table's selections and reports).
/// Shared, so that keeping the last good copy for a failed update costs nothing.
#[derive(Debug, Clone, Default)]
pub(super) struct CompareCache {
    /// The policies' scores and rankings (keyed by the policies and the observed rows).
    pub(super) scores: Option<Arc<PolicyScores>>,
    /// The table's evaluation when the output error is computed, by observed rows and the
    /// quantization of V (without values the table uses `sweep_eval`).
    pub(super) table: Option<(TableKey, Arc<Result<Evaluator, PolicyError>>)>,
    /// The sweep's evaluation (mass only), by observed rows.
    pub(super) sweep_eval: Option<(usize, Arc<Result<Evaluator, PolicyError>>)>,
    /// The sweep's curves before [`annotate`], by policies, recent window and observed rows.
    pub(super) curves: Option<(CurvesKey, Arc<SweepResult>)>,
}

/// The sweep's curves, or why it was refused.
pub(super) type SweepResult = Result<Vec<SweepCurve>, PolicyError>;

/// Observed rows and the quantization of V (when the output error is computed).
pub(super) type TableKey = (usize, Option<QuantConfig>);

/// Policies, recent window, observed rows.
pub(super) type CurvesKey = (Vec<Policy>, usize, usize);

pub(super) fn compare_view(
    data: &Data,
    s: &Settings,
    quant: &QuantView,
    cache: &mut CompareCache,
) -> Result<CompareView, LabError> {
    let a = &data.attention;
    let observed = a.rows() - s.future.min(a.rows() - 1);
    let policies = policies_of(s, a.rows());
    let v = &data.values;
    let eval = if observed < a.rows() {
        a.rows() - observed
    } else {
        a.rows()
    };
    // The output error costs eval rows x T x d per policy: above OUTPUT_ERROR_MAX_WORK the
    // table shows mass only, so a slider never blocks the page for seconds at long contexts.
    let with_values =
        eval.saturating_mul(a.cols()).saturating_mul(v.cols()) <= OUTPUT_ERROR_MAX_WORK;
    let scores = match &cache.scores {
        Some(sc) if sc.is_for(&policies, observed) => sc.clone(),
        previous => {
            let sc = Arc::new(PolicyScores::new(
                &policies,
                a,
                observed,
                previous.as_deref(),
            ));
            cache.scores = Some(sc.clone());
            sc
        }
    };
    let table_key = (observed, with_values.then_some(quant.key.config));
    let table = match &cache.table {
        // Without values the table's evaluation is the sweep's: share it.
        _ if !with_values => cached(&mut cache.sweep_eval, observed, || {
            Evaluator::new(a, None, None, observed)
        }),
        Some((k, ev)) if *k == table_key => ev.clone(),
        _ => {
            // V at the current bits, with the current quantization settings.
            let v_hat = if with_values {
                Some(quantize(v, &quant.key.config)?.dequantize())
            } else {
                None
            };
            let ev = Evaluator::new(a, with_values.then_some(v), v_hat.as_ref(), observed);
            cached(&mut cache.table, table_key, || ev)
        }
    };
    let budget = s.budget.min(a.cols());
    // One selection per policy serves both the table and the strips.
    let reports = match &*table {
        Err(e) => policies.iter().map(|p| (*p, Err(e.clone()))).collect(),
        Ok(ev) => policy::compare_prepared(ev, &scores, budget, s.recent),
    };
    let mut rows = Vec::new();
    let mut selections = Vec::new();
    let mut eval_rows = a.rows() - observed;
    for (p, r) in reports {
        let (sel, quality, error) = match r {
            Ok((sel, q)) => {
                eval_rows = q.eval_rows;
                (Some(sel), Some(q), None)
            }
            // No report: the strip still shows the kept set when the policy can select.
            Err(e) => (
                policy::select_with(&p, a, budget, s.recent, observed).ok(),
                None,
                Some(e.to_string()),
            ),
        };
        rows.push(PolicyRow {
            policy: p.name(),
            quality,
            error,
        });
        selections.push((p, sel));
    }
    let curves_key = (policies.clone(), s.recent, observed);
    let curves = match &cache.curves {
        Some((k, c)) if *k == curves_key => c.clone(),
        _ => {
            let sweep_eval = cached(&mut cache.sweep_eval, observed, || {
                Evaluator::new(a, None, None, observed)
            });
            let c = match &*sweep_eval {
                Err(e) => Err(e.clone()),
                Ok(ev) => policy::sweep_prepared(ev, &scores, &sweep_budgets(a.cols()), s.recent),
            };
            cached(&mut cache.curves, curves_key, || c)
        }
    };
    let mut curves = (*curves).clone().map_err(|e| LabError::Range {
        field: "future",
        message: e.to_string(),
    })?;
    annotate(&mut curves, data, s)?;
    Ok(CompareView {
        key: compare_key(data, s, quant),
        curves,
        selections,
        figures: CompareFigures {
            observed_rows: observed,
            eval_rows,
            rows,
            output_error: with_values,
        },
    })
}
