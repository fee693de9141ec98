//! Helpers shared by the property tests (each test crate uses a subset of them, hence the
//! `dead_code` allowance).
#![allow(dead_code)]

use proptest::prelude::*;

/// Points a float range is sampled on: 2^24 + 1, evenly spaced.
const STEPS: u32 = 1 << 24;

/// A float in `lo..hi` (half-open), uniform on 2^24 evenly spaced points.
///
/// proptest's own float range sampler trips a debug assertion on some seeds
/// (`float_samplers.rs`: "self.low - result < initial.step"), which failed a test at random
/// about once in forty full runs here; this maps an integer instead, and shrinks toward `lo`.
pub fn f64_in(lo: f64, hi: f64) -> impl Strategy<Value = f64> + Clone {
    (0..STEPS).prop_map(move |i| {
        let v = lo + (hi - lo) * (f64::from(i) / f64::from(STEPS));
        if v < hi {
            v
        } else {
            lo
        }
    })
}

/// [`f64_in`] for `lo..=hi` (both ends reachable).
pub fn f64_in_incl(lo: f64, hi: f64) -> impl Strategy<Value = f64> + Clone {
    (0..=STEPS).prop_map(move |i| {
        if i == STEPS {
            hi
        } else {
            lo + (hi - lo) * (f64::from(i) / f64::from(STEPS))
        }
    })
}

/// [`f64_in`] for `f32` (computed in `f64`, rounded; a value that rounds up to `hi` becomes
/// `lo`, so the range stays half-open).
pub fn f32_in(lo: f32, hi: f32) -> impl Strategy<Value = f32> + Clone {
    f64_in(f64::from(lo), f64::from(hi)).prop_map(move |v| {
        let v = v as f32;
        if v < hi {
            v
        } else {
            lo
        }
    })
}

/// [`f64_in_incl`] for `f32`.
pub fn f32_in_incl(lo: f32, hi: f32) -> impl Strategy<Value = f32> + Clone {
    f64_in_incl(f64::from(lo), f64::from(hi)).prop_map(|v| v as f32)
}
