// Section 5's needle test, as a learner uses it: a fact of their own typed in, answered by the
// full cache; at B = 32 the recent window forgets a fact 150 bytes back while SnapKV, which
// reads the question, keeps it (the model's tests guarantee this on its cases:
// crates/io/tests/lm_tasks.rs); the strip marks the fact's bytes; reading the question after
// the compression takes SnapKV's answer away; a fact that cannot be asked is refused in words
// and the last one stays; the accuracy chart's ring and line follow B.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, urlWith, settle, figureText, inkShare } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** The page on the model's data at `query`, section 5 on screen and its first fact answered. */
async function onModel(query) {
  const { page, problems } = await open(browser.context, urlWith(query));
  await page.locator('#model-box summary').click();
  await page.locator('#model-use').click();
  await settle(page);
  await page.locator('#real-model').scrollIntoViewIfNeeded();
  await page.locator('#needle-rows tr[data-policy="full"]').waitFor();
  return { page, problems };
}

/** Types a fact and waits for its answers. */
async function ask(page, key, value, distance) {
  const answered = () => page.evaluate(() => performance.getEntriesByName('kvlab:needle:answered').length);
  const n = await answered();
  await page.locator('#needle-key').fill(key);
  await page.locator('#needle-value').fill(value);
  await page.locator('#needle-distance').fill(String(distance));
  await page.waitForFunction((k) => performance.getEntriesByName('kvlab:needle:answered').length > k, n);
  await settle(page);
}

/** Every cache's answer: name -> [said, correct]. */
const answers = (page) => page.evaluate(() => Object.fromEntries([...document.querySelectorAll('#needle-rows tr[data-policy]')]
  .map((tr) => [tr.dataset.policy, [tr.querySelector('td.answer').dataset.value, tr.dataset.correct === 'true']])));

test('a fact of the learner\'s own: the full cache and SnapKV answer it, the recent window does not', async () => {
  const { page, problems } = await onModel('method=snapkv&budget=32&recent=16&window=8&pool=max&kernel=7&bits=16');
  await ask(page, 'Mirabel', '2026', 150);
  let a = await answers(page);
  assert.deepEqual(a.full, ['2026', true], JSON.stringify(a));
  assert.deepEqual(a.snapkv, ['2026', true], JSON.stringify(a));
  assert.equal(a['window-only'][1], false, JSON.stringify(a));
  assert.equal(await page.locator('#needle-rows tr.truth').textContent(), 'the fact: 2026');
  // the strip: the fact's bytes marked, SnapKV's cache (the method's) shaded, the number kept
  const strip = page.locator('#needle-prompt');
  assert.equal(await strip.getAttribute('data-fact'), 'The number of Mirabel is 2026.');
  assert.equal(await strip.getAttribute('data-shows'), 'snapkv');
  assert.equal((await strip.locator('.fact').allTextContents()).join(''), 'The number of Mirabel is 2026.');
  const valueShade = () => strip.evaluate((el) => [...el.querySelectorAll('.fact')]
    .filter((s) => /\d/.test(s.textContent)).map((s) => s.className.split(' ')[0]));
  assert.ok((await valueShade()).every((k) => k !== 'k0'), `SnapKV keeps the number: ${await valueShade()}`);
  // a click on the window's row shows its cache: the number in no head
  await page.locator('#needle-rows tr[data-policy="window-only"] button').click();
  assert.equal(await strip.getAttribute('data-shows'), 'window-only');
  assert.deepEqual([...new Set(await valueShade())], ['k0']);
  // read after the compression, SnapKV chose without the question: it loses the number
  await page.locator('#needle-before').uncheck();
  await page.waitForFunction(() => document.querySelector('#needle-rows tr[data-policy="snapkv"]')?.dataset.correct === 'false');
  a = await answers(page);
  assert.deepEqual(a.full, ['2026', true], 'the full cache needs no question first');
  assert.match(await figureText(page, 'needle-strip'), /window-only/);
  assert.match(await page.locator('[data-figure="needle-strip"]').textContent(), /read after the compression/);
  // the link carries the fact: opened elsewhere, the same fact is asked the same way
  await page.waitForFunction(() => new URLSearchParams(window.location.search).get('fact_asked') === 'after');
  const link = new URL(page.url());
  assert.equal(link.searchParams.get('fact_name'), 'Mirabel');
  assert.equal(link.searchParams.get('fact_number'), '2026');
  assert.equal(link.searchParams.get('fact_distance'), '150');
  const again = await open(browser.context, link.href);
  await again.page.locator('#needle-rows tr[data-policy="full"]').waitFor({ timeout: 60_000 });
  await settle(again.page);
  assert.equal(await again.page.locator('#needle-prompt').getAttribute('data-fact'), 'The number of Mirabel is 2026.');
  assert.equal(await again.page.locator('#needle-before').isChecked(), false);
  assert.deepEqual(await answers(again.page), a);
  assert.deepEqual(again.problems, []);
  assert.deepEqual(problems, []);
});

