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

/**
 * Records the main thread's long tasks (>= 50 ms) into `window.__tasks` as [start, end], and
 * when the engine starts computing (the progress box first appears) as `window.__computing`.
 * The page's own start-up (parsing its modules, the first layout of the document) comes before
 * that and is not a computation; benches/page.mjs measures it as cold load.
 */
const RECORD_LONG_TASKS = () => {
  window.__tasks = [];
  window.__computing = Infinity;
  window.__acting = []; // windows in which the test itself acts on the page
  const watch = new MutationObserver(() => {
    const box = document.querySelector('#progress');
    if (box && !box.hidden) {
      window.__computing = performance.now();
      watch.disconnect();
    }
  });
  watch.observe(document, { attributes: true, subtree: true, attributeFilter: ['hidden'] });
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) window.__tasks.push([e.startTime, e.startTime + e.duration]);
  }).observe({ type: 'longtask', buffered: true });
};

/** Durations of the long tasks since the engine started computing, outside the test's acts. */
function longTasksWhileComputing(page) {
  return page.evaluate(() => window.__tasks
    .filter(([a, b]) => b > window.__computing && !window.__acting.some(([x, y]) => a < y && b > x))
    .map(([a, b]) => Math.round(b - a)));
}

/** Runs `action`, recording its time (until two frames later) as the test's own. */
async function acting(page, action) {
  const start = await page.evaluate(() => performance.now());
  await action();
  await page.evaluate((a) => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => {
    window.__acting.push([a, performance.now()]);
    done();
  }))), start);
}

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
  // While the worker computes, the page answers: the language switch works at once. (Switching
  // re-lays out the whole page, ~50 ms here and more without a CJK font: that is the switch's
  // own cost, so its window is left out of the long-task check below.)
  await page.locator('#progress:not([hidden])').waitFor({ timeout: 60_000 });
  await acting(page, () => page.locator('#lang').click());
  const langDuring = await page.evaluate(() => document.documentElement.lang);
  const { stages, slowest } = await watchUntilReady(page, () => true);
  assert.equal(await page.evaluate(() => document.body.dataset.engine), 'worker');
  assert.ok(stages.size >= 3, `the progress box named the stages it ran: ${[...stages].join(' | ')}`);
  assert.ok(slowest < 1000, `the page answered every poll while computing (slowest ${slowest} ms)`);
  assert.equal(await figure(page, 'kept-count'), 4096);
  assert.equal((await page.locator('[data-figure="kept-count"]').first().textContent()).trim(), '4096 / 131072');
  // Back to English for the rest (the switch during the computation took effect).
  assert.equal(langDuring, 'zh-CN', 'the language switched while the worker was computing');
  await acting(page, () => page.locator('#lang').click());

  // A change of bits at this size: the figures follow, still without a long task.
  const rq = await figure(page, 'r-quant');
  await page.getByLabel('Bits', { exact: true }).fill('2');
  await settle(page);
  assert.ok(await figure(page, 'r-quant') > rq, 'fewer bits, higher R_quant');
  const longTasks = await longTasksWhileComputing(page);
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

test('Stop ends a long computation and puts the last good view back; the page keeps working', { timeout: 120_000 }, async () => {
  const page = await browser.context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
  await page.goto(urlWith({ bits: 5, lang: 'en' }));
  await page.locator('body[data-state="ready"]').waitFor({ timeout: 30_000 });
  await settle(page);
  const tokens = page.getByLabel('Tokens T', { exact: true });
  const before = {
    tokens: await tokens.inputValue(),
    kept: await figure(page, 'kept-count'),
    err: await figure(page, 'max-abs-error'),
    url: page.url(),
  };
  // A change that takes seconds: T = 131,072 (typed, then Enter, as a person would).
  await tokens.fill('131072');
  await tokens.press('Enter');
  await tokens.dispatchEvent('change');
  await page.locator('#progress:not([hidden])').waitFor({ timeout: 30_000 });
  const t0 = Date.now();
  await page.locator('#stop').click();
  // stop() says so when the last view is back.
  await page.locator('#url-warnings', { hasText: 'Stopped' }).waitFor({ timeout: 30_000 });
  await settle(page);
  const took = Date.now() - t0;
  assert.ok(took < 10_000, `back to the last view in ${took} ms`);
  const status = await page.evaluate(() => [document.querySelector('#status').textContent,
    [...document.querySelectorAll('.control .error')].map((e) => e.textContent).join(' | ')]);
  assert.equal(await tokens.inputValue(), before.tokens, `the T control shows the last good value (status, errors: ${status})`);
  assert.equal(await figure(page, 'kept-count'), before.kept);
  assert.equal(await figure(page, 'max-abs-error'), before.err);
  assert.equal(page.url(), before.url, 'the link still describes the view on screen');
  assert.match(await page.locator('#url-warnings').textContent(), /Stopped/);
  assert.ok(await inkShare(page, 'attn') > 0.01, 'the charts are drawn again (on new canvases)');
  // Still alive: a control change recomputes.
  await page.getByLabel('Bits', { exact: true }).fill('3');
  await settle(page);
  assert.ok(await figure(page, 'max-abs-error') > before.err, 'fewer bits, larger error');
  assert.deepEqual(problems, []);
  await page.close();
});

