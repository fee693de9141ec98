// Each section answers its controls as the math says.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, urlWith, figure, figureText, setNumber, choose, canvasHash, settle, inkShare } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test('selection: B 64 -> 32 halves kept-count; r stays kept; R_token doubles', async () => {
  const { page, problems } = await open(browser.context, urlWith({ budget: 64, recent: 8 }));
  assert.equal(await figure(page, 'kept-count'), 64);
  const rt64 = await figure(page, 'r-token');
  const bits = await figure(page, 'max-abs-error');
  const attn = await canvasHash(page, 'attn');
  await setNumber(page, 'Budget B', 32);
  assert.equal(await figure(page, 'kept-count'), 32);
  assert.equal(await figure(page, 'r-token'), rt64 * 2);
  // the recent window [T-8, T) is in the kept ranges (T = 512)
  assert.match(await figureText(page, 'kept-indices'), /504-511$/);
  assert.notEqual(await canvasHash(page, 'attn'), attn, 'the attention heatmap marks the new set');
  assert.equal(await figure(page, 'max-abs-error'), bits, 'B never changes the quantization');
  assert.deepEqual(problems, []);
  await page.close();
});

test('selection methods: SnapKV shows its window, StreamingLLM keeps the sinks', async () => {
  const { page, problems } = await open(browser.context, urlWith({ budget: 40, recent: 8 }));
  assert.equal(await page.getByLabel('Observation window w', { exact: true }).isVisible(), false);
  await choose(page, 'Method', 'snapkv');
  assert.equal(await page.getByLabel('Observation window w', { exact: true }).isVisible(), true);
  assert.equal(await figure(page, 'kept-count'), 40);
  await choose(page, 'Method', 'streaming');
  await setNumber(page, 'Sinks', 4);
  assert.equal(await figure(page, 'kept-count'), 40);
  assert.match(await figureText(page, 'kept-indices'), /^0-3,476-511$/);
  assert.match(page.url(), /method=streaming/);
  assert.deepEqual(problems, []);
  await page.close();
});

test('quantization: asymmetric on skewed data, groups, and a bad group size keeps the view', async () => {
  const { page, problems } = await open(browser.context, urlWith({ tokens: 64, skewed: 64, outliers: 0 }));
  const sym = await figure(page, 'max-abs-error');
  await choose(page, 'Scheme', 'asymmetric');
  const asym = await figure(page, 'max-abs-error');
  assert.ok(asym < sym, `on all-positive channels asymmetric beats symmetric: ${asym} < ${sym}`);
  // R_quant with metadata falls when groups get smaller (more scales stored)
  const r0 = await figure(page, 'r-quant');
  await setNumber(page, 'Group size', 8);
  const r8 = await figure(page, 'r-quant');
  assert.ok(r8 < r0, `more groups, more metadata: ${r8} < ${r0}`);
  // an invalid group size: message next to the control naming value and range; figures stay
  await setNumber(page, 'Group size', 1000);
  const msg = page.locator('#group').locator('xpath=..').locator('.error');
  await msg.waitFor({ state: 'visible' });
  assert.match(await msg.textContent(), /group size 1000 is out of range: must be between 1 and 64/);
  assert.equal(await figure(page, 'r-quant'), r8, 'the last good view stays');
  assert.deepEqual(problems, []);
  await page.close();
});

test('budget: the model extrapolation follows the preset and the context', async () => {
  const { page, problems } = await open(browser.context, urlWith({ seed: 1 }));
  const gib8b = await figure(page, 'gib-fp');
  // Llama-3-8B, 32k context, fp16: 2 x 32 x 8 x 128 x 2 B x 32768 = 4 GiB
  assert.equal(gib8b, 4);
  await choose(page, 'Model', 'llama-2-7b');
  assert.equal(await figure(page, 'gib-fp'), 16, 'MHA Llama-2-7B holds 4x the KV of GQA Llama-3-8B');
  await setNumber(page, 'Context length', 4096);
  assert.equal(await figure(page, 'gib-fp'), 2);
  const final = await figure(page, 'gib-final');
  assert.ok(final < 2, `compressed ${final} GiB < 2 GiB`);
  const bytesFinal = await figure(page, 'bytes-final');
  const rOverall = await figure(page, 'r-overall');
  assert.ok(Math.abs(rOverall - 131072 / bytesFinal) < 1e-9, 'R_overall = M_fp / M_final on the data');
  assert.deepEqual(problems, []);
  await page.close();
});

