//! Fuzzes the delimited-text reader: UTF-8, delimiter detection, header row, cells.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    if let Ok(table) = kvlab::io::csv::load("f.csv", data, &common::LIMITS) {
        common::check(&table.tensor);
        assert_eq!(table.tensor.rank(), 2);
    }
    common::load_all("f.csv", data);
});
