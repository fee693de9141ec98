// The default view drawn ahead (`cargo xtask dist` writes it into index.html; main.js
// showAhead): a first visit sees the default view's figures and first-screen charts before the
// engine has started, and they are the engine's own (every figure, formula and control value
// compared, in both languages); the engine's charts replace the ones drawn ahead.

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { navigate, launch, open, urlWith, settle } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });
// (a failed test leaves no wasm held back for the next one)
afterEach(async () => { await browser?.context.unrouteAll({ behavior: 'ignoreErrors' }); });

/**
 * Opens `url` in a fresh tab (of `viewport` size, if given) with the wasm held back
 * (context-wide, so the worker's own fetch waits too) until `release()`. Returns
 * `{page, problems, release}`.
 */
async function openHeld(context, url, viewport = null) {
  let release;
  const gate = new Promise((resolve) => { release = resolve; });
  const hold = async (route) => {
    await gate;
    await route.continue();
  };
  await context.route('**/*.wasm', hold);
  const page = await context.newPage();
  if (viewport) await page.setViewportSize(viewport);
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
  page.on('pageerror', (e) => problems.push(e.message));
  // (the document, not the load event: what these tests wait for next is the first paint)
  await navigate(page, url);
  return {
    page,
    problems,
    release: async () => {
      release();
      await page.locator('body[data-state="ready"]').waitFor({ timeout: 30_000 });
      await settle(page);
      await context.unroute('**/*.wasm', hold);
    },
  };
}

/** What the page shows as numbers and settings: figures, formulas, control values. */
function shown(page) {
  return page.evaluate(() => ({
    figures: [...document.querySelectorAll('[data-figure]')]
      .map((el) => `${el.dataset.figure}=${el.dataset.value ?? ''}|${el.textContent}`),
    formulas: [...document.querySelectorAll('.formula')].map((el) => el.textContent),
    controls: [...document.querySelectorAll('[data-key]')].map((el) => `${el.dataset.key}=${el.value}`),
  }));
}

/** The charts drawn ahead behind the canvases now: chart name -> its SVG text. */
function aheadCharts(page) {
  return page.evaluate(() => Object.fromEntries([...document.querySelectorAll('canvas.ahead')]
    .map((c) => [c.dataset.chart, decodeURIComponent(c.style.getPropertyValue('--ahead')
      .replace(/^url\("data:image\/svg\+xml,/, '').replace(/"\)$/, ''))])));
}

const marks = (page) => page.evaluate(() => performance.getEntriesByType('mark')
  .map((m) => m.name).filter((n) => n.startsWith('kvlab:load:')));

for (const [lang, locale, title] of [['en', 'en-US', 'M_KV,final on this data'], ['zh', 'zh-CN', '当前数据上的 M_KV,final']]) {
  test(`${lang}: the default view is on screen before the engine starts, and it is the engine's`, async () => {
    const { context, close } = await launch({ locale });
    try {
      const { page, problems, release } = await openHeld(context, urlWith(''));
      await page.waitForFunction(() => performance.getEntriesByName('kvlab:load:first-painted').length > 0);
      const early = await marks(page);
      assert.ok(early.includes('kvlab:load:ahead'), `drawn ahead: ${early}`);
      assert.ok(!early.includes('kvlab:load:engine-started'), `before the engine started: ${early}`);
      // (the engine's start waits for that paint: its compile took CPU from it)
      assert.ok(early.indexOf('kvlab:load:connect') > early.indexOf('kvlab:load:first-painted'),
        `the engine starts after the first paint: ${early}`);
      assert.equal(await page.locator('body').getAttribute('data-state'), 'loading');
      const before = await shown(page);
      assert.ok(before.figures.filter((f) => !f.endsWith('=|')).length > 40, 'figures are written');
      assert.ok(before.formulas.some((f) => f.includes('KiB')), 'formulas are written');
      const charts = await aheadCharts(page);
      assert.deepEqual(Object.keys(charts).sort(), ['budget-data', 'budget-model']);
      assert.ok(charts['budget-data'].startsWith('<svg') && charts['budget-data'].includes(title),
        `the data's chart in ${lang}`);
      assert.ok(await page.locator('canvas[data-chart="budget-data"]').evaluate(
        (c) => getComputedStyle(c).backgroundImage.startsWith('url("data:image/svg+xml')),
      'the chart drawn ahead is the canvas background at this width (1280 px)');

      await release();
      const after = await shown(page);
      assert.deepEqual(after.controls, before.controls, 'the same settings');
      assert.deepEqual(after.formulas, before.formulas, 'the same formulas');
      assert.deepEqual(after.figures, before.figures, 'the engine shows the figures drawn ahead');
      assert.deepEqual(await aheadCharts(page), {}, 'the engine\'s charts replaced the ones drawn ahead');
      const late = await marks(page);
      assert.ok(late.includes('kvlab:load:engine-charts-painted'), `the engine's first charts: ${late}`);
      assert.deepEqual(problems, []);
    } finally {
      await close();
    }
  });
}

test('a tab opened in the background, which paints no frame until shown, starts its engine at once', async () => {
  const { page, problems } = await open(browser.context, urlWith(''), {
    init: () => Object.defineProperty(Document.prototype, 'hidden', { get: () => true, configurable: true }),
  });
  const order = await marks(page);
  assert.ok(order.includes('kvlab:load:ahead'), `drawn ahead: ${order}`);
  assert.ok(order.indexOf('kvlab:load:connect') < order.indexOf('kvlab:load:first-painted'),
    `connected before any frame: ${order}`);
  assert.deepEqual(problems, []);
  await page.close();
});

