// The update transaction: a control's change is recorded in the store and sent with the next
// request; changes made while the engine computes wait and go together, one request at a time
// (at most one per animation frame while a slider is dragged). A reply makes its settings the
// view on screen (`good`); a refusal puts the settings it changed back, except those changed
// again meanwhile. What a reply or a refusal does to the page is the port's (apply.js), so the
// transaction runs as well against a fake one (tests/unit/update.test.mjs).

import { app } from './store.js';
import { SECTIONS_OF, ALL } from './registry.js';

/**
 * The transaction's way to the engine and the page:
 * - `send(settings, changed, sections, dataChanged)`: the update request; resolves to what
 *   `written` gets, rejects with the engine's error;
 * - `written(sent, {changed, settings, sections, commit, inputAt, bounded})`: the reply on the page;
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

/** Counts another setting bounds (the parser's cross-field checks): key -> the bounding key. */
const BOUNDED = { steps: 'tokens', outliers: 'channels', skewed: 'channels' };
const BOUNDED_BY = new Set(Object.values(BOUNDED));

/**
 * After a change of `key`: a bounded count above its bound is used at the bound. Typed so
 * (steps above T, outlier channels above d), that is said next to its control once the view
 * follows, as a link's repair is, until the count or its bound change again (the change event
 * of the value written back keeps it); lowered under it by its bound, it follows silently.
 */
function bound(key, control) {
  const s = app.settings;
  const valid = (k) => (Number.isFinite(s[k]) ? s[k] : app.good[k]);
  for (const [k, by] of Object.entries(BOUNDED)) {
    if (key !== k && key !== by) continue;
    const typed = valid(k);
    const limit = valid(by);
    if (key === k && typed > limit) {
      const refusal = { kind: 'atMost', value: typed, what: by, limit };
      app.clamped = { control, field: k, refusalOf: 'repair', repaired: true, refusal };
    } else if (app.clamped?.field === k && (key === by || typed !== limit)) {
      app.clamped = null;
    }
    if (typed > limit) {
      s[k] = limit;
      app.pending.set(k, control);
    }
  }
}

/** The settings a change of `key` takes along (B and r follow T, w follows S, ...). */
function follow(key, value, control) {
  bound(key, control);
  if (key === 'tokens' || key === 'steps') {
    // B and r cannot exceed T, nor w exceed S: follow the data as the sliders' ranges do.
    const s = app.settings;
    const T = Number.isFinite(s.tokens) ? s.tokens : app.good.tokens;
    const S = Number.isFinite(s.steps) ? s.steps : app.good.steps;
    s.budget = Math.min(s.budget, T);
    s.recent = Math.min(s.recent, T);
    s.window = Math.min(s.window, S);
    s.future = Math.min(s.future, Math.max(0, S - 1));
    for (const k of ['budget', 'recent', 'window', 'future']) app.pending.set(k, control);
  }
  // A shown channel the new d does not have goes back to auto, silently (as the outlier
  // channels follow d down).
  if (key === 'channels' && Number.isFinite(value) && app.settings.channel >= value) {
    app.settings.channel = null;
    app.pending.set('channel', control);
  }
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
  // (a value the page moved and said so, moved again by hand: the note is done)
  if (app.clamped?.field === key && !(key in BOUNDED)) app.clamped = null;
  follow(key, value, control);
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
    const sent = await port.send(settings, changed, sections, dataChanged);
    // (the language may have been switched while the engine computed: the view and its link
    // are in the page's language)
    settings.lang = app.lang;
    app.good = settings;
    const bounded = [...changed.keys()].some((k) => k in BOUNDED || BOUNDED_BY.has(k));
    port.written(sent, { changed, settings, sections, commit, inputAt, bounded });
  } catch (e) {
    if (e?.stopped) return; // stop() has put the last good view back
    // A scheme change that leaves the bits below the new scheme's fewest (1 bit asymmetric,
    // then symmetric): the bits go to that fewest, said beside them, and the change is sent
    // again (it was refused, and the slider rested on 1 under a view of 4 bits).
    const r = e?.refusal;
    if (e?.field === 'bits' && !changed.has('bits') && r?.kind === 'bits' && r.bits < r.min) {
      const bits = port.controlOf('bits');
      app.settings.bits = r.min;
      port.show(bits, r.min);
      for (const [k, c] of changed) if (!app.pending.has(k)) app.pending.set(k, c);
      app.pending.set('bits', bits);
      app.commit ||= commit;
      app.clamped = { control: bits, field: 'bits', textKey: 'quant.bits-raised', textFields: { bits: r.bits, min: r.min } };
      return;
    }
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
