// The update transaction: a control's change is recorded in the store and sent with the next
// request; changes made while the engine computes wait and go together, one request at a time
// (at most one per animation frame while a slider is dragged). A reply makes its settings the
// view on screen (`good`); a refusal puts the settings it changed back, except those changed
// again meanwhile. What a reply or a refusal does to the page is the port's (apply.js), so the
// transaction runs as well against a fake one (tests/unit/update.test.mjs).

import { app } from './store.js';
import { FIELDS, BOUNDS, LEAST_BITS, METHOD_BOUNDS } from '../fields.js';
import { SECTIONS_OF, ALL, limitOf } from './registry.js';

/**
 * The transaction's way to the engine and the page:
 * - `send(settings, changed, sections, dataChanged)`: the update request; resolves to what
 *   `written` gets, rejects with the engine's error;
 * - `written(sent, {changed, settings, sections, commit, inputAt})`: the reply on the page;
 * - `refused(error, changed)`: the refusal said next to the control it names (or the last one
 *   changed); returns that control;
 * - `controlOf(key)`, `show(control, value)`: a setting's control, and a value written to it;
 * - `frame(callback)`: the next animation frame; `busy()`: the busy marks again; `now()`.
 */
let port = null;

/** Sets the transaction's port (see `port`). */
export function connectUpdates(p) {
  port = p;
}


/**
 * After `control` set `key`: the settings it bounds follow it (B and r at most T, w at most S,
 * the outlier channels at most d, the channel shown below d or back to `auto`; and what those
 * bound in turn), silently, as the sliders' ranges do. A data count typed past its own bound
 * (steps above T, outlier channels above d; `said` in Rust's table) is used at the bound and
 * said next to its control once the view follows, as a link's repair is, until the count or
 * its bound change again (the change event of the value written back keeps it); any other
 * value typed past its bound goes as typed, for the engine to refuse. Returns the keys moved.
 */
function follow(key, control) {
  const s = app.settings;
  const valid = (k) => (Number.isFinite(s[k]) ? s[k] : app.good[k]);
  const moved = [key];
  const move = (k, v) => {
    s[k] = v;
    app.pending.set(k, control);
    moved.push(k);
  };
  // (the tightest of the key's own bounds: S is at most T and at most 64 Mi / T)
  let own = null;
  let limit = Infinity;
  for (const b of BOUNDS) {
    const l = b.key === key ? limitOf(b, valid(b.by)) : Infinity;
    if (l < limit) [own, limit] = [b, l];
  }
  if (own) {
    const typed = valid(key);
    if (typed > limit && own.said) {
      const by = valid(own.by);
      const refusal = own.below ? { kind: 'below', value: typed, what: own.what, bound: by, used: limit }
        : { kind: 'atMost', value: typed, what: own.what, limit };
      app.clamped = { control, field: key, refusalOf: 'repair', repaired: true, refusal };
      move(key, limit);
    } else if (app.clamped?.field === key && typed !== limit) {
      app.clamped = null;
    }
  }
  // (the bits from the new scheme's fewest: raised to it and said beside them, as a link's
  // repair is, in the page's words for it; the note goes with the next move of the bits)
  if (key === 'scheme') {
    const least = LEAST_BITS[s.scheme];
    if (least !== undefined && valid('bits') < least) {
      const refusal = { kind: 'bitsForScheme', value: valid('bits'), scheme: s.scheme, used: least };
      app.clamped = { control: port.controlOf('bits'), field: 'bits', refusalOf: 'repair', repaired: true, refusal };
      move('bits', least);
    }
  }
  // (a method switch never lands on a value the new method refuses: StreamingLLM's sinks
  // above B are brought down to B and said beside them; the note goes with their next move)
  if (key === 'method') {
    for (const b of METHOD_BOUNDS) {
      const [v, limit] = [valid(b.key), valid(b.by)];
      if (b.method !== s.method || !(v > limit)) continue;
      const refusal = { kind: `forMethod.${b.key}`, value: v, method: s.method, used: limit };
      app.clamped = { control: port.controlOf(b.key), field: b.key, refusalOf: 'repair', repaired: true, refusal };
      move(b.key, limit);
    }
  }
  // (each key moved moves what it bounds: T takes S along, and S takes w)
  for (let i = 0; i < moved.length; i += 1) {
    for (const b of BOUNDS) {
      if (b.by !== moved[i]) continue;
      if (app.clamped?.field === b.key) app.clamped = null;
      const l = limitOf(b, valid(b.by));
      if (valid(b.key) > l) move(b.key, FIELDS[b.key]?.auto ? null : l);
    }
  }
  return moved.slice(1).filter((k, i, all) => all.indexOf(k) === i);
}

