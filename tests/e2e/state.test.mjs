// URL state, history, language, embed mode and the last view surviving a reload.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, urlWith, figure, figureText, setNumber, choose, settle, expandRanges, inkShare } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const FIGURES = ['kept-count', 'r-token', 'r-quant', 'r-overall', 'max-abs-error', 'rmse', 'bytes-final'];

async function allFigures(page) {
  const out = {};
  for (const f of FIGURES) out[f] = await figure(page, f);
  out['kept-indices'] = await figureText(page, 'kept-indices');
  return out;
}

test('a link reproduces the view exactly (controls, generator and seed)', async () => {
  const { page, problems } = await open(browser.context, urlWith(''));
  await choose(page, 'Pattern', 'needle');
  await setNumber(page, 'Seed', 7);
  await setNumber(page, 'Bits', 3);
  await choose(page, 'Method', 'snapkv');
  await setNumber(page, 'Budget B', 50);
  await setNumber(page, 'Observation window w', 8);
  const before = await allFigures(page);
  const link = page.url();
  assert.match(link, /pattern=needle/);
  assert.match(link, /seed=7/);
  const second = await open(browser.context, link);
  assert.deepEqual(await allFigures(second.page), before);
  assert.deepEqual([...problems, ...second.problems], []);
  await page.close();
  await second.page.close();
});

test('a number typed key by key is used once committed; the keystrokes on the way change nothing', async () => {
  // Typing 1024 into Tokens T used to apply 1, then 10, 102, 1024: the 1 took B, r, w down to
  // 1 and the future steps to 0, for good.
  // (a link, so that no view an earlier test left in this browser's storage is restored)
  const { page, problems } = await open(browser.context, urlWith({ seed: 1 }));
  const start = await page.evaluate(() => location.search);
  const tokens = page.locator('#tokens');
  await tokens.click({ clickCount: 3 });
  await page.keyboard.type('1024', { delay: 60 });
  await page.waitForTimeout(300);
  assert.equal(await page.evaluate(() => document.body.dataset.busy), undefined, 'nothing computed while typing');
  assert.equal(await tokens.inputValue(), '1024', 'no reply overwrote the digits');
  await page.keyboard.press('Tab');
  await settle(page);
  assert.equal(await tokens.inputValue(), '1024');
  assert.equal(await page.locator('#budget-b').inputValue(), '128', 'B kept');
  assert.equal(await page.locator('#recent').inputValue(), '32', 'r kept');
  assert.equal(await figure(page, 'kept-count'), 128);
  await page.waitForFunction((was) => location.search !== was, start);
  assert.equal(await page.evaluate(() => location.search), '?tokens=1024');
  // Escape gives up what is being typed: the value in use again, and nothing applied on Tab.
  await tokens.click({ clickCount: 3 });
  await page.keyboard.type('88');
  await page.keyboard.press('Escape');
  assert.equal(await tokens.inputValue(), '1024');
  await page.keyboard.press('Tab');
  await settle(page);
  assert.equal(await tokens.inputValue(), '1024');
  assert.match(await figureText(page, 'data-description'), /T=1024/);
  // The number's arrows commit at once, as a slider does.
  await tokens.focus();
  await page.keyboard.press('ArrowUp');
  await settle(page);
  assert.equal(await tokens.inputValue(), '1025');
  assert.match(await figureText(page, 'data-description'), /T=1025/);
  assert.deepEqual(problems, []);
  await page.close();
});

test('a refused value leaves its field once another change is shown; a link\'s channel is shown', async () => {
  const { page, problems } = await open(browser.context, urlWith('channel=5'));
  assert.equal(await page.locator('#channel').inputValue(), '5', 'the select shows the link\'s channel');
  assert.match(await figureText(page, 'data-description'), /T=512/);
  await setNumber(page, 'Tokens T', 0);
  const err = page.locator('#tokens').locator('xpath=..').locator('.error');
  await err.waitFor({ state: 'visible' });
  assert.equal(await page.locator('#tokens').inputValue(), '0', 'what was typed stays beside its message');
  await choose(page, 'Scheme', 'asymmetric');
  assert.equal(await err.isVisible(), false);
  assert.equal(await page.locator('#tokens').inputValue(), '512', 'the field shows the T in use again');
  assert.equal(await page.locator('#channel').inputValue(), '5');
  assert.deepEqual(problems, []);
  await page.close();
});

