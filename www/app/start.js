// The cold start: the engine connects (its worker, the wasm fetched and compiled) while the
// view drawn ahead, or nothing, is on screen; its first view is written as soon as it is
// computed, its charts drawn after; a saved upload is put back; the controls go live.

import { connect } from '../client.js';
import { TEXT, t, fill } from '../i18n.js';
import { $ } from '../lib/dom.js';
import { render, writeView } from '../sections/index.js';
import { aloneKey } from '../sections/common.js';
import { savedUpload, restoreLegacyUpload, restoreUpload } from '../sections/data/saved.js';
import { runLinkedModel } from '../sections/model-run.js';
import { app } from './store.js';
import { ALL, chartsOf } from './registry.js';
import { measureTimings, markTimeline } from './perf.js';
import { request, busyWhile, markBusy, onProgress } from './requests.js';
import { showUrlWarnings, showNote } from './warnings.js';
import { bindControls, writeControls, settingFromControl } from './controls.js';
import { change, connectUpdates } from './update.js';
import { updatePort } from './apply.js';
import { drawSpec, freshCanvases, redraw, scheduleCatchUp } from './schedule.js';
import { recordUrl } from './url.js';
import { viewAhead, keepEarlyInput, applyEarlyInput, paintAhead, dropAhead } from './first-view.js';
import { wireButtons } from './buttons.js';

/** The controls and buttons that do nothing without the engine (disabled when it fails). */
const NEEDS_ENGINE = '[data-key], #reset, #file, #export-csv, #export-json, [data-png]';

/** A control's change, sent by the update transaction. */
const changed = (c, commit) => change(c, c.dataset.key, settingFromControl(c), commit);

/**
 * Shows the view drawn ahead while the engine starts: its settings in the controls (not wired
 * yet), its figures, and its charts behind the first screen's canvases (paintAhead). The
 * engine computes the same view; its charts replace these (dropAhead).
 */
function showAhead(ahead) {
  app.ahead = ahead;
  present(ahead, false);
  keepEarlyInput();
  writeView(ahead.figures, ALL);
  paintAhead();
}

/**
 * Starts the page on `query` (the link's, or the view kept in this browser); `linked`: the
 * address's own parameters (a link made on the model's data runs it again).
 */
