//! Fuzzes the .safetensors reader: header length, JSON header, offsets, every tensor's load.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    if let Ok(infos) = kvlab::io::safetensors::list("f.safetensors", data) {
        for info in &infos {
            if let Ok(t) =
                kvlab::io::safetensors::load_info("f.safetensors", data, info, &common::LIMITS)
            {
                common::check(&t);
            }
        }
    }
    common::load_all("f.safetensors", data);
});
