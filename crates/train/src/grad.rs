//! The model's forward pass and its gradient, by hand: the same function as
//! `kvlab_core::lm::Lm::forward` (pre-norm blocks, RoPE, GELU in its tanh form, tied byte
//! embedding), written over flat buffers with every product a `gemm` call (`crate::mm`), every
//! activation kept for the backward pass, and the batch split across threads (each thread its
//! own [`Workspace`] and gradient, summed in a fixed order so that a run is reproducible at a
//! given thread count).
//!
//! Causal attention is computed in blocks of [`BLOCK`] query rows, each against only the keys
//! at or before its last row, which skips about 3/8 of the attention products at 256 tokens.

use crate::mm::{matmul, View, ViewMut};
use crate::params::{Layout, Rope, Shape};
use kvlab_core::lm::exp;

/// Layer norm's epsilon (the card's `norm_eps`).
pub const EPS: f32 = 1e-5;

/// Query rows per block of the causal attention products.
pub const BLOCK: usize = 64;

/// What one block keeps for its backward pass (`N` = sequences x tokens rows).
#[derive(Debug, Clone)]
struct LayerActs {
    /// The block's input, `N x d`.
    x: Vec<f32>,
    xhat1: Vec<f32>,
    rstd1: Vec<f32>,
    a1: Vec<f32>,
    /// `N x 3d`: q and k before RoPE, v.
    qkv: Vec<f32>,
    /// `N x 2d`: q and k after RoPE.
    qkr: Vec<f32>,
    /// `n x heads x t x t`: the attention weights (zero above the diagonal).
    p: Vec<f32>,
    /// `N x d`: the heads' outputs side by side.
    att: Vec<f32>,
    xhat2: Vec<f32>,
    rstd2: Vec<f32>,
    a2: Vec<f32>,
    /// `N x mlp`: before and after the GELU.
    hpre: Vec<f32>,
    g: Vec<f32>,
}

/// One thread's activations and scratch for up to `cap` sequences of `t` tokens.
#[derive(Debug, Clone)]
pub struct Workspace {
    shape: Shape,
    cap: usize,
    t: usize,
    /// Sequences of the last forward pass.
    n: usize,
    layers: Vec<LayerActs>,
    /// The last block's output, `N x d`.
    xl: Vec<f32>,
    xhatf: Vec<f32>,
    rstdf: Vec<f32>,
    af: Vec<f32>,
    /// `N x vocab`: the next-token distribution at every position of the last forward pass.
    probs: Vec<f32>,
    dx: Vec<f32>,
    da: Vec<f32>,
    dqkv: Vec<f32>,
    dqkr: Vec<f32>,
    datt: Vec<f32>,
    dh: Vec<f32>,
    dlog: Vec<f32>,
    dp: Vec<f32>,
}

impl Workspace {
    /// Room for `cap` sequences of `t` tokens (`t <= shape.context`).
    pub fn new(shape: Shape, cap: usize, t: usize) -> Workspace {
        assert!(t <= shape.context && t > 0 && cap > 0);
        let (d, m, h, v) = (shape.d_model, shape.mlp, shape.heads, shape.vocab);
        let rows = cap * t;
        let z = |n: usize| vec![0.0f32; n];
        let layer = LayerActs {
            x: z(rows * d),
            xhat1: z(rows * d),
            rstd1: z(rows),
            a1: z(rows * d),
            qkv: z(rows * 3 * d),
            qkr: z(rows * 2 * d),
            p: z(cap * h * t * t),
            att: z(rows * d),
            xhat2: z(rows * d),
            rstd2: z(rows),
            a2: z(rows * d),
            hpre: z(rows * m),
            g: z(rows * m),
        };
        Workspace {
            shape,
            cap,
            t,
            n: 0,
            layers: vec![layer; shape.layers],
            xl: z(rows * d),
            xhatf: z(rows * d),
            rstdf: z(rows),
            af: z(rows * d),
            probs: z(rows * v),
            dx: z(rows * d),
            da: z(rows * d),
            dqkv: z(rows * 3 * d),
            dqkr: z(rows * 2 * d),
            datt: z(rows * d),
            dh: z(rows * m),
            dlog: z(rows * v),
            dp: z(t * t),
        }
    }

