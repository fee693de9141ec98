// What is drawn when: the charts' sizes (a ResizeObserver, so drawing never forces a layout),
// which charts are on screen (an IntersectionObserver), and the catch-up that brings what is
// off screen up to date once the controls rest: an update draws only what is on screen, and
// the comparison waits while its section is off screen.

import { writeCompare } from '../sections/compare.js';
import { writeKivi } from '../sections/quant.js';
import { writeLevers } from '../sections/together.js';
import { renderFormulas } from '../formulas.js';
import { t } from '../i18n.js';
import { sectionContext } from '../sections/index.js';
import { tookModel, writeModelFigures, sweepModel, sweepAccuracy } from '../sections/model-run.js';
import { app } from './store.js';
import { NEEDS_COMPARISON } from './registry.js';
import { measureTimings } from './perf.js';
import { request, markBusy } from './requests.js';
import { reportError } from './errors.js';

/** Canvas CSS sizes, kept by a ResizeObserver so drawing never forces a layout. */
const canvasBoxes = new WeakMap();
const resized = new Set();
let sizes = null;
let onScreen = null;

/** Starts observing every chart's canvas and the sections whose work waits off screen. */
export function observe() {
  sizes = new ResizeObserver((entries) => {
    for (const e of entries) {
      const box = e.contentBoxSize?.[0];
      canvasBoxes.set(e.target, {
        width: box ? box.inlineSize : e.contentRect.width,
        height: box ? box.blockSize : e.contentRect.height,
      });
      if (e.target.dataset.chart) resized.add(e.target.dataset.chart);
    }
    if (app.figures && resized.size) {
      const names = [...resized];
      resized.clear();
      redraw(names);
    }
  });
  onScreen = new IntersectionObserver(seen);
  for (const c of document.querySelectorAll('canvas[data-chart]')) {
    sizes.observe(c);
    onScreen.observe(c);
    app.canvases[c.dataset.chart] = c;
  }
  for (const id of ['#compare', '#together', '#real-model']) onScreen.observe(document.querySelector(id));
}

/** Replaces every chart canvas by a new one (a canvas handed to a worker cannot be handed again). */
export function freshCanvases() {
  for (const [name, old] of Object.entries(app.canvases)) {
    const fresh = old.cloneNode(false);
    sizes.unobserve(old);
    onScreen.unobserve(old);
    old.replaceWith(fresh);
    sizes.observe(fresh);
    onScreen.observe(fresh);
    app.canvases[name] = fresh;
  }
}

/** A canvas's size in device pixels (from its CSS box). */
function canvasSize(canvas) {
  const ratio = window.devicePixelRatio || 1;
  let box = canvasBoxes.get(canvas);
  if (!box) {
    box = canvas.getBoundingClientRect(); // first draw only
    canvasBoxes.set(canvas, { width: box.width, height: box.height });
  }
  return [Math.max(1, Math.round(box.width * ratio)), Math.max(1, Math.round(box.height * ratio))];
}

/** What the engine needs to draw `names` (only charts this view shows). */
export function drawSpec(names) {
  const charts = [];
  const sizes = {};
  for (const name of new Set(names)) {
    const canvas = document.querySelector(`canvas[data-chart="${name}"]`);
    if (!canvas) continue;
    // In embed mode only one section is shown (checked without reading layout): the one
    // whose `data-section` the embed names.
    if (app.good?.embed && canvas.closest('[data-section]')?.dataset.section !== app.good.embed) continue;
    charts.push(name);
    sizes[name] = canvasSize(canvas);
  }
  return { charts, sizes, labels: app.labels, dark: app.dark, scale: window.devicePixelRatio || 1 };
}

/**
 * Redraws charts without recomputing (resize, theme, language): those on screen now, the
 * others when the controls rest (catchUp).
 */
export async function redraw(names) {
  const start = performance.now();
  try {
    const spec = drawSpec(names);
    const later = deferOffScreen(spec, app.enginePending);
    const reply = await request('draw', { draw: spec });
    measureTimings(reply.timings, start);
    drawn(spec, later);
  } catch (e) {
    reportError(null, e);
  }
}

/**
 * Takes the charts that are off screen (and, with `comparisonPending`, those drawn from the
 * comparison) out of `spec`; returns them. A chart is on screen when its canvas intersects
 * the viewport (an IntersectionObserver keeps `app.visible`).
 */
export function deferOffScreen(spec, comparisonPending) {
  const now = spec.charts.filter((c) => app.visible.has(c) && !(comparisonPending && NEEDS_COMPARISON.has(c)));
  const later = spec.charts.filter((c) => !now.includes(c));
  spec.charts = now;
  return later;
}

/** Records that `spec.charts` are up to date and `later` are not; schedules the catch-up. */
export function drawn(spec, later) {
  for (const c of spec.charts) app.stale.delete(c);
  for (const c of later) app.stale.add(c);
  if (app.stale.size || app.enginePending || app.modelStale) scheduleCatchUp(2);
  markBusy();
}

/**
 * Schedules the catch-up of what is off screen: after `frames` animation frames without a
 * change (0: as soon as the engine is free, for a stale chart that came on screen). Dragging
 * a slider makes a change every frame, so the catch-up never delays a drag; it runs when the
 * person lets go, a chart at a time.
 */
