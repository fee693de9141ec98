#!/usr/bin/env python3
"""Side-by-side: kvlab's native kernels vs the same formulas in numpy, on the same inputs.

    pip install numpy
    python3 benches/numpy_compare.py            # builds and runs `cargo bench --bench core`
    python3 benches/numpy_compare.py --runs 3   # repeat the whole comparison 3 times
    python3 benches/numpy_compare.py --target-cpu native   # kvlab built for this CPU (AVX2...)
    python3 benches/numpy_compare.py --keep-memory   # both sides' malloc keeps freed memory
    python3 benches/numpy_compare.py --no-hugepages  # neither side asks for huge pages

Runs `cargo bench --bench core -- --json --write-inputs DIR`, which times the Rust kernels and
writes their inputs (and their outputs) as .npy/.json. Then it times vectorised numpy
implementations of the same formulas on those files, checks that numpy computes the same answers
as Rust (same de-quantized keys bit for bit, same statistics, same kept tokens), and prints p50
times and the speed-up (numpy p50 / kvlab p50) against the performance issue's 3x target.
Not part of `cargo xtask test`: these are figures, not pass/fail tests (exit code 1 only when
numpy and Rust disagree on an answer).

Kernels (see src/quant.rs and src/select.rs):
  * quantize + dequantize + error stats: per-channel symmetric 4-bit,
    scale_j = max_t |k[t][j]| / (2^(b-1) - 1) (f64, stored f32), q = clip(rint(k / scale), -qmax, qmax)
    (int32 codes, round half to even), k_hat = f32(scale * q), then max|e|, mean|e|, RMSE, SNR,
    the expected MSE scale^2/12 and the worst use of the bound |e| <= scale/2.
  * H2O: score_i = sum_t a[t][i] (f64, stored f32); keep recent [T-r, T) and the top B-r of
    [0, T-r) (ties to the lower index); output kept, dropped and roles as Rust's Selection does.
  * SnapKV: scores over the last w=32 rows, the prefix [0, T-w) average-pooled with k=7
    (stride 1, zero padding counted), then the same rule.
The numpy side does no input validation (Rust's kernels check every value is finite), which
favours numpy slightly. Both sides are single-threaded (no BLAS call is involved).

The "fresh" rows allocate their outputs on every call (W2: 16 MB of codes and 16 MB of k_hat on
the Rust side). glibc's malloc hands memory that large back to the kernel when it is freed, so
each call pays the page faults of fresh memory again. numpy asks Linux for transparent huge
pages on every array of 4 MiB or more (madvise; on by default since numpy 1.20), so a fresh
16 MiB array costs it 8 page faults instead of 4,096. The Rust benchmark's allocator does the
same by default (benches/core.rs, NumpyLikeAlloc), so both sides run under one memory policy.
`--no-hugepages` turns it off on both sides (numpy's _set_madvise_hugepage(False), the
benchmark's --no-hugepages). `--keep-memory` runs both sides (this script, hence numpy, and the
Rust benchmark it starts) with malloc told to keep freed memory (glibc's MALLOC_MMAP_THRESHOLD_,
MALLOC_TRIM_THRESHOLD_ and MALLOC_TOP_PAD_), which is what a long-running program that
quantizes repeatedly sees; the "reused" rows show the same without any tuning.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

TARGET = 3.0  # the target: native at least 3x faster than numpy

# glibc malloc settings for --keep-memory: large blocks from the heap (not their own mappings),
# and the heap not trimmed when they are freed.
KEEP_MEMORY = {
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(256 << 20),
    "MALLOC_TOP_PAD_": str(64 << 20),
}


def timeit(f, runs):
    """p50 and p95 (ms) of `runs` calls after one warm-up, like benches/core.rs."""
    f()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t) * 1e3)
    ts.sort()
    p = lambda q: ts[round((len(ts) - 1) * q)]  # noqa: E731
    return p(0.5), p(0.95)


# --------------------------------------------------------------------------------------------
# Quantization (src/quant.rs: quantize, Quantized::dequantize, error_stats)

def channel_scales(k, bits):
    """Per-channel symmetric scales as Rust stores them: (qmax, constant channels, f32 scales,
    the same as f64, and the f64 divisor with 0 replaced by 1)."""
    qmax = 2 ** (bits - 1) - 1
    mn = k.min(axis=0)
    mx = k.max(axis=0)
    const = mn == mx
    scale = (np.maximum(np.abs(mn), np.abs(mx)).astype(np.float64) / qmax).astype(np.float32)
    if const.any():  # a constant channel is stored exactly: scale |c|, codes sign(x)
        scale[const] = np.abs(mn[const])
    tiny = (scale == 0) & ~const  # an underflowing scale becomes the smallest positive f32
    if tiny.any():
        scale[tiny] = np.float32(1e-45)
    s64 = scale.astype(np.float64)
    return qmax, const, scale, s64, np.where(s64 == 0, 1.0, s64)


def error_stats(k, scale, s64, col_max, sum_abs, sum_sq, sig_sq, bits):
    """The statistics Rust's error_stats reports, from the per-channel maxima and the sums."""
    n = k.size
    half = s64 / 2
    pos = half > 0
    n_codes_bytes = -(-n * bits // 8)
    return {
        "max_abs": float(col_max.max()),
        "mean_abs": float(sum_abs / n),
        "rmse": float(np.sqrt(sum_sq / n)),
        "snr_db": float("inf") if sum_sq == 0 else float(10 * np.log10(sig_sq / sum_sq)),
        # every element of channel j has scale_j: the mean of scale^2/12 over elements
        "expected_mse": float((s64 * s64 / 12).sum() * k.shape[0] / n),
        # max over elements of |e| / (scale/2) = per channel (max |e|) / (scale/2)
        "worst_bound_use": float((col_max[pos] / half[pos]).max()) if pos.any() else 0.0,
        "compression_ratio": n * 2 / (n_codes_bytes + scale.size * 2),
    }


def quant_dequant_stats(k, bits=4):
    qmax, const, scale, s64, safe = channel_scales(k, bits)
    q = np.rint(k / safe)  # f32 / f64 -> f64, round half to even
    np.clip(q, -qmax, qmax, out=q)
    if const.any():
        q[:, const] = np.sign(k[:, const])
    codes = q.astype(np.int32)
    hat = (codes * s64).astype(np.float32)
    # error statistics (f64), hat read back as f32 like Rust
    err = np.subtract(k, hat, dtype=np.float64)
    a = np.abs(err)
    col_max = a.max(axis=0)
    sum_sq = (err * err).sum()
    sig_sq = np.square(k, dtype=np.float64).sum()
    stats = error_stats(k, scale, s64, col_max, a.sum(), sum_sq, sig_sq, bits)
    return codes, scale, hat, stats


def quant_buffers(k):
    """The tensor-sized arrays quant_dequant_stats_into writes into (allocated once)."""
    return {
        "f64": np.empty(k.shape, np.float64),
        "err": np.empty(k.shape, np.float64),
        "codes": np.empty(k.shape, np.int32),
        "hat": np.empty(k.shape, np.float32),
    }


def quant_dequant_stats_into(k, buf, bits=4):
    """quant_dequant_stats with every tensor-sized result written into `buf` (numpy's `out=`),
    the counterpart of kvlab's quantize_reusing + dequantize_into: same operations, same
    answers, no large allocation per call."""
    qmax, const, scale, s64, safe = channel_scales(k, bits)
    q, err, codes, hat = buf["f64"], buf["err"], buf["codes"], buf["hat"]
    np.divide(k, safe, out=q)
    np.rint(q, out=q)
    np.clip(q, -qmax, qmax, out=q)
    if const.any():
        q[:, const] = np.sign(k[:, const])
    np.copyto(codes, q, casting="unsafe")
    np.multiply(codes, s64, out=q)
    np.copyto(hat, q, casting="same_kind")
    np.subtract(k, hat, out=err, dtype=np.float64)
    np.abs(err, out=q)
    col_max = q.max(axis=0)
    sum_abs = q.sum()
    np.multiply(err, err, out=err)
    sum_sq = err.sum()
    np.square(k, out=q, dtype=np.float64)
    sig_sq = q.sum()
    stats = error_stats(k, scale, s64, col_max, sum_abs, sum_sq, sig_sq, bits)
    return codes, scale, hat, stats


# --------------------------------------------------------------------------------------------
# Selection (src/select.rs: h2o, observation_scores, snapkv)

NONE, RECENT, HEAVY = 0, 1, 2


def heavy_plus_recent(scores, budget, recent):
    """Recent [T-r, T) plus the top (B-r)^+ of [0, T-r), ties to the lower index; only the last
    B of the recent window when r > B. Returns (kept, dropped, roles of kept)."""
    t = scores.shape[0]
    recent_start = max(0, t - recent)
    roles = np.zeros(t, dtype=np.int8)
    roles[max(recent_start, t - budget):] = RECENT
    n_heavy = max(0, budget - (t - recent_start))
    if n_heavy >= recent_start:
        roles[:recent_start] = HEAVY
    elif n_heavy > 0:
        older = scores[:recent_start]
        kth = np.partition(older, recent_start - n_heavy)[recent_start - n_heavy]  # n-th largest
        above = np.flatnonzero(older > kth)
        ties = np.flatnonzero(older == kth)[: n_heavy - above.size]
        roles[above] = HEAVY
        roles[ties] = HEAVY
    kept = np.flatnonzero(roles)
    dropped = np.flatnonzero(roles == NONE)
    return kept, dropped, roles[kept]


def h2o(a, budget, recent):
    scores = a.sum(axis=0, dtype=np.float64).astype(np.float32)
    return heavy_plus_recent(scores, budget, recent)


def observation_scores(a, window=32, kernel=7):
    steps, t = a.shape
    s = a[steps - window:].sum(axis=0, dtype=np.float64).astype(np.float32)
    n = max(0, t - window)
    half = kernel // 2
    # running sum in f64 over the zero-padded prefix: win[i] = sum s[i-half ..= i+half]
    padded = np.zeros(n + 2 * half + 1, dtype=np.float64)
    np.cumsum(s[:n], dtype=np.float64, out=padded[half + 1: n + half + 1])
    padded[n + half + 1:] = padded[n + half]
    s[:n] = ((padded[kernel:kernel + n] - padded[:n]) / kernel).astype(np.float32)
    return s


def snapkv(a, budget, recent, window=32, kernel=7):
    return heavy_plus_recent(observation_scores(a, window, kernel), budget, recent)


# --------------------------------------------------------------------------------------------

def check(w, d, a, k):
    """numpy's answers vs Rust's on workload `w`; returns a list of disagreements."""
    exp = json.load(open(os.path.join(d, f"{w}_expected.json")))
    b, r = exp["budget"], exp["recent"]
    bad = []
    _, _, hat, stats = quant_dequant_stats(k)
    want_hat = np.load(os.path.join(d, f"{w}_expected_hat.npy"))
    bits_differ = np.count_nonzero(hat.view(np.uint32) != want_hat.view(np.uint32))
    if bits_differ:
        bad.append(f"{w}: de-quantized keys differ bitwise in {bits_differ} elements "
                   f"({np.count_nonzero(hat != want_hat)} by value; the rest are -0.0 vs 0.0)")
    for key, want in exp["stats"].items():
        got = stats[key]
        if not np.isclose(got, want, rtol=1e-9, atol=0):
            bad.append(f"{w}: {key} numpy {got!r} vs rust {want!r}")
    scores = observation_scores(a)
    want_scores = np.load(os.path.join(d, f"{w}_expected_snapkv_scores.npy")).ravel()
    if not np.array_equal(scores, want_scores):
        bad.append(f"{w}: SnapKV scores differ at {np.count_nonzero(scores != want_scores)} tokens "
                   f"(max |diff| {np.abs(scores - want_scores).max():.3g})")
    for name, (kept, dropped, roles) in [("h2o", h2o(a, b, r)), ("snapkv", snapkv(a, b, r))]:
        want = np.asarray(exp[f"{name}_kept"])
        if not np.array_equal(kept, want):
            bad.append(f"{w}: {name} keeps {np.setdiff1d(kept, want).size} tokens Rust does not")
        if kept.size + dropped.size != a.shape[1] or roles.size != kept.size:
            bad.append(f"{w}: {name} kept/dropped/roles do not partition 0..T")
    return bad


def cargo_env(root, target_cpu):
    """The environment for `cargo bench`: with a target CPU, RUSTFLAGS=-C target-cpu=... and a
    target directory of its own (so the default build's artifacts are not rebuilt)."""
    env = dict(os.environ)
    if target_cpu:
        env["RUSTFLAGS"] = (env.get("RUSTFLAGS", "") + f" -C target-cpu={target_cpu}").strip()
        env["CARGO_TARGET_DIR"] = os.path.join(root, "target", f"cpu-{target_cpu}")
    return env


def one_run(root, quiet, target_cpu=None, hugepages=True):
    with tempfile.TemporaryDirectory() as d:
        cmd = ["cargo", "bench", "--quiet", "--bench", "core", "--", "--json"]
        if not hugepages:
            cmd.append("--no-hugepages")
        cmd += ["--write-inputs", d]
        env = cargo_env(root, target_cpu)
        if not quiet:
            prefix = f"RUSTFLAGS='{env['RUSTFLAGS']}' " if target_cpu else ""
            print("$ " + prefix + " ".join(cmd[:-1]) + " DIR", file=sys.stderr)
        out = subprocess.run(cmd, cwd=root, check=True, stdout=subprocess.PIPE, text=True,
                             env=env).stdout
        rust = {}
        for line in out.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                kernel = r["kernel"] if r["workload"] == "W3" else r["kernel"].split()[0]
                rust[(r["workload"], kernel)] = (r["p50_ms"], r["p95_ms"])
        rows, problems = [], []
        for w in ["W1", "W2"]:
            a = np.load(os.path.join(d, f"{w}_attention.npy"))
            k = np.load(os.path.join(d, f"{w}_keys.npy"))
            problems += check(w, d, a, k)
            t = a.shape[1]
            runs = 15 if t > 10000 else 40
            exp = json.load(open(os.path.join(d, f"{w}_expected.json")))
            b, r = exp["budget"], exp["recent"]
            buf = quant_buffers(k)
            c0, _, h0, st0 = quant_dequant_stats(k)
            c1, _, h1, st1 = quant_dequant_stats_into(k, buf)
            if not (np.array_equal(c0, c1) and np.array_equal(h0.view(np.uint32), h1.view(np.uint32))
                    and st0 == st1):
                problems.append(f"{w}: numpy's two quantization versions disagree")
            py = {
                "quantize+dequantize+stats": timeit(lambda: quant_dequant_stats(k), runs),
                # both sides writing into buffers kept between calls
                "quantize+dequantize+stats/reused": timeit(
                    lambda: quant_dequant_stats_into(k, buf), runs),
                "h2o": timeit(lambda: h2o(a, b, r), runs),
                "snapkv": timeit(lambda: snapkv(a, b, r), runs),
            }
            for name, (np50, np95) in py.items():
                r50, r95 = rust[(w, name)]
                rows.append((w, name, r50, r95, np50, np95))
        extra = {key: v for key, v in rust.items() if key[0] not in ("W1", "W2")}
        return rows, problems, extra


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1, help="repeat the whole comparison N times")
    ap.add_argument("--target-cpu", metavar="CPU",
                    help="build kvlab's side with -C target-cpu=CPU (e.g. native: AVX2/AVX-512 "
                         "where the machine has them, as numpy's own runtime dispatch uses); "
                         "default: the baseline x86-64 target (SSE2)")
    ap.add_argument("--keep-memory", action="store_true",
                    help="run both sides with glibc's malloc keeping freed memory (see above)")
    ap.add_argument("--no-hugepages", action="store_true",
                    help="neither side advises huge pages for large arrays (numpy's default "
                         "and the benchmark's is to advise them; see above)")
    args = ap.parse_args()
    (getattr(np, "_core", None) or np.core).multiarray._set_madvise_hugepage(not args.no_hugepages)
    if args.keep_memory and any(os.environ.get(k) != v for k, v in KEEP_MEMORY.items()):
        # malloc reads its settings when the process starts: start again with them, so that
        # numpy (this process) and the Rust benchmark (its child) both run with them.
        os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, **KEEP_MEMORY})
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    print(f"numpy {np.__version__}, python {sys.version.split()[0]}; kvlab built for "
          + (f"-C target-cpu={args.target_cpu}" if args.target_cpu else "the baseline target")
          + ("; both sides with malloc keeping freed memory ("
             + " ".join(f"{k}={v}" for k, v in KEEP_MEMORY.items()) + ")"
             if args.keep_memory else "")
          + ("; neither side advises huge pages" if args.no_hugepages
             else "; both sides advise huge pages for arrays of 4 MiB or more (numpy's default)"))
    problems = []
    best = {}
    for i in range(args.runs):
        rows, bad, extra = one_run(root, quiet=i > 0, target_cpu=args.target_cpu,
                                   hugepages=not args.no_hugepages)
        problems += bad
        for w, name, r50, _, n50, _ in rows:
            b = best.setdefault((w, name), [r50, n50])
            b[0], b[1] = min(b[0], r50), min(b[1], n50)
        print(f"\nrun {i + 1}/{args.runs}")
        print(f"{'load':<4} {'kernel':<32} {'kvlab p50':>10} {'p95':>8} {'numpy p50':>10} {'p95':>8}"
              f" {'speed-up':>9}  target >= {TARGET:g}x")
        for w, name, r50, r95, n50, n95 in rows:
            ratio = n50 / r50
            verdict = "pass" if ratio >= TARGET else "MISS"
            print(f"{w:<4} {name:<32} {r50:>10.3f} {r95:>8.3f} {n50:>10.3f} {n95:>8.3f}"
                  f" {ratio:>8.1f}x  {verdict}")
        for (w, name), (r50, r95) in extra.items():
            print(f"{w:<4} {name:<36} {r50:>8.3f} {r95:>8.3f}  (native only)")
    if args.runs > 1:
        # On a shared machine the lowest p50 of each side over the runs is the least disturbed.
        print(f"\nbest p50 of {args.runs} runs (each side's lowest)")
        print(f"{'load':<4} {'kernel':<32} {'kvlab p50':>10} {'numpy p50':>10} {'speed-up':>9}")
        for (w, name), (r50, n50) in best.items():
            verdict = "pass" if n50 / r50 >= TARGET else "MISS"
            print(f"{w:<4} {name:<32} {r50:>10.3f} {n50:>10.3f} {n50 / r50:>8.1f}x  {verdict}")
    if problems:
        print("\nnumpy and Rust DISAGREE:")
        for p in problems:
            print("  " + p)
        return 1
    print("\nnumpy and Rust agree on every answer (hat bit for bit, stats to 1e-9, kept sets, "
          "SnapKV scores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
