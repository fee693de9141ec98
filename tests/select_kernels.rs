//! The fast selection kernels of `kvlab::select` (and the policy paths that use them) against
//! straightforward reference implementations: column sums in `f64` one row at a time in row
//! order, a full sort by (score descending, index ascending), the first non-finite weight by a
//! linear scan, pooling as written in the note. Everything must agree bit for bit: the same `f32`
//! scores, the same kept / dropped / roles, the same errors (the first bad index and its value).
//!
//! Matrices have odd shapes (one row, one column, column counts that are not a multiple of any
//! vector width) and values drawn from a small set so that scores tie; some hold a NaN or an
//! infinity at a random position, or weights large enough that a column sum overflows `f32`.

mod common;
use common::*;
use kvlab::policy::{policy_scores, select_with, Policy, PolicyError};
use kvlab::select::{
    cumulative_scores, h2o, observation_scores, snapkv, streaming_llm, Pooling, Role, SelectError,
    Selection,
};
use kvlab::Matrix;
use proptest::prelude::*;
use std::cmp::Ordering;

// ---------------------------------------------------------------------------------------------
// Reference implementations

fn ref_column_sums(a: &Matrix, rows: std::ops::Range<usize>) -> Vec<f32> {
    let mut acc = vec![0f64; a.cols()];
    for t in rows {
        for (i, s) in acc.iter_mut().enumerate() {
            *s += f64::from(a.get(t, i).unwrap());
        }
    }
    acc.into_iter().map(|v| v as f32).collect()
}

fn ref_first_non_finite(xs: &[f32]) -> Option<usize> {
    (0..xs.len()).find(|&i| !xs[i].is_finite())
}

fn ref_check_attention(a: &Matrix) -> Result<(), SelectError> {
    match ref_first_non_finite(a.data()) {
        Some(index) => Err(SelectError::NonFinite {
            what: "attention weight",
            index,
            value: a.data()[index],
        }),
        None => Ok(()),
    }
}

fn ref_heavy_plus_recent(
    scores: &[f32],
    budget: usize,
    recent: usize,
) -> Result<Selection, SelectError> {
    let total = scores.len();
    if total == 0 {
        return Err(SelectError::NoTokens);
    }
    if budget == 0 || budget > total {
        return Err(SelectError::Budget { budget, total });
    }
    if let Some(index) = ref_first_non_finite(scores) {
        return Err(SelectError::NonFinite {
            what: "score",
            index,
            value: scores[index],
        });
    }
    let recent_start = total.saturating_sub(recent);
    let kept_recent_start = recent_start.max(total - budget);
    let n_heavy = budget.saturating_sub(total - recent_start);
    let mut role: Vec<Option<Role>> = vec![None; total];
    for r in role.iter_mut().skip(kept_recent_start) {
        *r = Some(Role::Recent);
    }
    let mut order: Vec<usize> = (0..recent_start).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    for &i in order.iter().take(n_heavy) {
        role[i] = Some(Role::Heavy);
    }
    Ok(from_roles(&role))
}

fn from_roles(role: &[Option<Role>]) -> Selection {
    let mut s = Selection {
        kept: vec![],
        dropped: vec![],
        roles: vec![],
    };
    for (i, r) in role.iter().enumerate() {
        match r {
            Some(r) => {
                s.kept.push(i);
                s.roles.push(*r);
            }
            None => s.dropped.push(i),
        }
    }
    s
}

fn ref_h2o(a: &Matrix, budget: usize, recent: usize) -> Result<Selection, SelectError> {
    ref_check_attention(a)?;
    ref_heavy_plus_recent(&ref_column_sums(a, 0..a.rows()), budget, recent)
}

