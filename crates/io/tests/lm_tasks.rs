//! The committed model needs its cache (`www/model/`): it copies a span read far back and
//! recalls a fact stated far back with its full cache, and loses both when the cache keeps
//! only its recent tokens. Cases are built by `kvlab_core::lm::tasks` (the trainer's own
//! templates) from a seed the trainer never used, with new names, numbers and letters, and
//! filler from the held-out slice. Budgets are per head, each head choosing from its own
//! attention; the prefill ends where the graded bytes start (the question inside it).
//! `KVLAB_SHOW=1` prints the measures.

use kvlab_core::lm::compress::{compress, CacheSpec, Keep};
use kvlab_core::lm::tasks::{self, Case};
use kvlab_core::lm::Lm;
use kvlab_core::policy::Policy;
use kvlab_core::rng::Xoshiro256;
use kvlab_core::select::Pooling;
use kvlab_io::lm::{card, load};

/// The tests' seed: the trainer's batches use its run seed's streams, its probes another.
const SEED: u64 = 0x7E57_CA5E;
/// Cases per measure.
const CASES: usize = 32;

fn dir() -> std::path::PathBuf {
    std::env::var_os("KVLAB_MODEL_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../www/model"),
        Into::into,
    )
}

fn setup() -> (Lm, Vec<u8>) {
    let d = dir();
    let c =
        card(&std::fs::read_to_string(d.join("model.json")).expect("model.json")).expect("card");
    let lm = load(
        &c,
        &std::fs::read(d.join("model.safetensors")).expect("weights"),
    )
    .expect("model");
    let text = std::fs::read(d.join("heldout.txt")).expect("heldout.txt");
    (lm, text)
}

fn show(what: &str) {
    if std::env::var_os("KVLAB_SHOW").is_some() {
        println!("{what}");
    }
}

/// Whether each graded byte is the argmax of its logits row (`row(k)` predicts byte `k`).
fn right(case: &Case, row: impl Fn(usize) -> Vec<f32>) -> Vec<bool> {
    case.answer
        .clone()
        .map(|k| {
            let r = row(k);
            let best = (0..r.len()).fold(0, |b, j| if r[j] > r[b] { j } else { b });
            best == usize::from(case.bytes[k])
        })
        .collect()
}

/// The graded bytes' rightness under `spec` (`None`: the full cache). The prefill is the
/// prompt, as a server would see it: the BOS and every byte before the first graded one (the
/// question to its last space, the repeat's first half). As in serving, the prefill's own
/// last row (full attention) predicts the first graded byte; the cache is compressed after
/// the prefill and every later byte is predicted from the compressed cache.
fn graded(lm: &Lm, case: &Case, spec: Option<&CacheSpec>) -> Vec<bool> {
    let mut tokens = vec![0u8];
    tokens.extend_from_slice(&case.bytes);
    let run = lm.forward(&tokens).expect("a case fits the context");
    let vocab = run.logits.cols();
    match spec {
        None => right(case, |k| run.logits.row(k).expect("a row").to_vec()),
        Some(spec) => {
            // (logits row k, of token k = byte k - 1, predicts byte k)
            let prefill = case.answer.start + 1;
            let mut cache = compress(&run, prefill, spec).expect("compress").cache;
            let logits = lm.extend(&mut cache, &tokens[prefill..]).expect("extend");
            right(case, |k| {
                if k < prefill {
                    run.logits.row(k).expect("a row").to_vec()
                } else {
                    logits[(k - prefill) * vocab..(k - prefill + 1) * vocab].to_vec()
                }
            })
        }
    }
}

fn policy_spec(policy: Policy, budget: usize, recent: usize) -> CacheSpec {
    CacheSpec {
        keep: Keep::Policy { policy },
        budget,
        recent,
        ..CacheSpec::full()
    }
}

fn copy_cases(text: &[u8]) -> Vec<Case> {
    let mut rng = Xoshiro256::stream(SEED, 1);
    (0..CASES)
        .map(|_| {
            let distance = 128 + rng.below(73) as usize;
            tasks::copy_case(text, &mut rng, 255, 40, distance).expect("a copy case fits")
        })
        .collect()
}

fn fact_cases(text: &[u8]) -> Vec<Case> {
    let mut rng = Xoshiro256::stream(SEED, 2);
    let mut cases = Vec::new();
    while cases.len() < CASES {
        // from 128 bytes to as far as 255 bytes allow with the longest names
        let distance = 128 + rng.below(56) as usize;
        cases.extend(tasks::fact_case(text, &mut rng, 255, distance));
    }
    cases
}

