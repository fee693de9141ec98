// The whole pipeline: the served page loads the wasm, draws, and reacts to the "Bits" slider as
// a person would use it (keyboard), with no console error and no request to another origin.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, urlWith, figure, canvasHash, inkShare, screenshot, settle } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test('the Bits slider requantizes and redraws (8 -> 4 bits)', async () => {
  const { page, problems } = await open(browser.context, urlWith({ bits: 8 }));
  const bits = page.getByLabel('Bits', { exact: true });
  assert.equal(await bits.inputValue(), '8');
  const err8 = await figure(page, 'max-abs-error');
  const ratio8 = await figure(page, 'r-quant');
  const hash8 = await canvasHash(page, 'hist');
  assert.equal(await canvasHash(page, 'hist'), hash8, 'the chart is stable while nothing changes');
  assert.ok(await inkShare(page, 'hist') > 0.02, 'the histogram has something drawn on it');
  assert.ok(err8 > 0 && ratio8 > 1, `8 bits: error ${err8}, R_quant ${ratio8}`);

  await bits.focus();
  for (let i = 0; i < 4; i += 1) await page.keyboard.press('ArrowLeft');
  await settle(page);
  assert.equal(await bits.inputValue(), '4');
  const err4 = await figure(page, 'max-abs-error');
  const ratio4 = await figure(page, 'r-quant');
  assert.ok(err4 > err8, `max |x - x_hat| grows from 8 to 4 bits: ${err8} -> ${err4}`);
  assert.ok(ratio4 > ratio8, `R_quant grows from 8 to 4 bits: ${ratio8} -> ${ratio4}`);
  assert.notEqual(await canvasHash(page, 'hist'), hash8, 'the histogram changed');
  const shown = await page.locator('[data-figure="max-abs-error"]').textContent();
  assert.ok(Math.abs(Number(shown) - err4) <= err4 * 0.01, `shown ${shown} ~ ${err4}`);
  // The state is in the URL (4 bits is the default, so the link simply drops bits=8).
  assert.doesNotMatch(page.url(), /bits=/, 'the link no longer says 8 bits');
  await bits.press('ArrowRight');
  await settle(page);
  assert.match(page.url(), /[?&]bits=5\b/, 'the state is in the URL');
  // Bits never change the selection (the note's two levers are independent).
  await screenshot(page, 'pipeline-4-bits');
  assert.deepEqual(problems, [], 'no console errors, failed or foreign requests');
  await page.close();
});

const FIRST_LOAD_CHARTS = ['budget-data', 'budget-model', 'hist', 'groups', 'rows', 'errmap', 'attn', 'scores', 'strip', 'mass', 'strips', 'tradeoff'];

/** The page's start-up marks (benches/page.mjs reads the same), by name: ms from navigation. */
function loadMarks(page) {
  return page.evaluate(() => Object.fromEntries(performance.getEntriesByType('mark')
    .filter((m) => m.name.startsWith('kvlab:load:')).map((m) => [m.name.slice(11), m.startTime])));
}

test('the scale formula\'s numbers give its result in every granularity and scheme', async () => {
  // The numbers are the extremes of the group whose scale is shown (they were the channel's,
  // beside a per-token or per-tensor scale: '44.6 / 7 = 2.302'); a negative minimum is
  // subtracted in parentheses with a minus sign, not as '− -40.4'.
  for (const query of ['', 'granularity=token&group=5', 'granularity=tensor', 'scheme=asym',
    'scheme=asym&granularity=token', 'scheme=asym&granularity=tensor', 'granularity=channel&group=16']) {
    const { page, problems } = await open(browser.context, urlWith(query));
    const { numerator, denominator, result, text } = await page.evaluate(() => {
      const math = document.querySelector('#f-scale math');
      const numbers = [...math.querySelectorAll(':scope > mfrac')].at(-1);
      return {
        numerator: numbers.children[0].textContent,
        denominator: numbers.children[1].textContent,
        // (the number after the fraction's '='; the group's name follows it)
        result: numbers.nextElementSibling.nextElementSibling.textContent,
        text: math.textContent,
      };
    });
    assert.doesNotMatch(text, /[−-]\s*-/, `${query}: no double minus in ${text}`);
    const value = Function(`return (${numerator.replaceAll('−', '-')});`)();
    const ratio = value / Number(denominator);
    const shown = Number(result);
    assert.ok(Math.abs(ratio - shown) <= 2e-3 * Math.abs(shown),
      `${query || 'default'}: ${numerator} / ${denominator} = ${ratio}, shown ${result}`);
    assert.deepEqual(problems, []);
    await page.close();
  }
  // Groups of one value are stored exactly (scale = |x|): said so, with no fraction that would
  // not add up ('16.11 / 7 = 16.11').
  for (const query of ['group=1', 'group=1&scheme=asym', 'granularity=token&group=1']) {
    const { page, problems } = await open(browser.context, urlWith(query));
    const math = page.locator('#f-scale math');
    assert.equal(await math.locator('mfrac').count(), 0, query);
    assert.match(await math.textContent(), /^scale([jt])=\|x\1\|=[\d.]+\((channel|token) \d+, (tokens|channels) (\d+)–\4: every value of this group is equal: kept exactly\)$/, query);
    assert.deepEqual(problems, []);
    await page.close();
  }
});

