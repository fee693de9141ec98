//! Shape interpretation (issue 3, "Shape interpretation, shown to the user before use"): turns a
//! loaded [`Tensor`] into the matrices the note works with, with checks and a description.
//!
//! - Attention `A` (note section 3): `[S, T]` (S query steps over T tokens), `[T, T]` (a full
//!   causal matrix: row `t` is step `t`; its last rows are SnapKV's observation window), or
//!   `[H, S, T]` (per head: pick one, or aggregate by mean / max / sum). Checked: finite,
//!   non-negative; rows that do not sum to 1 give a [`LoadWarning`] and [`normalise_rows`] fixes
//!   them on request.
//! - KV `X` (note section 2): `[T, d]`, `[H, T, d]` or `[L, H, T, d]` with a layer / head pick.
//!   Checked: finite.
//! - Pairs: [`check_same_tokens`] (attention's `T` = KV's `T`) and [`check_kv_pair`] (K's `T` =
//!   V's `T`).

use super::error::{ATTENTION_SHAPES, KV_SHAPES};
use super::{multi_index, LoadError, LoadWarning, Tensor, TokenMismatch};
use crate::Matrix;

/// Rows of an attention matrix are accepted as distributions when `|sum - 1| <= 0.01`: loose
/// enough for float16 storage of long rows (relative error `2^-11` per value), tight enough to
/// catch logits, masks or unnormalised scores.
pub const ROW_SUM_TOLERANCE: f32 = 1e-2;

/// How to reduce `[H, S, T]` attention to one `[S, T]` matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HeadPick {
    /// Head `h`, in `0..H`.
    Head(usize),
    /// `A[s][t] = (1/H) sum_h A_h[s][t]`: rows still sum to 1.
    #[default]
    Mean,
    /// `A[s][t] = max_h A_h[s][t]`: rows sum to >= 1.
    Max,
    /// `A[s][t] = sum_h A_h[s][t]`: rows sum to H (H2O's scores are the same up to scale).
    Sum,
}

/// Which `[T, d]` slice of a KV tensor to use. Ignored axes (for `[T, d]`) are not checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KvPick {
    /// Layer in `0..L` (only for `[L, H, T, d]`).
    pub layer: usize,
    /// Head in `0..H` (for `[H, T, d]` and `[L, H, T, d]`).
    pub head: usize,
}

/// What an `[S, T]` attention matrix is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionKind {
    /// `S` query steps over `T` tokens.
    Steps,
    /// `S == T` and nothing above the diagonal: the whole causal history; the last rows are the
    /// observation window.
    FullCausal,
}

/// An attention matrix ready for the note's formulas, with what the page shows before use.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionView {
    /// `A`, `S x T` (steps x tokens).
    pub matrix: Matrix,
    /// Steps or a full causal matrix.
    pub kind: AttentionKind,
    /// `H` when the input was `[H, S, T]`.
    pub heads: Option<usize>,
    /// E.g. `attention [H=8, S=64, T=512]: head 3 of 8 (heads 0 to 7); 64 query steps over 512 tokens`.
    pub description: String,
    /// What `description` says, as fields.
    pub about: AttentionAbout,
    /// Suspicious but usable: rows not summing to 1 (offer [`normalise_rows`]).
    pub warnings: Vec<LoadWarning>,
}

impl AttentionView {
    /// `S`, the number of query steps (rows).
    pub fn steps(&self) -> usize {
        self.matrix.rows()
    }

    /// `T`, the number of tokens (columns).
    pub fn tokens(&self) -> usize {
        self.matrix.cols()
    }
}

/// A KV matrix ready for the note's formulas.
#[derive(Debug, Clone, PartialEq)]
pub struct KvView {
    /// `X`, `T x d` (tokens x channels).
    pub matrix: Matrix,
    /// `L` when the input was `[L, H, T, d]`.
    pub layers: Option<usize>,
    /// `H` when the input was `[H, T, d]` or `[L, H, T, d]`.
    pub heads: Option<usize>,
    /// E.g. `KV [L=32, H=8, T=512, d=128]: layer 5 of 32 (layers 0 to 31), head 3 of 8 (heads
    /// 0..=7); 512 tokens x 128 channels`.
    pub description: String,
    /// What `description` says, as fields.
    pub about: KvAbout,
}