fn share(v: &[bool]) -> f64 {
    v.iter().filter(|&&b| b).count() as f64 / v.len().max(1) as f64
}

/// The share of bytes right over all cases.
fn byte_rate(lm: &Lm, cases: &[Case], spec: Option<&CacheSpec>) -> f64 {
    let all: Vec<bool> = cases.iter().flat_map(|c| graded(lm, c, spec)).collect();
    share(&all)
}

/// The share of cases with every graded byte right.
fn case_rate(lm: &Lm, cases: &[Case], spec: Option<&CacheSpec>) -> f64 {
    let all: Vec<bool> = cases
        .iter()
        .map(|c| graded(lm, c, spec).iter().all(|&b| b))
        .collect();
    share(&all)
}

#[test]
fn it_copies_a_span_read_128_bytes_back_and_not_from_the_recent_window_alone() {
    let (lm, text) = setup();
    let cases = copy_cases(&text);
    let full = byte_rate(&lm, &cases, None);
    let window = byte_rate(
        &lm,
        &cases,
        Some(&policy_spec(Policy::StreamingLlm { sinks: 0 }, 32, 0)),
    );
    show(&format!(
        "copy: full cache {full:.3}, recent window alone (B 32) {window:.3}"
    ));
    assert!(
        full >= 0.9,
        "full cache: {full:.3} of the repeat's second half"
    );
    assert!(window <= 0.3, "recent window alone at B = 32: {window:.3}");
}

#[test]
fn it_recalls_a_fact_stated_128_or_more_bytes_back() {
    let (lm, text) = setup();
    let full = case_rate(&lm, &fact_cases(&text), None);
    show(&format!("facts: full cache {full:.3}"));
    assert!(
        full >= 0.9,
        "full cache: {full:.3} of the facts with all 4 digits right"
    );
}

#[test]
fn under_eviction_the_policies_that_read_the_question_keep_the_fact() {
    let (lm, text) = setup();
    let cases = fact_cases(&text);
    let full = case_rate(&lm, &cases, None);
    let (b, r) = (32, 16);
    let at = |p: Policy| case_rate(&lm, &cases, Some(&policy_spec(p, b, r)));
    // SnapKV as its paper's configurations run it (max pooling, kernel 7), its observation
    // window the question's last 8 bytes. The window matters and is reported: a wider one
    // also sums the question's attention to the fact's name, whose pooled neighbourhood then
    // fills the 16 chosen slots before the number 4 bytes after it (docs/model.md).
    let snap = |window| {
        at(Policy::SnapKv {
            window,
            pooling: Pooling::Max { kernel: 7 },
        })
    };
    let (snapkv, snap16, snap32) = (snap(8), snap(16), snap(32));
    let window = case_rate(
        &lm,
        &cases,
        Some(&policy_spec(Policy::StreamingLlm { sinks: 0 }, b, 0)),
    );
    let streaming = case_rate(
        &lm,
        &cases,
        Some(&policy_spec(Policy::StreamingLlm { sinks: 4 }, b, 0)),
    );
    let h2o = at(Policy::H2oSum);
    let tova = at(Policy::Tova);
    let random = at(Policy::Random { seed: 1 });
    let oracle = at(Policy::Oracle);
    show(&format!(
        "facts at B {b}, r {r}: full {full:.3}, SnapKV {snapkv:.3} (observing 16: {snap16:.3}, \
         32: {snap32:.3}), H2O {h2o:.3}, TOVA {tova:.3}, random {random:.3}, StreamingLLM \
         {streaming:.3}, window alone {window:.3}, oracle {oracle:.3}"
    ));
    // (a model that cannot answer with its full cache would pass the rest vacuously)
    assert!(full >= 0.9, "the full cache answers {full:.3}");
    assert!(
        snapkv >= 0.8 * full,
        "SnapKV {snapkv:.3} against the full cache's {full:.3}"
    );
    assert!(window <= 0.3, "the recent window alone: {window:.3}");
    assert!(
        streaming <= 0.3,
        "StreamingLLM with 4 sinks: {streaming:.3}"
    );
    for (name, v) in [
        ("SnapKV", snapkv),
        ("SnapKV observing 16", snap16),
        ("SnapKV observing 32", snap32),
        ("H2O", h2o),
        ("TOVA", tova),
        ("random", random),
        ("StreamingLLM", streaming),
        ("the window", window),
    ] {
        assert!(oracle >= v, "the oracle {oracle:.3} below {name}'s {v:.3}");
    }
}

/// A prompt's tokens and the (query row, key columns) pairs whose weight a measure sums.
type Probe = (Vec<u8>, Vec<(usize, Vec<usize>)>);

