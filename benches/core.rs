//! Core kernel benchmarks on the performance issue's workloads (W1 "lecture", W2 "long context").
//!
//! A plain harness that prints figures (no timing assertions): median and p95 of N runs for
//! quantize + dequantize + error stats, H2O and SnapKV selection.
//!
//! ```text
//! cargo bench --bench core                        # print a table
//! cargo bench --bench core -- --json              # one JSON object per line (for scripts)
//! cargo bench --bench core -- --write-inputs DIR  # also write the inputs as .npy for numpy
//! ```

use kvlab::quant::{error_stats, quantize, QuantConfig};
use kvlab::select::{h2o, observation_scores, snapkv, Pooling};
use kvlab::synth::{attention, keys, AttentionPreset, AttentionSpec, KvSpec};
use kvlab::Matrix;
use std::hint::black_box;
use std::time::Instant;

fn time<F: FnMut()>(runs: usize, mut f: F) -> (f64, f64) {
    f(); // warm up
    let mut ms: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    let p = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    (p(0.5), p(0.95))
}

fn write_npy(path: &std::path::Path, m: &Matrix) -> std::io::Result<()> {
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}",
        m.rows(),
        m.cols()
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in m.data() {
        out.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, out)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let json = args.iter().any(|a| a == "--json");
    let write_dir = args
        .iter()
        .position(|a| a == "--write-inputs")
        .and_then(|i| args.get(i + 1))
        .map(std::path::PathBuf::from);
    let workloads = [("W1", 64usize, 4096usize, 128usize), ("W2", 64, 32768, 128)];
    if !json {
        println!(
            "{:<4} {:<34} {:>10} {:>10}",
            "load", "kernel", "p50 ms", "p95 ms"
        );
    }
    for (name, s, t, d) in workloads {
        let a = attention(&AttentionSpec::preset(
            AttentionPreset::HeavyHitters,
            s,
            t,
            7,
        ))
        .expect("valid spec");
        let k = keys(&KvSpec {
            tokens: t,
            channels: d,
            seed: 7,
            ..KvSpec::default()
        })
        .expect("valid spec");
        if let Some(dir) = &write_dir {
            std::fs::create_dir_all(dir).expect("create input dir");
            write_npy(&dir.join(format!("{name}_attention.npy")), &a).expect("write");
            write_npy(&dir.join(format!("{name}_keys.npy")), &k).expect("write");
        }
        let runs = if t > 10_000 { 15 } else { 40 };
        let budget = t / 8;
        let recent = t / 32;
        let cfg = QuantConfig::per_channel_symmetric(4);
        let rows: Vec<(&str, (f64, f64))> = vec![
            (
                "quantize+dequantize+stats (4-bit)",
                time(runs, || {
                    let q = quantize(black_box(&k), &cfg).expect("quantize");
                    let hat = q.dequantize();
                    black_box(error_stats(&k, &q));
                    black_box(hat);
                }),
            ),
            (
                "h2o (B=T/8, r=T/32)",
                time(runs, || {
                    black_box(h2o(black_box(&a), budget, recent).expect("h2o"));
                }),
            ),
            (
                "snapkv (w=32, avg k=7)",
                time(runs, || {
                    let sc = observation_scores(black_box(&a), 32, Pooling::Avg { kernel: 7 })
                        .expect("scores");
                    black_box(snapkv(&sc, budget, recent).expect("snapkv"));
                }),
            ),
        ];
        for (kernel, (p50, p95)) in rows {
            if json {
                println!(
                    "{{\"workload\":\"{name}\",\"kernel\":\"{kernel}\",\"p50_ms\":{p50:.4},\"p95_ms\":{p95:.4}}}"
                );
            } else {
                println!("{name:<4} {kernel:<34} {p50:>10.3} {p95:>10.3}");
            }
        }
    }
}
