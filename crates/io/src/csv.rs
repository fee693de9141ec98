//! Delimited text reader (issue 3, "Loaders"): a matrix pasted from a spreadsheet, or written by
//! `numpy.savetxt`, as `.csv`, `.tsv` or `.txt`.
//!
//! Rules, in order:
//! - the bytes must be UTF-8 (a leading byte-order mark is dropped);
//! - blank lines and lines starting with `#` (numpy's `savetxt` header) are skipped;
//! - the delimiter is detected from the first content line: tab if it has one, else `;`, else
//!   `,`, else runs of spaces;
//! - the first content line is a header row when at least one of its cells is not a number
//!   (`0,1,2` column labels are read as data: the shape shown before use makes that visible);
//! - every row has the same number of cells as the first ([`LoadError::Ragged`]);
//! - every cell is a number (`1`, `-0.5`, `2e-3`; surrounding spaces and double quotes are
//!   dropped) ([`LoadError::NotANumber`]) and finite ([`LoadError::NonFinite`], naming the line,
//!   the column and the `[row, col]` index).
//!
//! The result is a rank-2 tensor `[rows, cols]`.

use super::{Limits, LoadError, Tensor};

/// The cell separator found on the first content line (for the page: `comma`, `tab`,
/// `semicolon` or `space`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Delimiter {
    /// `,`
    Comma,
    /// `\t`
    Tab,
    /// `;` (spreadsheets in locales with decimal commas)
    Semicolon,
    /// One or more spaces or tabs.
    #[serde(rename = "space")]
    Whitespace,
}

impl Delimiter {
    /// A name for the page: `comma-separated`, `tab-separated`...
    pub fn name(self) -> &'static str {
        match self {
            Delimiter::Comma => "comma-separated",
            Delimiter::Tab => "tab-separated",
            Delimiter::Semicolon => "semicolon-separated",
            Delimiter::Whitespace => "space-separated",
        }
    }

    /// Its name for the page's own wording (its serde form): `comma`, `tab`, `semicolon` or
    /// `space`.
    pub fn key(self) -> &'static str {
        match self {
            Delimiter::Comma => "comma",
            Delimiter::Tab => "tab",
            Delimiter::Semicolon => "semicolon",
            Delimiter::Whitespace => "space",
        }
    }

    /// Tab, else `;`, else `,`, else whitespace.
    fn detect(line: &str) -> Self {
        if line.contains('\t') {
            Delimiter::Tab
        } else if line.contains(';') {
            Delimiter::Semicolon
        } else if line.contains(',') {
            Delimiter::Comma
        } else {
            Delimiter::Whitespace
        }
    }

    fn split(self, line: &str) -> Vec<&str> {
        let cells: Vec<&str> = match self {
            Delimiter::Comma => line.split(',').collect(),
            Delimiter::Tab => line.split('\t').collect(),
            Delimiter::Semicolon => line.split(';').collect(),
            Delimiter::Whitespace => line.split_whitespace().collect(),
        };
        cells.into_iter().map(clean_cell).collect()
    }
}

/// Trims spaces and one pair of surrounding double quotes.
fn clean_cell(cell: &str) -> &str {
    let cell = cell.trim();
    cell.strip_prefix('"')
        .and_then(|c| c.strip_suffix('"'))
        .map_or(cell, str::trim)
}

/// A cell that marks its row as a header: not a number, and not a number written with a decimal
/// comma either (that row is data in the wrong locale and deserves [`LoadError::NotANumber`]'s
/// hint rather than being skipped).
fn is_header_cell(cell: &str) -> bool {
    cell.parse::<f32>().is_err() && cell.replace(',', ".").parse::<f32>().is_err()
}

/// A loaded table.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvTable {
    /// The values, shape `[rows, cols]`, rows >= 1 and cols >= 1.
    pub tensor: Tensor,
    /// The header row's cells, when the first row was not numeric.
    pub header: Option<Vec<String>>,
    /// The delimiter detected.
    pub delimiter: Delimiter,
}

