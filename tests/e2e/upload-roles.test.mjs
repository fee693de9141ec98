// Data in, the first time: any one tensor alone, roles matched by shape and then by name, a new
// pick replacing the list, Hugging Face cache names, only the controls that apply, warnings
// before "Use", and a link made on uploaded data. Each test has its own browser: an upload in
// use is kept for the next visit of the same browser.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, urlWith, figure, settle, npy, safetensors, expandRanges } from './helpers.mjs';

/** `S x T` attention whose row r sees tokens 0..=T-S+r, token 5 a heavy hitter; rows sum to 1. */
function attention(s, t) {
  const a = [];
  for (let r = 0; r < s; r += 1) {
    const row = new Array(t).fill(0);
    for (let i = 0; i <= t - s + r; i += 1) row[i] = i === 5 ? 10 : 1;
    const sum = row.reduce((x, y) => x + y, 0);
    a.push(...row.map((v) => v / sum));
  }
  return a;
}

/** `T x d` values with both signs (so they cannot be attention). */
const kv = (t, d, phase = 0) => Array.from({ length: t * d }, (_, i) => Math.sin(i * 0.37 + phase) * (1 + (i % d)));

const file = (name, buffer) => ({ name, mimeType: 'application/octet-stream', buffer });

/** A page in a browser of its own, the upload panel open. */
async function fresh(t, query = { budget: 20, recent: 4, lang: 'en' }) {
  const own = await launch();
  t.after(() => own.close());
  const { page, problems } = await open(own.context, urlWith(query));
  await page.locator('details.upload summary').click();
  return { page, problems, context: own.context };
}

async function pick(page, files, label = 'Upload files') {
  await page.getByLabel(label, { exact: true }).setInputFiles(files);
  await settle(page);
}

const selected = (page) => page.evaluate(() => ['#up-attention', '#up-keys', '#up-values']
  .map((id) => document.querySelector(id).value));
const description = (page) => page.locator('[data-figure="data-description"]').textContent();
const roles = (page) => page.locator('#upload-roles').textContent();
const useThem = async (page) => {
  await page.getByRole('button', { name: 'Use these tensors' }).click();
  await settle(page);
};
/** Which of the shape-dependent controls are shown. */
const shownControls = (page) => page.evaluate(() => Object.fromEntries(
  ['up-headmode', 'up-head', 'up-layer', 'up-kvhead', 'up-normalise']
    .map((id) => [id, !document.getElementById(id).closest('.control').hidden]),
));

test('attention alone: K and V are generated at its T, and the description says which part is which', async (t) => {
  const { page, problems } = await fresh(t);
  await pick(page, [file('attn.npy', npy([8, 50], attention(8, 50)))]);
  assert.deepEqual(await selected(page), ['attn.npy::attn.npy', '', ''], 'attention only: never the keys too');
  assert.equal(await roles(page), 'attention: attn.npy [8, 50], non-negative, every row sums to 1 · '
    + 'keys: none fits, generated · values: none fits, generated');
  // 2-D attention: no heads to pick; no K/V uploaded: no layer or KV head
  assert.deepEqual(await shownControls(page),
    { 'up-headmode': false, 'up-head': false, 'up-layer': false, 'up-kvhead': false, 'up-normalise': true });
  await useThem(page);
  assert.equal(await description(page), 'uploaded: attention [S=8, T=50]: 8 query steps over 50 tokens; '
    + 'generated: K and V T=50 x d=64 (4 outlier channels, 0 skewed), seed 1');
  assert.equal(await figure(page, 'kept-count'), 20);
  assert.ok(expandRanges(await page.locator('[data-figure="kept-indices"]').getAttribute('data-value')).includes(5),
    'the upload\'s heavy hitter is kept');
  assert.ok(await figure(page, 'rmse') > 0, 'the quantization section works on the generated K');
  assert.deepEqual(problems, []);
});

