//! `kvlab::policy::sweep`: hand-checked curves, skipped budgets, errors, and a timing harness
//! (ignored by default; it prints figures and asserts nothing about speed):
//!
//! ```text
//! cargo test --release --test policy_sweep -- --ignored --nocapture --test-threads=1
//! ```

use kvlab::policy::{sweep, Policy, PolicyError};
use kvlab::select::{Pooling, SelectError};
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

#[test]
fn curves_on_the_spec_example() {
    // observed 2, evaluated on row 2 = [0.05, 0.05, 0.10, 0.80], r = 0
    // H2O (rows 0..2: [1.30, 0.30, 0.20, 0.20]) admits 0, 1, 2, 3: mass 0.05, 0.10, 0.20, 1
    // oracle admits 3, 2, 0, 1: mass 0.80, 0.90, 0.95, 1
    let curves = sweep(
        &[Policy::H2oSum, Policy::Oracle],
        &[4, 1, 3, 2],
        &spec(),
        None,
        None,
        0,
        2,
    )
    .unwrap();
    let masses = |i: usize| -> Vec<f64> {
        curves[i]
            .points
            .iter()
            .map(|p| p.quality.mass_mean)
            .collect()
    };
    let want = [[0.05, 0.10, 0.20, 1.0], [0.80, 0.90, 0.95, 1.0]];
    for (i, w) in want.iter().enumerate() {
        let got = masses(i);
        assert!(
            got.iter().zip(w).all(|(g, w)| (g - w).abs() < 1e-7),
            "{got:?}"
        );
        // ascending budgets, whatever order they were given in
        let b: Vec<usize> = curves[i].points.iter().map(|p| p.budget).collect();
        assert_eq!(b, vec![1, 2, 3, 4]);
        assert!(curves[i].skipped.is_empty());
        assert_eq!(curves[i].t_total, 4);
    }
    let p = &curves[0].points[1];
    assert_eq!(
        (p.quality.kept, p.quality.r_token, p.quality.eval_rows),
        (2, 2.0, 1)
    );
    assert_eq!(p.quality.output_error_mean, None);
    assert_eq!(p.r_overall, None);
}

#[test]
fn output_error_along_a_curve() {
    // one row a = [0.5, 0.25, 0.25], v = [2, 4, 0]; o = 2.
    // TOVA admits 0, 1, 2: o_hat = 2, (1 + 1) / 0.75 = 8/3, 2 -> errors 0, 1/3, 0
    let a = Matrix::new(1, 3, vec![0.5, 0.25, 0.25]).unwrap();
    let v = Matrix::new(3, 1, vec![2.0, 4.0, 0.0]).unwrap();
    let c = sweep(&[Policy::Tova], &[1, 2, 3], &a, Some(&v), None, 0, 1).unwrap();
    let e: Vec<f64> = c[0]
        .points
        .iter()
        .map(|p| p.quality.output_error_mean.unwrap())
        .collect();
    assert!(e[0].abs() < 1e-15 && (e[1] - 1.0 / 3.0).abs() < 1e-12 && e[2].abs() < 1e-15);
}

#[test]
fn invalid_budgets_and_policies_are_reported() {
    let a = spec();
    let c = sweep(
        &[
            Policy::StreamingLlm { sinks: 2 },
            Policy::Oracle,
            Policy::SnapKv {
                window: 3,
                pooling: Pooling::None,
            },
        ],
        &[1, 2, 2, 4],
        &a,
        None,
        None,
        0,
        3,
    )
    .unwrap();
    // StreamingLLM: B = 1 < 2 sinks is skipped; the rest evaluated (duplicates kept)
    let b: Vec<usize> = c[0].points.iter().map(|p| p.budget).collect();
    assert_eq!(b, vec![2, 2, 4]);
    assert_eq!(c[0].skipped.len(), 1);
    assert_eq!(c[0].skipped[0].budget, 1);
    assert_eq!(
        c[0].skipped[0].reason,
        "sinks 2 is out of range: must be between 0 and 1 (the budget B)"
    );
    // the oracle has no future rows at observed = S: every budget skipped, with the reason
    assert!(c[1].points.is_empty());
    assert_eq!(c[1].skipped.len(), 4);
    assert!(c[1].skipped[0]
        .reason
        .starts_with("the oracle needs future rows"));
    // SnapKV with the whole history as window is fine
    assert_eq!(c[2].points.len(), 4);

    // shared inputs fail the whole sweep
    assert_eq!(
        sweep(&[Policy::Tova], &[0], &a, None, None, 0, 3).unwrap_err(),
        PolicyError::Select(SelectError::Budget {
            budget: 0,
            total: 4
        })
    );
    assert!(sweep(&[Policy::Tova], &[5], &a, None, None, 0, 3).is_err());
    assert!(matches!(
        sweep(&[Policy::Tova], &[1], &a, None, None, 0, 4),
        Err(PolicyError::ObservedRows { .. })
    ));
    let v = Matrix::new(3, 1, vec![1.0; 3]).unwrap();
    assert!(matches!(
        sweep(&[Policy::Tova], &[1], &a, Some(&v), None, 0, 3),
        Err(PolicyError::ValuesTokens { rows: 3, tokens: 4 })
    ));
    // nothing to sweep is not an error
    assert!(sweep(&[], &[1], &a, None, None, 0, 3).unwrap().is_empty());
    assert!(
        sweep(&[Policy::Tova], &[], &a, None, None, 0, 3).unwrap()[0]
            .points
            .is_empty()
    );
}
