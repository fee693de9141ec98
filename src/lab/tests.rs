//! The lab's tests: the scheduler against a fresh lab, and each section's figures.

use super::*;
use crate::budget::FitKind;
use crate::policy::Policy;
use crate::quant::QuantConfig;
use crate::state::{Method, Scope};
use crate::Matrix;

fn stages_of(lab: &mut Lab, s: &Settings) -> Vec<Stage> {
    let mut seen = Vec::new();
    lab.update_with_progress(s, &mut |st| seen.push(st))
        .expect("valid settings");
    seen
}

#[test]
fn progress_reports_exactly_the_stages_a_change_recomputes() {
    let mut seen = Vec::new();
    let mut lab = Lab::new_with_progress(small(), &mut |st| seen.push(st)).expect("lab");
    assert_eq!(
        seen,
        Stage::ALL.to_vec(),
        "a new lab runs every stage in order"
    );
    let mut s = small();
    assert_eq!(stages_of(&mut lab, &s), vec![], "no change, no stage");
    s.bits = 2;
    assert_eq!(
        stages_of(&mut lab, &s),
        vec![Stage::Quantization, Stage::Compare],
        "bits change the codes and the comparison's output error, not the selection"
    );
    s.budget = 8;
    assert_eq!(
        stages_of(&mut lab, &s),
        vec![Stage::Selection, Stage::Compare]
    );
    s.seed += 1;
    assert_eq!(
        stages_of(&mut lab, &s),
        vec![
            Stage::Data,
            Stage::Quantization,
            Stage::Selection,
            Stage::Compare,
            Stage::Kivi
        ]
    );
}

/// The settings table says which sections each setting changes (the page redraws their
/// charts, `www/fields.js`): every stage a change recomputes must be in a section it names,
/// else a chart of that section would stay stale on the page.
#[test]
fn each_setting_recomputes_only_the_sections_its_table_row_names() {
    use crate::state::{fields, Affects, Rule, Section};
    let base = small();
    let query = base.to_query();
    for field in fields() {
        // (the value small() gives it, else its default)
        let now = query
            .split('&')
            .find_map(|kv| kv.strip_prefix(field.key)?.strip_prefix('='))
            .map_or(field.default.clone(), str::to_string);
        let other = match field.rule {
            Rule::Int(lo, hi) | Rule::Odd(lo, hi) => {
                let d: u64 = now.parse().expect("a number");
                let step = if matches!(field.rule, Rule::Odd(..)) {
                    2
                } else {
                    1
                };
                if d + step <= hi {
                    d + step
                } else {
                    d.max(lo + step) - step
                }
                .to_string()
            }
            Rule::AutoOr(..) => "0".into(),
            Rule::Numbers(n) => n
                .iter()
                .find(|v| v.to_string() != field.default)
                .expect("two")
                .to_string(),
            Rule::Words(_) | Rule::Named => field
                .options
                .iter()
                .find(|o| **o != field.default)
                .expect("two options")
                .to_string(),
            Rule::Model => "custom".into(),
        };
        let query = format!("{}&{}={other}", base.to_query(), field.key);
        let parsed = Settings::from_query(&query);
        assert!(parsed.warnings.is_empty(), "{query}: {:?}", parsed.warnings);
        let mut lab = Lab::new(base.clone()).expect("lab");
        let stages = stages_of(&mut lab, &parsed.settings);
        let section = |st: Stage| match st {
            Stage::Quantization | Stage::Kivi => Some(Section::Quant),
            Stage::Selection => Some(Section::Select),
            Stage::Budget => Some(Section::Budget),
            Stage::Compare => Some(Section::Compare),
            Stage::Data => None,
        };
        match field.affects {
            Affects::Data => {
                assert!(stages.contains(&Stage::Data), "{}: {stages:?}", field.key)
            }
            Affects::Page => assert_eq!(stages, vec![], "{}", field.key),
            Affects::Only(sections) => {
                // (the budget's figures are recomputed on every update, unreported; the
                // model's section is computed beside the lab, by the model's module)
                let unreported = sections.contains(&Section::Budget)
                    || sections
                        .iter()
                        .all(|s| matches!(s, Section::Model | Section::ModelTradeoff));
                assert!(
                    !stages.is_empty() || unreported,
                    "{}={other}: nothing",
                    field.key
                );
                for st in stages {
                    let named = section(st).is_some_and(|s| sections.contains(&s));
                    assert!(
                        named,
                        "{}={other} recomputes {st:?}, not in {sections:?}",
                        field.key
                    );
                }
            }
        }
    }
}

#[test]
fn generated_data_figures_hold_the_generator_settings_the_description_states() {
    let mut s = small();
    s.pattern = crate::synth::AttentionPreset::Needle;
    s.seed = 9_007_199_254_740_992; // 2^53, the largest seed
    s.outliers = s.channels + 3; // more than d: refused, naming d
    let e = Lab::new(s.clone()).expect_err("outliers above d");
    assert_eq!(e.field(), "outliers");
    assert_eq!(
        e.to_string(),
        format!(
            "outliers {} is out of range: must be at most channels ({})",
            s.channels + 3,
            s.channels
        )
    );
    s.outliers = s.channels; // every channel an outlier
    s.skewed = 2;
    let lab = Lab::new(s.clone()).expect("lab");
    let d = &lab.figures().data;
    let g = d
        .generator
        .as_ref()
        .expect("generated data has its generator");
    assert_eq!(
        g,
        &GeneratorFigures {
            pattern: "needle",
            seed: 9_007_199_254_740_992,
            outlier_channels: s.channels,
            skewed_channels: 2,
        }
    );
    let want = format!(
        "generated: needle attention S={} x T={}, K and V T={} x d={} ({} outlier channels, \
         2 skewed), seed 9007199254740992",
        s.steps, s.tokens, s.tokens, s.channels, s.channels
    );
    assert_eq!(d.description, want);
}

#[test]
fn the_page_path_chosen_elsewhere_equals_use_uploaded() {
    // The page chooses in its upload module and hands the matrices to use_chosen; natively
    // use_uploaded does both: the two must give the same view.
    let csv = |rows: usize, cols: usize, f: &dyn Fn(usize, usize) -> f32| {
        let mut text = String::new();
        for r in 0..rows {
            let row: Vec<String> = (0..cols).map(|c| f(r, c).to_string()).collect();
            text.push_str(&row.join(","));
            text.push('\n');
        }
        text.into_bytes()
    };
    let attn = csv(6, 20, &|r, c| {
        if c <= 14 + r {
            1.0 + (c % 3) as f32
        } else {
            0.0
        }
    });
    let keys = csv(20, 4, &|r, c| ((r * 7 + c * 3) % 11) as f32 - 5.0);
    let choice = UploadChoice {
        attention: "a.csv".into(),
        keys: "k.csv".into(),
        head_mode: "head".into(),
        normalise: true,
        ..UploadChoice::default()
    };
    let mut native = Lab::new(small()).expect("lab");
    assert!(native.figures().data.generator.is_some());
    native.load_file("a.csv", &attn).expect("a");
    native.load_file("k.csv", &keys).expect("k");
    let used = native.use_uploaded(&choice).expect("use_uploaded");

    let mut uploads = Uploads::new();
    uploads.load("a.csv", &attn).expect("a");
    uploads.load("k.csv", &keys).expect("k");
    let mut page = Lab::new(small()).expect("lab");
    let chosen = page.use_chosen(uploads.choose(&choice).expect("choose"));
    assert_eq!(chosen.expect("use_chosen"), used);
    // V was not uploaded: it is generated at the upload's T and d, and said so.
    let d = &native.figures().data;
    assert_eq!(
        d.uploaded,
        Some(UploadedParts {
            attention: true,
            keys: true,
            values: false
        })
    );
    assert_eq!(d.generator.as_ref().map(|g| g.seed), Some(small().seed));
    assert!(
        d.description.ends_with(&format!(
            "; generated: V T=20 x d=4 (0 skewed channels), seed {}",
            small().seed
        )),
        "{}",
        d.description
    );
    assert_eq!(page.settings(), native.settings());
    assert_eq!(page.figures(), native.figures());
    assert_eq!(page.data().keys, native.data().keys);
}

