// Wasm kernels against native: times kvlab's core kernels (quantize + dequantize + error stats,
// H2O, SnapKV) compiled to WebAssembly in headless Chromium, and sets them beside the native
// figures of the same kernels on the same inputs (`cargo bench --bench core -- --json`), for the
// performance issue's "wasm in Chromium within 2x of native". Both sides run one piece of code,
// benches/kernels/src/kernels.rs, and each kernel returns a checksum of what it computed: the
// script stops with an error when a wasm checksum differs from the native one.
//
//   cargo xtask bench wasm [ARGS]      builds the modules, times native, then runs this script
//
// or by hand, with the modules built and the native figures saved:
//
//   cargo bench --bench core -- --json --no-lab > native.json
//   node benches/wasm.mjs --native native.json [--pkg target/bench-wasm]
//                         [--workloads W1,W2] [--runs N] [--builds simd,scalar] [--json out.json]
//
// --runs N times each kernel N times after its warm-up (default as the native harness: 40 on W1,
// 15 on W2); --native is optional (without it, wasm figures only, no checksum check); --check
// only checks the arguments and that the modules are built.
//
// How it is timed, so that it compares with benches/core.rs: each kernel is called once (its
// checksum), then warmed up (at least 5 calls and 300 ms, so that V8 has tiered the module up
// from its baseline compiler), then called N times with performance.now() around each call,
// p50/p95 as core.rs computes them. The module is served from a made-up origin by the script
// itself (no server, nothing fetched from anywhere else), with the headers that make the page
// cross-origin isolated, so that performance.now() has Chromium's finer resolution (5 us, not
// 100 us). Each build runs in a fresh page. The wasm allocator reuses its memory, so the "fresh
// buffers" row in wasm is not affected by page faults as the native one can be (benches/core.rs,
// "Memory policy").

import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM, flags } from './cli.mjs';

// A potentially trustworthy origin (cross-origin isolation needs a secure context), never
// reached: every request to it is answered by the script (`servePage`).
const ORIGIN = 'http://127.0.0.1:9';
const TARGET_RATIO = 2;
const DEFAULT_RUNS = { W1: 40, W2: 15 };
const BUILDS = { simd: 'pkg-simd', scalar: 'pkg' };

function parseArgs(argv) {
  const o = { pkg: 'target/bench-wasm', native: null, workloads: ['W1', 'W2'], runs: null, builds: ['simd', 'scalar'], json: null, check: false };
  for (const [a, next] of flags(argv)) {
    if (a === '--pkg') o.pkg = next();
    else if (a === '--native') o.native = next();
    else if (a === '--workloads') o.workloads = next().split(',');
    else if (a === '--runs') o.runs = Number(next());
    else if (a === '--builds') o.builds = next().split(',');
    else if (a === '--json') o.json = next();
    else if (a === '--check') o.check = true;
    else if (a === '-h' || a === '--help') {
      console.log('usage: node benches/wasm.mjs [--native FILE] [--pkg DIR] [--workloads W1,W2] '
        + '[--runs N] [--builds simd,scalar] [--json FILE]');
      process.exit(0);
    } else throw new Error(`unknown argument ${a} (see --help)`);
  }
  for (const w of o.workloads) if (!DEFAULT_RUNS[w]) throw new Error(`unknown workload ${w}: use W1, W2`);
  for (const b of o.builds) if (!BUILDS[b]) throw new Error(`unknown build ${b}: use simd, scalar`);
  if (o.runs !== null && !(Number.isInteger(o.runs) && o.runs >= 1)) throw new Error(`--runs ${o.runs}: use a whole number of 1 or more`);
  for (const b of o.builds) {
    const js = path.join(o.pkg, BUILDS[b], 'kvlab_bench_kernels.js');
    if (!existsSync(js)) throw new Error(`${js} is missing: build the modules with \`cargo xtask bench wasm\``);
  }
  return o;
}

/** The native rows of `cargo bench --bench core -- --json`, by "workload kernel". */
function readNative(file) {
  const rows = new Map();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.startsWith('{')) continue;
    const r = JSON.parse(line);
    if (r.checksum !== undefined) rows.set(`${r.workload} ${r.kernel}`, r);
  }
  if (!rows.size) throw new Error(`${file} holds no kernel rows with checksums: it must be the output of \`cargo bench --bench core -- --json\``);
  return rows;
}

/** Serves the bench page and the module's files from `pkg` on ORIGIN, cross-origin isolated. */
async function servePage(context, pkg) {
  const headers = {
    'Cross-Origin-Opener-Policy': 'same-origin',
    'Cross-Origin-Embedder-Policy': 'require-corp',
    'Cache-Control': 'no-store',
  };
  await context.route(`${ORIGIN}/**`, async (route) => {
    const url = new URL(route.request().url());
    if (url.pathname === '/') {
      await route.fulfill({ status: 200, headers, contentType: 'text/html', body: '<!doctype html><title>kvlab kernels</title>' });
      return;
    }
    const file = path.join(pkg, ...url.pathname.split('/').filter((p) => p && p !== '..'));
    if (!existsSync(file)) {
      await route.fulfill({ status: 404, headers, body: 'not found' });
      return;
    }
    const contentType = file.endsWith('.wasm') ? 'application/wasm' : 'text/javascript';
    await route.fulfill({ status: 200, headers, contentType, body: readFileSync(file) });
  });
  // Anything else (there should be nothing) is refused, so the run stays on this machine.
  await context.route((url) => !url.href.startsWith(ORIGIN), (route) => route.abort());
}

