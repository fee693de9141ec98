// Section 3's method switch always lands in one consistent state (issue 38, item 4): from every
// method to every other at B = 1, 2, r and T, the select, the controls shown, the formulas, the
// figures and the link all speak of the new method, and a value the new method refuses at this B
// (StreamingLLM's sinks above B) is brought into range and said beside its control in words.
// Before: StreamingLLM chosen at B = 2 snapped back to H2O while the sinks turned red, the recent
// window's control vanished and the note said "keeps the 0 sinks".

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, navigate, urlWith, figure, figureText, choose, settle } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const T = 512;
const R = 32;
const SINKS = 4;

/** What section 3 shows: the select, the <body> mirror, which controls are shown, the texts. */
async function shown(page) {
  return page.evaluate(() => {
    const visible = (sel) => {
      const el = document.querySelector(sel);
      return Boolean(el && el.getClientRects().length && getComputedStyle(el).visibility !== 'hidden');
    };
    const errors = [...document.querySelectorAll('#select .error:not([hidden])')]
      .map((e) => ({ key: e.closest('.control')?.querySelector('[data-key]')?.dataset.key, text: e.textContent }));
    return {
      select: document.querySelector('#method').value,
      mirror: document.body.dataset.method,
      recent: visible('#recent'),
      sinks: visible('#sinks'),
      window: visible('#window'),
      budgetNote: visible('[data-figure="budget-min"]'),
      sinksValue: document.querySelector('#sinks').value,
      keep: document.querySelector('#f-keep').textContent,
      score: document.querySelector('#f-score').textContent,
      errors,
      status: document.querySelector('#status')?.textContent ?? '',
    };
  });
}

/** Checks section 3 after switching `from` -> `to` at `budget` with `sinks` before the switch. */
async function checkSwitch(page, from, to, budget, sinks) {
  await choose(page, 'Method', to);
  await settle(page);
  const s = await shown(page);
  const where = `${from} -> ${to} at B = ${budget}`;
  assert.equal(s.select, to, `${where}: the select shows the new method`);
  assert.equal(s.mirror, to, `${where}: the page's style follows it`);
  assert.equal(s.recent, to !== 'streaming', `${where}: the recent window shown iff the method reads it`);
  assert.equal(s.sinks, to === 'streaming', `${where}: the sinks shown iff the method reads them`);
  assert.equal(s.window, to === 'snapkv', `${where}: the observation window shown iff SnapKV`);
  assert.equal(s.budgetNote, to === 'streaming', `${where}: B's note shown iff StreamingLLM`);
  assert.equal(await figure(page, 'kept-count'), budget, `${where}: B tokens kept`);
  const [heavy, recent, sinkCount] = (await figureText(page, 'roles')).split('/').map(Number);
  const used = Math.min(sinks, budget);
  if (to === 'streaming') {
    assert.deepEqual([heavy, sinkCount], [0, used], `${where}: sinks and recent only`);
    assert.equal(recent, budget - used);
    assert.match(s.keep, new RegExp(`s = ${used}`), `${where}: the kept-set formula is StreamingLLM's`);
    assert.equal(s.sinksValue, String(used), `${where}: the sinks field shows the sinks in use`);
    assert.equal(await page.locator('[data-figure="budget-min"]').textContent(),
      `StreamingLLM keeps the ${used} sinks: B starts at ${Math.max(1, used)}`);
    if (sinks > budget) {
      // Brought into range, said beside the sinks in words; nothing else refused.
      assert.deepEqual(s.errors, [{ key: 'sinks', text: `StreamingLLM keeps its sinks within B: ${sinks} sinks do not fit in B = ${budget}, so the sinks are set to ${budget}` }], where);
      assert.match(page.url(), new RegExp(`sinks=${budget}(&|$)`), `${where}: the link carries the sinks in use`);
    } else {
      assert.deepEqual(s.errors, [], `${where}: nothing said`);
    }
  } else {
    assert.equal(sinkCount, 0, `${where}: no sinks`);
    assert.equal(heavy + recent, budget);
    assert.doesNotMatch(s.keep, /s = /, `${where}: the kept-set formula is TopK's`);
    assert.match(s.keep, /TopK/);
    assert.deepEqual(s.errors, [], `${where}: nothing refused`);
  }
  assert.equal(/snap/.test(s.score), to === 'snapkv', `${where}: the score formula is the method's`);
  assert.equal(/ignores it/.test(s.score), to === 'streaming', `${where}: the score formula is the method's`);
  if (to === 'h2o') assert.doesNotMatch(page.url(), /method=/, `${where}: the link has the default method`);
  else assert.match(page.url(), new RegExp(`method=${to}(&|$)`), `${where}: the link has the method`);
  return used;
}

/**
 * Every ordered pair of methods in one walk: h2o -> streaming -> snapkv -> h2o -> snapkv ->
 * streaming -> h2o (StreamingLLM entered from H2O first, with the linked sinks); and, where B is
 * below the sinks, StreamingLLM entered from SnapKV with them too, on a second page.
 */
const WALK = ['h2o', 'streaming', 'snapkv', 'h2o', 'snapkv', 'streaming', 'h2o'];

for (const budget of [1, 2, R, T]) {
  test(`a method switch at B = ${budget} lands in the new method, whole: every method from every other`, async () => {
    const { page, problems } = await open(browser.context, urlWith({ lang: 'en', budget, sinks: SINKS }));
    assert.deepEqual((await shown(page)).errors, [], 'nothing refused before the switches');
    let sinks = SINKS;
    for (let i = 1; i < WALK.length; i += 1) sinks = await checkSwitch(page, WALK[i - 1], WALK[i], budget, sinks);
    if (SINKS > budget) {
      await navigate(page, urlWith({ lang: 'en', method: 'snapkv', budget, sinks: SINKS }));
      await page.locator('body[data-state="ready"]').waitFor({ timeout: 30_000 });
      await settle(page);
      await checkSwitch(page, 'snapkv', 'streaming', budget, SINKS);
    }
    assert.deepEqual(problems, []);
    await page.close();
  });
}

test('the sinks note goes with their next move, and the section stays StreamingLLM\'s', async () => {
  const { page, problems } = await open(browser.context, urlWith({ lang: 'en', budget: 2 }));
  await choose(page, 'Method', 'streaming');
  await settle(page);
  const sinksError = page.locator('#sinks').locator('xpath=..').locator('.error');
  assert.ok(await sinksError.isVisible(), 'said beside the sinks');
  // In Chinese too.
  await page.getByRole('button', { name: 'Switch language' }).click();
  await page.waitForFunction(() => document.documentElement.lang === 'zh-CN');
  await settle(page);
  assert.equal(await sinksError.textContent(), 'StreamingLLM 的 sink 不能超过 B：4 个 sink 放不进 B = 2，因此改用 2 个');
  await page.locator('#lang').click();
  await page.waitForFunction(() => document.documentElement.lang === 'en');
  await page.locator('#sinks').fill('1');
  await page.locator('#sinks').press('Enter');
  await settle(page);
  assert.equal(await sinksError.isVisible(), false, 'the note goes with the next move of the sinks');
  const s = await shown(page);
  assert.equal(s.select, 'streaming');
  assert.equal(await figureText(page, 'roles'), '0/1/1');
  assert.deepEqual(problems, []);
  await page.close();
});