#[test]
fn one_tensor_alone_is_used_and_the_rest_generated_at_its_t() {
    // attention [3, 4] alone (the note's example): K and V generated at T = 4 with the
    // generator's d; keys [50, 6] alone: attention generated over T = 50 with S <= T.
    let mut lab = Lab::new(small()).expect("lab");
    lab.load_file(
        "a.csv",
        b"0.6,0.2,0.1,0.1
0.7,0.1,0.1,0.1
0.05,0.05,0.1,0.8
",
    )
    .expect("a");
    let keys: String = (0..50)
        .map(|r| {
            let row: Vec<String> = (0..6)
                .map(|c| format!("{}", (r * 6 + c) as f32 * 0.1 - 7.0))
                .collect();
            row.join(",")
                + "
"
        })
        .collect();
    lab.load_file("k.csv", keys.as_bytes()).expect("k");
    let only = |a: &str, k: &str| UploadChoice {
        attention: a.into(),
        keys: k.into(),
        head_mode: "head".into(),
        ..UploadChoice::default()
    };
    lab.use_uploaded(&only("a.csv", ""))
        .expect("attention alone");
    let d = &lab.figures().data;
    assert_eq!((d.steps, d.tokens, d.channels), (3, 4, small().channels));
    assert_eq!(lab.data().attention.row(0), Some(&[0.6, 0.2, 0.1, 0.1][..]));
    assert_eq!(lab.data().keys.rows(), 4);
    let mut want = small();
    want.tokens = 4;
    let generated = generate(&Settings { steps: 3, ..want }).expect("generated");
    assert_eq!(
        lab.data().keys,
        generated.keys,
        "the generator's own K at T = 4"
    );
    assert!(
        d.description.contains("; generated: K and V T=4 x d="),
        "{}",
        d.description
    );
    assert_eq!(
        lab.figures().select.kept_count,
        4.min(lab.settings().budget)
    );

    // (a fresh lab: the generator's S is the settings' in use, and the upload above set 3)
    let mut lab = Lab::new(small()).expect("lab");
    lab.load_file("k.csv", keys.as_bytes()).expect("k");
    lab.use_uploaded(&only("", "k.csv")).expect("keys alone");
    let d = &lab.figures().data;
    assert_eq!((d.tokens, d.channels), (50, 6));
    assert!(
        d.steps <= 50 && d.steps == small().steps.min(50),
        "S = {}",
        d.steps
    );
    assert_eq!(lab.data().keys.row(0).map(|r| r[0]), Some(-7.0));
    assert!(
        d.description
            .starts_with("uploaded: K [T=50, d=6]: 50 tokens x 6 channels; generated: "),
        "{}",
        d.description
    );
    assert!(d.description.contains("attention S="), "{}", d.description);
    assert!(lab.use_uploaded(&only("", "")).is_err(), "nothing chosen");
    assert!(
        lab.export_csv().starts_with("token,kept,role,score\n"),
        "no texts, no column"
    );
    let texts: String = (0..50)
        .map(|i| format!("\"t{i},\\\"q\\\"\""))
        .collect::<Vec<_>>()
        .join(",");
    lab.load_file("t.json", format!("[{texts}]").as_bytes())
        .expect("texts");
    lab.use_uploaded(&only("", "k.csv"))
        .expect("keys with texts");
    let csv = lab.export_csv();
    assert!(csv.starts_with("token,kept,role,score,text\n"), "{csv}");
    assert!(
        csv.lines()
            .nth(2)
            .is_some_and(|l| l.ends_with(",\"t1,\"\"q\"\"\"")),
        "{csv}"
    );
    assert_eq!(
        lab.figures().data.tokens,
        50,
        "a refused choice keeps the data in use"
    );
}

#[test]
fn settings_after_an_upload_are_in_range_for_the_uploaded_shape() {
    // The page sends `page.settings()` straight back as its next update: every setting
    // bounded by the data's shape must follow the uploaded shape (T = 20, S = 6, d = 4),
    // or that update is refused.
    let attn = "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20\n".repeat(6);
    let keys = "1,2,3,4\n".repeat(20);
    let mut s = small();
    s.recent = 40;
    s.budget = 50;
    s.window = 12;
    s.outliers = 8;
    s.skewed = 6;
    let mut lab = Lab::new(s).expect("lab");
    // Attention and keys uploaded as CSV files and used.
    let upload = |lab: &mut Lab, name: &str, attention: &str, keys: &str| {
        let (a, k) = (format!("{name}.a.csv"), format!("{name}.k.csv"));
        lab.load_file(&a, attention.as_bytes()).expect("attention");
        lab.load_file(&k, keys.as_bytes()).expect("keys");
        let choice = UploadChoice {
            attention: a,
            keys: k,
            ..UploadChoice::default()
        };
        lab.use_uploaded(&choice).expect("use_uploaded");
        lab.settings().clone()
    };
    let after = upload(&mut lab, "first", &attn, &keys);
    assert_eq!((after.tokens, after.steps, after.channels), (20, 6, 4));
    assert_eq!(after.validate(), Ok(()));
    assert_eq!((after.budget, after.recent, after.window), (20, 20, 6));
    assert_eq!((after.outliers, after.skewed), (4, 4));
    lab.update(&after).expect("the page's next update");
    // Two tokens: SnapKV's pooling kernel (7) follows to 2 T + 1 = 5.
    let after = upload(&mut lab, "two-tokens", "1,2\n3,4\n", "1\n2\n");
    assert_eq!((after.tokens, after.kernel), (2, 5));
    assert_eq!(after.validate(), Ok(()));
    lab.update(&Settings {
        method: Method::Snapkv,
        ..after
    })
    .expect("SnapKV on two tokens");
}

/// The comparison deferred, as the page does while its section is off screen.
const COMPARISON: Defer = Defer {
    comparison: true,
    levers: false,
};

fn small() -> Settings {
    Settings {
        tokens: 64,
        steps: 16,
        channels: 8,
        budget: 16,
        recent: 4,
        window: 4,
        future: 4,
        ..Settings::default()
    }
}

