//! URL state: any query parses without panicking into in-range settings, and every parsed
//! state survives a round trip through `to_query`.

mod common;
use common::*;
use kvlab::state::{Settings, MAX_CHANNELS, MAX_STEPS, MAX_TOKENS};
use proptest::prelude::*;

/// `encodeURIComponent`'s escaping, enough for settings values.
fn percent(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "pattern",
            "seed",
            "tokens",
            "steps",
            "channels",
            "outliers",
            "skewed",
            "bits",
            "scheme",
            "granularity",
            "group",
            "tensor",
            "channel",
            "meta",
            "method",
            "budget",
            "recent",
            "window",
            "pool",
            "kernel",
            "sinks",
            "model",
            "layers",
            "kv_heads",
            "head_dim",
            "fp_bytes",
            "context",
            "batch",
            "index",
            "lang",
            "embed",
        ])
        .prop_map(String::from),
        "[a-z%_]{0,6}",
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        f64_in(-1e12, 1e12).prop_map(|v| v.to_string()),
        any::<i64>().prop_map(|v| v.to_string()),
        Just("NaN".to_string()),
        Just("Infinity".to_string()),
        Just("-0".to_string()),
        "[ -~]{0,12}",
        "\\PC{0,8}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_query_parses_in_range(pairs in prop::collection::vec((key(), value()), 0..12)) {
        let q: String = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&");
        let p = Settings::from_query(&q);
        let s = &p.settings;
        prop_assert!((1..=MAX_TOKENS).contains(&s.tokens));
        prop_assert!(s.steps >= 1 && s.steps <= s.tokens.min(MAX_STEPS));
        prop_assert!((1..=MAX_CHANNELS).contains(&s.channels));
        prop_assert!((1..=16).contains(&s.bits));
        prop_assert!(s.kernel % 2 == 1);
        prop_assert!(s.budget >= 1);
        prop_assert!(s.outliers <= s.channels && s.skewed <= s.channels);
        let again = Settings::from_query(&s.to_query());
        prop_assert!(again.warnings.is_empty(), "{:?} from {}", again.warnings, s.to_query());
        prop_assert_eq!(&again.settings, s);
    }

    /// The page holds settings as the objects `parseQuery` gives (serde's names: `symmetric`,
    /// `per-channel`) and sends them back as a query string built key by key (engine.js
    /// `asQuery`: nulls left out). Every in-range state crosses that way unchanged and unrefused.
    #[test]
    fn the_pages_settings_objects_cross_back_unchanged(
        pairs in prop::collection::vec((key(), value()), 0..12),
    ) {
        let q: String = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&");
        let s = Settings::from_query(&q).settings;
        let object = serde_json::to_value(&s).expect("settings serialize");
        let sent: Vec<String> = object
            .as_object()
            .expect("an object")
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| {
                let v = v.as_str().map_or_else(|| v.to_string(), String::from);
                format!("{k}={}", percent(&v))
            })
            .collect();
        let back = Settings::checked(&sent.join("&"));
        prop_assert_eq!(back, Ok(s));
    }

    #[test]
    fn arbitrary_bytes_never_panic(q in "\\PC{0,200}") {
        let _ = Settings::from_query(&q);
    }
}
