//! A small byte-level language model, run by hand: the forward pass of the model kvlab trains
//! (`crates/train`, `cargo xtask train`), with every layer's and head's attention, keys and
//! values kept, so that the note's compression can work on a real model's cache.
//!
//! The model: decoder-only over bytes (256 tokens; byte 0 is the BOS every sequence starts
//! with), pre-norm blocks `x += attn(ln1(x)); x += mlp(ln2(x))`, RoPE on queries and keys (the
//! two halves of a head rotate as pairs, GPT-NeoX's layout), a GELU (tanh form) MLP, a final
//! norm and the byte embedding tied as the output layer. Weights are `x @ W` (input rows).
//!
//! Written for clarity and for the page's size budget (no dependencies): plain loops in f32,
//! in the order that lets the compiler vectorise the inner one. [`Lm::forward`] runs a whole
//! sequence; [`Lm::decode`] runs one token against a [`KvCache`], which is what generation
//! with a (compressed) cache needs; both give the same logits.

pub mod compress;
pub mod needle;
pub mod tasks;

use crate::tensor::Matrix;
use thiserror::Error;

/// The model's shape, as the trainer's card (`model.json`) writes it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
pub struct LmConfig {
    /// Width `d`.
    pub d_model: usize,
    /// Blocks.
    pub layers: usize,
    /// Attention heads per block (`d / heads` each).
    pub heads: usize,
    /// MLP width.
    pub mlp: usize,
    /// The longest sequence, BOS included.
    pub context: usize,
    /// Tokens: 256 bytes.
    pub vocab: usize,
    /// RoPE's base.
    pub rope_base: f32,
    /// Layer norm's epsilon.
    pub norm_eps: f32,
}

impl LmConfig {
    /// Width of one head.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.heads.max(1)
    }
}

/// Why a model could not be built or run.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LmError {
    /// A weight is missing or has another shape than the config needs.
    #[error("weight '{name}' has shape {got:?}; the model needs {want:?}")]
    Shape {
        /// Its name.
        name: String,
        /// Its shape in the file (empty when missing).
        got: Vec<usize>,
        /// The shape the config needs.
        want: Vec<usize>,
    },
    /// A config that cannot describe a model (zero sizes, heads not dividing `d`, odd heads).
    #[error("model config {0}")]
    Config(String),
    /// A token the model's vocabulary does not hold.
    #[error("token {token}: the model's tokens are 0 to {last}")]
    Token {
        /// The token given.
        token: u8,
        /// The model's last token.
        last: usize,
    },
    /// No tokens, or more than the context holds.
    #[error("{len} tokens: the model takes 1 to {context} (BOS included)")]
    Length {
        /// Tokens given.
        len: usize,
        /// The model's context.
        context: usize,
    },
}

/// What [`Lm::extend_seen`] calls with each new token's attention: `(layer, head, i, weights)`.
pub type Seen<'a> = dyn FnMut(usize, usize, usize, &[f32]) + 'a;

struct Block {
    ln1: (Vec<f32>, Vec<f32>),
    wq: Vec<f32>,
    wk: Vec<f32>,
    wv: Vec<f32>,
    wo: Vec<f32>,
    ln2: (Vec<f32>, Vec<f32>),
    w1: Vec<f32>,
    b1: Vec<f32>,
    w2: Vec<f32>,
    b2: Vec<f32>,
}

/// The model's weights, ready to run.
pub struct Lm {
    config: LmConfig,
    embed: Vec<f32>,
    blocks: Vec<Block>,
    ln_f: (Vec<f32>, Vec<f32>),
    /// RoPE's `cos` and `sin`, `context x head_dim/2`.
    rope: (Vec<f32>, Vec<f32>),
}

