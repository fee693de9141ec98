// Where a control change spends the page's main thread: traces N changes of one control in
// headless Chromium (CDP tracing) and prints, per change, the renderer main thread's time by
// trace event (frames, style, layout, paint, commit, message handling). It prints measurements
// only; it does not check targets.
//
//   cargo xtask dist
//   python3 -m http.server 8123 --bind 127.0.0.1 --directory dist &
//   KVLAB_URL=http://127.0.0.1:8123/ node benches/trace.mjs [--control '#bits'] [--n 10]
//       [--query 'tokens=4096&steps=64&channels=128&budget=512&recent=64'] [--css 'RULE']
//
// The control is scrolled to the middle of the viewport first (as page.mjs does). A range input
// moves between 3 and 4, a select to its next option. `--css` appends one rule to the page's
// stylesheet before the changes (through the CSSOM: the page's CSP refuses inline styles), to
// try a style change without a rebuild, e.g. `--css '.panel { contain: none; }'`.

import { chromium } from 'playwright-core';
import { option as opt, servedUrl, CHROMIUM } from './cli.mjs';

const base = servedUrl();
const control = opt('control', '#bits');
const n = Number(opt('n', '10'));
const query = opt('query', 'tokens=4096&steps=64&channels=128&budget=512&recent=64');
const css = opt('css', null);

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ['--headless', '--no-sandbox', '--disable-gpu'],
});
const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
await page.goto(`${base}?${query}`);
await page.locator('body[data-state="ready"]').waitFor({ timeout: 60_000 });
if (css) {
  await page.evaluate((rule) => document.styleSheets[0].insertRule(rule, document.styleSheets[0].cssRules.length), css);
}
await page.evaluate((sel) => document.querySelector(sel).scrollIntoView({ block: 'center' }), control);
await page.locator('body:not([data-busy]):not([data-stale])').waitFor({ timeout: 60_000 });
await page.waitForTimeout(500);

const cdp = await page.context().newCDPSession(page);
const events = [];
cdp.on('Tracing.dataCollected', (e) => events.push(...e.value));
await cdp.send('Tracing.start', {
  categories: 'devtools.timeline,disabled-by-default-devtools.timeline,blink,cc',
  transferMode: 'ReportEvents',
});
for (let i = 0; i < n; i += 1) {
  await page.evaluate(async (sel) => {
    const el = document.querySelector(sel);
    const options = el.tagName === 'SELECT' ? [...el.options].map((o) => o.value) : null;
    el.value = options ? options[(options.indexOf(el.value) + 1) % options.length] : String(el.value === '3' ? 4 : 3);
    el.dispatchEvent(new Event('input', { bubbles: true }));
    el.dispatchEvent(new Event('change', { bubbles: true }));
  }, control);
  // Until everything, on screen and off, is up to date (the catch-up is in the trace too).
  await page.locator('body:not([data-busy]):not([data-stale])').waitFor({ timeout: 60_000 });
  await page.waitForTimeout(100);
}
const complete = new Promise((resolve) => { cdp.once('Tracing.tracingComplete', resolve); });
await cdp.send('Tracing.end');
await complete;
await browser.close();

const threads = new Map();
for (const e of events) if (e.name === 'thread_name') threads.set(`${e.pid}:${e.tid}`, e.args.name);
const total = new Map();
for (const e of events) {
  if (e.ph !== 'X' || !e.dur || threads.get(`${e.pid}:${e.tid}`) !== 'CrRendererMain') continue;
  total.set(e.name, (total.get(e.name) ?? 0) + e.dur / 1000);
}
const SHOWN = ['ProxyMain::BeginMainFrame', 'UpdateLayoutTree', 'Layout', 'PrePaint', 'Paint', 'Layerize',
  'Commit', 'HandlePostMessage', 'FunctionCall', 'TimerFire', 'FrameLoader::updateForSameDocumentNavigation'];
console.log(`${n} changes of ${control} at ?${query}${css ? ` with ${css}` : ''}`);
console.log('renderer main thread, ms per change (nested events are counted in their parents too):');
for (const name of SHOWN) console.log(`  ${((total.get(name) ?? 0) / n).toFixed(2).padStart(7)}  ${name}`);
