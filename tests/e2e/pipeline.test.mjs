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

test('every chart draws something on first load', async () => {
  const { page, problems } = await open(browser.context, urlWith(''));
  for (const chart of ['budget-data', 'budget-model', 'hist', 'groups', 'rows', 'errmap', 'attn', 'scores', 'strip', 'mass']) {
    const ink = await inkShare(page, chart);
    assert.ok(ink > 0.01, `${chart} has ink (${(ink * 100).toFixed(1)}%)`);
  }
  assert.deepEqual(problems, []);
  await page.close();
});

test('generated data is bit-identical to the native build (same fingerprints)', async () => {
  // tests/synth_generators.rs::page_default_data_fingerprints asserts the same values natively.
  const { page, problems } = await open(browser.context, urlWith({ seed: 1 }));
  assert.equal(await page.locator('body').getAttribute('data-fingerprints'),
    '9d3668cb4b60abd9 2fd6f770a08d8913 5dfb0951971331d8');
  assert.deepEqual(problems, []);
  await page.close();
});