test('every chart draws something on first load', async () => {
  const { page, problems } = await open(browser.context, urlWith(''));
  for (const chart of FIRST_LOAD_CHARTS) {
    const ink = await inkShare(page, chart);
    assert.ok(ink > 0.01, `${chart} has ink (${(ink * 100).toFixed(1)}%)`);
  }
  // Start-up: the page compiled the module while the worker started, and wrote the first
  // figures while the worker drew the charts (one init request, its first view sent early).
  assert.equal(await page.locator('body').getAttribute('data-wasm-compiled'), 'page');
  const marks = await loadMarks(page);
  for (const name of ['connect', 'engine-started', 'engine-wasmReady', 'engine-computed', 'computed', 'figures', 'drawn']) {
    assert.ok(Number.isFinite(marks[name]), `mark kvlab:load:${name} (${JSON.stringify(marks)})`);
  }
  assert.ok(marks.figures < marks.drawn, `figures written (${marks.figures}) before the charts were all drawn (${marks.drawn})`);
  // The first screen's charts (the budget bars here) are shown before the rest are drawn.
  assert.ok(marks.figures <= marks['first-charts'] && marks['first-charts'] < marks.drawn,
    `first screen's charts (${marks['first-charts']}) between the figures and the rest: ${JSON.stringify(marks)}`);
  // The policy comparison and KIVI (not on the first screen) were computed after those charts.
  assert.ok(marks['engine-computed'] < marks['engine-completed'] && marks['engine-completed'] <= marks.drawn,
    `comparison and KIVI computed after the first screen: ${JSON.stringify(marks)}`);
  assert.equal(await page.locator('#compare-rows tr').count(), 7, 'the comparison table is filled');
  assert.ok(await figure(page, 'kivi-ratio') > 1, 'the KIVI figures are filled');
  assert.ok(marks['engine-started'] <= marks['engine-wasmReady'] && marks['engine-wasmReady'] <= marks['engine-computed'],
    `the engine's timeline is in order: ${JSON.stringify(marks)}`);
  assert.deepEqual(problems, []);
  await page.close();
});

test('a host that serves the wasm without its MIME type: the engine fetches it itself', async () => {
  const context = browser.context;
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
  // (context-wide, so that the worker's own request gets the same answer)
  const wrongType = async (route) => {
    const response = await route.fetch();
    await route.fulfill({ response, headers: { ...response.headers(), 'content-type': 'application/octet-stream' } });
  };
  await context.route('**/*.wasm', wrongType);
  try {
    await page.goto(urlWith({ seed: 1 }));
    await page.locator('body[data-state="ready"]').waitFor({ timeout: 30_000 });
    await settle(page);
    assert.equal(await page.locator('body').getAttribute('data-wasm-compiled'), 'engine',
      'the page could not compile a module served as octet-stream; the engine loaded it');
    assert.equal(await page.locator('body').getAttribute('data-fingerprints'),
      '9d3668cb4b60abd9 2fd6f770a08d8913 5dfb0951971331d8', 'the same data as from a well-configured host');
    for (const chart of FIRST_LOAD_CHARTS) {
      assert.ok(await inkShare(page, chart) > 0.01, `${chart} drawn`);
    }
    assert.deepEqual(problems, []);
  } finally {
    await context.unroute('**/*.wasm', wrongType);
    await page.close();
  }
});

test('generated data is bit-identical to the native build (same fingerprints)', async () => {
  // tests/synth_generators.rs::page_default_data_fingerprints asserts the same values natively.
  const { page, problems } = await open(browser.context, urlWith({ seed: 1 }));
  assert.equal(await page.locator('body').getAttribute('data-fingerprints'),
    '9d3668cb4b60abd9 2fd6f770a08d8913 5dfb0951971331d8');
  assert.deepEqual(problems, []);
  await page.close();
});

