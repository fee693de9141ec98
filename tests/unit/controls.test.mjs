// The controls' binding, without a browser: a slider is live, a number typed is a value only
// once committed, Escape gives it up, and every control shows its value where it is echoed.
// Run after `cargo xtask dist` (it writes the generated fields.js and texts the page imports).

import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { FakeElement, FakeSelect, FakeOption, installDocument, fire } from './fake-dom.mjs';
import { FIELDS } from '../../www/fields.js';
import { app } from '../../www/app/store.js';
import { bindControls, writeControl, settingFromControl, rangeControls, fitRanges } from '../../www/app/controls.js';

let doc;
let els;
let calls;

beforeEach(() => {
  els = {
    bits: new FakeElement({ key: 'bits', id: 'bits', type: 'range', value: 4 }),
    bitsShown: new FakeElement({ tag: 'output', attrs: { for: 'bits' } }),
    budget: new FakeElement({ key: 'budget', id: 'budget-b', type: 'range', value: 128 }),
    budgetExact: new FakeElement({ key: 'budget', id: 'budget-exact', type: 'number', value: 128 }),
    method: new FakeElement({ tag: 'select', key: 'method', id: 'method', value: 'h2o', attrs: { 'data-mirror': '' } }),
    channel: new FakeSelect({ key: 'channel', id: 'channel' }, [new FakeOption('auto (largest |x|)', 'auto')]),
    kernel: new FakeElement({ key: 'kernel', id: 'kernel', type: 'number', value: 7 }),
    group: new FakeElement({ key: 'group', id: 'group', type: 'number', value: 0 }),
  };
  doc = installDocument(Object.values(els));
  app.editing = null;
  app.settings = { bits: 4, budget: 128, method: 'h2o', channel: null, group: 0 };
  calls = [];
  bindControls(doc, (c, commit) => calls.push([c.id, settingFromControl(c), commit]));
});

test('a slider is sent while it moves and committed when let go; its echoes follow it', () => {
  els.bits.value = '3';
  fire(els.bits, 'input');
  assert.deepEqual(calls, [['bits', 3, false]]);
  assert.equal(els.bitsShown.textContent, '3', 'the <output for> beside it');
  fire(els.bits, 'change');
  assert.deepEqual(calls, [['bits', 3, false], ['bits', 3, true]]);
  els.budget.value = '64';
  fire(els.budget, 'input');
  assert.equal(els.budgetExact.value, '64', 'the number field beside the slider');
});

test('a number being typed is no value until committed, and Escape gives it up', () => {
  els.budgetExact.value = '1';
  fire(els.budgetExact, 'input');
  els.budgetExact.value = '10';
  fire(els.budgetExact, 'input');
  assert.deepEqual(calls, [], 'keystrokes on the way are not values');
  assert.equal(app.editing, els.budgetExact);
  // (the view's reply writes the controls meanwhile: the field being typed in keeps its digits)
  doc.activeElement = els.budgetExact;
  writeControl(els.budget, 128);
  assert.equal(els.budgetExact.value, '10');
  els.budgetExact.value = '1024';
  fire(els.budgetExact, 'change');
  assert.deepEqual(calls, [['budget-exact', 1024, true]]);
  assert.equal(els.budget.value, '1024', 'the slider beside it follows');
  assert.equal(app.editing, null);

  els.group.value = '77';
  fire(els.group, 'input');
  fire(els.group, 'keydown', { key: 'Escape' });
  assert.equal(els.group.value, '0', 'the value in use again');
  assert.equal(app.editing, null);
  fire(els.group, 'keydown', { key: 'Escape' });
  assert.deepEqual(calls.length, 1, 'Escape sends nothing');
});

test('values are read as the table of settings types them', () => {
  els.group.value = '2.5';
  assert.equal(settingFromControl(els.group), '2.5', 'not a whole number: sent as typed, for the engine to name');
  els.group.value = ' ';
  assert.equal(settingFromControl(els.group), ' ', 'an empty field is not 0');
  els.group.value = '32';
  assert.equal(settingFromControl(els.group), 32);
  assert.equal(settingFromControl(els.method), 'h2o', 'a named option stays a name');
  assert.equal(settingFromControl(els.channel), null, "'auto' is no channel");
  els.channel.add(new FakeOption('5', '5'));
  els.channel.value = '5';
  assert.equal(settingFromControl(els.channel), 5);
});

test('written values show in the control, its echoes and on <body> when mirrored', () => {
  writeControl(els.channel, null);
  assert.equal(els.channel.value, 'auto');
  writeControl(els.method, 'snapkv');
  assert.equal(doc.body.dataset.method, 'snapkv');
  els.method.value = 'streaming';
  fire(els.method, 'change');
  assert.equal(doc.body.dataset.method, 'streaming', 'a choice shows on <body> as it is made');
  assert.equal(doc.body.dataset.bits, undefined, 'only mirrored controls');
});

test('every number and slider takes its range and step from the table of settings', () => {
  rangeControls();
  assert.deepEqual([els.bits.min, els.bits.max, els.bits.step], ['1', '16', '1'], 'Rust\'s MAX_BITS');
  assert.deepEqual([els.kernel.min, els.kernel.max, els.kernel.step], ['1', '63', '2'], 'odd kernels');
  assert.equal(els.budget.max, String(FIELDS.budget.max));
  assert.equal(els.budgetExact.max, String(FIELDS.budget.max), 'the field beside the slider too');
  assert.equal(els.method.min, undefined, 'a select has no range');
});

test('the bounds at the data in use narrow the controls, and list the channels to show', () => {
  rangeControls();
  app.settings = { ...app.settings, budget: 800, channel: 5 };
  // (the lab's figures: the data's T, S and d, the scheme's fewest bits, StreamingLLM's B)
  const figures = (tokens, steps, channels) => ({
    data: { tokens, steps, channels }, quant: { bitsMin: 2 }, select: { budgetMin: 16 },
  });
  fitRanges(figures(1024, 64, 8));
  assert.deepEqual([els.bits.min, els.bits.max], ['2', '16'], 'symmetric takes at least 2 bits');
  assert.deepEqual([els.budget.min, els.budget.max], ['16', '1024'], 'B from the sinks to T');
  assert.equal(els.budget.value, '800', 'a slider shows the value in use again once it fits');
  assert.deepEqual([els.kernel.min, els.kernel.max], ['1', '63'], 'within the kernel\'s own range');
  assert.deepEqual(els.channel.options.map((o) => o.value), ['auto', '0', '1', '2', '3', '4', '5', '6', '7']);
  assert.equal(els.channel.options[0].text, 'auto (largest |x|)', 'the page\'s own auto option stays');
  assert.equal(els.channel.value, '5', 'the channel in use, now an option');
  fitRanges(figures(16, 8, 4));
  assert.deepEqual([els.kernel.min, els.kernel.max], ['1', '33'], 'the kernel at most 2 T + 1');
  assert.equal(els.channel.options.length, 5);
  assert.equal(els.channel.value, 'auto', 'a channel the data lacks is not shown');
});
