//! `Matrix`: a row-major `f32` matrix with a validated shape.
//!
//! Every tensor in the note is a matrix here: a KV tensor `X` is `T x d` (tokens x channels),
//! an attention history `A` is `S x T` (steps x tokens). Shapes are checked once, at
//! construction, so the rest of the crate can index without fear.

use std::fmt;
use std::sync::OnceLock;
use thiserror::Error;

/// Why a [`Matrix`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ShapeError {
    /// `rows` or `cols` is zero: a matrix needs at least one element.
    #[error("empty matrix {rows} x {cols}: rows and cols must both be at least 1")]
    Empty {
        /// Rows asked for.
        rows: usize,
        /// Columns asked for.
        cols: usize,
    },
    /// `rows * cols` does not fit in `usize`.
    #[error("shape {rows} x {cols} is too large: rows * cols overflows")]
    Overflow {
        /// Rows asked for.
        rows: usize,
        /// Columns asked for.
        cols: usize,
    },
    /// The data length is not `rows * cols`.
    #[error("data has {len} values but shape {rows} x {cols} needs {expected}")]
    Length {
        /// Rows asked for.
        rows: usize,
        /// Columns asked for.
        cols: usize,
        /// `rows * cols`.
        expected: usize,
        /// Length of the data given.
        len: usize,
    },
}

/// A dense row-major `f32` matrix with `rows >= 1`, `cols >= 1` and `data.len() == rows * cols`.
///
/// ```
/// use kvlab_core::Matrix;
/// let m = Matrix::new(2, 3, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
/// assert_eq!(m.get(1, 0), Some(4.0));
/// assert_eq!(m.row(1), Some(&[4.0, 5.0, 6.0][..]));
/// assert!(Matrix::new(2, 2, vec![1.0]).is_err());
/// ```
///
/// A matrix never changes after it is built, so it remembers where its first non-finite value
/// is once asked ([`Matrix::first_non_finite`]): the page's data is checked once, not on every
/// selection.
#[derive(Clone)]
pub struct Matrix {
    rows: usize,
    cols: usize,
    data: Vec<f32>,
    /// The flat index of the first NaN or infinite value, once computed.
    non_finite: OnceLock<Option<usize>>,
}

/// Shape and values (what the matrix remembers about them is not part of its value).
impl PartialEq for Matrix {
    fn eq(&self, other: &Self) -> bool {
        self.rows == other.rows && self.cols == other.cols && self.data == other.data
    }
}

impl fmt::Debug for Matrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Matrix")
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .field("data", &self.data)
            .finish()
    }
}

/// Whether every value of `xs` is finite, at memory speed: `x * 0.0` is `±0.0` for a finite
/// `x` and NaN for an infinity or NaN, and a sum of zeros never becomes NaN, so the lane sums
/// below are NaN exactly when some value is not finite (lanes so that the compiler vectorises).
pub fn all_finite(xs: &[f32]) -> bool {
    const LANES: usize = 16;
    let mut lanes = [0f32; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for c in &mut chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l += x * 0.0;
        }
    }
    lanes.iter().all(|l| !l.is_nan()) && chunks.remainder().iter().all(|x| x.is_finite())
}

/// Index of the first value of `xs` that is NaN or infinite.
pub fn first_non_finite(xs: &[f32]) -> Option<usize> {
    if all_finite(xs) {
        None
    } else {
        xs.iter().position(|v| !v.is_finite())
    }
}

impl Matrix {
    /// Builds a `rows x cols` matrix from row-major `data`.
    ///
    /// Errors when a dimension is zero, the element count overflows, or
    /// `data.len() != rows * cols`. Values are not checked for NaN here: operations that cannot
    /// accept them (quantization, selection) say so themselves.
    pub fn new(rows: usize, cols: usize, data: Vec<f32>) -> Result<Self, ShapeError> {
        if rows == 0 || cols == 0 {
            return Err(ShapeError::Empty { rows, cols });
        }
        let expected = rows
            .checked_mul(cols)
            .ok_or(ShapeError::Overflow { rows, cols })?;
        if data.len() != expected {
            return Err(ShapeError::Length {
                rows,
                cols,
                expected,
                len: data.len(),
            });
        }
        Ok(Self {
            rows,
            cols,
            data,
            non_finite: OnceLock::new(),
        })
    }

    /// A `rows x cols` matrix filled with `value`.
    pub fn filled(rows: usize, cols: usize, value: f32) -> Result<Self, ShapeError> {
        let n = rows
            .checked_mul(cols)
            .ok_or(ShapeError::Overflow { rows, cols })?;
        Self::new(rows, cols, vec![value; n])
    }