fn ref_pool(xs: &mut [f32], pooling: Pooling, total: usize) -> Result<(), SelectError> {
    let (kernel, is_max) = match pooling {
        Pooling::None => return Ok(()),
        Pooling::Avg { kernel } => (kernel, false),
        Pooling::Max { kernel } => (kernel, true),
    };
    let max = 2 * total + 1;
    if kernel == 0 || kernel % 2 == 0 || kernel > max {
        return Err(SelectError::Kernel { kernel, max });
    }
    let half = kernel / 2;
    let n = xs.len();
    let src = xs.to_vec();
    let mut prefix = vec![0f64; n + 1];
    for i in 0..n {
        prefix[i + 1] = prefix[i] + f64::from(src[i]);
    }
    for (i, out) in xs.iter_mut().enumerate() {
        let lo = i.saturating_sub(half);
        let hi = (i + half + 1).min(n);
        *out = if is_max {
            src[lo..hi]
                .iter()
                .copied()
                .fold(f32::NEG_INFINITY, f32::max)
        } else {
            ((prefix[hi] - prefix[lo]) / kernel as f64) as f32
        };
    }
    Ok(())
}

fn ref_observation_scores(
    a: &Matrix,
    window: usize,
    pooling: Pooling,
) -> Result<Vec<f32>, SelectError> {
    let steps = a.rows();
    if window == 0 || window > steps {
        return Err(SelectError::Window { window, steps });
    }
    ref_check_attention(a)?;
    let mut s = ref_column_sums(a, steps - window..steps);
    let prefix = a.cols().saturating_sub(window);
    ref_pool(&mut s[..prefix], pooling, a.cols())?;
    Ok(s)
}

