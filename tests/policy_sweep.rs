//! Sweep: agreement with `select_with` + `quality` at every budget, and a timing harness
//! (ignored by default; run `cargo test --release --test policy_sweep -- --ignored --nocapture`).

use kvlab::policy::{quality, select_with, sweep, Policy};
use kvlab::select::Pooling;
use kvlab::synth::{attention, values, AttentionPreset, AttentionSpec, KvSpec};
use std::time::Instant;

#[test]
#[ignore = "timing harness: prints figures, asserts nothing about speed"]
fn sweep_timing_64x4096_v4096x128() {
    let a = attention(&AttentionSpec::preset(AttentionPreset::Needle, 64, 4096, 3)).unwrap();
    let v = values(&KvSpec { tokens: 4096, channels: 128, ..KvSpec::default() }).unwrap();
    let budgets: Vec<usize> = (1..=32).map(|k| k * 128).collect();
    let five = [
        Policy::H2oSum,
        Policy::H2oMean,
        Policy::SnapKv { window: 16, pooling: Pooling::Max { kernel: 7 } },
        Policy::StreamingLlm { sinks: 4 },
        Policy::Tova,
    ];
    let with_oracle = [
        Policy::H2oSum,
        Policy::SnapKv { window: 16, pooling: Pooling::Max { kernel: 7 } },
        Policy::Tova,
        Policy::Random { seed: 1 },
        Policy::Oracle,
    ];
    for (name, pols, obs) in [("5 policies, E = 64 (all rows)", &five, 64), ("5 incl. oracle, observed 48, E = 16", &with_oracle, 48)] {
        let mut ms = vec![];
        for _ in 0..7 {
            let t = Instant::now();
            let c = sweep(pols, &budgets, &a, Some(&v), None, 32, obs).unwrap();
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            std::hint::black_box(c);
        }
        ms.sort_by(f64::total_cmp);
        println!("sweep 32 budgets x {name}: median {:.1} ms, min {:.1} ms", ms[3], ms[0]);
    }
    let t = Instant::now();
    for &b in &budgets {
        for p in &five {
            let s = select_with(p, &a, b, 32, 64).unwrap();
            std::hint::black_box(quality(&a, Some(&v), None, &s.kept, 64).unwrap());
        }
    }
    println!("naive select_with + quality per point: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
}

#[test]
#[ignore = "timing harness"]
fn sweep_timing_parts() {
    let a = attention(&AttentionSpec::preset(AttentionPreset::Needle, 64, 4096, 3)).unwrap();
    let v = values(&KvSpec { tokens: 4096, channels: 128, ..KvSpec::default() }).unwrap();
    let budgets: Vec<usize> = (1..=32).map(|k| k * 128).collect();
    let time = |f: &dyn Fn()| {
        let mut ms: Vec<f64> = (0..9).map(|_| { let t = Instant::now(); f(); t.elapsed().as_secs_f64() * 1e3 }).collect();
        ms.sort_by(f64::total_cmp);
        (ms[4], ms[0])
    };
    println!("mass only, 5 policies: {:?}", time(&|| { sweep(&[Policy::H2oSum, Policy::H2oMean, Policy::SnapKv { window: 16, pooling: Pooling::Max { kernel: 7 } }, Policy::StreamingLlm { sinks: 4 }, Policy::Tova], &budgets, &a, None, None, 32, 64).unwrap(); }));
    println!("values, 0 policies (exact outputs only): {:?}", time(&|| { sweep(&[], &budgets, &a, Some(&v), None, 32, 64).unwrap(); }));
    println!("values, 1 policy: {:?}", time(&|| { sweep(&[Policy::Tova], &budgets, &a, Some(&v), None, 32, 64).unwrap(); }));
}
