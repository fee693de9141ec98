//! Trains kvlab's byte-level language model with candle, natively (never in the page).
//!
//! ```text
//! kvlab-train --corpus FILE --out DIR [--steps N] [--seed S] [--threads T]
//! ```
//!
//! `cargo xtask train` prepares the corpus (the King James Bible from Debian's `bible-kjv-text`)
//! and runs this. The model: decoder-only, byte-level (256 tokens; byte 0 is the BOS that starts
//! every sequence), RoPE, pre-norm blocks, a tied byte embedding; its shape is [`Config`]. The
//! schedule is step-based and every random number comes from kvlab's own generator (candle's CPU
//! generator cannot be seeded), so a run is reproducible up to the float summation order of the
//! thread count it ran with.
//!
//! Writes to DIR: `model.safetensors` (f16), `model.json` (the config, the training run and its
//! held-out loss), `reference.json` (every position's logits of fixed prompts, computed from
//! the f16 weights) and `heldout.txt` (the held-out slice the loss is measured on), which the
//! tests read: CI never builds candle's forward, it checks kvlab's own against these. The page
//! fetches `model.json` and the weights.

use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use kvlab_core::rng::Xoshiro256;
use std::collections::HashMap;
use std::time::Instant;

/// The model's shape (the spike's, which trained on these machines in 30 minutes).
#[derive(Debug, Clone, Copy)]
struct Config {
    d_model: usize,
    layers: usize,
    heads: usize,
    mlp: usize,
    context: usize,
    vocab: usize,
    rope_base: f32,
}

const CONFIG: Config = Config {
    d_model: 128,
    layers: 4,
    heads: 4,
    mlp: 512,
    context: 256,
    vocab: 256,
    rope_base: 10_000.0,
};

/// The prompts whose logits are recorded beside the weights (every position's), for the test
/// that kvlab's forward pass equals this one.
const REFERENCE_PROMPTS: [&str; 3] = [
    "In the beginning God created the heaven and the earth.",
    "And the LORD said unto Moses,",
    "x",
];

/// Bytes of the held-out slice the loss is stated on (the start of the last 5% of the corpus).
const HELDOUT_BYTES: usize = 8 * 255;

struct Args {
    corpus: String,
    out: String,
    steps: usize,
    seed: u64,
    batch: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        corpus: String::new(),
        out: String::new(),
        steps: 1800,
        seed: 1,
        batch: 8,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().ok_or_else(|| format!("{k} needs a value"));
        match k.as_str() {
            "--corpus" => a.corpus = v()?,
            "--out" => a.out = v()?,
            "--steps" => a.steps = v()?.parse().map_err(|e| format!("--steps: {e}"))?,
            "--seed" => a.seed = v()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--batch" => a.batch = v()?.parse().map_err(|e| format!("--batch: {e}"))?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.corpus.is_empty() || a.out.is_empty() {
        return Err("usage: kvlab-train --corpus FILE --out DIR [--steps N] [--seed S]".into());
    }
    Ok(a)
}

/// The model's parameters by name (the names the safetensors file and kvlab's loader use).
struct Model {
    params: Vec<(String, candle_core::Var)>,
}