test('keys alone are keys (not refused as attention); values alone are values', async (t) => {
  const { page, problems } = await fresh(t);
  await pick(page, [file('x.npy', npy([50, 16], kv(50, 16)))]);
  assert.deepEqual(await selected(page), ['', 'x.npy::x.npy', '']);
  assert.match(await roles(page), /^attention: none fits, generated · keys: x\.npy \[50, 16\], the one tensor left · values: none fits, generated$/);
  await useThem(page);
  assert.equal(await description(page), 'uploaded: K [T=50, d=16]: 50 tokens x 16 channels; '
    + 'generated: heavy-hitters attention S=50 x T=50; V T=50 x d=16 (0 skewed channels), seed 1');
  assert.equal(await page.locator('.error:not([hidden])').count(), 0, 'no refusal');
  assert.equal(await figure(page, 'kept-count'), 20);

  await pick(page, [file('v.npy', npy([30, 8], kv(30, 8)))]);
  assert.deepEqual(await selected(page), ['', '', 'v.npy::v.npy'], 'the name says values');
  assert.match(await roles(page), /values: v\.npy \[30, 8\], the name says values/);
  await useThem(page);
  assert.match(await description(page), /^uploaded: V \[T=30, d=8\]: 30 tokens x 8 channels; generated: heavy-hitters attention S=30 x T=30; K T=30 x d=8 \(4 outlier channels, 0 skewed\), seed 1$/);
  assert.deepEqual(problems, []);
});

test('the note\'s 3 x 4 example alone, and a causal [T, T] alone, are attention only', async (t) => {
  const { page, problems } = await fresh(t);
  const example = JSON.stringify([[0.6, 0.2, 0.1, 0.1], [0.7, 0.1, 0.1, 0.1], [0.05, 0.05, 0.1, 0.8]]);
  await pick(page, [file('example.json', Buffer.from(example))]);
  assert.deepEqual(await selected(page), ['example.json::example.json', '', '']);
  await useThem(page);
  assert.match(await description(page), /^uploaded: attention \[S=3, T=4\]: 3 query steps over 4 tokens; generated: K and V T=4 x d=64/);
  assert.equal(await figure(page, 'kept-count'), 4, 'B follows T = 4');

  // Causal [128, 128]: used as attention alone; section 2 quantizes generated keys, not attention.
  const T = 128;
  const causal = [];
  for (let r = 0; r < T; r += 1) for (let c = 0; c < T; c += 1) causal.push(c <= r ? 1 / (r + 1) : 0);
  await pick(page, [file('c.npy', npy([T, T], causal))]);
  assert.deepEqual(await selected(page), ['c.npy::c.npy', '', '']);
  await useThem(page);
  assert.match(await description(page), /^uploaded: attention \[T=128, T=128\]: full causal matrix; the last rows are the observation window; generated: K and V T=128 x d=64/);
  assert.ok(await figure(page, 'max-abs-error') > 0.01, 'the keys quantized are the generated ones (attention weights are below 1)');
  assert.deepEqual(problems, []);
});

test('attention and keys with neutral names are matched by shape, in either order', async (t) => {
  const { page, problems } = await fresh(t);
  const a = file('first.npy', npy([8, 50], attention(8, 50)));
  const k = file('second.npy', npy([50, 16], kv(50, 16)));
  for (const [order, ids] of [[[a, k], ['first.npy::first.npy', 'second.npy::second.npy']],
    [[k, a], ['first.npy::first.npy', 'second.npy::second.npy']]]) {
    await pick(page, order);
    assert.deepEqual((await selected(page)).slice(0, 2), ids, `picked ${order.map((f) => f.name)}`);
    assert.match(await roles(page), /keys: second\.npy \[50, 16\], T = 50 matches the attention/);
    assert.doesNotMatch(await roles(page), /Check:/, 'nothing ambiguous');
  }
  await useThem(page);
  assert.match(await description(page), /^uploaded: attention \[S=8, T=50\]: 8 query steps over 50 tokens; K \[T=50, d=16\]: 50 tokens x 16 channels; generated: V T=50 x d=16/);

  // Two tensors that could each be K or V: the order decides, and the page says what to check.
  await pick(page, [file('x.npy', npy([50, 16], kv(50, 16, 1)))], 'Add files');
  assert.deepEqual(await selected(page), ['first.npy::first.npy', 'second.npy::second.npy', 'x.npy::x.npy']);
  assert.match(await roles(page), /Check: no name tells K from V: second\.npy is taken as K and x\.npy as V; swap them below if that is wrong$/);
  // A tensor whose T is not the attention's is left out, by name.
  await pick(page, [file('short.npy', npy([8, 16], kv(8, 16)))], 'Add files');
  assert.match(await roles(page), /short\.npy is not used: its T = 8, the data’s T = 50/);
  assert.deepEqual(problems, []);
});

