// The calculator (section 1) on real models: the largest published ones are counted, and a model
// whose every layer slides says that any context fits, with the window.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, urlWith, figure, settle, setNumber } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const modelError = (page) => page.locator('#model').locator('xpath=..').locator('.error');

test('LLaMA-65B, GPT-3 175B and Llama-3.1-405B at 128k with a batch of 1,024 are counted, by link and by hand', async () => {
  // LLaMA-65B by link: it used to fall back to the default model with an 8 PiB message.
  const link = { model: 'custom', layers: 80, kv_heads: 64, head_dim: 128, context: 32768, lang: 'en' };
  const { page, problems } = await open(browser.context, urlWith(link));
  assert.equal(await page.locator('#url-warnings').isVisible(), false, 'nothing repaired');
  assert.equal(await page.locator('#model').inputValue(), 'custom');
  assert.equal(await figure(page, 'gib-fp'), 80);
  assert.equal(await modelError(page).isVisible(), false);
  // 80 GiB of memory hold 80 GiB / 2.5 MiB per token
  assert.equal(await figure(page, 'context-fit-fp'), 32768);
  // GPT-3 175B by hand: 96 layers of 96 heads.
  for (const [label, value] of [['Layers L', 96], ['KV heads', 96]]) {
    await page.getByLabel(label, { exact: true }).fill(String(value));
    await page.getByLabel(label, { exact: true }).press('Enter');
    await settle(page);
  }
  assert.equal(await figure(page, 'gib-fp'), 144);
  assert.equal(await modelError(page).isVisible(), false);
  await page.close();
  // Llama-3.1-405B: 126 layers, 8 KV heads, 128k tokens, batch 1,024: 63 TiB
  const big = { model: 'custom', layers: 126, kv_heads: 8, head_dim: 128, context: 131072, batch: 1024, lang: 'en' };
  const { page: p2, problems: problems2 } = await open(browser.context, urlWith(big));
  assert.equal(await p2.locator('#url-warnings').isVisible(), false);
  assert.equal(await figure(p2, 'gib-fp'), 63 * 1024);
  assert.deepEqual([...problems, ...problems2], []);
  await p2.close();
});

test('a model whose every layer slides fits any context: said with its window, compressed or not', async () => {
  const { page, problems } = await open(browser.context, urlWith({ model: 'mistral-7b-v0.1', context: 32768, lang: 'en' }));
  const said = 'any length (every layer slides: the cache stops at 4,096 tokens)';
  // the note under the per-token formula says why the cache is not 128 KiB x 32,768
  assert.match(await page.locator('#f-bytes-fp').textContent(), /128\.0 KiB\s*$/);
  assert.match(await page.locator('[data-figure="sliding-note"]').textContent(), /^Every layer slides: a layer holds only the last 4,096 of the 32,768 tokens, so at most 4,096 of the 8,192 kept/);
  assert.equal(await page.locator('[data-figure="context-fit"]').textContent(), said);
  assert.equal(await page.locator('[data-figure="context-fit-fp"]').textContent(), said);
  await page.getByRole('button', { name: 'Switch language' }).click();
  await page.waitForFunction(() => document.documentElement.lang === 'zh-CN');
  await settle(page);
  assert.equal(await page.locator('[data-figure="context-fit"]').textContent(),
    '任意长度（每层都是滑动窗口：缓存在 4,096 个 token 处停止增长）');
  assert.match(await page.locator('[data-figure="sliding-note"]').textContent(), /^每一层都使用滑动窗口：每层只保留 32,768 个 token 中的最后 4,096 个/);
  assert.deepEqual(problems, []);
  await page.close();
});