/// A whole sequence through the model: its logits and, for every layer and head, what the
/// note's compression works on.
#[derive(Debug, Clone, PartialEq)]
pub struct LmRun {
    /// Next-token logits, `T x vocab` (row `t` predicts token `t + 1`).
    pub logits: Matrix,
    /// `attention[layer][head]`: the softmax weights, `T x T`, zero above the diagonal.
    pub attention: Vec<Vec<Matrix>>,
    /// `keys[layer][head]`: `T x head_dim`, after RoPE (what a KV cache stores).
    pub keys: Vec<Vec<Matrix>>,
    /// `values[layer][head]`: `T x head_dim`.
    pub values: Vec<Vec<Matrix>>,
}

/// The keys and values of the tokens decoded so far, per layer and head (`[layer][head]`, each
/// row-major `tokens x head_dim`), and each row's position (RoPE's, which a compressed cache
/// keeps when it drops rows).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KvCache {
    /// Keys, after RoPE.
    pub keys: Vec<Vec<Vec<f32>>>,
    /// Values.
    pub values: Vec<Vec<Vec<f32>>>,
    /// The position of the next token to decode.
    pub position: usize,
    /// Width of one head's rows (set by the first [`Lm::decode`]).
    pub head_dim: usize,
}

impl KvCache {
    /// Tokens held (the same in every layer and head).
    pub fn len(&self) -> usize {
        self.keys
            .first()
            .and_then(|l| l.first())
            .map_or(0, |k| k.len())
            / self.head_dim.max(1)
    }

    /// Nothing held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl KvCache {
    /// Keeps only the rows `keep` (ascending indices into the rows held) in every layer and
    /// head: a compressed cache. Later tokens keep their own positions.
    pub fn retain(&mut self, keep: &[usize]) {
        let hd = self.head_dim;
        for tensor in self.keys.iter_mut().chain(self.values.iter_mut()) {
            for rows in tensor.iter_mut() {
                let kept: Vec<f32> = keep
                    .iter()
                    .filter_map(|&r| rows.get(r * hd..(r + 1) * hd))
                    .flatten()
                    .copied()
                    .collect();
                *rows = kept;
            }
        }
    }
}

impl Lm {
    /// Builds the model from its weights: `get(name, shape)` returns the named weight's values
    /// in C order, or its actual shape when it has another (or `[]` when missing). The names are
    /// the trainer's: `embed`, `layers.{l}.ln1.weight`, `.ln1.bias`, `.attn.wq`, `.attn.wk`,
    /// `.attn.wv`, `.attn.wo`, `.ln2.weight`, `.ln2.bias`, `.mlp.w1`, `.mlp.b1`, `.mlp.w2`,
    /// `.mlp.b2`, `ln_f.weight`, `ln_f.bias`.
    pub fn new(
        config: LmConfig,
        mut get: impl FnMut(&str, &[usize]) -> Result<Vec<f32>, Vec<usize>>,
    ) -> Result<Lm, LmError> {
        let c = config;
        if c.d_model == 0
            || c.layers == 0
            || c.heads == 0
            || c.mlp == 0
            || c.context == 0
            || c.vocab == 0
        {
            return Err(LmError::Config(format!("{c:?} has a zero size")));
        }
        if c.d_model % c.heads != 0 || c.head_dim() % 2 != 0 {
            return Err(LmError::Config(format!(
                "{c:?}: heads must divide d_model into heads of an even width"
            )));
        }
        let mut w = |name: String, want: Vec<usize>| {
            get(&name, &want).map_err(|got| LmError::Shape { name, got, want })
        };
        let (d, m) = (c.d_model, c.mlp);
        let embed = w("embed".into(), vec![c.vocab, d])?;
        let mut blocks = Vec::with_capacity(c.layers);
        for l in 0..c.layers {
            let p = |n: &str| format!("layers.{l}.{n}");
            blocks.push(Block {
                ln1: (w(p("ln1.weight"), vec![d])?, w(p("ln1.bias"), vec![d])?),
                wq: w(p("attn.wq"), vec![d, d])?,
                wk: w(p("attn.wk"), vec![d, d])?,
                wv: w(p("attn.wv"), vec![d, d])?,
                wo: w(p("attn.wo"), vec![d, d])?,
                ln2: (w(p("ln2.weight"), vec![d])?, w(p("ln2.bias"), vec![d])?),
                w1: w(p("mlp.w1"), vec![d, m])?,
                b1: w(p("mlp.b1"), vec![m])?,
                w2: w(p("mlp.w2"), vec![m, d])?,
                b2: w(p("mlp.b2"), vec![d])?,
            });
        }
        let ln_f = (
            w("ln_f.weight".into(), vec![d])?,
            w("ln_f.bias".into(), vec![d])?,
        );
        let hd = c.head_dim();
        let half = hd / 2;
        let mut cos = Vec::with_capacity(c.context * half);
        let mut sin = Vec::with_capacity(c.context * half);
        for p in 0..c.context {
            for i in 0..half {
                let a = p as f32 * c.rope_base.powf(-(2.0 * i as f32) / hd as f32);
                cos.push(a.cos());
                sin.push(a.sin());
            }
        }
        Ok(Lm {
            config: c,
            embed,
            blocks,
            ln_f,
            rope: (cos, sin),
        })
    }

