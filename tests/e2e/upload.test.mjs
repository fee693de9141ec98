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
  const fetched = (stem) => requests.filter((u) => new URL(u).pathname.endsWith(stem)).length;
  assert.equal(fetched('/pkg-upload/kvlab_upload_bg.wasm'), 0, 'a visit without uploads never fetches it');
  assert.equal(fetched('/pkg-upload/kvlab_upload.js'), 0);
  await page.locator('details.upload summary').click();
  for (const name of ['attn.npy', 'k.npy']) {
    const buffer = name === 'k.npy' ? npy([T, D], keys()) : npy([S, T], attention());
    await page.getByLabel('Upload files', { exact: true }).setInputFiles([
      { name, mimeType: 'application/octet-stream', buffer },
    ]);
    await page.locator('#file-list li', { hasText: name }).waitFor();
  }
  await settle(page);
  assert.equal(fetched('/pkg-upload/kvlab_upload_bg.wasm'), 1, 'fetched once, kept for the second file');
  assert.match(await page.locator('#file-list').textContent(), /k\.npy.*\[40, 8\]/s);
  // the tensors chosen in the upload module reach the page's module
  await page.getByLabel('Attention tensor', { exact: true }).selectOption('attn.npy::attn.npy');
  await page.getByLabel('Keys tensor', { exact: true }).selectOption('k.npy::k.npy');
  await page.getByRole('button', { name: 'Use these tensors' }).click();
  await settle(page);
  assert.match(await page.locator('[data-figure="data-description"]').textContent(), /uploaded: attention \[S=16, T=40\]/);
  assert.equal(await figure(page, 'kept-count'), 20);
  // back to generated data: an upload in use is saved for the next visit (this context's next test)
  await page.getByRole('button', { name: 'Back to generated data' }).click();
  await settle(page);
  assert.doesNotMatch(await page.locator('[data-figure="data-description"]').textContent(), /uploaded/);
  assert.deepEqual(problems, []);
  await page.close();
});

test('the upload module failing to load: a message at the file control, the next upload tries again', async () => {
  const { page, problems } = await open(browser.context, urlWith({ budget: 20 }));
  const before = await figure(page, 'kept-count');
  await page.route('**/pkg-upload/**', (route) => route.abort('internetdisconnected'));
  await page.locator('details.upload summary').click();
  const file = { name: 'attn.npy', mimeType: 'application/octet-stream', buffer: npy([S, T], attention()) };
  await page.getByLabel('Upload files', { exact: true }).setInputFiles([file]);
  const err = page.locator('#file').locator('xpath=..').locator('.error');
  await err.waitFor({ state: 'visible' });
  assert.match(await err.textContent(), /file readers \(pkg-upload\/kvlab_upload\.js\) could not be loaded.*upload the file again/s);
  assert.equal(await figure(page, 'kept-count'), before, 'the data in use stays');
  await page.unroute('**/pkg-upload/**');
  await page.getByLabel('Upload files', { exact: true }).setInputFiles([file]);
  await page.locator('#file-list li', { hasText: 'attn.npy' }).waitFor();
  await settle(page);
  assert.match(await page.locator('#file-list').textContent(), /attn\.npy.*\[16, 40\]/s);
  // the aborted fetch is the only problem
  assert.deepEqual(problems.filter((p) => !/request failed: .*\/pkg-upload\//.test(p)), []);
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
  await page.getByLabel('Upload files', { exact: true }).setInputFiles([
    { name: 'broken.npy', mimeType: 'application/octet-stream', buffer: npy([S, T], attention()).subarray(0, 70) },
  ]);
  const err = page.locator('#file').locator('xpath=..').locator('.error');
  await err.waitFor({ state: 'visible' });
  assert.match(await err.textContent(), /broken\.npy/);
  assert.equal(await figure(page, 'kept-count'), keptCount);
  assert.equal(await figure(page, 'r-quant'), rq);
  assert.match(await page.locator('[data-figure="data-description"]').textContent(), /uploaded/);

  // Mismatched T between attention and keys is refused with both numbers named.
  await page.getByLabel('Upload files', { exact: true }).setInputFiles([
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