test('back and forward walk through committed changes', async () => {
  const { page, problems } = await open(browser.context, urlWith({ budget: 100 }));
  await setNumber(page, 'Budget B', 60);
  await setNumber(page, 'Budget B', 30);
  assert.equal(await figure(page, 'kept-count'), 30);
  await page.goBack();
  await settle(page);
  assert.equal(await figure(page, 'kept-count'), 60);
  assert.equal(await page.getByLabel('Budget B', { exact: true }).inputValue(), '60');
  await page.goForward();
  await settle(page);
  assert.equal(await figure(page, 'kept-count'), 30);
  assert.deepEqual(problems, []);
  await page.close();
});

test('a keyboard change (input and change events in one task) makes one update and one history entry', async () => {
  const { page, problems } = await open(browser.context, urlWith({ bits: 4, method: 'h2o' }));
  const updates = () => page.evaluate(() => performance.getEntriesByName('kvlab:update').length);
  const entries = () => page.evaluate(() => window.history.length);
  for (const [label, key] of [['Bits', 'ArrowRight'], ['Method', 'ArrowDown']]) {
    const [u0, h0] = [await updates(), await entries()];
    await page.getByLabel(label, { exact: true }).focus();
    await page.keyboard.press(key);
    await settle(page);
    assert.equal(await updates() - u0, 1, `${label}: one update for its input and change events`);
    assert.equal(await entries() - h0, 1, `${label}: the change is one history entry`);
  }
  assert.equal(await page.getByLabel('Bits', { exact: true }).inputValue(), '5');
  assert.match(page.url(), /bits=5/);
  assert.deepEqual(problems, []);
  await page.close();
});

test('the page keeps the timings of its last updates only (the performance timeline does not grow without bound)', async () => {
  // The page clears its per-update marks and measures every KVLAB_TIMELINE_KEEP updates (1000
  // on the page; 5 here, so that a few changes cross it twice).
  const { page, problems } = await open(browser.context, urlWith({ bits: 4 }), {
    init: () => { globalThis.KVLAB_TIMELINE_KEEP = 5; },
  });
  const timeline = () => page.evaluate(() => ({
    updates: performance.getEntriesByName('kvlab:update').length,
    starts: performance.getEntriesByName('kvlab:update:start', 'mark').length,
    measures: performance.getEntriesByType('measure').filter((m) => m.name.startsWith('kvlab:')).length,
    load: performance.getEntriesByType('mark').filter((m) => m.name.startsWith('kvlab:load:')).length,
  }));
  const before = await timeline();
  assert.equal(before.updates, 1, 'the first view is measured');
  assert.ok(before.load >= 3, `start-up marks recorded (${before.load})`);
  const seen = [];
  for (let i = 0; i < 12; i++) {
    await setNumber(page, 'Bits', i % 2 ? 4 : 5);
    seen.push((await timeline()).updates);
  }
  // Updates 1..4 add up on the first view's; the 5th and the 10th start the timeline afresh.
  assert.deepEqual(seen, [2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3]);
  const after = await timeline();
  assert.equal(after.starts, 3, 'one start mark per update kept');
  assert.ok(after.measures < before.measures + 5 * 12, `measures bounded (${after.measures})`);
  assert.equal(after.load, before.load, 'the start-up marks stay');
  assert.equal(await page.getByLabel('Bits', { exact: true }).inputValue(), '4');
  assert.deepEqual(problems, []);
  await page.close();
});

