// Browser test of the whole pipeline: the served page loads the wasm module, draws the channel
// chart, and reacts to the "Bits" slider as a person would use it.
//
// Run by `cargo xtask test`, which serves dist/ and sets KVLAB_URL (the page's URL, under a
// sub-path), KVLAB_CHROMIUM (the browser binary) and KVLAB_ARTIFACTS (where screenshots go).
// By hand: `cargo xtask serve` in one shell, then
// `KVLAB_URL=http://127.0.0.1:8000/ node --test tests/e2e/` in another.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const URL_UNDER_TEST = process.env.KVLAB_URL;
const EXECUTABLE = process.env.KVLAB_CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = process.env.KVLAB_ARTIFACTS || path.resolve('test-artifacts');

/** Flags that work as root on a closed network (see toolchain notes). */
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

let context;
let profile;

before(async () => {
  assert.ok(URL_UNDER_TEST, 'set KVLAB_URL to the served page, e.g. http://127.0.0.1:8000/');
  profile = mkdtempSync(path.join(tmpdir(), 'kvlab-chromium-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: EXECUTABLE,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 900, height: 1100 },
  });
});

after(async () => {
  await context?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

/** Opens a fresh tab that records console errors, page errors, failed and foreign requests. */
async function openPage(url) {
  const page = await context.newPage();
  const problems = [];
  const origin = new URL(url).origin;
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('request', (req) => {
    const u = new URL(req.url());
    if ((u.protocol === 'http:' || u.protocol === 'https:') && u.origin !== origin) {
      problems.push(`request to another origin: ${req.url()}`);
    }
  });
  page.on('requestfailed', (req) => problems.push(`request failed: ${req.url()}`));
  page.on('response', (res) => {
    if (res.status() >= 400) problems.push(`HTTP ${res.status()}: ${res.url()}`);
  });
  await page.goto(url);
  await page.locator('#quant[data-state="ready"]').waitFor({ timeout: 20_000 });
  return { page, problems };
}

async function figure(page, name) {
  const value = await page.locator(`[data-figure="${name}"]`).getAttribute('data-value');
  assert.ok(value !== null, `figure ${name} has a value`);
  const n = Number(value);
  assert.ok(Number.isFinite(n), `figure ${name} is a finite number, got ${value}`);
  return n;
}

/** Hash of the chart's pixels, once pending frames (resize redraws) have run. */
async function canvasHash(page) {
  await page.evaluate(
    () => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))),
  );
  const dataUrl = await page.locator('#channel-chart').evaluate((c) => c.toDataURL('image/png'));
  return createHash('sha256').update(dataUrl).digest('hex');
}

/** Share of the chart's pixels that are not white: a blank or failed chart is near 0. */
async function inkShare(page) {
  return page.locator('#channel-chart').evaluate((c) => {
    const { data } = c.getContext('2d').getImageData(0, 0, c.width, c.height);
    let ink = 0;
    for (let i = 0; i < data.length; i += 4) {
      if (data[i] < 235 || data[i + 1] < 235 || data[i + 2] < 235) ink += 1;
    }
    return ink / (data.length / 4);
  });
}

test('the Bits slider requantizes the keys and redraws the chart', { timeout: 60_000 }, async () => {
  const { page, problems } = await openPage(URL_UNDER_TEST);

  const bits = page.getByLabel('Bits', { exact: true });
  assert.equal(await bits.inputValue(), '8', 'the page opens at 8 bits');
  const err8 = await figure(page, 'max-abs-error');
  const ratio8 = await figure(page, 'r-quant');
  const hash8 = await canvasHash(page);
  assert.equal(await canvasHash(page), hash8, 'the chart is stable while nothing changes');
  const ink = await inkShare(page);
  assert.ok(ink > 0.03, `the chart has something drawn on it (${(ink * 100).toFixed(1)}% ink)`);
  assert.ok(err8 > 0, `8-bit keys have some error, got ${err8}`);
  assert.ok(ratio8 > 1, `8 bits from fp16 compresses, got R_quant ${ratio8}`);

  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, 'pipeline-8-bits.png'), fullPage: true });

  // As a person would: focus the slider and press the left arrow four times.
  await bits.focus();
  for (let i = 0; i < 4; i += 1) await page.keyboard.press('ArrowLeft');
  assert.equal(await bits.inputValue(), '4');
  await page.locator('#bits-value', { hasText: '4' }).waitFor();

  const err4 = await figure(page, 'max-abs-error');
  const ratio4 = await figure(page, 'r-quant');
  const hash4 = await canvasHash(page);
  assert.ok(err4 > err8, `max |x - x_hat| grows from 8 to 4 bits: ${err8} -> ${err4}`);
  assert.ok(ratio4 > ratio8, `R_quant grows from 8 to 4 bits: ${ratio8} -> ${ratio4}`);
  assert.notEqual(hash4, hash8, 'the chart changed');
  // The figure shown to a person matches the value behind it.
  const shown = await page.locator('[data-figure="max-abs-error"]').textContent();
  assert.ok(Math.abs(Number(shown) - err4) <= err4 * 0.01, `shown ${shown} ~ ${err4}`);
  // The state is in the URL, so a link reproduces the view.
  assert.match(page.url(), /[?&]bits=4\b/);

  await page.screenshot({ path: path.join(ARTIFACTS, 'pipeline-4-bits.png'), fullPage: true });
  assert.deepEqual(problems, [], 'no console errors, failed requests or foreign requests');
  await page.close();
});

test('a link with ?bits=3 opens at 3 bits', { timeout: 60_000 }, async () => {
  const url = new URL(URL_UNDER_TEST);
  url.searchParams.set('bits', '3');
  const { page, problems } = await openPage(url.href);
  assert.equal(await page.getByLabel('Bits', { exact: true }).inputValue(), '3');
  assert.equal(await page.locator('#bits-value').textContent(), '3');
  assert.deepEqual(problems, []);
  await page.close();
});
