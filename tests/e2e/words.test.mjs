// Words next to numbers follow the numbers: each formula of section 2 names the group it shows
// (per token it showed the note's scale_j, token 0's grid over a whole channel, and a bound
// cited from another group's scale).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, urlWith, figure } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** The text of a formula's MathML, and the numbers of its bound: `name: error ≤ bound`. */
async function formulas(page) {
  return page.evaluate(() => {
    const text = (id) => document.querySelector(`#${id} math`).textContent;
    const math = document.querySelector('#f-scale math');
    const frac = [...math.querySelectorAll(':scope > mfrac')].at(-1);
    return {
      scale: text('f-scale'),
      scaleValue: Number(frac.nextElementSibling.nextElementSibling.textContent),
      q: text('f-q'),
      bound: text('f-bound-elem'),
      row: text('f-bound-row'),
    };
  });
}

test('per token, per channel, per tensor: the scale, grid and bound are those of the group named', async () => {
  const cases = [
    // [query, subscript, group named]
    [{ granularity: 'token' }, 't', 'token 0'],
    [{ granularity: 'token', group: 16, channel: 20 }, 't', 'token 0, channels 16–31'],
    [{ channel: 5 }, 'j', 'channel 5'],
    [{ group: 32, channel: 5 }, 'j', 'channel 5, tokens 0–31'],
    [{ granularity: 'tensor' }, '', 'the whole tensor'],
  ];
  for (const [query, i, name] of cases) {
    const { page, problems } = await open(browser.context, urlWith({ ...query, lang: 'en' }));
    const f = await formulas(page);
    const what = JSON.stringify(query);
    assert.ok(f.scale.startsWith(`scale${i}=`), `${what}: ${f.scale}`);
    assert.ok(f.scale.endsWith(`(${name})`), `${what}: ${f.scale}`);
    assert.ok(f.q.startsWith(`q${i}=round`), `${what}: ${f.q}`);
    // The bound cites the named group's own scale/2, not the largest of all groups.
    const m = f.bound.match(new RegExp(`${name.replace(/[()]/g, '\\$&')}:([\\d.]+)≤([\\d.]+)`));
    assert.ok(m, `${what}: ${f.bound}`);
    assert.ok(Number(m[1]) <= Number(m[2]), f.bound);
    assert.ok(Math.abs(Number(m[2]) - f.scaleValue / 2) <= 1e-3 * f.scaleValue, `${what}: ${m[2]} is half of ${f.scaleValue}`);
    assert.match(f.bound, /\((\d+) of \1 groups within their own scale\/2\)$/);
    assert.ok(f.row.includes(i === 'j' ? '∑scalej2' : `d·scale${i}2`), `${what}: ${f.row}`);
    assert.deepEqual(problems, []);
    await page.close();
  }
  // In 中文 the group is named in Chinese.
  const { page, problems } = await open(browser.context, urlWith({ granularity: 'token', lang: 'zh' }));
  assert.ok((await formulas(page)).scale.endsWith('(token 0)'));
  const zh = await open(browser.context, urlWith({ group: 32, channel: 5, lang: 'zh' }));
  assert.ok((await formulas(zh.page)).scale.endsWith('(通道 5（token 0–31）)'));
  assert.ok(await figure(page, 'bound-max') > 0);
  assert.deepEqual([...problems, ...zh.problems], []);
  await page.close();
  await zh.page.close();
});

test('labels say what they mean: section 5 names the data section\'s own "A real model", the memory excludes the weights, output errors past 100% are explained', async () => {
  for (const lang of ['en', 'zh']) {
    const { page, problems } = await open(browser.context, urlWith({ lang }));
    // (issue 38: section 5 said "open 'Real model'" where the data section says "A real model")
    const summary = (await page.locator('#model-box summary').textContent()).trim();
    assert.ok((await page.locator('#model-off').textContent()).includes(`“${summary}”`), `${lang}: ${summary}`);
    // (the fit is the cache's: the weights are not in the memory it is given)
    assert.match(await page.locator('label[for="memory_gib"]').textContent(),
      lang === 'en' ? /KV cache.*weights not counted/ : /KV 缓存.*不含权重/);
    assert.match(await page.locator('[data-i18n="compare.intro"]').textContent(),
      lang === 'en' ? /‖o − ô‖ \/ ‖o‖.*100%/ : /‖o − ô‖ \/ ‖o‖.*100%/);
    assert.deepEqual(problems, []);
  }
});