test('garbage in the URL is repaired with a message, and the page works', async () => {
  const { page, problems } = await open(browser.context, urlWith('bits=banana&budget=-3&kernel=4&tokens=NaN&method=<script>'));
  const warn = page.locator('#url-warnings');
  await warn.waitFor({ state: 'visible' });
  const text = await warn.textContent();
  assert.match(text, /bits 'banana' is not a number/);
  assert.match(text, /method '<script>' is not one of h2o, snapkv, streaming/);
  assert.equal(await page.locator('#url-warnings script').count(), 0, 'user text is never HTML');
  assert.equal(await figure(page, 'kept-count'), 1, 'budget -3 was clamped to 1');
  assert.deepEqual(problems, []);
  await page.close();
});

test('language switch: 中文 and back, remembered across reloads', async () => {
  const { page, problems } = await open(browser.context, urlWith('seed=12345&outliers=3'));
  assert.equal(await page.locator('#quant-title').textContent(), '2. Make each token cheaper: quantization');
  // The data's description: in English, the page's words are the engine's own line.
  const description = page.locator('[data-figure="data-description"]');
  const engineLine = await figureText(page, 'data-description');
  assert.match(engineLine, /^generated: heavy-hitters attention S=\d+ x T=\d+, .*\(3 outlier channels, 0 skewed\), seed 12345$/);
  assert.equal(await description.textContent(), engineLine);
  await page.getByRole('button', { name: 'Switch language' }).click();
  await settle(page);
  assert.match(await page.locator('#quant-title').textContent(), /量化/);
  const zh = await description.textContent();
  assert.match(zh, /^生成数据：重击点注意力 S=\d+ × T=\d+，.*（3 个离群通道，0 个偏斜通道），种子 12345$/);
  assert.doesNotMatch(zh, /generated|outlier|seed/);
  assert.equal(await page.locator('html').getAttribute('lang'), 'zh-CN');
  assert.match(page.url(), /lang=zh/);
  await page.goto(urlWith(''));
  await page.locator('body[data-state="ready"]').waitFor();
  assert.match(await page.locator('#quant-title').textContent(), /量化/, 'remembered without the URL');
  await page.getByRole('button', { name: '切换语言' }).click();
  await settle(page);
  assert.equal(await page.locator('html').getAttribute('lang'), 'en');
  assert.equal(await description.textContent(), await figureText(page, 'data-description'));
  assert.deepEqual(problems, []);
  await page.close();
});

test('the last view survives a reload; Reset returns to the defaults', async () => {
  const { page, problems } = await open(browser.context, urlWith(''));
  await setNumber(page, 'Bits', 6);
  await page.goto(urlWith(''));
  await page.locator('body[data-state="ready"]').waitFor();
  assert.equal(await page.getByLabel('Bits', { exact: true }).inputValue(), '6');
  // (the page says the view is the one kept, and how to get the defaults)
  const note = page.locator('#url-warnings');
  assert.equal(await note.textContent(), 'This is the last view kept in this browser; Reset gives the defaults.');
  await page.getByRole('button', { name: 'Reset' }).click();
  await settle(page);
  assert.equal(await page.getByLabel('Bits', { exact: true }).inputValue(), '4');
  assert.equal(await note.isVisible(), false);
  assert.deepEqual(problems, []);
  await page.close();
});

for (const section of ['budget', 'quant', 'select', 'compare', 'together']) {
  test(`embed=${section} shows that section alone, with texts that point to no hidden section`, async () => {
    const { page, problems } = await open(browser.context, urlWith({ embed: section, lang: 'en' }));
    for (const other of ['data', 'budget', 'quant', 'select', 'compare', 'together']) {
      assert.equal(await page.locator(`#${other}`).isVisible(), other === section, `#${other}`);
    }
    // (the comparison's steps line and the levers' measure spoke of sections 2 and 3)
    const text = await page.locator(`#${section}`).innerText();
    assert.doesNotMatch(text, /section \d|(selection|quantization|comparison) (below|above)/i, text);
    // Its charts are drawn (those it shows: the model's trade-off waits for the model).
    for (const chart of await page.locator(`#${section} canvas[data-chart]:visible`).evaluateAll((cs) => cs.map((c) => c.dataset.chart))) {
      assert.ok(await inkShare(page, chart) > 0.005, `${section}: ${chart} drawn`);
    }
    assert.deepEqual(problems, []);
    await page.close();
  });
}