/** In the page: loads the module under `dir`, times every kernel of `workload`. */
async function timeKernels({ dir, workload, runs }) {
  const m = await import(`/${dir}/kvlab_bench_kernels.js`);
  await m.default();
  const bench = new m.KernelBench(workload);
  const names = m.KernelBench.kernels();
  const q = (xs, p) => xs[Math.round((xs.length - 1) * p)];
  const rows = [];
  for (let i = 0; i < names.length; i += 1) {
    const checksum = bench.run(i);
    const warm = performance.now();
    for (let n = 0; n < 5 || performance.now() - warm < 300; n += 1) bench.run(i);
    const ms = [];
    for (let n = 0; n < runs; n += 1) {
      const t = performance.now();
      bench.run(i);
      ms.push(performance.now() - t);
    }
    ms.sort((a, b) => a - b);
    rows.push({ kernel: names[i], checksum, p50_ms: q(ms, 0.5), p95_ms: q(ms, 0.95) });
  }
  bench.free();
  return {
    simd: m.KernelBench.simd(),
    isolated: globalThis.crossOriginIsolated,
    rows,
  };
}

const fmt = (x, d = 3) => (Number.isFinite(x) ? x.toFixed(d) : '-');

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  // (`cargo xtask bench wasm` checks the arguments before it spends minutes timing native.)
  if (opts.check) return;
  const native = opts.native ? readNative(opts.native) : null;
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update'],
  });
  const version = browser.version();
  const results = [];
  try {
    for (const build of opts.builds) {
      for (const workload of opts.workloads) {
        const context = await browser.newContext();
        await servePage(context, path.resolve(opts.pkg));
        const page = await context.newPage();
        await page.goto(`${ORIGIN}/`);
        const runs = opts.runs ?? DEFAULT_RUNS[workload];
        const r = await page.evaluate(timeKernels, { dir: BUILDS[build], workload, runs });
        await context.close();
        if ((build === 'simd') !== r.simd) throw new Error(`the ${build} module says simd128 is ${r.simd ? 'on' : 'off'}`);
        if (!r.isolated) throw new Error('the bench page is not cross-origin isolated: performance.now() would be coarse');
        for (const row of r.rows) results.push({ build, workload, runs, ...row });
      }
    }
  } finally {
    await browser.close();
  }

  console.log(`# wasm kernels in Chromium ${version} (headless), against native (${opts.native ?? 'none given'}); load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  console.log('# p50 / p95 ms per call; ratio = wasm p50 / native p50 (target <= 2)');
  const header = ['load', 'kernel'.padEnd(40), 'native p50'.padStart(10), ...opts.builds.flatMap((b) => [`${b} p50`.padStart(11), `${b} p95`.padStart(11), 'ratio'.padStart(6)])];
  console.log(header.join(' '));
  const mismatches = [];
  const verdicts = [];
  for (const workload of opts.workloads) {
    const kernels = [...new Set(results.filter((r) => r.workload === workload).map((r) => r.kernel))];
    for (const kernel of kernels) {
      const n = native?.get(`${workload} ${kernel}`);
      const cells = [workload.padEnd(4), kernel.padEnd(40), fmt(n?.p50_ms).padStart(10)];
      for (const build of opts.builds) {
        const r = results.find((x) => x.build === build && x.workload === workload && x.kernel === kernel);
        const ratio = n ? r.p50_ms / n.p50_ms : NaN;
        cells.push(fmt(r.p50_ms).padStart(11), fmt(r.p95_ms).padStart(11), fmt(ratio, 2).padStart(6));
        if (n && !Object.is(n.checksum, r.checksum)) mismatches.push(`${build} ${workload} ${kernel}: wasm checksum ${r.checksum}, native ${n.checksum}`);
        if (build === opts.builds[0] && n) verdicts.push(ratio <= TARGET_RATIO);
      }
      console.log(cells.join(' '));
    }
  }
  if (native) {
    const passed = verdicts.filter(Boolean).length;
    console.log(`# ${opts.builds[0]} build (the one the page loads when the browser has it) within ${TARGET_RATIO}x of native: ${passed} of ${verdicts.length} kernels${passed === verdicts.length ? ' (pass)' : ' (MISS)'}`);
    if (!mismatches.length) console.log('# checksums: every wasm kernel computed exactly what the native one did');
  }
  if (opts.json) writeFileSync(opts.json, JSON.stringify({ chromium: version, native: opts.native, results }, null, 1));
  if (mismatches.length) {
    console.error(`wasm and native computed different results:\n  ${mismatches.join('\n  ')}`);
    process.exit(1);
  }
}

try {
  await main();
} catch (e) {
  console.error(`benches/wasm.mjs: ${e.message}`);
  process.exit(1);
}
