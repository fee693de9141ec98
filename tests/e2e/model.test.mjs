// The real model as the data: fetched only when run, its layer and head feeding every section
// with the prompt's bytes as the tokens' texts; a prompt it cannot take is said beside the
// button and the view in use stays.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, urlWith, settle, figure, inkShare } from './helpers.mjs';

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
  // The weights' fetch is said as it goes (held back a little here, so the box shows).
  // (its bytes as they are, with their length: a server that compresses them would send
  // another length than the body the page reads)
  await page.route('**/model/model.safetensors', async (route) => {
    const body = await (await route.fetch()).body();
    await new Promise((done) => { setTimeout(done, 400); });
    await route.fulfill({
      status: 200, body, headers: { 'content-type': 'application/octet-stream', 'content-length': String(body.length) },
    });
  });
  await page.evaluate(() => {
    window.progressSaid = [];
    new MutationObserver(() => window.progressSaid.push(document.querySelector('#progress-text').textContent))
      .observe(document.querySelector('#progress-text'), { childList: true, characterData: true, subtree: true });
  });
  const prompt = 'And God said, Let there be light: and there was light.';
  await run(page, { prompt, layer: 1, head: 2 });
  const said = await page.evaluate(() => window.progressSaid);
  assert.ok(said.some((x) => /^Fetching the model’s weights \(1\.6 MB, once\): 100%/.test(x)), JSON.stringify(said));
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

test('the model gives the same logits in wasm as the trainer recorded, in both builds alike', async () => {
  const { page, problems } = await open(browser.context, urlWith(''));
  const result = await page.evaluate(async () => {
    const get = (name) => fetch(`./model/${name}`);
    const card = await (await get('model.json')).text();
    const weights = new Uint8Array(await (await get('model.safetensors')).arrayBuffer());
    const { references } = await (await get('reference.json')).json();
    const out = {};
    // (the scalar build and the simd128 one the page fetches where the browser has SIMD)
    for (const folder of ['pkg-upload', 'pkg-upload-simd']) {
      const mod = await import(`./${folder}/kvlab_upload.js`);
      await mod.default();
      const model = new mod.Model(card, weights);
      let most = 0;
      const all = [];
      for (const r of references) {
        const got = model.logits(r.prompt);
        const want = r.logits.flat();
        if (got.length !== want.length) return `${folder}: length ${got.length} != ${want.length}`;
        for (let i = 0; i < want.length; i += 1) most = Math.max(most, Math.abs(got[i] - want[i]));
        all.push(...got);
      }
      out[folder] = { most, all };
    }
    const [a, b] = [out['pkg-upload'].all, out['pkg-upload-simd'].all];
    const same = a.length === b.length && a.every((v, i) => Object.is(v, b[i]));
    return { scalar: out['pkg-upload'].most, simd: out['pkg-upload-simd'].most, same };
  });
  assert.equal(typeof result, 'object', String(result));
  assert.ok(result.scalar <= 1e-4 && result.simd <= 1e-4, `logits differ by ${JSON.stringify(result)}`);
  assert.ok(result.same, 'the scalar and simd128 builds give the same logits to the bit');
  assert.deepEqual(problems, []);
});

/** Sets control `key` as a person would, then waits for section 5's details. */
async function set(page, key, value) {
  // (a slider's exact box where it has one: typing a value there is what a person does)
  const exact = page.locator(`[data-key="${key}"][type="number"]`);
  const c = (await exact.count()) ? exact : page.locator(`[data-key="${key}"]`).first();
  if ((await c.evaluate((e) => e.tagName)) === 'SELECT') await c.selectOption(String(value));
  else {
    await c.fill(String(value));
    await c.press('Enter');
    await c.dispatchEvent('change');
  }
  await settle(page);
  await page.locator('#model-on:not(.stale)').waitFor({ timeout: 60_000 });
}

const cell = (page, policy, col) => page.locator(`#model-rows tr[data-policy="${policy}"] td`).nth(col).getAttribute('data-value').then(Number);