/// The scale formula's numbers are those of the group whose scale it shows: its extremes
/// give that scale, in every granularity and scheme (the page showed the channel's
/// extremes beside a per-token or per-tensor scale: "44.6 / 7 = 2.302").
#[test]
fn the_shown_scale_comes_from_the_shown_extremes() {
    use crate::quant::{Granularity, Scheme};
    for granularity in [
        Granularity::PerChannel,
        Granularity::PerToken,
        Granularity::PerTensor,
    ] {
        for scheme in [Scheme::Symmetric, Scheme::Asymmetric] {
            for group in [0, 5] {
                if group > 0 && granularity == Granularity::PerTensor {
                    continue;
                }
                let s = Settings {
                    granularity,
                    scheme,
                    group,
                    ..small()
                };
                let mut lab = Lab::new(small()).unwrap();
                lab.update(&s).unwrap();
                let q = &lab.figures().quant;
                let from_extremes = match scheme {
                    Scheme::Symmetric => q.group_max_abs / q.qmax as f64,
                    Scheme::Asymmetric => (q.group_max - q.group_min) / q.qmax as f64,
                };
                let what = format!("{granularity:?} {scheme:?} group {group}");
                assert!(
                    (from_extremes - q.scale).abs() <= 1e-6 * q.scale.abs(),
                    "{what}: extremes give {from_extremes}, the scale is {}",
                    q.scale
                );
                assert!(q.group_min <= q.group_max, "{what}");
                // The histogram's values are the group's: their extremes are the formula's,
                // and the grid drawn over them is theirs, so none runs past it by more than
                // half a step (token 0's grid was drawn over the whole channel's values).
                let values = lab.shown_group_values();
                let lo = values.iter().copied().fold(f32::INFINITY, f32::min);
                let hi = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                assert_eq!(
                    (q.group_min, q.group_max),
                    (f64::from(lo), f64::from(hi)),
                    "{what}"
                );
                let grid = &lab.quant().group_grid;
                let (g_lo, g_hi) = (grid[0], grid[grid.len() - 1]);
                let half = q.scale / 2.0 * (1.0 + 1e-6);
                assert!(
                    f64::from(lo) >= g_lo - half && f64::from(hi) <= g_hi + half,
                    "{what}"
                );
                let g = &q.group;
                assert_eq!(values.len(), g.to - g.from + 1, "{what}");
                assert!(g.max_error <= g.bound * (1.0 + 1e-6) && g.groups_within == q.groups);
                if granularity == Granularity::PerTensor {
                    let x = lab.data().keys.data();
                    let lo = x.iter().copied().fold(f32::INFINITY, f32::min);
                    let hi = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    assert_eq!((q.group_min, q.group_max), (f64::from(lo), f64::from(hi)));
                }
            }
        }
    }
}

/// The caches (scores, evaluations, curves, RMSEs) never leak a stale number: after every
/// change an updated lab shows exactly what a fresh one does.
#[test]
fn updates_match_a_fresh_lab() {
    let mut lab = Lab::new(small()).unwrap();
    let mut s = small();
    let changes: Vec<fn(&mut Settings)> = vec![
        |s| s.bits = 3,
        |s| s.budget = 9,
        |s| s.bits = 4,
        |s| s.recent = 0,
        |s| s.scheme = crate::quant::Scheme::Asymmetric,
        |s| s.method = Method::Snapkv,
        |s| s.window = 2,
        |s| s.future = 2,
        |s| s.budget = 2,
        |s| s.sinks = 1,
        |s| s.bits = 3,
        |s| s.tensor = KvPick::V,
        |s| s.seed += 1,
        |s| s.budget = 12,
        |s| s.future = 0,
    ];
    for change in changes {
        change(&mut s);
        lab.update(&s).unwrap();
        let fresh = Lab::new(s.clone()).unwrap();
        assert_eq!(lab.figures(), fresh.figures(), "{}", s.to_query());
        assert_eq!(lab.compare().curves, fresh.compare().curves);
        assert_eq!(lab.compare().selections, fresh.compare().selections);
        assert_eq!(lab.select().scores, fresh.select().scores);
        assert_eq!(lab.quant().abs_err, fresh.quant().abs_err);
    }
}

/// Without a chosen channel the quantization section shows the one with the largest `|x|`
/// (lowest index on a tie), per tensor, and finds it again for new data (it is memoised).
#[test]
fn the_default_channel_has_the_largest_magnitude() {
    let argmax = |x: &Matrix| {
        let mut best = (0usize, -1f32);
        for c in 0..x.cols() {
            let m = x
                .column(c)
                .unwrap()
                .iter()
                .fold(0f32, |m, v| m.max(v.abs()));
            if m > best.1 {
                best = (c, m);
            }
        }
        best.0
    };
    let mut s = Settings::default();
    let mut lab = Lab::new(s.clone()).unwrap();
    assert_eq!(s.channel, None);
    assert_eq!(lab.figures().quant.channel, argmax(&lab.data().keys));
    s.tensor = KvPick::V;
    lab.update(&s).unwrap();
    assert_eq!(lab.figures().quant.channel, argmax(&lab.data().values));
    s.tensor = KvPick::K;
    s.bits = 3;
    lab.update(&s).unwrap();
    assert_eq!(lab.figures().quant.channel, argmax(&lab.data().keys));
    let first = s.seed;
    for seed in [first + 1, first + 2, first + 3] {
        s.seed = seed;
        s.tensor = KvPick::K;
        lab.update(&s).unwrap();
        assert_eq!(
            lab.figures().quant.channel,
            argmax(&lab.data().keys),
            "seed {seed}"
        );
        s.tensor = KvPick::V;
        lab.update(&s).unwrap();
        assert_eq!(
            lab.figures().quant.channel,
            argmax(&lab.data().values),
            "seed {seed}"
        );
    }
}