test('a fact that cannot be asked is refused in words beside its control, and the last one stays', async () => {
  const { page, problems } = await onModel('method=snapkv&budget=32');
  await ask(page, 'Mirabel', '2026', 100);
  const before = await answers(page);
  // B 32 at the default r 32: the recency policies keep one cache, and the table says so
  assert.equal(await figureText(page, 'needle-same'), '32/32');
  assert.equal(before.snapkv[0], before['window-only'][0], JSON.stringify(before));
  assert.match(await page.locator('[data-figure="needle-same"]').textContent(), /one cache, one answer/);
  await page.locator('#needle-value').fill('12.5');
  const error = page.locator('#needle-value').locator('xpath=..').locator('.error');
  await error.waitFor();
  assert.equal(await error.textContent(), 'The number “12.5” has “.”: use letters, digits and spaces.');
  assert.deepEqual(await answers(page), before, 'the last fact answered stays');
  // in Chinese too
  await page.locator('#lang').click();
  await settle(page);
  await page.locator('#needle-value').fill('1.5');
  await page.waitForFunction(() => /只能用字母/.test(document.querySelector('#needle-value').closest('.control').querySelector('.error').textContent));
  // the slider ends where the fact still fits
  await page.locator('#needle-value').fill('2026');
  await page.waitForFunction(() => document.querySelector('#needle-value').closest('.control').querySelector('.error').hidden);
  assert.equal(await page.locator('#needle-distance').getAttribute('max'), '195');
  await page.locator('#lang').click(); // (the language is kept in this browser: English again)
  await settle(page);
  // the learner's own text around the fact: the data section's prompt, or a refusal in words
  await page.locator('#needle-own').check();
  await page.waitForFunction(() => document.querySelector('#needle-prompt').textContent.startsWith('In the beginning God created'));
  assert.equal(await page.locator('#needle-prompt').getAttribute('data-fact'), 'The number of Mirabel is 2026.');
  await page.locator('#model-prompt').fill('In the beginning');
  await page.locator('#needle-own').uncheck();
  await page.locator('#needle-own').check();
  const own = page.locator('#needle-own').locator('xpath=../..').locator('.error');
  await own.waitFor();
  assert.match(await own.textContent(), /^The text has 16 bytes; the case needs \d+ around the fact: give more text\.$/);
  assert.deepEqual(problems, []);
});

test('the accuracy chart: every policy on 16 built-in facts, its line worded from the numbers, its ring following B', async () => {
  const { page, problems } = await onModel('method=snapkv&budget=32&recent=16&window=8&pool=max&kernel=7');
  const swept = () => page.evaluate(() => performance.getEntriesByName('kvlab:needle:swept').length);
  await page.waitForFunction(() => performance.getEntriesByName('kvlab:needle:swept').length > 0, null, { timeout: 120_000 });
  await settle(page);
  assert.ok(await inkShare(page, 'needle') > 0.01, 'the chart is drawn');
  const line = await page.locator('[data-figure="needle-order"]').textContent();
  assert.match(line, /^At B = 32 \(R_overall ≈ [\d.]+\), of 16 facts: /, line);
  assert.match(line, /The full cache recalls (9\d|100)%\./, line);
  // SnapKV in the first group, the recent window after it (the model's tests: 100% against 0-6%)
  const groups = line.split(': ')[1].split('. The full')[0].split(' > ');
  assert.ok(groups[0].includes('SnapKV') && groups[0].includes('oracle'), `two at 100% are one group: ${line}`);
  assert.ok(!groups[0].includes('recent window only'), line);
  const hash = await page.locator('canvas[data-chart="needle"]').evaluate((c) => c.toDataURL().length);
  // B 64: the ring moves (measured again), the curves stay
  const n = await swept();
  await page.getByLabel('Budget B, exact value').fill('64');
  await page.getByLabel('Budget B, exact value').press('Enter');
  await settle(page);
  // (measured only while section 5 is on screen: B's field scrolled it away)
  assert.equal(await page.locator('#needle-chart').getAttribute('class'), 'stale');
  await page.locator('#needle-chart').scrollIntoViewIfNeeded();
  await page.waitForFunction((k) => performance.getEntriesByName('kvlab:needle:swept').length > k, n, { timeout: 60_000 });
  await settle(page);
  assert.match(await page.locator('[data-figure="needle-order"]').textContent(), /^At B = 64 /);
  assert.notEqual(await page.locator('canvas[data-chart="needle"]').evaluate((c) => c.toDataURL().length), hash);
  assert.deepEqual(problems, []);
});