export async function start(query, linked) {
  const status = $('#status');
  const failed = (e) => {
    status.textContent = t(app.lang, 'status.failed') + (e.message ?? String(e));
    status.hidden = false;
    document.body.dataset.state = 'failed';
    // Nothing can compute a view now: what would need the engine says so (disabled) instead of
    // looking live under the view on screen (the one drawn ahead, or the last one shown).
    for (const el of document.querySelectorAll(NEEDS_ENGINE)) el.disabled = true;
    markBusy();
  };
  connectUpdates(updatePort);
  performance.mark('kvlab:update:start');
  // Read in parallel with the engine's start: a saved upload replaces the generated data.
  // (No IndexedDB here: nothing saved.)
  const savedFlag = savedUpload.flag();
  const savedPromise = savedFlag === '1' ? savedUpload.get().catch(() => null) : Promise.resolve(null);
  const { canvases } = app;
  // The engine starts: its worker, the wasm fetched and compiled. On the default view drawn
  // ahead (not on a saved upload) its figures and first charts, painted now, are the first
  // meaningful paint, and the engine starts once they are painted: on two cores the wasm's
  // compile threads took CPU from that paint (benches/README.md, "The engine starts after the
  // first paint"). Elsewhere it starts at once.
  const connectNow = () => {
    performance.mark('kvlab:load:connect');
    return connect(onProgress);
  };
  const ahead = savedFlag === '1' ? null : viewAhead(query);
  let connecting;
  if (ahead) {
    showAhead(ahead);
    performance.mark('kvlab:load:ahead');
    connecting = new Promise((resolve) => {
      let started = false;
      const begin = () => {
        if (!started) resolve(connectNow());
        started = true;
      };
      window.requestAnimationFrame(() => setTimeout(() => {
        performance.mark('kvlab:load:first-painted');
        begin();
      }, 0));
      // (a tab opened in the background paints no frame until shown: start anyway)
      if (document.hidden) begin();
    });
  } else {
    connecting = connectNow();
  }
  connecting.catch(() => {}); // (awaited below, where a failure is shown)
  let first;
  let shown = false;
  /** Writes the first view's figures and controls (charts are the engine's). */
  const showFirst = (reply) => {
    if (reply.firstCharts) {
      // The first screen's charts are drawn: the frame after this one shows them with the
      // figures (written before) — the first meaningful paint, unless the view drawn ahead
      // was (then they replace its charts).
      performance.mark('kvlab:load:first-charts');
      const painted = ahead ? 'kvlab:load:engine-charts-painted' : 'kvlab:load:first-painted';
      window.requestAnimationFrame(() => setTimeout(() => performance.mark(painted), 0));
      dropAhead();
      return;
    }
    if (shown) return;
    shown = true;
    performance.mark('kvlab:load:computed');
    markTimeline(reply.timeline);
    document.body.dataset.wasmCompiled = reply.compiledBy;
    present(reply);
    // (drawn ahead: the same figures are on screen already; the complete view follows)
    if (app.ahead) app.figures = reply.figures;
    else render(reply.figures, ALL);
    performance.mark('kvlab:load:figures');
  };
  try {
    app.client = await connecting;
    document.body.dataset.engine = app.client.mode;
    document.body.dataset.wasm = app.client.build;
    // A handle for the console and the benchmarks: `await kvlab.call('memory')`, etc.
    window.kvlab = { mode: app.client.mode, call: (op, payload) => app.client.call(op, payload) };
    // The charts are drawn with the first computation, and its figures are written while they
    // are drawn, unless the view changes right after it: a saved upload replaces the data, an
    // embed link hides sections (chart sizes are read before the engine knows the settings).
    const saved = await savedPromise;
    performance.mark('kvlab:load:upload-checked');
    const drawFirst = !saved?.files?.length && !new URLSearchParams(query).has('embed');
    let spec = null;
    try {
      if (drawFirst) {
        spec = drawSpec(chartsOf(ALL));
        spec.first = spec.charts.filter((c) => canvases[c].getBoundingClientRect().top < window.innerHeight);
        await busyWhile(() => app.client.attach(canvases));
      }
      first = await request('init', { query, lang: app.lang, draw: spec }, undefined, showFirst);
    } catch (e) {
      if (!e.stopped) throw e;
      // Stopped before the first view was complete (its figures may be on screen, its charts
      // not): the default view instead, and say so. The canvases went to the stopped worker.
      if (drawFirst) freshCanvases();
      first = await request('init', { query: '', lang: app.lang });
      first.stopped = true;
      spec = null;
      shown = false;
    }
    if (spec) {
      performance.mark('kvlab:load:drawn');
      dropAhead();
      measureTimings(first.timings, performance.now());
      if (first.drawError) throw new Error(first.drawError.message);
      showFirst(first);
      markTimeline(first.timeline);
      // The controls went live with the first figures and may have moved since: the settings
      // are presented again only if the engine fell back to the defaults meanwhile.
      if (first.fellBack) present(first);
      // The complete view: the comparison and KIVI (a change made meanwhile is queued after
      // this request and redraws what it changes).
      render(first.figures, ALL);
      // The language may have been switched while the charts were drawn with the labels sent.
      if (spec.labels !== app.labels) await redraw(chartsOf(ALL));
      recordUrl(false, app.lang === first.settings.lang ? first.query : await request('toQuery', { settings: app.good }));
      document.body.dataset.fingerprints = first.fingerprints.join(' ');
    } else {
      performance.mark('kvlab:load:restoring');
      let restored = saved?.files?.length ? await restoreUpload(saved, first) : null;
      if (restored?.stopped) {
        // (a fresh worker: the first view again, on generated data)
        first = await request('init', { query, lang: app.lang });
        restored = null;
      }
      performance.mark('kvlab:load:upload-restored');
      const view = restored ? { ...first, ...restored } : first;
      // The first view as computed (settings, figures), charts drawn after it.
      shown = true;
      performance.mark('kvlab:load:computed');
      markTimeline(first.timeline);
      document.body.dataset.wasmCompiled = first.compiledBy;
      present(view);
      await app.client.attach(canvases);
      const start = performance.now();
      const drawn = await request('draw', { draw: drawSpec(chartsOf(ALL)) });
      performance.mark('kvlab:load:drawn');
      dropAhead();
      measureTimings(drawn.timings, start);
      render(view.figures, ALL);
      recordUrl(false, await request('toQuery', { settings: app.good }));
      // For tests and embedding pages: fingerprints of the data in use (native == wasm).
      document.body.dataset.fingerprints = (await request('fingerprints', {})).join(' ');
    }
    performance.measure('kvlab:update', 'kvlab:update:start');
  } catch (e) {
    failed(e);
    return;
  }
  status.hidden = true;
  app.ready = true;
  document.body.dataset.state = 'ready';
  applyEarlyInput((c) => changed(c, true));
  if (savedFlag === null) restoreLegacyUpload();
  runLinkedModel(linked);
  // (charts resized while the first view was drawn, and left for later)
  if (app.stale.size || app.enginePending) scheduleCatchUp(0);
}