/// A quantization change fills the buffers of the view before last: after two changes
/// the codes and `|x - x_hat|` are back in the first view's allocations, and the view is
/// the one a fresh lab computes.
#[test]
fn quantization_changes_reuse_the_replaced_views_buffers() {
    let mut s = Settings::default();
    let mut lab = Lab::new(s.clone()).unwrap();
    let first = (
        lab.quant().quantized.codes().as_ptr(),
        lab.quant().abs_err.as_ptr(),
    );
    s.bits = 3;
    lab.update(&s).unwrap();
    s.bits = 5;
    lab.update(&s).unwrap();
    let third = (
        lab.quant().quantized.codes().as_ptr(),
        lab.quant().abs_err.as_ptr(),
    );
    assert_eq!(first, third);
    let fresh = Lab::new(s.clone()).unwrap();
    assert_eq!(lab.figures(), fresh.figures());
    assert_eq!(lab.quant().abs_err, fresh.quant().abs_err);
    assert_eq!(lab.quant().quantized, fresh.quant().quantized);
    // a clone starts without spare buffers and still updates to the same view
    let mut copy = lab.clone();
    s.bits = 2;
    copy.update(&s).unwrap();
    assert_eq!(copy.figures(), Lab::new(s.clone()).unwrap().figures());
    // an update that fails after taking the spare buffers leaves the view as it was, and
    // the next one still equals a fresh lab
    let shown = lab.figures().clone();
    let abs_err = lab.quant().abs_err.clone();
    let bad = Settings {
        channel: Some(s.channels + 5),
        ..s.clone()
    };
    assert!(lab.previous.view.is_some());
    // (a channel the data does not have: refused with its fields, next to the channel)
    let e = lab.update(&bad).unwrap_err();
    let (asked, last) = (s.channels + 5, s.channels - 1);
    assert_eq!(
        e,
        LabError::Channel {
            channel: asked,
            max: last
        }
    );
    assert_eq!(e.field(), "channel");
    assert_eq!(
        e.to_string(),
        format!("channel {asked} is out of range: must be between 0 and {last} (d - 1)")
    );
    // it failed after quantizing into the previous view's buffers (they went with the
    // error)
    assert!(lab.previous.view.is_none());
    assert_eq!(lab.figures(), &shown);
    assert_eq!(lab.quant().abs_err, abs_err);
    s.bits = 6;
    lab.update(&s).unwrap();
    let fresh = Lab::new(s.clone()).unwrap();
    assert_eq!(lab.figures(), fresh.figures());
    assert_eq!(lab.quant().abs_err, fresh.quant().abs_err);
    // much smaller data: the big buffers are not kept as spares
    s.tokens = 64;
    s.budget = 16;
    s.recent = 4;
    lab.update(&s).unwrap();
    s.bits = 5;
    lab.update(&s).unwrap();
    let kept = lab
        .previous
        .view
        .as_ref()
        .map_or(0, |v| v.abs_err.capacity());
    assert!(kept <= 2 * lab.quant().abs_err.len());
    assert_eq!(lab.figures(), Lab::new(s.clone()).unwrap().figures());
}

#[test]
fn a_change_back_shows_the_previous_quantization_without_computing_it() {
    let base = small(); // 4 bits, symmetric
    let mut lab = Lab::new(base.clone()).unwrap();
    let codes_of = |lab: &Lab| lab.quant().quantized.codes().as_ptr();
    let at_4 = codes_of(&lab);
    let asym = Settings {
        scheme: crate::quant::Scheme::Asymmetric,
        ..base.clone()
    };
    lab.update(&asym).unwrap();
    // Back to symmetric: the earlier view itself, and no quantization reported.
    let mut seen = Vec::new();
    lab.update_with_progress(&base, &mut |st| seen.push(st))
        .unwrap();
    assert!(!seen.contains(&Stage::Quantization), "{seen:?}");
    assert_eq!(codes_of(&lab), at_4);
    assert_same_view(&lab, &Lab::new(base.clone()).unwrap(), "back to symmetric");
    // And forth again: the asymmetric view, the same as a fresh lab's.
    lab.update(&asym).unwrap();
    assert_same_view(&lab, &Lab::new(asym.clone()).unwrap(), "asymmetric again");
    // A change to a third view quantizes (into the previous view's buffers).
    let mut seen = Vec::new();
    let three = Settings {
        bits: 3,
        ..asym.clone()
    };
    lab.update_with_progress(&three, &mut |st| seen.push(st))
        .unwrap();
    assert!(seen.contains(&Stage::Quantization), "{seen:?}");
    assert_same_view(&lab, &Lab::new(three.clone()).unwrap(), "3 bits");
    // New data with the previous view's settings: quantized anew, on the new data.
    let new_data = Settings {
        seed: base.seed + 1,
        ..asym.clone()
    };
    lab.update(&new_data).unwrap();
    assert_same_view(&lab, &Lab::new(new_data.clone()).unwrap(), "new data");
    // ... and back to the settings of the view before the new data: not that view either.
    let back = Settings {
        bits: 3,
        ..new_data.clone()
    };
    lab.update(&back).unwrap();
    assert_same_view(&lab, &Lab::new(back).unwrap(), "3 bits on the new data");
}

/// Everything a lab shows, for comparing two labs.
fn assert_same_view(lab: &Lab, fresh: &Lab, what: &str) {
    assert_eq!(lab.figures(), fresh.figures(), "{what}");
    assert_eq!(lab.compare().curves, fresh.compare().curves, "{what}");
    assert_eq!(
        lab.compare().selections,
        fresh.compare().selections,
        "{what}"
    );
    assert_eq!(lab.export_json(), fresh.export_json(), "{what}");
    assert_eq!(lab.export_csv(), fresh.export_csv(), "{what}");
}

#[test]
fn a_staged_lab_computes_the_comparison_and_kivi_last_and_then_equals_a_new_lab() {
    for s in [
        small(),
        Settings {
            future: 0,
            method: Method::Snapkv,
            bits: 3,
            ..small()
        },
    ] {
        let mut seen = Vec::new();
        let mut lab =
            Lab::new_staged_with_progress(s.clone(), &mut |st| seen.push(st)).expect("staged lab");
        assert_eq!(
            seen,
            [
                Stage::Data,
                Stage::Quantization,
                Stage::Selection,
                Stage::Budget
            ]
        );
        assert!(lab.is_pending() && lab.figures().pending);
        let fresh = Lab::new(s.clone()).unwrap();
        // The first screen's sections are already final; the levers' errors (section 4)
        // are left for `complete` too.
        let (f, g) = (lab.figures(), fresh.figures());
        assert_eq!(
            (&f.data, &f.quant, &f.select, &f.budget),
            (&g.data, &g.quant, &g.select, &g.budget)
        );
        assert_eq!(f.together.r_overall, g.together.r_overall);
        assert!(f.together.fewer_bits.pending && f.together.fewer_tokens.pending);
        assert!(f.compare.rows.is_empty() && lab.compare().curves.is_empty());
        let mut rest = Vec::new();
        lab.complete_with_progress(&mut |st| rest.push(st))
            .expect("complete");
        assert_eq!(rest, [Stage::Compare, Stage::Kivi]);
        assert!(!lab.is_pending() && !lab.figures().pending);
        assert_same_view(&lab, &fresh, &s.to_query());
        // Completing again computes nothing.
        let mut again = Vec::new();
        lab.complete_with_progress(&mut |st| again.push(st))
            .expect("complete");
        assert!(again.is_empty());
    }
}

