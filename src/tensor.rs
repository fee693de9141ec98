//! `Matrix`: a row-major `f32` matrix with a validated shape.
//!
//! Every tensor in the note is a matrix here: a KV tensor `X` is `T x d` (tokens x channels),
//! an attention history `A` is `S x T` (steps x tokens). Shapes are checked once, at
//! construction, so the rest of the crate can index without fear.

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
/// use kvlab::Matrix;
/// let m = Matrix::new(2, 3, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
/// assert_eq!(m.get(1, 0), Some(4.0));
/// assert_eq!(m.row(1), Some(&[4.0, 5.0, 6.0][..]));
/// assert!(Matrix::new(2, 2, vec![1.0]).is_err());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    rows: usize,
    cols: usize,
    data: Vec<f32>,
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
        Ok(Self { rows, cols, data })
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
        }
    }

    /// Index of the first NaN or infinite value, as `(row, col)`, if any.
    pub fn first_non_finite(&self) -> Option<(usize, usize)> {
        self.data
            .iter()
            .position(|v| !v.is_finite())
            .map(|i| (i / self.cols, i % self.cols))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