    /// Tokens per sequence.
    pub fn tokens_per_sequence(&self) -> usize {
        self.t
    }

    /// The next-token distribution of sequence `s` at position `i` (after the last forward).
    pub fn probs(&self, s: usize, i: usize) -> &[f32] {
        let v = self.shape.vocab;
        let r = s * self.t + i;
        &self.probs[r * v..(r + 1) * v]
    }

    /// Attention weights of `layer`, sequence `s`, `head`: `t x t` row-major, rows summing to 1
    /// over the columns at or before the row.
    pub fn attention(&self, layer: usize, s: usize, head: usize) -> &[f32] {
        let (t, h) = (self.t, self.shape.heads);
        let at = (s * h + head) * t * t;
        &self.layers[layer].p[at..at + t * t]
    }

    /// Runs `tokens` (`n` sequences of `t`, row-major) forward, keeping what the backward
    /// pass needs and every position's next-token distribution.
    pub fn forward(
        &mut self,
        params: &[f32],
        layout: &Layout,
        rope: &Rope,
        tokens: &[u8],
        n: usize,
    ) {
        let s = self.shape;
        let t = self.t;
        assert!(n <= self.cap && tokens.len() == n * t && params.len() == layout.len);
        self.n = n;
        let (d, m, h, v) = (s.d_model, s.mlp, s.heads, s.vocab);
        let hd = s.head_dim();
        let rows = n * t;
        let embed = &params[layout.embed.clone()];
        {
            let x0 = &mut self.layers[0].x;
            for (r, &tok) in tokens.iter().enumerate() {
                let tok = usize::from(tok);
                x0[r * d..(r + 1) * d].copy_from_slice(&embed[tok * d..(tok + 1) * d]);
            }
        }
        let scale = 1.0 / (hd as f32).sqrt();
        for l in 0..s.layers {
            let b = &layout.blocks[l];
            let (cur, next) = self.layers.split_at_mut(l + 1);
            let a = &mut cur[l];
            ln_forward(
                &a.x[..rows * d],
                &params[b.ln1_w.clone()],
                &params[b.ln1_b.clone()],
                d,
                &mut a.xhat1,
                &mut a.rstd1,
                &mut a.a1,
            );
            let a1 = View::new(&a.a1, rows, d);
            for (j, w) in [&b.wq, &b.wk, &b.wv].into_iter().enumerate() {
                matmul(
                    ViewMut::strided(&mut a.qkv, j * d, rows, d, 3 * d),
                    a1,
                    View::new(&params[w.clone()], d, d),
                    false,
                );
            }
            rope_forward(&a.qkv, &mut a.qkr, rope, n, t, d, hd);
            for sq in 0..n {
                for head in 0..h {
                    let pb = &mut a.p[(sq * h + head) * t * t..][..t * t];
                    let q = View::strided(&a.qkr, sq * t * 2 * d + head * hd, t, hd, 2 * d);
                    let k = View::strided(&a.qkr, sq * t * 2 * d + d + head * hd, t, hd, 2 * d);
                    let vv =
                        View::strided(&a.qkv, sq * t * 3 * d + 2 * d + head * hd, t, hd, 3 * d);
                    for r0 in (0..t).step_by(BLOCK) {
                        let r1 = (r0 + BLOCK).min(t);
                        matmul(
                            ViewMut::new(pb, t, t).rows_from(r0).top_left(r1 - r0, r1),
                            q.rows_from(r0).top_left(r1 - r0, hd),
                            k.top_left(r1, hd).t(),
                            false,
                        );
                    }
                    for i in 0..t {
                        let row = &mut pb[i * t..(i + 1) * t];
                        softmax_scaled(&mut row[..=i], scale);
                        row[i + 1..].fill(0.0);
                    }
                    let pv = View::new(pb, t, t);
                    for r0 in (0..t).step_by(BLOCK) {
                        let r1 = (r0 + BLOCK).min(t);
                        matmul(
                            ViewMut::strided(&mut a.att, sq * t * d + head * hd, t, hd, d)
                                .rows_from(r0)
                                .top_left(r1 - r0, hd),
                            pv.rows_from(r0).top_left(r1 - r0, r1),
                            vv.top_left(r1, hd),
                            false,
                        );
                    }
                }
            }
            // x' = x + att wo, then x'' = x' + mlp(ln2(x')), written into the next block's
            // input (or `xl` after the last block).
            let out = match next.first_mut() {
                Some(nx) => &mut nx.x,
                None => &mut self.xl,
            };
            out[..rows * d].copy_from_slice(&a.x[..rows * d]);
            matmul(
                ViewMut::new(out, rows, d),
                View::new(&a.att, rows, d),
                View::new(&params[b.wo.clone()], d, d),
                true,
            );
            ln_forward(
                &out[..rows * d],
                &params[b.ln2_w.clone()],
                &params[b.ln2_b.clone()],
                d,
                &mut a.xhat2,
                &mut a.rstd2,
                &mut a.a2,
            );
            let b1 = &params[b.b1.clone()];
            for row in a.hpre[..rows * m].chunks_exact_mut(m) {
                row.copy_from_slice(b1);
            }
            matmul(
                ViewMut::new(&mut a.hpre, rows, m),
                View::new(&a.a2, rows, d),
                View::new(&params[b.w1.clone()], d, m),
                true,
            );
            for (g, &x) in a.g[..rows * m].iter_mut().zip(&a.hpre[..rows * m]) {
                *g = gelu(x);
            }
            let b2 = &params[b.b2.clone()];
            for row in out[..rows * d].chunks_exact_mut(d) {
                for (o, &bb) in row.iter_mut().zip(b2) {
                    *o += bb;
                }
            }
            matmul(
                ViewMut::new(out, rows, d),
                View::new(&a.g, rows, m),
                View::new(&params[b.w2.clone()], m, d),
                true,
            );
        }
        ln_forward(
            &self.xl[..rows * d],
            &params[layout.lnf_w.clone()],
            &params[layout.lnf_b.clone()],
            d,
            &mut self.xhatf,
            &mut self.rstdf,
            &mut self.af,
        );
        matmul(
            ViewMut::new(&mut self.probs, rows, v),
            View::new(&self.af, rows, d),
            View::new(embed, v, d).t(),
            false,
        );
        for row in self.probs[..rows * v].chunks_exact_mut(v) {
            softmax_scaled(row, 1.0);
        }
    }

