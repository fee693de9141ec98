// Requests to the engine and the page's busy marks: `body[data-busy]` while anything on screen
// is not yet up to date, `body[data-stale]` while the rest is not, and the progress box of a
// request that takes over 100 ms, naming the stage the engine is at.

import { t, fill } from '../i18n.js';
import { $ } from '../lib/dom.js';
import { STAGES } from '../fields.js';
import { app } from './store.js';

/**
 * `data-busy` is set while anything on screen is not yet up to date (a change waits, or a
 * request is with the engine), `data-stale` while the rest is not: charts and the comparison
 * off screen (catchUp), the URL and the saved view (recorded after the painted frame). Tests
 * wait on both; the benchmark's input-to-paint latency on the first.
 */
export function markBusy() {
  // (inFlight: an update stays busy until its reply is written, after its request has ended)
  const busy = app.requests > 0 || app.inFlight || app.frame !== 0 || app.pending.size > 0 || app.modelBusy;
  const stale = app.stale.size > 0 || app.enginePending || app.urlTimer !== 0 || app.modelStale;
  // (attributes written only when they change: a write costs style work and observers' calls)
  const body = document.body.dataset;
  if (busy !== ('busy' in body)) {
    if (busy) body.busy = 'true';
    else delete body.busy;
  }
  if (stale !== ('stale' in body)) {
    if (stale) body.stale = 'true';
    else delete body.stale;
  }
  if (!app.requests) {
    clearTimeout(app.progressTimer);
    app.progressTimer = 0;
    if (!$('#progress').hidden) $('#progress').hidden = true;
    if ($('#progress-bar').value !== 0) $('#progress-bar').value = 0;
  }
}

/** Shows the stage the engine is at (only once the box is up: a fast update writes nothing). */
export function onProgress(_id, stage) {
  app.stage = stage;
  if (!$('#progress').hidden) writeStage();
}

/** The progress box's text and bar for `app.stage` (the engine's stages, in its order). */
export function writeStage() {
  const bar = $('#progress-bar');
  // (`model:<share>`: the model's weights arriving, a share of their bytes)
  const fetching = app.stage?.startsWith('model:') ? Number(app.stage.slice(6)) : null;
  if (fetching !== null) {
    $('#progress-text').textContent = fill(t(app.lang, 'progress.model'), { pct: Math.round(100 * fetching) });
    bar.value = fetching * bar.max;
    return;
  }
  $('#progress-text').textContent = t(app.lang, app.stage ? `progress.${app.stage}` : 'progress.label');
  bar.value = app.stage ? STEPS.indexOf(app.stage) + 1 : 0;
}

/** The progress bar's steps: the engine's stages (Rust's `Stage::ALL`), then the drawing. */
export const STEPS = [...STAGES, 'draw'];

/** A request to the engine; a progress box appears if it takes longer than 100 ms. */
export async function request(op, payload, transfer, onPartial) {
  app.requests += 1;
  markBusy();
  if (!app.progressTimer) {
    app.progressTimer = setTimeout(() => {
      writeStage();
      $('#progress').hidden = false;
    }, 100);
  }
  try {
    return await app.client.call(op, payload, transfer, onPartial);
  } finally {
    app.requests -= 1;
    // (written only when it holds a stage: every DOM write costs style and layout)
    if (!app.requests) {
      app.stage = null;
      if ($('#progress-text').textContent) $('#progress-text').textContent = '';
    }
    markBusy();
  }
}

/**
 * Runs a task of several requests as one busy span: `body[data-busy]` stays set between its
 * requests (tests and the benchmark wait on it, and must not see the gaps).
 */
export async function busyWhile(task) {
  app.requests += 1;
  markBusy();
  try {
    return await task();
  } finally {
    app.requests -= 1;
    markBusy();
  }
}
