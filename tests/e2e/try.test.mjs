// Every "Try:" line, followed as a learner would, on the defaults and on two other patterns:
// what it promises is what the page then shows (issue 38, item 5). Section 2's said to drag Bits
// "from 8 down to 2" (the slider starts at 4) and implied that per-channel wins, while at 2 bits
// per-token won every headline number; its words now promise only what no data can contradict
// (the bound), and leave which granularity wins to the figures. Section 3b's said to read the
// table "from the oracle down" (the oracle is its last row) and "which fall behind the random
// baseline" (none may).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, urlWith, figure, figureText, setNumber, choose, settle } from './helpers.mjs';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** The defaults, and two other attention patterns (the keys' outliers come with each). */
const VIEWS = [{}, { pattern: 'sink-local', seed: 7 }, { pattern: 'needle', seed: 3 }];
const name = (v) => v.pattern ?? 'defaults';

const tryLine = (page, section) => page.locator(`#${section} .try`).textContent();

for (const view of VIEWS) {
  test(`every Try: line followed on ${name(view)}: what it promises is what the page shows`, async () => {
    const { page, problems } = await open(browser.context, urlWith({ lang: 'en', ...view }));

    // Section 1: a model and a context show M_KV,final, M_fp, R_overall and the context that fits.
    assert.match(await tryLine(page, 'budget'), /pick a model and a context length/);
    await choose(page, 'Model', 'llama-3-70b');
    await setNumber(page, 'Context length', 131072);
    const final = await figure(page, 'gib-final');
    const fp = await figure(page, 'gib-fp');
    const r = await figure(page, 'r-overall-model');
    assert.ok(Math.abs(fp / final - r) / r < 1e-6, `${name(view)}: R_overall ${r} is M_fp / M_KV,final (${fp} / ${final})`);
    assert.ok(await figure(page, 'context-fit') > 0);

    // Section 2: Bits down to 2, then up to 8: the largest error under scale/2 at each width;
    // per-token at the same bits too. No start is named, and no winner promised.
    const text = await tryLine(page, 'quant');
    const start = Number(await page.locator('#bits').inputValue());
    assert.doesNotMatch(text, /from \d+/, 'no start named');
    assert.match(text, /down to 2/);
    assert.match(text, /up to 8/);
    assert.ok(start >= 2 && start <= 8, `the slider starts (${start}) between the line's ends`);
    assert.doesNotMatch(text, /per-channel wins|per-token wins|coarsen every token.s grid:/i,
      'no winner promised between the granularities');
    const check = async (b, gran) => {
      await setNumber(page, 'Bits', b);
      const max = await figure(page, 'max-abs-error');
      const bound = await figure(page, 'bound-max');
      assert.ok(max <= bound, `${name(view)}, ${gran}, ${b} bits: largest error ${max} within the bound ${bound}`);
      assert.equal(await figureText(page, 'bounds-hold'), 'true', `${name(view)}, ${gran}, ${b} bits: the bounds hold`);
      return figure(page, 'rmse');
    };
    for (const b of [start, 3, 2, 5, 8]) assert.ok(await check(b, 'per-channel') > 0);
    await choose(page, 'Granularity', 'per-token');
    for (const b of [2, 8]) assert.ok(await check(b, 'per-token') > 0);
    await choose(page, 'Granularity', 'per-channel');
    await setNumber(page, 'Bits', start);

    // Section 3: B dragged down never raises the mass retained; then the method switches.
    assert.match(await tryLine(page, 'select'), /drag B down/);
    let last = Infinity;
    for (const b of [128, 64, 32, 8, 1]) {
      await setNumber(page, 'Budget B', b);
      const mass = await figure(page, 'mass-mean');
      assert.ok(mass <= last + 1e-12, `${name(view)}: B = ${b} retains ${mass}, no more than at the larger B (${last})`);
      last = mass;
    }
    for (const m of ['snapkv', 'streaming', 'h2o']) {
      await choose(page, 'Method', m);
      await settle(page);
      assert.equal(await page.locator('#method').inputValue(), m);
      assert.equal(await figure(page, 'kept-count'), 1);
    }
    await setNumber(page, 'Budget B', 128);

    // Section 3b: the oracle tops the mass retained; the random baseline is there to compare.
    await page.locator('#compare').scrollIntoViewIfNeeded();
    await settle(page);
    const compare = await tryLine(page, 'compare');
    assert.match(compare, /no policy retains more/);
    assert.match(compare, /whether any/, 'no policy is promised to fall behind random');
    const rows = await page.locator('#compare-rows tr').evaluateAll((trs) => trs.map((tr) => ({
      policy: tr.dataset.policy, mass: Number(tr.querySelector('[data-col="mass-mean"]')?.dataset.value),
    })));
    const oracle = rows.find((row) => row.policy === 'oracle');
    assert.ok(oracle, 'the oracle is in the table');
    for (const row of rows) {
      assert.ok(row.mass <= oracle.mass + 1e-9, `${name(view)}: ${row.policy} retains ${row.mass}, the oracle ${oracle.mass}`);
    }
    assert.ok(rows.some((row) => row.policy === 'random'), 'the random baseline is in the table');

    // Section 4: the verdict names the lever with the smaller rise per KiB.
    await page.locator('#together').scrollIntoViewIfNeeded();
    await settle(page);
    assert.match(await tryLine(page, 'together'), /which lever raises the output error less per KiB saved/);
    const bits = await figure(page, 'lever-bits-per');
    const tokens = await figure(page, 'lever-tokens-per');
    assert.equal(await figureText(page, 'lever-verdict'), bits <= tokens ? 'bits' : 'tokens', `${name(view)}: bits ${bits}, tokens ${tokens}`);
    assert.deepEqual(problems, []);
    await page.close();
  });
}
