//! Fuzzes the page's model through its exported surface: `Lab::new(settings)` then
//! `Lab::update(&other)`, with settings that start from a parsed URL query and then have their
//! numeric fields overwritten by raw values far outside the clamped ranges (0, max + 1,
//! `usize::MAX`...), as a hand-written JS object passed to `Page::update` could. Errors are fine;
//! a panic is a bug, a refused update must leave every figure as it was, and settings the lab
//! accepts must round-trip exactly through `to_query` / `from_query` (a link reproduces the view).
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
        3 => (1u64 << u.int_in_range(0u32..=63)?).wrapping_add(u.int_in_range(0u64..=2)?),
        _ => u.arbitrary()?,
    })
}

/// A settings change to apply after parsing.
type Edit = Box<dyn FnOnce(&mut Settings)>;

/// Settings from a query string, then (per field, if the fuzzer says so) a raw override. The
/// flags and raw values come first in the input and the query last, so even a short input
/// reaches the overrides.
fn settings(u: &mut Unstructured) -> Result<Settings> {
    let flags: u32 = u.arbitrary()?;
    let on = |bit: u32| flags & (1 << bit) != 0;
    let mut edits: Vec<Edit> = Vec::new();
    if on(0) {
        let v = u.int_in_range(0usize..=256)?;
        edits.push(Box::new(move |s| s.tokens = v));
    }
    if on(1) {
        let v = u.int_in_range(0usize..=64)?;
        edits.push(Box::new(move |s| s.steps = v));
    }
    if on(2) {
        let v = u.int_in_range(0usize..=32)?;
        edits.push(Box::new(move |s| s.channels = v));
    }
    if on(3) {
        let v = wild(u)?;
        edits.push(Box::new(move |s| s.budget = v));
    }
    if on(4) {
        let v = wild(u)?;
        edits.push(Box::new(move |s| s.recent = v));
    }
    if on(5) {
        let v = wild(u)?;
        edits.push(Box::new(move |s| s.window = v));
    }
    if on(6) {
        let v = wild(u)?;
        edits.push(Box::new(move |s| s.kernel = v));
    }
    if on(7) {
        let v = wild(u)?;
        edits.push(Box::new(move |s| s.sinks = v));
    }
    if on(8) {
        let v = wild(u)?;
        edits.push(Box::new(move |s| s.group = v));
    }
    if on(9) {
        let v = u.arbitrary()?;
        edits.push(Box::new(move |s| s.bits = v));
    }
    if on(10) {
        let v = if u.arbitrary()? { Some(wild(u)?) } else { None };
        edits.push(Box::new(move |s| s.channel = v));
    }
    if on(11) {
        let v = u.int_in_range(0usize..=40)?;
        edits.push(Box::new(move |s| s.outliers = v));
    }
    if on(12) {
        let v = u.int_in_range(0usize..=40)?;
        edits.push(Box::new(move |s| s.skewed = v));
    }
    if on(13) {
        let v = wild64(u)?;
        edits.push(Box::new(move |s| s.seed = v));
    }
    if on(14) {
        let v = wild64(u)?;
        edits.push(Box::new(move |s| s.layers = v));
    }
    if on(15) {
        let v = wild64(u)?;
        edits.push(Box::new(move |s| s.kv_heads = v));
    }
    if on(16) {
        let v = wild64(u)?;
        edits.push(Box::new(move |s| s.head_dim = v));
    }
    if on(17) {
        let v = wild64(u)?;
        edits.push(Box::new(move |s| s.fp_bytes = v));
    }
    if on(18) {
        let v = wild64(u)?;
        edits.push(Box::new(move |s| s.context = v));
    }
    if on(19) {
        let v = wild64(u)?;
        edits.push(Box::new(move |s| s.batch = v));
    }
    if on(20) {
        let v = if u.arbitrary()? {
            "custom".into()
        } else {
            "no-such-model".into()
        };
        edits.push(Box::new(move |s| s.model = v));
    }
    if on(21) {
        let v = wild(u)?;
        edits.push(Box::new(move |s| s.future = v));
    }
    if on(22) {
        let v = u.arbitrary()?;
        edits.push(Box::new(move |s| s.kivi_kbits = v));
    }
    if on(23) {
        let v = u.arbitrary()?;
        edits.push(Box::new(move |s| s.kivi_vbits = v));
    }
    if on(24) {
        let v = wild(u)?;
        edits.push(Box::new(move |s| s.kivi_group = v));
    }
    if on(25) {
        let v = wild(u)?;
        edits.push(Box::new(move |s| s.kivi_residual = v));
    }
    if on(26) {
        let v = wild64(u)?;
        edits.push(Box::new(move |s| s.memory_gib = v));
    }
    let len = u.int_in_range(0usize..=200)?;
    let query = String::from_utf8_lossy(u.bytes(len.min(u.len()))?).into_owned();
    let mut s = Settings::from_query(&query).settings;
    // Keep the generated data small whatever the query said (the raw overrides may still pick
    // up to T = 256, S = 64, d = 32).
    s.tokens = s.tokens.min(128);
    s.steps = s.steps.min(32);
    s.channels = s.channels.min(16);
    s.outliers = s.outliers.min(40);
    s.skewed = s.skewed.min(40);
    for edit in edits {
        edit(&mut s);
    }
    Ok(s)
}

/// What the lab accepts, a link reproduces: the URL round trip is exact and repairs nothing.
fn assert_link_reproduces(s: &Settings) {
    let query = s.to_query();
    let link = Settings::from_query(&query);
    assert!(
        link.warnings.is_empty(),
        "accepted settings are repaired by their own URL {query:?}: {:?}",
        link.warnings
    );
    assert_eq!(
        &link.settings, s,
        "accepted settings do not round-trip through {query:?}"
    );
}

fn run(data: &[u8]) -> Result<()> {
    let mut u = Unstructured::new(data);
    let first = settings(&mut u)?;
    let second = settings(&mut u)?;
    let third = settings(&mut u)?;
    let Ok(mut lab) = Lab::new(first.clone()) else {
        return Ok(());
    };
    assert_link_reproduces(&first);
    for s in [&second, &third] {
        // Debug text, not `==`: figures may hold NaN, and "unchanged" means bit-for-bit here.
        let before = format!("{:?}", lab.figures());
        let settings_before = lab.settings().clone();
        match lab.update(s) {
            Ok(_) => {
                assert_eq!(lab.settings(), s);
                assert_link_reproduces(s);
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
