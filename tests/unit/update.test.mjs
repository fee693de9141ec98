// The update transaction against a fake port (a fake engine and page), without a browser:
// changes made while the engine computes wait and go together, one request at a time; a value
// already with the engine is not sent again; a refusal puts back what it changed, except what
// was changed again meanwhile; the data's counts take what they bound along.
// Run after `cargo xtask dist` (it writes the generated fields.js the transaction reads).

import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { app } from '../../www/app/store.js';
import { change, connectUpdates } from '../../www/app/update.js';

/** The control of setting `key` (the transaction keeps it to say where a refusal belongs). */
const controls = new Map();
const control = (key) => {
  if (!controls.has(key)) controls.set(key, { key });
  return controls.get(key);
};

/** Lets queued microtasks and promise callbacks run. */
const settle = () => new Promise((resolve) => { setTimeout(resolve, 0); });

let port;

/**
 * A fake port: each `send` is held until the test answers it (`reply()` or `refuse(error)`);
 * frames run when the test says (`runFrame()`).
 */
function fakePort() {
  const p = {
    sends: [],
    writes: [],
    refusals: [],
    shown: [],
    frames: [],
    busyMarks: 0,
    now: () => 0,
    busy: () => { p.busyMarks += 1; },
    send(settings, changed, sections, dataChanged) {
      return new Promise((resolve, reject) => {
        p.sends.push({
          settings: { ...settings }, keys: [...changed.keys()].sort(), sections: [...sections].sort(), dataChanged,
          reply: () => resolve({ reply: 'ok', settings }),
          refuse: (e) => reject(e),
        });
      });
    },
    written(sent, info) {
      p.writes.push({ ...info, lateCommit: app.lateCommit });
    },
    refused(e, changed) {
      p.refusals.push(e);
      return changed.get(e.field) ?? null;
    },
    controlOf: (key) => control(key),
    show: (c, v) => p.shown.push([c.key, v]),
    frame(callback) {
      p.frames.push(callback);
      return p.frames.length;
    },
    runFrame() {
      const f = p.frames.shift();
      f();
    },
  };
  return p;
}

const DEFAULTS = {
  tokens: 512, steps: 64, channels: 64, outliers: 4, skewed: 0, seed: 1,
  bits: 4, scheme: 'symmetric', budget: 128, recent: 32, window: 16, future: 16, channel: null, kernel: 7,
  method: 'h2o', sinks: 4,
};

beforeEach(() => {
  port = fakePort();
  connectUpdates(port);
  Object.assign(app, {
    settings: { ...DEFAULTS }, good: { ...DEFAULTS }, lang: 'en', pending: new Map(), frame: 0, inFlight: false,
    sent: null, commit: false, lateCommit: false, clamped: null, inputAt: null,
  });
});

test('changes made while the engine computes go together in the next request', async () => {
  change(control('bits'), 'bits', 3, false);
  await settle();
  assert.equal(port.sends.length, 1, 'an idle engine gets the change at once');
  assert.deepEqual(port.sends[0].keys, ['bits']);
  assert.deepEqual(port.sends[0].sections, ['budget', 'compare', 'model', 'model-tradeoff', 'quant'],
    'the sections bits changes (fields.js), the model\'s trade-off among them');
  change(control('bits'), 'bits', 5, false);
  change(control('scheme'), 'scheme', 'asymmetric', false);
  change(control('bits'), 'bits', 6, true);
  await settle();
  assert.equal(port.sends.length, 1, 'one request at a time');
  port.sends[0].reply();
  await settle();
  assert.equal(port.writes.length, 1);
  assert.equal(app.good.bits, 3, 'the reply\'s settings are the view on screen');
  assert.equal(port.frames.length, 1, 'the waiting changes go with the next frame');
  port.runFrame();
  await settle();
  assert.equal(port.sends.length, 2);
  assert.deepEqual(port.sends[1].keys, ['bits', 'scheme'], 'both waiting keys, once');
  assert.equal(port.sends[1].settings.bits, 6, 'the latest value');
  port.sends[1].reply();
  await settle();
  assert.equal(port.writes[1].commit, true, 'a committed change among them pushes history');
  assert.equal(app.good.scheme, 'asymmetric');
  assert.equal(port.frames.length, 0, 'nothing left to send');
  assert.equal(app.inFlight, false);
});