test('policy comparison: every policy in the table; the oracle bounds the mass on future steps', async () => {
  const { page, problems } = await open(browser.context, urlWith({ budget: 64, recent: 0, future: 16 }));
  const rows = page.locator('#compare-rows tr');
  assert.equal(await rows.count(), 7);
  const mass = async (policy) => Number(await page.locator(`#compare-rows tr[data-policy="${policy}"] td[data-col="mass-mean"]`).getAttribute('data-value'));
  const oracle = await mass('oracle');
  for (const p of ['h2o-sum', 'h2o-mean', 'snapkv', 'streaming-llm', 'tova', 'random']) {
    assert.ok(oracle >= (await mass(p)) - 1e-9, `oracle ${oracle} >= ${p}`);
  }
  // Halving B lowers H2O's retained mass (monotone in B).
  const h2o64 = await mass('h2o-sum');
  await setNumber(page, 'Budget B', 32);
  assert.ok((await mass('h2o-sum')) <= h2o64);
  // With no future steps held out the oracle cannot run and says why.
  await setNumber(page, 'Future steps held out', 0);
  assert.match(await page.locator('#compare-rows tr[data-policy="oracle"]').textContent(), /future|rows/i);
  assert.ok(await inkShare(page, 'tradeoff') > 0.01, 'the trade-off chart is drawn');
  assert.deepEqual(problems, []);
  await page.close();
});

test('GQA: per-query-head selection makes the cache hold a K/V copy per query head', async () => {
  const { page, problems } = await open(browser.context, urlWith({ seed: 1 }));
  const shared = await figure(page, 'gib-final');
  await choose(page, 'Selection scope', 'query-head');
  assert.equal(await figure(page, 'scope-copies'), 4, 'Llama-3-8B: 32 query heads over 8 KV heads');
  assert.ok((await figure(page, 'gib-final')) > 3.5 * shared, 'about 4x the compressed cache');
  assert.deepEqual(problems, []);
  await page.close();
});

test('formulas patched in place after changes equal the formulas of a fresh load of the same view', async () => {
  const { page, problems } = await open(browser.context, urlWith({ bits: 8, budget: 64, recent: 8 }));
  const formulas = (p) => p.evaluate(() => Object.fromEntries(
    [...document.querySelectorAll('.formula[id]')].map((f) => [f.id, f.innerHTML])));
  const before = await formulas(page);
  // Numbers change (bits, B), the shape changes (scheme: symmetric has no zero point), and back.
  await setNumber(page, 'Bits', 3);
  await choose(page, 'Scheme', 'asymmetric');
  await setNumber(page, 'Budget B', 40);
  await choose(page, 'Scheme', 'symmetric');
  await setNumber(page, 'Bits', 5);
  await settle(page);
  const patched = await formulas(page);
  assert.notDeepEqual(patched, before, 'the changes show in the formulas');
  const fresh = await open(browser.context, page.url());
  assert.deepEqual(patched, await formulas(fresh.page));
  assert.deepEqual(problems, []);
  assert.deepEqual(fresh.problems, []);
  await fresh.page.close();
  await page.close();
});