    /// Sum over all positions of `-ln p(target)` after [`Workspace::forward`].
    pub fn loss_sum(&self, targets: &[u8]) -> f64 {
        let v = self.shape.vocab;
        targets
            .iter()
            .enumerate()
            .map(|(r, &y)| -f64::from(self.probs[r * v + usize::from(y)].max(1e-30)).ln())
            .sum()
    }

    /// Adds `scale` times the gradient of the summed loss of `targets` (after the forward pass
    /// on the same tokens) into `grad` (laid out as the parameters).
    // (the forward pass's arguments, the targets, the loss's scale and the output: grouping
    // them in a struct would only rename them)
    #[allow(clippy::too_many_arguments)]
    pub fn backward(
        &mut self,
        params: &[f32],
        layout: &Layout,
        rope: &Rope,
        tokens: &[u8],
        targets: &[u8],
        scale: f32,
        grad: &mut [f32],
    ) {
        let s = self.shape;
        let (n, t) = (self.n, self.t);
        let rows = n * t;
        assert!(targets.len() == rows && tokens.len() == rows && grad.len() == layout.len);
        let (d, m, h, v) = (s.d_model, s.mlp, s.heads, s.vocab);
        let hd = s.head_dim();
        let sm_scale = 1.0 / (hd as f32).sqrt();
        // logits: dlog = (p - onehot) * scale
        self.dlog[..rows * v].copy_from_slice(&self.probs[..rows * v]);
        for (r, &y) in targets.iter().enumerate() {
            self.dlog[r * v + usize::from(y)] -= 1.0;
        }
        for g in &mut self.dlog[..rows * v] {
            *g *= scale;
        }
        let embed = &params[layout.embed.clone()];
        matmul(
            ViewMut::new(&mut grad[layout.embed.clone()], v, d),
            View::new(&self.dlog, rows, v).t(),
            View::new(&self.af, rows, d),
            true,
        );
        matmul(
            ViewMut::new(&mut self.da, rows, d),
            View::new(&self.dlog, rows, v),
            View::new(embed, v, d),
            false,
        );
        self.dx[..rows * d].fill(0.0);
        ln_backward(
            &self.da[..rows * d],
            &self.xhatf,
            &self.rstdf,
            &params[layout.lnf_w.clone()],
            d,
            grad,
            layout.lnf_w.start,
            layout.lnf_b.start,
            &mut self.dx,
        );
        for l in (0..s.layers).rev() {
            let b = &layout.blocks[l];
            let a = &self.layers[l];
            // the MLP: x'' = x' + gelu(a2 w1 + b1) w2 + b2
            col_sums_into(&self.dx[..rows * d], d, &mut grad[b.b2.clone()]);
            matmul(
                ViewMut::new(&mut grad[b.w2.clone()], m, d),
                View::new(&a.g, rows, m).t(),
                View::new(&self.dx, rows, d),
                true,
            );
            matmul(
                ViewMut::new(&mut self.dh, rows, m),
                View::new(&self.dx, rows, d),
                View::new(&params[b.w2.clone()], m, d).t(),
                false,
            );
            for (dh, &x) in self.dh[..rows * m].iter_mut().zip(&a.hpre[..rows * m]) {
                *dh *= gelu_grad(x);
            }
            col_sums_into(&self.dh[..rows * m], m, &mut grad[b.b1.clone()]);
            matmul(
                ViewMut::new(&mut grad[b.w1.clone()], d, m),
                View::new(&a.a2, rows, d).t(),
                View::new(&self.dh, rows, m),
                true,
            );
            matmul(
                ViewMut::new(&mut self.da, rows, d),
                View::new(&self.dh, rows, m),
                View::new(&params[b.w1.clone()], d, m).t(),
                false,
            );
            ln_backward(
                &self.da[..rows * d],
                &a.xhat2,
                &a.rstd2,
                &params[b.ln2_w.clone()],
                d,
                grad,
                b.ln2_w.start,
                b.ln2_b.start,
                &mut self.dx,
            );
            // attention: x' = x + att wo
            matmul(
                ViewMut::new(&mut grad[b.wo.clone()], d, d),
                View::new(&a.att, rows, d).t(),
                View::new(&self.dx, rows, d),
                true,
            );
            matmul(
                ViewMut::new(&mut self.datt, rows, d),
                View::new(&self.dx, rows, d),
                View::new(&params[b.wo.clone()], d, d).t(),
                false,
            );
            for sq in 0..n {
                for head in 0..h {
                    let pv = View::new(&a.p[(sq * h + head) * t * t..][..t * t], t, t);
                    let q = View::strided(&a.qkr, sq * t * 2 * d + head * hd, t, hd, 2 * d);
                    let k = View::strided(&a.qkr, sq * t * 2 * d + d + head * hd, t, hd, 2 * d);
                    let vv =
                        View::strided(&a.qkv, sq * t * 3 * d + 2 * d + head * hd, t, hd, 3 * d);
                    let dav = View::strided(&self.datt, sq * t * d + head * hd, t, hd, d);
                    // dP = dA V^T, only at or below the diagonal's blocks
                    for r0 in (0..t).step_by(BLOCK) {
                        let r1 = (r0 + BLOCK).min(t);
                        matmul(
                            ViewMut::new(&mut self.dp, t, t)
                                .rows_from(r0)
                                .top_left(r1 - r0, r1),
                            dav.rows_from(r0).top_left(r1 - r0, hd),
                            vv.top_left(r1, hd).t(),
                            false,
                        );
                    }
                    // dV = P^T dA: row j of dV takes the queries i >= j
                    for r0 in (0..t).step_by(BLOCK) {
                        let r1 = (r0 + BLOCK).min(t);
                        matmul(
                            ViewMut::strided(
                                &mut self.dqkv,
                                sq * t * 3 * d + 2 * d + head * hd,
                                t,
                                hd,
                                3 * d,
                            )
                            .rows_from(r0)
                            .top_left(r1 - r0, hd),
                            pv.rows_from(r0).t().rows_from(r0).top_left(r1 - r0, t - r0),
                            dav.rows_from(r0),
                            false,
                        );
                    }
                    // dS = P (dP - rowsum(P dP)) / sqrt(hd), zero above the diagonal
                    for i in 0..t {
                        let prow = &a.p[(sq * h + head) * t * t + i * t..][..=i];
                        let drow = &mut self.dp[i * t..(i + 1) * t];
                        let dot: f32 = prow.iter().zip(&drow[..=i]).map(|(p, g)| p * g).sum();
                        for (g, &p) in drow[..=i].iter_mut().zip(prow) {
                            *g = p * (*g - dot) * sm_scale;
                        }
                        drow[i + 1..].fill(0.0);
                    }
                    let ds = View::new(&self.dp, t, t);
                    // dQ = dS K; dK = dS^T Q (row j of dK takes the queries i >= j)
                    for r0 in (0..t).step_by(BLOCK) {
                        let r1 = (r0 + BLOCK).min(t);
                        matmul(
                            ViewMut::strided(
                                &mut self.dqkr,
                                sq * t * 2 * d + head * hd,
                                t,
                                hd,
                                2 * d,
                            )
                            .rows_from(r0)
                            .top_left(r1 - r0, hd),
                            ds.rows_from(r0).top_left(r1 - r0, r1),
                            k.top_left(r1, hd),
                            false,
                        );
                        matmul(
                            ViewMut::strided(
                                &mut self.dqkr,
                                sq * t * 2 * d + d + head * hd,
                                t,
                                hd,
                                2 * d,
                            )
                            .rows_from(r0)
                            .top_left(r1 - r0, hd),
                            ds.rows_from(r0).t().rows_from(r0).top_left(r1 - r0, t - r0),
                            q.rows_from(r0),
                            false,
                        );
                    }
                }
            }
            rope_backward(&self.dqkr, &mut self.dqkv, rope, n, t, d, hd);
            let a1 = View::new(&a.a1, rows, d);
            for (j, w) in [&b.wq, &b.wk, &b.wv].into_iter().enumerate() {
                let dj = View::strided(&self.dqkv, j * d, rows, d, 3 * d);
                matmul(ViewMut::new(&mut grad[w.clone()], d, d), a1.t(), dj, true);
                matmul(
                    ViewMut::new(&mut self.da, rows, d),
                    dj,
                    View::new(&params[w.clone()], d, d).t(),
                    j > 0,
                );
            }
            ln_backward(
                &self.da[..rows * d],
                &a.xhat1,
                &a.rstd1,
                &params[b.ln1_w.clone()],
                d,
                grad,
                b.ln1_w.start,
                b.ln1_b.start,
                &mut self.dx,
            );
        }
        let ge = &mut grad[layout.embed.clone()];
        for (r, &tok) in tokens.iter().enumerate() {
            let tok = usize::from(tok);
            for (g, &x) in ge[tok * d..(tok + 1) * d]
                .iter_mut()
                .zip(&self.dx[r * d..(r + 1) * d])
            {
                *g += x;
            }
        }
    }
}

