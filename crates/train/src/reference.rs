//! The first trainer's model in candle (composed tensor operations and candle's autograd),
//! kept as the reference the hand-written gradient is tested against and the baseline the
//! training benchmark measures (`kvlab-train bench`).

use crate::adamw::AdamWConfig;
use crate::params::{Layout, Shape};
use candle_core::{Device, Module, Tensor, Var, D};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};

/// The model as candle variables, named as the layout names them.
pub struct Reference {
    shape: Shape,
    vars: Vec<(String, Vec<usize>, Var)>,
    rope: (Tensor, Tensor),
    mask: Tensor,
    dev: Device,
}

impl Reference {
    /// Variables holding `params` (laid out by `layout`).
    pub fn new(layout: &Layout, params: &[f32]) -> candle_core::Result<Reference> {
        let dev = Device::Cpu;
        let vars = layout
            .entries
            .iter()
            .map(|(name, dims, r)| {
                let t = Tensor::from_slice(&params[r.clone()], dims.as_slice(), &dev)?;
                Ok((name.clone(), dims.clone(), Var::from_tensor(&t)?))
            })
            .collect::<candle_core::Result<_>>()?;
        let s = layout.shape;
        let hd = s.head_dim();
        let half = hd / 2;
        let mut cos = Vec::with_capacity(s.context * half);
        let mut sin = Vec::with_capacity(s.context * half);
        for p in 0..s.context {
            for i in 0..half {
                let a = p as f32 * s.rope_base.powf(-(2.0 * i as f32) / hd as f32);
                cos.push(a.cos());
                sin.push(a.sin());
            }
        }
        let n = s.context;
        let mask: Vec<f32> = (0..n * n)
            .map(|i| {
                if i % n > i / n {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            })
            .collect();
        Ok(Reference {
            shape: s,
            vars,
            rope: (
                Tensor::from_vec(cos, (n, half), &dev)?,
                Tensor::from_vec(sin, (n, half), &dev)?,
            ),
            mask: Tensor::from_vec(mask, (n, n), &dev)?,
            dev,
        })
    }

    fn get(&self, name: &str) -> &Tensor {
        self.vars
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, _, v)| v.as_tensor())
            .expect("every name is in the layout")
    }

    /// The parameters, flat in layout order.
    pub fn params(&self) -> candle_core::Result<Vec<f32>> {
        let mut out = Vec::new();
        for (_, _, v) in &self.vars {
            out.extend(v.as_tensor().flatten_all()?.to_vec1::<f32>()?);
        }
        Ok(out)
    }

    /// Logits `(n, t, vocab)` of `tokens` (`n` sequences of `t`).
    pub fn logits(&self, tokens: &[u8], n: usize) -> candle_core::Result<Tensor> {
        let s = self.shape;
        let t = tokens.len() / n;
        let ids: Vec<u32> = tokens.iter().map(|&b| u32::from(b)).collect();
        let tokens = Tensor::from_vec(ids, (n, t), &self.dev)?;
        let (d, h) = (s.d_model, s.heads);
        let hd = d / h;
        let embed = self.get("embed");
        let mut x = candle_nn::Embedding::new(embed.clone(), d).forward(&tokens)?;
        let mask = self.mask.narrow(0, 0, t)?.narrow(1, 0, t)?;
        for l in 0..s.layers {
            let p = |n: &str| format!("layers.{l}.{n}");
            let a = layer_norm(&x, self.get(&p("ln1.weight")), self.get(&p("ln1.bias")))?;
            let heads = |w: &str| -> candle_core::Result<Tensor> {
                a.broadcast_matmul(self.get(&p(w)))?
                    .reshape((n, t, h, hd))?
                    .transpose(1, 2)?
                    .contiguous()
            };
            let q = rope(&heads("attn.wq")?, &self.rope.0, &self.rope.1)?;
            let k = rope(&heads("attn.wk")?, &self.rope.0, &self.rope.1)?;
            let v = heads("attn.wv")?;
            let scores = (q.matmul(&k.t()?.contiguous()?)? / (hd as f64).sqrt())?;
            let scores = scores.broadcast_add(&mask)?;
            let weights = candle_nn::ops::softmax(&scores, D::Minus1)?;
            let out = weights
                .matmul(&v)?
                .transpose(1, 2)?
                .contiguous()?
                .reshape((n, t, d))?;
            x = (x + out.broadcast_matmul(self.get(&p("attn.wo")))?)?;
            let a = layer_norm(&x, self.get(&p("ln2.weight")), self.get(&p("ln2.bias")))?;
            let hidden = a
                .broadcast_matmul(self.get(&p("mlp.w1")))?
                .broadcast_add(self.get(&p("mlp.b1")))?
                .gelu()?;
            let mlp = hidden
                .broadcast_matmul(self.get(&p("mlp.w2")))?
                .broadcast_add(self.get(&p("mlp.b2")))?;
            x = (x + mlp)?;
        }
        let x = layer_norm(&x, self.get("ln_f.weight"), self.get("ln_f.bias"))?;
        x.broadcast_matmul(&embed.t()?)
    }

    /// The mean cross-entropy of `targets` (a scalar tensor, differentiable).
    pub fn loss(&self, tokens: &[u8], targets: &[u8], n: usize) -> candle_core::Result<Tensor> {
        let logits = self.logits(tokens, n)?;
        let (b, t, v) = logits.dims3()?;
        let ys: Vec<u32> = targets.iter().map(|&b| u32::from(b)).collect();
        let ys = Tensor::from_vec(ys, b * t, &self.dev)?;
        candle_nn::loss::cross_entropy(&logits.reshape((b * t, v))?, &ys)
    }

    /// The mean loss and its gradient, flat in layout order.
    pub fn loss_and_grad(
        &self,
        tokens: &[u8],
        targets: &[u8],
        n: usize,
    ) -> candle_core::Result<(f64, Vec<f32>)> {
        let loss = self.loss(tokens, targets, n)?;
        let grads = loss.backward()?;
        let mut flat = Vec::new();
        for (_, dims, v) in &self.vars {
            match grads.get(v.as_tensor()) {
                Some(g) => flat.extend(g.flatten_all()?.to_vec1::<f32>()?),
                None => flat.extend(std::iter::repeat_n(0.0, dims.iter().product())),
            }
        }
        Ok((f64::from(loss.to_scalar::<f32>()?), flat))
    }

    /// candle's AdamW over these variables.
    pub fn optimizer(&self, c: AdamWConfig, lr: f64) -> candle_core::Result<AdamW> {
        AdamW::new(
            self.vars.iter().map(|(_, _, v)| v.clone()).collect(),
            ParamsAdamW {
                lr,
                beta1: c.beta1,
                beta2: c.beta2,
                eps: c.eps,
                weight_decay: c.weight_decay,
            },
        )
    }

    /// One AdamW step whose gradient is `grad` (flat in layout order), through the loss
    /// `sum(theta * grad)`: the optimizer's test feeds both optimizers the same gradient.
    pub fn linear_step(&self, opt: &mut AdamW, grad: &[f32], lr: f64) -> candle_core::Result<()> {
        opt.set_learning_rate(lr);
        let mut loss = Tensor::zeros((), candle_core::DType::F32, &self.dev)?;
        let mut at = 0;
        for (_, dims, v) in &self.vars {
            let n: usize = dims.iter().product();
            let g = Tensor::from_slice(&grad[at..at + n], dims.as_slice(), &self.dev)?;
            loss = (loss + (v.as_tensor() * g)?.sum_all()?)?;
            at += n;
        }
        opt.backward_step(&loss)
    }

    /// One training step of the first trainer: loss, backward, AdamW. Returns the loss.
    pub fn step(
        &self,
        opt: &mut AdamW,
        tokens: &[u8],
        targets: &[u8],
        n: usize,
        lr: f64,
    ) -> candle_core::Result<f64> {
        opt.set_learning_rate(lr);
        let loss = self.loss(tokens, targets, n)?;
        opt.backward_step(&loss)?;
        Ok(f64::from(loss.to_scalar::<f32>()?))
    }
}

