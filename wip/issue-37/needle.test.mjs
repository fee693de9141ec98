// Section 5's needle test, in the module the page runs the model in (`Model.needle`,
// `needle_answers`, `needle_point`; issue 37's engine, before its controls exist): the
// learner's own fact is answered by the full cache and by SnapKV, not by the recent window;
// a fact that cannot be asked is refused in words; the accuracy chart's built-in cases give
// the full cache's answers at the prefill.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, urlWith } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test('the learner\'s fact: the full cache and SnapKV answer it, the recent window does not', async () => {
  const { page, problems } = await open(browser.context, urlWith(''));
  const result = await page.evaluate(async () => {
    const get = (name) => fetch(`./model/${name}`);
    const card = await (await get('model.json')).text();
    const weights = new Uint8Array(await (await get('model.safetensors')).arrayBuffer());
    const text = await (await get('heldout.txt')).text();
    const mod = await import('./pkg-upload/kvlab_upload.js');
    await mod.default();
    const main = await import('./pkg/kvlab.js');
    await main.default();
    const settings = (q) => JSON.stringify(main.parseQuery(q).settings);
    const model = new mod.Model(card, weights);
    const c = JSON.parse(model.needle('Mirabel', '2026', 150, text.slice(1000)));
    const s = settings('budget=32&recent=16&window=8&pool=max&kernel=7&bits=16');
    const answers = (before) => Object.fromEntries(
      JSON.parse(model.needle_answers(s, before)).map((a) => [a.name, a.said]));
    let refusal = null;
    try { model.needle('Mirabel', '2026', 240, text); } catch (e) { refusal = [e.field, e.message]; }
    const point = JSON.parse(model.needle_point(s, text, 0, 0, true));
    const past = model.needle_point(s, text, 99, 0, true);
    return { c, before: answers(true), after: answers(false), refusal, point, past };
  });
  const { c, before, after, refusal, point, past } = result;
  assert.equal(c.text.slice(c.answer[0], c.answer[1]), '2026');
  assert.equal(c.text.slice(c.fact[0], c.fact[1]), 'The number of Mirabel is 2026.');
  assert.equal(c.asked, c.fact[1] + 1 + 150);
  assert.equal(before.full, '2026', JSON.stringify(before));
  assert.equal(before.snapkv, '2026', JSON.stringify(before));
  assert.notEqual(before['window-only'], '2026', JSON.stringify(before));
  assert.notEqual(after.snapkv, '2026', `SnapKV before the question: ${JSON.stringify(after)}`);
  assert.deepEqual(refusal, ['needle',
    'the fact, 240 bytes of text and the question need 300 bytes; the model reads 255: a distance of at most 195 fits']);
  assert.equal(point.name, 'h2o-sum');
  assert.equal(point.cases, 16);
  assert.deepEqual(point.points.map((p) => p.budget).slice(0, 6), [4, 8, 16, 32, 64, 128]);
  assert.equal(point.points.at(-1).rOverall, 1, 'nothing dropped at the prefill');
  assert.equal(past, 'null');
  assert.deepEqual(problems, []);
});