test('a second pick replaces the files listed; Add files adds; Remove removes one', async (t) => {
  const { page, problems } = await fresh(t);
  const listed = () => page.locator('#file-list li[data-file]').evaluateAll((lis) => lis.map((li) => li.dataset.file));
  await pick(page, [file('a.npy', npy([8, 50], attention(8, 50)))]);
  await pick(page, [file('k.npy', npy([20, 4], kv(20, 4)))]);
  assert.deepEqual(await listed(), ['k.npy'], 'the first pick is gone');
  assert.deepEqual(await selected(page), ['', 'k.npy::k.npy', ''], 'and no select keeps it');
  const options = await page.locator('#up-attention option').evaluateAll((os) => os.map((o) => o.value));
  assert.deepEqual(options, ['', 'k.npy::k.npy']);
  await useThem(page);
  assert.match(await description(page), /^uploaded: K \[T=20, d=4\]/, '"Use" uses the new pick');

  await pick(page, [file('a.npy', npy([8, 20], attention(8, 20)))], 'Add files');
  assert.deepEqual(await listed(), ['k.npy', 'a.npy']);
  assert.deepEqual((await selected(page)).slice(0, 2), ['a.npy::a.npy', 'k.npy::k.npy']);
  await page.getByRole('button', { name: 'Remove k.npy' }).click();
  await settle(page);
  assert.deepEqual(await listed(), ['a.npy']);
  assert.deepEqual(await selected(page), ['a.npy::a.npy', '', '']);
  // A pick whose every file is refused leaves the list as it was.
  await pick(page, [file('broken.npy', Buffer.from('not a numpy file'))]);
  assert.deepEqual(await listed(), ['a.npy']);
  assert.ok(await page.locator('#file').locator('xpath=..').locator('.error').isVisible());
  assert.match(await description(page), /^uploaded: K \[T=20, d=4\]/, 'the data in use stays');
  assert.deepEqual(problems, []);
});

test('a Hugging Face capture: batch of 1 dropped, cache names give K and V of one layer', async (t) => {
  const { page, problems } = await fresh(t);
  const [H, T, d] = [2, 8, 4];
  const causal = [];
  for (let h = 0; h < H; h += 1) for (let r = 0; r < T; r += 1) for (let c = 0; c < T; c += 1) causal.push(c <= r ? 1 / (r + 1) : 0);
  const cache = safetensors([
    { name: 'attentions.5', shape: [1, H, T, T], values: causal },
    { name: 'past_key_values.5.key', shape: [1, H, T, d], values: kv(H * T, d) },
    { name: 'past_key_values.5.value', shape: [1, H, T, d], values: kv(H * T, d, 2) },
  ]);
  await pick(page, [file('capture.safetensors', cache)]);
  assert.deepEqual(await selected(page), ['capture.safetensors::attentions.5',
    'capture.safetensors::past_key_values.5.key', 'capture.safetensors::past_key_values.5.value']);
  assert.match(await roles(page), /values: past_key_values\.5\.value \[1, 2, 8, 4\], the name says values/);
  // heads to pick for both, no layer axis (the batch of 1 is dropped)
  assert.deepEqual(await shownControls(page),
    { 'up-headmode': true, 'up-head': false, 'up-layer': false, 'up-kvhead': true, 'up-normalise': true });
  await page.getByLabel('Heads', { exact: true }).selectOption('head');
  await settle(page);
  assert.equal((await shownControls(page))['up-head'], true, 'one head: its number');
  await useThem(page);
  assert.equal(await page.locator('.error:not([hidden])').count(), 0, 'no refusal');
  assert.equal(await description(page), 'uploaded: attention [H=2, T=8, T=8]: head 0 of 2 (heads 0 to 1); full causal matrix; '
    + 'the last rows are the observation window; K [H=2, T=8, d=4]: head 0 of 2 (heads 0 to 1); 8 tokens x 4 channels; '
    + 'V [H=2, T=8, d=4]: head 0 of 2 (heads 0 to 1); 8 tokens x 4 channels');
  assert.deepEqual(problems, []);
});