test('the change event of a value already with the engine sends nothing again', async () => {
  change(control('bits'), 'bits', 3, false);
  await settle();
  change(control('bits'), 'bits', 3, true);
  port.sends[0].reply();
  await settle();
  assert.equal(port.sends.length, 1);
  assert.equal(port.writes[0].commit, false);
  assert.equal(port.writes[0].lateCommit, true, 'its history entry is recorded with the view');
  assert.equal(app.lateCommit, false, 'and forgotten after it');
});

test('a refusal puts back the keys it changed, except those changed again meanwhile', async () => {
  change(control('budget'), 'budget', 999, false);
  change(control('recent'), 'recent', 7, false);
  await settle();
  change(control('recent'), 'recent', 8, false);
  port.sends[0].refuse({ field: 'budget', message: 'budget 999 is out of range' });
  await settle();
  assert.equal(port.refusals.length, 1);
  assert.equal(app.settings.budget, 128, 'the refused value goes');
  assert.equal(app.settings.recent, 8, 'a key changed again keeps its newer value');
  assert.deepEqual(port.shown, [], 'the refused control keeps what was typed; recent waits to be sent');
  port.runFrame();
  await settle();
  assert.deepEqual(port.sends[1].keys, ['recent']);
});

test('a scheme that leaves the bits below its fewest raises them with it, said as a repair', async () => {
  Object.assign(app.settings, { bits: 1, scheme: 'asymmetric' });
  Object.assign(app.good, { bits: 1, scheme: 'asymmetric' });
  change(control('scheme'), 'scheme', 'symmetric', true);
  assert.deepEqual(port.shown, [['bits', 2]], 'the bits show the fewest at once');
  assert.equal(app.clamped.control, control('bits'), 'said beside the bits');
  assert.deepEqual(app.clamped.refusal, { kind: 'bitsForScheme', value: 1, scheme: 'symmetric', used: 2 });
  await settle();
  assert.equal(port.sends.length, 1, 'one request');
  assert.deepEqual(port.sends[0].keys, ['bits', 'scheme']);
  assert.equal(port.sends[0].settings.bits, 2);
  port.sends[0].reply();
  await settle();
  assert.deepEqual(port.refusals, [], 'not a refusal');
  assert.equal(port.writes[0].commit, true, 'the scheme\'s commit goes with it');
  // (back to asymmetric: 2 bits are within its range, nothing moves)
  change(control('scheme'), 'scheme', 'asymmetric', true);
  assert.equal(app.settings.bits, 2);
});

test('a switch to StreamingLLM with more sinks than B brings them to B, said beside them (Rust\'s METHOD_BOUNDS)', async () => {
  for (const [from, budget] of [['h2o', 1], ['snapkv', 2], ['h2o', 3]]) {
    port = fakePort();
    connectUpdates(port);
    Object.assign(app, { clamped: null, pending: new Map(), inFlight: false, frame: 0 });
    Object.assign(app.settings, { method: from, budget, sinks: 4 });
    Object.assign(app.good, { method: from, budget, sinks: 4 });
    change(control('method'), 'method', 'streaming', true);
    assert.deepEqual(port.shown, [['sinks', budget]], 'the sinks show B at once');
    assert.equal(app.clamped.control, control('sinks'), 'said beside the sinks');
    assert.deepEqual(app.clamped.refusal, { kind: 'forMethod.sinks', value: 4, method: 'streaming', used: budget });
    await settle();
    assert.deepEqual(port.sends[0].keys, ['method', 'sinks'], 'one request, the method and its sinks');
    assert.deepEqual([port.sends[0].settings.sinks, port.sends[0].settings.budget], [budget, budget]);
    port.sends[0].reply();
    await settle();
  }
  // Sinks within B, or a switch to a method that reads no sinks: nothing moves.
  for (const [to, sinks] of [['streaming', 4], ['snapkv', 9], ['h2o', 9]]) {
    port = fakePort();
    connectUpdates(port);
    Object.assign(app, { clamped: null, pending: new Map(), inFlight: false, frame: 0 });
    Object.assign(app.settings, { method: to === 'h2o' ? 'streaming' : 'h2o', budget: 4, sinks });
    change(control('method'), 'method', to, true);
    assert.deepEqual(port.shown, []);
    assert.equal(app.clamped, null);
    assert.equal(app.settings.sinks, sinks);
  }
});

