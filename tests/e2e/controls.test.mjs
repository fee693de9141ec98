// Controls never rest on a value the engine refuses, and take exact values: Bits starts at the
// scheme's fewest, B at StreamingLLM's sinks (said beside it), a scheme change that leaves the
// bits below the new scheme's fewest moves them there and says so; B, r and w have a number
// field beside their slider.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, urlWith, figure, setNumber, choose, settle } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** The bits of the view on screen: R_quant without metadata is 16 / b. */
const bitsInUse = async (page) => 16 / await figure(page, 'r-quant-no-meta');
const errorOf = (page, selector) => page.locator(selector).locator('xpath=..').locator('.error');

test('Bits: 1 is out of the symmetric slider, used when asymmetric, and raised to 2 (said) on the way back', async () => {
  const { page, problems } = await open(browser.context, urlWith({ lang: 'en' }));
  const bits = page.locator('#bits');
  assert.equal(await bits.getAttribute('min'), '2', 'symmetric takes at least 2 bits');
  // The slider cannot rest on 1: the browser holds it at its min, the view follows it.
  await setNumber(page, 'Bits', 1);
  assert.equal(await bits.inputValue(), '2');
  assert.equal(await page.locator('#bits-value').textContent(), '2');
  assert.equal(await bitsInUse(page), 2);
  assert.equal(await errorOf(page, '#bits').isVisible(), false);
  // Asymmetric takes 1 bit: the slider goes there and the view is 1 bit.
  await choose(page, 'Scheme', 'asymmetric');
  assert.equal(await bits.getAttribute('min'), '1');
  await setNumber(page, 'Bits', 1);
  assert.equal(await bitsInUse(page), 1);
  // Back to symmetric: 1 bit cannot be; 2 is used and said beside the bits, the scheme taken.
  await choose(page, 'Scheme', 'symmetric');
  await settle(page);
  assert.equal(await page.locator('#scheme').inputValue(), 'symmetric');
  assert.equal(await bits.inputValue(), '2');
  assert.equal(await bitsInUse(page), 2);
  assert.equal(await errorOf(page, '#bits').textContent(),
    '1 bit is only possible asymmetric: symmetric quantization takes at least 2 bits, so 2 is used');
  assert.match(page.url(), /bits=2/);
  // The note goes with the next move of the bits.
  await setNumber(page, 'Bits', 5);
  assert.equal(await errorOf(page, '#bits').isVisible(), false);
  assert.deepEqual(problems, []);
  await page.close();
});

test('B under StreamingLLM starts at the sinks, and says so, in both languages', async () => {
  const { page, problems } = await open(browser.context, urlWith({ method: 'streaming', sinks: 16, lang: 'en' }));
  const b = page.locator('#budget-b');
  assert.equal(await b.getAttribute('min'), '16');
  await setNumber(page, 'Budget B', 4);
  assert.equal(await b.inputValue(), '16', 'the slider stops at the sinks');
  assert.equal(await figure(page, 'kept-count'), 16);
  const note = page.locator('[data-figure="budget-min"]');
  assert.equal(await note.textContent(), 'StreamingLLM keeps the 16 sinks: B starts at 16');
  assert.ok(await note.isVisible());
  await page.getByRole('button', { name: 'Switch language' }).click();
  await page.waitForFunction(() => document.documentElement.lang === 'zh-CN');
  await settle(page);
  assert.equal(await note.textContent(), 'StreamingLLM 保留 16 个 sink：B 至少为 16');
  // Other methods take any B from 1, and the note is not shown.
  await choose(page, '方法', 'h2o');
  assert.equal(await b.getAttribute('min'), '1');
  assert.equal(await note.isVisible(), false);
  assert.deepEqual(problems, []);
  await page.close();
});

test('B, r and w take exact values typed beside their sliders, at T = 131,072', async () => {
  const { page, problems } = await open(browser.context,
    urlWith({ tokens: 131072, steps: 8, channels: 8, budget: 4096, recent: 64, method: 'snapkv', window: 4, lang: 'en' }));
  for (const [label, slider, value] of [
    ['Budget B, exact value', '#budget-b', 12345],
    ['Recent window r, exact value', '#recent', 777],
    ['Observation window w, exact value', '#window', 3],
  ]) {
    const field = page.getByLabel(label, { exact: true });
    assert.equal(await field.getAttribute('type'), 'number');
    await setNumber(page, label, value);
    assert.equal(await page.locator(slider).inputValue(), String(value), `${label}: the slider follows`);
    assert.equal(await field.inputValue(), String(value));
  }
  assert.equal(await figure(page, 'kept-count'), 12345);
  assert.match(page.url(), /budget=12345/);
  assert.match(page.url(), /recent=777/);
  // A slider moved shows its value in the field beside it.
  await setNumber(page, 'Budget B', 2048);
  assert.equal(await page.getByLabel('Budget B, exact value').inputValue(), '2048');
  assert.deepEqual(problems, []);
  await page.close();
});

test('on a phone, the chart a slider drives is in view while the slider moves', async () => {
  const phone = await launch({ viewport: { width: 390, height: 800 } });
  try {
    const { page, problems } = await open(phone.context, urlWith({ lang: 'en' }));
    const inView = (selector) => page.locator(selector).first().evaluate((el) => {
      const r = el.getBoundingClientRect();
      return r.top >= -1 && r.bottom <= window.innerHeight + 1 && r.height > 0;
    });
    for (const [slider, chart] of [['#bits', 'hist'], ['#bits', 'errmap'], ['#budget-b', 'attn'],
      ['#budget-b', 'mass'], ['#recent', 'scores']]) {
      // Scrolled down to the chart (its bottom at the screen's), the slider is still on screen.
      await page.locator(`canvas[data-chart="${chart}"]`).evaluate((c) => c.scrollIntoView({ block: 'end' }));
      await settle(page);
      assert.ok(await inView(`canvas[data-chart="${chart}"]`), `${chart} in view`);
      assert.ok(await inView(slider), `${slider} in view beside ${chart}`);
      // Moved by keys, it leaves the chart in view, and the chart answers.
      const before = await page.locator(slider).inputValue();
      await page.locator(slider).focus();
      await page.keyboard.press('ArrowLeft');
      await settle(page);
      assert.notEqual(await page.locator(slider).inputValue(), before, `${slider} moved`);
      assert.ok(await inView(`canvas[data-chart="${chart}"]`), `${chart} still in view`);
    }
    // On a desktop the sliders sit in their column as before (not stuck over the charts).
    assert.deepEqual(problems, []);
  } finally {
    await phone.close();
  }
  const { page, problems } = await open(browser.context, urlWith({ lang: 'en' }));
  assert.equal(await page.locator('#bits').evaluate((el) => getComputedStyle(el.closest('.drive')).position), 'static');
  assert.deepEqual(problems, []);
  await page.close();
});
