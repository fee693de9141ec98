//! URL state: any query parses without panicking into in-range settings, and every parsed
//! state survives a round trip through `to_query`.

mod common;
use common::*;
use kvlab::state::{Settings, MAX_CHANNELS, MAX_STEPS, MAX_TOKENS};
use proptest::prelude::*;

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
        let again = Settings::from_query(&s.to_query());
        prop_assert!(again.warnings.is_empty(), "{:?} from {}", again.warnings, s.to_query());
        prop_assert_eq!(&again.settings, s);
    }

    #[test]
    fn arbitrary_bytes_never_panic(q in "\\PC{0,200}") {
        let _ = Settings::from_query(&q);
    }
}