impl KvView {
    /// `T`, the number of tokens (rows).
    pub fn tokens(&self) -> usize {
        self.matrix.rows()
    }

    /// `d`, the number of channels (columns).
    pub fn channels(&self) -> usize {
        self.matrix.cols()
    }
}

fn empty(file: &str, role: &str, shape: &[usize]) -> LoadError {
    LoadError::EmptyTensor {
        file: file.to_string(),
        field: role.to_string(),
        shape: shape.to_vec(),
    }
}

fn out_of_range(file: &str, axis: &str, index: usize, len: usize) -> LoadError {
    LoadError::PickOutOfRange {
        file: file.to_string(),
        axis: axis.to_string(),
        index,
        len,
    }
}

/// The first non-finite value in `values` (which start at flat position `offset` of a tensor of
/// `shape`) as an error.
fn check_finite_slice(
    file: &str,
    role: &str,
    shape: &[usize],
    offset: usize,
    values: &[f32],
) -> Result<(), LoadError> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(p) => Err(LoadError::NonFinite {
            file: file.to_string(),
            field: role.to_string(),
            index: multi_index(shape, offset.saturating_add(p)),
            value: values.get(p).map(|v| v.to_string()).unwrap_or_default(),
        }),
        None => Ok(()),
    }
}

/// `shape` without its leading axes of length 1, down to two axes: a batch of one (Hugging
/// Face's `[1, H, S, T]` attention, `[1, H, T, d]` cache tensors) or a single head or layer
/// holds nothing to pick, and the data's order is the same without them. (Errors still name
/// the file's own shape and multi-indices.)
///
/// ```
/// use kvlab_io::squeezed;
/// assert_eq!(squeezed(&[1, 4, 8, 8]), &[4, 8, 8]);
/// assert_eq!(squeezed(&[1, 1, 8]), &[1, 8]);
/// assert_eq!(squeezed(&[3, 1, 8]), &[3, 1, 8]);
/// ```
pub fn squeezed(shape: &[usize]) -> &[usize] {
    let mut s = shape;
    while s.len() > 2 && s.first() == Some(&1) {
        s = &s[1..];
    }
    s
}

