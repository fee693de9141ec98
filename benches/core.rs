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
//!
//! With `--write-inputs DIR` the harness also writes what the kernels computed, so that
//! `benches/numpy_compare.py` can check its numpy implementations give the same answers:
//! `W*_expected_hat.npy` (the de-quantized keys), `W*_expected_snapkv_scores.npy` (1 x T) and
//! `W*_expected.json` (error statistics, kept indices of H2O and SnapKV, B and r).
//!
//! The kernels and the two workloads are `benches/kernels/src/kernels.rs`, which the wasm module
//! of `cargo xtask bench wasm` builds too: `--json` prints each kernel's checksum, and
//! `benches/wasm.mjs` checks the wasm run computed the same.
//!
//! A third workload, W3 (the trade-off sweep: 32 budgets x 5 policies on W1's attention), is
//! timed natively with `kvlab::policy::sweep`.
//!
//! Last, the page's own recompute path natively: `kvlab::lab::Lab::update` on W1 and W2 for the
//! same control changes `benches/page.mjs` makes in the browser (bits up/down, budget B, recent
//! window r, method, scheme). That is what the page's `kvlab:compute` runs in wasm (minus the
//! JS <-> Rust conversion of settings and figures), so the two tables compare wasm with native.
//! `--no-lab` skips it (`benches/numpy_compare.py` does), `--lab-only` runs only it.
//!
//! **Memory policy.** numpy's allocator asks Linux for transparent huge pages on every array of
//! 4 MiB or more (`madvise(MADV_HUGEPAGE)`, on by default since numpy 1.20), so a fresh 16 MiB
//! array costs 8 page faults, not 4,096. This harness's allocator does the same for the Rust
//! side ([`NumpyLikeAlloc`]), so that the "fresh buffers" rows compare the kernels and not two
//! memory policies. `--no-hugepages` turns it off (`benches/numpy_compare.py --no-hugepages`
//! turns numpy's off too). The library itself allocates with whatever allocator its program
//! uses; the page (wasm) is not concerned.

// The kernels and workloads, shared with the wasm module `benches/wasm.mjs` times in Chromium.
#[path = "kernels/src/kernels.rs"]
mod kernels;

use kernels::{Bench, KERNELS, SNAPKV_POOLING, SNAPKV_WINDOW, WORKLOADS};
use kvlab::lab::Lab;
use kvlab::policy::{sweep, Policy};
use kvlab::quant::{error_stats, quantize, Scheme};
use kvlab::select::{h2o, observation_scores, snapkv, Pooling};
use kvlab::state::{Method, Settings};
use kvlab::synth::{attention, values, AttentionPreset, AttentionSpec, KvSpec};
use kvlab::Matrix;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// The system allocator, plus what numpy's allocator does on Linux (numpy
/// `_core/src/multiarray/alloc.c`, `default_malloc` and friends): a block of 4 MiB or more is
/// advised `MADV_HUGEPAGE` from its first page boundary on, so the kernel backs it with 2 MiB
/// pages where it can (this machine's transparent huge pages are in `madvise` mode). Off with
/// `--no-hugepages`.
struct NumpyLikeAlloc;

/// Whether [`NumpyLikeAlloc`] advises huge pages (`--no-hugepages` clears it).
static HUGEPAGES: AtomicBool = AtomicBool::new(true);

/// numpy's threshold: `nelem * esz >= (1u << 22u)`.
const HUGEPAGE_MIN_BYTES: usize = 1 << 22;

#[cfg(target_os = "linux")]
extern "C" {
    fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: std::ffi::c_int)
        -> std::ffi::c_int;
}

/// `MADV_HUGEPAGE` on Linux (asm-generic/mman-common.h).
#[cfg(target_os = "linux")]
const MADV_HUGEPAGE: std::ffi::c_int = 14;

impl NumpyLikeAlloc {
    /// Advises the block at `p` of `size` bytes as numpy does; a failed advice is ignored, as
    /// numpy ignores it (it only changes how the memory is backed).
    #[allow(unused_variables)]
    fn advise(p: *mut u8, size: usize) {
        #[cfg(target_os = "linux")]
        if !p.is_null() && size >= HUGEPAGE_MIN_BYTES && HUGEPAGES.load(Ordering::Relaxed) {
            const PAGE: usize = 4096;
            let offset = PAGE - (p as usize) % PAGE;
            // SAFETY: [p + offset, p + size) lies inside the block just allocated (offset <=
            // 4096 < size), starts on a page boundary, and madvise only changes how those
            // pages are backed, never their contents.
            unsafe {
                madvise(p.add(offset).cast(), size - offset, MADV_HUGEPAGE);
            }
        }
    }
}