impl Model {
    /// Initialises every weight from `rng`: normal(0, 0.02) matrices (the output projections
    /// scaled by 1/sqrt(2 layers), GPT-2's rule), unit norms, zero biases.
    fn new(c: &Config, rng: &mut Xoshiro256, dev: &Device) -> candle_core::Result<Model> {
        let mut params = Vec::new();
        let mut normal = |n: usize, std: f64| -> Vec<f32> {
            (0..n)
                .map(|_| {
                    // Box-Muller from two uniforms in (0, 1].
                    let u1 = 1.0 - rng.uniform();
                    let u2 = rng.uniform();
                    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos() * std) as f32
                })
                .collect()
        };
        let mut add = |name: String, data: Vec<f32>, shape: &[usize]| -> candle_core::Result<()> {
            let t = Tensor::from_vec(data, shape, dev)?;
            params.push((name, candle_core::Var::from_tensor(&t)?));
            Ok(())
        };
        let (d, m) = (c.d_model, c.mlp);
        let proj_std = 0.02 / (2.0 * c.layers as f64).sqrt();
        add("embed".into(), normal(c.vocab * d, 0.02), &[c.vocab, d])?;
        for l in 0..c.layers {
            let p = |n: &str| format!("layers.{l}.{n}");
            add(p("ln1.weight"), vec![1.0; d], &[d])?;
            add(p("ln1.bias"), vec![0.0; d], &[d])?;
            add(p("attn.wq"), normal(d * d, 0.02), &[d, d])?;
            add(p("attn.wk"), normal(d * d, 0.02), &[d, d])?;
            add(p("attn.wv"), normal(d * d, 0.02), &[d, d])?;
            add(p("attn.wo"), normal(d * d, proj_std), &[d, d])?;
            add(p("ln2.weight"), vec![1.0; d], &[d])?;
            add(p("ln2.bias"), vec![0.0; d], &[d])?;
            add(p("mlp.w1"), normal(d * m, 0.02), &[d, m])?;
            add(p("mlp.b1"), vec![0.0; m], &[m])?;
            add(p("mlp.w2"), normal(m * d, proj_std), &[m, d])?;
            add(p("mlp.b2"), vec![0.0; d], &[d])?;
        }
        add("ln_f.weight".into(), vec![1.0; d], &[d])?;
        add("ln_f.bias".into(), vec![0.0; d], &[d])?;
        Ok(Model { params })
    }

    fn get(&self, name: &str) -> &Tensor {
        self.params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_tensor())
            .expect("every name is initialised")
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