/// The first `rows` rows of `a` as their own matrix (what the policies used to copy).
fn first_rows(a: &Matrix, rows: usize) -> Matrix {
    Matrix::new(rows, a.cols(), a.data()[..rows * a.cols()].to_vec()).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Bitwise comparisons (NaN != NaN under PartialEq, so errors compare their value's bits)

/// Bit for bit, except that any NaN equals any NaN: which payload `NaN + NaN` returns is not
/// specified (Rust, like IEEE 754, leaves it open, and the compiler may swap an addition's
/// operands), so a column holding two different NaNs may sum to either.
fn same_scores(got: &[f32], want: &[f32]) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

fn err_key(e: &SelectError) -> String {
    match e {
        SelectError::NonFinite { what, index, value } => {
            format!("non-finite {what} at {index}: {:#010x}", value.to_bits())
        }
        other => format!("{other:?}"),
    }
}

fn same_selection(
    got: &Result<Selection, SelectError>,
    want: &Result<Selection, SelectError>,
) -> bool {
    match (got, want) {
        (Ok(g), Ok(w)) => g == w,
        (Err(g), Err(w)) => err_key(g) == err_key(w),
        _ => false,
    }
}

fn same_score_result(
    got: &Result<Vec<f32>, SelectError>,
    want: &Result<Vec<f32>, SelectError>,
) -> bool {
    match (got, want) {
        (Ok(g), Ok(w)) => same_scores(g, w),
        (Err(g), Err(w)) => err_key(g) == err_key(w),
        _ => false,
    }
}

fn policy_err_key(e: &PolicyError) -> String {
    match e {
        PolicyError::Select(s) => err_key(s),
        other => format!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Inputs

/// A value from a small set (so that sums tie), an arbitrary weight, or occasionally a huge or
/// negative one.
fn weight() -> impl Strategy<Value = f32> {
    prop_oneof![
        6 => prop_oneof![Just(0.0f32), Just(0.25), Just(0.5), Just(1.0), Just(-0.0)],
        6 => f32_in(0.0, 1.0),
        1 => f32_in(-1.0, 1.0),
        1 => prop_oneof![Just(f32::MAX), Just(3.0e38f32), Just(-f32::MAX)],
        1 => prop_oneof![Just(1.0e-45f32), Just(f32::MIN_POSITIVE)],
    ]
}

fn poison() -> impl Strategy<Value = f32> {
    prop_oneof![
        Just(f32::NAN),
        Just(f32::INFINITY),
        Just(f32::NEG_INFINITY),
        Just(-f32::NAN)
    ]
}

/// An `S x T` matrix with odd shapes and, sometimes, one or two non-finite weights.
fn matrix() -> impl Strategy<Value = Matrix> {
    let shape = prop_oneof![
        (1usize..=3, 1usize..=3),
        (1usize..=9, 1usize..=40),
        (1usize..=6, 60usize..=131),
    ];
    shape.prop_flat_map(|(s, t)| {
        (
            prop::collection::vec(weight(), s * t),
            prop::option::weighted(0.3, (0..s * t, poison())),
            prop::option::weighted(0.1, (0..s * t, poison())),
        )
            .prop_map(move |(mut d, p1, p2)| {
                for (i, v) in p1.into_iter().chain(p2) {
                    d[i] = v;
                }
                Matrix::new(s, t, d).unwrap()
            })
    })
}

fn pooling(t: usize) -> impl Strategy<Value = Pooling> {
    let k = 0..=(t + 1).min(6);
    prop_oneof![
        Just(Pooling::None),
        k.clone().prop_map(|k| Pooling::Avg { kernel: 2 * k + 1 }),
        k.prop_map(|k| Pooling::Max { kernel: 2 * k + 1 }),
        Just(Pooling::Avg { kernel: 2 }),
    ]
}

/// A matrix with a budget, a recent window, an observation window and a pooling to go with it
/// (budget and window sometimes out of range, to compare the errors too).
fn case() -> impl Strategy<Value = (Matrix, usize, usize, usize, Pooling)> {
    matrix().prop_flat_map(|a| {
        let (s, t) = (a.rows(), a.cols());
        (Just(a), 0..=t + 1, 0..=t + 2, 0..=s + 1, pooling(t))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(768))]

    #[test]
    fn column_sums_match_the_row_order_reference(a in matrix()) {
        let want = ref_column_sums(&a, 0..a.rows());
        prop_assert!(same_scores(&cumulative_scores(&a), &want));
    }

    #[test]
    fn h2o_matches_the_reference((a, budget, recent, _, _) in case()) {
        let got = h2o(&a, budget, recent);
        let want = ref_h2o(&a, budget, recent);
        prop_assert!(same_selection(&got, &want), "{got:?} vs {want:?}");
    }

    #[test]
    fn snapkv_matches_the_reference((a, budget, recent, window, pooling) in case()) {
        let got = observation_scores(&a, window, pooling);
        let want = ref_observation_scores(&a, window, pooling);
        prop_assert!(same_score_result(&got, &want), "{got:?} vs {want:?}");
        if let (Ok(g), Ok(w)) = (&got, &want) {
            let got = snapkv(g, budget, recent);
            let want = ref_heavy_plus_recent(w, budget, recent);
            prop_assert!(same_selection(&got, &want), "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn snapkv_on_raw_scores_matches_the_reference(
        scores in prop::collection::vec(prop_oneof![weight(), poison()], 0..70),
        budget in 0usize..72,
        recent in 0usize..72,
    ) {
        let got = snapkv(&scores, budget, recent);
        let want = ref_heavy_plus_recent(&scores, budget, recent);
        prop_assert!(same_selection(&got, &want), "{got:?} vs {want:?}");
    }

    #[test]
    fn streaming_llm_matches_the_reference(total in 0usize..40, budget in 0usize..42, sinks in 0usize..42) {
        let want = if total == 0 {
            Err(SelectError::NoTokens)
        } else if budget == 0 || budget > total {
            Err(SelectError::Budget { budget, total })
        } else if sinks > budget {
            Err(SelectError::Sinks { sinks, budget })
        } else {
            let mut role = vec![None; total];
            for r in role.iter_mut().skip(total - (budget - sinks)) {
                *r = Some(Role::Recent);
            }
            for r in role.iter_mut().take(sinks) {
                *r = Some(Role::Sink);
            }
            Ok(from_roles(&role))
        };
        prop_assert_eq!(streaming_llm(total, budget, sinks), want);
    }

    /// The policies read the observed rows in place; they must give what the select functions
    /// give on a copy of those rows.
    #[test]
    fn policy_paths_match_the_select_functions_on_copied_rows(
        (a, budget, recent, window, pooling) in case(),
        observed in 1usize..=10,
    ) {
        let observed = observed.min(a.rows());
        let copy = first_rows(&a, observed);
        let whole = ref_check_attention(&a);
        let cases: [(Policy, Result<Vec<f32>, SelectError>); 3] = [
            (Policy::H2oSum, whole.clone().map(|()| ref_column_sums(&copy, 0..observed))),
            (
                Policy::SnapKv { window, pooling },
                whole.clone().and_then(|()| ref_observation_scores(&copy, window, pooling)),
            ),
            (Policy::Tova, whole.clone().and_then(|()| ref_observation_scores(&copy, 1, Pooling::None))),
        ];
        for (policy, want) in cases {
            let got = policy_scores(&policy, &a, observed);
            match (&got, &want) {
                (Ok(Some(g)), Ok(w)) => prop_assert!(same_scores(g, w), "{policy:?}"),
                (Err(g), Err(w)) => prop_assert_eq!(policy_err_key(g), err_key(w)),
                _ => prop_assert!(false, "{policy:?}: {got:?} vs {want:?}"),
            }
        }
        let got = select_with(&Policy::H2oSum, &a, budget, recent, observed);
        let want = whole.and_then(|()| ref_h2o(&copy, budget, recent));
        match (&got, &want) {
            (Ok(g), Ok(w)) => prop_assert_eq!(g, w),
            (Err(g), Err(w)) => prop_assert_eq!(policy_err_key(g), err_key(w)),
            _ => prop_assert!(false, "{got:?} vs {want:?}"),
        }
    }
}

/// A small deterministic generator (xorshift64*) for the large cases below.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Mostly arbitrary weights in [0, 1), a quarter from a few values (ties).
    fn weight(&mut self) -> f32 {
        let r = self.next();
        if r % 4 == 0 {
            [0.0, 0.125, 0.5][(r >> 8) as usize % 3]
        } else {
            (r >> 40) as f32 / (1u64 << 24) as f32
        }
    }
}

fn random_matrix(rows: usize, cols: usize, seed: u64) -> Matrix {
    let mut rng = Rng(seed);
    Matrix::new(rows, cols, (0..rows * cols).map(|_| rng.weight()).collect()).unwrap()
}

/// Sizes like the benchmarks' (and odd ones around them): the vectorised loops' main bodies,
/// their remainders and the row groups' remainders all run.
#[test]
fn large_matrices_match_the_reference() {
    for (rows, cols) in [
        (64, 4096),
        (67, 4099),
        (5, 1027),
        (1, 4097),
        (130, 1),
        (3, 33),
    ] {
        let a = random_matrix(rows, cols, (rows * 31 + cols) as u64);
        let want = ref_column_sums(&a, 0..rows);
        assert!(
            same_scores(&cumulative_scores(&a), &want),
            "{rows} x {cols}"
        );
        for (budget, recent) in [
            (cols / 8 + 1, cols / 32),
            (cols, 0),
            (1, 0),
            (cols / 2 + 1, cols),
        ] {
            let budget = budget.clamp(1, cols);
            assert!(
                same_selection(&h2o(&a, budget, recent), &ref_h2o(&a, budget, recent)),
                "h2o {rows} x {cols}, B {budget}, r {recent}"
            );
            let window = rows.min(32);
            let pooling = Pooling::Avg {
                kernel: if cols >= 3 { 7 } else { 3 },
            };
            let got = observation_scores(&a, window, pooling);
            let want = ref_observation_scores(&a, window, pooling);
            assert!(same_score_result(&got, &want), "scores {rows} x {cols}");
            let (got, want) = (got.unwrap(), want.unwrap());
            assert!(same_selection(
                &snapkv(&got, budget, recent),
                &ref_heavy_plus_recent(&want, budget, recent)
            ));
        }
    }
}

/// A NaN or an infinity anywhere (before, inside and after the observation window, in the main
/// body of a vectorised loop or its remainder): the error names the first one in row-major order
/// and its value; with two, the earlier.
#[test]
fn the_first_non_finite_weight_is_reported() {
    let (rows, cols) = (9, 37);
    let base = random_matrix(rows, cols, 5);
    let n = rows * cols;
    let positions = [
        0,
        1,
        15,
        16,
        17,
        36,
        37,
        100,
        4 * cols + 3,
        5 * cols,
        n - 8,
        n - 2,
        n - 1,
    ];
    for &p in &positions {
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            for second in [None, Some(n - 1), Some(p / 2)] {
                let mut d = base.data().to_vec();
                d[p] = bad;
                if let Some(q) = second {
                    d[q] = -bad;
                }
                let a = Matrix::new(rows, cols, d).unwrap();
                let first = (0..n).find(|&i| !a.data()[i].is_finite()).unwrap();
                let want = SelectError::NonFinite {
                    what: "attention weight",
                    index: first,
                    value: a.data()[first],
                };
                let h = h2o(&a, 3, 1).unwrap_err();
                assert_eq!(err_key(&h), err_key(&want), "h2o, {p}");
                for window in [1, 4, rows] {
                    let o = observation_scores(&a, window, Pooling::Avg { kernel: 3 }).unwrap_err();
                    assert_eq!(err_key(&o), err_key(&want), "window {window}, {p}");
                }
                let e = policy_scores(&Policy::H2oSum, &a, 2).unwrap_err();
                assert_eq!(policy_err_key(&e), err_key(&want));
            }
        }
    }
}

/// Finite weights whose column sum does not fit an `f32`: not an attention error but a score
/// error, at the first such column.
#[test]
fn a_sum_that_overflows_f32_is_a_score_error() {
    let mut d = vec![0.5f32; 3 * 20];
    for r in 0..3 {
        d[r * 20 + 13] = f32::MAX;
        d[r * 20 + 17] = -f32::MAX;
    }
    let a = Matrix::new(3, 20, d).unwrap();
    let e = h2o(&a, 4, 1).unwrap_err();
    assert_eq!(
        err_key(&e),
        err_key(&SelectError::NonFinite {
            what: "score",
            index: 13,
            value: f32::INFINITY
        })
    );
    assert!(same_selection(&h2o(&a, 4, 1), &ref_h2o(&a, 4, 1)));
    // The budget is checked before the scores.
    assert_eq!(
        h2o(&a, 0, 1).unwrap_err(),
        SelectError::Budget {
            budget: 0,
            total: 20
        }
    );
    let s = observation_scores(&a, 2, Pooling::None).unwrap();
    assert_eq!(s[13], f32::INFINITY);
    assert_eq!(s[17], f32::NEG_INFINITY);
}

/// Ties: equal scores go to the lower index whatever else is equal, and `-0.0` ranks below
/// `+0.0` (the total order).
#[test]
fn ties_and_signed_zeros_follow_the_total_order() {
    let scores = [0.0, -0.0, 1.0, 1.0, -0.0, 0.0, 1.0, 0.5, 0.5, 0.0];
    for budget in 1..=scores.len() {
        for recent in 0..4 {
            let got = snapkv(&scores, budget, recent);
            let want = ref_heavy_plus_recent(&scores, budget, recent);
            assert!(same_selection(&got, &want), "B {budget} r {recent}");
        }
    }
    let s = snapkv(&scores, 6, 0).unwrap();
    assert_eq!(s.kept, vec![0, 2, 3, 6, 7, 8]);
    assert_eq!(
        snapkv(&scores, 8, 0).unwrap().kept,
        vec![0, 2, 3, 5, 6, 7, 8, 9]
    );
    let flat = vec![1.0f32; 100];
    assert_eq!(
        snapkv(&flat, 10, 3).unwrap().kept,
        (0..7).chain(97..100).collect::<Vec<_>>()
    );
    assert_eq!(
        Ordering::Less,
        (-0.0f32).total_cmp(&0.0),
        "the order the kernels follow"
    );
}