#[test]
fn deferred_levers_are_computed_by_complete_and_equal_an_update() {
    let base = small(); // 4 bits
    let levers = |lab: &Lab| {
        let t = &lab.figures().together;
        (t.fewer_bits.clone(), t.fewer_tokens.clone())
    };
    let only_levers = Defer {
        comparison: false,
        levers: true,
    };
    // 4 -> 3, and a B change: the levers' errors are left pending, both rows together.
    for down in [
        Settings {
            bits: 3,
            ..base.clone()
        },
        Settings {
            budget: 12,
            ..base.clone()
        },
    ] {
        let mut lab = Lab::new(base.clone()).unwrap();
        lab.update_deferring(&down, &mut |_| {}, only_levers)
            .unwrap();
        let (b, t) = levers(&lab);
        assert!(b.pending && t.pending && lab.is_pending(), "{b:?} {t:?}");
        assert!(b.possible && t.possible && b.cost_per_kib.is_none());
        assert_eq!(lab.figures().together.verdict, None);
        // Everything else is final.
        let direct = Lab::new(down.clone()).unwrap();
        let (f, g) = (lab.figures(), direct.figures());
        assert_eq!(
            (&f.quant, &f.select, &f.budget),
            (&g.quant, &g.select, &g.budget)
        );
        // Completing computes them: the same figures as a fresh lab's.
        let mut seen = Vec::new();
        lab.complete_with_progress(&mut |st| seen.push(st)).unwrap();
        assert!(!lab.is_pending() && !levers(&lab).0.pending);
        assert_eq!(lab.figures(), direct.figures());
        assert_eq!(seen, Vec::<Stage>::new(), "no stage recomputed");
        // A later update that does not defer computes them too.
        let mut lab = Lab::new(base.clone()).unwrap();
        lab.update_deferring(&down, &mut |_| {}, only_levers)
            .unwrap();
        let model = Settings {
            model: "qwen2.5-7b".into(),
            ..down.clone()
        };
        lab.update(&model).unwrap();
        assert_eq!(lab.figures(), Lab::new(model).unwrap().figures());
    }
    // A change they do not depend on (the model) leaves them as they are: nothing pending.
    let mut lab = Lab::new(base.clone()).unwrap();
    let model = Settings {
        model: "qwen2.5-7b".into(),
        ..base.clone()
    };
    lab.update_deferring(&model, &mut |_| {}, only_levers)
        .unwrap();
    assert!(!levers(&lab).0.pending && !lab.is_pending());
    // A staged lab leaves them for `complete` with the comparison.
    let mut staged = Lab::new_staged_with_progress(base.clone(), &mut |_| {}).unwrap();
    assert!(levers(&staged).0.pending);
    staged.complete_with_progress(&mut |_| {}).unwrap();
    assert_eq!(staged.figures(), Lab::new(base).unwrap().figures());
}

#[test]
fn a_deferring_update_leaves_only_the_comparison_and_completing_it_equals_an_update() {
    let base = small();
    // A change the comparison depends on (B), one it does not (the model), one that
    // regenerates the data (T), and one of bits (the output error uses V at these bits).
    let changes = [
        Settings {
            budget: 9,
            ..base.clone()
        },
        Settings {
            model: "qwen2.5-7b".into(),
            ..base.clone()
        },
        Settings {
            tokens: 48,
            budget: 12,
            ..base.clone()
        },
        Settings {
            bits: 3,
            ..base.clone()
        },
    ];
    for s in changes {
        let mut lab = Lab::new(base.clone()).unwrap();
        let before = lab.figures().clone();
        let before_curves = lab.compare().curves.clone();
        let mut seen = Vec::new();
        let f = lab
            .update_deferring(&s, &mut |st| seen.push(st), COMPARISON)
            .unwrap()
            .clone();
        assert!(!seen.contains(&Stage::Compare), "{seen:?}");
        let direct = Lab::new(s.clone()).unwrap();
        let g = direct.figures();
        // Everything but the comparison is final.
        assert_eq!(
            (
                &f.data,
                &f.quant,
                &f.select,
                &f.budget,
                &f.together,
                &f.kivi
            ),
            (
                &g.data,
                &g.quant,
                &g.select,
                &g.budget,
                &g.together,
                &g.kivi
            ),
            "{}",
            s.to_query()
        );
        let changed = f.compare != g.compare || lab.compare().curves != direct.compare().curves;
        if changed {
            // Deferred: the earlier settings' comparison stays, marked pending.
            assert!(f.pending && lab.is_pending() && !f.kivi_pending);
            assert_eq!(f.compare, before.compare);
            assert_eq!(lab.compare().curves, before_curves);
            let mut rest = Vec::new();
            lab.complete_with_progress(&mut |st| rest.push(st)).unwrap();
            assert_eq!(rest, [Stage::Compare], "{}", s.to_query());
        } else {
            assert!(!f.pending && !lab.is_pending(), "{}", s.to_query());
        }
        assert!(!lab.is_pending() && !lab.figures().pending);
        assert_same_view(&lab, &direct, &s.to_query());
    }
    // The model changes neither the comparison nor its inputs: nothing was deferred.
    let mut lab = Lab::new(base.clone()).unwrap();
    let s = Settings {
        model: "qwen2.5-7b".into(),
        ..base.clone()
    };
    assert!(
        !lab.update_deferring(&s, &mut |_| {}, COMPARISON)
            .unwrap()
            .pending
    );
}

#[test]
fn deferred_changes_add_up_and_a_plain_update_completes_them() {
    let mut lab = Lab::new(small()).unwrap();
    let b = Settings {
        budget: 9,
        ..small()
    };
    let both = Settings {
        recent: 2,
        ..b.clone()
    };
    lab.update_deferring(&b, &mut |_| {}, COMPARISON).unwrap();
    // A second deferred change on top of the first: still pending.
    assert!(
        lab.update_deferring(&both, &mut |_| {}, COMPARISON)
            .unwrap()
            .pending
    );
    // An ordinary update computes the comparison even if it changes nothing it depends on.
    let mut seen = Vec::new();
    lab.update_with_progress(&both, &mut |st| seen.push(st))
        .unwrap();
    assert_eq!(seen, [Stage::Compare]);
    assert_same_view(&lab, &Lab::new(both.clone()).unwrap(), &both.to_query());
    // A staged lab updated with deferral computes KIVI but not the comparison.
    let mut staged = Lab::new_staged_with_progress(small(), &mut |_| {}).unwrap();
    let f = staged
        .update_deferring(&b, &mut |_| {}, COMPARISON)
        .unwrap();
    assert!(f.pending && !f.kivi_pending);
    assert!(f.compare.rows.is_empty());
    staged.complete_with_progress(&mut |_| {}).unwrap();
    assert_same_view(&staged, &Lab::new(b.clone()).unwrap(), &b.to_query());
}

#[test]
fn a_staged_lab_updated_before_completing_equals_a_new_lab() {
    let mut lab = Lab::new_staged_with_progress(small(), &mut |_| {}).unwrap();
    let s = Settings {
        bits: 3,
        budget: 9,
        ..small()
    };
    lab.update(&s).unwrap();
    assert!(!lab.is_pending());
    assert_same_view(&lab, &Lab::new(s.clone()).unwrap(), &s.to_query());
}

#[test]
fn halving_budget_halves_kept_count() {
    let mut lab = Lab::new(small()).unwrap();
    assert_eq!(lab.figures().select.kept_count, 16);
    let s = Settings {
        budget: 8,
        ..small()
    };
    assert_eq!(lab.update(&s).unwrap().select.kept_count, 8);
}

/// An upload's refusals reach the page as the lab's errors, at the file control, with the
/// upload's own words.
#[test]
fn upload_refusals_are_the_file_controls_errors() {
    use crate::upload::{Chosen, ChosenError, UploadError, Uploads};
    let mut up = Uploads::new();
    up.load("k.csv", b"1,2\n3,4\n").expect("keys");
    let choice = UploadChoice {
        keys: "nope.csv".into(),
        ..UploadChoice::default()
    };
    let e = up.choose(&choice).unwrap_err();
    assert!(matches!(e, UploadError::Missing { .. }));
    let lab = LabError::from(e.clone());
    assert_eq!((lab.field(), lab.to_string()), ("file", e.to_string()));
    let m = |r, c| Some(Matrix::new(r, c, vec![0.25; r * c]).unwrap());
    let e = Chosen::new(m(2, 4), m(3, 2), None, "d".into(), vec![]).unwrap_err();
    assert!(matches!(e, ChosenError::Tokens(_)));
    let lab = LabError::from(e.clone());
    assert_eq!((lab.field(), lab.to_string()), ("file", e.to_string()));
    let lab = LabError::from(ChosenError::Nothing);
    assert_eq!(lab.field(), "file");
}