    /// The model's shape.
    pub fn config(&self) -> &LmConfig {
        &self.config
    }

    /// The tokens of `text`: BOS, then its UTF-8 bytes.
    pub fn tokens(text: &str) -> Vec<u8> {
        let mut t = vec![0];
        t.extend_from_slice(text.as_bytes());
        t
    }

    /// Runs `tokens` (BOS first) through the model.
    pub fn forward(&self, tokens: &[u8]) -> Result<LmRun, LmError> {
        let c = &self.config;
        let t = tokens.len();
        if t == 0 {
            return Err(LmError::Length {
                len: 0,
                context: c.context,
            });
        }
        let (l, h) = (c.layers, c.heads);
        let mut weights = vec![vec![vec![0f32; t * t]; h]; l];
        let mut cache = KvCache::default();
        let logits = self.run(&mut cache, tokens, &mut |layer, head, i, row| {
            weights[layer][head][i * t..][..row.len()].copy_from_slice(row);
        })?;
        let hd = c.head_dim();
        let tensors = |per: Vec<Vec<Vec<f32>>>, cols: usize| -> Result<Vec<Vec<Matrix>>, LmError> {
            per.into_iter()
                .map(|layer| layer.into_iter().map(|m| matrix(t, cols, m)).collect())
                .collect()
        };
        Ok(LmRun {
            logits: matrix(t, c.vocab, logits)?,
            attention: tensors(weights, t)?,
            keys: tensors(cache.keys, hd)?,
            values: tensors(cache.values, hd)?,
        })
    }

    /// Runs one more token against `cache` (which it extends) and returns its next-token
    /// logits. Equals the last row of [`Lm::forward`] on the whole sequence while the cache
    /// holds every earlier token; with rows dropped from the cache, it is the model under that
    /// compressed cache (the positions stay those of the uncompressed sequence).
    pub fn decode(&self, cache: &mut KvCache, token: u8) -> Result<Vec<f32>, LmError> {
        self.extend(cache, &[token])
    }

    /// Runs `tokens` after those in `cache` (which it extends), all at once, and returns their
    /// next-token logits, `tokens.len() x vocab`: the same as [`Lm::decode`] token by token
    /// (each new token sees the cache's rows and the new tokens before it), with each weight
    /// matrix read once for all of them. This is how a teacher-forced continuation under a
    /// compressed cache is evaluated.
    pub fn extend(&self, cache: &mut KvCache, tokens: &[u8]) -> Result<Vec<f32>, LmError> {
        self.run(cache, tokens, &mut |_, _, _, _| {})
    }

    /// [`Lm::extend`], calling `seen(layer, head, i, weights)` with the attention of new token
    /// `i` over the rows it sees (the cache's, then the new tokens up to itself).
    pub fn extend_seen(
        &self,
        cache: &mut KvCache,
        tokens: &[u8],
        seen: &mut Seen<'_>,
    ) -> Result<Vec<f32>, LmError> {
        self.run(cache, tokens, seen)
    }