test('section 5 measures the model under the page\'s compression, and its words follow its numbers', async () => {
  const { page, problems } = await open(browser.context, urlWith({ budget: 16, recent: 8 }));
  assert.equal(await page.locator('#model-off').isVisible(), true, 'without the model: how to get it');
  await page.locator('#model-run').click();
  await page.locator('#model-on:not([hidden]):not(.stale)').waitFor({ timeout: 60_000 });
  await settle(page);
  for (const name of ['model-kl', 'model-top1', 'model-nll-full', 'model-nll-compressed']) {
    assert.ok(Number.isFinite(await figure(page, name)), name);
  }
  const tight = await figure(page, 'model-kl');
  // The protocol is stated with the prompt's own numbers.
  const T = (await page.locator('#model-prompt').inputValue()).length + 1;
  const E = Math.min(64, Math.floor(T / 4));
  assert.match(await page.locator('[data-figure="model-protocol"]').textContent(),
    new RegExp(`^${T} tokens .* the first ${T - E} are the prefill.* the last ${E} are read`));
  // The table's row for the current method is the section's own figure.
  assert.equal(await cell(page, 'h2o-sum', 0), tight);
  // The sinks' sentence says what the table says.
  const [windowOnly, streaming] = [await cell(page, 'window-only', 0), await cell(page, 'streaming-llm', 0)];
  const sinks = await page.locator('[data-figure="model-sinks"]').textContent();
  const ratio = windowOnly / streaming;
  assert.match(sinks, ratio >= 5 ? /^Attention sinks matter here/
    : ratio >= 1.5 ? /^The sinks help here/ : /^This model barely uses a sink/);
  // The verdict picks the lever with the smaller KL per KiB saved.
  const [perBits, perTokens] = [await figure(page, 'model-lever-bits-per'), await figure(page, 'model-lever-tokens-per')];
  const pulled = perBits <= perTokens ? 'one bit fewer' : '10% fewer tokens';
  const free = Math.min(perBits, perTokens) <= 0;
  assert.match(await page.locator('[data-figure="model-verdict"]').textContent(),
    new RegExp(`^On the model, ${pulled} ${free ? 'did not raise the KL' : 'adds less KL'}`));
  // KIVI has its row, driven by section 2's KIVI controls: at 16 bits it loses nothing.
  const kivi2 = await cell(page, 'kivi', 0);
  assert.ok(kivi2 > 0, `KIVI-2: KL ${kivi2}`);
  await set(page, 'kivi_kbits', 16);
  await set(page, 'kivi_vbits', 16);
  assert.ok(await cell(page, 'kivi', 0) < 1e-6, 'KIVI at 16 bits');
  // More tokens kept: less KL; every token and 16 bits: nothing lost, the same text.
  await set(page, 'budget', 128);
  const loose = await figure(page, 'model-kl');
  assert.ok(loose < tight, `B 128: KL ${loose} < B 16: ${tight}`);
  await set(page, 'bits', 16);
  await set(page, 'budget', T);
  assert.ok(await figure(page, 'model-kl') < 1e-6, 'B = T at 16 bits');
  assert.equal(await figure(page, 'model-top1'), 1);
  assert.equal(await page.locator('#model-texts mark').count(), 0, 'no text parts from the full cache\'s');
  // A policy that ranks nothing has no heads' budgets to share; the sampled text is marked too.
  await set(page, 'method', 'streaming');
  assert.match(await page.locator('[data-figure="model-allocation"]').textContent(), /StreamingLLM keeps the same positions/);
  // Back to generated data: the section says how to get the model again.
  await page.locator('#use-generated').click();
  await settle(page);
  assert.equal(await page.locator('#model-on').isVisible(), false);
  assert.deepEqual(problems, []);
});