#[test]
fn both_levers_are_measured_by_the_attention_output_error() {
    let s = small();
    let lab = Lab::new(s.clone()).unwrap();
    let (a, v) = (&lab.data().attention, &lab.data().values);
    // The reference: policy::output_error's mean, with V quantized as section 2 says.
    let mean = |bits: u8, kept: &[usize]| {
        let cfg = QuantConfig {
            bits,
            ..quant_config(&s)
        };
        let hat = crate::quant::quantize(v, &cfg).unwrap().dequantize();
        let e = crate::policy::output_error(a, v, Some(&hat), kept).unwrap();
        e.iter().sum::<f64>() / e.len() as f64
    };
    let kept = lab.select().selection.kept.clone();
    let fewer = Lab::new(Settings {
        budget: 14, // floor(0.9 x 16)
        ..s.clone()
    })
    .unwrap()
    .select()
    .selection
    .kept
    .clone();
    let t = &lab.figures().together;
    let close = |x: f64, y: f64| (x - y).abs() <= 1e-12 * y.abs().max(1.0);
    for (l, after) in [
        (&t.fewer_bits, mean(3, &kept)),
        (&t.fewer_tokens, mean(4, &fewer)),
    ] {
        assert!(close(l.quality_before, mean(4, &kept)), "{l:?}");
        assert!(close(l.quality_after, after), "{l:?} vs {after}");
        let saved = (l.bytes_before - l.bytes_after) as f64 / 1024.0;
        let per = (l.quality_after - l.quality_before) / saved;
        assert!(close(l.cost_per_kib.unwrap(), per));
    }
    let (b, k) = (t.fewer_bits.cost_per_kib, t.fewer_tokens.cost_per_kib);
    let cheaper = if b <= k {
        LeverChoice::Bits
    } else {
        LeverChoice::Tokens
    };
    assert_eq!(t.verdict, Some(cheaper));
    // At the scheme's fewest bits there is no bit lever, and no verdict.
    let two = Lab::new(Settings { bits: 2, ..s }).unwrap();
    let t = &two.figures().together;
    assert!(!t.fewer_bits.possible && t.fewer_bits.cost_per_kib.is_none());
    assert_eq!(t.verdict, None);
}

#[test]
fn fewer_bits_raise_error_and_ratio() {
    let mut lab = Lab::new(Settings { bits: 8, ..small() }).unwrap();
    let e8 = lab.figures().quant.stats.max_abs;
    let r8 = lab.figures().quant.stats.compression_ratio;
    let f = lab.update(&Settings { bits: 4, ..small() }).unwrap();
    assert!(f.quant.stats.max_abs > e8);
    assert!(f.quant.stats.compression_ratio > r8);
    assert!(f.quant.element_bound_holds && f.quant.row_bound_holds);
}

#[test]
fn a_bad_update_changes_nothing() {
    let mut lab = Lab::new(small()).unwrap();
    let before = lab.figures().clone();
    let e = lab
        .update(&Settings {
            budget: 65,
            ..small()
        })
        .unwrap_err();
    assert_eq!(e.field(), "budget");
    assert_eq!(
        e.to_string(),
        "budget 65 is out of range: must be at most tokens (64)"
    );
    assert_eq!(lab.figures(), &before);
    let e = lab.update(&Settings { bits: 1, ..small() }).unwrap_err();
    assert_eq!(e.field(), "bits");
    let e = lab
        .update(&Settings {
            group: 100,
            ..small()
        })
        .unwrap_err();
    assert_eq!(e.field(), "group");
    assert_eq!(lab.figures(), &before);
}

#[test]
fn bits_do_not_change_the_selection() {
    let mut lab = Lab::new(small()).unwrap();
    let kept = lab.select().selection.kept.clone();
    lab.update(&Settings { bits: 3, ..small() }).unwrap();
    assert_eq!(lab.select().selection.kept, kept);
}

#[test]
fn levers_and_budget_are_consistent() {
    let lab = Lab::new(small()).unwrap();
    let f = lab.figures();
    assert!(f.together.fewer_bits.bytes_after < f.together.fewer_bits.bytes_before);
    assert!(f.together.fewer_tokens.bytes_after < f.together.fewer_tokens.bytes_before);
    // Fewer tokens and fewer bits both raise the one error they are measured by.
    for l in [&f.together.fewer_bits, &f.together.fewer_tokens] {
        assert!(
            l.quality_after > l.quality_before && l.quality_before > 0.0,
            "{l:?}"
        );
        assert!(l.cost_per_kib.is_some_and(|c| c > 0.0), "{l:?}");
    }
    assert_eq!(f.budget.data.t_kept, 16);
    assert!(f.budget.extrapolated.m_final < f.budget.extrapolated.m_fp);
    assert_eq!(f.budget.model_name, "Llama-3-8B");
}

#[test]
fn compare_holds_every_policy_and_the_oracle_bounds_mass() {
    let lab = Lab::new(Settings {
        recent: 0,
        ..small()
    })
    .unwrap();
    let c = &lab.figures().compare;
    // every policy of the core's list, in its order
    let names: Vec<&str> = Policy::defaults(1).iter().map(|p| p.name()).collect();
    let shown: Vec<&str> = c.rows.iter().map(|r| r.policy).collect();
    assert_eq!(shown, names);
    assert_eq!(c.observed_rows + c.eval_rows, 16);
    let mass = |p: &str| {
        c.rows
            .iter()
            .find(|r| r.policy == p)
            .and_then(|r| r.quality)
            .unwrap()
            .mass_mean
    };
    for p in names.iter().filter(|p| **p != "oracle") {
        assert!(mass("oracle") >= mass(p) - 1e-6, "oracle < {p}");
    }
    assert_eq!(lab.compare().curves.len(), names.len());
    assert!(lab.compare().curves[0]
        .points
        .iter()
        .all(|p| p.r_overall.is_some()));
}

#[test]
fn kivi_and_context_fit() {
    let lab = Lab::new(small()).unwrap();
    let k = &lab.figures().kivi;
    // 64 tokens, residual 128 >= T: everything stays fp16
    assert_eq!(k.bytes.keys.residual_tokens, 64);
    let mut lab = lab;
    let f = lab
        .update(&Settings {
            kivi_residual: 0,
            kivi_group: 8,
            ..small()
        })
        .unwrap();
    // 2 bits + (2 + 2) B x 8 bits / 8 = 6 bits per quantized key element
    assert_eq!(f.kivi.bytes.keys.quantized_bits, 6.0);
    assert!(f.kivi.key_error.rmse > 0.0);
    let b = &f.budget;
    assert!(
        b.context_fit > b.context_fit_fp,
        "compression fits more context"
    );
    // Llama-3-8B fp16: 128 KiB per token, 80 GiB -> 655,360 tokens
    assert_eq!(b.context_fit_fp, 655_360);
}