/**
 * Records that `control` set `key` to `value` (`commit`: a change event, which pushes a
 * history entry) and has it sent: at once when the engine is idle (after this task's other
 * events: a select's input and change come together), else when it replies.
 */
export function change(control, key, value, commit) {
  if (app.inFlight && !app.pending.has(key) && Object.is(app.sent?.[key], value)) {
    // The change event after the input event that sent this value: nothing to compute again,
    // only the history entry to record once the update is shown.
    app.lateCommit ||= commit;
    return;
  }
  app.inputAt ??= port.now();
  app.settings[key] = value;
  app.pending.set(key, control);
  app.commit ||= commit;
  // (a value the page moved and said so, moved again by hand: the note is done; a count's own
  // bound decides in `follow`)
  if (app.clamped?.field === key && !BOUNDS.some((b) => b.key === key && b.said)) app.clamped = null;
  // (the values the page moved show at once; a refusal puts them back with the rest)
  for (const k of follow(key, control)) {
    const c = port.controlOf(k);
    if (c) port.show(c, app.settings[k]);
  }
  if (!app.frame && !app.inFlight) {
    app.frame = -1;
    queueMicrotask(() => {
      if (app.frame === -1) flush();
    });
  }
  port.busy();
}

/** Sends the pending changes to the engine (one request at a time; later changes wait). */
export async function flush() {
  app.frame = 0;
  if (app.inFlight || !app.pending.size) {
    port.busy();
    return;
  }
  const changed = new Map(app.pending);
  app.pending.clear();
  const commit = app.commit;
  app.commit = false;
  const settings = { ...app.settings };
  const dataChanged = [...changed.keys()].some((k) => !(k in SECTIONS_OF));
  const sections = new Set(dataChanged ? ALL : [...changed.keys()].flatMap((k) => SECTIONS_OF[k]));
  app.inFlight = true;
  app.sent = settings;
  const inputAt = app.inputAt;
  app.inputAt = null;
  try {
    const sent = await port.send(settings, changed, sections, dataChanged, commit);
    // (the language may have been switched while the engine computed: the view and its link
    // are in the page's language)
    settings.lang = app.lang;
    app.good = settings;
    port.written(sent, { changed, settings, sections, commit, inputAt });
  } catch (e) {
    if (e?.stopped) return; // stop() has put the last good view back
    // The last good view stays; the message goes next to the control that caused it. Keys the
    // person changed again meanwhile keep their newer value.
    const control = port.refused(e, changed);
    for (const key of changed.keys()) {
      if (app.pending.has(key)) continue;
      app.settings[key] = app.good[key];
      // A control moved with the refused change shows the value in use again (B moved below
      // the sinks went on showing 98 beside a view of 128); the refused one keeps what was typed.
      const c = port.controlOf(key);
      if (c && c !== control) port.show(c, app.good[key]);
    }
  } finally {
    app.inFlight = false;
    app.sent = null;
    app.lateCommit = false;
    // Changes made meanwhile (a slider being dragged): one request per frame.
    if (app.pending.size && !app.frame) app.frame = port.frame(flush);
    port.busy();
  }
}
