//! Fuzzes the JSON reader: nested lists (ragged, deep, mixed) and the {shape, data} form.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = kvlab::io::json::load("f.json", data, &common::LIMITS) {
        common::check(&t);
    }
    common::load_all("f.json", data);
});