/// `out = ln(x) w + b` row by row, keeping `xhat = (x - mean) * rstd` and `rstd`.
fn ln_forward(
    x: &[f32],
    w: &[f32],
    b: &[f32],
    d: usize,
    xhat: &mut [f32],
    rstd: &mut [f32],
    out: &mut [f32],
) {
    for (r, ((xr, hr), or)) in x
        .chunks_exact(d)
        .zip(xhat.chunks_exact_mut(d))
        .zip(out.chunks_exact_mut(d))
        .enumerate()
    {
        let mean = xr.iter().sum::<f32>() / d as f32;
        let var = xr.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / d as f32;
        let rs = 1.0 / (var + EPS).sqrt();
        rstd[r] = rs;
        for j in 0..d {
            hr[j] = (xr[j] - mean) * rs;
            or[j] = hr[j] * w[j] + b[j];
        }
    }
}

/// The layer norm's backward pass: adds the weight's and bias's gradients at `grad[w_at..]`
/// and `grad[b_at..]`, and the input's gradient into `dx`.
#[allow(clippy::too_many_arguments)]
fn ln_backward(
    dy: &[f32],
    xhat: &[f32],
    rstd: &[f32],
    w: &[f32],
    d: usize,
    grad: &mut [f32],
    w_at: usize,
    b_at: usize,
    dx: &mut [f32],
) {
    for (r, (dyr, hr)) in dy.chunks_exact(d).zip(xhat.chunks_exact(d)).enumerate() {
        let mut m1 = 0f32;
        let mut m2 = 0f32;
        for j in 0..d {
            grad[w_at + j] += dyr[j] * hr[j];
            grad[b_at + j] += dyr[j];
            let g = dyr[j] * w[j];
            m1 += g;
            m2 += g * hr[j];
        }
        m1 /= d as f32;
        m2 /= d as f32;
        let rs = rstd[r];
        let dxr = &mut dx[r * d..(r + 1) * d];
        for j in 0..d {
            dxr[j] += rs * (dyr[j] * w[j] - m1 - hr[j] * m2);
        }
    }
}