test('what is off screen is drawn and computed once the controls rest, and then equals a fresh view', async () => {
  const { page, problems } = await open(browser.context, urlWith({ bits: 4, budget: 40 }));
  // The quantization controls in view: the comparison (section and charts) is far below.
  await page.getByLabel('Bits', { exact: true }).scrollIntoViewIfNeeded();
  await page.locator('#quant').evaluate((s) => s.scrollIntoView({ block: 'start' }));
  await settle(page);
  const offScreen = await page.locator('#compare').evaluate((s) => s.getBoundingClientRect().top > window.innerHeight);
  assert.ok(offScreen, 'the comparison is below the viewport');
  // Record the page's busy/stale states and its measures through one change.
  // The bits lever (section 4, below the comparison) as the page shows it, with each state.
  const LEVER = '[data-figure="lever-bits-cost"]';
  const leverBefore = await page.locator(LEVER).textContent();
  await page.evaluate((leverSelector) => {
    performance.clearMeasures();
    window.__states = [];
    window.__levers = [];
    new MutationObserver(() => {
      const d = document.body.dataset;
      window.__states.push(`${d.busy ? 'busy' : ''}/${d.stale ? 'stale' : ''}`);
      window.__levers.push(document.querySelector(leverSelector).textContent);
    }).observe(document.body, { attributes: true, attributeFilter: ['data-busy', 'data-stale'] });
  }, LEVER);
  await page.getByLabel('Bits', { exact: true }).focus();
  await page.keyboard.press('ArrowLeft'); // 4 -> 3: changes the quantization and the comparison's output error
  await settle(page);
  const { states, levers, update, draws } = await page.evaluate(() => ({
    states: window.__states,
    levers: window.__levers,
    update: performance.getEntriesByName('kvlab:update').map((m) => [m.startTime, m.startTime + m.duration]),
    // [name, start]: the update's charts are `kvlab:draw:*`, the catch-up's `kvlab:later:draw:*`
    draws: performance.getEntriesByType('measure').filter((m) => /^kvlab:(later:)?draw:/.test(m.name))
      .map((m) => [m.name, m.startTime]),
  }));
  assert.equal(update.length, 1, 'one update');
  const [, updateEnd] = update[0];
  const drawnBy = (chart, inUpdate) => draws.some(([c, at]) => (inUpdate
    ? c === `kvlab:draw:${chart}` && at <= updateEnd
    : c === `kvlab:later:draw:${chart}` && at > updateEnd));
  // The histogram is on screen: drawn by the update. The comparison's charts and the error map
  // are not: drawn after it, by the catch-up.
  assert.ok(drawnBy('hist', true), JSON.stringify(draws));
  for (const chart of ['tradeoff', 'errmap']) {
    assert.ok(!drawnBy(chart, true), `${chart} not drawn by the update: ${JSON.stringify(draws)}`);
    assert.ok(drawnBy(chart, false), `${chart} drawn after the update: ${JSON.stringify(draws)}`);
  }
  // The page said so: on-screen up to date while the off-screen part was still stale.
  assert.ok(states.includes('/stale'), JSON.stringify(states));
  assert.equal(states.at(-1), '/', JSON.stringify(states));
  // The bits lever at 3 bits needs a second quantization at 2 bits: the update left it for the
  // catch-up (the levers kept the 4-bit view's figures while stale), which then wrote it.
  const stale = states.indexOf('/stale');
  assert.equal(levers[stale], leverBefore, JSON.stringify({ states, levers }));
  assert.notEqual(levers.at(-1), leverBefore, JSON.stringify({ states, levers }));
  assert.equal(await page.getByLabel('Bits', { exact: true }).inputValue(), '3');
  // Caught up: the comparison's table and charts equal those of a fresh view of the same link.
  const table = () => page.locator('#compare-rows').innerText();
  const shot = (p, chart) => p.locator(`canvas[data-chart="${chart}"]`).evaluate((c) => c.toDataURL('image/png'));
  const fresh = await open(browser.context, page.url());
  assert.equal(await table(), await fresh.page.locator('#compare-rows').innerText());
  const leverTable = (p) => p.locator('#together table.levers').innerText();
  assert.equal(await leverTable(page), await leverTable(fresh.page));
  for (const chart of ['tradeoff', 'strips', 'errmap']) {
    assert.equal(await shot(page, chart), await shot(fresh.page, chart), chart);
  }
  assert.deepEqual([...problems, ...fresh.problems], []);
  await page.close();
  await fresh.page.close();
});