test('a quantization control redraws what it changes, not the policy strips (which tokens each policy keeps)', async () => {
  const { page, problems } = await open(browser.context, urlWith({ bits: 4, budget: 64 }));
  // Charts drawn by the update (on screen) or after it (the catch-up of what is off screen).
  const drawn = () => page.evaluate(() => performance.getEntriesByType('measure')
    .map((m) => /^kvlab:(?:later:)?draw:(.*)$/.exec(m.name)?.[1]).filter(Boolean));
  const strips = await canvasHash(page, 'strips');
  await page.evaluate(() => performance.clearMeasures());
  await setNumber(page, 'Bits', 3);
  const afterBits = await drawn();
  for (const chart of ['hist', 'errmap', 'tradeoff', 'budget-data']) assert.ok(afterBits.includes(chart), `${chart} redrawn: ${afterBits}`);
  assert.ok(!afterBits.includes('strips'), `strips not redrawn on a bits change: ${afterBits}`);
  assert.equal(await canvasHash(page, 'strips'), strips);
  await page.evaluate(() => performance.clearMeasures());
  await setNumber(page, 'Budget B', 32);
  assert.ok((await drawn()).includes('strips'), 'B changes the kept tokens: strips redrawn');
  assert.notEqual(await canvasHash(page, 'strips'), strips);
  assert.deepEqual(problems, []);
  await page.close();
});

test('levers: both measured by the output error, its rise shown with its sign; the verdict follows the rates; a lever that saves nothing is not one', async () => {
  const shown = (p, name) => p.locator(`[data-figure="${name}"]`).first().textContent();
  const { page, problems } = await open(browser.context, urlWith({ seed: 1, lang: 'en' }));
  // One measure for both rows (it was the RMSE of K for one and the mass retained for the other,
  // and their "% per KiB" were set against each other).
  for (const name of ['bits', 'tokens']) {
    assert.match(await shown(page, `lever-${name}-cost`), /^output error [\d.]+% → [\d.]+% \(\+[\d.]+ points\)$/);
    assert.match(await shown(page, `lever-${name}-per`), /^\+[\d.]+ points \/ KiB$/);
    assert.ok(await figure(page, `lever-${name}-per`) > 0);
  }
  const [bits, tokens] = [await figure(page, 'lever-bits-per'), await figure(page, 'lever-tokens-per')];
  assert.equal(await shown(page, 'lever-verdict'), bits <= tokens
    ? 'On this data, one bit fewer raises the output error less per byte saved.'
    : 'On this data, 10% fewer tokens raise the output error less per byte saved.');
  // At 8 bits one bit fewer costs almost no output error: the verdict turns to the bits.
  await setNumber(page, 'Bits', 8);
  assert.ok(await figure(page, 'lever-bits-per') < await figure(page, 'lever-tokens-per'));
  assert.equal(await shown(page, 'lever-verdict'), 'On this data, one bit fewer raises the output error less per byte saved.');
  await page.close();
  // One token of one channel: one bit fewer saves no byte (its codes fill one byte either way).
  const tiny = await open(browser.context, urlWith({ tokens: 1, steps: 1, channels: 1 }));
  assert.equal(await shown(tiny.page, 'lever-bits-per'), 'not possible here');
  assert.doesNotMatch(await tiny.page.locator('#together').textContent(), /Infinity|NaN/);
  assert.deepEqual([...problems, ...tiny.problems], []);
  await tiny.page.close();
});

test('the keep formula shows no empty range; a small model\'s cache is not 0.000 GiB', async () => {
  const keep = async (query) => {
    const { page, problems } = await open(browser.context, urlWith(query));
    const text = await page.locator('#f-keep').textContent();
    assert.deepEqual(problems, []);
    await page.close();
    return text;
  };
  // No sinks: the recent window alone; sinks filling B: no recent range {513…512}.
  assert.match(await keep('method=streaming&sinks=0&budget=20'), /^𝒦=\{493…512\}s = 0$/);
  assert.match(await keep('method=streaming&sinks=128'), /^𝒦=\{1…128\}s = 128$/);
  // r = 0: TopK alone and the empty set for the recent window.
  assert.match(await keep('recent=0'), /=TopK\(score,128\)∪∅$/);
  const { page, problems } = await open(browser.context,
    urlWith('model=custom&layers=2&kv_heads=3&head_dim=5&fp_bytes=4&context=100&batch=3'));
  const text = await page.locator('#budget figcaption').nth(1).textContent();
  assert.doesNotMatch(text, /0\.000 GiB/);
  assert.match(text, /KiB \/ [\d.]+ KiB/);
  assert.deepEqual(problems, []);
  await page.close();
});
