//! kvlab's trainer (native only, never in the page): `cargo xtask train` runs its binary.
//!
//! The model's forward and backward pass are written by hand over flat buffers ([`grad`]),
//! its products through the `gemm` crate ([`mm`]), the batch split across threads; the first
//! trainer's candle model stays as the reference the gradient is tested against and the
//! baseline the benchmark measures ([`mod@reference`]). [`data`] makes the training mixtures with
//! kvlab's seeded generator, [`probes`] measures what the model can do while it trains,
//! [`checkpoint`] lets a stopped run resume to the same weights.

pub mod adamw;
pub mod bench;
pub mod checkpoint;
pub mod data;
pub mod grad;
pub mod mm;
pub mod params;
pub mod probes;
pub mod reference;
pub mod run;