/// Interprets a tensor as attention `A` (`S x T`).
///
/// Leading axes of length 1 are dropped first ([`squeezed`]). Accepts `[S, T]`, `[T, T]`
/// (reported as [`AttentionKind::FullCausal`] when nothing lies
/// above the diagonal) and `[H, S, T]` reduced by `pick` (ignored for rank 2). Errors:
/// [`LoadError::WrongRank`], [`LoadError::EmptyTensor`], [`LoadError::PickOutOfRange`],
/// [`LoadError::NonFinite`] and [`LoadError::NegativeWeight`] (both naming the first bad
/// multi-index among the heads used). Rows whose sum is off 1 by more than
/// [`ROW_SUM_TOLERANCE`] give a [`LoadWarning::RowSums`].
///
/// ```
/// use kvlab_io::{interpret_attention, AttentionKind, HeadPick, Tensor};
/// let a = Tensor::new(vec![2, 2], vec![1.0, 0.0, 0.5, 0.5]).unwrap();
/// let v = interpret_attention("a.npy", &a, HeadPick::Mean).unwrap();
/// assert_eq!(v.kind, AttentionKind::FullCausal);
/// assert!(v.warnings.is_empty());
/// assert_eq!(v.description, "attention [T=2, T=2]: full causal matrix; the last rows are the observation window");
/// ```
pub fn interpret_attention(
    source: &str,
    tensor: &Tensor,
    pick: HeadPick,
) -> Result<AttentionView, LoadError> {
    let shape = tensor.shape();
    let (heads, s, t) = match *squeezed(shape) {
        [s, t] => (None, s, t),
        [h, s, t] => (Some(h), s, t),
        _ => {
            return Err(LoadError::WrongRank {
                file: source.to_string(),
                role: "attention".to_string(),
                shape: shape.to_vec(),
                expected: ATTENTION_SHAPES.to_string(),
            })
        }
    };
    if tensor.is_empty() {
        return Err(empty(source, "attention", shape));
    }
    let plane = s.saturating_mul(t);
    let h = heads.unwrap_or(1);
    let used: Vec<usize> = match (heads, pick) {
        (Some(h), HeadPick::Head(i)) if i >= h => return Err(out_of_range(source, "head", i, h)),
        (Some(_), HeadPick::Head(i)) => vec![i],
        _ => (0..h).collect(),
    };
    let planes: Vec<(usize, &[f32])> = used
        .iter()
        .filter_map(|&hi| {
            let start = hi.checked_mul(plane)?;
            Some((start, tensor.data().get(start..start.checked_add(plane)?)?))
        })
        .collect();

    for &(start, values) in &planes {
        check_finite_slice(source, "attention", shape, start, values)?;
    }
    for &(start, values) in &planes {
        if let Some(p) = values.iter().position(|&v| v < 0.0) {
            return Err(LoadError::NegativeWeight {
                file: source.to_string(),
                index: multi_index(shape, start.saturating_add(p)),
                value: values.get(p).map(|v| v.to_string()).unwrap_or_default(),
            });
        }
    }

    let mut warnings = Vec::new();
    if let Some(w) = row_sum_warning(source, shape, &planes, t) {
        warnings.push(w);
    }

    let values: Vec<f32> = match (heads, pick) {
        (None, _) | (Some(_), HeadPick::Head(_)) => {
            planes.first().map(|(_, v)| v.to_vec()).unwrap_or_default()
        }
        (Some(_), HeadPick::Max) => (0..plane)
            .map(|i| {
                planes
                    .iter()
                    .filter_map(|(_, v)| v.get(i).copied())
                    .fold(f32::NEG_INFINITY, f32::max)
            })
            .collect(),
        (Some(h), HeadPick::Mean | HeadPick::Sum) => {
            let scale = if pick == HeadPick::Mean {
                h as f64
            } else {
                1.0
            };
            (0..plane)
                .map(|i| {
                    let sum: f64 = planes
                        .iter()
                        .filter_map(|(_, v)| v.get(i).copied())
                        .map(f64::from)
                        .sum();
                    (sum / scale) as f32
                })
                .collect()
        }
    };
    let matrix = Matrix::new(s, t, values).map_err(|_| empty(source, "attention", shape))?;

    let causal = s == t
        && matrix.iter_rows().enumerate().all(|(r, row)| {
            row.get(r + 1..)
                .map_or(true, |above| above.iter().all(|&v| v == 0.0))
        });
    let kind = if causal {
        AttentionKind::FullCausal
    } else {
        AttentionKind::Steps
    };
    let about = AttentionAbout {
        heads,
        steps: s,
        tokens: t,
        causal,
        pick: match pick {
            HeadPick::Head(_) => "head",
            HeadPick::Mean => "mean",
            HeadPick::Max => "max",
            HeadPick::Sum => "sum",
        },
        head: match pick {
            HeadPick::Head(i) => i,
            _ => 0,
        },
    };
    Ok(AttentionView {
        matrix,
        kind,
        heads,
        description: about.english(),
        about,
        warnings,
    })
}

/// What the page says about an attention matrix in use, as fields (the page words them in its
/// language; [`AttentionAbout::english`] is [`AttentionView::description`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttentionAbout {
    /// `H` when the input was `[H, S, T]`.
    pub heads: Option<usize>,
    /// `S`.
    pub steps: usize,
    /// `T`.
    pub tokens: usize,
    /// A full causal `[T, T]` matrix (nothing above the diagonal).
    pub causal: bool,
    /// How the heads were reduced: `head`, `mean`, `max` or `sum` (only read with `heads`).
    pub pick: &'static str,
    /// The head used with `pick` = `head`.
    pub head: usize,
}

impl AttentionAbout {
    /// The English line, e.g. `attention [H=8, S=64, T=512]: head 3 of 8 (heads 0 to 7); 64
    /// query steps over 512 tokens`.
    pub fn english(&self) -> String {
        let (s, t) = (self.steps, self.tokens);
        let dims = match self.heads {
            Some(h) if self.causal => format!("[H={h}, T={t}, T={t}]"),
            Some(h) => format!("[H={h}, S={s}, T={t}]"),
            None if self.causal => format!("[T={t}, T={t}]"),
            None => format!("[S={s}, T={t}]"),
        };
        let head_text = match (self.heads, self.pick) {
            (None, _) => String::new(),
            (Some(h), "mean") => format!("mean over {h} heads; "),
            (Some(h), "max") => format!("max over {h} heads (rows no longer sum to 1); "),
            (Some(h), "sum") => format!("sum over {h} heads (rows sum to {h}); "),
            (Some(h), _) => format!(
                "head {} of {h} (heads 0 to {}); ",
                self.head,
                h.saturating_sub(1)
            ),
        };
        let body = if self.causal {
            "full causal matrix; the last rows are the observation window".to_string()
        } else if s == t {
            format!("{s} query steps over {t} tokens (square, but with weight above the diagonal, so not a causal history)")
        } else {
            format!("{s} query steps over {t} tokens")
        };
        format!("attention {dims}: {head_text}{body}")
    }
}

