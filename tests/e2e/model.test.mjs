// The real model as the data: fetched only when run, its layer and head feeding every section
// with the prompt's bytes as the tokens' texts; a prompt it cannot take is said beside the
// button and the view in use stays.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, urlWith, settle, figure } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const description = (page) => page.locator('[data-figure="data-description"]').textContent();

async function run(page, { prompt = null, layer = null, head = null } = {}) {
  if (prompt !== null) await page.locator('#model-prompt').fill(prompt);
  if (layer !== null) await page.locator('#model-layer').selectOption(String(layer));
  if (head !== null) await page.locator('#model-head').selectOption(String(head));
  await page.locator('#model-use').click();
  await settle(page);
}

test('the model is fetched when run, and its layer and head become every section\'s data', async () => {
  const { page, problems, requests } = await open(browser.context, urlWith(''));
  const fetchedModel = () => requests.filter((u) => u.includes('/model/'));
  assert.deepEqual(fetchedModel(), [], 'nothing of the model at start');
  await page.locator('#model-box summary').click();
  const prompt = 'And God said, Let there be light: and there was light.';
  await run(page, { prompt, layer: 1, head: 2 });
  await page.waitForFunction(() => document.querySelector('[data-figure="data-description"]')
    .textContent.includes('layer 1, head 2'));
  assert.ok(fetchedModel().some((u) => u.endsWith('model.safetensors')), `${fetchedModel()}`);
  assert.ok(!fetchedModel().some((u) => u.endsWith('reference.json')), 'the tests\' file stays');
  const T = prompt.length + 1; // (BOS, then one token a byte)
  assert.equal(await figure(page, 'kept-count'), Math.min(128, T));
  const kept = await page.locator('[data-figure="kept-tokens"]').textContent();
  assert.ok(kept.includes('‘<s>’') && kept.includes('‘G’'), kept.slice(0, 120));
  // the mean over heads: the layer's whole cache, d = 128
  await run(page, { head: -1, layer: 0 });
  assert.match(await description(page), /layer 0, the mean of its heads/);
  // every head as a thumbnail, 4 layers x 4 heads; a click uses that one
  const heads = page.locator('#model-heads .head');
  assert.equal(await heads.count(), 16);
  await page.locator('#model-heads .head[data-layer="3"][data-head="1"]').click();
  await page.waitForFunction(() => document.querySelector('[data-figure="data-description"]')
    .textContent.includes('layer 3, head 1'));
  await settle(page);
  assert.equal(await page.locator('#model-heads .head[aria-pressed="true"]').getAttribute('aria-label'),
    'layer 3, head 1');
  assert.deepEqual(problems, []);
});

test('an empty prompt is refused beside the button, and a long one is cut from its start, said', async () => {
  const { page, problems } = await open(browser.context, urlWith(''));
  await page.locator('#model-box summary').click();
  await run(page, { prompt: 'In the beginning' });
  const before = await description(page);
  await run(page, { prompt: '' });
  const error = page.locator('#model-use').locator('xpath=..').locator('.error');
  await error.waitFor();
  assert.match(await error.textContent(), /the prompt is empty: type at least one character/);
  assert.equal(await description(page), before, 'the view in use stays');
  await run(page, { prompt: 'x'.repeat(300) });
  assert.match(await page.locator('#model-warnings').textContent(),
    /the prompt has 300 bytes and the model reads 255: its last 255 are used/);
  assert.equal(await error.isHidden(), true, 'the earlier refusal is gone');
  assert.deepEqual(problems, []);
});

test('the model gives the same logits in wasm as the trainer recorded (and the native tests check)', async () => {
  const { page, problems } = await open(browser.context, urlWith(''));
  const worst = await page.evaluate(async () => {
    const mod = await import('./pkg-upload/kvlab_upload.js');
    await mod.default();
    const get = (name) => fetch(`./model/${name}`);
    const card = await (await get('model.json')).text();
    const weights = new Uint8Array(await (await get('model.safetensors')).arrayBuffer());
    const { references } = await (await get('reference.json')).json();
    const model = new mod.Model(card, weights);
    let most = 0;
    for (const r of references) {
      const got = model.logits(r.prompt);
      const want = r.logits.flat();
      if (got.length !== want.length) return `length ${got.length} != ${want.length}`;
      for (let i = 0; i < want.length; i += 1) most = Math.max(most, Math.abs(got[i] - want[i]));
    }
    return most;
  });
  assert.equal(typeof worst, 'number', String(worst));
  assert.ok(worst <= 1e-4, `logits differ by ${worst}`);
  assert.deepEqual(problems, []);
});

test('a link made on the model\'s data carries its prompt, layer and head and shows the same view', async () => {
  const { page } = await open(browser.context, urlWith(''));
  await page.locator('#model-box summary').click();
  await run(page, { prompt: 'The LORD is my shepherd; I shall not want.', layer: 2, head: 1 });
  await page.locator('#budget-exact, input.exact[data-key="budget"]').first().fill('12');
  await page.locator('input.exact[data-key="budget"]').first().press('Enter');
  await settle(page);
  const link = page.url();
  assert.match(link, /data=model/);
  const kept = await page.locator('[data-figure="kept-indices"]').getAttribute('data-value');
  const { page: again, problems } = await open(browser.context, link);
  await again.waitForFunction(() => document.querySelector('[data-figure="data-description"]')
    .textContent.includes('layer 2, head 1'));
  await settle(again);
  assert.equal(await again.locator('#model-prompt').inputValue(), 'The LORD is my shepherd; I shall not want.');
  assert.equal(await again.locator('[data-figure="kept-indices"]').getAttribute('data-value'), kept);
  assert.deepEqual(problems, []);
});

test('in 中文 the model\'s data is described in 中文', async () => {
  const { page, problems } = await open(browser.context, urlWith('lang=zh'));
  await page.locator('#model-box summary').click();
  await run(page, { prompt: 'And God said', layer: 0, head: 3 });
  await page.waitForFunction(() => document.querySelector('[data-figure="data-description"]')
    .textContent.includes('模型第 0 层第 3 个头'));
  assert.match(await description(page), /BOS 之后 12 字节/);
  assert.deepEqual(problems, []);
});
