// Section 5's run: the model on the prompt as the data, its first measure with each update,
// its details asked for once the controls rest (one part per request, so a change waits
// behind one part at most), and section 3b's trade-off on the model, a point at a time while
// section 3b is on screen.

import { POLICY_OF } from '../fields.js';
import { $ } from '../lib/dom.js';
import { app } from '../app/store.js';
import { ALL, chartsOf } from '../app/registry.js';
import { request, markBusy } from '../app/requests.js';
import { showError, errorSlot, reportError } from '../app/errors.js';
import { showWarnings } from '../app/warnings.js';
import { drawSpec, deferOffScreen, drawn, scheduleCatchUp, modelWanted } from '../app/schedule.js';
import { show } from '../app/apply.js';
import { sectionContext } from './index.js';
import { writeCompareModel } from './compare.js';
import { showModelSection, writeModel, writeModelDetails } from './model.js';
import { showHeads } from './model-heads.js';
import { writeNeedle, writeOrder, tookNeedleAnswers, firstNeedle, onAccuracyRestart, wireNeedle } from './model-needle.js';

/**
 * Section 5 from what the engine last measured of the model (`app.model`: `{quality}` or
 * `{error}`; `app.modelDetails`), or its note on how to get there when the model is not the data.
 */
export function writeModelFigures(base) {
  const on = Boolean(app.upload?.model);
  showModelSection(on);
  writeCompareModel(base.model);
  if (!on || !app.model) return;
  const ctx = { ...base, shown: app.upload.model, policy: POLICY_OF[app.good?.method], settings: app.good };
  writeModel(app.model, ctx);
  if (app.needle) writeNeedle(ctx);
  else firstNeedle();
  // (the answers are the view's when the update or the details brought them)
  $('#needle').classList.toggle('stale', Boolean(app.needle) && app.needleFor !== app.model);
  $('#model-on').classList.toggle('stale', app.modelDetailsFor !== app.model);
  // (the details change once per rest of the controls: not rewritten on every frame of a drag)
  const key = `${ctx.lang}|${ctx.policy}|${ctx.settings?.heads_budget}`;
  if (app.modelDetails && (app.detailsWritten?.d !== app.modelDetails || app.detailsWritten.key !== key)) {
    writeModelDetails(app.modelDetails, ctx);
    app.detailsWritten = { d: app.modelDetails, key };
  }
}

/**
 * Section 5's details, in the order they are asked for (the fact's answers first, where the
 * update left them out, then the texts: what a learner watches).
 */
const MODEL_PARTS = ['needle', 'text', 'policies', 'levers', 'allocation'];

/**
 * Takes the engine's first measure of the model (`model` of an update's reply) and asks for the
 * details once the controls rest, one part per request (each a few runs of the model), so a
 * change made meanwhile waits behind one part at most and the rest is asked for its own view.
 */
export function tookModel(model) {
  app.model = model ?? null;
  // (section 5's figures are out of date until its last detail lands: data-busy says so)
  app.modelBusy = Boolean(app.model?.quality);
  markBusy();
  if (!app.model?.quality) return;
  tookNeedleAnswers(model.needle);
  app.needleFor = model.needle ? app.model : null;
  const parts = MODEL_PARTS.filter((p) => p !== 'needle' || (app.needle && !model.needle));
  // (the model's share of the engine's compute, for the benchmark: benches/model.mjs)
  performance.measure('kvlab:model:quality', { start: performance.now() - model.ms, duration: model.ms });
  // (of which the needle's answers, when they came with it)
  if (model.needleMs) performance.measure('kvlab:model:answers', { start: performance.now() - model.needleMs, duration: model.needleMs });
  window.clearTimeout(app.detailsTimer);
  const asked = app.model;
  const details = {};
  const next = async (i) => {
    if (app.model !== asked) return; // (a newer view asks for its own)
    if (app.inFlight || app.pending.size) {
      app.detailsTimer = window.setTimeout(() => next(i), 150);
      return;
    }
    const part = parts[i];
    try {
      const d = await request('modelPart', { part });
      if (app.model !== asked || !d) return;
      performance.measure(`kvlab:model:${part}`, { start: performance.now() - d.ms, duration: d.ms });
      details[part] = d;
      if (part === 'needle' && d.Ok) {
        tookNeedleAnswers(d.Ok);
        app.needleFor = asked;
        writeModelFigures(sectionContext());
      }
    } catch (e) {
      app.modelBusy = false;
      markBusy();
      if (!e.stopped) showError(null, e.message);
      return;
    }
    if (i + 1 < parts.length) {
      next(i + 1);
      return;
    }
    app.modelDetails = details;
    app.modelDetailsFor = asked;
    writeModelFigures(sectionContext());
    app.modelBusy = false;
    markBusy();
    sweepAccuracy(asked);
    sweepModel(asked);
  };
  app.detailsTimer = window.setTimeout(() => next(0), 150);
}

/**
 * Section 3b's trade-off on the model, after section 5's details and while section 3b is on
 * screen (it starts when the section comes on screen): one point per request (one run of the
 * model), so a change waits behind one at most; the chart is redrawn as each curve is
 * complete. While the controls that change the curves rest, the engine answers from what it has.
 */
export function sweepModel(asked) {
  app.sweepFor = null;
  sweepParts(asked, {
    part: 'sweep',
    timer: 'detailsTimer',
    onScreen: () => app.compareVisible,
    park: () => { app.sweepFor = asked; }, // (the observer goes on when section 3b comes on screen)
    took: (r) => {
      if (r.curveDone) {
        app.stale.add('model-tradeoff');
        scheduleCatchUp(0);
      }
      if (r.done) performance.mark('kvlab:model:swept'); // (the tests wait for it)
      return r.done;
    },
  });
}