#[test]
fn the_kivi_verdict_follows_its_numbers() {
    // The defaults (4 outlier channels): per-token has the lower RMSE and max error, and
    // per-channel the lower relative error per channel; the caption said per-channel won.
    let mut lab = Lab::new(small()).unwrap();
    let v = lab.figures().kivi.keys_verdict;
    let [pc, pt] = &lab.figures().kivi.keys_channel_vs_token;
    let lower = |c: f64, t: f64| if c < t { "channel" } else { "token" };
    assert_eq!(v.rmse, lower(pc.rmse, pt.rmse));
    assert_eq!(v.max_abs, lower(pc.max_abs, pt.max_abs));
    assert_eq!(
        v.relative,
        lower(pc.mean_channel_relative_rmse, pt.mean_channel_relative_rmse)
    );
    assert!(
        v.outliers,
        "the generator's outlier channels: ratio {}",
        v.outlier_ratio
    );
    // Without outlier channels the keys are said to have none.
    let f = lab
        .update(&Settings {
            outliers: 0,
            ..small()
        })
        .unwrap();
    let v = f.kivi.keys_verdict;
    assert!(!v.outliers && v.outlier_ratio < OUTLIER_RATIO, "{v:?}");
    let pcs = GranularitySummary {
        granularity: Granularity::PerChannel,
        rmse: 1.0,
        max_abs: 2.0,
        mean_channel_relative_rmse: 0.5,
    };
    let pts = GranularitySummary {
        granularity: Granularity::PerToken,
        rmse: 1.0,
        max_abs: 3.0,
        mean_channel_relative_rmse: 0.4,
    };
    let v = KeysVerdict::of(&pcs, &pts, &[1.0, 1.0, 1.0, 9.0]);
    assert_eq!((v.rmse, v.max_abs, v.relative), ("tie", "channel", "token"));
    assert_eq!((v.outlier_ratio, v.outliers), (9.0, true));
    let v = KeysVerdict::of(&pcs, &pts, &[2.0, 1.0, 3.0, 1.5]);
    assert_eq!((v.outlier_ratio, v.outliers), (2.0, false));
}

#[test]
fn the_extrapolation_keeps_the_fraction_or_the_count_of_tokens() {
    use crate::budget::FitKind;
    use crate::state::KeepChoice;
    // B = 128 of T = 512 on the data; Llama-3-8B at 32,768 tokens.
    let at = |keep| {
        let lab = Lab::new(Settings {
            keep,
            ..Settings::default()
        })
        .unwrap();
        lab.figures().budget.clone()
    };
    let fraction = at(KeepChoice::Fraction);
    assert_eq!(fraction.kept_at_context, 8192); // a quarter of 32,768
    assert_eq!(fraction.extrapolated.t_kept, 8192);
    let tokens = at(KeepChoice::Tokens);
    assert_eq!(tokens.kept_at_context, 128);
    assert_eq!(tokens.extrapolated.t_kept, 128);
    assert!(tokens.extrapolated.m_final < fraction.extrapolated.m_final);
    // The kept tokens, their score state and their index list stay the same at any
    // length: any context fits (the search's limit was no answer).
    assert_eq!(
        (tokens.context_fit_kind, tokens.context_fit),
        (FitKind::Capped, 128)
    );
    assert_eq!(fraction.context_fit_kind, FitKind::Tokens);
    // A keep-mask grows with the context (a bit per token): a finite, longer context fits.
    let mask = Lab::new(Settings {
        keep: KeepChoice::Tokens,
        index: crate::state::IndexChoice::Mask,
        ..Settings::default()
    })
    .unwrap();
    let mask = &mask.figures().budget;
    assert_eq!(mask.context_fit_kind, FitKind::Tokens);
    assert!(mask.context_fit > 100 * fraction.context_fit);
    // A context shorter than B keeps all of it.
    let short = Lab::new(Settings {
        keep: KeepChoice::Tokens,
        context: 100,
        ..Settings::default()
    })
    .unwrap();
    assert_eq!(short.figures().budget.kept_at_context, 100);
    // The choice goes in the link.
    let s = Settings {
        keep: KeepChoice::Tokens,
        ..Settings::default()
    };
    assert_eq!(s.to_query(), "keep=tokens");
}

#[test]
fn the_calculator_takes_the_largest_published_models() {
    // Custom models with full multi-head attention: LLaMA-65B (80 x 64 x 128) at 32k and
    // GPT-3 175B (96 x 96 x 128) were refused ("above 2^53 - 1 bytes") by the context
    // search probing 2^32 tokens; Llama-3.1-405B at 128k with a batch of 1,024 too.
    let custom = |layers, kv_heads, context, batch| Settings {
        model: "custom".into(),
        layers,
        kv_heads,
        head_dim: 128,
        context,
        batch,
        ..small()
    };
    let mut lab = Lab::new(small()).unwrap();
    for (s, gib_fp) in [
        (custom(80, 64, 32_768, 1), 80.0),
        (custom(96, 96, 32_768, 1), 144.0),
        (custom(126, 8, 131_072, 1024), 63.0 * 1024.0),
    ] {
        let b = &lab.update(&s).expect("a real model is counted").budget;
        assert_eq!(b.model_gib_fp, gib_fp);
        assert_eq!(b.context_fit_fp_kind, FitKind::Tokens);
        // 80 GiB hold 80 GiB / bytes per token (whole batch)
        let per_token = 2 * s.layers * s.kv_heads * 128 * 2 * s.batch;
        assert_eq!(b.context_fit_fp, (80u64 << 30) / per_token);
    }
}

#[test]
fn a_model_whose_every_layer_slides_fits_any_context() {
    // Mistral-7B: 32 layers, all with a 4,096-token window. It printed "335,003,136 tokens
    // (uncompressed: 4,294,967,296)": the search's limit as a result, and an index counting
    // tokens the window had dropped, so compression seemed to fit less.
    let mut lab = Lab::new(small()).unwrap();
    let s = Settings {
        model: "mistral-7b-v0.1".into(),
        context: 32_768,
        ..small()
    };
    let b = lab.update(&s).unwrap().budget.clone();
    assert_eq!(b.model_name, "Mistral-7B-v0.1");
    for (kind, tokens) in [
        (b.context_fit_kind, b.context_fit),
        (b.context_fit_fp_kind, b.context_fit_fp),
    ] {
        assert_eq!((kind, tokens), (FitKind::AnyLength, 4096));
    }
    // The index holds the tokens the cache holds: at most the window per copy.
    let e = b.extrapolated;
    assert!(
        e.m_index <= b.selection_copies * 4096 * 4,
        "index {} for {} copies",
        e.m_index,
        b.selection_copies
    );
}

#[test]
fn per_query_head_selection_copies_the_cache() {
    let mut lab = Lab::new(small()).unwrap();
    let kv = lab.figures().budget.extrapolated;
    let f = lab
        .update(&Settings {
            scope: Scope::QueryHead,
            ..small()
        })
        .unwrap();
    // Llama-3-8B: 32 query heads share 8 KV heads, so per-query-head selection holds 4 copies
    assert_eq!(f.budget.kv_copy_factor, 4);
    assert_eq!(f.budget.extrapolated.m_codes, 4 * kv.m_codes);
    assert_eq!(f.budget.extrapolated.m_fp, kv.m_fp);
    assert!(f.budget.extrapolated.r_overall < kv.r_overall);
}

