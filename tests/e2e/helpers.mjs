// Shared helpers of the browser tests: one Chromium per test file, pages that record every
// console error and every request to another origin, figure readers, canvas hashes.
//
// `cargo xtask test` serves dist/ under a sub-path and sets KVLAB_URL, KVLAB_CHROMIUM and
// KVLAB_ARTIFACTS. By hand: `cargo xtask serve`, then
// `KVLAB_URL=http://127.0.0.1:8000/ node --test tests/e2e/`.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

export const BASE = process.env.KVLAB_URL;
export const ARTIFACTS = process.env.KVLAB_ARTIFACTS || path.resolve('test-artifacts');
const EXECUTABLE = process.env.KVLAB_CHROMIUM || '/usr/bin/chromium';

/** Flags that work as root on a closed network (see the toolchain notes). */
const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

/** Starts a browser with a fresh profile; returns `{context, close}`. */
export async function launch(options = {}) {
  assert.ok(BASE, 'set KVLAB_URL to the served page, e.g. http://127.0.0.1:8000/');
  const profile = mkdtempSync(path.join(tmpdir(), 'kvlab-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: EXECUTABLE,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: 1000 },
    acceptDownloads: true,
    ...options,
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** The page URL with `query` (a string or an object of parameters). */
export function urlWith(query = '') {
  const url = new URL(BASE);
  if (typeof query === 'string') {
    url.search = query;
  } else {
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, String(v));
  }
  return url.href;
}

/**
 * `page.goto(url)` until the document is there. A navigation that gets no document in 20 s is
 * tried once more, said on stderr with the requests still open. In 3 CI runs of 10 on
 * 2026-11-30 a freshly launched browser's first navigation got no document in 30 s: the test
 * server then (tiny_http) could leave a new connection unanswered behind connections another
 * browser kept open. The server now gives each connection its own thread; the retry stays as a
 * guard that says when it was needed. What the tests check starts after it.
 */
export async function navigate(page, url) {
  // Requests still open when the time runs out, with their age (said with the retry).
  const open = new Map();
  const start = (req) => open.set(req, Date.now());
  const end = (req) => open.delete(req);
  page.on('request', start);
  page.on('requestfinished', end);
  page.on('requestfailed', end);
  try {
    await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 20_000 });
  } catch (e) {
    if (e?.name !== 'TimeoutError') throw e;
    const now = Date.now();
    const pending = [...open].map(([req, t]) => `${req.url()} (open ${now - t} ms)`);
    console.error(`navigate: no document from ${url} in 20 s; requests open: `
      + `${pending.join(', ') || 'none'}; trying once more`);
    await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 30_000 });
  } finally {
    page.off('request', start);
    page.off('requestfinished', end);
    page.off('requestfailed', end);
  }
}

/** Opens a tab recording console errors, page errors, failed and foreign requests. */
export async function open(context, url, { waitReady = true, init = null } = {}) {
  const page = await context.newPage();
  // A script run before the page's own (a setting the page reads at start).
  if (init) await page.addInitScript(init);
  const problems = [];
  const requests = [];
  const origin = new URL(url).origin;
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('request', (req) => {
    requests.push(req.url());
    const u = new URL(req.url());
    if ((u.protocol === 'http:' || u.protocol === 'https:') && u.origin !== origin) {
      problems.push(`request to another origin: ${req.url()}`);
    }
  });
  page.on('requestfailed', (req) => problems.push(`request failed: ${req.url()}`));
  page.on('response', (res) => {
    if (res.status() >= 400) problems.push(`HTTP ${res.status()}: ${res.url()}`);
  });
  await navigate(page, url);
  if (waitReady) {
    await page.locator('body[data-state="ready"]').waitFor({ timeout: 30_000 });
    await settle(page);
  }
  return { page, problems, requests };
}

/**
 * Waits until the page is up to date (no change waiting, no request with the engine: the page
 * clears `body[data-busy]` then; nothing off screen left for the catch-up: `body[data-stale]`),
 * then two animation frames so the result is painted.
 */
export async function settle(page) {
  await page.locator('body:not([data-busy]):not([data-stale])').waitFor({ timeout: 60_000 });
  await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
}