/// Layer norm from tensor ops (candle-nn's fused one has no backward pass), eps 1e-5.
fn layer_norm(x: &Tensor, w: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
    let mean = x.mean_keepdim(D::Minus1)?;
    let centred = x.broadcast_sub(&mean)?;
    let var = centred.sqr()?.mean_keepdim(D::Minus1)?;
    let normed = centred.broadcast_div(&(var + 1e-5)?.sqrt()?)?;
    normed.broadcast_mul(w)?.broadcast_add(b)
}

/// `x` (batch, heads, t, head_dim) rotated: `[x1 cos - x2 sin, x1 sin + x2 cos]` by halves.
fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> candle_core::Result<Tensor> {
    let (_, _, t, hd) = x.dims4()?;
    let half = hd / 2;
    let cos = cos.narrow(0, 0, t)?;
    let sin = sin.narrow(0, 0, t)?;
    let x1 = x.narrow(D::Minus1, 0, half)?;
    let x2 = x.narrow(D::Minus1, half, half)?;
    let r1 = (x1.broadcast_mul(&cos)? - x2.broadcast_mul(&sin)?)?;
    let r2 = (x1.broadcast_mul(&sin)? + x2.broadcast_mul(&cos)?)?;
    Tensor::cat(&[r1, r2], D::Minus1)
}