test('the model\'s own R_overall is shown; the comparison says which steps its mass is over, in the right number', async () => {
  const { page, problems } = await open(browser.context, urlWith({ lang: 'en' }));
  const exported = JSON.parse(await page.evaluate(() => window.kvlab.call('exportJson')));
  const r = exported.figures.budget.extrapolated.r_overall;
  assert.ok(r > 1, `compressed: ${r}`);
  assert.equal(await figure(page, 'r-overall-model'), r);
  assert.match(await page.locator('[data-figure="r-overall-model"]').textContent(), /×$/);
  const rows = () => page.locator('[data-figure="compare-rows"]').textContent();
  assert.equal(await rows(), 'policies see the first 48 steps; quality is measured on the last 16 steps, held out '
    + '(section 3 averages its mass retained over all 64 steps, so the two differ)');
  await page.close();
  const one = await open(browser.context, urlWith({ tokens: 8, steps: 2, future: 1, lang: 'en' }));
  assert.match(await one.page.locator('[data-figure="compare-rows"]').textContent(),
    /^policies see the first 1 step; quality is measured on the last 1 step, held out/);
  await one.page.close();
  const all = await open(browser.context, urlWith({ future: 0, lang: 'en' }));
  assert.equal(await all.page.locator('[data-figure="compare-rows"]').textContent(),
    'policies see and are judged on all 64 steps, as in section 3');
  assert.deepEqual([...problems, ...one.problems, ...all.problems], []);
  await all.page.close();
});

test('KIVI\'s "why per-channel for keys" says which wins on what, from the table beside it', async () => {
  const { page, problems } = await open(browser.context, urlWith({ lang: 'en' }));
  const caption = () => page.locator('[data-figure="kivi-verdict"]').textContent();
  const winners = async () => {
    const out = { channel: [], token: [] };
    for (const [col, name] of [['rmse', 'RMSE'], ['max', 'largest error'], ['rel', 'relative error of the typical channel']]) {
      const [c, tok] = [await figure(page, `kivi-pc-${col}`), await figure(page, `kivi-pt-${col}`)];
      if (c < tok) out.channel.push(name);
      if (tok < c) out.token.push(name);
    }
    return out;
  };
  const said = (w) => {
    const and = (l) => l.join(' and ');
    if (w.channel.length && w.token.length) return `Here per-channel has the lower ${and(w.channel)}; per-token the lower ${and(w.token)}.`;
    return w.channel.length ? `Here per-channel has the lower ${and(w.channel)}.` : `Here per-token has the lower ${and(w.token)}.`;
  };
  // The defaults: per-token wins two columns here, which the fixed caption never said.
  const w = await winners();
  assert.ok(w.token.length > 0, `per-token wins something at the defaults: ${JSON.stringify(w)}`);
  assert.ok((await caption()).startsWith(said(w)), await caption());
  assert.match(await caption(), /These keys have outlier channels \(the largest channel’s max \|x\| is [\d.]+× a typical channel’s\)/);
  await page.close();
  // Without outlier channels the caption says there are none (it spoke of them regardless).
  const none = await open(browser.context, urlWith({ outliers: 0, lang: 'en' }));
  assert.match(await none.page.locator('[data-figure="kivi-verdict"]').textContent(), /These keys have no outlier channel/);
  assert.deepEqual([...problems, ...none.problems], []);
  await none.page.close();
});

test('the kept-token index list breaks between ranges, never inside a number, on a phone', async () => {
  const own = await launch({ viewport: { width: 375, height: 800 } });
  try {
    // SnapKV with max pooling keeps scattered tokens: many short ranges on a narrow screen
    const { page, problems } = await open(own.context, urlWith({ tokens: 4096, budget: 600, recent: 8, method: 'snapkv', lang: 'en' }));
    const list = page.locator('[data-figure="kept-indices"]');
    await list.scrollIntoViewIfNeeded();
    const layout = await list.evaluate((el) => {
      const text = el.firstChild;
      const s = text.textContent;
      const split = [];
      // every run of digits and non-breaking hyphens (one range) on one line
      for (const m of s.matchAll(/[\d\u2011]+/g)) {
        const r = document.createRange();
        r.setStart(text, m.index);
        r.setEnd(text, m.index + m[0].length);
        const lines = new Set([...r.getClientRects()].map((q) => Math.round(q.top)));
        if (lines.size > 1) split.push(m[0]);
      }
      return { split, lines: Math.round(el.scrollHeight / parseFloat(getComputedStyle(el).lineHeight || '16')), ranges: s.split(', ').length };
    });
    assert.ok(layout.ranges > 10, `many ranges: ${layout.ranges}`);
    assert.deepEqual(layout.split, [], 'no range split across lines');
    assert.deepEqual(problems, []);
  } finally {
    await own.close();
  }
});