/// Each head's weights, `[layer][head]`, averaged over every probe's rows.
fn per_head(lm: &Lm, runs: &[Probe], threshold: Option<f32>) -> Vec<Vec<f64>> {
    let c = lm.config();
    let mut sum = vec![vec![0.0; c.heads]; c.layers];
    let mut n = 0usize;
    for (tokens, rows) in runs {
        let run = lm.forward(tokens).expect("a case fits the context");
        for (q, keys) in rows {
            for (l, layer) in run.attention.iter().enumerate() {
                for (h, att) in layer.iter().enumerate() {
                    let row = att.row(*q).expect("a row");
                    let w: f32 = keys.iter().map(|&k| row[k]).sum();
                    sum[l][h] += match threshold {
                        // the share of rows putting over `t` of their weight there
                        Some(t) => f64::from(u8::from(w > t)),
                        None => f64::from(w),
                    };
                }
            }
            n += 1;
        }
    }
    for layer in &mut sum {
        for v in layer.iter_mut() {
            *v /= n.max(1) as f64;
        }
    }
    sum
}

fn with_bos(bytes: &[u8]) -> Vec<u8> {
    let mut tokens = vec![0u8];
    tokens.extend_from_slice(bytes);
    tokens
}

fn table(name: &str, v: &[Vec<f64>]) -> String {
    let rows: Vec<String> = v
        .iter()
        .enumerate()
        .map(|(l, hs)| {
            let cells: Vec<String> = hs.iter().map(|x| format!("{:5.1}%", 100.0 * x)).collect();
            format!("  layer {l}: {}", cells.join(" "))
        })
        .collect();
    format!("{name}\n{}", rows.join("\n"))
}

/// The heads by role, the measures docs/model.md's card states (`KVLAB_SHOW=1` prints them):
/// **local**, the mean weight of a held-out query (position 16 on) on its last 8 bytes;
/// **sink**, the share of those rows putting over half their weight on the BOS; **copy**, the
/// mean weight of a copy case's graded positions on the source byte they are about to repeat;
/// **retrieval**, the same for a fact's answer positions on the stated number's byte they are
/// about to say. The tests hold the card to its claims: one head retrieves (over half its
/// weight on the number), one copies, and it is the same head.
#[test]
fn the_heads_by_role() {
    let (lm, text) = setup();
    let passages: Vec<_> = text
        .chunks_exact(255)
        .map(|p| {
            let tokens = with_bos(p);
            let rows = (16..tokens.len())
                .map(|q| (q, (q.saturating_sub(7)..=q).collect()))
                .collect();
            (tokens, rows)
        })
        .collect();
    let local = per_head(&lm, &passages, None);
    let bos: Vec<_> = passages
        .iter()
        .map(|(t, rows)| (t.clone(), rows.iter().map(|(q, _)| (*q, vec![0])).collect()))
        .collect();
    let sink = per_head(&lm, &bos, Some(0.5));
    // (row k, of token k = byte k - 1, predicts byte k; byte b is token b + 1)
    let graded_on = |cases: &[Case], from: &dyn Fn(&Case) -> usize| -> Vec<Probe> {
        cases
            .iter()
            .map(|c| {
                let start = from(c);
                let rows = c
                    .answer
                    .clone()
                    .map(|k| (k, vec![start + (k - c.answer.start) + 1]))
                    .collect();
                (with_bos(&c.bytes), rows)
            })
            .collect()
    };
    let copies = copy_cases(&text);
    let copy = per_head(
        &lm,
        &graded_on(&copies, &|c| {
            let span = c.source.len();
            c.source.start + span / 2
        }),
        None,
    );
    let facts = fact_cases(&text);
    let retrieval = per_head(
        &lm,
        &graded_on(&facts, &|c| {
            let value = &c.bytes[c.answer.clone()];
            c.bytes[c.source.clone()]
                .windows(value.len())
                .position(|w| w == value)
                .expect("the fact states its number")
                + c.source.start
        }),
        None,
    );
    show(&table("local (weight on the last 8 bytes)", &local));
    show(&table("sink (rows over half on the BOS)", &sink));
    show(&table("copy (weight on the byte to repeat)", &copy));
    show(&table(
        "retrieval (weight on the number's byte to say)",
        &retrieval,
    ));
    let best = |v: &[Vec<f64>]| v.iter().flatten().fold(0.0f64, |a, &b| a.max(b));
    assert!(
        best(&retrieval) > 0.5,
        "no head retrieves the number: {retrieval:?}"
    );
    assert!(best(&copy) > 0.5, "no head copies: {copy:?}");
    // one circuit does both: the head that copies is the head that retrieves
    let argmax = |v: &[Vec<f64>]| {
        let cells = v
            .iter()
            .enumerate()
            .flat_map(|(l, hs)| hs.iter().enumerate().map(move |(h, &x)| (x, l, h)));
        cells.fold((0.0, 0, 0), |a, b| if b.0 > a.0 { b } else { a })
    };
    let (c, r) = (argmax(&copy), argmax(&retrieval));
    assert_eq!(
        (c.1, c.2),
        (r.1, r.2),
        "copy head {c:?}, retrieval head {r:?}"
    );
}