/** The text of a download (a promise of playwright's download event). */
async function downloadedText(download) {
  let text = '';
  for await (const chunk of await (await download).createReadStream()) text += chunk;
  return text;
}

test('an export made while the comparison waits for the catch-up holds the comparison of the view shown', async () => {
  const { page, problems } = await open(browser.context, urlWith({ bits: 4, budget: 40 }));
  await page.locator('#select').evaluate((s) => s.scrollIntoView({ block: 'start' }));
  await settle(page);
  assert.ok(await page.locator('#compare').evaluate((s) => s.getBoundingClientRect().top > window.innerHeight),
    'the comparison is below the viewport');
  // Change B, then press Export JSON the moment the update is on screen: the comparison is
  // still deferred then (body[data-stale]); the catch-up would start two frames later.
  const download = page.waitForEvent('download');
  const stateAtClick = await page.evaluate(() => new Promise((resolve) => {
    const b = document.querySelector('#budget-b');
    b.value = '30';
    b.dispatchEvent(new Event('input', { bubbles: true }));
    b.dispatchEvent(new Event('change', { bubbles: true }));
    const mo = new MutationObserver(() => {
      if (document.body.dataset.busy) return;
      mo.disconnect();
      const stale = 'stale' in document.body.dataset;
      document.querySelector('#export-json').click();
      resolve(stale);
    });
    mo.observe(document.body, { attributes: true, attributeFilter: ['data-busy'] });
  }));
  assert.equal(stateAtClick, true, 'the export was asked for while the comparison was deferred');
  const exported = JSON.parse(await downloadedText(download));
  await settle(page);
  assert.equal(exported.figures.pending, false);
  assert.equal(exported.figures.select.keptCount, 30);
  // (the JSON is written by the page from the engine's object: the numbers are the figures')
  assert.equal(exported.kept.length, 30);
  assert.equal(exported.figures.together.rOverall, Number(await figureText(page, 'r-overall')));
  // The same link in a fresh page: the same comparison.
  const fresh = await open(browser.context, page.url());
  const freshDownload = fresh.page.waitForEvent('download');
  await fresh.page.locator('#export-json').click();
  const again = JSON.parse(await downloadedText(freshDownload));
  assert.deepEqual(exported.figures.compare, again.figures.compare);
  assert.ok(exported.figures.compare.rows.length > 0);
  // Each compared policy's kept set, in the table's order, at the B asked for.
  assert.deepEqual(exported.policies.map((p) => p.policy), exported.figures.compare.rows.map((r) => r.policy));
  assert.deepEqual(exported.policies, again.policies);
  assert.ok(exported.policies.some((p) => expandRanges(p.kept_ranges).length === 30), JSON.stringify(exported.policies));
  assert.deepEqual([...problems, ...fresh.problems], []);
  await page.close();
  await fresh.page.close();
});