    /// The one forward pass: `tokens` at positions `cache.position..`, against the cache.
    fn run(
        &self,
        cache: &mut KvCache,
        tokens: &[u8],
        seen: &mut Seen<'_>,
    ) -> Result<Vec<f32>, LmError> {
        let c = &self.config;
        let (d, h, hd) = (c.d_model, c.heads, c.head_dim());
        let n = tokens.len();
        let pos = cache.position;
        if pos + n > c.context {
            return Err(LmError::Length {
                len: pos + n,
                context: c.context,
            });
        }
        self.check_tokens(tokens)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        if cache.keys.len() != c.layers {
            cache.keys = vec![vec![Vec::new(); h]; c.layers];
            cache.values = vec![vec![Vec::new(); h]; c.layers];
        }
        let mut x: Vec<f32> = tokens
            .iter()
            .flat_map(|&b| self.embed[usize::from(b) * d..][..d].iter().copied())
            .collect();
        let scale = 1.0 / (hd as f32).sqrt();
        let mut w = Vec::new();
        for (l, b) in self.blocks.iter().enumerate() {
            let a = layer_norm(&x, d, &b.ln1, c.norm_eps);
            let q = matmul(&a, n, d, &b.wq, d);
            let k = matmul(&a, n, d, &b.wk, d);
            let v = matmul(&a, n, d, &b.wv, d);
            let mut out = vec![0f32; n * d];
            for head in 0..h {
                let qh = self.head_rope(&q, n, d, head, pos);
                cache.keys[l][head].extend(self.head_rope(&k, n, d, head, pos));
                cache.values[l][head].extend(take_head(&v, n, d, head, hd));
                let (ks, vs) = (&cache.keys[l][head], &cache.values[l][head]);
                // (a head's rows: the cache's, which may hold fewer than `pos`, then the new)
                let before = ks.len() / hd - n;
                for i in 0..n {
                    let qi = &qh[i * hd..][..hd];
                    w.clear();
                    w.extend(
                        ks.chunks_exact(hd)
                            .take(before + i + 1)
                            .map(|kj| dot(qi, kj) * scale),
                    );
                    softmax(&mut w);
                    let o = &mut out[i * d + head * hd..][..hd];
                    for (&wj, vj) in w.iter().zip(vs.chunks_exact(hd)) {
                        axpy(o, wj, vj);
                    }
                    seen(l, head, i, &w);
                }
            }
            add(&mut x, &matmul(&out, n, d, &b.wo, d));
            let a = layer_norm(&x, d, &b.ln2, c.norm_eps);
            let mut hidden = matmul(&a, n, d, &b.w1, c.mlp);
            for row in hidden.chunks_exact_mut(c.mlp) {
                for (v, bias) in row.iter_mut().zip(&b.b1) {
                    *v = gelu(*v + bias);
                }
            }
            let mut mlp = matmul(&hidden, n, c.mlp, &b.w2, d);
            for row in mlp.chunks_exact_mut(d) {
                add(row, &b.b2);
            }
            add(&mut x, &mlp);
        }
        cache.position += n;
        cache.head_dim = hd;
        Ok(self.logits(&x, n))
    }

    /// Every token within the vocabulary (a config with fewer than 256 tokens cannot take
    /// every byte).
    fn check_tokens(&self, tokens: &[u8]) -> Result<(), LmError> {
        let vocab = self.config.vocab;
        match tokens.iter().find(|&&t| usize::from(t) >= vocab) {
            Some(&token) => Err(LmError::Token {
                token,
                last: vocab.saturating_sub(1),
            }),
            None => Ok(()),
        }
    }

    /// Head `head` of `x` (`t x d`) rotated by RoPE, positions `first..first + t`.
    fn head_rope(&self, x: &[f32], t: usize, d: usize, head: usize, first: usize) -> Vec<f32> {
        let hd = self.config.head_dim();
        let half = hd / 2;
        let mut out = take_head(x, t, d, head, hd);
        for (i, row) in out.chunks_exact_mut(hd).enumerate() {
            let cos = &self.rope.0[(first + i) * half..][..half];
            let sin = &self.rope.1[(first + i) * half..][..half];
            let (x1, x2) = row.split_at_mut(half);
            for j in 0..half {
                let (a, b) = (x1[j], x2[j]);
                x1[j] = a * cos[j] - b * sin[j];
                x2[j] = a * sin[j] + b * cos[j];
            }
        }
        out
    }