/// The needle test the page runs (`kvlab_core::lm::needle`): the answer each cache generates,
/// the question read before the compression (query-aware) or after it.
#[test]
fn the_needle_test_snapkv_finds_the_fact_only_when_it_has_read_the_question() {
    use kvlab_core::lm::needle::{answer, tokens, Asked};
    let (lm, text) = setup();
    let cases = fact_cases(&text);
    let snapkv = policy_spec(
        Policy::SnapKv {
            window: 8,
            pooling: Pooling::Max { kernel: 7 },
        },
        32,
        16,
    );
    let recent = policy_spec(Policy::StreamingLlm { sinks: 0 }, 32, 0);
    let mut right = [0usize; 4];
    for case in &cases {
        let run = lm.forward(&tokens(case)).expect("a case fits");
        let a = |spec: Option<&CacheSpec>, asked| {
            answer(&lm, &run, case, spec, asked)
                .expect("an answer")
                .correct()
        };
        for (i, ok) in [
            a(None, Asked::Before),
            a(Some(&snapkv), Asked::Before),
            a(Some(&snapkv), Asked::After),
            a(Some(&recent), Asked::Before),
        ]
        .into_iter()
        .enumerate()
        {
            right[i] += usize::from(ok);
        }
    }
    let n = cases.len() as f64;
    let [full, before, after, window] = right.map(|r| r as f64 / n);
    show(&format!(
        "needle, B 32: full {full:.3}, SnapKV asked before {before:.3}, after {after:.3}, window {window:.3}"
    ));
    assert!(full >= 0.9, "full cache {full:.3}");
    assert!(
        before >= 0.8 * full,
        "SnapKV with the question read: {before:.3}"
    );
    assert!(
        after <= 0.5 * before,
        "SnapKV before the question: {after:.3} (read: {before:.3})"
    );
    assert!(window <= 0.3, "the recent window alone: {window:.3}");
    // a learner's own fact, 150 bytes back in the held-out text
    let own = tasks::fact_case_with(&text[1000..], "Mirabel", "2026", 255, 150).expect("fits");
    let run = lm.forward(&tokens(&own)).expect("fits");
    let said = |spec: Option<&CacheSpec>| {
        let a = answer(&lm, &run, &own, spec, Asked::Before).expect("an answer");
        String::from_utf8_lossy(&a.bytes).into_owned()
    };
    let (full, snap, win) = (said(None), said(Some(&snapkv)), said(Some(&recent)));
    show(&format!(
        "Mirabel 2026: full {full:?}, SnapKV {snap:?}, window {win:?}"
    ));
    assert_eq!((full.as_str(), snap.as_str()), ("2026", "2026"));
    assert_ne!(win, "2026");
    // (KIVI-2: 2 bits, groups of 32; a residual of 32, so that the fact is quantized)
    let kivi = kvlab_core::kivi::KiviConfig {
        residual: 32,
        ..Default::default()
    };
    // the page's strip: the share of heads keeping each prefill byte, the fact's value kept by
    // SnapKV's heads and by none of the window's
    let answers = kvlab_io::needle_report::needle_answers(
        &lm,
        &run,
        &own,
        &[("snapkv", &snapkv), ("window-only", &recent)],
        Some(&kivi),
        Asked::Before,
        &mut Default::default(),
    )
    .expect("answers");
    let value = {
        let fact = &own.bytes[own.source.clone()];
        let at = fact
            .windows(4)
            .position(|w| w == b"2026")
            .expect("in the fact");
        own.source.start + at..own.source.start + at + 4
    };
    for a in &answers {
        assert_eq!(
            a.kept.len(),
            own.answer.start,
            "{}: a share per prompt byte",
            a.name
        );
    }
    let [full, snap, win, kv] = [0, 1, 2, 3].map(|i| &answers[i]);
    // KIVI keeps every token (its bits are what it spends): the answer of the full cache here
    assert_eq!((kv.name.as_str(), kv.said.as_str()), ("kivi", "2026"));
    assert!(kv.kept.iter().all(|&k| k == 100) && kv.r_overall > 1.0);
    assert!(
        full.kept.iter().all(|&k| k == 100),
        "the full cache keeps every byte"
    );
    assert!(
        snap.kept[value.clone()].iter().all(|&k| k > 0),
        "{:?}",
        &snap.kept[value.clone()]
    );
    assert!(win.kept[value.clone()].iter().all(|&k| k == 0));
    assert_eq!(
        win.kept.iter().filter(|&&k| k == 100).count(),
        32,
        "the window: its last B bytes"
    );
    assert!(win.kept[win.kept.len() - 32..].iter().all(|&k| k == 100));
    assert_eq!(win.kept_value, 0.0);
    assert!(snap.kept_value > 0.0);
}