/** A figure's exact value (`data-value`) as a number. */
export async function figure(page, name) {
  const value = await page.locator(`[data-figure="${name}"]`).first().getAttribute('data-value');
  assert.ok(value !== null, `figure ${name} has a value`);
  const n = Number(value);
  assert.ok(Number.isFinite(n), `figure ${name} is a finite number, got ${value}`);
  return n;
}

/** A figure's raw `data-value` string. */
export async function figureText(page, name) {
  return page.locator(`[data-figure="${name}"]`).first().getAttribute('data-value');
}

/** The indices of compact ranges such as `0-3,17,480-511` (the page's kept sets); [] for ''. */
export function expandRanges(text) {
  return (text ? text.split(',') : []).flatMap((r) => {
    const [a, b = a] = r.split('-').map(Number);
    return Array.from({ length: b - a + 1 }, (_, i) => a + i);
  });
}

/** Sets a range or number input the way a person would (select all, type, Enter). */
export async function setNumber(page, label, value) {
  const input = page.getByLabel(label, { exact: true });
  const type = await input.getAttribute('type');
  if (type === 'range') {
    await input.focus();
    await input.fill(String(value)); // playwright sets the value and fires input + change
  } else {
    await input.fill(String(value));
    await input.press('Enter');
    await input.dispatchEvent('change');
  }
  await settle(page);
}

/** Picks an option of a select by its value. */
export async function choose(page, label, value) {
  await page.getByLabel(label, { exact: true }).selectOption(value);
  await settle(page);
}

/** sha256 of a chart canvas's pixels. */
export async function canvasHash(page, chart) {
  await settle(page);
  const dataUrl = await page.locator(`canvas[data-chart="${chart}"]`).evaluate((c) => c.toDataURL('image/png'));
  return createHash('sha256').update(dataUrl).digest('hex');
}

/** Share of a canvas's pixels that differ from its corner (background) pixel. */
export async function inkShare(page, chart) {
  await settle(page);
  return page.locator(`canvas[data-chart="${chart}"]`).evaluate((c) => {
    // The chart canvases belong to the worker (transferred): read them through a copy.
    const copy = document.createElement('canvas');
    copy.width = c.width;
    copy.height = c.height;
    const ctx = copy.getContext('2d');
    ctx.drawImage(c, 0, 0);
    const { data } = ctx.getImageData(0, 0, c.width, c.height);
    const [r0, g0, b0] = [data[0], data[1], data[2]];
    let ink = 0;
    for (let i = 0; i < data.length; i += 4) {
      if (Math.abs(data[i] - r0) + Math.abs(data[i + 1] - g0) + Math.abs(data[i + 2] - b0) > 30) ink += 1;
    }
    return ink / (data.length / 4);
  });
}

export async function screenshot(page, name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** Bytes of a little-endian float32 .npy file (version 1.0) of `shape` holding `values`. */
export function npy(shape, values) {
  const dims = shape.length === 1 ? `${shape[0]},` : shape.join(', ');
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${dims}), }`;
  while ((10 + header.length + 1) % 64 !== 0) header += ' ';
  header += '\n';
  const out = Buffer.alloc(10 + header.length + values.length * 4);
  out.write('\x93NUMPY', 0, 'latin1');
  out[6] = 1;
  out[7] = 0;
  out.writeUInt16LE(header.length, 8);
  out.write(header, 10, 'latin1');
  values.forEach((v, i) => out.writeFloatLE(v, 10 + header.length + i * 4));
  return out;
}

/**
 * A .safetensors file of float32 tensors (`[{name, shape, values}]`, in that order) with an
 * optional `__metadata__` object of strings.
 */
export function safetensors(tensors, metadata = null) {
  const header = {};
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: 'F32', shape: t.shape, data_offsets: [offset, offset + 4 * t.values.length] };
    offset += 4 * t.values.length;
  }
  if (metadata) header.__metadata__ = metadata;
  const head = Buffer.from(JSON.stringify(header));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(head.length));
  const data = Buffer.alloc(offset);
  let at = 0;
  for (const t of tensors) for (const v of t.values) { data.writeFloatLE(v, at); at += 4; }
  return Buffer.concat([length, head, data]);
}