test('a link with settings, or a narrow screen, shows no charts drawn ahead', async () => {
  const { context } = browser;
  const { page, problems, release } = await openHeld(context, urlWith({ bits: 3, lang: 'en' }));
  await page.locator('#status').waitFor();
  await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
  assert.equal(await page.locator('canvas.ahead').count(), 0);
  assert.ok(!(await marks(page)).includes('kvlab:load:ahead'));
  await release();
  assert.equal(await page.getByLabel('Bits', { exact: true }).inputValue(), '3');
  await page.close();

  // Only the language in the link: the default view, drawn ahead.
  const zh = await openHeld(context, urlWith({ lang: 'zh' }));
  await zh.page.waitForFunction(() => performance.getEntriesByName('kvlab:load:first-painted').length > 0);
  assert.ok((await aheadCharts(zh.page))['budget-data'].includes('当前数据上的 M_KV,final'));
  await zh.release();
  await zh.page.close();

  // 800 px wide: the budget canvases are 734 px, under 3/4 of the 1002 px drawn ahead.
  const n = await openHeld(context, urlWith(''), { width: 800, height: 1000 });
  await n.page.waitForFunction(() => performance.getEntriesByName('kvlab:load:first-painted').length > 0);
  assert.equal(await n.page.locator('canvas[data-chart="budget-data"]').evaluate(
    (c) => getComputedStyle(c).backgroundImage), 'none', 'scaled under 3/4: left out');
  assert.ok((await marks(n.page)).includes('kvlab:load:ahead'), 'the figures are drawn ahead');
  await n.release();
  await n.page.close();
  assert.deepEqual([...problems, ...zh.problems, ...n.problems], []);
});

test('switching the language before the engine is there words the view drawn ahead again', async () => {
  // (a fresh profile: nothing remembered from the other tests' visits, so the page opens in English)
  const { context, close } = await launch({ locale: 'en-US' });
  try {
    const { page, problems, release } = await openHeld(context, urlWith(''));
    await page.waitForFunction(() => performance.getEntriesByName('kvlab:load:first-painted').length > 0);
    const enText = await page.locator('[data-figure="data-description"]').first().textContent();
    await page.click('#lang');
    assert.ok((await aheadCharts(page))['budget-data'].includes('当前数据上的 M_KV,final'));
    assert.equal(await page.locator('html').getAttribute('lang'), 'zh-CN');
    const zhText = await page.locator('[data-figure="data-description"]').first().textContent();
    await release();
    assert.equal(await page.locator('[data-figure="data-description"]').first().textContent(), zhText,
      'the engine words it as the view drawn ahead did');
    assert.ok(enText.length > 0 && zhText.length > 0);
    assert.deepEqual(problems, []);
  } finally {
    await close(); // (also when it fails: an open browser would keep the test process alive)
  }
});

test('a control set before the engine is there is applied once it is', async () => {
  const { context, close } = await launch({ locale: 'en-US' });
  try {
    const { page, problems, release } = await openHeld(context, urlWith(''));
    await page.waitForFunction(() => performance.getEntriesByName('kvlab:load:first-painted').length > 0);
    const bits = page.getByLabel('Bits', { exact: true });
    assert.equal(await bits.inputValue(), '4', 'the default view drawn ahead');
    await bits.fill('3'); // (the controls are not wired yet: the wasm is held back)
    assert.equal(await page.locator('body').getAttribute('data-state'), 'loading');
    await release();
    assert.equal(await bits.inputValue(), '3', 'the early change survives the engine\'s first view');
    const after = await shown(page);
    await page.waitForFunction(() => new URLSearchParams(window.location.search).get('bits') === '3');

    // The same view as a link to it: every figure, formula and control value.
    const direct = await context.newPage();
    await direct.goto(urlWith({ bits: 3, lang: 'en' }));
    await direct.locator('body[data-state="ready"]').waitFor({ timeout: 30_000 });
    await settle(direct);
    assert.deepEqual(after, await shown(direct), 'the view of ?bits=3');
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

test('when the engine cannot load, the view drawn ahead stays and its controls say they are not live', async () => {
  const { context, close } = await launch({ locale: 'en-US' });
  try {
    await context.route('**/*.wasm', (route) => route.abort('internetdisconnected'));
    const page = await context.newPage();
    await page.goto(urlWith(''));
    await page.locator('body[data-state="failed"]').waitFor({ timeout: 30_000 });
    await assert.doesNotReject(page.locator('#status').getByText('The WebAssembly module could not be loaded').waitFor());
    const view = await shown(page);
    assert.ok(view.figures.filter((f) => !f.endsWith('=|')).length > 40, 'the figures drawn ahead stay');
    const live = await page.evaluate(() => [...document.querySelectorAll('[data-key], #reset, #file, #export-csv, #export-json, [data-png]')]
      .filter((el) => !el.disabled).map((el) => el.id || el.dataset.key || el.dataset.png));
    assert.deepEqual(live, [], 'nothing that needs the engine is left enabled');
    assert.ok(await page.locator('#lang').isEnabled(), 'the language can still be switched');
  } finally {
    await close();
  }
});

test('the charts drawn ahead have the size of the budget canvases at the widest layout', async () => {
  const page = await browser.context.newPage();
  await page.setViewportSize({ width: 1600, height: 1000 });
  await page.goto(urlWith(''));
  await page.locator('body[data-state="ready"]').waitFor({ timeout: 30_000 });
  const size = await page.evaluate(() => JSON.parse(document.getElementById('first-view').textContent).chartSize);
  for (const chart of ['budget-data', 'budget-model']) {
    const box = await page.locator(`canvas[data-chart="${chart}"]`).boundingBox();
    assert.deepEqual([Math.round(box.width), Math.round(box.height)], size,
      `${chart}: its CSS box (xtask/src/first_view.rs CHART_SIZE)`);
  }
  await page.close();
});
