//! The model's shape and its parameters as one flat `f32` buffer with named slices (the names
//! and layouts `kvlab_core::lm::Lm::new` loads: `x @ W`, row-major), and their initialisation.

use kvlab_core::rng::Xoshiro256;
use std::ops::Range;

/// The model's shape.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Shape {
    /// Width `d`.
    pub d_model: usize,
    /// Blocks.
    pub layers: usize,
    /// Heads per block, `d / heads` wide each.
    pub heads: usize,
    /// MLP width.
    pub mlp: usize,
    /// Longest sequence, BOS included.
    pub context: usize,
    /// Tokens (256 bytes).
    pub vocab: usize,
    /// RoPE's base.
    pub rope_base: f32,
}

impl Shape {
    /// The page's model (the spike's shape, which trained on these machines in 30 minutes).
    pub const MODEL: Shape = Shape {
        d_model: 128,
        layers: 4,
        heads: 4,
        mlp: 512,
        context: 256,
        vocab: 256,
        rope_base: 10_000.0,
    };

    /// The textbook copy case's shape (model-notes: two layers of two heads, width 64).
    pub const SMALL: Shape = Shape {
        d_model: 64,
        layers: 2,
        heads: 2,
        mlp: 256,
        context: 256,
        vocab: 256,
        rope_base: 10_000.0,
    };

    /// A shape by name: `model` or `small`.
    pub fn named(name: &str) -> Option<Shape> {
        match name {
            "model" => Some(Self::MODEL),
            "small" => Some(Self::SMALL),
            _ => None,
        }
    }

    /// Width of one head.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.heads
    }
}

/// Where one block's parameters sit in the flat buffer.
#[derive(Debug, Clone)]
pub struct BlockAt {
    pub ln1_w: Range<usize>,
    pub ln1_b: Range<usize>,
    pub wq: Range<usize>,
    pub wk: Range<usize>,
    pub wv: Range<usize>,
    pub wo: Range<usize>,
    pub ln2_w: Range<usize>,
    pub ln2_b: Range<usize>,
    pub w1: Range<usize>,
    pub b1: Range<usize>,
    pub w2: Range<usize>,
    pub b2: Range<usize>,
}

/// Every parameter's name, shape and place in the flat buffer, in the order they are
/// initialised (the order the first trainer drew them in, so both start from the same weights).
#[derive(Debug, Clone)]
pub struct Layout {
    pub shape: Shape,
    /// `(name, shape, range)` in buffer order.
    pub entries: Vec<(String, Vec<usize>, Range<usize>)>,
    pub embed: Range<usize>,
    pub blocks: Vec<BlockAt>,
    pub lnf_w: Range<usize>,
    pub lnf_b: Range<usize>,
    /// Values in all.
    pub len: usize,
}

impl Layout {
    /// The layout of `shape`.
    pub fn new(shape: Shape) -> Layout {
        let (d, m, v) = (shape.d_model, shape.mlp, shape.vocab);
        let mut entries = Vec::new();
        let mut at = 0;
        let mut add = |name: String, dims: Vec<usize>| -> Range<usize> {
            let n: usize = dims.iter().product();
            let r = at..at + n;
            at += n;
            entries.push((name, dims, r.clone()));
            r
        };
        let embed = add("embed".into(), vec![v, d]);
        let mut blocks = Vec::new();
        for l in 0..shape.layers {
            let p = |n: &str| format!("layers.{l}.{n}");
            blocks.push(BlockAt {
                ln1_w: add(p("ln1.weight"), vec![d]),
                ln1_b: add(p("ln1.bias"), vec![d]),
                wq: add(p("attn.wq"), vec![d, d]),
                wk: add(p("attn.wk"), vec![d, d]),
                wv: add(p("attn.wv"), vec![d, d]),
                wo: add(p("attn.wo"), vec![d, d]),
                ln2_w: add(p("ln2.weight"), vec![d]),
                ln2_b: add(p("ln2.bias"), vec![d]),
                w1: add(p("mlp.w1"), vec![d, m]),
                b1: add(p("mlp.b1"), vec![m]),
                w2: add(p("mlp.w2"), vec![m, d]),
                b2: add(p("mlp.b2"), vec![d]),
            });
        }
        let lnf_w = add("ln_f.weight".into(), vec![d]);
        let lnf_b = add("ln_f.bias".into(), vec![d]);
        Layout {
            shape,
            entries,
            embed,
            blocks,
            lnf_w,
            lnf_b,
            len: at,
        }
    }

    /// The named parameter's range, if there is one.
    pub fn range(&self, name: &str) -> Option<Range<usize>> {
        self.entries
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, _, r)| r.clone())
    }

    /// Fresh weights drawn from `rng`: normal(0, 0.02) matrices (the output projections `wo`
    /// and `w2` scaled by `1/sqrt(2 layers)`, GPT-2's rule), unit norms, zero biases.
    pub fn init(&self, rng: &mut Xoshiro256) -> Vec<f32> {
        let proj_std = 0.02 / (2.0 * self.shape.layers as f64).sqrt();
        let mut out = vec![0.0f32; self.len];
        for (name, dims, r) in &self.entries {
            let slot = &mut out[r.clone()];
            if dims.len() == 2 {
                let std = if name.ends_with("attn.wo") || name.ends_with("mlp.w2") {
                    proj_std
                } else {
                    0.02
                };
                for v in slot.iter_mut() {
                    // Box-Muller from two uniforms in (0, 1].
                    let u1 = 1.0 - rng.uniform();
                    let u2 = rng.uniform();
                    *v =
                        ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos() * std) as f32;
                }
            } else if name.ends_with(".weight") {
                slot.fill(1.0);
            }
        }
        out
    }
}

/// RoPE's tables, `context x head_dim/2` each: position `p`, pair `i` rotates by
/// `p * base^(-2i/head_dim)` (a head's two halves are the pairs, GPT-NeoX's layout).
#[derive(Debug, Clone)]
pub struct Rope {
    pub cos: Vec<f32>,
    pub sin: Vec<f32>,
    pub half: usize,
}

impl Rope {
    /// The tables of `shape`.
    pub fn new(shape: &Shape) -> Rope {
        let hd = shape.head_dim();
        let half = hd / 2;
        let mut cos = Vec::with_capacity(shape.context * half);
        let mut sin = Vec::with_capacity(shape.context * half);
        for p in 0..shape.context {
            for i in 0..half {
                let freq = shape.rope_base.powf(-(2.0 * i as f32) / hd as f32);
                let a = p as f32 * freq;
                cos.push(a.cos());
                sin.push(a.sin());
            }
        }
        Rope { cos, sin, half }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_has_the_committed_cards_parameter_count() {
        // www/model/model.json's "parameters" before this trainer: 824,064.
        assert_eq!(Layout::new(Shape::MODEL).len, 824_064);
    }

    #[test]
    fn ranges_tile_the_buffer_in_order() {
        let l = Layout::new(Shape::SMALL);
        let mut at = 0;
        for (_, dims, r) in &l.entries {
            assert_eq!(r.start, at);
            assert_eq!(r.len(), dims.iter().product::<usize>());
            at = r.end;
        }
        assert_eq!(at, l.len);
        assert_eq!(l.range("layers.1.mlp.w2"), Some(l.blocks[1].w2.clone()));
    }
}
