// The engine's cost of one control: changes one control N times in headless Chromium and prints
// p50/p95 of the page's `kvlab:compute` (the wasm update) and `kvlab:update` (the round trip,
// the reply written) per change, and `kvlab:later` (the catch-up's `kvlab:later:compute`: the
// comparison deferred while its section is off screen; 0 when nothing was deferred). Quicker
// than page.mjs when comparing two builds on one control, e.g. the same command on two served
// folders, alternating. It prints measurements only; it does not check targets.
//
//   cargo xtask dist
//   python3 -m http.server 8123 --bind 127.0.0.1 --directory dist &
//   KVLAB_URL=http://127.0.0.1:8123/ node benches/control.mjs [--control '#bits']
//       [--values 3,5,4,6] [--n 32]
//       [--query 'tokens=32768&steps=64&channels=128&budget=4096&recent=256']
//
// The default is W2's bits. The control is scrolled to the middle of the viewport first (as
// page.mjs does); each change waits until the page is up to date, off screen too
// (`body[data-busy]`, `body[data-stale]`); the first four changes are a warm-up.

import { chromium } from 'playwright-core';
import { option as opt, servedUrl, CHROMIUM } from './cli.mjs';

const base = servedUrl();
const control = opt('control', '#bits');
const values = opt('values', '3,5,4,6').split(',');
const n = Number(opt('n', '32'));
const query = opt('query', 'tokens=32768&steps=64&channels=128&budget=4096&recent=256');
const WARMUP = 4;

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ['--headless', '--no-sandbox'],
});
const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
await page.goto(`${base}?${query}`);
await page.locator('body[data-state="ready"]').waitFor({ timeout: 60_000 });
await page.evaluate((sel) => document.querySelector(sel).scrollIntoView({ block: 'center' }), control);
await page.locator('body:not([data-busy]):not([data-stale])').waitFor({ timeout: 60_000 });
await page.waitForTimeout(300);

const out = { compute: [], update: [], later: [] };
for (let i = 0; i < n + WARMUP; i++) {
  const r = await page.evaluate(async ([sel, value]) => {
    performance.clearMeasures();
    const c = document.querySelector(sel);
    c.value = value;
    c.dispatchEvent(new Event('input', { bubbles: true }));
    c.dispatchEvent(new Event('change', { bubbles: true }));
    await new Promise((resolve) => {
      const idle = () => !document.body.dataset.busy && !document.body.dataset.stale;
      if (idle()) { resolve(); return; }
      const mo = new MutationObserver(() => { if (idle()) { mo.disconnect(); resolve(); } });
      mo.observe(document.body, { attributes: true, attributeFilter: ['data-busy', 'data-stale'] });
    });
    const first = (name) => performance.getEntriesByName(name)[0]?.duration ?? NaN;
    const error = [...document.querySelectorAll('.control .error')].find((e) => !e.hidden)?.textContent;
    // The catch-up's deferred comparison (when its section is off screen), if any.
    const later = performance.getEntriesByName('kvlab:later:compute').reduce((t, e) => t + e.duration, 0);
    return { compute: first('kvlab:compute'), update: first('kvlab:update'), later, error };
  }, [control, values[i % values.length]]);
  if (r.error) {
    console.error(`the page refused ${control} = ${values[i % values.length]}: ${r.error}`);
    process.exit(1);
  }
  if (i >= WARMUP) {
    out.compute.push(r.compute);
    out.update.push(r.update);
    out.later.push(r.later);
  }
}
await browser.close();

const quantile = (a, p) => {
  const s = [...a].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};
console.log(`${control} over ${values.join(', ')}, ${n} changes (${query}), p50 / p95 ms:`);
for (const [name, a] of Object.entries(out)) {
  console.log(`  kvlab:${name.padEnd(8)} ${quantile(a, 0.5).toFixed(1).padStart(7)} ${quantile(a, 0.95).toFixed(1).padStart(7)}`);
}