/// Adds the column sums of the `cols`-wide row-major `x` into `out`.
fn col_sums_into(x: &[f32], cols: usize, out: &mut [f32]) {
    for row in x.chunks_exact(cols) {
        for (o, &v) in out.iter_mut().zip(row) {
            *o += v;
        }
    }
}

/// `row = softmax(row * scale)` in place.
fn softmax_scaled(row: &mut [f32], scale: f32) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) * scale;
    for v in row.iter_mut() {
        *v = exp(*v * scale - max);
    }
    let sum: f32 = row.iter().sum();
    let inv = 1.0 / sum;
    for v in row.iter_mut() {
        *v *= inv;
    }
}

const GELU_C: f32 = 0.797_884_6; // sqrt(2/pi)
const GELU_A: f32 = 0.044_715;

/// GELU, tanh form, as `x sigmoid(2u)` with `u = c (x + a x^3)` (the forward pass's form).
fn gelu(x: f32) -> f32 {
    x / (1.0 + exp(-2.0 * GELU_C * (x + GELU_A * x * x * x)))
}

/// `d gelu / dx = s + x s (1 - s) 2c (1 + 3a x^2)`, `s = sigmoid(2u)`.
fn gelu_grad(x: f32) -> f32 {
    let s = 1.0 / (1.0 + exp(-2.0 * GELU_C * (x + GELU_A * x * x * x)));
    s + x * s * (1.0 - s) * 2.0 * GELU_C * (1.0 + 3.0 * GELU_A * x * x)
}

