//! Matrix products for the trainer: strided views into flat `f32` buffers and one safe
//! function over the `gemm` crate (the one candle calls), so that a transposed operand or a
//! head's columns inside a wider buffer are a view, never a copy.

/// A matrix inside a slice: element `(i, j)` at `off + i * rs + j * cs`.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    data: &'a [f32],
    off: usize,
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

/// A writable matrix inside a slice, laid out as [`View`].
#[derive(Debug)]
pub struct ViewMut<'a> {
    data: &'a mut [f32],
    off: usize,
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

/// The highest index a view touches must lie in its slice: the products below trust it.
fn check(len: usize, off: usize, rows: usize, cols: usize, rs: usize, cs: usize) {
    if rows > 0 && cols > 0 {
        let last = off + (rows - 1) * rs + (cols - 1) * cs;
        assert!(
            last < len,
            "a {rows} x {cols} view (offset {off}, strides {rs}, {cs}) reaches {last}, past {len}"
        );
    }
}

impl<'a> View<'a> {
    /// The row-major `rows x cols` matrix that is `data` (its first `rows * cols` values).
    pub fn new(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Self::strided(data, 0, rows, cols, cols)
    }

    /// `rows x cols` at `off`, rows `rs` apart, columns adjacent: a block of a wider matrix.
    pub fn strided(data: &'a [f32], off: usize, rows: usize, cols: usize, rs: usize) -> Self {
        check(data.len(), off, rows, cols, rs, 1);
        View {
            data,
            off,
            rows,
            cols,
            rs,
            cs: 1,
        }
    }

    /// The transpose (no copy).
    pub fn t(self) -> Self {
        View {
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
            ..self
        }
    }

    /// The first `rows` rows and `cols` columns.
    pub fn top_left(self, rows: usize, cols: usize) -> Self {
        assert!(rows <= self.rows && cols <= self.cols);
        View { rows, cols, ..self }
    }

    /// Rows `from..` (all columns).
    pub fn rows_from(self, from: usize) -> Self {
        assert!(from <= self.rows);
        View {
            off: self.off + from * self.rs,
            rows: self.rows - from,
            ..self
        }
    }
}

impl<'a> ViewMut<'a> {
    /// The row-major `rows x cols` matrix that is `data` (its first `rows * cols` values).
    pub fn new(data: &'a mut [f32], rows: usize, cols: usize) -> Self {
        Self::strided(data, 0, rows, cols, cols)
    }

    /// `rows x cols` at `off`, rows `rs` apart, columns adjacent.
    pub fn strided(data: &'a mut [f32], off: usize, rows: usize, cols: usize, rs: usize) -> Self {
        check(data.len(), off, rows, cols, rs, 1);
        ViewMut {
            data,
            off,
            rows,
            cols,
            rs,
            cs: 1,
        }
    }

    /// The first `rows` rows and `cols` columns.
    pub fn top_left(self, rows: usize, cols: usize) -> Self {
        assert!(rows <= self.rows && cols <= self.cols);
        ViewMut { rows, cols, ..self }
    }

    /// Rows `from..` (all columns).
    pub fn rows_from(self, from: usize) -> Self {
        assert!(from <= self.rows);
        ViewMut {
            off: self.off + from * self.rs,
            rows: self.rows - from,
            ..self
        }
    }
}

/// `out = a b` (`accumulate`: `out += a b`), `a` `m x k`, `b` `k x n`, `out` `m x n`.
///
/// # Panics
/// When the shapes do not chain: the trainer's shapes are fixed by its config, so a mismatch
/// is a bug in the trainer, never a user's input.
pub fn matmul(out: ViewMut<'_>, a: View<'_>, b: View<'_>, accumulate: bool) {
    assert!(
        a.cols == b.rows && out.rows == a.rows && out.cols == b.cols,
        "{}x{} times {}x{} into {}x{}",
        a.rows,
        a.cols,
        b.rows,
        b.cols,
        out.rows,
        out.cols
    );
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                for j in 0..n {
                    out.data[out.off + i * out.rs + j * out.cs] = 0.0;
                }
            }
        }
        return;
    }
    // SAFETY: every view was bounds-checked when made (`check`): the highest element each one
    // reaches lies inside its slice, and `gemm` touches only elements of the three views. The
    // output is a `&mut` slice, so it cannot alias the inputs.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.data.as_mut_ptr().add(out.off),
            out.cs as isize,
            out.rs as isize,
            accumulate,
            a.data.as_ptr().add(a.off),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr().add(b.off),
            b.cs as isize,
            b.rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    c[i * n + j] += a[i * k + p] * b[p * n + j];
                }
            }
        }
        c
    }

    #[test]
    fn products_of_views_equal_the_naive_product() {
        let (m, k, n) = (7, 5, 3);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
        let want = naive(&a, &b, m, k, n);
        let mut c = vec![0.0; m * n];
        matmul(
            ViewMut::new(&mut c, m, n),
            View::new(&a, m, k),
            View::new(&b, k, n),
            false,
        );
        for (x, y) in c.iter().zip(&want) {
            assert!((x - y).abs() < 1e-5);
        }
        // accumulate doubles it
        matmul(
            ViewMut::new(&mut c, m, n),
            View::new(&a, m, k),
            View::new(&b, k, n),
            true,
        );
        for (x, y) in c.iter().zip(&want) {
            assert!((x - 2.0 * y).abs() < 1e-5);
        }
        // a transposed operand: (b^T)^T = b
        let bt: Vec<f32> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
        matmul(
            ViewMut::new(&mut c, m, n),
            View::new(&a, m, k),
            View::new(&bt, n, k).t(),
            false,
        );
        for (x, y) in c.iter().zip(&want) {
            assert!((x - y).abs() < 1e-5);
        }
        // into a column block of a wider buffer, leaving the rest untouched
        let mut wide = vec![9.0; m * (n + 2)];
        matmul(
            ViewMut::strided(&mut wide, 1, m, n, n + 2),
            View::new(&a, m, k),
            View::new(&b, k, n),
            false,
        );
        for i in 0..m {
            assert_eq!(wide[i * (n + 2)], 9.0);
            assert_eq!(wide[i * (n + 2) + n + 1], 9.0);
            for j in 0..n {
                assert!((wide[i * (n + 2) + 1 + j] - want[i * n + j]).abs() < 1e-5);
            }
        }
    }

    #[test]
    #[should_panic(expected = "past")]
    fn a_view_past_its_slice_is_refused() {
        let a = vec![0.0; 5];
        let _ = View::new(&a, 2, 3);
    }
}