/**
 * Acts in the page the moment the page marks `mark` (an init script; the page's CSP allows no
 * eval, so the acts are data): `{ click: selector }` or `{ set: [selector, value] }` (a control
 * set as a key press does: input and change events).
 */
function atMark(page, mark, act) {
  return page.addInitScript(([m, a]) => {
    new PerformanceObserver((list, observer) => {
      if (!list.getEntries().some((e) => e.name === m)) return;
      observer.disconnect();
      window.__actedAt = document.body.dataset.state;
      if (a.click) document.querySelector(a.click).click();
      if (a.set) {
        const el = document.querySelector(a.set[0]);
        el.value = a.set[1];
        el.dispatchEvent(new Event('input', { bubbles: true }));
        el.dispatchEvent(new Event('change', { bubbles: true }));
      }
    }).observe({ type: 'mark' });
  }, [mark, act]);
}

test('a first screen that shows the policy strips but not the trade-off chart draws the strips complete', async () => {
  const { page: probe } = await open(browser.context, urlWith({ seed: 3 }));
  const tops = await probe.evaluate(() => Object.fromEntries(['strips', 'tradeoff']
    .map((c) => [c, document.querySelector(`canvas[data-chart="${c}"]`).getBoundingClientRect().top])));
  const expected = await canvasHash(probe, 'strips');
  await probe.close();
  const height = Math.round(tops.strips + 40);
  assert.ok(height < tops.tradeoff, `the case exists: strips at ${tops.strips}, trade-off at ${tops.tradeoff}`);
  const context = await browser.context.browser()?.newContext({ viewport: { width: 1280, height } })
    ?? null;
  const page = context ? await context.newPage() : await browser.context.newPage();
  if (!context) await page.setViewportSize({ width: 1280, height });
  await page.goto(urlWith({ seed: 3 }));
  await page.locator('body[data-state="ready"]').waitFor({ timeout: 30_000 });
  await settle(page);
  const marks = await loadMarks(page);
  assert.ok(Number.isFinite(marks['first-charts']), 'the first screen was drawn first');
  assert.equal(await canvasHash(page, 'strips'), expected, 'the strips show every policy, as on a normal load');
  await page.close();
  await context?.close();
});

test('the language switched while the first view is drawn: charts and link follow it', async () => {
  const tall = { tokens: 4096, steps: 64, channels: 128, budget: 512, recent: 64, lang: 'en' };
  const page = await browser.context.newPage();
  await atMark(page, 'kvlab:load:upload-checked', { click: '#lang' });
  await page.goto(urlWith(tall));
  await page.locator('body[data-state="ready"]').waitFor({ timeout: 60_000 });
  await settle(page);
  assert.equal(await page.evaluate(() => window.__actedAt), 'loading');
  assert.equal(await page.evaluate(() => document.documentElement.lang), 'zh-CN');
  assert.match(page.url(), /lang=zh/, 'the link keeps the language');
  const { page: zh } = await open(browser.context, urlWith({ ...tall, lang: 'zh' }));
  for (const chart of ['hist', 'budget-data']) {
    assert.equal(await canvasHash(page, chart), await canvasHash(zh, chart), `${chart} drawn with the Chinese labels`);
  }
  await zh.close();
  await page.close();
});

test('a control changed while the first view is completed keeps its new value', async () => {
  const w1 = { tokens: 4096, steps: 64, channels: 128, budget: 512, recent: 64, bits: 4, lang: 'en' };
  const page = await browser.context.newPage();
  await atMark(page, 'kvlab:load:figures', { set: ['#bits', '3'] });
  await page.goto(urlWith(w1));
  await page.locator('body[data-state="ready"]').waitFor({ timeout: 60_000 });
  await settle(page);
  assert.equal(await page.evaluate(() => window.__actedAt), 'loading', 'changed before the page was ready');
  assert.equal(await page.getByLabel('Bits', { exact: true }).inputValue(), '3');
  assert.match(page.url(), /bits=3/);
  const { page: fresh } = await open(browser.context, urlWith({ ...w1, bits: 3 }));
  for (const name of ['max-abs-error', 'r-quant', 'r-overall']) {
    assert.equal(await figure(page, name), await figure(fresh, name), name);
  }
  assert.equal(await canvasHash(page, 'hist'), await canvasHash(fresh, 'hist'));
  await fresh.close();
  await page.close();
});