    /// The final norm, then the tied embedding as the output layer.
    fn logits(&self, x: &[f32], t: usize) -> Vec<f32> {
        let c = &self.config;
        let xn = layer_norm(x, c.d_model, &self.ln_f, c.norm_eps);
        let mut out = Vec::with_capacity(t * c.vocab);
        for row in xn.chunks_exact(c.d_model) {
            out.extend(self.embed.chunks_exact(c.d_model).map(|e| dot(row, e)));
        }
        out
    }
}

/// Mean next-token loss (nats per byte) of `run`'s logits against `tokens[1..]`.
pub fn mean_loss(run: &LmRun, tokens: &[u8]) -> f64 {
    let n = tokens.len().saturating_sub(1).min(run.logits.rows());
    if n == 0 {
        return 0.0;
    }
    let total: f64 = (0..n)
        .map(|i| {
            let row = run.logits.row(i).unwrap_or(&[]);
            -log_softmax_at(row, usize::from(tokens[i + 1]))
        })
        .sum();
    total / n as f64
}

/// `log softmax(row)[at]`, in f64.
pub fn log_softmax_at(row: &[f32], at: usize) -> f64 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = row.iter().map(|&v| f64::from(v - max).exp()).sum();
    row.get(at)
        .map_or(f64::NEG_INFINITY, |&v| f64::from(v - max) - sum.ln())
}

/// (the shapes are built to match: an error here is a bug in this file, said, not a panic)
fn matrix(rows: usize, cols: usize, data: Vec<f32>) -> Result<Matrix, LmError> {
    Matrix::new(rows, cols, data).map_err(|e| LmError::Config(e.to_string()))
}

fn take_head(x: &[f32], t: usize, d: usize, head: usize, hd: usize) -> Vec<f32> {
    (0..t)
        .flat_map(|i| x[i * d + head * hd..][..hd].iter().copied())
        .collect()
}

/// `a (n x k) @ b (k x m)`, row-major.
///
/// In tiles of [`TILE_ROWS`] rows by [`TILE_COLS`] columns whose sums stay in locals while `p`
/// runs over `k`: each row of `b` read serves four rows of `a`, and no partial sum goes to
/// memory and back (the plain loop, one `axpy` per element of `a`, loads and stores its output
/// row for every multiply-add). Each sum still adds its products in the order of `p`, so the
/// result is the plain loop's to the bit. The rows and columns left over take the plain loop.
fn matmul(a: &[f32], n: usize, k: usize, b: &[f32], m: usize) -> Vec<f32> {
    const R: usize = TILE_ROWS;
    const C: usize = TILE_COLS;
    let mut out = vec![0f32; n * m];
    let tiled_rows = n / R * R;
    let tiled_cols = m / C * C;
    for i in (0..tiled_rows).step_by(R) {
        let rows: [&[f32]; R] = std::array::from_fn(|r| &a[(i + r) * k..][..k]);
        for j in (0..tiled_cols).step_by(C) {
            let mut acc = [[0f32; C]; R];
            for p in 0..k {
                let bp = &b[p * m + j..][..C];
                for (acc, row) in acc.iter_mut().zip(&rows) {
                    let x = row[p];
                    for (s, &y) in acc.iter_mut().zip(bp) {
                        *s += x * y;
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                out[(i + r) * m + j..][..C].copy_from_slice(acc);
            }
        }
    }
    for i in 0..n {
        // (whole rows below the tiles; the columns right of them in the tiles' rows)
        let from = if i < tiled_rows { tiled_cols } else { 0 };
        if from == m {
            continue;
        }
        let row = &mut out[i * m + from..(i + 1) * m];
        for (p, &aip) in a[i * k..][..k].iter().enumerate() {
            axpy(row, aip, &b[p * m + from..(p + 1) * m]);
        }
    }
    out
}

/// Rows of a [`matmul`] tile.
const TILE_ROWS: usize = 4;
/// Columns of a [`matmul`] tile (four SIMD vectors of f32).
const TILE_COLS: usize = 16;

fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

/// `a . b`, summed in eight lanes: a sum taken in order is one long chain the compiler may not
/// reorder, so it cannot use SIMD; eight independent sums can (a head's 32-wide rows are four
/// steps of eight). The lanes' order is fixed, so every platform gives the same result.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            lanes[k] += x[k] * y[k];
        }
    }
    let pairs = [
        lanes[0] + lanes[4],
        lanes[1] + lanes[5],
        lanes[2] + lanes[6],
        lanes[3] + lanes[7],
    ];
    (pairs[0] + pairs[2]) + (pairs[1] + pairs[3]) + tail
}

