//! # kvlab — KV-cache compression you can play with
//!
//! kvlab is the numeric core (and, on `wasm32`, the browser driver) of a page where learners
//! explore KV-cache compression for LLM inference. It follows the note *KV 压缩数学* and its exact
//! restatement in `math-spec.md`, which split compression into two levers and add them up honestly:
//!
//! | note section | formula | implemented by |
//! |---|---|---|
//! | 1 budget | `M_KV,final = T_kept x bytes_token + M_meta + M_index` | [`budget::breakdown`] |
//! | 2.1 symmetric | `scale = max\|x\| / (2^(b-1)-1)`, `q = round(x/scale)` | [`quant::quantize`] |
//! | 2.2 bounds | `\|x - x_hat\| <= scale/2`, `\|\|x - x_hat\|\|^2 <= 1/4 sum scale^2` | [`quant::group_errors`], [`quant::row_errors`], [`quant::analyze`] |
//! | 2.3 asymmetric | `scale = (max-min)/(2^b-1)`, `zp = round(-min/scale)` | [`quant::quantize`] |
//! | 2.4 `R_quant` | `s_fp / s_q`, and with metadata | [`budget::r_quant`], [`budget::Breakdown::bytes_token_quant`] |
//! | 3.1 H2O | `score_i = sum_t a[t][i]`, `TopK(score, B-r) ∪ recent` | [`select::cumulative_scores`], [`select::h2o`] |
//! | 3.2 SnapKV | observation-window scores, pooled, same rule | [`select::observation_scores`], [`select::snapkv`] |
//! | 3.3 `R_token` | `T_total / T_kept` | [`select::compression_ratio`] |
//! | 4 `R_overall` | `T_total bytes_fp / (T_kept bytes_q + M_meta + M_index)` | [`budget::breakdown`] |
//!
//! The core modules ([`tensor`], [`quant`], [`select`], [`budget`], [`io`], [`synth`]) use no
//! wasm, DOM or plotting crate and are tested natively. [`chart`] draws prepared view data with
//! plotters on any backend. `web` (wasm32 only) is the single module that talks to the browser.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod chart;
#[cfg(not(target_arch = "wasm32"))]
pub mod first_view;
#[cfg(target_arch = "wasm32")]
pub mod js;
pub mod lab;
pub mod render;
pub mod state;
#[cfg(all(target_arch = "wasm32", feature = "page"))]
mod web;

// The numeric core lives in `crates/core` (no page, no plotting, no wasm); its modules are
// re-exported here under their own names, so `kvlab::quant` is `kvlab_core::quant`.
pub use kvlab_core::{budget, kivi, lm, policy, quant, rng, select, synth, tensor};
pub use kvlab_core::{Matrix, ShapeError};
// The readers and the uploads live in `crates/io` (on the core only: the upload module is built
// from it); `kvlab::io` and `kvlab::upload` are that crate and its uploads.
pub use kvlab_io as io;
pub use kvlab_io::upload;