// SAFETY: every call is forwarded to `System` with the same arguments; `advise` does not touch
// the memory's contents.
unsafe impl GlobalAlloc for NumpyLikeAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        Self::advise(p, layout.size());
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        Self::advise(p, layout.size());
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        Self::advise(p, new_size);
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOC: NumpyLikeAlloc = NumpyLikeAlloc;

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
    let no_lab = args.iter().any(|a| a == "--no-lab");
    if args.iter().any(|a| a == "--no-hugepages") {
        HUGEPAGES.store(false, Ordering::Relaxed);
    }
    if args.iter().any(|a| a == "--lab-only") {
        lab_updates(json);
        return;
    }
    if !json {
        println!(
            "{:<4} {:<34} {:>10} {:>10}",
            "load", "kernel", "p50 ms", "p95 ms"
        );
    }
    for shape in WORKLOADS {
        let name = shape.name;
        let mut bench = Bench::new(shape).expect("valid workload");
        if let Some(dir) = &write_dir {
            std::fs::create_dir_all(dir).expect("create input dir");
            write_npy(&dir.join(format!("{name}_attention.npy")), &bench.attention).expect("write");
            write_npy(&dir.join(format!("{name}_keys.npy")), &bench.keys).expect("write");
        }
        let runs = if shape.tokens > 10_000 { 15 } else { 40 };
        let rows: Vec<(&str, (f64, f64), f64)> = (0..KERNELS.len())
            .map(|i| {
                let checksum = bench.run(i).expect("kernel");
                let timing = time(runs, || {
                    black_box(bench.run(black_box(i)).expect("kernel"));
                });
                (KERNELS[i], timing, checksum)
            })
            .collect();
        if let Some(dir) = &write_dir {
            write_expected(dir, name, &bench).expect("write expected");
        }
        for (kernel, (p50, p95), checksum) in rows {
            if json {
                println!(
                    "{{\"workload\":\"{name}\",\"kernel\":\"{kernel}\",\"p50_ms\":{p50:.4},\"p95_ms\":{p95:.4},\"checksum\":{checksum:?}}}"
                );
            } else {
                println!("{name:<4} {kernel:<34} {p50:>10.3} {p95:>10.3}");
            }
        }
    }
    sweep_w3(json);
    if !no_lab {
        lab_updates(json);
    }
}