fn add(x: &mut [f32], y: &[f32]) {
    for (x, &y) in x.iter_mut().zip(y) {
        *x += y;
    }
}

fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    // (the exponentials in a loop of their own, which vectorises; the sum in order after)
    for v in row.iter_mut() {
        *v = exp(*v - max);
    }
    let mut sum = 0f32;
    for &v in row.iter() {
        sum += v;
    }
    for v in row.iter_mut() {
        *v /= sum;
    }
}

fn layer_norm(x: &[f32], d: usize, (w, b): &(Vec<f32>, Vec<f32>), eps: f32) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(d) {
        let mean = row.iter().sum::<f32>() / d as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / d as f32;
        let inv = 1.0 / (var + eps).sqrt();
        out.extend(
            row.iter()
                .zip(w.iter().zip(b))
                .map(|(v, (w, b))| (v - mean) * inv * w + b),
        );
    }
    out
}

/// GELU, tanh form (candle's `gelu`), `0.5 x (1 + tanh(y))` written as `x / (1 + e^(-2y))`,
/// the same function, with [`exp`]: `libm`'s `tanhf` is a call per element that does not
/// vectorise, and was the forward pass's largest cost after the products (benches/README.md).
/// This form has no cancellation (`1 + tanh(y)` near -1 loses digits).
fn gelu(x: f32) -> f32 {
    const C: f32 = 0.797_884_6; // sqrt(2/pi)
    x / (1.0 + exp(-2.0 * C * (x + 0.044_715 * x * x * x)))
}

/// `e^x` to about 1e-7 relative, in plain f32 operations without a branch or a call, so that a
/// loop of them vectorises, and every platform computes the same bits (Cephes' `expf`: `x = n
/// ln 2 + r`, `ln 2` split in two for an exact `n ln 2`, a degree-7 polynomial for `e^r`, `2^n`
/// from the exponent's bits). `x` is clamped to `[-87, 88]`, where `2^n` stays a normal float:
/// below, `e^x` is under 2e-38 instead of smaller. Public for the trainer (`crates/train`),
/// whose softmax and GELU are this forward pass's, differentiated.
pub fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E + 0.5).floor();
    let r = x - n * 0.693_359_4 - n * -2.121_944_4e-4;
    let p = (((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2)
        * r
        + 1.666_666_5e-1)
        * r
        + 0.5)
        * (r * r)
        + r
        + 1.0;
    // (n in -126 ..= 127 here: 2^n's exponent field is n + 127, in 1 ..= 254)
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

#[cfg(test)]
mod tests {
    #[test]
    fn gelu_through_expf_is_the_tanh_form() {
        let tanh_form = |x: f64| {
            0.5 * x * (1.0 + (0.797_884_560_802_865_4 * (x + 0.044_715 * x * x * x)).tanh())
        };
        let mut worst = 0f64;
        for i in -20_000..=20_000 {
            let x = i as f32 * 1e-3; // -20 ..= 20
            let want = tanh_form(f64::from(x));
            let got = f64::from(super::gelu(x));
            worst = worst.max((got - want).abs() / want.abs().max(1e-3));
        }
        assert!(worst < 1e-6, "relative error {worst:e}");
        // Far out: the limits, not a NaN from inf / inf.
        assert!(super::gelu(-1e4).abs() < 1e-30);
        assert_eq!(super::gelu(1e4), 1e4);
        assert_eq!(super::gelu(0.0), 0.0);
    }