/// Counts rows (over the heads used) whose sum is off 1 by more than the tolerance.
fn row_sum_warning(
    source: &str,
    shape: &[usize],
    planes: &[(usize, &[f32])],
    t: usize,
) -> Option<LoadWarning> {
    let mut rows = 0usize;
    let mut off = 0usize;
    let mut worst: Option<(f64, usize, f32)> = None; // (|sum - 1|, flat row start, sum)
    for &(start, values) in planes {
        for (r, row) in values.chunks_exact(t.max(1)).enumerate() {
            rows += 1;
            let sum: f64 = row.iter().map(|&v| f64::from(v)).sum();
            let dev = (sum - 1.0).abs();
            if dev > f64::from(ROW_SUM_TOLERANCE) {
                off += 1;
                if worst.map_or(true, |(w, _, _)| dev > w) {
                    let row_start = start.saturating_add(r.saturating_mul(t));
                    worst = Some((dev, row_start, sum as f32));
                }
            }
        }
    }
    let (_, row_start, worst_sum) = worst?;
    let mut worst_row = multi_index(shape, row_start);
    worst_row.pop();
    Some(LoadWarning::RowSums {
        file: source.to_string(),
        rows_off: off,
        rows,
        worst_row,
        worst_sum,
        tolerance: ROW_SUM_TOLERANCE,
    })
}

/// Divides each row of `matrix` by its sum so rows become distributions (sum 1), as offered by
/// [`LoadWarning::RowSums`]. Rows whose sum is not a positive finite number are left as they are;
/// returns how many such rows there were (0 when every row was normalised).
///
/// ```
/// use kvlab_core::Matrix;
/// use kvlab_io::normalise_rows;
/// let mut m = Matrix::new(2, 2, vec![1.0, 3.0, 0.0, 0.0]).unwrap();
/// assert_eq!(normalise_rows(&mut m), 1);
/// assert_eq!(m.data(), &[0.25, 0.75, 0.0, 0.0]);
/// ```
pub fn normalise_rows(matrix: &mut Matrix) -> usize {
    let mut skipped = 0usize;
    let mut data = Vec::with_capacity(matrix.data().len());
    for row in matrix.iter_rows() {
        let sum: f64 = row.iter().map(|&v| f64::from(v)).sum();
        if sum > 0.0 && sum.is_finite() {
            data.extend(row.iter().map(|&v| (f64::from(v) / sum) as f32));
        } else {
            skipped += 1;
            data.extend_from_slice(row);
        }
    }
    if let Ok(m) = Matrix::new(matrix.rows(), matrix.cols(), data) {
        *matrix = m;
    }
    skipped
}

