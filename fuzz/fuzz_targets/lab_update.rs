//! Fuzzes the page's model through its exported surface: `Lab::new(settings)` then
//! `Lab::update(&other)`, with settings that start from a parsed URL query and then have their
//! numeric fields overwritten by raw values far outside the clamped ranges (0, max + 1,
//! `usize::MAX`...), as a hand-written JS object passed to `Page::update` could. Errors are fine;
//! a panic is a bug, and a refused update must leave every figure as it was.
//!
//! Data-size fields stay small (`T <= 256`, `d <= 32`, `S <= 64`) so an execution is cheap and
//! the run explores parameters, not allocation. The model fields (`layers`, `context`...) get
//! raw `u64` values too: they only enter arithmetic, where overflow must be an error, not a
//! panic or a silently wrapped number.
#![no_main]
use kvlab::lab::Lab;
use kvlab::state::Settings;
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

/// A `usize` that is usually near a boundary the code cares about, sometimes anything.
fn wild(u: &mut Unstructured) -> Result<usize> {
    Ok(match u.int_in_range(0u8..=7)? {
        0 => 0,
        1 => 1,
        2 => usize::MAX,
        3 => usize::MAX / 2 + 1,
        4 => u.int_in_range(0usize..=300)?,
        5 => u.int_in_range(0usize..=70_000)?,
        6 => (1usize << u.int_in_range(0u32..=63)?).wrapping_add(u.int_in_range(0usize..=2)?),
        _ => u.arbitrary()?,
    })
}

/// Same for the model fields (`u64`), including products that overflow.
fn wild64(u: &mut Unstructured) -> Result<u64> {
    Ok(match u.int_in_range(0u8..=4)? {
        0 => 0,
        1 => u64::MAX,
        2 => u.int_in_range(0u64..=5000)?,
        3 => 1u64 << u.int_in_range(0u32..=63)?,
        _ => u.arbitrary()?,
    })
}

/// Settings from a query string, then (per field, if the fuzzer says so) a raw override.
fn settings(u: &mut Unstructured) -> Result<Settings> {
    let len = u.int_in_range(0usize..=200)?;
    let query = String::from_utf8_lossy(u.bytes(len.min(u.len()))?).into_owned();
    let mut s = Settings::from_query(&query).settings;
    // Keep the generated data small whatever the query said (the raw overrides below may
    // still pick up to T = 256, S = 64, d = 32).
    s.tokens = s.tokens.min(128);
    s.steps = s.steps.min(32);
    s.channels = s.channels.min(16);
    s.outliers = s.outliers.min(40);
    s.skewed = s.skewed.min(40);
    let flags: u32 = u.arbitrary()?;
    let on = |bit: u32| flags & (1 << bit) != 0;
    if on(0) {
        s.tokens = u.int_in_range(0usize..=256)?;
    }
    if on(1) {
        s.steps = u.int_in_range(0usize..=64)?;
    }
    if on(2) {
        s.channels = u.int_in_range(0usize..=32)?;
    }
    if on(3) {
        s.budget = wild(u)?;
    }
    if on(4) {
        s.recent = wild(u)?;
    }
    if on(5) {
        s.window = wild(u)?;
    }
    if on(6) {
        s.kernel = wild(u)?;
    }
    if on(7) {
        s.sinks = wild(u)?;
    }
    if on(8) {
        s.group = wild(u)?;
    }
    if on(9) {
        s.bits = u.arbitrary()?;
    }
    if on(10) {
        s.channel = if u.arbitrary()? { Some(wild(u)?) } else { None };
    }
    if on(11) {
        s.outliers = u.int_in_range(0usize..=40)?;
    }
    if on(12) {
        s.skewed = u.int_in_range(0usize..=40)?;
    }
    if on(13) {
        s.seed = u.arbitrary()?;
    }
    if on(14) {
        s.layers = wild64(u)?;
    }
    if on(15) {
        s.kv_heads = wild64(u)?;
    }
    if on(16) {
        s.head_dim = wild64(u)?;
    }
    if on(17) {
        s.fp_bytes = wild64(u)?;
    }
    if on(18) {
        s.context = wild64(u)?;
    }
    if on(19) {
        s.batch = wild64(u)?;
    }
    if on(20) {
        s.model = if u.arbitrary()? {
            "custom".into()
        } else {
            "no-such-model".into()
        };
    }
    Ok(s)
}

fn run(data: &[u8]) -> Result<()> {
    let mut u = Unstructured::new(data);
    let first = settings(&mut u)?;
    let second = settings(&mut u)?;
    let third = settings(&mut u)?;
    let Ok(mut lab) = Lab::new(first) else {
        return Ok(());
    };
    for s in [&second, &third] {
        // Debug text, not `==`: figures may hold NaN, and "unchanged" means bit-for-bit here.
        let before = format!("{:?}", lab.figures());
        let settings_before = lab.settings().clone();
        match lab.update(s) {
            Ok(_) => {
                assert_eq!(lab.settings(), s);
                let _ = lab.export_json();
                let _ = lab.export_csv();
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                let _ = e.field();
                assert_eq!(
                    format!("{:?}", lab.figures()),
                    before,
                    "a refused update changed the figures: {e}"
                );
                assert_eq!(
                    lab.settings(),
                    &settings_before,
                    "a refused update changed the settings: {e}"
                );
            }
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(data);
});
