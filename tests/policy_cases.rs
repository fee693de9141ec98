//! Hand-worked cases for every policy, metric and error of `kvlab::policy` (issue 5).
//!
//! Most cases use math-spec §4's history (S = 3 rows, T = 4 tokens, so T - S = 1 and row t sees
//! tokens 0..=1+t under the causal rule):
//!
//! ```text
//! row 0  [0.60, 0.20, 0.10, 0.10]
//! row 1  [0.70, 0.10, 0.10, 0.10]
//! row 2  [0.05, 0.05, 0.10, 0.80]
//! ```

use kvlab::budget::{Compression, IndexKind, ModelConfig};
use kvlab::policy::{
    annotate_r_overall, compare, output_error, per_head_selection, policy_scores, quality,
    scoped_breakdown, select_with, selection_memory, shared_selection, sweep, Aggregate, Policy,
    PolicyError, SelectionScope,
};
use kvlab::select::{Pooling, Role, SelectError};
use kvlab::Matrix;

fn spec() -> Matrix {
    Matrix::new(
        3,
        4,
        vec![
            0.60, 0.20, 0.10, 0.10, 0.70, 0.10, 0.10, 0.10, 0.05, 0.05, 0.10, 0.80,
        ],
    )
    .unwrap()
}

fn m(rows: usize, cols: usize, d: &[f32]) -> Matrix {
    Matrix::new(rows, cols, d.to_vec()).unwrap()
}

fn kept(p: Policy, a: &Matrix, b: usize, r: usize, obs: usize) -> Vec<usize> {
    select_with(&p, a, b, r, obs).unwrap().kept
}

