// Screenshots of the page in light, dark and narrow layouts (test artifacts to look at), and
// the browser timing of control updates (printed, not asserted: benchmarks measure speed).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, urlWith, screenshot, setNumber, settle } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });

/**
 * Elements shown though marked hidden, captions with loose text, and elements reaching past
 * their panel's right edge.
 */
function layoutFaults(page) {
  return page.evaluate(() => {
    const name = (el) => `${el.tagName.toLowerCase()}${el.id ? `#${el.id}` : ''}${el.className && typeof el.className === 'string' ? `.${el.className.trim().split(/\s+/).join('.')}` : ''}`;
    const out = [];
    for (const el of document.querySelectorAll('[hidden]')) {
      if (getComputedStyle(el).display !== 'none') out.push(`${name(el)} is marked hidden but shown`);
    }
    // A caption is a flex row: loose text between its items would be laid out as items of its
    // own (a lone ':' or '(' on a line of its own on a phone).
    for (const caption of document.querySelectorAll('figcaption')) {
      for (const node of caption.childNodes) {
        if (node.nodeType === Node.TEXT_NODE && node.textContent.trim()) out.push(`figcaption has loose text '${node.textContent.trim()}'`);
      }
    }
    // What scrolls sideways (a formula, a table on a phone) shows that more is hidden.
    for (const el of document.querySelectorAll('.formula, table')) {
      if (el.scrollWidth > el.clientWidth + 1 && !getComputedStyle(el).backgroundImage.includes('radial-gradient')) {
        out.push(`${name(el)} scrolls sideways with nothing showing that it does`);
      }
    }
    for (const panel of document.querySelectorAll('.panel')) {
      const edge = panel.getBoundingClientRect().right;
      for (const el of panel.querySelectorAll('*')) {
        const box = el.getBoundingClientRect();
        if (!box.width || box.right <= edge + 0.5) continue;
        let scroller = el.parentElement;
        while (scroller !== panel && !/auto|scroll|hidden/.test(getComputedStyle(scroller).overflowX)) scroller = scroller.parentElement;
        if (scroller === panel) out.push(`${name(el)} ends at ${Math.round(box.right)} px, past its panel's ${Math.round(edge)}`);
      }
    }
    return out;
  });
}
after(async () => { await browser?.close(); });

for (const [name, opts] of [
  ['light', { colorScheme: 'light', width: 1280 }],
  ['dark', { colorScheme: 'dark', width: 1280 }],
  ['narrow', { colorScheme: 'light', width: 390 }],
]) {
  test(`screenshot: ${name}`, async () => {
    const page0 = await open(browser.context, urlWith({ seed: 1 }));
    const { page, problems } = page0;
    await page.emulateMedia({ colorScheme: opts.colorScheme });
    await page.setViewportSize({ width: opts.width, height: 1000 });
    await settle(page);
    await settle(page);
    // Nothing overflows the viewport sideways (a phone must not scroll horizontally).
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 1, `page is ${overflow}px wider than the viewport`);
    // With every disclosure open: nothing marked hidden is shown, and nothing sticks out of its
    // panel (what is wider scrolls inside a box of its own).
    await page.evaluate(() => { for (const d of document.querySelectorAll('details')) d.open = true; });
    assert.deepEqual(await layoutFaults(page), [], `${name}: layout`);
    await screenshot(page, `page-${name}`);
    for (const section of ['budget', 'quant', 'select', 'together']) {
      await page.locator(`#${section}`).screenshot({ path: `${process.env.KVLAB_ARTIFACTS || 'test-artifacts'}/section-${section}-${name}.png` });
    }
    assert.deepEqual(problems, []);
    await page.close();
  });
}

test('every option of every select fits its box, in both languages and at phone width', async () => {
  const { page, problems } = await open(browser.context, urlWith({ seed: 1 }));
  const cut = () => page.evaluate(() => {
    const ctx = document.createElement('canvas').getContext('2d');
    const out = [];
    for (const s of document.querySelectorAll('select')) {
      if (!s.offsetParent) continue; // (not shown in this layout or mode)
      const style = getComputedStyle(s);
      ctx.font = style.font;
      // (the box less its padding and the arrow's room)
      const room = s.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 20;
      for (const o of s.options) {
        const w = ctx.measureText(o.text).width;
        if (w > room) out.push(`${s.id}: '${o.text}' is ${Math.round(w)} px in ${Math.round(room)}`);
      }
    }
    return out;
  });
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 1000 });
    for (const lang of ['en', 'zh']) {
      if ((await page.evaluate(() => document.documentElement.lang.slice(0, 2))) !== lang) {
        await page.locator('#lang').click();
        await page.waitForFunction((l) => document.documentElement.lang.startsWith(l), lang);
      }
      assert.deepEqual(await cut(), [], `${lang} at ${width} px`);
    }
  }
  // (back to English: the language is remembered, and the next tests read English labels)
  await page.locator('#lang').click();
  await page.waitForFunction(() => document.documentElement.lang.startsWith('en'));
  assert.deepEqual(problems, []);
  await page.close();
});

test('update timing per control (performance.measure kvlab:update)', async () => {
  const { page, problems } = await open(browser.context, urlWith({ seed: 1 }));
  for (const [label, values] of [['Bits', [3, 5, 7, 4]], ['Budget B', [100, 200, 50, 128]]]) {
    await page.evaluate(() => performance.clearMeasures('kvlab:update'));
    for (const v of values) await setNumber(page, label, v);
    const ms = await page.evaluate(() => performance.getEntriesByName('kvlab:update').map((e) => e.duration));
    assert.ok(ms.length >= values.length, `${label}: one measure per change (${ms.length})`);
    console.log(`# timing ${label}: ${ms.map((m) => m.toFixed(1)).join(', ')} ms`);
  }
  assert.deepEqual(problems, []);
  await page.close();
});

test('names for assistive technology: each PNG button its chart, the language button its label, figures not live', async () => {
  const { page, problems } = await open(browser.context, urlWith({ seed: 1 }));
  for (const lang of ['en', 'zh']) {
    if ((await page.evaluate(() => document.documentElement.lang.slice(0, 2))) !== lang) {
      await page.locator('#lang').click();
      await page.waitForFunction((l) => document.documentElement.lang.startsWith(l), lang);
    }
    const names = await page.evaluate(() => ({
      png: [...document.querySelectorAll('[data-png]')].map((b) => b.getAttribute('aria-label')),
      lang: [document.querySelector('#lang').textContent, document.querySelector('#lang').getAttribute('aria-label')],
      hist: document.querySelector('canvas[data-chart="hist"]').getAttribute('aria-label'),
      live: [...document.querySelectorAll('output')].filter((o) => o.getAttribute('aria-live') !== 'off').length,
    }));
    assert.equal(new Set(names.png).size, names.png.length, `${lang}: ${names.png.join(' | ')}`);
    assert.ok(names.lang[1].includes(names.lang[0]), `${lang}: '${names.lang[1]}' holds '${names.lang[0]}'`);
    assert.ok(!/^value x$|^数值 x$/.test(names.hist), `${lang}: the histogram is named ${names.hist}`);
    assert.equal(names.live, 0, 'no figure is a live region');
  }
  // (back to English: the language is remembered, and the next tests read English labels)
  await page.locator('#lang').click();
  await page.waitForFunction(() => document.documentElement.lang.startsWith('en'));
  assert.deepEqual(problems, []);
  await page.close();
});