    /// Number of rows (tokens for a KV tensor, steps for an attention history).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns (channels for a KV tensor, tokens for an attention history).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The row-major data, `rows * cols` values.
    pub fn data(&self) -> &[f32] {
        &self.data
    }

    /// Consumes the matrix and returns its row-major data.
    pub fn into_data(self) -> Vec<f32> {
        self.data
    }

    /// The element at (`row`, `col`), or `None` when out of range.
    pub fn get(&self, row: usize, col: usize) -> Option<f32> {
        if row < self.rows && col < self.cols {
            self.data.get(row * self.cols + col).copied()
        } else {
            None
        }
    }

    /// Row `row` as a slice of `cols` values, or `None` when out of range.
    pub fn row(&self, row: usize) -> Option<&[f32]> {
        if row < self.rows {
            self.data.get(row * self.cols..(row + 1) * self.cols)
        } else {
            None
        }
    }

    /// Iterator over the rows, each a slice of `cols` values.
    pub fn iter_rows(&self) -> std::slice::ChunksExact<'_, f32> {
        self.data.chunks_exact(self.cols)
    }

    /// Column `col` copied out (`rows` values), or `None` when out of range.
    pub fn column(&self, col: usize) -> Option<Vec<f32>> {
        if col < self.cols {
            Some(self.iter_rows().map(|r| r[col]).collect())
        } else {
            None
        }
    }

    /// The last `n` rows as a new matrix (`n` clamped to `1..=rows`).
    pub fn last_rows(&self, n: usize) -> Matrix {
        let n = n.clamp(1, self.rows);
        let start = (self.rows - n) * self.cols;
        Matrix {
            rows: n,
            cols: self.cols,
            data: self.data[start..].to_vec(),
            non_finite: OnceLock::new(),
        }
    }

    /// Index of the first NaN or infinite value, as `(row, col)`, if any. Computed once per
    /// matrix (one vectorised pass), then remembered.
    pub fn first_non_finite(&self) -> Option<(usize, usize)> {
        self.first_non_finite_index()
            .map(|i| (i / self.cols, i % self.cols))
    }

    /// [`Matrix::first_non_finite`] as a flat row-major index.
    pub fn first_non_finite_index(&self) -> Option<usize> {
        *self.non_finite.get_or_init(|| first_non_finite(&self.data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The remembered check answers as a scan of the values does, and what a matrix remembers
    /// is not part of its value (equality, clones and `Debug` are about shape and values).
    #[test]
    fn the_remembered_finite_check_matches_a_scan() {
        for bad in [None, Some(0), Some(5), Some(17), Some(39)] {
            for v in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
                let mut data: Vec<f32> = (0..40).map(|i| i as f32 * 0.5 - 3.0).collect();
                if let Some(i) = bad {
                    data[i] = v;
                    data[39] = v; // a later bad value does not change the answer
                }
                let m = Matrix::new(8, 5, data.clone()).unwrap();
                let fresh = m.clone();
                let want = data.iter().position(|x| !x.is_finite());
                assert_eq!(m.first_non_finite_index(), want);
                assert_eq!(m.first_non_finite_index(), want, "asked again");
                assert_eq!(m.first_non_finite(), want.map(|i| (i / 5, i % 5)));
                if bad.is_none() {
                    assert_eq!(m, fresh);
                }
                assert_eq!(format!("{m:?}"), format!("{fresh:?}"));
                assert!(format!("{m:?}").starts_with("Matrix { rows: 8, cols: 5, data: ["));
                assert_eq!(m.last_rows(3).first_non_finite_index(), {
                    data[25..].iter().position(|x| !x.is_finite())
                });
            }
        }
    }

    #[test]
    fn shape_errors_name_the_problem() {
        assert_eq!(
            Matrix::new(0, 3, vec![]),
            Err(ShapeError::Empty { rows: 0, cols: 3 })
        );
        let e = Matrix::new(2, 2, vec![1.0; 3]).unwrap_err();
        assert_eq!(e.to_string(), "data has 3 values but shape 2 x 2 needs 4");
        assert!(matches!(
            Matrix::new(usize::MAX, 2, vec![]),
            Err(ShapeError::Overflow { .. })
        ));
    }

    #[test]
    fn accessors() {
        let m = Matrix::new(2, 2, vec![1.0, 2.0, 3.0, f32::NAN]).unwrap();
        assert_eq!(m.column(1).unwrap()[0], 2.0);
        assert_eq!(m.get(2, 0), None);
        assert_eq!(m.row(2), None);
        assert_eq!(m.first_non_finite(), Some((1, 1)));
        assert_eq!(m.last_rows(1).data()[0], 3.0);
        assert_eq!(m.last_rows(9).rows(), 2);
    }
}