test('the extrapolation keeps the fraction or the number of tokens, as chosen and said', async () => {
  const { page, problems } = await open(browser.context, urlWith({ lang: 'en' }));
  const said = () => page.locator('[data-figure="kept-at-context"]').textContent();
  // B = 128 of T = 512; Llama-3-8B at 32,768 tokens.
  assert.equal(await said(), '8,192 of 32,768 tokens kept, the fraction this data keeps (128 of 512); 4 bits');
  const fraction = await figure(page, 'gib-final');
  await page.getByLabel('Kept tokens at this context').selectOption('tokens');
  await settle(page);
  assert.equal(await said(), '128 of 32,768 tokens kept: the same 128 as on this data (B is absolute, as in H2O and SnapKV); 4 bits');
  assert.ok(await figure(page, 'gib-final') < fraction / 10);
  // Nothing in this cache grows with the context: any length fits, said so, not a search limit.
  assert.equal(await page.locator('[data-figure="context-fit"]').textContent(), 'any length (the compressed cache holds 128 tokens)');
  assert.match(page.url(), /keep=tokens/);
  await page.getByRole('button', { name: 'Switch language' }).click();
  await page.waitForFunction(() => document.documentElement.lang === 'zh-CN');
  await settle(page);
  assert.equal(await said(), '保留 32,768 个 token 中的 128 个：与本数据相同的 128 个（B 是绝对数量，如 H2O 和 SnapKV）；4 位');
  assert.deepEqual(problems, []);
  await page.close();
});

// Issue 38, item 3: sliding layers hold, index and score only their window, and the page says
// what the cache holds. Mistral at 128k said "32,768 of 131,072 tokens kept" while its cache
// holds 4,096; Gemma-2-9B's formula line ran past its box at 1,400 px.
test('sliding layers: the caption says what the cache holds; the note is under the formula, whole at 1,400 px and on a phone', async () => {
  const cases = [
    ['mistral-7b-v0.1', '32,768 of 131,072 tokens kept, the fraction this data keeps (128 of 512); 4 bits; every layer slides, so the cache holds 4,096 of them (its 4,096-token window)',
      /^Every layer slides: a layer holds only the last 4,096 of the 131,072 tokens, so at most 4,096 of the 32,768 kept, and scores and indexes only those/],
    ['gemma-2-9b', '32,768 of 131,072 tokens kept, the fraction this data keeps (128 of 512); 4 bits; the 21 sliding layers hold 4,096 of them (their 4,096-token window), the other 21 all 32,768',
      /^21 of the 42 layers slide: they hold only the last 4,096 of the 131,072 tokens, so at most 4,096 of the 32,768 kept, and score and index only those; the other 21 layers hold all 32,768\.$/],
    ['gemma-3-27b', '32,768 of 131,072 tokens kept, the fraction this data keeps (128 of 512); 4 bits; the 52 sliding layers hold 1,024 of them (their 1,024-token window), the other 10 all 32,768',
      /^52 of the 62 layers slide/],
  ];
  // (one page at 1,400 px, the model switched as a person would; a phone for the widest case)
  for (const [viewport, models] of [[{ width: 1400, height: 1000 }, cases], [{ width: 390, height: 844 }, cases.slice(1, 2)]]) {
    const { context, close } = await launch({ viewport });
    try {
      const { page, problems } = await open(context, urlWith({ context: 131072, lang: 'en' }));
      // A model without sliding layers says no such thing.
      assert.equal(await page.locator('[data-figure="sliding-note"]').isVisible(), false);
      assert.doesNotMatch(await page.locator('[data-figure="kept-at-context"]').textContent(), /slide/);
      for (const [model, caption, note] of models) {
        await page.getByLabel('Model', { exact: true }).selectOption(model);
        await settle(page);
        assert.equal(await page.locator('[data-figure="kept-at-context"]').textContent(), caption);
        assert.match(await page.locator('[data-figure="sliding-note"]').textContent(), note);
        assert.ok(await page.locator('[data-figure="sliding-note"]').isVisible());
        // (on a desktop the per-token formula fits its box; a phone scrolls formulas sideways)
        const f = await page.locator('#f-bytes-fp').evaluate((el) => [el.scrollWidth, el.clientWidth]);
        if (viewport.width >= 1400) assert.ok(f[0] <= f[1] + 1, `${model} at ${viewport.width} px: ${f}`);
      }
      assert.deepEqual(problems, []);
      await page.close();
    } finally {
      await close();
    }
  }
});