test('a link setting the data refuses is replaced by its own default alone, worded in the page\'s language', async (t) => {
  // (its own browser: the language stays out of the other tests)
  const own = await launch();
  t.after(() => own.close()); // (also when it fails: an open browser keeps the process alive)
  // A group size longer than the data's tokens per channel and a channel it does not have (the
  // default data: T = 512, d = 64): only those two fall back; bits=3 stays.
  const { page, problems } = await open(own.context, urlWith('lang=zh&bits=3&channel=500&group=1000'));
  const warn = page.locator('#url-warnings');
  await warn.waitFor({ state: 'visible' });
  assert.equal(await warn.textContent(),
    '链接中的部分参数已修正：分组大小 1000 超出范围：应在 1 到 512 之间（每个通道的 token 数）；改用默认值 · '
    + '通道 500 超出范围：应在 0 到 63 之间（d − 1）；改用默认值');
  // the engine's own messages stay in data-value
  const english = 'group size 1000 is out of range: must be between 1 and 512 (tokens per channel); the default is used · '
    + 'channel 500 is out of range: must be between 0 and 63 (d - 1); the default is used';
  assert.equal(await warn.getAttribute('data-value'), english);
  assert.equal(await page.locator('#bits').inputValue(), '3');
  assert.equal(await page.locator('#group').inputValue(), '0');
  assert.equal(await page.locator('#channel').inputValue(), 'auto');
  const query = new URL(page.url()).searchParams;
  assert.equal(query.get('bits'), '3');
  assert.equal(query.get('group'), null);
  assert.equal(query.get('channel'), null);
  // Switched to English, the page's words are the engine's.
  await page.getByRole('button', { name: '切换语言' }).click();
  await settle(page);
  assert.equal(await warn.textContent(), `Some link parameters were repaired: ${english}`);
  assert.deepEqual(problems, []);
  await page.close();
});

test('repaired link values and refused typed values are worded in the page\'s language', async (t) => {
  // (its own browser: the language stays out of the other tests)
  const own = await launch();
  t.after(() => own.close()); // (also when it fails: an open browser keeps the process alive)
  const { page, problems } = await open(own.context, urlWith('lang=zh&bits=99&scheme=odd'));
  const warn = page.locator('#url-warnings');
  await warn.waitFor({ state: 'visible' });
  assert.equal(await warn.textContent(),
    '链接中的部分参数已修正：bits 99 超出范围：应为 1 到 16 之间的整数；改用 16 · scheme「odd」不是 sym, asym 之一；改用默认值');
  // the engine's own messages stay in data-value
  assert.equal(await warn.getAttribute('data-value'),
    "bits 99 is out of range: must be a whole number between 1 and 16; 16 is used · scheme 'odd' is not one of sym, asym; the default is used");

  // A value typed into a control that the engine refuses: its message next to it, in Chinese,
  // and the last good view stays.
  const kept = await figure(page, 'kept-count');
  /** Types `value` into the control `#id`; returns the message shown next to it. */
  const refusal = async (id, value) => {
    const input = page.locator(`#${id}`);
    await input.fill(value);
    await input.press('Enter');
    await input.dispatchEvent('change');
    await settle(page);
    const err = input.locator('xpath=..').locator('.error');
    await err.waitFor({ state: 'visible' });
    return err.textContent();
  };
  assert.equal(await refusal('tokens', '999999'), 'tokens 999999 超出范围：应为 1 到 131072 之间的整数');
  assert.equal(await figure(page, 'kept-count'), kept);
  // (a negative seed: the settings object cannot hold it; the same check names it)
  assert.equal(await refusal('seed', '-5'), 'seed -5 超出范围：应为 0 到 9007199254740992 之间的整数');
  assert.equal(await figure(page, 'kept-count'), kept);
  // (a group size longer than the grouped axis: the quantizer's refusal, in Chinese too)
  assert.equal(await refusal('group', '1000'), '分组大小 1000 超出范围：应在 1 到 512 之间（每个通道的 token 数）');
  // (more sink tokens than the budget B holds: the selection's refusal)
  await page.locator('#method').selectOption('streaming');
  await settle(page);
  assert.equal(await refusal('sinks', '1000'), 'sinks 1000 超出范围：应在 0 到 128 之间（预算 B）');

  // Switched to English, the link's repairs are the engine's messages, and so is the refusal
  // still shown.
  await page.getByRole('button', { name: '切换语言' }).click();
  await settle(page);
  assert.equal(await page.locator('#sinks').locator('xpath=..').locator('.error').textContent(),
    'sinks 1000 is out of range: must be between 0 and 128 (the budget B)');
  assert.equal(await warn.textContent(), `Some link parameters were repaired: ${await warn.getAttribute('data-value')}`);
  assert.deepEqual(problems, []);
  await page.close();
});