/**
 * Puts the first view's settings and controls on the page (`view`: init's reply, its settings
 * and figures possibly replaced by a restored upload's; or the view drawn ahead, with `live`
 * false: the controls are not wired before the engine is there). A later call (the engine's
 * first view after the one drawn ahead, or the default view after Stop during the first load)
 * replaces the settings and messages, and wires the controls once.
 */
function present(view, live = true) {
  const warnings = [...view.warnings];
  // A link made on uploaded data opened where that upload is not kept: generated data of the
  // same shape (the link's T, S and d) stands in, and the page says so with the link's repairs.
  if (app.linkOnUpload && !app.upload && view.figures?.data) {
    const { tokens: T, steps: S, channels: d } = view.figures.data;
    const textFields = { T, S, d };
    warnings.push({ key: 'data', textKey: 'warn.uploadLink', textFields, message: fill(TEXT.en['warn.uploadLink'], textFields) });
  }
  showUrlWarnings(warnings);
  if (view.stopped) showNote('progress.stopped.first');
  // A bare address opens the last view kept in this browser (a shared classroom computer shows
  // the last person's): said until the next change.
  else if (app.restored && !warnings.length) showNote('warn.restored');
  if (!app.listed) {
    app.listed = true;
    const modelSel = $('#model');
    for (const m of view.presets) modelSel.add(new Option(m.name, m.slug));
    const custom = new Option(t(app.lang, 'budget.custom'), 'custom');
    custom.dataset.i18n = 'budget.custom';
    modelSel.add(custom);
  }
  if (live && !app.presented) {
    app.presented = true;
    bindControls(document, changed);
    wireButtons();
  }
  if (view.settings.embed) {
    document.body.classList.add('embed', `embed-${view.settings.embed}`);
    // A text that points to another section has a wording of its own for a section shown
    // alone (`key.embed`): the embed hides what it would point to.
    for (const el of document.querySelectorAll('[data-i18n]')) {
      const alone = aloneKey(el.dataset.i18n, view.settings.embed);
      if (alone !== el.dataset.i18n) {
        el.dataset.i18n = alone;
        el.textContent = t(app.lang, alone);
      }
    }
  }
  // (The language may have been switched while the first computation ran.)
  app.settings = { ...view.settings, lang: app.lang };
  app.good = { ...app.settings };
  writeControls(app.good);
}