// Issue 38, item 2: the custom model takes query heads, a layer pattern and MLA, typed by
// hand, and says its bytes per token; shown only for a custom model.
test('a custom model by hand: query heads, sliding layers and MLA, with the per-token formula', async () => {
  const { page, problems } = await open(browser.context, urlWith({ lang: 'en' }));
  const fields = ['Query heads', 'Sliding-window layers', 'Their window, tokens', 'MLA latent d_c', 'MLA RoPE key d_R'];
  for (const label of fields) assert.equal(await page.getByLabel(label, { exact: true }).isVisible(), false, `${label}: custom only`);
  await page.getByLabel('Model', { exact: true }).selectOption('custom');
  await settle(page);
  const type = async (label, value) => {
    await page.getByLabel(label, { exact: true }).fill(String(value));
    await page.getByLabel(label, { exact: true }).press('Enter');
    await settle(page);
  };
  // Llama-3-70B by hand, per query head: 5,120 kept sets and 8 copies of K/V (the preset's).
  for (const [label, v] of [['Layers L', 80], ['KV heads', 8], ['Query heads', 64], ['Head dim d_head', 128]]) await type(label, v);
  await page.getByLabel('Selection scope', { exact: true }).selectOption('query-head');
  await settle(page);
  assert.equal(await page.locator('[data-figure="scope-copies"]').textContent(), '5,120 kept sets; the cache holds 8× K/V');
  const custom70b = await figure(page, 'gib-final');
  // Gemma-2-9B by hand: 42 layers, 21 sliding over 4,096.
  for (const [label, v] of [['Layers L', 42], ['KV heads', 8], ['Query heads', 16], ['Head dim d_head', 256],
    ['Sliding-window layers', 21], ['Their window, tokens', 4096], ['Context length', 131072]]) await type(label, v);
  assert.match(await page.locator('[data-figure="sliding-note"]').textContent(), /^21 of the 42 layers slide/);
  const gemmaByHand = await figure(page, 'gib-fp');
  // DeepSeek-V3 by hand: 61 layers of MLA, 512 + 64 a token a layer.
  for (const [label, v] of [['Sliding-window layers', 0], ['Layers L', 61], ['KV heads', 128], ['Query heads', 128],
    ['MLA latent d_c', 512], ['MLA RoPE key d_R', 64]]) await type(label, v);
  assert.match(await page.locator('#f-bytes-fp').textContent(), /\(512\+64\)×2=.*68\.6 KiB/);
  assert.equal(await page.locator('[data-figure="sliding-note"]').isVisible(), false);
  const deepseekByHand = await figure(page, 'gib-fp');
  // The presets say the same (chosen on the same page).
  const presetOf = async (model) => {
    await page.getByLabel('Model', { exact: true }).selectOption(model);
    await settle(page);
    return { final: await figure(page, 'gib-final'), fp: await figure(page, 'gib-fp') };
  };
  assert.equal((await presetOf('deepseek-v3-mla')).fp, deepseekByHand);
  assert.equal((await presetOf('gemma-2-9b')).fp, gemmaByHand);
  await setNumber(page, 'Context length', 32768);
  assert.equal((await presetOf('llama-3-70b')).final, custom70b);
  assert.deepEqual(problems, []);
  await page.close();
});
