#!/usr/bin/env python3
"""Side-by-side: kvlab's native kernels vs the same formulas in numpy, on the same inputs.

    pip install numpy
    python3 benches/numpy_compare.py

Runs `cargo bench --bench core -- --json --write-inputs DIR` (which also writes the inputs as
.npy), then times numpy implementations of the same formulas on those files and prints
p50 times and the speed-up (numpy p50 / kvlab p50). Not part of `cargo xtask test`.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def timeit(f, runs):
    f()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def quant_sym_per_channel(k, bits=4):
    qmax = 2 ** (bits - 1) - 1
    scale = (np.abs(k).max(axis=0).astype(np.float64) / qmax).astype(np.float32)
    safe = np.where(scale == 0, 1, scale).astype(np.float64)
    q = np.clip(np.round(k / safe), -qmax, qmax)
    hat = (scale * q).astype(np.float32)
    err = k.astype(np.float64) - hat
    a = np.abs(err)
    stats = (a.max(), a.mean(), np.sqrt((err * err).mean()),
             10 * np.log10((k.astype(np.float64) ** 2).sum() / max((err * err).sum(), 1e-300)))
    return hat, stats


def heavy_plus_recent(scores, budget, recent):
    t = scores.shape[0]
    start = max(0, t - recent)
    n_heavy = max(0, budget - (t - start))
    older = scores[:start]
    if n_heavy > 0:
        # stable tie-break to lower index: argsort of -score is stable with kind='stable'
        heavy = np.argpartition(-older, n_heavy - 1)[:n_heavy] if n_heavy < start else np.arange(start)
    else:
        heavy = np.array([], dtype=np.int64)
    kept = np.union1d(heavy, np.arange(start, t))
    return kept[-budget:]


def h2o(a, budget, recent):
    return heavy_plus_recent(a.sum(axis=0, dtype=np.float64), budget, recent)


def snapkv(a, budget, recent, w=32, k=7):
    s = a[-w:].sum(axis=0, dtype=np.float64)
    prefix = s[: s.shape[0] - w]
    pooled = np.convolve(prefix, np.ones(k) / k, mode="same")
    s = np.concatenate([pooled, s[s.shape[0] - w:]])
    return heavy_plus_recent(s, budget, recent)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run(
            ["cargo", "bench", "--quiet", "--bench", "core", "--", "--json", "--write-inputs", d],
            cwd=root, check=True, capture_output=True, text=True).stdout
        rust = {}
        for line in out.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                rust[(r["workload"], r["kernel"].split()[0])] = r["p50_ms"]
        print(f"{'load':<4} {'kernel':<28} {'kvlab ms':>10} {'numpy ms':>10} {'speed-up':>9}")
        for w in ["W1", "W2"]:
            a = np.load(os.path.join(d, f"{w}_attention.npy"))
            k = np.load(os.path.join(d, f"{w}_keys.npy"))
            t = a.shape[1]
            runs = 15 if t > 10000 else 40
            b, r = t // 8, t // 32
            py = {
                "quantize+dequantize+stats": timeit(lambda: quant_sym_per_channel(k), runs),
                "h2o": timeit(lambda: h2o(a, b, r), runs),
                "snapkv": timeit(lambda: snapkv(a, b, r), runs),
            }
            for name, ms in py.items():
                rk = rust[(w, name)]
                print(f"{w:<4} {name:<28} {rk:>10.3f} {ms:>10.3f} {ms / rk:>8.1f}x")


if __name__ == "__main__":
    sys.exit(main())