/// Interprets a tensor as a KV matrix `X` (`T x d`).
///
/// Leading axes of length 1 are dropped first ([`squeezed`]). Accepts `[T, d]`, `[H, T, d]`
/// (uses `pick.head`) and `[L, H, T, d]` (uses `pick.layer` and
/// `pick.head`). Errors: [`LoadError::WrongRank`], [`LoadError::EmptyTensor`],
/// [`LoadError::PickOutOfRange`], [`LoadError::NonFinite`] (first bad multi-index in the slice
/// used).
///
/// ```
/// use kvlab_io::{interpret_kv, KvPick, Tensor};
/// let x = Tensor::new(vec![2, 3, 2], (0..12).map(|v| v as f32).collect()).unwrap();
/// let v = interpret_kv("k.npy", &x, KvPick { layer: 0, head: 1 }).unwrap();
/// assert_eq!(v.matrix.data(), &[6.0, 7.0, 8.0, 9.0, 10.0, 11.0]);
/// assert_eq!(v.description, "KV [H=2, T=3, d=2]: head 1 of 2 (heads 0 to 1); 3 tokens x 2 channels");
/// ```
pub fn interpret_kv(source: &str, tensor: &Tensor, pick: KvPick) -> Result<KvView, LoadError> {
    let shape = tensor.shape();
    let (layers, heads, t, d) = match *squeezed(shape) {
        [t, d] => (None, None, t, d),
        [h, t, d] => (None, Some(h), t, d),
        [l, h, t, d] => (Some(l), Some(h), t, d),
        _ => {
            return Err(LoadError::WrongRank {
                file: source.to_string(),
                role: "KV".to_string(),
                shape: shape.to_vec(),
                expected: KV_SHAPES.to_string(),
            })
        }
    };
    if tensor.is_empty() {
        return Err(empty(source, "KV", shape));
    }
    if let Some(l) = layers {
        if pick.layer >= l {
            return Err(out_of_range(source, "layer", pick.layer, l));
        }
    }
    if let Some(h) = heads {
        if pick.head >= h {
            return Err(out_of_range(source, "head", pick.head, h));
        }
    }
    let plane = t.saturating_mul(d);
    let slot = match (layers, heads) {
        (Some(_), Some(h)) => pick.layer.saturating_mul(h).saturating_add(pick.head),
        (None, Some(_)) => pick.head,
        _ => 0,
    };
    let start = slot.saturating_mul(plane);
    let values = tensor
        .data()
        .get(start..start.saturating_add(plane))
        .ok_or_else(|| empty(source, "KV", shape))?;
    check_finite_slice(source, "KV", shape, start, values)?;
    let matrix = Matrix::new(t, d, values.to_vec()).map_err(|_| empty(source, "KV", shape))?;
    let about = KvAbout {
        layers,
        heads,
        tokens: t,
        channels: d,
        layer: pick.layer,
        head: pick.head,
    };
    Ok(KvView {
        matrix,
        layers,
        heads,
        description: about.english(),
        about,
    })
}

/// What the page says about a KV matrix in use, as fields (the page words them in its language;
/// [`KvAbout::english`] is [`KvView::description`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KvAbout {
    /// `L` when the input was `[L, H, T, d]`.
    pub layers: Option<usize>,
    /// `H` when the input was `[H, T, d]` or `[L, H, T, d]`.
    pub heads: Option<usize>,
    /// `T`.
    pub tokens: usize,
    /// `d`.
    pub channels: usize,
    /// The layer used (read with `layers`).
    pub layer: usize,
    /// The head used (read with `heads`).
    pub head: usize,
}

impl KvAbout {
    /// The English line, e.g. `KV [L=32, H=8, T=512, d=128]: layer 5 of 32 (layers 0 to 31),
    /// head 3 of 8 (heads 0 to 7); 512 tokens x 128 channels`.
    pub fn english(&self) -> String {
        self.english_as("KV")
    }

    /// The English line with `name` in place of `KV`: the upload's description names the
    /// role a matrix plays, `K [T=40, d=8]: 40 tokens x 8 channels` or `V [...]: ...`.
    pub fn english_as(&self, name: &str) -> String {
        let (t, d) = (self.tokens, self.channels);
        let (dims, pick_text) = match (self.layers, self.heads) {
            (Some(l), Some(h)) => (
                format!("[L={l}, H={h}, T={t}, d={d}]"),
                format!(
                    "layer {} of {l} (layers 0 to {}), head {} of {h} (heads 0 to {}); ",
                    self.layer,
                    l.saturating_sub(1),
                    self.head,
                    h.saturating_sub(1)
                ),
            ),
            (_, Some(h)) => (
                format!("[H={h}, T={t}, d={d}]"),
                format!(
                    "head {} of {h} (heads 0 to {}); ",
                    self.head,
                    h.saturating_sub(1)
                ),
            ),
            _ => (format!("[T={t}, d={d}]"), String::new()),
        };
        format!("{name} {dims}: {pick_text}{t} tokens x {d} channels")
    }
}

/// Checks the attention's `T` (its last axis, the tokens attended to) equals the KV tensor's `T`
/// (its rows).
///
/// ```
/// use kvlab_io::check_same_tokens;
/// assert!(check_same_tokens(512, 512).is_ok());
/// assert!(check_same_tokens(512, 500).is_err());
/// ```
pub fn check_same_tokens(attention_t: usize, kv_t: usize) -> Result<(), TokenMismatch> {
    same_tokens("attention", attention_t, "the KV tensor", kv_t)
}

