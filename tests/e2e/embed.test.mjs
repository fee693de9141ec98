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

for (const [section, { has, not }] of Object.entries(STATES)) {
  test(`section ${section}: "Copy embed link" copies its own ?embed= with the settings in use; the embed states them`, async () => {
    await browser.context.grantPermissions(['clipboard-read', 'clipboard-write']);
    const { page, problems } = await open(browser.context, urlWith(VIEW));
    const button = page.locator(`#${section} .embed-link`);
    assert.ok(await button.isVisible(), 'the button is in the section');
    await button.click();
    const out = page.locator(`[data-figure="embed-link-${section}"]`);
    await out.waitFor();
    const link = await out.getAttribute('data-value');
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), link, 'the link is what was copied');
    const params = new URL(link).searchParams;
    assert.equal(params.get('embed'), section);
    for (const [k, v] of Object.entries(VIEW)) if (k !== 'lang') assert.equal(params.get(k), String(v), `the link keeps ${k}`);
    assert.equal(new URL(link).pathname, new URL(page.url()).pathname, 'the page\'s own address');

    const embedded = await open(browser.context, link);
    const e = embedded.page;
    assert.ok(await e.locator(`body.embed-${section}`).count(), 'shown alone');
    assert.equal(await e.locator('.embed-link:visible').count(), 0, 'no embed button inside an embed');
    const stated = e.locator(`[data-figure="embed-settings-${section}"]`);
    assert.ok(await stated.isVisible(), 'the settings are stated');
    const text = await stated.textContent();
    assert.match(text, /^Data: generated: needle attention S=64 x T=512.*\. Settings: /, 'the data is said');
    for (const s of has) assert.ok(text.includes(s), `${section} states "${s}": ${text}`);
    for (const s of not) assert.ok(!text.includes(s), `${section} does not state "${s}": ${text}`);
    if (section === 'together') await screenshot(e, 'embed-together');
    // In Chinese too (the embed has no language button: the link says the language).
    const zhLink = new URL(link);
    zhLink.searchParams.set('lang', 'zh');
    const zh = await open(browser.context, zhLink.href);
    const zhText = await zh.page.locator(`[data-figure="embed-settings-${section}"]`).textContent();
    assert.match(zhText, /^数据：生成数据：.*。设置：/);
    assert.ok(!/Budget B|Model =|Scheme =|; /.test(zhText), `worded in Chinese: ${zhText}`);
    assert.deepEqual(zh.problems, []);
    await zh.page.close();
    assert.deepEqual(embedded.problems, []);
    assert.deepEqual(problems, []);
    await e.close();
    await page.close();
  });
}

test('the embed link follows the settings: one taken after a change carries it', async () => {
  await browser.context.grantPermissions(['clipboard-read', 'clipboard-write']);
  const { page, problems } = await open(browser.context, urlWith({ lang: 'en' }));
  await page.locator('#bits').fill('6');
  await settle(page);
  await page.locator('#quant .embed-link').click();
  const link = await page.locator('[data-figure="embed-link-quant"]').getAttribute('data-value');
  assert.equal(new URL(link).searchParams.get('bits'), '6');
  assert.equal(new URL(link).searchParams.get('embed'), 'quant');
  assert.deepEqual(problems, []);
  await page.close();
});
