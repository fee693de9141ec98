// Big input never freezes the tab: the engine computes in a Web Worker, the page shows which
// stage is running, and the page's own thread never runs a task of 100 ms or more (Chromium's
// long-task entries, recorded from before the first script runs). And the fallback for browsers
// that cannot draw from a worker: the same engine on the page's thread.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, urlWith, figure, inkShare, settle, screenshot } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** Records every long task (>= 50 ms) of the page's main thread into `window.__longTasks`. */
const RECORD_LONG_TASKS = () => {
  window.__longTasks = [];
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) window.__longTasks.push(Math.round(e.duration));
  }).observe({ type: 'longtask', buffered: true });
};

/** Polls the page until it is ready; returns the progress texts seen and the slowest reply. */
async function watchUntilReady(page, ready) {
  const stages = new Set();
  let slowest = 0;
  for (;;) {
    const t0 = Date.now();
    const [done, shown, text] = await page.evaluate(() => [
      document.body.dataset.state === 'ready' && !document.body.dataset.busy,
      !document.querySelector('#progress').hidden,
      document.querySelector('#progress-text').textContent]);
    slowest = Math.max(slowest, Date.now() - t0);
    if (shown && text) stages.add(text);
    if (done && ready()) return { stages, slowest };
    await new Promise((r) => setTimeout(r, 25));
  }
}

test('T = 131,072 tokens: computed in a worker with progress shown; the page never blocks for 100 ms', { timeout: 240_000 }, async () => {
  const page = await browser.context.newPage();
  await page.addInitScript(RECORD_LONG_TASKS);
  const problems = [];
  page.on('pageerror', (e) => problems.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
  await page.goto(urlWith({ tokens: 131072, steps: 64, channels: 128, budget: 4096, recent: 256, lang: 'en' }));
  // While the worker computes, the page answers: the language switch works at once.
  await page.locator('#progress:not([hidden])').waitFor({ timeout: 60_000 });
  await page.locator('#lang').click();
  const langDuring = await page.evaluate(() => document.documentElement.lang);
  const { stages, slowest } = await watchUntilReady(page, () => true);
  assert.equal(await page.evaluate(() => document.body.dataset.engine), 'worker');
  assert.ok(stages.size >= 3, `the progress box named the stages it ran: ${[...stages].join(' | ')}`);
  assert.ok(slowest < 1000, `the page answered every poll while computing (slowest ${slowest} ms)`);
  assert.equal(await figure(page, 'kept-count'), 4096);
  assert.equal((await page.locator('[data-figure="kept-count"]').first().textContent()).trim(), '4096 / 131072');
  // Back to English for the rest (the switch during the computation took effect).
  assert.equal(langDuring, 'zh-CN', 'the language switched while the worker was computing');
  await page.locator('#lang').click();

  // A change of bits at this size: the figures follow, still without a long task.
  const rq = await figure(page, 'r-quant');
  await page.getByLabel('Bits', { exact: true }).fill('2');
  await settle(page);
  assert.ok(await figure(page, 'r-quant') > rq, 'fewer bits, higher R_quant');
  const longTasks = await page.evaluate(() => window.__longTasks);
  assert.ok(longTasks.every((ms) => ms < 100), `main-thread long tasks (ms): ${longTasks.join(', ') || 'none'}`);
  assert.deepEqual(problems, []);
  await screenshot(page, 'big-131072');
  await page.close();
});

test('without OffscreenCanvas the same engine runs on the page thread and everything works', async () => {
  const page = await browser.context.newPage();
  await page.addInitScript(() => {
    delete window.OffscreenCanvas;
  });
  const problems = [];
  page.on('pageerror', (e) => problems.push(e.message));
  await page.goto(urlWith({ bits: 8, lang: 'en' }));
  await page.locator('body[data-state="ready"]').waitFor({ timeout: 30_000 });
  await settle(page);
  assert.equal(await page.evaluate(() => document.body.dataset.engine), 'page');
  for (const chart of ['hist', 'attn', 'budget-data', 'tradeoff']) {
    assert.ok(await inkShare(page, chart) > 0.01, `${chart} is drawn by the page-thread engine`);
  }
  const err8 = await figure(page, 'max-abs-error');
  await page.getByLabel('Bits', { exact: true }).fill('3');
  await settle(page);
  assert.ok(await figure(page, 'max-abs-error') > err8, 'fewer bits, larger error');
  assert.deepEqual(problems, []);
  await page.close();
});

test('the worker path draws the same pixels as the page-thread path', async () => {
  const hashes = [];
  for (const noWorker of [false, true]) {
    const page = await browser.context.newPage();
    if (noWorker) await page.addInitScript(() => { delete window.OffscreenCanvas; });
    await page.goto(urlWith({ bits: 5, seed: 11, lang: 'en' }));
    await page.locator('body[data-state="ready"]').waitFor({ timeout: 30_000 });
    await settle(page);
    hashes.push(await page.locator('canvas[data-chart="groups"]').evaluate((c) => c.toDataURL('image/png')));
    await page.close();
  }
  assert.equal(hashes[0].length > 1000, true, 'the chart has content');
  assert.equal(hashes[0], hashes[1], 'OffscreenBackend and plotters-canvas draw identical charts');
});
