// What the engine's replies do to the page: the update transaction's port (update.js sends,
// this draws and writes), and the complete new views (a page load's, Back, Reset, an upload).

import { render } from '../sections/index.js';
import { tookModel } from '../sections/model-run.js';
import { $ } from '../lib/dom.js';
import { app } from './store.js';
import { ALL, UNCHANGED_BY, chartsOf } from './registry.js';
import { trimTimeline, measureTimings } from './perf.js';
import { request, markBusy } from './requests.js';
import { clearErrors, showError, errorText, reportError } from './errors.js';
import { showWarnings } from './warnings.js';
import { writeControl, writeControls } from './controls.js';
import { drawSpec, deferOffScreen, drawn, leftForComplete, modelWanted } from './schedule.js';
import { recordUrl, inLanguage, scheduleUrl } from './url.js';

/** The page's side of the update transaction (see update.js `port`). */
export const updatePort = {
  now: () => performance.now(),
  busy: markBusy,
  frame: (callback) => window.requestAnimationFrame(callback),
  controlOf: (key) => document.querySelector(`[data-key="${key}"]`),
  show: writeControl,
  async send(settings, changed, sections, dataChanged, commit) {
    trimTimeline();
    performance.mark('kvlab:update:start');
    const start = performance.now();
    const charts = chartsOf(sections)
      .filter((c) => dataChanged || ![...changed.keys()].every((k) => UNCHANGED_BY[c]?.has(k)));
    // What is off screen is brought up to date when the controls rest (catchUp): the charts,
    // and the comparison while its section is off screen.
    // (Charts left stale that came on screen meanwhile are drawn with it.)
    const spec = drawSpec([...charts, ...[...app.stale].filter((c) => app.visible.has(c))]);
    const defer = !app.compareVisible;
    const later = deferOffScreen(spec, defer);
    // (the model's quality, one run of it, only while section 5 or 3b is on screen: a drag
    // elsewhere does not pay for it; the catch-up measures it when the controls rest. The
    // needle's answers, eleven runs, with it on a committed change with section 5 on screen,
    // painted in the same frame; a drag's frames leave them for section 5's details.)
    const reply = await request('update', {
      settings, draw: spec, defer, deferLever: !app.leversVisible, measureModel: modelWanted(),
      needle: Boolean(commit) && app.modelVisible,
    });
    measureTimings(reply.timings, start);
    return { reply, spec, later };
  },
  written({ reply, spec, later }, { changed, settings, sections, commit, inputAt }) {
    clearErrors(settings);
    // The page's own note (on a stop, on the view kept in this browser) is about the view before
    // this one; a link's repairs stay: their values are still in use.
    if (app.note) showWarnings('#url-warnings', []);
    if (app.clamped && changed.has(app.clamped.field)) {
      const { control, ...said } = app.clamped;
      showError(control, errorText(said), said);
    }
    app.enginePending = leftForComplete(reply.figures);
    if (reply.modelSkipped) app.modelStale = true;
    else tookModel(reply.model);
    render(reply.figures, reply.figures.pending ? new Set([...sections].filter((x) => x !== 'compare')) : sections);
    drawn(spec, later);
    if (reply.drawError) showError(null, reply.drawError.message);
    performance.measure('kvlab:update', 'kvlab:update:start');
    // The URL and storage are not needed for the painted frame: record them once the controls
    // rest (two frames without an update; a task posted from the last frame's animation
    // callback runs once that frame is painted). Each URL change costs a same-document
    // navigation, which refetches and decodes the favicon, 5-30 ms: during a drag that was
    // taken from every frame.
    app.urlCommit ||= commit || app.lateCommit;
    app.query = inLanguage(reply.query);
    scheduleUrl();
    // Input event to painted frame: the next animation frame starts after this one is painted.
    if (inputAt !== null) {
      window.requestAnimationFrame(() => {
        performance.measure('kvlab:frame', { start: inputAt, end: performance.now() });
      });
    }
  },
  refused(e, changed) {
    const field = e.field;
    const byField = field && document.querySelector(`[data-key="${field}"]`);
    const control = byField || [...changed.values()].pop() || null;
    clearErrors(app.good, control);
    showError(control, errorText(e), e);
    return control;
  },
};

/** Shows a complete new view (page load, back/forward, reset, upload) the engine computed. */
export function show(settings, figures, query, push) {
  app.settings = { ...settings };
  app.good = { ...settings };
  app.pending.clear();
  // (every chart was drawn and everything computed for it)
  app.stale.clear();
  app.enginePending = false;
  writeControls(app.good);
  render(figures, ALL);
  recordUrl(push, query);
}

/** Replaces the whole state (back/forward). */
export async function applyAll(settings, push) {
  try {
    const reply = await request('update', { settings, draw: drawSpec(chartsOf(ALL)) });
    clearErrors();
    tookModel(reply.model);
    show(settings, reply.figures, reply.query, push);
  } catch (e) {
    reportError(null, e);
  }
}

/** Back to data generated from `settings` (reset, "back to generated data"). */
export async function useGenerated(settings, push) {
  try {
    const reply = await request('useGenerated', { settings, draw: drawSpec(chartsOf(ALL)) });
    app.upload = null;
    showWarnings('#model-warnings', []);
    $('#model-heads').hidden = true;
    clearErrors();
    show(reply.settings, reply.figures, reply.query, push);
  } catch (e) {
    reportError(null, e);
  }
}
