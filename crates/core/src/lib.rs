//! # kvlab-core — the note's math
//!
//! The numeric core of kvlab: every formula of the note *KV 压缩数学* (restated exactly in
//! `math-spec.md`) that the page makes live, and the seeded data it runs on. It depends on no
//! page, plotting or wasm crate (the crate's dependencies are `thiserror`, `serde`, `half` and
//! `libm`), so "the core knows no page" is the compiler's rule, not a convention. The `kvlab`
//! crate re-exports every module here under the same name (`kvlab::quant` is
//! `kvlab_core::quant`).
//!
//! | module | what |
//! |---|---|
//! | [`tensor`] | `Matrix`: row-major `f32` with a validated shape |
//! | [`quant`] | quantize / dequantize / error statistics and bounds (note §2) |
//! | [`select`] | scores, H2O, SnapKV, StreamingLLM, ratios, mass retained (note §3) |
//! | [`budget`] | byte accounting, `M_meta` / `M_index`, `R_overall`, model presets (note §1, §4) |
//! | [`policy`] | more policies (H2O mean, TOVA, random, oracle), quality, sweeps, GQA copies |
//! | [`kivi`] | KIVI-style mixed precision |
//! | [`synth`] | seeded generators of attention histories and KV tensors |
//! | [`rng`] | the one source of random numbers (SplitMix64, xoshiro256**) |
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod budget;
pub mod kivi;
pub mod lm;
pub mod policy;
pub mod quant;
pub mod rng;
pub mod select;
pub mod synth;
pub mod tensor;

pub use tensor::{Matrix, ShapeError};