/// One of each policy, with a single sink so every budget in `1..=4` is valid.
fn all_policies(window: usize) -> Vec<Policy> {
    Policy::defaults(window)
        .into_iter()
        .map(|p| match p {
            Policy::StreamingLlm { .. } => Policy::StreamingLlm { sinks: 1 },
            p => p,
        })
        .collect()
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

fn scores(p: Policy, a: &Matrix, obs: usize) -> Vec<f32> {
    policy_scores(&p, a, obs).unwrap().unwrap()
}

fn assert_scores(got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(close(f64::from(*g), *w, 1e-6), "{got:?} vs {want:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Policies

#[test]
fn h2o_sum_is_the_notes_rule() {
    let a = spec();
    // all rows: [1.35, 0.35, 0.30, 1.00]
    assert_scores(&scores(Policy::H2oSum, &a, 3), &[1.35, 0.35, 0.30, 1.00]);
    assert_eq!(kept(Policy::H2oSum, &a, 2, 0, 3), vec![0, 3]);
    assert_eq!(kept(Policy::H2oSum, &a, 3, 0, 3), vec![0, 1, 3]);
    assert_eq!(kept(Policy::H2oSum, &a, 3, 1, 3), vec![0, 1, 3]);
    // the same as select::h2o
    for b in 1..=4 {
        for r in 0..5 {
            assert_eq!(
                select_with(&Policy::H2oSum, &a, b, r, 3).unwrap(),
                kvlab::select::h2o(&a, b, r).unwrap()
            );
        }
    }
    // observing rows 0..2 only: [1.30, 0.30, 0.20, 0.20]
    assert_scores(&scores(Policy::H2oSum, &a, 2), &[1.30, 0.30, 0.20, 0.20]);
    assert_eq!(kept(Policy::H2oSum, &a, 2, 0, 2), vec![0, 1]);
}

#[test]
fn h2o_mean_divides_by_the_rows_that_can_see_each_token() {
    let a = spec();
    // n_i over rows 0..3 by the causal rule (row t sees 0..=1+t): token 0 and 1: 3 rows,
    // token 2: rows 1, 2; token 3: row 2 only. [1.35/3, 0.35/3, 0.30/2, 1.00/1]
    let s = scores(Policy::H2oMean, &a, 3);
    assert_scores(&s, &[0.45, 0.35 / 3.0, 0.15, 1.00]);
    // B = 3, r = 0: the sum keeps {0, 1, 3}; the mean prefers token 2 (0.15) over 1 (0.117)
    assert_eq!(kept(Policy::H2oMean, &a, 3, 0, 3), vec![0, 2, 3]);
    assert_eq!(kept(Policy::H2oSum, &a, 3, 0, 3), vec![0, 1, 3]);
    // observed rows 0..2: n = [2, 2, 1, 0]; token 3 is unseen and scores 0
    assert_scores(&scores(Policy::H2oMean, &a, 2), &[0.65, 0.15, 0.20, 0.0]);
    assert_eq!(kept(Policy::H2oMean, &a, 2, 0, 2), vec![0, 2]);
}

#[test]
fn h2o_mean_counts_rows_by_the_causal_rule_with_more_rows_than_tokens() {
    // S = 3 > T = 2: T - S = -1, row t sees tokens 0..=t-1, so row 0 sees nothing.
    // n = [2, 1] (token 0: rows 1, 2; token 1: row 2). Row 0's weights still enter the sums.
    let a = m(3, 2, &[0.5, 0.5, 1.0, 0.0, 0.25, 0.75]);
    assert_scores(&scores(Policy::H2oMean, &a, 3), &[1.75 / 2.0, 1.25]);
}

#[test]
fn snapkv_window_and_pooling() {
    let a = spec();
    // window 2 (rows 1, 2): [0.75, 0.15, 0.20, 0.90]; prefix = tokens 0..2 (pooled)
    let p = |pooling| Policy::SnapKv { window: 2, pooling };
    assert_scores(&scores(p(Pooling::None), &a, 3), &[0.75, 0.15, 0.20, 0.90]);
    assert_eq!(kept(p(Pooling::None), &a, 3, 0, 3), vec![0, 2, 3]);
    // max k=3 over the prefix [0.75, 0.15] -> [0.75, 0.75]
    let max = p(Pooling::Max { kernel: 3 });
    assert_scores(&scores(max, &a, 3), &[0.75, 0.75, 0.20, 0.90]);
    assert_eq!(kept(max, &a, 3, 0, 3), vec![0, 1, 3]);
    // avg k=3, zero padding counted: [(0.75+0.15)/3, (0.75+0.15)/3] = [0.3, 0.3]
    let avg = p(Pooling::Avg { kernel: 3 });
    assert_scores(&scores(avg, &a, 3), &[0.30, 0.30, 0.20, 0.90]);
    assert_eq!(kept(avg, &a, 3, 0, 3), vec![0, 1, 3]);
    // the window counts within the observed rows: observed 2, window 1 -> row 1
    let w1 = Policy::SnapKv {
        window: 1,
        pooling: Pooling::None,
    };
    assert_scores(&scores(w1, &a, 2), &[0.70, 0.10, 0.10, 0.10]);
}

#[test]
fn streaming_llm_keeps_sinks_and_the_tail_and_ignores_recent() {
    let a = spec();
    let p = Policy::StreamingLlm { sinks: 1 };
    assert_eq!(kept(p, &a, 2, 0, 3), vec![0, 3]);
    assert_eq!(kept(p, &a, 2, 4, 3), vec![0, 3]);
    assert_eq!(kept(p, &a, 3, 0, 3), vec![0, 2, 3]);
    let s = select_with(&p, &a, 3, 0, 3).unwrap();
    assert_eq!(s.roles, vec![Role::Sink, Role::Recent, Role::Recent]);
    assert!(policy_scores(&p, &a, 3).unwrap().is_none());
    assert!(!p.uses_recent());
}

#[test]
fn tova_ranks_by_the_last_observed_step() {
    let a = spec();
    // last row [0.05, 0.05, 0.10, 0.80]
    assert_eq!(kept(Policy::Tova, &a, 1, 0, 3), vec![3]);
    assert_eq!(kept(Policy::Tova, &a, 2, 0, 3), vec![2, 3]);
    // tie 0.05 between tokens 0 and 1 goes to 0
    assert_eq!(kept(Policy::Tova, &a, 3, 0, 3), vec![0, 2, 3]);
    // recent window {2, 3} honoured, then the top of tokens 0..2 (tie -> 0)
    assert_eq!(kept(Policy::Tova, &a, 3, 2, 3), vec![0, 2, 3]);
    // observed rows 0..2: row 1 [0.70, 0.10, 0.10, 0.10]
    assert_eq!(kept(Policy::Tova, &a, 2, 0, 2), vec![0, 1]);
    assert_eq!(kept(Policy::Tova, &a, 2, 1, 2), vec![0, 3]);
}

#[test]
fn random_is_seeded_and_honours_the_recent_window() {
    let a = m(1, 50, &[0.02; 50]);
    let p = Policy::Random { seed: 7 };
    let s1 = select_with(&p, &a, 10, 3, 1).unwrap();
    assert_eq!(s1, select_with(&p, &a, 10, 3, 1).unwrap());
    assert_eq!(s1.kept.len(), 10);
    for i in 47..50 {
        assert!(s1.kept.contains(&i));
    }
    // other seeds give other sets (for these seeds; 1 in C(47, 7) would collide)
    let others: Vec<Vec<usize>> = (0..5)
        .map(|seed| kept(Policy::Random { seed }, &a, 10, 3, 1))
        .collect();
    assert!(others.iter().any(|k| *k != s1.kept));
    // the heavy part is a random subset, not the first tokens
    assert_ne!(s1.kept[..7], [0, 1, 2, 3, 4, 5, 6]);
    // a full recent window leaves nothing to chance
    assert_eq!(kept(p, &spec(), 2, 2, 3), vec![2, 3]);
}

#[test]
fn oracle_is_top_b_of_the_future_mass() {
    let a = spec();
    // observed 2: the future is row 2
    assert_scores(&scores(Policy::Oracle, &a, 2), &[0.05, 0.05, 0.10, 0.80]);
    assert_eq!(kept(Policy::Oracle, &a, 1, 0, 2), vec![3]);
    assert_eq!(kept(Policy::Oracle, &a, 2, 0, 2), vec![2, 3]);
    // the recent window does not constrain the oracle
    assert_eq!(kept(Policy::Oracle, &a, 2, 4, 2), vec![2, 3]);
    // observed 1: rows 1 and 2, each normalised (both sum to 1): [0.75, 0.15, 0.20, 0.90]
    assert_scores(&scores(Policy::Oracle, &a, 1), &[0.75, 0.15, 0.20, 0.90]);
    assert_eq!(kept(Policy::Oracle, &a, 2, 0, 1), vec![0, 3]);
    // rows are normalised: a row of mass 10 weighs as much as a row of mass 1
    let b = m(3, 2, &[1.0, 0.0, 9.0, 1.0, 0.2, 0.8]);
    // future rows 1 and 2: [0.9 + 0.2, 0.1 + 0.8] = [1.1, 0.9]
    assert_scores(&scores(Policy::Oracle, &b, 1), &[1.1, 0.9]);
}

#[test]
fn every_policy_keeps_exactly_b() {
    let a = spec();
    for p in all_policies(2) {
        for b in 1..=4 {
            for r in 0..6 {
                let s = select_with(&p, &a, b, r, 2).unwrap();
                assert_eq!(s.kept.len(), b, "{p} b={b} r={r}");
                assert_eq!(s.total(), 4);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Metrics

#[test]
fn quality_on_the_spec_example() {
    let a = spec();
    // all rows: kept {0, 3}: masses [0.70, 0.80, 0.85]
    let q = quality(&a, None, None, &[0, 3], 3).unwrap();
    assert!(close(q.mass_mean, 2.35 / 3.0, 1e-7));
    assert!(close(q.mass_worst, 0.70, 1e-7));
    assert_eq!(q.output_error_mean, None);
    assert_eq!((q.r_token, q.kept, q.eval_rows), (2.0, 2, 3));
    // observed 2: evaluated on row 2 only
    let q = quality(&a, None, None, &[2, 3], 2).unwrap();
    assert!(close(q.mass_mean, 0.90, 1e-7) && close(q.mass_worst, 0.90, 1e-7));
    assert_eq!(q.eval_rows, 1);
    // duplicates count once
    let q = quality(&a, None, None, &[3, 3, 2], 2).unwrap();
    assert_eq!(q.kept, 2);
    assert_eq!(q.r_token, 2.0);
}

#[test]
fn compare_table_on_the_spec_example() {
    // observed 2, future row 2 = [0.05, 0.05, 0.10, 0.80], B = 2, r = 0
    let a = spec();
    let pols = [
        Policy::H2oSum,                    // {0, 1}: 0.10
        Policy::H2oMean,                   // {0, 2}: 0.15
        Policy::Tova,                      // row 1 -> {0, 1}: 0.10
        Policy::StreamingLlm { sinks: 1 }, // {0, 3}: 0.85
        Policy::Oracle,                    // {2, 3}: 0.90
    ];
    let want = [0.10, 0.15, 0.10, 0.85, 0.90];
    let table = compare(&pols, &a, None, None, 2, 0, 2);
    for ((p, r), w) in table.iter().zip(want) {
        let q = r.as_ref().unwrap();
        assert!(close(q.mass_mean, w, 1e-7), "{p}: {}", q.mass_mean);
        assert_eq!(q.kept, 2);
    }
    // a shared input error reaches every entry
    let bad = compare(&pols, &a, None, None, 2, 0, 0);
    assert!(bad
        .iter()
        .all(|(_, r)| matches!(r, Err(PolicyError::ObservedRows { .. }))));
    // a policy error stays with its policy
    let t = compare(&[Policy::Oracle, Policy::Tova], &a, None, None, 2, 0, 3);
    assert!(matches!(t[0].1, Err(PolicyError::NoFutureRows { .. })));
    assert!(t[1].1.is_ok());
}

#[test]
fn output_error_hand_cases() {
    // one row a = [0.5, 0.25, 0.25], v = [2, 4, 0]: o = 1 + 1 + 0 = 2
    let a = m(1, 3, &[0.5, 0.25, 0.25]);
    let v = m(3, 1, &[2.0, 4.0, 0.0]);
    let e = |kept: &[usize]| output_error(&a, &v, None, kept).unwrap()[0];
    assert!(close(e(&[0, 1]), 1.0 / 3.0, 1e-12)); // o_hat = 2 / 0.75 = 8/3
    assert_eq!(e(&[0]), 0.0); // o_hat = 1 / 0.5 = 2
    assert_eq!(e(&[2]), 1.0); // o_hat = 0
    assert_eq!(e(&[0, 1, 2]), 0.0);
    // de-quantized values 10% too large: o_hat = 2.2
    let v_hat = m(3, 1, &[2.2, 4.4, 0.0]);
    let e = output_error(&a, &v, Some(&v_hat), &[0, 1, 2]).unwrap()[0];
    assert!(close(e, 0.1, 1e-6), "{e}");
    // two channels: a = [0.5, 0.5], V = I: o = [0.5, 0.5]; keep {0}: o_hat = [1, 0]
    let a2 = m(1, 2, &[0.5, 0.5]);
    let eye = m(2, 2, &[1.0, 0.0, 0.0, 1.0]);
    assert!(close(
        output_error(&a2, &eye, None, &[0]).unwrap()[0],
        1.0,
        1e-12
    ));
}

#[test]
fn output_error_edge_cases_are_defined() {
    let v = m(2, 1, &[1.0, 3.0]);
    // nothing kept is attended (m_t = 0): o_hat = 0, error 1
    let a = m(1, 2, &[1.0, 0.0]);
    assert_eq!(output_error(&a, &v, None, &[1]).unwrap(), vec![1.0]);
    // a row of zeros: o = o_hat = 0, 0/0 = 0 (and its mass counts as 1)
    let z = m(1, 2, &[0.0, 0.0]);
    assert_eq!(output_error(&z, &v, None, &[0]).unwrap(), vec![0.0]);
    let q = quality(&z, Some(&v), None, &[0], 1).unwrap();
    assert_eq!((q.mass_mean, q.output_error_mean), (1.0, Some(0.0)));
    // the exact output is zero but the kept one is not: +inf
    let cancel = m(2, 1, &[1.0, -1.0]);
    let half = m(1, 2, &[0.5, 0.5]);
    assert_eq!(
        output_error(&half, &cancel, None, &[0]).unwrap(),
        vec![f64::INFINITY]
    );
    let q = quality(&half, Some(&cancel), None, &[0], 1).unwrap();
    assert_eq!(q.output_error_worst, Some(f64::INFINITY));
    // rows that do not sum to 1 are normalised: a = [2, 2], v = [1, 3]: o = 2
    let big = m(1, 2, &[2.0, 2.0]);
    assert_eq!(output_error(&big, &v, None, &[0, 1]).unwrap(), vec![0.0]);
    assert!(close(
        output_error(&big, &v, None, &[1]).unwrap()[0],
        0.5,
        1e-12
    ));
}

#[test]
fn quality_with_values_on_future_rows() {
    // observed 1 of 2 rows: evaluated on row 1 = [0.25, 0.25, 0.5], v = [4, 0, 2]: o = 2
    let a = m(2, 3, &[1.0, 0.0, 0.0, 0.25, 0.25, 0.5]);
    let v = m(3, 1, &[4.0, 0.0, 2.0]);
    // keep {0, 1}: mass 0.5, o_hat = 1 / 0.5 = 2 -> error 0
    let q = quality(&a, Some(&v), None, &[0, 1], 1).unwrap();
    assert!(close(q.mass_mean, 0.5, 1e-12));
    assert_eq!(q.output_error_mean, Some(0.0));
    // keep {1}: o_hat = 0 -> error 1; keep {0}: o_hat = 4 -> error 1
    let q = quality(&a, Some(&v), None, &[1], 1).unwrap();
    assert_eq!(q.output_error_worst, Some(1.0));
    let q = quality(&a, Some(&v), None, &[0], 1).unwrap();
    assert_eq!(q.output_error_mean, Some(1.0));
}

// ---------------------------------------------------------------------------------------------
// Errors

#[test]
fn errors_name_the_value_and_the_range() {
    let a = spec();
    let err = |r: Result<_, PolicyError>| r.map(|_: kvlab::select::Selection| ()).unwrap_err();
    assert_eq!(
        err(select_with(&Policy::H2oSum, &a, 2, 0, 0)).to_string(),
        "observed rows 0 is out of range: must be between 1 and 3 (the number of attention rows)"
    );
    assert!(matches!(
        err(select_with(&Policy::H2oSum, &a, 2, 0, 4)),
        PolicyError::ObservedRows {
            observed_rows: 4,
            steps: 3
        }
    ));
    assert_eq!(
        err(select_with(&Policy::Oracle, &a, 2, 0, 3)).to_string(),
        "the oracle needs future rows: observed rows 3 leaves none of the 3 attention rows; observed rows must be between 1 and 2 for the oracle"
    );
    for p in Policy::defaults(1) {
        assert_eq!(
            err(select_with(&p, &a, 0, 0, 2)).to_string(),
            "budget 0 is out of range: must be between 1 and 4 (the number of tokens)",
            "{p}"
        );
        assert!(select_with(&p, &a, 5, 0, 2).is_err());
    }
    let w = Policy::SnapKv {
        window: 3,
        pooling: Pooling::None,
    };
    assert_eq!(
        err(select_with(&w, &a, 2, 0, 2)).to_string(),
        "observation window 3 is out of range: must be between 1 and 2 (the number of attention rows)"
    );
    let k = Policy::SnapKv {
        window: 1,
        pooling: Pooling::Avg { kernel: 2 },
    };
    assert!(matches!(
        err(select_with(&k, &a, 2, 0, 2)),
        PolicyError::Select(SelectError::Kernel { kernel: 2, .. })
    ));
    assert_eq!(
        err(select_with(&Policy::StreamingLlm { sinks: 3 }, &a, 2, 0, 3)).to_string(),
        "sinks 3 is out of range: must be between 0 and 2 (the budget B)"
    );
    let nan = m(1, 2, &[0.5, f32::NAN]);
    for p in Policy::defaults(1) {
        let e = select_with(&p, &nan, 1, 0, 1);
        assert!(
            matches!(
                e,
                Err(PolicyError::Select(SelectError::NonFinite { index: 1, .. }))
            ),
            "{p}: {e:?}"
        );
    }
}

#[test]
fn quality_errors_name_the_value_and_the_range() {
    let a = spec();
    let v = m(4, 2, &[1.0; 8]);
    assert_eq!(
        quality(&a, Some(&m(3, 2, &[1.0; 6])), None, &[0], 3)
            .unwrap_err()
            .to_string(),
        "values have 3 rows but the attention has 4 tokens: values need one row per token (T x d)"
    );
    assert_eq!(
        quality(&a, Some(&v), Some(&m(4, 1, &[1.0; 4])), &[0], 3)
            .unwrap_err()
            .to_string(),
        "de-quantized values are 4 x 1 but the values are 4 x 2: the shapes must match"
    );
    let mut d = vec![1.0; 8];
    d[5] = f32::INFINITY;
    assert_eq!(
        quality(&a, Some(&m(4, 2, &d)), None, &[0], 3)
            .unwrap_err()
            .to_string(),
        "values at row 2, column 1 is inf: values must be finite"
    );
    assert_eq!(
        quality(&a, Some(&v), Some(&m(4, 2, &d)), &[0], 3)
            .unwrap_err()
            .to_string(),
        "de-quantized values at row 2, column 1 is inf: values must be finite"
    );
    assert_eq!(
        quality(&a, None, None, &[4], 3).unwrap_err().to_string(),
        "token 4 is out of range: the attention has 4 tokens"
    );
    assert_eq!(
        quality(&a, None, None, &[], 3).unwrap_err().to_string(),
        "kept 0 is out of range: must be between 1 and 4 (the total tokens)"
    );
    assert!(output_error(&a, &v, None, &[9]).is_err());
}

// ---------------------------------------------------------------------------------------------
// GQA

fn gqa_heads() -> Vec<Matrix> {
    vec![m(1, 3, &[0.6, 0.4, 0.0]), m(1, 3, &[0.0, 0.45, 0.55])]
}

#[test]
fn per_head_vs_shared_selection() {
    let h = gqa_heads();
    let per = per_head_selection(&h, 1, 0, &Policy::Tova, 1).unwrap();
    assert_eq!(per[0].kept, vec![0]);
    assert_eq!(per[1].kept, vec![2]);
    // mean [0.3, 0.425, 0.275] -> 1; sum ranks the same; max [0.6, 0.45, 0.55] -> 0
    let shared = |agg| {
        shared_selection(&h, 1, 0, &Policy::Tova, agg, 1)
            .unwrap()
            .kept
    };
    assert_eq!(shared(Aggregate::Mean), vec![1]);
    assert_eq!(shared(Aggregate::Sum), vec![1]);
    assert_eq!(shared(Aggregate::Max), vec![0]);
    // B = 2: mean -> {0, 1}; max -> {0, 2}
    let shared2 = |agg| {
        shared_selection(&h, 2, 0, &Policy::Tova, agg, 1)
            .unwrap()
            .kept
    };
    assert_eq!(shared2(Aggregate::Mean), vec![0, 1]);
    assert_eq!(shared2(Aggregate::Max), vec![0, 2]);
    // StreamingLLM ignores the heads' attention
    let s = shared_selection(
        &h,
        2,
        0,
        &Policy::StreamingLlm { sinks: 1 },
        Aggregate::Max,
        1,
    )
    .unwrap();
    assert_eq!(s.kept, vec![0, 2]);
    // one head: shared == per head
    for p in all_policies(1) {
        if p == Policy::Oracle {
            continue;
        }
        let one = &h[..1];
        assert_eq!(
            shared_selection(one, 2, 1, &p, Aggregate::Mean, 1).unwrap(),
            per_head_selection(one, 2, 1, &p, 1).unwrap()[0],
            "{p}"
        );
    }
}

#[test]
fn head_group_errors() {
    let h = gqa_heads();
    assert_eq!(
        per_head_selection(&[], 1, 0, &Policy::Tova, 1)
            .unwrap_err()
            .to_string(),
        "no heads: a group needs at least 1 attention matrix"
    );
    let odd = vec![h[0].clone(), m(1, 2, &[0.5, 0.5])];
    assert_eq!(
        shared_selection(&odd, 1, 0, &Policy::Tova, Aggregate::Mean, 1)
            .unwrap_err()
            .to_string(),
        "head 1 is 1 x 2 but head 0 is 1 x 3: every head of a group needs the same shape"
    );
}

fn preset(name: &str) -> ModelConfig {
    ModelConfig::presets()
        .into_iter()
        .find(|m| m.name.starts_with(name))
        .unwrap()
}

#[test]
fn selection_memory_per_scope() {
    let llama3 = preset("Llama-3-8B"); // L 32, 32 query heads, 8 KV heads
    let mem = |scope| selection_memory(&llama3, scope).unwrap();
    let q = mem(SelectionScope::PerQueryHead);
    assert_eq!(
        (q.selection_copies, q.kv_copy_factor, q.n_kv),
        (32 * 32, 4, 8)
    );
    let k = mem(SelectionScope::PerKvHead);
    assert_eq!((k.selection_copies, k.kv_copy_factor), (32 * 8, 1));
    let l = mem(SelectionScope::PerLayer);
    assert_eq!((l.selection_copies, l.kv_copy_factor), (32, 1));
    // MHA: per query head costs no K/V copy
    let llama2 = preset("Llama-2-7B");
    let q2 = selection_memory(&llama2, SelectionScope::PerQueryHead).unwrap();
    assert_eq!(q2.kv_copy_factor, 1);
    // MLA: one latent per layer, copied per query head
    let ds = preset("DeepSeek");
    let q3 = selection_memory(&ds, SelectionScope::PerQueryHead).unwrap();
    assert_eq!(
        (q3.n_kv, q3.kv_copy_factor, q3.selection_copies),
        (1, 128, 60 * 128)
    );
    // heads that do not group
    let mut bad = llama3.clone();
    bad.n_heads = 12;
    bad.n_kv_heads = 8;
    assert_eq!(
        selection_memory(&bad, SelectionScope::PerKvHead)
            .unwrap_err()
            .to_string(),
        "n_heads 12 is not a multiple of n_kv_heads 8: each KV head must serve a whole group of query heads (n_kv_heads must divide n_heads)"
    );
    bad.d_head = 0;
    assert!(matches!(
        selection_memory(&bad, SelectionScope::PerKvHead),
        Err(PolicyError::Budget(_))
    ));
}

#[test]
fn scoped_breakdown_hand_worked() {
    // Llama-3-8B, 4096 tokens, keep 1024 in fp16, index list, H2O score state (4 B)
    // bytes_token_fp = 2 x 32 x 8 x 128 x 2 = 131072; m_fp = 4096 x 131072 = 536870912
    let llama3 = preset("Llama-3-8B");
    let c = Policy::H2oSum.compression(
        &Compression {
            index: IndexKind::List,
            ..Compression::none(4096)
        },
        4096,
        1024,
    );
    assert_eq!(c.score_state_bytes, 4);
    // per KV head: 256 copies; index 256 x 1024 x 4 = 1048576; score state the same
    let b = scoped_breakdown(&llama3, &c, SelectionScope::PerKvHead).unwrap();
    assert_eq!(b.breakdown.m_fp, 536_870_912);
    assert_eq!(b.breakdown.m_fp_kept, 1024 * 131_072);
    assert_eq!(b.breakdown.m_index, 1_048_576);
    assert_eq!(b.breakdown.m_score_state, 1_048_576);
    assert_eq!(b.breakdown.m_final, 134_217_728 + 2 * 1_048_576);
    assert_eq!(b.breakdown.r_overall, 536_870_912.0 / 136_314_880.0);
    // per query head: 1024 copies of index and scores, 4 copies of K/V
    let b = scoped_breakdown(&llama3, &c, SelectionScope::PerQueryHead).unwrap();
    assert_eq!(b.breakdown.m_fp, 536_870_912);
    assert_eq!(b.breakdown.m_fp_kept, 4 * 134_217_728);
    assert_eq!(b.breakdown.m_index, 4 * 1_048_576);
    assert_eq!(b.breakdown.m_meta, 4 * 1_048_576);
    assert_eq!(b.breakdown.m_final, 536_870_912 + 8 * 1_048_576);
    assert!(b.breakdown.r_overall < 1.0);
    // StreamingLLM keeps no index and no scores
    let s = Policy::StreamingLlm { sinks: 4 }.compression(&c, 4096, 1024);
    assert_eq!((s.index, s.score_state_bytes), (IndexKind::None, 0));
    let b = scoped_breakdown(&llama3, &s, SelectionScope::PerKvHead).unwrap();
    assert_eq!(b.breakdown.r_overall, 4.0);
}

#[test]
fn annotate_r_overall_uses_each_policys_accounting() {
    let a = spec();
    let mut curves = sweep(
        &[Policy::H2oSum, Policy::StreamingLlm { sinks: 1 }],
        &[2, 4],
        &a,
        None,
        None,
        0,
        3,
    )
    .unwrap();
    let llama3 = preset("Llama-3-8B");
    let template = Compression {
        index: IndexKind::List,
        ..Compression::none(4)
    };
    annotate_r_overall(&mut curves, &llama3, &template, SelectionScope::PerKvHead).unwrap();
    for c in &curves {
        for p in &c.points {
            let want = scoped_breakdown(
                &llama3,
                &c.policy.compression(&template, 4, p.quality.kept as u64),
                SelectionScope::PerKvHead,
            )
            .unwrap()
            .breakdown
            .r_overall;
            assert_eq!(p.r_overall, Some(want));
        }
    }
    // StreamingLLM at B = 2 of 4: no index, exactly 2x; H2O pays index and scores
    assert_eq!(curves[1].points[0].r_overall, Some(2.0));
    assert!(curves[0].points[0].r_overall.unwrap() < 2.0);
}

// ---------------------------------------------------------------------------------------------
// Serde and labels

#[test]
fn policies_serialise_as_tagged_kebab_case() {
    let cases = [
        (Policy::H2oSum, r#"{"kind":"h2o-sum"}"#),
        (Policy::H2oMean, r#"{"kind":"h2o-mean"}"#),
        (
            Policy::SnapKv {
                window: 32,
                pooling: Pooling::Avg { kernel: 5 },
            },
            r#"{"kind":"snapkv","window":32,"pooling":{"kind":"avg","kernel":5}}"#,
        ),
        (
            Policy::SnapKv {
                window: 8,
                pooling: Pooling::None,
            },
            r#"{"kind":"snapkv","window":8,"pooling":{"kind":"none"}}"#,
        ),
        (
            Policy::StreamingLlm { sinks: 4 },
            r#"{"kind":"streaming-llm","sinks":4}"#,
        ),
        (Policy::Tova, r#"{"kind":"tova"}"#),
        (Policy::Random { seed: 7 }, r#"{"kind":"random","seed":7}"#),
        (Policy::Oracle, r#"{"kind":"oracle"}"#),
    ];
    for (p, json) in cases {
        assert_eq!(serde_json::to_string(&p).unwrap(), json);
        assert_eq!(serde_json::from_str::<Policy>(json).unwrap(), p);
        assert_eq!(p.name(), json.split('"').nth(3).unwrap());
    }
    // pooling may be left out
    let p: Policy = serde_json::from_str(r#"{"kind":"snapkv","window":8}"#).unwrap();
    assert_eq!(
        p,
        Policy::SnapKv {
            window: 8,
            pooling: Pooling::None
        }
    );
    assert!(serde_json::from_str::<Policy>(r#"{"kind":"lru"}"#).is_err());
    assert_eq!(
        serde_json::to_string(&SelectionScope::PerQueryHead).unwrap(),
        r#""per-query-head""#
    );
    assert_eq!(serde_json::to_string(&Aggregate::Max).unwrap(), r#""max""#);
}

#[test]
fn labels() {
    let p = Policy::SnapKv {
        window: 32,
        pooling: Pooling::Max { kernel: 7 },
    };
    assert_eq!(p.to_string(), "SnapKV (w=32, max k=7)");
    assert_eq!(
        Policy::StreamingLlm { sinks: 4 }.to_string(),
        "StreamingLLM (4 sinks)"
    );
    assert_eq!(Policy::H2oMean.to_string(), "H2O (mean)");
    // one of each policy, each name once (a new policy joins the list in policy.rs)
    let names: Vec<&str> = Policy::defaults(16).iter().map(|p| p.name()).collect();
    let mut unique = names.clone();
    unique.dedup();
    assert_eq!(unique, names);
    assert!(names.contains(&"oracle") && names.contains(&"h2o-sum"));
}

#[test]
fn oracle_bounds_the_mean_not_the_worst_step() {
    // observed row 0; future rows [0.5, 0.5, 0], [0.5, 0.5, 0], [0, 0.2, 0.8], B = 2.
    // oracle scores [1.0, 1.2, 0.8] -> {0, 1}: masses [1, 1, 0.2], mean 0.733, worst 0.2.
    // StreamingLLM (no sinks) keeps {1, 2}: masses [0.5, 0.5, 1], mean 0.667, worst 0.5.
    let a = m(
        4,
        3,
        &[0.3, 0.3, 0.4, 0.5, 0.5, 0.0, 0.5, 0.5, 0.0, 0.0, 0.2, 0.8],
    );
    let o = select_with(&Policy::Oracle, &a, 2, 0, 1).unwrap();
    assert_eq!(o.kept, vec![0, 1]);
    let s = select_with(&Policy::StreamingLlm { sinks: 0 }, &a, 2, 0, 1).unwrap();
    assert_eq!(s.kept, vec![1, 2]);
    let qo = quality(&a, None, None, &o.kept, 1).unwrap();
    let qs = quality(&a, None, None, &s.kept, 1).unwrap();
    assert!(close(qo.mass_mean, 2.2 / 3.0, 1e-7) && close(qs.mass_mean, 2.0 / 3.0, 1e-7));
    assert!(close(qo.mass_worst, 0.2, 1e-7) && close(qs.mass_worst, 0.5, 1e-7));
}