test('after a change, section 5 is busy and stale until its last figure lands, then every figure is the new one', async () => {
  const { page, problems } = await onModel('method=h2o&budget=32&recent=16');
  const row = () => page.evaluate(() => {
    const tr = document.querySelector('#model-rows tr[data-policy="h2o-sum"]');
    return tr ? [...tr.querySelectorAll('td')].map((td) => td.dataset.value).join('|') : null;
  });
  const before = await row();
  const headline = await page.locator('[data-figure="model-bytes"]').getAttribute('data-value');
  await page.getByLabel('Budget B, exact value').fill('64');
  await page.getByLabel('Budget B, exact value').press('Enter');
  // the headline lands first; the details follow once the controls rest
  await page.waitForFunction((h) => document.querySelector('[data-figure="model-bytes"]').dataset.value !== h, headline);
  await page.locator('body:not([data-busy])').waitFor({ timeout: 60_000 });
  // the moment data-busy clears, nothing of section 5 is left from B = 32
  const [atClear, stale] = [await row(), await page.locator('#model-on').getAttribute('class')];
  assert.notEqual(atClear, before, 'the policies\' table is B = 64\'s when data-busy clears');
  assert.ok(!(stale ?? '').includes('stale'), `section 5 not stale: ${stale}`);
  await new Promise((done) => { setTimeout(done, 1500); });
  assert.equal(await row(), atClear, 'nothing rewrote it later');
  assert.deepEqual(problems, []);
});

test('section 5 embedded alone carries its own fact, B, bits and method, and texts about what it shows', async () => {
  const { page, problems } = await open(browser.context, urlWith('embed=model&method=snapkv&budget=32&window=8&pool=max&kernel=7'));
  const section = page.locator('#real-model');
  assert.ok(await page.locator('#model-embed-controls').isVisible(), 'B, bits and method beside the section');
  assert.ok(!(await page.locator('#data').isVisible()), 'the data section is not shown');
  const off = await page.locator('#model-off').textContent();
  assert.match(off, /runs kvlab’s own language model/);
  await page.locator('#model-run').click();
  await page.locator('#needle-rows tr[data-policy="full"]').waitFor({ timeout: 60_000 });
  await settle(page);
  const words = await section.innerText();
  assert.doesNotMatch(words, /sections? (above|below|[1-4]\b)|section [1-4]\b/i, 'no text points to what the embed hides');
  assert.ok(await page.locator('#needle-key').isVisible(), 'the fact is the embed\'s own prompt');
  const bytes = await page.locator('[data-figure="model-bytes"]').getAttribute('data-value');
  await page.locator('#embed-budget').fill('64');
  await settle(page);
  assert.notEqual(await page.locator('[data-figure="model-bytes"]').getAttribute('data-value'), bytes, 'B moves the cache');
  assert.equal(await page.locator('output[for="embed-budget"]').textContent(), '64');
  await page.locator('#embed-method').selectOption('h2o');
  await settle(page);
  assert.equal(await page.locator('#needle-prompt').getAttribute('data-shows'), 'h2o-sum', 'the strip follows the method');
  assert.deepEqual(problems, []);
});

test('the data section offers the model as a first-class choice, and New here reaches section 5', async () => {
  const { page, problems } = await open(browser.context, urlWith(''));
  const path = await page.locator('.start a').evaluateAll((as) => as.map((a) => a.getAttribute('href')));
  assert.equal(path.at(-1), '#real-model', `${path}`);
  assert.ok(await page.locator('#data-model-run').isVisible(), 'visible without opening anything');
  await page.locator('#data-model-run').click();
  await settle(page);
  assert.ok(await page.locator('#model-on').isVisible(), 'section 5 shows the model');
  assert.match(await page.locator('[data-figure="data-description"]').textContent(), /the model’s layer/);
  assert.deepEqual(problems, []);
});