/// `Lab::update` (the page's recompute) for person-like changes of each control, as
/// `benches/page.mjs` makes them: W1 with B=512, r=64 and W2 with B=4096, r=256.
fn lab_updates(json: bool) {
    let loads = [
        (
            "W1",
            "tokens=4096&steps=64&channels=128&budget=512&recent=64",
            20usize,
        ),
        (
            "W2",
            "tokens=32768&steps=64&channels=128&budget=4096&recent=256",
            6,
        ),
    ];
    for (name, query, n) in loads {
        let base = Settings::from_query(query).settings;
        let t0 = Instant::now();
        let mut lab = Lab::new(base.clone()).expect("lab");
        let new_ms = t0.elapsed().as_secs_f64() * 1e3;
        let tokens = base.tokens;
        let around = move |b: usize, i: usize| {
            ((b as f64 * (0.5 + tri(i, 16))).round() as usize).clamp(1, tokens)
        };
        type Change = Box<dyn Fn(&mut Settings, usize)>;
        let (b0, r0) = (base.budget, base.recent);
        let controls: Vec<(&str, Change)> = vec![
            (
                "bits",
                Box::new(|s, i| s.bits = 2 + (4.0 * tri(i, 8)).round() as u8),
            ),
            (
                "budget B",
                Box::new(move |s, i| s.budget = around(b0, i + 1)),
            ),
            (
                "recent r",
                Box::new(move |s, i| s.recent = around(r0, i + 1)),
            ),
            (
                "method",
                Box::new(|s, i| {
                    s.method = [Method::Snapkv, Method::Streaming, Method::H2o][i % 3];
                }),
            ),
            (
                "scheme",
                Box::new(|s, i| s.scheme = [Scheme::Asymmetric, Scheme::Symmetric][i % 2]),
            ),
        ];
        let mut s = base.clone();
        let mut all = Vec::new();
        let mut rows = Vec::new();
        for (control, change) in &controls {
            change(&mut s, 0); // warm-up step
            lab.update(&s).expect("update");
            let mut ms: Vec<f64> = (1..=n)
                .map(|i| {
                    change(&mut s, i);
                    let t = Instant::now();
                    black_box(lab.update(black_box(&s)).expect("update"));
                    t.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            all.extend_from_slice(&ms);
            ms.sort_by(f64::total_cmp);
            rows.push((format!("lab update: {control}"), pq(&ms)));
        }
        all.sort_by(f64::total_cmp);
        rows.insert(0, ("lab update: all controls".to_string(), pq(&all)));
        rows.insert(
            0,
            (
                "lab new (generate + everything)".to_string(),
                (new_ms, new_ms),
            ),
        );
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

/// A triangle wave 0 -> 1 -> 0 over `period` steps (how the sliders are moved).
fn tri(i: usize, period: usize) -> f64 {
    let p = i % period;
    let half = period as f64 / 2.0;
    if p as f64 <= half {
        p as f64 / half
    } else {
        (period - p) as f64 / half
    }
}

/// p50 and p95 of sorted figures.
fn pq(sorted: &[f64]) -> (f64, f64) {
    let p = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
    (p(0.5), p(0.95))
}

/// Writes what the kernels computed on one workload (for the numpy side to check against).
fn write_expected(dir: &std::path::Path, name: &str, bench: &Bench) -> std::io::Result<()> {
    let (a, k, budget, recent) = (&bench.attention, &bench.keys, bench.budget, bench.recent);
    let q = quantize(k, &bench.config).expect("quantize");
    write_npy(
        &dir.join(format!("{name}_expected_hat.npy")),
        &q.dequantize(),
    )?;
    let st = error_stats(k, &q);
    let sc = observation_scores(a, SNAPKV_WINDOW, SNAPKV_POOLING).expect("scores");
    let sc_m = Matrix::new(1, sc.len(), sc.clone()).expect("1 x T");
    write_npy(
        &dir.join(format!("{name}_expected_snapkv_scores.npy")),
        &sc_m,
    )?;
    let h = h2o(a, budget, recent).expect("h2o");
    let s = snapkv(&sc, budget, recent).expect("snapkv");
    let doc = serde_json::json!({
        "budget": budget,
        "recent": recent,
        "stats": {
            "max_abs": st.max_abs,
            "mean_abs": st.mean_abs,
            "rmse": st.rmse,
            "snr_db": st.snr_db,
            "expected_mse": st.expected_mse,
            "worst_bound_use": st.worst_bound_use,
            "compression_ratio": st.compression_ratio,
        },
        "h2o_kept": h.kept,
        "snapkv_kept": s.kept,
    });
    std::fs::write(dir.join(format!("{name}_expected.json")), doc.to_string())
}

/// W3: the trade-off sweep on W1 (64 x 4,096 attention), 32 budgets spaced evenly in `log B`
/// over `1..=T` (`kvlab::lab::sweep_budgets`, as the page's trade-off chart), quality as mass
/// retained on the last 16 rows (the page's default `future`), B=512 and r=64 as in page.mjs.
/// Timed for the issue's 5 policies, with and without values (the output error needs V), and
/// for the page's 7 (plus Random and the Oracle).
fn sweep_w3(json: bool) {
    let (s, t, d) = (64usize, 4096usize, 128usize);
    let a = attention(&AttentionSpec::preset(
        AttentionPreset::HeavyHitters,
        s,
        t,
        7,
    ))
    .expect("valid spec");
    let v = values(&KvSpec {
        tokens: t,
        channels: d,
        seed: 7,
        ..KvSpec::default()
    })
    .expect("valid spec");
    let five = vec![
        Policy::H2oSum,
        Policy::H2oMean,
        Policy::SnapKv {
            window: 32,
            pooling: Pooling::Avg { kernel: 7 },
        },
        Policy::StreamingLlm { sinks: 4 },
        Policy::Tova,
    ];
    let mut seven = five.clone();
    seven.extend([Policy::Random { seed: 7 }, Policy::Oracle]);
    let budgets = kvlab::lab::sweep_budgets(t);
    let (recent, observed) = (64, s - 16);
    let cases: [(&str, &[Policy], Option<&Matrix>); 3] = [
        ("sweep 32 B x 5 policies, mass", &five, None),
        ("sweep 32 B x 5 policies, mass+V", &five, Some(&v)),
        ("sweep 32 B x 7 policies (page)", &seven, None),
    ];
    for (kernel, policies, values) in cases {
        let (p50, p95) = time(10, || {
            black_box(
                sweep(
                    policies,
                    black_box(&budgets),
                    &a,
                    values,
                    None,
                    recent,
                    observed,
                )
                .expect("sweep"),
            );
        });
        if json {
            println!(
                "{{\"workload\":\"W3\",\"kernel\":\"{kernel}\",\"p50_ms\":{p50:.4},\"p95_ms\":{p95:.4}}}"
            );
        } else {
            println!("{:<4} {kernel:<34} {p50:>10.3} {p95:>10.3}", "W3");
        }
    }
}