/// q and k of `qkv` (`N x 3d`) rotated by their positions into `qkr` (`N x 2d`).
fn rope_forward(
    qkv: &[f32],
    qkr: &mut [f32],
    rope: &Rope,
    n: usize,
    t: usize,
    d: usize,
    hd: usize,
) {
    let half = rope.half;
    for r in 0..n * t {
        let pos = r % t;
        let cos = &rope.cos[pos * half..(pos + 1) * half];
        let sin = &rope.sin[pos * half..(pos + 1) * half];
        for part in 0..2 {
            for head in 0..d / hd {
                let src = &qkv[r * 3 * d + part * d + head * hd..][..hd];
                let dst = &mut qkr[r * 2 * d + part * d + head * hd..][..hd];
                let (x1, x2) = src.split_at(half);
                let (o1, o2) = dst.split_at_mut(half);
                for i in 0..half {
                    o1[i] = x1[i] * cos[i] - x2[i] * sin[i];
                    o2[i] = x1[i] * sin[i] + x2[i] * cos[i];
                }
            }
        }
    }
}

/// The transpose of [`rope_forward`]: the rotated gradients in `dqkr` rotated back into the
/// q and k columns of `dqkv` (its v columns untouched).
fn rope_backward(
    dqkr: &[f32],
    dqkv: &mut [f32],
    rope: &Rope,
    n: usize,
    t: usize,
    d: usize,
    hd: usize,
) {
    let half = rope.half;
    for r in 0..n * t {
        let pos = r % t;
        let cos = &rope.cos[pos * half..(pos + 1) * half];
        let sin = &rope.sin[pos * half..(pos + 1) * half];
        for part in 0..2 {
            for head in 0..d / hd {
                let src = &dqkr[r * 2 * d + part * d + head * hd..][..hd];
                let dst = &mut dqkv[r * 3 * d + part * d + head * hd..][..hd];
                let (g1, g2) = src.split_at(half);
                let (o1, o2) = dst.split_at_mut(half);
                for i in 0..half {
                    o1[i] = g1[i] * cos[i] + g2[i] * sin[i];
                    o2[i] = -g1[i] * sin[i] + g2[i] * cos[i];
                }
            }
        }
    }
}

