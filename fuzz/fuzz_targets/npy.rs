//! Fuzzes the .npy reader: header parser, dtype decoding, Fortran reordering.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = kvlab::io::npy::load("f.npy", data, &common::LIMITS) {
        common::check(&t);
    }
    common::load_all("f.npy", data);
});