test('the language switched while a change is computed: the link keeps the language', async () => {
  const { page, problems } = await open(browser.context, urlWith({ channels: 256, steps: 256, lang: 'en' }));
  const tokens = page.locator('#tokens');
  await tokens.fill('32768');
  await tokens.press('Enter');
  // (the engine is busy with T = 32,768 for a while: the switch lands before its reply)
  await page.locator('body[data-busy]').waitFor();
  await page.locator('#lang').click();
  await settle(page);
  await page.waitForFunction(() => new URLSearchParams(location.search).get('tokens') === '32768');
  const params = new URLSearchParams(await page.evaluate(() => location.search));
  assert.equal(params.get('lang'), 'zh', `the link says the page's language: ${params}`);
  assert.equal(await page.evaluate(() => document.documentElement.lang), 'zh-CN');
  // (back to English for the next tests: the language is remembered)
  await page.locator('#lang').click();
  await settle(page);
  assert.deepEqual(problems, []);
  await page.close();
});

test('Reset clears what was said of the link opened', async () => {
  const { page, problems } = await open(browser.context, urlWith('bits=99'));
  const warn = page.locator('#url-warnings');
  await warn.waitFor({ state: 'visible' });
  await page.locator('#reset').click();
  await settle(page);
  assert.equal(await warn.isVisible(), false, 'the note on bits 99 is gone with the view it was about');
  assert.equal(await page.locator('#bits').inputValue(), '4');
  assert.deepEqual(problems, []);
  await page.close();
});

test('a shown channel the new d does not have goes back to auto, as the outlier channels follow d', async () => {
  const { page, problems } = await open(browser.context, urlWith({ channel: 50 }));
  assert.equal(await page.locator('#channel').inputValue(), '50');
  await setNumber(page, 'Channels d', 10);
  assert.equal(await page.locator('.control .error:not([hidden])').count(), 0, 'nothing refused');
  assert.equal(await page.locator('#channel').inputValue(), 'auto');
  assert.match(await figureText(page, 'data-description'), /d=10 \(4 outlier channels/);
  assert.deepEqual(problems, []);
  await page.close();
});

test('sliders show the value in use after a link, Reset and Back (not one clamped to the old range)', async () => {
  // The controls were written before the sliders' ranges followed T: a range input clamps its
  // value, so B = 800 sat at 512 while 800 was in use.
  const { page, problems } = await open(browser.context, urlWith('tokens=1024&budget=800&recent=600'));
  const slider = (id) => page.locator(`#${id}`).inputValue();
  assert.deepEqual([await slider('budget-b'), await slider('recent')], ['800', '600']);
  await setNumber(page, 'Tokens T', 20);
  assert.deepEqual([await slider('budget-b'), await slider('recent')], ['20', '20']);
  await page.goBack();
  await settle(page);
  assert.equal(await page.locator('#tokens').inputValue(), '1024');
  assert.deepEqual([await slider('budget-b'), await slider('recent')], ['800', '600']);
  await setNumber(page, 'Tokens T', 20);
  await page.getByRole('button', { name: 'Reset' }).click();
  await settle(page);
  assert.deepEqual([await slider('budget-b'), await slider('recent')], ['128', '32']);
  assert.deepEqual(problems, []);
  await page.close();
});