    #[test]
    fn exp_is_within_a_few_ulp_of_libm_over_the_range_the_gelu_uses() {
        let mut worst = 0f64;
        // (inside the clamp: -87.000_01 is clamped to -87)
        for i in -86_999..=87_999 {
            let x = i as f32 * 1e-3;
            let want = f64::from(x).exp();
            worst = worst.max((f64::from(super::exp(x)) - want).abs() / want);
        }
        assert!(worst < 3e-7, "relative error {worst:e}");
        assert!(super::exp(-1e9) > 0.0 && super::exp(-1e9) < 2e-38);
        assert!(super::exp(1e9).is_finite());
    }

    use super::*;

    /// A model of `vocab` tokens with every weight 0.01 (norms 1, biases 0).
    fn tiny(vocab: usize) -> Lm {
        let config = LmConfig {
            d_model: 4,
            layers: 1,
            heads: 2,
            mlp: 8,
            context: 8,
            vocab,
            rope_base: 10_000.0,
            norm_eps: 1e-5,
        };
        Lm::new(config, |name, shape| {
            let n = shape.iter().product();
            let v = if name.ends_with("weight") {
                1.0
            } else if name.contains(".b") || name.ends_with("bias") {
                0.0
            } else {
                0.01
            };
            Ok(vec![v; n])
        })
        .expect("a tiny model")
    }

    #[test]
    fn the_tiled_product_is_the_plain_loops_to_the_bit() {
        // (shapes with leftover rows and columns: 6 = 4 + 2 rows, 37 = 2 x 16 + 5 columns)
        for (n, k, m) in [(6, 9, 37), (1, 5, 16), (4, 3, 16), (9, 128, 128), (2, 7, 3)] {
            let a: Vec<f32> = (0..n * k)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
                .collect();
            let b: Vec<f32> = (0..k * m)
                .map(|i| ((i * 53 % 97) as f32 - 48.0) / 9.0)
                .collect();
            let mut plain = vec![0f32; n * m];
            for i in 0..n {
                for p in 0..k {
                    axpy(
                        &mut plain[i * m..(i + 1) * m],
                        a[i * k + p],
                        &b[p * m..(p + 1) * m],
                    );
                }
            }
            let tiled = matmul(&a, n, k, &b, m);
            assert!(
                tiled
                    .iter()
                    .zip(&plain)
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
                "{n}x{k} @ {k}x{m}"
            );
        }
    }

    #[test]
    fn a_byte_outside_a_small_vocabulary_is_refused_not_indexed() {
        let lm = tiny(16);
        assert_eq!(
            lm.forward(&[0, 3, 200]).unwrap_err().to_string(),
            "token 200: the model's tokens are 0 to 15"
        );
        let mut cache = KvCache::default();
        assert!(matches!(
            lm.decode(&mut cache, 99),
            Err(LmError::Token { token: 99, .. })
        ));
        assert!(lm.forward(&[0, 3, 15]).is_ok());
    }

    #[test]
    fn the_cache_stops_at_the_context_and_retains_rows() {
        let lm = tiny(256);
        let mut cache = KvCache::default();
        for t in 0..8u8 {
            lm.decode(&mut cache, t).expect("within the context");
        }
        assert_eq!(cache.len(), 8);
        assert!(matches!(
            lm.decode(&mut cache, 1),
            Err(LmError::Length { len: 9, context: 8 })
        ));
        cache.retain(&[0, 5, 7]);
        assert_eq!(cache.len(), 3);
        assert_eq!(
            cache.position, 8,
            "positions stay those of the whole sequence"
        );
    }
}