test('section 5\'s table says which rows kept the same tokens: at B <= r every policy with a recent window keeps the last B', async () => {
  const { page, problems } = await open(browser.context, urlWith({ budget: 16, recent: 32 }));
  await page.locator('#model-run').click();
  await page.locator('#model-on:not([hidden]):not(.stale)').waitFor({ timeout: 60_000 });
  await settle(page);
  const sameAs = (policy) => page.locator(`#model-rows tr[data-policy="${policy}"]`).getAttribute('data-same-as');
  for (const policy of ['h2o-mean', 'snapkv', 'tova', 'random']) {
    assert.equal(await sameAs(policy), 'h2o-sum', policy);
    assert.equal(await cell(page, policy, 0), await cell(page, 'h2o-sum', 0), `${policy}: the same KL`);
    assert.match(await page.locator(`#model-rows tr[data-policy="${policy}"] th`).textContent(), /= H2O \(sum/);
  }
  for (const policy of ['h2o-sum', 'streaming-llm', 'oracle']) assert.equal(await sameAs(policy), null, policy);
  assert.equal(await page.locator('#model-same').isVisible(), true);
  assert.match(await page.locator('#model-same').textContent(), /With B at most the recent window r/);
  // Above r the policies that rank choose differently, and the note goes.
  await set(page, 'budget', 96);
  assert.equal(await sameAs('snapkv'), null);
  assert.equal(await page.locator('#model-same').isVisible(),
    await page.locator('#model-rows tr[data-same-as]').count() > 0);
  assert.deepEqual(problems, []);
});

/** The trade-off sweep's answers so far (one per point, then one saying it is done). */
const sweeps = (page) => page.evaluate(() => performance.getEntriesByName('kvlab:model:sweep').length);
/** Waits for the `n`th sweep to be done. */
const swept = (page, n) => page.waitForFunction((want) => performance.getEntriesByName('kvlab:model:swept').length >= want,
  n, { timeout: 60_000 });

test('section 3b gains the model: its KL and top-1 per policy, and its KL against R_overall', async () => {
  const { page, problems } = await open(browser.context, urlWith({ budget: 16, recent: 8 }));
  const modelCols = page.locator('#compare th[data-col^="model-"]');
  assert.equal(await modelCols.first().isVisible(), false, 'generated data: no model columns');
  assert.equal(await page.locator('#compare-model').isVisible(), false);
  await page.locator('#model-run').click();
  await page.locator('#model-on:not([hidden]):not(.stale)').waitFor({ timeout: 60_000 });
  // (section 3b on screen: the sweep runs only there)
  await page.locator('#compare').scrollIntoViewIfNeeded();
  await swept(page, 1);
  await settle(page);
  // 8 curves (7 policies and the window alone), each of the powers of two below the prefill P
  // and P itself, then the answer that there are no more
  const T = new TextEncoder().encode(await page.locator('#model-prompt').inputValue()).length + 1;
  const P = T - Math.min(64, Math.floor(T / 4));
  const points = Math.ceil(Math.log2(P)) + 1;
  assert.equal(await sweeps(page), 8 * points + 1, `T ${T}, P ${P}`);
  assert.equal(await modelCols.count(), 2);
  assert.equal(await modelCols.first().isVisible(), true);
  // Each row's model figures are section 5's for the same policy, to the digit.
  const rows = await page.locator('#compare-rows tr').evaluateAll((trs) => trs.map((tr) => ({
    policy: tr.dataset.policy,
    kl: tr.querySelector('td[data-col="model-kl"]').dataset.value,
    top1: tr.querySelector('td[data-col="model-top1"]').dataset.value,
  })));
  assert.equal(rows.length, 7);
  for (const r of rows) {
    assert.equal(Number(r.kl), await cell(page, r.policy, 0), `${r.policy}: KL`);
    assert.equal(Number(r.top1), await cell(page, r.policy, 1), `${r.policy}: top-1`);
  }
  assert.ok(await inkShare(page, 'model-tradeoff') > 0.01, 'the model\'s trade-off is drawn');
  // B moves the ring only: the curves stay and the engine answers at once that it has them all.
  const before = await sweeps(page);
  await set(page, 'budget', 32);
  // (the control is in section 3: the sweep waits until 3b is back on screen)
  await page.locator('#compare').scrollIntoViewIfNeeded();
  await swept(page, 2);
  await settle(page);
  assert.equal(await sweeps(page), before + 1, 'B alone measures no curve again');
  // The bits change every curve: all eight are measured again.
  await set(page, 'bits', 2);
  await page.locator('#compare').scrollIntoViewIfNeeded();
  await swept(page, 3);
  await settle(page);
  assert.equal(await sweeps(page), before + 1 + 8 * points + 1);
  await page.locator('#use-generated').click();
  await settle(page);
  assert.equal(await modelCols.first().isVisible(), false, 'back to generated data: no model columns');
  assert.equal(await page.locator('#compare-model').isVisible(), false);
  assert.deepEqual(problems, []);
});

test('embed=compare on the model\'s link: the model\'s columns and curves, worded for the section alone', async () => {
  const { page, problems } = await open(browser.context, urlWith({
    data: 'model', prompt: 'And God said, Let there be light: and there was light.', model_layer: 0, model_head: -1,
    embed: 'compare', lang: 'en',
  }));
  await page.locator('#compare th[data-col="model-kl"]:visible').waitFor({ timeout: 60_000 });
  await swept(page, 1);
  await settle(page);
  assert.equal(await page.locator('#compare-model').isVisible(), true);
  // (the notes beside the model's figures point to no section the embed hides)
  const text = await page.locator('#compare').innerText();
  assert.match(text, /The last two columns are the real model’s/);
  assert.doesNotMatch(text, /section \d/i, text);
  assert.ok(await inkShare(page, 'model-tradeoff') > 0.01, 'the model\'s trade-off is drawn');
  const kl = await page.locator('#compare-rows td[data-col="model-kl"]').evaluateAll((tds) => tds.map((td) => Number(td.dataset.value)));
  assert.equal(kl.length, 7);
  assert.ok(kl.every((v) => Number.isFinite(v) && v >= 0), String(kl));
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

test('embed=model shows section 5 alone; its button runs the model there', async () => {
  const { page, problems } = await open(browser.context, urlWith({ embed: 'model', budget: 24 }));
  for (const id of ['data', 'budget', 'quant', 'select', 'compare', 'together', 'real-model']) {
    assert.equal(await page.locator(`#${id}`).isVisible(), id === 'real-model', `#${id}`);
  }
  await page.locator('#model-run').click();
  await page.locator('#model-on:not([hidden]):not(.stale)').waitFor({ timeout: 60_000 });
  await settle(page);
  assert.ok(await figure(page, 'model-kl') > 0, 'B = 24 loses something');
  assert.ok(await inkShare(page, 'kl') > 0.005, 'the KL chart is drawn');
  // the texts continue what was typed: the prompt's end, not a point three quarters in
  // (issue 37); a prompt that leaves no room to write 64 bytes is continued from its last 191
  assert.equal(await page.locator('#model-texts .line').count(), 4);
  const prompt = await page.locator('#model-prompt').inputValue();
  assert.ok((await page.locator('#model-texts .ctx').textContent()).endsWith(prompt.slice(-30)));
  const cut = Math.max(0, prompt.length - 191);
  assert.ok(cut > 0, `the default prompt (${prompt.length} bytes) is longer than 191`);
  assert.equal(await page.locator('#model-texts [data-cut]').getAttribute('data-cut'), String(cut));
  assert.match(await page.locator('#model-texts [data-cut]').textContent(),
    new RegExp(`^The texts continue the prompt’s last 191 bytes: .* the first ${cut} are left out`));
  assert.deepEqual(problems, []);
});

test('a one-byte prompt: the prefill is the BOS, one position is evaluated, no loss is made up', async () => {
  const { page, problems } = await open(browser.context, urlWith({ lang: 'en' }));
  await page.locator('#model-box summary').click();
  await run(page, { prompt: 'A' });
  await page.locator('#model-on:not([hidden]):not(.stale)').waitFor({ timeout: 60_000 });
  await settle(page);
  assert.match(await page.locator('[data-figure="model-protocol"]').textContent(),
    /^2 tokens \(the BOS and 1 byte\): the first 1 are the prefill.* the last 1 are read/);
  assert.ok(Number.isFinite(await figure(page, 'model-kl')));
  for (const name of ['model-nll-full', 'model-nll-compressed']) {
    assert.equal(await page.locator(`[data-figure="${name}"]`).textContent(), '—', name);
  }
  assert.deepEqual(problems, []);
});