export function scheduleCatchUp(frames) {
  if (app.catchUp) {
    if (frames > 0) return; // already scheduled (the sooner wins)
    if (app.catchUp > 0) window.cancelAnimationFrame(app.catchUp);
    else clearTimeout(-app.catchUp);
  }
  let left = frames;
  const tick = () => {
    if (left-- > 0) {
      app.catchUp = window.requestAnimationFrame(tick);
      return;
    }
    // (a task after the frame: the catch-up starts once this frame is painted)
    app.catchUp = -setTimeout(() => {
      app.catchUp = 0;
      catchUp();
    }, 0);
  };
  tick();
}

/**
 * One step of the catch-up: the deferred comparison first, then one stale chart (those on
 * screen first), then the next step. Stops whenever a change waits or a request is with the
 * engine (the update's end schedules it again), so a change never waits behind more than one
 * step (at 64 x 32,768: the comparison, or one chart, a few ms).
 */
async function catchUp() {
  // (Before the first view is complete, start.js schedules it when it is.)
  if (!app.ready) return;
  if (app.inFlight || app.requests || app.pending.size || app.frame) {
    if (app.stale.size || app.enginePending || app.modelStale) scheduleCatchUp(2);
    return;
  }
  const start = performance.now();
  try {
    if (app.modelStale) {
      // (the model's quality first: the `kl` chart is drawn from it)
      const spec = drawSpec(['kl']);
      const reply = await request('measureModel', { draw: spec });
      app.modelStale = false;
      app.stale.delete('kl');
      tookModel(reply.model);
      writeModelFigures(sectionContext());
      measureTimings(reply.timings, start, 'kvlab:later:');
    } else if (app.enginePending) {
      await completeComparison([...app.stale].filter((c) => NEEDS_COMPARISON.has(c) && app.visible.has(c)), start);
    } else {
      const next = [...app.stale].sort((a, b) => app.visible.has(b) - app.visible.has(a))[0];
      if (!next) return;
      await drawStale(next, start);
    }
  } catch (e) {
    // Not retried until the next change: the message says why.
    app.stale.clear();
    app.enginePending = false;
    markBusy();
    if (!e.stopped) reportError(null, e);
    return;
  }
  if (app.stale.size || app.enginePending || app.modelStale) scheduleCatchUp(0);
}

/** Draws the stale chart `name` (the catch-up's step, or before its PNG is saved). */
export async function drawStale(name, start = performance.now()) {
  const spec = drawSpec([name]);
  const reply = await request('draw', { draw: spec });
  measureTimings(reply.timings, start, 'kvlab:later:');
  // (a chart the page no longer shows, e.g. after switching to an embed, leaves the set)
  app.stale.delete(name);
  drawn(spec, []);
}

/** Whether the engine left something for `complete`: the comparison or the bits lever. */
export function leftForComplete(f) {
  return f.pending || f.together.fewerBits.pending;
}

/** Computes the deferred comparison, writes its figures, draws `charts` (of its charts). */
export async function completeComparison(charts, start = performance.now()) {
  const spec = drawSpec(charts);
  const reply = await request('complete', { draw: spec });
  measureTimings(reply.timings, start, 'kvlab:later:');
  app.enginePending = leftForComplete(reply.figures);
  // (only the comparison, KIVI and the levers changed: write them)
  app.figures = reply.figures;
  const ctx = sectionContext();
  if (!reply.figures.pending) writeCompare(reply.figures.compare, reply.figures.data.steps, ctx);
  if (!reply.figures.kiviPending) writeKivi(reply.figures.kivi, ctx);
  writeLevers(reply.figures.together, ctx);
  renderFormulas(reply.figures, app.good, (key) => t(app.lang, key), new Set(['compare', 'together']));
  if (reply.drawError) throw reply.drawError;
  drawn(spec, []);
}

/** Whether the model's quality is on screen: section 5, or section 3b's model columns. */
export const modelWanted = () => app.modelVisible || app.compareVisible;

/** Which charts and whether the comparison section are on screen (see deferOffScreen). */
function seen(entries) {
  for (const e of entries) {
    const name = e.target.dataset.chart;
    if (name) {
      if (e.isIntersecting) app.visible.add(name);
      else app.visible.delete(name);
    } else if (e.target.id === 'together') {
      app.leversVisible = e.isIntersecting;
    } else if (e.target.id === 'real-model') {
      app.modelVisible = e.isIntersecting;
      if (app.modelVisible && app.accuracyFor && app.accuracyFor === app.model) sweepAccuracy(app.model);
    } else {
      app.compareVisible = e.isIntersecting;
      if (app.compareVisible && app.sweepFor && app.sweepFor === app.model) sweepModel(app.model);
    }
  }
  // A stale chart came on screen: draw it as soon as the engine is free.
  if ([...app.stale].some((c) => app.visible.has(c))
    || (app.enginePending && (app.compareVisible || app.leversVisible))
    || (app.modelStale && modelWanted())) {
    scheduleCatchUp(0);
  }
}