/// Section 5's accuracy chart on its built-in cases (`kvlab_io::needle_report`): each
/// policy's share of facts answered at each budget; `KVLAB_SHOW=1` prints the table.
#[test]
fn the_accuracy_chart_rises_with_the_budget_and_the_full_cache_is_its_ceiling() {
    use kvlab_core::lm::needle::{answer, tokens, Asked};
    use kvlab_io::needle_report::{needle_cases, needle_row, NEEDLE_BUDGETS};
    let (lm, text) = setup();
    let cases = needle_cases(&text);
    let runs: Vec<_> = cases
        .iter()
        .map(|c| lm.forward(&tokens(c)).expect("a case fits"))
        .collect();
    let full = cases
        .iter()
        .zip(&runs)
        .filter(|(c, r)| {
            answer(&lm, r, c, None, Asked::Before)
                .expect("an answer")
                .correct()
        })
        .count() as f64
        / cases.len() as f64;
    let policies = [
        (
            "SnapKV",
            Policy::SnapKv {
                window: 8,
                pooling: Pooling::Max { kernel: 7 },
            },
            16,
        ),
        ("H2O", Policy::H2oSum, 16),
        ("StreamingLLM", Policy::StreamingLlm { sinks: 4 }, 0),
        ("window", Policy::StreamingLlm { sinks: 0 }, 0),
        ("oracle", Policy::Oracle, 16),
    ];
    let mut lines = vec![format!(
        "full cache {full:.3}; budgets {NEEDLE_BUDGETS:?} then the prefill"
    )];
    let mut curves = Vec::new();
    let mut memos: Vec<kvlab_core::lm::needle::Answers> = cases
        .iter()
        .map(|_| kvlab_core::lm::needle::Answers::scoring())
        .collect();
    for asked in [Asked::Before, Asked::After] {
        for &(name, p, r) in &policies {
            let spec = policy_spec(p, 0, r);
            // (one memo a case, shared by the curves as the page's are)
            let rows: Vec<_> = cases
                .iter()
                .zip(&runs)
                .zip(&mut memos)
                .map(|((c, run), memo)| needle_row(&lm, run, c, &spec, asked, memo).expect("a row"))
                .collect();
            let acc: Vec<f64> = (0..rows[0].len())
                .map(|i| rows.iter().filter(|r| r[i].correct).count() as f64 / rows.len() as f64)
                .collect();
            let ratio: Vec<f64> = (0..rows[0].len())
                .map(|i| rows.iter().map(|r| r[i].r_overall).sum::<f64>() / rows.len() as f64)
                .collect();
            lines.push(format!(
                "{asked:?} {name}: accuracy {acc:.2?} at R_overall {ratio:.1?}"
            ));
            curves.push((asked, name, acc, ratio));
        }
    }
    show(&lines.join("\n"));
    assert!(full >= 0.9, "full cache {full:.3}");
    for (asked, name, acc, ratio) in &curves {
        // at the prefill nothing is dropped: the full cache's answers
        assert_eq!(acc.last(), Some(&full), "{asked:?} {name} at the prefill");
        assert_eq!(ratio.last(), Some(&1.0));
        assert!(
            ratio.windows(2).all(|w| w[0] > w[1]),
            "{name}: R_overall falls as B grows"
        );
    }
    let at = |asked, name: &str, budget: usize| {
        let i = NEEDLE_BUDGETS
            .iter()
            .position(|&b| b == budget)
            .expect("a budget");
        curves
            .iter()
            .find(|c| c.0 == asked && c.1 == name)
            .map(|c| c.2[i])
            .expect("a curve")
    };
    assert!(at(Asked::Before, "SnapKV", 32) >= 0.8 * full);
    assert!(at(Asked::Before, "SnapKV", 4) < at(Asked::Before, "SnapKV", 32));
    assert!(at(Asked::Before, "window", 32) <= 0.3);
    assert!(at(Asked::After, "SnapKV", 32) < at(Asked::Before, "SnapKV", 32));
}
