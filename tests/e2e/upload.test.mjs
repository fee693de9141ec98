// Uploading real data through the file input: shapes reported, charts updated; a corrupt file
// shows its message and the data in use stays.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, urlWith, figure, canvasHash, settle, npy, expandRanges } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const S = 16;
const T = 40;
const D = 8;

function attention() {
  // causal rows: row r sees tokens 0..=T-S+r; token 5 is a heavy hitter
  const a = [];
  for (let r = 0; r < S; r += 1) {
    const visible = T - S + r + 1;
    const row = new Array(T).fill(0);
    for (let i = 0; i < visible; i += 1) row[i] = i === 5 ? 10 : 1;
    const sum = row.reduce((x, y) => x + y, 0);
    a.push(...row.map((v) => v / sum));
  }
  return a;
}

function keys() {
  return Array.from({ length: T * D }, (_, i) => Math.sin(i * 0.37) * (1 + (i % D)));
}

test('the file readers are a second wasm module, fetched on the first upload and only then', async () => {
  const { page, problems, requests } = await open(browser.context, urlWith({ budget: 20 }));
  // (its scalar or simd128 build, as the page's module: headless Chromium has SIMD)
  const fetched = (file) => requests.filter((u) => /\/pkg-upload(-simd)?\//.test(u) && new URL(u).pathname.endsWith(file)).length;
  assert.equal(fetched('/kvlab_upload_bg.wasm'), 0, 'a visit without uploads never fetches it');
  assert.equal(fetched('/kvlab_upload.js'), 0);
  await page.locator('details.upload summary').click();
  // (the second file is added to the first: a pick with "Upload files" replaces the list)
  for (const [name, label] of [['attn.npy', 'Upload files'], ['k.npy', 'Add files']]) {
    const buffer = name === 'k.npy' ? npy([T, D], keys()) : npy([S, T], attention());
    await page.getByLabel(label, { exact: true }).setInputFiles([
      { name, mimeType: 'application/octet-stream', buffer },
    ]);
    await page.locator('#file-list li', { hasText: name }).waitFor();
  }
  await settle(page);
  assert.equal(fetched('/kvlab_upload_bg.wasm'), 1, 'fetched once, kept for the second file');
  assert.match(await page.locator('#file-list').textContent(), /k\.npy.*\[40, 8\]/s);
  // the tensors chosen in the upload module reach the page's module
  await page.getByLabel('Attention tensor', { exact: true }).selectOption('attn.npy::attn.npy');
  await page.getByLabel('Keys tensor', { exact: true }).selectOption('k.npy::k.npy');
  await page.getByRole('button', { name: 'Use these tensors' }).click();
  await settle(page);
  assert.match(await page.locator('[data-figure="data-description"]').textContent(), /uploaded: attention \[S=16, T=40\]/);
  assert.equal(await figure(page, 'kept-count'), 20);
  // The generator's controls do nothing to uploaded data: off while it is in use (typing T
  // there used to take B along while the data stayed T = 40).
  const generator = () => page.locator('#data > .controls [data-key]').evaluateAll((cs) => cs.map((c) => c.disabled));
  assert.deepEqual(new Set(await generator()), new Set([true]));
  // back to generated data: an upload in use is saved for the next visit (this context's next test)
  await page.getByRole('button', { name: 'Back to generated data' }).click();
  await settle(page);
  assert.doesNotMatch(await page.locator('[data-figure="data-description"]').textContent(), /uploaded/);
  assert.deepEqual(new Set(await generator()), new Set([false]));
  assert.deepEqual(problems, []);
  await page.close();
});

test('the upload module failing to load: a message at the file control, the next upload tries again', async () => {
  const { page, problems } = await open(browser.context, urlWith({ budget: 20 }));
  const before = await figure(page, 'kept-count');
  await page.route('**/pkg-upload*/**', (route) => route.abort('internetdisconnected'));
  await page.locator('details.upload summary').click();
  const file = { name: 'attn.npy', mimeType: 'application/octet-stream', buffer: npy([S, T], attention()) };
  await page.getByLabel('Upload files', { exact: true }).setInputFiles([file]);
  const err = page.locator('#file').locator('xpath=..').locator('.error');
  await err.waitFor({ state: 'visible' });
  assert.match(await err.textContent(), /file readers \(pkg-upload(-simd)?\/kvlab_upload\.js\) could not be loaded.*upload the file again/s);
  assert.equal(await err.textContent(), await err.getAttribute('data-value'), 'in English, the engine\'s own words');
  await page.getByRole('button', { name: 'Switch language' }).click();
  await page.waitForFunction(() => document.documentElement.lang === 'zh-CN');
  assert.match(await err.textContent(), /^无法加载文件读取模块（pkg-upload(-simd)?\/kvlab_upload\.js）：.+。请检查网络连接，然后重新上传文件。$/);
  await page.locator('#lang').click();
  await page.waitForFunction(() => document.documentElement.lang === 'en');
  assert.equal(await figure(page, 'kept-count'), before, 'the data in use stays');
  await page.unroute('**/pkg-upload*/**');
  await page.getByLabel('Upload files', { exact: true }).setInputFiles([file]);
  await page.locator('#file-list li', { hasText: 'attn.npy' }).waitFor();
  await settle(page);
  assert.match(await page.locator('#file-list').textContent(), /attn\.npy.*\[16, 40\]/s);
  // the aborted fetch is the only problem
  assert.deepEqual(problems.filter((p) => !/request failed: .*\/pkg-upload(-simd)?\//.test(p)), []);
  assert.ok(problems.length >= 1, 'the blocked request was seen');
  await page.close();
});

test('upload .npy attention and keys: shapes shown, figures follow the data', async () => {
  const { page, problems } = await open(browser.context, urlWith({ budget: 20, recent: 4 }));
  const before = await canvasHash(page, 'attn');
  await page.locator('details.upload summary').click();
  await page.getByLabel('Upload files', { exact: true }).setInputFiles([
    { name: 'attn.npy', mimeType: 'application/octet-stream', buffer: npy([S, T], attention()) },
    { name: 'k.npy', mimeType: 'application/octet-stream', buffer: npy([T, D], keys()) },
  ]);
  await page.locator('#file-list li', { hasText: 'k.npy' }).waitFor(); // files load in order
  await settle(page);
  const listed = await page.locator('#file-list').textContent();
  assert.match(listed, /attn\.npy.*\[16, 40\]/s);
  assert.match(listed, /k\.npy.*\[40, 8\]/s);
  await page.getByLabel('Attention tensor', { exact: true }).selectOption('attn.npy::attn.npy');
  await page.getByLabel('Keys tensor', { exact: true }).selectOption('k.npy::k.npy');
  await page.getByRole('button', { name: 'Use these tensors' }).click();
  await settle(page);
  const desc = await page.locator('[data-figure="data-description"]').textContent();
  assert.match(desc, /uploaded: attention \[S=16, T=40\]/);
  assert.equal(await figure(page, 'kept-count'), 20);
  // the heavy hitter (token 5) is kept
  const ranges = await page.locator('[data-figure="kept-indices"]').getAttribute('data-value');
  const kept = expandRanges(ranges);
  assert.ok(kept.includes(5), `heavy hitter 5 kept: ${ranges}`);
  assert.notEqual(await canvasHash(page, 'attn'), before, 'the attention heatmap shows the upload');
  assert.equal(await page.getByLabel('Budget B', { exact: true }).getAttribute('max'), String(T));

  // A corrupt file: its message, and the data in use stays.
  const keptCount = await figure(page, 'kept-count');
  const rq = await figure(page, 'r-quant');
  await page.getByLabel('Add files', { exact: true }).setInputFiles([
    { name: 'broken.npy', mimeType: 'application/octet-stream', buffer: npy([S, T], attention()).subarray(0, 70) },
  ]);
  const err = page.locator('#file').locator('xpath=..').locator('.error');
  await err.waitFor({ state: 'visible' });
  assert.match(await err.textContent(), /broken\.npy/);
  assert.equal(await figure(page, 'kept-count'), keptCount);
  assert.equal(await figure(page, 'r-quant'), rq);
  assert.match(await page.locator('[data-figure="data-description"]').textContent(), /uploaded/);

  // Mismatched T between attention and keys is refused with both numbers named.
  await page.getByLabel('Add files', { exact: true }).setInputFiles([
    { name: 'k30.npy', mimeType: 'application/octet-stream', buffer: npy([30, D], keys().slice(0, 30 * D)) },
  ]);
  await page.locator('#file-list li', { hasText: 'k30.npy' }).waitFor();
  await page.getByLabel('Keys tensor', { exact: true }).selectOption('k30.npy::k30.npy');
  await page.getByRole('button', { name: 'Use these tensors' }).click();
  const useErr = page.locator('#up-use').locator('xpath=..').locator('.error');
  await useErr.waitFor({ state: 'visible' });
  assert.match(await useErr.textContent(), /40.*30|30.*40/);
  assert.equal(await figure(page, 'kept-count'), keptCount, 'the data in use stays');

  // The uploaded data survives a reload (IndexedDB) ...
  await page.reload();
  await page.locator('body[data-state="ready"]').waitFor();
  assert.match(await page.locator('[data-figure="data-description"]').textContent(), /uploaded: attention \[S=16, T=40\]/);
  assert.equal(await figure(page, 'kept-count'), keptCount);
  // ... also for a browser that saved it before the flag that says an upload is saved existed
  // (the page then starts on generated data and puts the upload back once it is up).
  assert.equal(await page.evaluate(() => localStorage.getItem('kvlab.upload')), '1');
  await page.evaluate(() => localStorage.removeItem('kvlab.upload'));
  await page.reload();
  await page.locator('body[data-state="ready"]').waitFor();
  await settle(page);
  assert.match(await page.locator('[data-figure="data-description"]').textContent(), /uploaded: attention \[S=16, T=40\]/);
  assert.equal(await figure(page, 'kept-count'), keptCount);
  assert.equal(await page.evaluate(() => localStorage.getItem('kvlab.upload')), '1');

  // ... until the user goes back to generated data.
  await page.getByRole('button', { name: 'Back to generated data' }).click();
  await settle(page);
  assert.match(await page.locator('[data-figure="data-description"]').textContent(), /generated/);
  await page.waitForFunction(() => localStorage.getItem('kvlab.upload') === '0');
  await page.reload();
  await page.locator('body[data-state="ready"]').waitFor();
  assert.match(await page.locator('[data-figure="data-description"]').textContent(), /generated/);
  assert.deepEqual(problems, []);
  await page.close();
});

/**
 * Uploads attention and keys through the file input and uses them (the upload is then saved
 * for the next visit). Waits for the last listed `k.npy`: an earlier test's may be listed too.
 */
async function uploadAndUse(page) {
  await page.locator('details.upload summary').click();
  await page.getByLabel('Upload files', { exact: true }).setInputFiles([
    { name: 'attn.npy', mimeType: 'application/octet-stream', buffer: npy([S, T], attention()) },
    { name: 'k.npy', mimeType: 'application/octet-stream', buffer: npy([T, D], keys()) },
  ]);
  await page.locator('#file-list li', { hasText: 'k.npy' }).last().waitFor();
  await settle(page);
  await page.getByLabel('Attention tensor', { exact: true }).selectOption('attn.npy::attn.npy');
  await page.getByLabel('Keys tensor', { exact: true }).selectOption('k.npy::k.npy');
  await page.getByRole('button', { name: 'Use these tensors' }).click();
  await settle(page);
}

test('Stop with uploaded data in use: the fresh worker gets the uploaded files back', async () => {
  const { page, problems } = await open(browser.context, urlWith({ budget: 20, recent: 4, lang: 'en' }));
  await uploadAndUse(page);
  const before = {
    desc: await page.locator('[data-figure="data-description"]').textContent(),
    kept: await page.locator('[data-figure="kept-indices"]').getAttribute('data-value'),
    err: await figure(page, 'max-abs-error'),
  };
  assert.match(before.desc, /uploaded/);
  // Stop works at any moment (the button is in the progress box; a script can press it too).
  await page.evaluate(() => document.querySelector('#stop').click());
  await page.locator('#url-warnings', { hasText: 'Stopped' }).waitFor({ timeout: 30_000 });
  await settle(page);
  assert.equal(await page.locator('[data-figure="data-description"]').textContent(), before.desc);
  assert.equal(await page.locator('[data-figure="kept-indices"]').getAttribute('data-value'), before.kept);
  assert.equal(await figure(page, 'max-abs-error'), before.err);
  // The new worker holds the uploaded tensors: a control change recomputes on them.
  await page.getByLabel('Bits', { exact: true }).fill('2');
  await settle(page);
  assert.ok(await figure(page, 'max-abs-error') > before.err, 'fewer bits, larger error, same data');
  assert.match(await page.locator('[data-figure="data-description"]').textContent(), /uploaded/);
  assert.deepEqual(problems, []);
  await page.close();
});

test('Stop while a saved upload is restored on load: generated data, the upload forgotten, the page works', async () => {
  const { page, problems } = await open(browser.context, urlWith({ budget: 20, recent: 4, lang: 'en' }));
  await uploadAndUse(page);
  assert.match(await page.locator('[data-figure="data-description"]').textContent(), /uploaded/);
  await page.close();

  // The next visit restores the saved upload; Stop is pressed the moment that starts.
  const next = await browser.context.newPage();
  const errors = [];
  next.on('pageerror', (e) => errors.push(e.message));
  next.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await next.addInitScript(() => {
    new PerformanceObserver((list, observer) => {
      if (!list.getEntries().some((e) => e.name === 'kvlab:load:restoring')) return;
      observer.disconnect();
      document.querySelector('#stop').click();
    }).observe({ type: 'mark' });
  });
  await next.goto(urlWith({ lang: 'en' }));
  await next.locator('body[data-state="ready"]').waitFor({ timeout: 30_000 });
  await settle(next);
  assert.match(await next.locator('#upload-warnings').textContent(), /Stopped/);
  assert.match(await next.locator('[data-figure="data-description"]').textContent(), /generated/);
  assert.equal(await next.locator('#file-list li').count(), 0, 'no file listed that the engine does not hold');
  // The page works: a control recomputes.
  const err = await figure(next, 'max-abs-error');
  await next.getByLabel('Bits', { exact: true }).fill('2');
  await settle(next);
  assert.notEqual(await figure(next, 'max-abs-error'), err);
  // And the upload is no longer restored.
  await next.reload();
  await next.locator('body[data-state="ready"]').waitFor({ timeout: 30_000 });
  assert.match(await next.locator('[data-figure="data-description"]').textContent(), /generated/);
  assert.deepEqual([...problems, ...errors], []);
  await next.close();
});

test('an upload is described in the page\'s language: file list, data description and warnings', async (t) => {
  // (its own browser: the language switch and the saved upload stay out of the other tests)
  const own = await launch();
  t.after(() => own.close()); // (also when it fails: an open browser keeps the process alive)
  const { page, problems } = await open(own.context, urlWith({ budget: 20, lang: 'en' }));
  // Two heads; head 1's rows sum to 1.3, which the warning names (as the f32 1.3000001).
  const heads = [...attention(), ...attention().map((v) => v * 1.3)];
  const csv = Array.from({ length: T }, (_, r) => keys().slice(r * D, (r + 1) * D).join(',')).join('\n');
  await page.locator('details.upload summary').click();
  await page.getByLabel('Upload files', { exact: true }).setInputFiles([
    { name: 'heads.npy', mimeType: 'application/octet-stream', buffer: npy([2, S, T], heads) },
    { name: 'k.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) },
    { name: 'v.npy', mimeType: 'application/octet-stream', buffer: npy([2, T, D], [...keys(), ...keys()]) },
  ]);
  await page.locator('#file-list li', { hasText: 'v.npy' }).waitFor();
  await page.getByLabel('Attention tensor', { exact: true }).selectOption('heads.npy::heads.npy');
  await page.getByLabel('Keys tensor', { exact: true }).selectOption('k.csv::k.csv');
  await page.getByLabel('Values tensor', { exact: true }).selectOption('v.npy::v.npy');
  await page.getByLabel('Heads', { exact: true }).selectOption('mean');
  await page.getByLabel('KV head', { exact: true }).fill('1');
  await page.getByRole('button', { name: 'Use these tensors' }).click();
  await settle(page);

  // What the page shows, and the engine's English line of each (data-value).
  const read = () => page.evaluate(() => {
    const pair = (el) => ({ text: el.textContent, engine: el.dataset.value });
    return {
      files: [...document.querySelectorAll('#file-list li[data-about]')]
        .map((li) => ({ text: li.querySelector('span').textContent, engine: li.dataset.value })),
      description: pair(document.querySelector('[data-figure="data-description"]')),
      warnings: pair(document.querySelector('#upload-warnings')),
    };
  });
  const en = await read();
  assert.equal(en.files.length, 3);
  // In English the page's words are the engine's own lines, for every format and field.
  for (const shown of [...en.files, en.description, en.warnings]) assert.equal(shown.text, shown.engine);
  assert.deepEqual(en.files.map((f) => f.text), [
    'heads.npy: npy 1.0, <f4 (float32), C order, shape [2, 16, 40]',
    'k.csv: comma-separated text, no header row, shape [40, 8]',
    'v.npy: npy 1.0, <f4 (float32), C order, shape [2, 40, 8]',
  ]);
  assert.equal(en.description.text, 'uploaded: attention [H=2, S=16, T=40]: mean over 2 heads; 16 query steps '
    + 'over 40 tokens; K [T=40, d=8]: 40 tokens x 8 channels; V [H=2, T=40, d=8]: head 1 of 2 (heads 0 to 1); '
    + '40 tokens x 8 channels');
  assert.match(en.warnings.text, /^heads\.npy: 16 of 32 attention rows do not sum to 1 \(±0\.01\); the worst is row \[1, \d+\] with sum 1\.3000001\. Normalise/);

  await page.getByRole('button', { name: 'Switch language' }).click();
  await settle(page);
  const zh = await read();
  assert.deepEqual(zh.files.map((f) => f.text), [
    'heads.npy：npy 1.0，<f4 (float32)，C 顺序，形状 [2, 16, 40]',
    'k.csv：逗号分隔的文本，无表头行，形状 [40, 8]',
    'v.npy：npy 1.0，<f4 (float32)，C 顺序，形状 [2, 40, 8]',
  ]);
  assert.equal(zh.description.text, '上传数据：注意力 [H=2, S=16, T=40]：2 个头的平均；16 个查询步 × 40 个 token；'
    + 'K [T=40, d=8]：40 个 token × 8 个通道；V [H=2, T=40, d=8]：2 个头中的第 1 个（头 0 到 1）；40 个 token × 8 个通道');
  assert.match(zh.warnings.text, /^heads\.npy：32 行注意力中有 16 行之和不为 1（±0\.01）；偏差最大的是第 \[1, \d+\] 行，和为 1\.3000001。/);
  // The numbers are the English line's.
  const numbers = (s) => s.match(/\d+(\.\d+)?/g);
  assert.deepEqual(numbers(zh.warnings.text).sort(), numbers(en.warnings.text).sort());
  for (const shown of [...zh.files, zh.description, zh.warnings]) assert.doesNotMatch(shown.text, /shape|uploaded|tokens|do not sum/);

  await page.getByRole('button', { name: '切换语言' }).click();
  await settle(page);
  assert.deepEqual(await read(), en, 'back in English: the same lines');
  assert.deepEqual(problems, []);
  await page.close();
});

test('an upload smaller than what its shape bounds (r above its T, outliers above its d) is used, bounds followed', async () => {
  // The defaults have r = 32 and 4 outlier channels; this upload has T = 24 and d = 2.
  const [s, t, d] = [8, 24, 2];
  // (last in this file: the upload in use is restored on this context's next visit)
  const { page, problems } = await open(browser.context, urlWith(''));
  await page.locator('details.upload summary').click();
  const a = Array.from({ length: s * t }, (_, i) => 1 + (i % 5));
  const k = Array.from({ length: t * d }, (_, i) => Math.cos(i));
  await page.getByLabel('Upload files', { exact: true }).setInputFiles([
    { name: 'a.npy', mimeType: 'application/octet-stream', buffer: npy([s, t], a) },
    { name: 'k.npy', mimeType: 'application/octet-stream', buffer: npy([t, d], k) },
  ]);
  await page.locator('#file-list li', { hasText: 'k.npy' }).waitFor();
  await settle(page);
  await page.getByLabel('Attention tensor', { exact: true }).selectOption('a.npy::a.npy');
  await page.getByLabel('Keys tensor', { exact: true }).selectOption('k.npy::k.npy');
  await page.getByRole('button', { name: 'Use these tensors' }).click();
  await settle(page);
  assert.equal(await page.locator('.error:not([hidden])').count(), 0, 'no refusal');
  assert.match(await page.locator('[data-figure="data-description"]').textContent(), /uploaded: attention \[S=8, T=24\]/);
  assert.equal(await page.locator('#recent').inputValue(), '24');
  assert.equal(await page.locator('#outliers').inputValue(), '2');
  // and the next change is computed on it
  await page.getByLabel('Bits', { exact: true }).fill('3');
  await settle(page);
  assert.equal(await page.locator('.error:not([hidden])').count(), 0);
  assert.match(await page.locator('[data-figure="data-description"]').textContent(), /uploaded/);
  assert.deepEqual(problems, []);
  await page.close();
});
