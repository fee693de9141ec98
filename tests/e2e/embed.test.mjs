// Each section 1-4 (and 3b) gives its own `?embed=` link with the settings in use ("Copy embed
// link"), and a section shown alone states the settings it depends on (issue 38, item 6): the
// page had no way to make an embed link, and `?embed=together` spoke of "this link's bits"
// without saying them.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, urlWith, settle, screenshot } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const VIEW = { lang: 'en', bits: 3, budget: 64, model: 'llama-3-70b', method: 'snapkv', pattern: 'needle' };

/** What each embed must state (its own settings), and what it must not (another section's). */
const STATES = {
  budget: { has: ['Model = Llama-3-70B', 'Context length = ', 'Bits = 3', 'Budget B = 64'], not: ['Future steps'] },
  quant: { has: ['Bits = 3', 'Granularity = per-channel', 'Key bits = 2'], not: ['Budget B', 'Model ='] },
  select: { has: ['Budget B = 64', 'Method = SnapKV: observation window', 'Observation window w = 16'], not: ['Bits', 'Sinks'] },
  compare: { has: ['Bits = 3', 'Budget B = 64', 'Future steps held out = 16'], not: ['Model =', 'Context length'] },
  together: { has: ['Bits = 3', 'Budget B = 64', 'Scheme = symmetric', 'Index kind = index list'], not: ['Model =', 'Context length', 'Future steps', 'Key bits'] },
};

test('each section\'s "Copy embed link" copies its own ?embed= with the settings in use; the embed states them', async () => {
  await browser.context.grantPermissions(['clipboard-read', 'clipboard-write']);
  const { page, problems } = await open(browser.context, urlWith(VIEW));
  const links = {};
  for (const section of Object.keys(STATES)) {
    const button = page.locator(`#${section} .embed-link`);
    assert.ok(await button.isVisible(), `${section}: the button is in the section`);
    await button.click();
    const out = page.locator(`[data-figure="embed-link-${section}"]`);
    await out.waitFor();
    const link = await out.getAttribute('data-value');
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), link, `${section}: the link is what was copied`);
    const params = new URL(link).searchParams;
    assert.equal(params.get('embed'), section);
    for (const [k, v] of Object.entries(VIEW)) if (k !== 'lang') assert.equal(params.get(k), String(v), `${section}: the link keeps ${k}`);
    assert.equal(new URL(link).pathname, new URL(page.url()).pathname, 'the page\'s own address');
    links[section] = link;
  }
  // A link taken after a change carries it.
  await page.locator('#bits').fill('6');
  await settle(page);
  await page.locator('#quant .embed-link').click();
  assert.equal(new URL(await page.locator('[data-figure="embed-link-quant"]').getAttribute('data-value')).searchParams.get('bits'), '6');
  assert.deepEqual(problems, []);
  await page.close();

  for (const [section, { has, not }] of Object.entries(STATES)) {
    const embedded = await open(browser.context, links[section]);
    const e = embedded.page;
    assert.ok(await e.locator(`body.embed-${section}`).count(), `${section}: shown alone`);
    assert.equal(await e.locator('.embed-link:visible').count(), 0, 'no embed button inside an embed');
    const stated = e.locator(`[data-figure="embed-settings-${section}"]`);
    assert.ok(await stated.isVisible(), `${section}: the settings are stated`);
    const text = await stated.textContent();
    assert.match(text, /^Data: generated: needle attention S=64 x T=512.*\. Settings: /, 'the data is said');
    for (const x of has) assert.ok(text.includes(x), `${section} states "${x}": ${text}`);
    for (const x of not) assert.ok(!text.includes(x), `${section} does not state "${x}": ${text}`);
    if (section === 'together') await screenshot(e, 'embed-together');
    assert.deepEqual(embedded.problems, []);
    await e.close();
  }
  // In Chinese too (the embed has no language button: the link says the language).
  const zhLink = new URL(links.together);
  zhLink.searchParams.set('lang', 'zh');
  const zh = await open(browser.context, zhLink.href);
  const zhText = await zh.page.locator('[data-figure="embed-settings-together"]').textContent();
  assert.match(zhText, /^数据：生成数据：.*。设置：位宽 Bits = 3；/);
  assert.ok(!/Budget B|Model =|Scheme =|; /.test(zhText), `worded in Chinese: ${zhText}`);
  assert.deepEqual(zh.problems, []);
  await zh.page.close();
});