/// "Context that fits" counts what `M_KV,final` counts in every scope: at the context it
/// reports, the page's own total fits the memory, and one token more does not (before, per
/// query head on Llama-3-70B in 80 GiB it said 2,796,192 tokens, whose cache the same page
/// put at 453 GiB: the search counted one copy of K/V).
#[test]
fn the_context_that_fits_fits_in_every_scope() {
    let mut lab = Lab::new(small()).unwrap();
    for scope in [Scope::QueryHead, Scope::KvHead, Scope::Layer] {
        let at = |lab: &mut Lab, context: u64| {
            lab.update(&Settings {
                scope,
                model: "llama-3-70b".into(),
                memory_gib: 80,
                context,
                ..small()
            })
            .unwrap()
            .budget
            .clone()
        };
        let fit = at(&mut lab, 131_072);
        assert_eq!(fit.context_fit_kind, FitKind::Tokens, "{scope:?}");
        let memory = 80u64 << 30;
        let there = at(&mut lab, fit.context_fit);
        assert!(
            there.extrapolated.m_final <= memory,
            "{scope:?}: {} tokens said to fit hold {} bytes",
            fit.context_fit,
            there.extrapolated.m_final
        );
        let past = at(&mut lab, fit.context_fit + 1);
        assert!(
            past.extrapolated.m_final > memory,
            "{scope:?}: one more token fits too"
        );
    }
}

#[test]
fn out_of_range_settings_are_refused_not_panicked_on() {
    let mut lab = Lab::new(small()).unwrap();
    let before = lab.figures().clone();
    for bad in [
        Settings {
            context: 0,
            ..small()
        },
        Settings {
            batch: 0,
            ..small()
        },
        Settings {
            kernel: 4,
            ..small()
        },
        Settings {
            memory_gib: 0,
            ..small()
        },
        Settings {
            steps: 0,
            ..small()
        },
        Settings {
            fp_bytes: 3,
            ..small()
        },
        Settings {
            lang: "fr".into(),
            ..small()
        },
    ] {
        let e = lab.update(&bad).unwrap_err();
        assert!(
            e.to_string().contains("out of range")
                || e.to_string().contains("not one of")
                || e.to_string().contains("even"),
            "{e}"
        );
        assert_eq!(lab.figures(), &before);
    }
    assert_eq!(
        lab.update(&Settings {
            context: 0,
            ..small()
        })
        .unwrap_err()
        .field(),
        "context"
    );
}

#[test]
fn compact_ranges_compress_runs() {
    assert_eq!(compact_ranges(&[0, 1, 2, 3, 17, 30, 31]), "0-3,17,30-31");
    assert_eq!(compact_ranges(&[]), "");
}

#[test]
fn exports_hold_the_selection() {
    let lab = Lab::new(small()).unwrap();
    let csv = lab.export_csv();
    assert_eq!(csv.lines().filter(|l| l.contains(",1,")).count(), 16);
    let json = lab.export_json();
    assert!(json.contains("\"kept\""));
    // Each compared policy's kept set, as the comparison selected it.
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let policies = v["policies"].as_array().unwrap();
    assert_eq!(policies.len(), lab.compare().selections.len());
    assert!(policies.len() >= 2);
    for (row, (p, sel)) in policies.iter().zip(&lab.compare().selections) {
        assert_eq!(row["policy"], p.name());
        let want = sel
            .as_ref()
            .map_or_else(String::new, |x| compact_ranges(&x.kept));
        assert_eq!(row["kept_ranges"], want.as_str());
    }
    assert!(policies
        .iter()
        .any(|r| !r["kept_ranges"].as_str().unwrap().is_empty()));
}

#[test]
fn section_5_asks_the_model_for_the_settings_compression_and_every_policy() {
    use crate::lm::compress::Keep;
    use crate::policy::Policy;
    let s = Settings {
        method: crate::state::Method::Streaming,
        budget: 20,
        sinks: 30, // above B: StreamingLLM keeps B sinks at most, as section 3 does
        bits: 3,
        ..Settings::default()
    };
    let specs = crate::lab::model_specs(&s);
    assert_eq!(
        specs.current.keep,
        Keep::Policy {
            policy: Policy::StreamingLlm { sinks: 20 }
        }
    );
    assert_eq!(specs.policy, "streaming-llm");
    assert_eq!((specs.current.budget, specs.current.recent), (20, s.recent));
    for q in [specs.current.keys, specs.current.values] {
        assert_eq!(q.map(|q| q.bits), Some(3), "section 2's bits on K and V");
    }
    let names: Vec<&str> = specs.policies.iter().map(|n| n.name).collect();
    assert_eq!(
        names,
        [
            "h2o-sum",
            "h2o-mean",
            "snapkv",
            "streaming-llm",
            "tova",
            "random",
            "oracle",
            "window-only",
            "drop-first"
        ]
    );
    assert_eq!(specs.sampling.temperature, 0.0, "greedy by default");
    // "full cache less token 0" measures the token, not the bits: it is not quantized (at 2
    // or 3 bits it measured the quantization: issue 37)
    let first = specs.policies.last().expect("drop-first").spec;
    assert_eq!(
        (first.keep, first.keys, first.values),
        (Keep::DropFirst, None, None)
    );
}

/// `state::METHOD_BOUNDS` is the selection's own rule: under each row's method the lab
/// refuses the setting one above its bound (naming that setting) and takes it at the bound,
/// while the other methods take it above (the page's method switch relies on both).
#[test]
fn method_bounds_are_the_selections_own() {
    use crate::state::{Method, METHOD_BOUNDS};
    let get = |s: &Settings, key: &str| match key {
        "sinks" => s.sinks,
        "budget" => s.budget,
        _ => panic!("a METHOD_BOUNDS row names {key}: teach this test to read it"),
    };
    let set = |s: &mut Settings, key: &str, v: usize| match key {
        "sinks" => s.sinks = v,
        "budget" => s.budget = v,
        _ => panic!("a METHOD_BOUNDS row names {key}: teach this test to set it"),
    };
    assert!(!METHOD_BOUNDS.is_empty());
    for &(method, key, by) in METHOD_BOUNDS {
        for bound in [1, 2, 4, 16] {
            let mut s = Settings { method, ..small() };
            set(&mut s, by, bound);
            set(&mut s, key, bound + 1);
            let mut lab = Lab::new(small()).expect("lab");
            match lab.update(&s) {
                Err(e) => assert_eq!(e.field(), key, "{e}"),
                Ok(_) => panic!("{method:?} took {key} {} above {by} {bound}", bound + 1),
            }
            set(&mut s, key, bound);
            lab.update(&s).expect("at the bound");
            assert_eq!(get(&s, key), bound);
            for other in [Method::H2o, Method::Snapkv, Method::Streaming] {
                if other == method {
                    continue;
                }
                set(&mut s, key, bound + 1);
                s.method = other;
                lab.update(&s).expect("another method reads no such bound");
            }
        }
    }
}