test('Stop during a slow first load shows the default view instead and says so', { timeout: 120_000 }, async () => {
  const page = await browser.context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(e.message));
  await page.goto(urlWith({ tokens: 131072, lang: 'en' }));
  await page.locator('#progress:not([hidden])').waitFor({ timeout: 30_000 });
  await page.locator('#stop').click();
  await page.locator('body[data-state="ready"]').waitFor({ timeout: 30_000 });
  await settle(page);
  assert.notEqual(await page.getByLabel('Tokens T', { exact: true }).inputValue(), '131072');
  assert.match(await page.locator('#url-warnings').textContent(), /Stopped/);
  assert.doesNotMatch(page.url(), /tokens=131072/, 'the link no longer asks for the slow view');
  assert.ok(await inkShare(page, 'hist') > 0.01);
  assert.deepEqual(problems, []);
  await page.close();
});

test('Stop after the first figures are written, while the charts are drawn: the default view, wired once', { timeout: 120_000 }, async () => {
  const page = await browser.context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
  // Presses Stop the moment the first view's figures are on the page (the worker is then
  // drawing the charts: ~0.3 s at this size).
  await page.addInitScript(() => {
    new PerformanceObserver((list, observer) => {
      if (list.getEntries().some((m) => m.name === 'kvlab:load:figures')) {
        observer.disconnect();
        window.__stoppedAt = document.body.dataset.state;
        document.querySelector('#stop').click();
      }
    }).observe({ type: 'mark' });
  });
  await page.goto(urlWith({ tokens: 32768, lang: 'en' }));
  await page.locator('body[data-state="ready"]').waitFor({ timeout: 60_000 });
  await settle(page);
  assert.equal(await page.evaluate(() => window.__stoppedAt), 'loading', 'Stop was pressed before the page was ready');
  assert.equal(await page.getByLabel('Tokens T', { exact: true }).inputValue(), '512', 'the default view');
  assert.match(await page.locator('#url-warnings').textContent(), /Stopped/);
  assert.doesNotMatch(page.url(), /tokens=32768/);
  for (const chart of ['budget-data', 'hist', 'attn']) assert.ok(await inkShare(page, chart) > 0.01, `${chart} drawn`);
  // The controls were wired and the presets listed once: a fresh page has the same options,
  // and one bits change recomputes once.
  const options = await page.locator('#model option').count();
  const fresh = await browser.context.newPage();
  await fresh.goto(urlWith({ lang: 'en' }));
  await fresh.locator('body[data-state="ready"]').waitFor({ timeout: 30_000 });
  assert.equal(options, await fresh.locator('#model option').count(), 'model presets listed once');
  await fresh.close();
  const before = await figure(page, 'max-abs-error');
  await page.evaluate(() => performance.clearMeasures('kvlab:compute'));
  await page.getByLabel('Bits', { exact: true }).fill('3');
  await settle(page);
  assert.notEqual(await figure(page, 'max-abs-error'), before, 'a control change still recomputes');
  assert.equal(await page.evaluate(() => performance.getEntriesByName('kvlab:compute').length), 1,
    'one request per change (listeners added once)');
  assert.deepEqual(problems, []);
  await page.close();
});

test('the simd128 and scalar wasm builds compute identical figures and data', async () => {
  const views = [];
  for (const scalar of [false, true]) {
    const page = await browser.context.newPage();
    if (scalar) {
      await page.addInitScript(() => {
        WebAssembly.validate = () => false; // as in a browser without SIMD
      });
    }
    await page.goto(urlWith({ bits: 3, seed: 7, lang: 'en' }));
    await page.locator('body[data-state="ready"]').waitFor({ timeout: 30_000 });
    await settle(page);
    const read = () => page.evaluate(() => ({
      figures: Object.fromEntries([...document.querySelectorAll('[data-figure]')]
        .map((e) => [e.dataset.figure, e.dataset.value])),
      table: [...document.querySelectorAll('#compare-rows td')].map((td) => td.dataset.value),
    }));
    const first = await read();
    await page.getByLabel('Scheme', { exact: true }).selectOption('asymmetric');
    await settle(page);
    views.push({
      build: await page.evaluate(() => document.body.dataset.wasm),
      fingerprints: await page.evaluate(() => document.body.dataset.fingerprints),
      first,
      second: await read(),
    });
    await page.close();
  }
  assert.equal(views[0].build, 'simd128', 'Chromium gets the SIMD build');
  assert.equal(views[1].build, 'scalar', 'without SIMD the scalar build');
  assert.equal(views[0].fingerprints, views[1].fingerprints);
  assert.ok(Object.keys(views[0].first.figures).length > 30, 'many figures compared');
  assert.deepEqual(views[0].first, views[1].first, 'same figures and comparison table');
  assert.deepEqual(views[0].second, views[1].second, 'same after a scheme change');
  assert.notDeepEqual(views[0].first.figures, views[0].second.figures, 'the scheme change changed figures');
});