/// Reads a delimited-text matrix.
///
/// Errors: [`LoadError::NotUtf8`], [`LoadError::Ragged`], [`LoadError::NotANumber`],
/// [`LoadError::NonFinite`], [`LoadError::TooManyElements`] (more than `limits.max_elements`
/// cells, checked before each row is stored), [`LoadError::EmptyTensor`] (no data row).
///
/// ```
/// use kvlab_io::{csv, Limits};
/// let t = csv::load("a.tsv", b"tok0\ttok1\n0.25\t0.75\n0.5\t0.5\n", &Limits::default()).unwrap();
/// assert_eq!(t.tensor.shape(), &[2, 2]);
/// assert_eq!(t.header, Some(vec!["tok0".to_string(), "tok1".to_string()]));
/// ```
pub fn load(file: &str, bytes: &[u8], limits: &Limits) -> Result<CsvTable, LoadError> {
    let text = super::utf8_text(file, bytes)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);

    let mut delimiter = None;
    let mut header = None;
    let mut cols = 0usize;
    let mut first_line = 0usize;
    let mut rows = 0usize;
    let mut data: Vec<f32> = Vec::new();
    for (i, raw) in text.split('\n').enumerate() {
        let line_no = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let delim = *delimiter.get_or_insert_with(|| Delimiter::detect(line));
        let cells = delim.split(line);
        if first_line == 0 {
            first_line = line_no;
            cols = cells.len();
            if cells.iter().any(|c| is_header_cell(c)) {
                header = Some(cells.iter().map(|c| c.to_string()).collect());
                continue;
            }
        }
        if cells.len() != cols {
            return Err(LoadError::Ragged {
                file: file.to_string(),
                line: line_no,
                found: cells.len(),
                expected: cols,
                first_line,
            });
        }
        if data.len().saturating_add(cols) > limits.max_elements {
            return Err(LoadError::TooManyElements {
                file: file.to_string(),
                field: "data".to_string(),
                shape: vec![rows.saturating_add(1), cols],
                max_elements: limits.max_elements,
            });
        }
        for (j, cell) in cells.iter().enumerate() {
            let value: f32 = cell.parse().map_err(|_| LoadError::NotANumber {
                file: file.to_string(),
                line: line_no,
                column: j + 1,
                text: cell.to_string(),
            })?;
            if !value.is_finite() {
                return Err(LoadError::NonFinite {
                    file: file.to_string(),
                    field: format!("line {line_no}, column {}", j + 1),
                    index: vec![rows, j],
                    value: cell.to_string(),
                });
            }
            data.push(value);
        }
        rows += 1;
    }
    if rows == 0 {
        return Err(LoadError::EmptyTensor {
            file: file.to_string(),
            field: if header.is_some() {
                "the table (a header row and no data rows)".to_string()
            } else {
                "the table".to_string()
            },
            shape: vec![0, cols],
        });
    }
    Ok(CsvTable {
        tensor: Tensor::new(vec![rows, cols], data)?,
        header,
        delimiter: delimiter.unwrap_or(Delimiter::Comma),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(s: &str) -> Result<CsvTable, LoadError> {
        load("t.csv", s.as_bytes(), &Limits::default())
    }

    #[test]
    fn delimiters() {
        assert_eq!(l("1;2\n3;4").unwrap().delimiter, Delimiter::Semicolon);
        assert_eq!(l("1 2\n3   4\n").unwrap().delimiter, Delimiter::Whitespace);
        assert_eq!(
            l("1,2\r\n3,4\r\n").unwrap().tensor.data(),
            &[1.0, 2.0, 3.0, 4.0]
        );
        assert_eq!(l("# a b\n1 2\n").unwrap().tensor.shape(), &[1, 2]);
        assert_eq!(
            l("\u{feff}\"a\",\"b\"\n\"1\", 2\n").unwrap().tensor.data(),
            &[1.0, 2.0]
        );
    }

    #[test]
    fn errors_name_the_place() {
        let e = l("1,2\n3,x\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.csv: line 2, column 2: 'x' is not a number"
        );
        let e = l("1;2,5\n").unwrap_err();
        assert!(e.to_string().contains("decimal commas"), "{e}");
        let e = l("a,b\n1,2\n3,nan\n").unwrap_err();
        assert_eq!(
            e,
            LoadError::NonFinite {
                file: "t.csv".into(),
                field: "line 3, column 2".into(),
                index: vec![1, 1],
                value: "nan".into()
            }
        );
        assert!(matches!(l("a,b\n"), Err(LoadError::EmptyTensor { .. })));
        let cap = Limits {
            max_bytes: 100,
            max_elements: 3,
        };
        assert!(matches!(
            load("t.csv", b"1,2\n3,4\n", &cap),
            Err(LoadError::TooManyElements { .. })
        ));
    }
}