test('the data\'s counts take what they bound along; a count typed past its bound is said', async () => {
  change(control('tokens'), 'tokens', 100, true);
  assert.equal(app.settings.budget, 100, 'B follows T down');
  assert.equal(app.settings.recent, 32, 'r is within T');
  assert.equal(app.settings.steps, 64, 'S is within T');
  assert.equal(app.clamped, null, 'following a bound is silent');
  await settle();
  assert.ok(port.sends[0].dataChanged);
  assert.ok(port.sends[0].keys.includes('budget'));
  port.sends[0].reply();
  await settle();
  change(control('steps'), 'steps', 500, true);
  assert.equal(app.settings.steps, 100, 'S is used at T');
  assert.equal(app.settings.window, 16);
  assert.deepEqual(app.clamped.refusal, { kind: 'atMost', value: 500, what: 'tokens', limit: 100 });
  change(control('channels'), 'channels', 2, true);
  assert.equal(app.settings.outliers, 2, 'the outlier channels follow d');
});

test('every bound of Rust\'s table is followed, and what it moves moves what it bounds', async () => {
  change(control('steps'), 'steps', 10, true);
  assert.equal(app.settings.window, 10, 'w follows S');
  assert.equal(app.settings.future, 9, 'the held out steps stay below S');
  assert.equal(app.clamped, null);
  await settle();
  port.sends[0].reply();
  await settle();
  change(control('tokens'), 'tokens', 3, true);
  assert.equal(app.settings.steps, 3, 'S follows T');
  assert.equal(app.settings.window, 3, 'and w follows S');
  assert.equal(app.settings.future, 2);
  assert.equal(app.settings.kernel, 7, 'SnapKV\'s kernel within 2 T + 1');
  change(control('tokens'), 'tokens', 2, true);
  assert.equal(app.settings.kernel, 5, 'SnapKV\'s kernel follows 2 T + 1');
  assert.deepEqual(port.shown.filter(([k]) => k === 'kernel'), [['kernel', 5]], 'a value moved shows at once');
  change(control('tokens'), 'tokens', 131072, true);
  change(control('steps'), 'steps', 4096, true);
  assert.equal(app.settings.steps, 512, 'a generated matrix holds 64 Mi values: S at most 64 Mi / T');
  assert.equal(app.clamped.refusal.what, '64 Mi / tokens', 'said as the link\'s repair says it');
});

test('the channel shown goes back to auto when d goes below it; B typed past T is the engine\'s', async () => {
  app.settings.channel = 40;
  app.good.channel = 40;
  change(control('channels'), 'channels', 16, true);
  assert.equal(app.settings.channel, null);
  assert.deepEqual(port.shown.find(([k]) => k === 'channel'), ['channel', null]);
  await settle();
  port.sends[0].reply();
  await settle();
  change(control('budget'), 'budget', 100000, true);
  assert.equal(app.settings.budget, 100000, 'sent as typed, for the engine to refuse and say');
  assert.equal(app.clamped, null);
});