test('warnings show before Use and go when fixed; a tensor in two roles is refused before Use', async (t) => {
  const { page, problems } = await fresh(t);
  // rows summing to 2: attention by its name
  const doubled = attention(8, 50).map((v) => 2 * v);
  await pick(page, [file('attn.npy', npy([8, 50], doubled)), file('k.npy', npy([50, 16], kv(50, 16)))]);
  assert.deepEqual((await selected(page)).slice(0, 2), ['attn.npy::attn.npy', 'k.npy::k.npy']);
  const warnings = page.locator('#upload-warnings');
  assert.match(await warnings.textContent(), /^attn\.npy: 8 of 8 attention rows do not sum to 1/, 'before Use');
  await page.getByLabel('Normalise attention rows', { exact: true }).check();
  await settle(page);
  assert.equal(await warnings.isVisible(), false, 'normalised: the warning goes');
  await page.getByLabel('Normalise attention rows', { exact: true }).uncheck();
  await settle(page);
  assert.equal(await warnings.isVisible(), true);
  await page.getByLabel('Normalise attention rows', { exact: true }).check();
  await settle(page);

  await page.getByLabel('Values tensor', { exact: true }).selectOption('k.npy::k.npy');
  await settle(page);
  const useError = page.locator('#up-use').locator('xpath=..').locator('.error');
  assert.equal(await useError.textContent(),
    'k.npy cannot be both keys and values: choose another tensor, or none to generate the values');
  assert.match(await roles(page), /values: k\.npy \[50, 16\], chosen by hand/);
  await page.getByLabel('Values tensor', { exact: true }).selectOption('');
  await settle(page);
  assert.equal(await useError.isVisible(), false, 'fixed: the refusal goes');
  await useThem(page);
  assert.match(await description(page), /^uploaded: attention \[S=8, T=50\]/);
  assert.equal(await warnings.isVisible(), false, 'used normalised: no warning after Use either');

  // In 中文 the reasons and the refusal are worded in Chinese.
  await page.getByLabel('Values tensor', { exact: true }).selectOption('k.npy::k.npy');
  await settle(page);
  await page.getByRole('button', { name: 'Switch language' }).click();
  await page.waitForFunction(() => document.documentElement.lang === 'zh-CN');
  await settle(page);
  assert.equal(await useError.textContent(), 'k.npy 不能同时作为 Key 和 Value：请另选张量，或选“无”生成 Value');
  assert.match(await roles(page), /^注意力：attn\.npy \[8, 50\]，名字表明是注意力，非负，但并非每行之和都为 1 · Key：k\.npy \[50, 16\]，名字表明是 Key · Value：k\.npy \[50, 16\]，手动选择$/);
  assert.match(await description(page), /^上传数据：注意力 \[S=8, T=50\]：8 个查询步 × 50 个 token；K \[T=50, d=16\]：50 个 token × 16 个通道；生成数据：V 为 T=50 × d=16（0 个偏斜通道），种子 1$/);
  assert.deepEqual(problems, []);
});

