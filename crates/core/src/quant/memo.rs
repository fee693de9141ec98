//! The quantizer's memoised paths (note §2): a quantization of a tensor quantized before reuses
//! the codes' buffer and the per-group extremes it found, as the page's bits and scheme
//! controls move. Every result equals [`quantize`]'s.

use super::{quantize_view, GroupLayout, QuantConfig, QuantError, Quantized, View};
use crate::Matrix;

/// [`quantize`](super::quantize), writing the codes into `codes` (its contents are dropped,
/// its capacity kept): give it [`Quantized::into_codes`] of a tensor no longer needed and a
/// repeated quantization of the same shape allocates no code buffer. The result is the same
/// as [`quantize`](super::quantize)'s.
///
/// ```
/// use kvlab_core::quant::{quantize, quantize_reusing, QuantConfig};
/// use kvlab_core::Matrix;
/// let x = Matrix::new(2, 2, vec![1.0, -2.0, 0.5, 4.0]).unwrap();
/// let q4 = quantize(&x, &QuantConfig::per_channel_symmetric(4)).unwrap();
/// let codes = q4.into_codes();
/// let q3 = quantize_reusing(&x, &QuantConfig::per_channel_symmetric(3), codes).unwrap();
/// assert_eq!(q3, quantize(&x, &QuantConfig::per_channel_symmetric(3)).unwrap());
/// ```
pub fn quantize_reusing(
    x: &Matrix,
    config: &QuantConfig,
    codes: Vec<i32>,
) -> Result<Quantized, QuantError> {
    quantize_view(View::head(x, x.rows()), config, codes, None)
}

/// The per-group minima and maxima of one tensor under one [`GroupLayout`], and whether the
/// tensor is finite: the first pass of a quantization. Bits and scheme do not change them,
/// only the layout does, so a caller that quantizes the same tensor again and again (the page,
/// as a bits or scheme control moves) keeps them in a slot given to [`quantize_memo`].
#[derive(Debug, Clone, PartialEq)]
pub struct Extremes {
    // (made by the quantization's first pass, `quantize_view`, in the parent module)
    pub(super) layout: GroupLayout,
    pub(super) lo: Vec<f32>,
    pub(super) hi: Vec<f32>,
    pub(super) finite: bool,
}

impl Extremes {
    /// The smallest and largest value of group `group` under `layout`, if these are that
    /// layout's extremes.
    pub fn of(&self, layout: &GroupLayout, group: usize) -> Option<(f32, f32)> {
        if self.layout != *layout {
            return None;
        }
        Some((*self.lo.get(group)?, *self.hi.get(group)?))
    }
}

/// [`quantize_reusing`], taking the per-group extremes from `memo` when they were found for
/// this layout, else finding them and leaving them there. `memo` must only ever be given the
/// same `x` (the lab keeps one per tensor of its data and clears it with the data). The result
/// is the same as [`quantize`](super::quantize)'s.
pub fn quantize_memo(
    x: &Matrix,
    config: &QuantConfig,
    codes: Vec<i32>,
    memo: &mut Option<std::sync::Arc<Extremes>>,
) -> Result<Quantized, QuantError> {
    quantize_view(View::head(x, x.rows()), config, codes, Some(memo))
}