/// Checks K and V cover the same tokens (their `d` may differ).
pub fn check_kv_pair(k: &KvView, v: &KvView) -> Result<(), TokenMismatch> {
    check_k_v_tokens(k.tokens(), v.tokens())
}

/// Checks K's `T` (its rows) equals V's.
pub(crate) fn check_k_v_tokens(k_t: usize, v_t: usize) -> Result<(), TokenMismatch> {
    same_tokens("K", k_t, "V", v_t)
}

fn same_tokens(
    left: &str,
    left_t: usize,
    right: &str,
    right_t: usize,
) -> Result<(), TokenMismatch> {
    if left_t == right_t {
        Ok(())
    } else {
        Err(TokenMismatch {
            left: left.to_string(),
            left_t,
            right: right.to_string(),
            right_t,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: Vec<usize>, data: Vec<f32>) -> Tensor {
        Tensor::new(shape, data).unwrap()
    }

    #[test]
    fn heads_are_reduced() {
        // H=2, S=1, T=2.
        let a = t(vec![2, 1, 2], vec![0.25, 0.75, 0.75, 0.25]);
        let m = |p| interpret_attention("a", &a, p).unwrap().matrix.into_data();
        assert_eq!(m(HeadPick::Head(1)), vec![0.75, 0.25]);
        assert_eq!(m(HeadPick::Mean), vec![0.5, 0.5]);
        assert_eq!(m(HeadPick::Max), vec![0.75, 0.75]);
        assert_eq!(m(HeadPick::Sum), vec![1.0, 1.0]);
        assert!(matches!(
            interpret_attention("a", &a, HeadPick::Head(2)),
            Err(LoadError::PickOutOfRange {
                index: 2,
                len: 2,
                ..
            })
        ));
    }

    #[test]
    fn checks_name_the_index() {
        let a = t(vec![2, 2, 2], vec![1.0, 0.0, 0.5, 0.5, 1.0, 0.0, 0.5, -0.1]);
        assert_eq!(
            interpret_attention("a", &a, HeadPick::Mean),
            Err(LoadError::NegativeWeight {
                file: "a".into(),
                index: vec![1, 1, 1],
                value: "-0.1".into()
            })
        );
        // Head 0 alone is fine.
        assert!(interpret_attention("a", &a, HeadPick::Head(0)).is_ok());
        let a = t(vec![1, 3], vec![0.5, f32::NAN, 0.5]);
        assert!(matches!(
            interpret_attention("a", &a, HeadPick::Mean),
            Err(LoadError::NonFinite { ref index, .. }) if index == &vec![0, 1]
        ));
    }

    #[test]
    fn row_sums_warn_and_normalise() {
        let a = t(vec![2, 3], vec![0.2, 0.2, 0.2, 0.3, 0.3, 0.4]);
        let mut v = interpret_attention("a", &a, HeadPick::Mean).unwrap();
        assert_eq!(v.kind, AttentionKind::Steps);
        match &v.warnings[..] {
            [LoadWarning::RowSums {
                rows_off: 1,
                rows: 2,
                worst_row,
                ..
            }] => assert_eq!(worst_row, &vec![0]),
            w => panic!("{w:?}"),
        }
        assert_eq!(normalise_rows(&mut v.matrix), 0);
        let sum: f32 = v.matrix.row(0).unwrap().iter().sum();
        assert!((sum - 1.0).abs() < 1e-6);
    }

    #[test]
    fn kv_picks() {
        let x = t(vec![2, 2, 1, 2], (0..8).map(|v| v as f32).collect());
        let v = interpret_kv("k", &x, KvPick { layer: 1, head: 0 }).unwrap();
        assert_eq!(v.matrix.data(), &[4.0, 5.0]);
        assert_eq!(
            v.description,
            "KV [L=2, H=2, T=1, d=2]: layer 1 of 2 (layers 0 to 1), head 0 of 2 (heads 0 to 1); 1 tokens x 2 channels"
        );
        assert!(matches!(
            interpret_kv("k", &x, KvPick { layer: 2, head: 0 }),
            Err(LoadError::PickOutOfRange { .. })
        ));
        assert!(matches!(
            interpret_kv("k", &t(vec![4], vec![0.0; 4]), KvPick::default()),
            Err(LoadError::WrongRank { .. })
        ));
    }
}
