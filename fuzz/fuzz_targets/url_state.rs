//! Fuzzes the URL-state parser (`Settings::from_query`): any query text parses without panic,
//! and the settings it yields are in range, so they round-trip through `to_query` exactly and
//! without a single repair warning.
#![no_main]
use kvlab::state::Settings;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Lossy, so invalid UTF-8 still reaches the parser as replacement characters.
    let query = String::from_utf8_lossy(data);
    let parsed = Settings::from_query(&query);
    for w in &parsed.warnings {
        assert!(!w.message.is_empty(), "empty warning for key {}", w.key);
    }
    let s = parsed.settings;
    assert!(
        s.steps <= s.tokens,
        "steps {} > tokens {}",
        s.steps,
        s.tokens
    );
    assert!(s.budget <= s.tokens && s.recent <= s.tokens && s.window <= s.steps);
    let q = s.to_query();
    let again = Settings::from_query(&q);
    assert!(
        again.warnings.is_empty(),
        "to_query of parsed settings gives warnings: {q:?} -> {:?}",
        again.warnings
    );
    assert_eq!(again.settings, s, "round trip through {q:?}");
});