test('a link made on uploaded data says so where it is opened, on generated data of the same shape', async (t) => {
  const { page, problems } = await fresh(t);
  await pick(page, [file('attn.npy', npy([8, 50], attention(8, 50))), file('k.npy', npy([50, 16], kv(50, 16)))]);
  await useThem(page);
  const link = page.url();
  assert.equal(new URL(link).searchParams.get('data'), 'upload', `the link says so: ${link}`);
  // Back to generated data: the marker goes.
  await page.getByRole('button', { name: 'Back to generated data' }).click();
  await settle(page);
  assert.equal(new URL(page.url()).searchParams.get('data'), null);

  // Elsewhere (a browser that never saw the files):
  const other = await launch();
  t.after(() => other.close());
  const { page: there, problems: thereProblems } = await open(other.context, link);
  const note = await there.locator('#url-warnings').textContent();
  assert.match(note, /this link was made on uploaded data, which a link cannot carry: shown on generated data of the same shape \(T=50, S=8, d=16\)/);
  assert.match(await description(there), /^generated: heavy-hitters attention S=8 x T=50, K and V T=50 x d=16/);
  assert.deepEqual([...problems, ...thereProblems], []);
});

test('the prompt\'s token texts: named in the roles, shown as the kept tokens, on a phone too', async (t) => {
  const own = await launch({ viewport: { width: 375, height: 800 } });
  t.after(() => own.close());
  const { page, problems } = await open(own.context, urlWith({ budget: 20, recent: 4, lang: 'en' }));
  await page.locator('details.upload summary').click();
  const texts = Array.from({ length: 50 }, (_, i) => (i === 5 ? ' cat' : i === 0 ? '<s>' : i % 7 === 0 ? '\n' : ` w${i}`));
  await pick(page, [file('attn.npy', npy([8, 50], attention(8, 50))), file('tokens.json', Buffer.from(JSON.stringify(texts)))]);
  assert.match(await page.locator('#file-list').textContent(), /tokens\.json: the text of 50 tokens/);
  assert.match(await roles(page), /· token texts: tokens\.json$/);
  await useThem(page);
  assert.match(await description(page), /^uploaded: attention \[S=8, T=50\]: 8 query steps over 50 tokens; token texts from tokens\.json; generated: /);
  const list = page.locator('[data-figure="kept-tokens"]');
  await list.scrollIntoViewIfNeeded();
  const chips = await list.locator('.tok').allTextContents();
  assert.equal(chips.length, 20, 'one per kept token');
  assert.ok(chips.includes('5‘ cat’'), `the heavy hitter by its text: ${chips.join(' | ')}`);
  assert.ok(chips.some((c) => c.endsWith('‘⏎’')), 'a line break shown, not broken');
  // On a phone: the list wraps between tokens, never inside one, and never runs off the screen.
  const layout = await list.evaluate((el) => ({
    overflow: el.scrollWidth - el.clientWidth,
    split: [...el.querySelectorAll('.tok')].filter((c) => c.getClientRects().length > 1).length,
    right: Math.max(...[...el.querySelectorAll('.tok')].map((c) => c.getBoundingClientRect().right)),
  }));
  assert.deepEqual([layout.overflow, layout.split], [0, 0]);
  assert.ok(layout.right <= 375, `inside the screen: ${layout.right}`);
  // The score chart names the heavy hitters: it differs from the same data without texts.
  const named = await page.locator('canvas[data-chart="scores"]').evaluate((c) => c.toDataURL());
  await page.getByRole('button', { name: 'Remove tokens.json' }).click();
  await settle(page);
  await useThem(page);
  assert.equal(await page.locator('#kept-tokens-row').isVisible(), false, 'without texts, no list');
  assert.notEqual(await page.locator('canvas[data-chart="scores"]').evaluate((c) => c.toDataURL()), named);
  // A list for another prompt is said before Use, and not used.
  await pick(page, [file('other.json', Buffer.from(JSON.stringify(['a', 'b'])))], 'Add files');
  assert.equal(await page.locator('#upload-warnings').textContent(),
    'other.json holds 2 token texts but the data has T=50: tokens are shown by index');
  assert.deepEqual(problems, []);
});