/// The batch's loss and gradient on several threads: each takes a contiguous share of the
/// sequences into its own [`Workspace`] and gradient, and the gradients are summed in thread
/// order, so the result depends on the thread count but not on timing.
#[derive(Debug)]
pub struct Trainer {
    pub layout: Layout,
    pub rope: Rope,
    workspaces: Vec<Workspace>,
    grads: Vec<Vec<f32>>,
    batch: usize,
}

impl Trainer {
    /// A trainer for batches of `batch` sequences of the shape's context, on `threads` threads
    /// (at most one per sequence).
    pub fn new(layout: Layout, batch: usize, threads: usize) -> Trainer {
        let threads = threads.clamp(1, batch.max(1));
        let per = batch.div_ceil(threads);
        let shape = layout.shape;
        Trainer {
            rope: Rope::new(&shape),
            workspaces: (0..threads)
                .map(|_| Workspace::new(shape, per, shape.context))
                .collect(),
            grads: vec![vec![0.0; layout.len]; threads],
            layout,
            batch,
        }
    }

    /// Threads in use.
    pub fn threads(&self) -> usize {
        self.workspaces.len()
    }

    /// The mean loss (nats per token) of `tokens`/`targets` (`batch` sequences of the context)
    /// and its gradient with respect to `params`.
    pub fn loss_and_grad(
        &mut self,
        params: &[f32],
        tokens: &[u8],
        targets: &[u8],
    ) -> (f64, &[f32]) {
        let t = self.layout.shape.context;
        assert_eq!(tokens.len(), self.batch * t);
        let per = self.workspaces[0].cap;
        let scale = 1.0 / (self.batch * t) as f32;
        let (layout, rope) = (&self.layout, &self.rope);
        let losses: Vec<f64> = std::thread::scope(|sc| {
            let handles: Vec<_> = self
                .workspaces
                .iter_mut()
                .zip(self.grads.iter_mut())
                .enumerate()
                .filter_map(|(i, (ws, g))| {
                    let from = (i * per).min(self.batch);
                    let to = ((i + 1) * per).min(self.batch);
                    if from == to {
                        g.fill(0.0);
                        return None;
                    }
                    let x = &tokens[from * t..to * t];
                    let y = &targets[from * t..to * t];
                    Some(sc.spawn(move || {
                        g.fill(0.0);
                        ws.forward(params, layout, rope, x, to - from);
                        let loss = ws.loss_sum(y);
                        ws.backward(params, layout, rope, x, y, scale, g);
                        loss
                    }))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a training thread panicked"))
                .collect()
        });
        let (first, rest) = self.grads.split_at_mut(1);
        for g in rest.iter() {
            for (a, &b) in first[0].iter_mut().zip(g) {
                *a += b;
            }
        }
        let loss = losses.iter().sum::<f64>() / (self.batch * t) as f64;
        (loss, &self.grads[0])
    }

    /// The first thread's workspace, for forward passes outside training (probes, the held-out
    /// loss), `cap` sequences at a time.
    pub fn workspace(&mut self) -> &mut Workspace {
        &mut self.workspaces[0]
    }
}