/// RoPE tables `(cos, sin)`, each `context x head_dim/2`: position `p`, pair `i` rotates by
/// `p * base^(-2i/head_dim)` (the pairs are the two halves of a head, GPT-NeoX's layout).
fn rope_tables(c: &Config, dev: &Device) -> candle_core::Result<(Tensor, Tensor)> {
    let hd = c.d_model / c.heads;
    let half = hd / 2;
    let mut cos = Vec::with_capacity(c.context * half);
    let mut sin = Vec::with_capacity(c.context * half);
    for p in 0..c.context {
        for i in 0..half {
            let freq = c.rope_base.powf(-(2.0 * i as f32) / hd as f32);
            let a = p as f32 * freq;
            cos.push(a.cos());
            sin.push(a.sin());
        }
    }
    Ok((
        Tensor::from_vec(cos, (c.context, half), dev)?,
        Tensor::from_vec(sin, (c.context, half), dev)?,
    ))
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

/// Logits `(batch, t, vocab)` of `tokens` `(batch, t)`.
fn forward(
    m: &Model,
    c: &Config,
    tokens: &Tensor,
    rope_cs: &(Tensor, Tensor),
    mask: &Tensor,
) -> candle_core::Result<Tensor> {
    let (b, t) = tokens.dims2()?;
    let (d, h) = (c.d_model, c.heads);
    let hd = d / h;
    let embed = m.get("embed");
    let mut x = candle_nn::Embedding::new(embed.clone(), d).forward(tokens)?;
    let mask = mask.narrow(0, 0, t)?.narrow(1, 0, t)?;
    for l in 0..c.layers {
        let p = |n: &str| format!("layers.{l}.{n}");
        let a = layer_norm(&x, m.get(&p("ln1.weight")), m.get(&p("ln1.bias")))?;
        let heads = |w: &str| -> candle_core::Result<Tensor> {
            a.broadcast_matmul(m.get(&p(w)))?
                .reshape((b, t, h, hd))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = rope(&heads("attn.wq")?, &rope_cs.0, &rope_cs.1)?;
        let k = rope(&heads("attn.wk")?, &rope_cs.0, &rope_cs.1)?;
        let v = heads("attn.wv")?;
        let scores = (q.matmul(&k.t()?.contiguous()?)? / (hd as f64).sqrt())?;
        let scores = scores.broadcast_add(&mask)?;
        let weights = candle_nn::ops::softmax(&scores, D::Minus1)?;
        let out = weights
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((b, t, d))?;
        x = (x + out.broadcast_matmul(m.get(&p("attn.wo")))?)?;
        let a = layer_norm(&x, m.get(&p("ln2.weight")), m.get(&p("ln2.bias")))?;
        let hidden = a
            .broadcast_matmul(m.get(&p("mlp.w1")))?
            .broadcast_add(m.get(&p("mlp.b1")))?
            .gelu()?;
        let mlp = hidden
            .broadcast_matmul(m.get(&p("mlp.w2")))?
            .broadcast_add(m.get(&p("mlp.b2")))?;
        x = (x + mlp)?;
    }
    let x = layer_norm(&x, m.get("ln_f.weight"), m.get("ln_f.bias"))?;
    x.broadcast_matmul(&embed.t()?)
}

/// The causal mask, `context x context`: 0 on and below the diagonal, -inf above.
fn causal_mask(c: &Config, dev: &Device) -> candle_core::Result<Tensor> {
    let n = c.context;
    let data: Vec<f32> = (0..n * n)
        .map(|i| {
            if i % n > i / n {
                f32::NEG_INFINITY
            } else {
                0.0
            }
        })
        .collect();
    Tensor::from_vec(data, (n, n), dev)
}

/// Mean cross-entropy (nats per byte) of predicting each next byte of `seqs` (each BOS first).
fn loss_of(logits: &Tensor, targets: &Tensor) -> candle_core::Result<Tensor> {
    let (b, t, v) = logits.dims3()?;
    candle_nn::loss::cross_entropy(&logits.reshape((b * t, v))?, &targets.reshape(b * t)?)
}

/// A batch of `n` windows of the training text, each `[BOS, 255 bytes]`, and its targets.
fn batch(
    text: &[u8],
    n: usize,
    c: &Config,
    rng: &mut Xoshiro256,
    dev: &Device,
) -> candle_core::Result<(Tensor, Tensor)> {
    let t = c.context;
    let mut inputs = Vec::with_capacity(n * t);
    let mut targets = Vec::with_capacity(n * t);
    for _ in 0..n {
        let at = rng.below((text.len() - t) as u64) as usize;
        let w = &text[at..at + t];
        inputs.push(0u32);
        inputs.extend(w[..t - 1].iter().map(|&b| u32::from(b)));
        targets.extend(w.iter().map(|&b| u32::from(b)));
    }
    Ok((
        Tensor::from_vec(inputs, (n, t), dev)?,
        Tensor::from_vec(targets, (n, t), dev)?,
    ))
}

/// The held-out slice as sequences: consecutive windows of 255 bytes, each after a BOS.
fn heldout_batch(slice: &[u8], c: &Config, dev: &Device) -> candle_core::Result<(Tensor, Tensor)> {
    let w = c.context - 1;
    let n = slice.len() / w;
    let mut inputs = Vec::new();
    let mut targets = Vec::new();
    for s in 0..n {
        let win = &slice[s * w..(s + 1) * w];
        inputs.push(0u32);
        inputs.extend(win.iter().map(|&b| u32::from(b)));
        targets.extend(win.iter().map(|&b| u32::from(b)));
    }
    // (the last input position predicts nothing: its target is the window's end, dropped)
    let inputs = Tensor::from_vec(inputs, (n, w + 1), dev)?.narrow(1, 0, w)?;
    Ok((inputs, Tensor::from_vec(targets, (n, w), dev)?))
}

fn lr_at(step: usize, steps: usize) -> f64 {
    const PEAK: f64 = 2e-3;
    let warmup = (steps / 20).max(1);
    if step < warmup {
        return PEAK * (step + 1) as f64 / warmup as f64;
    }
    let p = (step - warmup) as f64 / (steps - warmup).max(1) as f64;
    // cosine to a tenth of the peak
    PEAK * (0.1 + 0.9 * 0.5 * (1.0 + (std::f64::consts::PI * p).cos()))
}

fn main() {
    if let Err(e) = run() {
        eprintln!("kvlab-train: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let c = CONFIG;
    let dev = Device::Cpu;
    let text = std::fs::read(&args.corpus)
        .map_err(|e| format!("cannot read the corpus {}: {e}", args.corpus))?;
    if text.contains(&0) {
        return Err("the corpus holds byte 0, which is the BOS token".into());
    }
    let split = text.len() - text.len() / 20;
    let (train, heldout_part) = text.split_at(split);
    let heldout = &heldout_part[..HELDOUT_BYTES.min(heldout_part.len())];
    let mut rng = Xoshiro256::stream(args.seed, 0);
    let model = Model::new(&c, &mut rng, &dev)?;
    let n_params: usize = model.params.iter().map(|(_, v)| v.elem_count()).sum();
    println!(
        "kvlab-train: {n_params} parameters, {} training bytes, {} steps of {} x {}",
        train.len(),
        args.steps,
        args.batch,
        c.context
    );
    let mut opt = AdamW::new(
        model.params.iter().map(|(_, v)| v.clone()).collect(),
        ParamsAdamW {
            lr: lr_at(0, args.steps),
            beta1: 0.9,
            beta2: 0.99,
            eps: 1e-8,
            weight_decay: 0.05,
        },
    )?;
    let rope_cs = rope_tables(&c, &dev)?;
    let mask = causal_mask(&c, &dev)?;
    let (hx, hy) = heldout_batch(heldout, &c, &dev)?;
    let start = Instant::now();
    let mut batch_rng = Xoshiro256::stream(args.seed, 1);
    for step in 0..args.steps {
        opt.set_learning_rate(lr_at(step, args.steps));
        let (x, y) = batch(train, args.batch, &c, &mut batch_rng, &dev)?;
        let loss = loss_of(&forward(&model, &c, &x, &rope_cs, &mask)?, &y)?;
        opt.backward_step(&loss)?;
        if step % 50 == 0 || step + 1 == args.steps {
            let held = loss_of(&forward(&model, &c, &hx, &rope_cs, &mask)?, &hy)?;
            println!(
                "step {step:5}  loss {:.3}  held-out {:.3}  {:.0} s",
                loss.to_scalar::<f32>()?,
                held.to_scalar::<f32>()?,
                start.elapsed().as_secs_f64()
            );
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    // The committed weights are f16: what follows is measured on them, rounded back to f32.
    let rounded = Model {
        params: model
            .params
            .iter()
            .map(|(n, v)| {
                let t = v.as_tensor().to_dtype(DType::F16)?.to_dtype(DType::F32)?;
                Ok((n.clone(), candle_core::Var::from_tensor(&t)?))
            })
            .collect::<candle_core::Result<_>>()?,
    };
    let held = loss_of(&forward(&rounded, &c, &hx, &rope_cs, &mask)?, &hy)?.to_scalar::<f32>()?;
    let mut references = Vec::new();
    for prompt in REFERENCE_PROMPTS {
        let mut ids = vec![0u32];
        ids.extend(prompt.bytes().map(u32::from));
        let n = ids.len();
        let x = Tensor::from_vec(ids, (1, n), &dev)?;
        let logits = forward(&rounded, &c, &x, &rope_cs, &mask)?.squeeze(0)?;
        references.push(serde_json::json!({
            "prompt": prompt,
            "logits": logits.to_vec2::<f32>()?,
        }));
    }
    std::fs::create_dir_all(&args.out)?;
    let out = std::path::Path::new(&args.out);
    let tensors: HashMap<String, Tensor> = model
        .params
        .iter()
        .map(|(n, v)| Ok((n.clone(), v.as_tensor().to_dtype(DType::F16)?)))
        .collect::<candle_core::Result<_>>()?;
    candle_core::safetensors::save(&tensors, out.join("model.safetensors"))?;
    std::fs::write(out.join("heldout.txt"), heldout)?;
    let card = serde_json::json!({
        "config": {
            "d_model": c.d_model, "layers": c.layers, "heads": c.heads, "mlp": c.mlp,
            "context": c.context, "vocab": c.vocab, "rope_base": c.rope_base,
            "norm_eps": 1e-5, "activation": "gelu-tanh", "bos": 0,
        },
        "training": {
            "parameters": n_params, "steps": args.steps, "batch": args.batch, "seed": args.seed,
            "seconds": seconds.round(), "train_bytes": train.len(),
            "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        },
        "heldout_loss": held,
    });
    std::fs::write(out.join("model.json"), serde_json::to_string_pretty(&card)?)?;
    let references = serde_json::json!({ "references": references });
    std::fs::write(
        out.join("reference.json"),
        serde_json::to_string(&references)?,
    )?;
    println!(
        "kvlab-train: held-out loss {held:.4} nats/byte on the f16 weights, {seconds:.0} s; wrote {}",
        out.display()
    );
    Ok(())
}
