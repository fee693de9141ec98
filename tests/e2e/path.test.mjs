// A learner's first path: a line under the title with the order to read the sections in, one
// line per section of what to move first and what to watch, and a short explanation where each
// unusual term appears, in both languages.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, urlWith, settle } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const SECTIONS = ['data', 'budget', 'quant', 'select', 'compare', 'together'];

/** What a learner reads in `lang`: the path, each section's first line, the explanations. */
async function said(page) {
  return page.evaluate((sections) => {
    const text = (el) => el?.textContent.trim() ?? '';
    const control = (id) => document.getElementById(id).closest('.control');
    return {
      path: [...document.querySelectorAll('header .start a')].map((a) => a.getAttribute('href')),
      pathText: text(document.querySelector('header .start')),
      tries: Object.fromEntries(sections.map((s) => [s, text(document.querySelector(`#${s} .try`))])),
      scope: text(control('scope').querySelector('.help[data-i18n]')),
      parts: text(document.querySelector('#budget [data-i18n="explain.parts"]')),
      future: text(control('future').querySelector('.help[data-i18n]')),
      policies: text(document.querySelector('#compare [data-i18n="explain.policies"]')),
      sqrt: text(document.querySelector('canvas[data-chart="attn"]').closest('figure').querySelector('figcaption span')),
    };
  }, SECTIONS);
}

test('the page has a start, a line per section, and each unusual term explained where it appears, in both languages', async () => {
  const { page, problems } = await open(browser.context, urlWith({ lang: 'en' }));
  const en = await said(page);
  // Quantization, then selection, then the budget that adds them up, then both together, then
  // what compression does to a model (the needle issue: the first path reaches section 5).
  assert.deepEqual(en.path, ['#quant', '#select', '#budget', '#together', '#real-model']);
  assert.match(en.pathText, /^New here\?/);
  for (const s of SECTIONS) assert.ok(en.tries[s].length > 40, `${s}: ${en.tries[s]}`);
  assert.match(en.tries.quant, /drag Bits/);
  assert.match(en.tries.select, /drag B/);
  assert.match(en.scope, /Which heads share one choice of kept tokens/);
  assert.match(en.parts, /score state is the running attention score H2O keeps/);
  assert.match(en.future, /hidden from the policies and used to judge them/);
  assert.match(en.policies, /TOVA keeps what the last step attends to most/);
  assert.match(en.sqrt, /√a/);
  // Each line is there where its section is: the start's links reach their sections.
  await page.locator('header .start a[href="#together"]').click();
  await settle(page);
  assert.ok(await page.locator('#together').evaluate((s) => s.getBoundingClientRect().top < window.innerHeight / 2));
  await page.getByRole('button', { name: 'Switch language' }).click();
  await page.waitForFunction(() => document.documentElement.lang === 'zh-CN');
  await settle(page);
  const zh = await said(page);
  assert.match(zh.pathText, /^第一次来？/);
  for (const key of ['scope', 'parts', 'future', 'policies', 'sqrt']) {
    assert.ok(zh[key].length > 10 && zh[key] !== en[key], `${key} in Chinese: ${zh[key]}`);
  }
  for (const s of SECTIONS) assert.ok(zh.tries[s] && zh.tries[s] !== en.tries[s], `${s} in Chinese`);
  assert.deepEqual(problems, []);
  await page.close();
});