/**
 * Section 5's accuracy chart, after its details and while section 5 is on screen (it starts
 * when the section comes on screen): one case of one curve per request, so a change waits
 * behind one at most; the chart is redrawn and its line under it worded as each curve is
 * complete, and marked stale until the last.
 */
export function sweepAccuracy(asked) {
  app.accuracyFor = null;
  window.clearTimeout(app.accuracyTimer);
  const chart = $('#needle-chart');
  chart.classList.add('stale');
  sweepParts(asked, {
    part: 'accuracy',
    timer: 'accuracyTimer',
    ready: () => Boolean(app.needle),
    onScreen: () => app.modelVisible,
    park: () => { app.accuracyFor = asked; }, // (the observer goes on when section 5 comes on screen)
    took: (r) => {
      if (r.summary) {
        app.needleSummary = r.summary;
        writeOrder(sectionContext());
      }
      if (r.curveDone || r.done) {
        app.stale.add('needle');
        scheduleCatchUp(0);
      }
      chart.classList.toggle('stale', !r.done);
      if (r.done) performance.mark('kvlab:needle:swept'); // (the tests wait for it)
      return r.done;
    },
  });
}

/**
 * Asks the engine for the model's `part` (section 3b's trade-off or section 5's accuracy),
 * one request at a time, while `asked` is the model in use, `ready()` holds and its section is
 * on screen (`onScreen()`; else `park()`, and the section's observer goes on); while the
 * controls move it waits (`app[timer]`). `took(reply)` takes each answer and says whether the
 * part is done.
 */
function sweepParts(asked, { part, timer, onScreen, park, took, ready = () => true }) {
  const step = async () => {
    if (app.model !== asked || !ready()) return;
    if (!onScreen()) {
      park();
      return;
    }
    if (app.inFlight || app.pending.size) {
      app[timer] = window.setTimeout(step, 150);
      return;
    }
    let d;
    try {
      d = await request('modelPart', { part });
    } catch (e) {
      if (!e.stopped) showError(null, e.message);
      return;
    }
    if (app.model !== asked || !d) return;
    if (d.Err) {
      showError(null, d.Err);
      return;
    }
    performance.measure(`kvlab:model:${part}`, { start: performance.now() - d.ms, duration: d.ms });
    if (!took(d.Ok)) app[timer] = window.setTimeout(step, 0);
  };
  step();
}
onAccuracyRestart(() => sweepAccuracy(app.model));

/** The model's run the page asks for: the prompt, layer and head chosen beside it. */
function modelChoice() {
  return { prompt: $('#model-prompt').value, layer: Number($('#model-layer').value), head: Number($('#model-head').value) };
}

/**
 * A link made on the model's data (`data=model&prompt=...&model_layer=&model_head=`) runs it
 * again; a layer or head the model lacks leaves that control as it is.
 */
export function runLinkedModel(linked) {
  if (linked.get('data') !== 'model' || !linked.has('prompt')) return;
  $('#model-prompt').value = linked.get('prompt');
  // (section 5's fact: asked once the model has run; one the model refuses is said there)
  if (linked.has('fact_name')) {
    $('#needle-key').value = linked.get('fact_name');
    $('#needle-value').value = linked.get('fact_number') ?? '';
    const distance = Number(linked.get('fact_distance'));
    if (Number.isInteger(distance) && distance >= 0) {
      $('#needle-distance').max = String(Math.max(Number($('#needle-distance').max), distance));
      $('#needle-distance').value = String(distance);
    }
    $('#needle-before').checked = linked.get('fact_asked') !== 'after';
  }
  for (const [id, key] of [['#model-layer', 'model_layer'], ['#model-head', 'model_head']]) {
    const select = $(id);
    const want = linked.get(key);
    if ([...select.options].some((o) => o.value === want)) select.value = want;
  }
  $('#model-box').open = true;
  onModel($('#model-use'));
}

/** Runs the model on the prompt and uses the layer and head chosen as the data. */
export async function onModel(button) {
  const model = modelChoice();
  const start = performance.now();
  try {
    const spec = drawSpec(chartsOf(ALL));
    const later = deferOffScreen(spec, false);
    const reply = await request('useModel', {
      ...model, keep: { lang: app.lang, embed: app.good.embed }, draw: spec, measureModel: modelWanted(),
    });
    // (as an upload: the sections read its token texts; `model` marks it for Stop and the URL)
    app.upload = { model, about: null, files: [], tokens: reply.tokens };
    if (reply.modelSkipped) app.modelStale = true;
    else tookModel(reply.model);
    errorSlot(button).hidden = true;
    showWarnings('#model-warnings', reply.result.warnings);
    show(reply.settings, reply.figures, reply.query, true);
    // (the charts off screen, and section 5 when it was, are drawn and measured by the
    // catch-up once the page rests; `show` counted every chart as drawn)
    drawn(spec, later);
    // Click to the frame painted with the model's view (the next animation frame starts after
    // it): the real-model issue's latency, benches/model.mjs.
    window.requestAnimationFrame(() => performance.measure('kvlab:model:run', { start, end: performance.now() }));
    await showHeads(model, () => onModel($('#model-use')));
  } catch (e) {
    reportError(button, e);
  }
}

/** Wires the model's buttons: "Run" beside the prompt, and section 5's own; the fact's controls. */
export function wireModel() {
  wireNeedle();
  $('#model-use').addEventListener('click', (ev) => onModel(ev.target));
  // (section 5's own button, and the data section's: the model as a first-class choice)
  for (const id of ['#model-run', '#data-model-run']) {
    $(id).addEventListener('click', () => {
      $('#model-box').open = true;
      onModel($('#model-use'));
    });
  }
}
