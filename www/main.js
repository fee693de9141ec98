// kvlab page: wires the DOM to the engine. It holds no math: every number shown comes from the
// Rust crate, which runs with its data in a Web Worker (engine.js, worker.js; see client.js for
// the fallback when a browser cannot draw from a worker), so the page never freezes.
//
// Flow: a control's input event records the change and asks for an animation frame; the frame
// sends the whole settings object and the list of charts to redraw to the engine (which
// recomputes only what changed and draws on the transferred canvases), then writes the figures
// and formulas it gets back and records the URL. Changes made while the engine is busy are
// coalesced into one request. A computation taking over 100 ms shows its stage in a progress
// box. Each round trip is marked with performance.measure('kvlab:update').

import { connect } from './client.js';
import { TEXT, LOAD_ZH, t, fill, placeName, applyLanguage, chartLabels, initialLanguage } from './i18n.js';
import { renderFormulas, num, bytes } from './formulas.js';
import { FIELDS } from './fields.js';
import { figure, grouped, aloneKey } from './sections/common.js';
import { writeBudget } from './sections/budget.js';
import { writeQuant, writeKivi } from './sections/quant.js';
import { writeSelect } from './sections/select.js';
import { writeCompare, writeCompareModel } from './sections/compare.js';
import { writeTogether, writeLevers } from './sections/together.js';
import { showModelSection, writeModel, writeModelDetails } from './sections/model.js';

/** A Chinese character (the templates' spacing around names said in Chinese, errorText). */
const HAN = /[\u4e00-\u9fff]/;

/** Which sections a settings key affects (the data's keys, absent here, affect everything). */
const SECTIONS_OF = Object.fromEntries(Object.entries(FIELDS)
  .filter(([, f]) => f.sections).map(([k, f]) => [k, f.sections]));
const ALL = ['budget', 'quant', 'select', 'compare', 'model'];
// Charts of a section that some of its controls do not change: the policy strips show which
// tokens each policy keeps, which the quantization controls (those that change what the bits
// change) leave alone.
const QUANT = String(SECTIONS_OF.bits);
const UNCHANGED_BY = {
  strips: new Set(Object.keys(SECTIONS_OF).filter((k) => String(SECTIONS_OF[k]) === QUANT)),
};
// The charts of each section, as its canvases name them: index.html is the one list (a new
// chart is a canvas there and a `render::Chart` in the engine, nothing here).
const CHARTS = Object.fromEntries(ALL.map((s) => [s,
  [...document.querySelectorAll(`[data-section="${s}"] canvas[data-chart]`)].map((c) => c.dataset.chart)]));
// Charts drawn from the policy comparison (not drawn while the engine defers it).
const NEEDS_COMPARISON = new Set(['strips', 'tradeoff']);
const NUMERIC = new Set(Object.keys(FIELDS).filter((k) => FIELDS[k].numeric));

const app = {
  client: null, // the engine connection (client.js)
  settings: null,
  good: null, // the settings of the view on screen
  editing: null, // a number input being typed in, not yet committed (wire)
  restored: false, // the view opened is the one kept in this browser (no query in the address)
  note: null, // the i18n key of the page's own note in #url-warnings (showNote)
  figures: null,
  lang: 'en',
  dark: window.matchMedia('(prefers-color-scheme: dark)').matches,
  pending: new Map(), // key -> control element that changed it
  sections: new Set(),
  commit: false,
  frame: 0,
  ready: false, // the first view is on screen
  presented: false, // the controls are wired (present())
  listed: false, // the model presets are listed (present())
  ahead: null, // the default view drawn ahead (showAhead), until the engine's charts replace it
  early: new Map(), // key -> value a control was set to before the controls were wired (keepEarlyInput)
  stopKeepingEarly: null, // removes keepEarlyInput's listeners (applyEarlyInput)
  canvases: {}, // chart name -> its canvas element (replaced after Stop)
  upload: null, // {choice, about, files} of the uploaded data in use (replayed after Stop); about: its fields, worded in the page's language; files: [{name, bytes}] it was chosen from
  linkOnUpload: false, // the page was opened on a link made on uploaded data (`data=upload`)
  assignment: null, // the roles the engine proposed for the files listed (kvlab::upload::Assignment) and `manual`, the roles chosen by hand since
  uploadNotes: null, // the upload's warnings as fields while #upload-warnings shows them (worded again on a language switch)
  urlNotes: null, // the link's repairs ({key, message, repair}) while #url-warnings shows them (likewise)
  shownErrors: new Map(), // error slot -> the engine error it shows (likewise)
  clamped: null, // a count typed above its bound (bound()), to say once the view follows
  inFlight: false, // an update request is with the engine
  requests: 0, // requests of any kind not yet answered
  progressTimer: 0,
  query: '', // the canonical query of `good`
  labels: null,
  inputAt: null, // performance.now() of the first input event not yet painted
  modelVisible: true, // section 5 on screen (its IntersectionObserver says)
  modelStale: false, // an update left the model's quality for the catch-up
  sweepFor: null, // the model whose trade-off sweep waits for section 3b to come on screen
  urlTimer: 0,
  urlSeq: 0, // counts updates: a URL recording scheduled before the last one is dropped
  urlCommit: false,
  sent: null, // the settings of the update with the engine
  lateCommit: false, // a commit (change event) for a value already with the engine
  // Work for what is off screen waits until the controls rest (see catchUp):
  visible: new Set(), // charts whose canvas is on screen
  compareVisible: false, // the comparison's section is on screen
  leversVisible: false, // the levers' section ("both levers together") is on screen
  stale: new Set(), // charts drawn for earlier settings (off screen when those changed)
  // the engine deferred the comparison or the bits lever's RMSE (their sections were off screen)
  enginePending: false,
  catchUp: 0, // the scheduled catch-up (animation frame or timer), 0 when none
  stage: null, // the stage the engine reported last (shown once the progress box is up)
  timed: 0, // updates whose measures are on the performance timeline (see trimTimeline)
};

/**
 * How many updates' marks and measures the page keeps on the performance timeline. The browser
 * keeps every entry until it is cleared, and an update leaves about ten (a drag: sixty updates a
 * second), so a long visit would grow the list without bound. An init script may lower it
 * (`globalThis.KVLAB_TIMELINE_KEEP`), as the tests do.
 */
const TIMELINE_KEEP = Number(globalThis.KVLAB_TIMELINE_KEEP) > 0 ? Number(globalThis.KVLAB_TIMELINE_KEEP) : 1000;

/**
 * Counts an update; after TIMELINE_KEEP of them, clears the page's per-update marks and
 * measures (every `kvlab:` measure and the `kvlab:update:start` mark; the one-off
 * `kvlab:load:*` marks stay), so the timeline holds the last TIMELINE_KEEP updates at most.
 */
function trimTimeline() {
  if (++app.timed < TIMELINE_KEEP) return;
  app.timed = 0;
  const names = new Set(performance.getEntriesByType('measure')
    .map((m) => m.name).filter((n) => n.startsWith('kvlab:')));
  for (const name of names) performance.clearMeasures(name);
  performance.clearMarks('kvlab:update:start');
}

const $ = (sel) => document.querySelector(sel);
const controls = () => document.querySelectorAll('[data-key]');

function errorSlot(control) {
  return control?.closest('.control')?.querySelector('.error') ?? null;
}

/** Shows `message` next to `control` (or in the status line); `error`, the engine's, when it is one. */
function showError(control, message, error = null) {
  const slot = errorSlot(control) ?? $('#status');
  slot.textContent = message;
  slot.hidden = false;
  // (kept to word it again on a language switch; the engine's English in data-value, as
  // figures keep theirs)
  if (error) {
    app.shownErrors.set(slot, error);
    if (error.message) slot.dataset.value = error.message;
    else delete slot.dataset.value;
  } else {
    app.shownErrors.delete(slot);
    delete slot.dataset.value;
  }
  control?.setAttribute('aria-invalid', 'true');
}

/** Shows a failed request's message (a request cut short by Stop is not an error). */
function reportError(control, e) {
  if (e?.stopped) return;
  showError(control, errorText(e), e);
}

/**
 * One of the link's repairs in the page's language: a value out of its range (`repair`), or a
 * setting the engine refused for this data (`refusal`, see `errorText`) and what is used
 * instead (`every`: every setting's default); any other in English, the engine's message.
 */
function urlWarningText(w) {
  if (w.repair) return describeRepair(w.key, w.repair, true);
  if (w.textKey) return fill(t(app.lang, w.textKey), w.textFields);
  // (a warning names its setting `key`; an engine error its `field`)
  const said = w.refusal ? errorText({ ...w, field: w.key }) : null;
  if (said === null || said === w.message) return w.message;
  return said + t(app.lang, w.every ? 'repair.every-default' : 'repair.default');
}

/**
 * An engine error's text: a setting out of range, a bits / group size the quantizer refuses,
 * a budget, window, kernel or sinks the selection refuses, a model too large to count (`refusal`,
 * the fields of kvlab::state::Repair, quant::QuantError, select::SelectError,
 * lab::LabError::Channel or budget::BudgetError::Overflow, by `refusalOf`) in the page's
 * language; a file the upload module refuses (`refusalOf: 'load'`, io::LoadError::visit's
 * fields) in Chinese from LOAD_ZH, in English as the module said it; a message of the page's own
 * (`textKey`, `textFields`) or several (`list`, one per line); any other its message (in
 * English). `repaired`: a repair whose replacement is used (said with it).
 */
function errorText(e) {
  if (e?.list) return e.list.map(errorText).join('\n');
  const fields = e?.refusal;
  if (fields && e.refusalOf === 'repair') return describeRepair(e.field, fields, Boolean(e.repaired));
  // (a file the upload module refused: in English its own message)
  if (fields && e.refusalOf === 'load') {
    let template = app.lang === 'zh' ? LOAD_ZH[fields.kind] : null;
    if (!template) return e.message;
    const named = {};
    for (const k of ['field', 'role', 'axis', 'left', 'right', 'first', 'second']) {
      if (!(k in fields)) continue;
      const said = placeName(app.lang, fields[k]);
      named[k] = said;
      // (the templates space these names off the Chinese around them, as a Latin name needs;
      // a name said in Chinese joins its neighbours: '注意力的形状', not '注意力 的形状')
      if (HAN.test(said.at(0))) template = template.replace(new RegExp(`(${HAN.source}) \\{${k}\\}`), `$1{${k}}`);
      if (HAN.test(said.at(-1))) template = template.replace(new RegExp(`\\{${k}\\} (?=${HAN.source})`), `{${k}}`);
    }
    // (a file none of whose tensors loads: each tensor's reason worded as a skipped one is)
    if (fields.skipped) {
      const reasons = fields.skipped.map((why) => describeSkipped('', { ...why, file: fields.file }));
      if (reasons.includes('')) return e.message;
      named.reasons = reasons.join('；') || t(app.lang, 'upload.skipped.none');
    }
    return fill(template, { ...fields, ...named });
  }
  // (a message the page itself words)
  if (e?.textKey) return fill(t(app.lang, e.textKey), e.textFields);
  // (the ranges a learner can type past; a refusal about the data itself keeps its message)
  const key = fields && `${e.refusalOf}.refused.${fields.kind}`;
  if (!key || !(key in TEXT.en)) return e?.message ?? String(e);
  return fill(t(app.lang, key), {
    ...fields,
    ...(fields.scheme && { scheme: t(app.lang, `quant.scheme-name.${fields.scheme}`) }),
    ...(fields.axis && { axis: t(app.lang, `quant.axis.${fields.axis.replaceAll(' ', '-')}`) }),
  });
}

/**
 * A value the engine refused or repaired (`repair`, fields) for the settings key `key`, in the
 * page's language; with `repaired`, what is used instead too (in English, the engine's message).
 */
function describeRepair(key, repair, repaired) {
  const said = fill(t(app.lang, `repair.${repair.kind}`), {
    key,
    ...repair,
    options: repair.options?.join(', '),
  });
  if (!repaired) return said;
  const used = repair.used ?? repair.limit;
  return said + (used === undefined
    ? t(app.lang, 'repair.default')
    : fill(t(app.lang, 'repair.used'), { used }));
}

/**
 * Clears the messages next to the controls. With `used` (the settings now in use), a control
 * whose value was refused shows the value in use again (`except`, refused once more, keeps
 * what was typed): a field never goes on showing a refused value without its message.
 */
function clearErrors(used = null, except = null) {
  // Only messages that are showing: rewriting an unchanged element still costs style and layout.
  for (const e of document.querySelectorAll('.control .error:not([hidden])')) {
    e.textContent = '';
    e.hidden = true;
    delete e.dataset.value;
    app.shownErrors.delete(e);
  }
  for (const c of document.querySelectorAll('[aria-invalid]')) {
    c.removeAttribute('aria-invalid');
    const key = c.dataset.key;
    if (used && key && c !== except && key in used) writeControl(c, used[key]);
  }
}

function settingFromControl(control) {
  const key = control.dataset.key;
  const raw = control.value;
  if (key === 'channel') return raw === 'auto' ? null : Number(raw);
  if (NUMERIC.has(key)) {
    // What is not a whole number goes as typed: the engine's check names it (an empty field
    // is not 0, nor 2.5 silently 3).
    const n = Number(raw);
    return raw.trim() !== '' && Number.isSafeInteger(n) ? n : raw;
  }
  return raw;
}

/** Shows setting value `v` in control `c` and its echoes (not in a number being typed there). */
function writeControl(c, v) {
  if (c === app.editing && c === document.activeElement) return;
  const key = c.dataset.key;
  c.value = key === 'channel' ? (v === null || v === undefined ? 'auto' : String(v)) : String(v);
  if (key === 'bits') $('#bits-value').textContent = String(v);
  // (the number field beside a slider, unless a number is being typed there)
  for (const o of document.querySelectorAll(`.control input.exact[data-key="${key}"]`)) {
    if (o !== c && !(o === app.editing && o === document.activeElement)) o.value = String(v);
  }
}

function writeControls(s) {
  for (const c of controls()) writeControl(c, s[c.dataset.key]);
  document.body.dataset.method = s.method;
  document.body.dataset.model = s.model === 'custom' ? 'custom' : 'preset';
}

/**
 * Slider ranges follow the data and the engine: B and r up to T, w up to S, channels 0..d-1;
 * Bits from the scheme's fewest, B from the method's smallest (StreamingLLM's sinks). A slider
 * never rests on a value the engine would refuse; its number field beside it gets the same range.
 */
function fitRanges(f) {
  const T = f.data.tokens;
  const setRange = (key, min, max) => {
    for (const el of document.querySelectorAll(`[data-key="${key}"]`)) {
      if (el.max === String(max) && el.min === String(min)) continue;
      el.min = String(min);
      el.max = String(max);
      // A slider's value was clamped to its old range when written (Reset, Back, a link: B =
      // 800 shown at 512): the value in use again, now that it fits.
      const want = app.settings?.[key];
      if (el.type === 'range' && want !== undefined) writeControl(el, want);
    }
  };
  setRange('bits', f.quant.bitsMin, 16);
  setRange('budget', f.select.budgetMin, T);
  setRange('recent', 0, T);
  setRange('window', 1, f.data.steps);
  setRange('future', 0, Math.max(0, f.data.steps - 1));
  figure('budget-min', f.select.budgetMin,
    fill(t(app.lang, 'select.budget-min'), { sinks: grouped(f.select.sinkCount), min: grouped(f.select.budgetMin) }));
  const ch = $('#channel');
  if (ch.options.length !== f.data.channels + 1) {
    // (the setting in use: a channel of a link was not an option yet when the controls were
    // written, and the select fell back to auto)
    const set = app.settings?.channel;
    const keep = set === null || set === undefined ? ch.value : String(set);
    ch.replaceChildren();
    const auto = new Option(t(app.lang, 'quant.channel.auto'), 'auto');
    auto.dataset.i18n = 'quant.channel.auto';
    ch.add(auto);
    for (let j = 0; j < f.data.channels; j += 1) ch.add(new Option(String(j), String(j)));
    ch.value = [...ch.options].some((o) => o.value === keep) ? keep : 'auto';
  }
  if ($('#use-generated').hidden !== f.data.generated) $('#use-generated').hidden = f.data.generated;
  // The generator's controls do nothing to uploaded data: off while it is in use.
  for (const c of document.querySelectorAll('#data > .controls [data-key]')) {
    if (c.disabled === f.data.generated) c.disabled = !f.data.generated;
  }
}

/** The policy section 3's method stands for (`policy.*` names). */
const METHOD_POLICY = { h2o: 'h2o-sum', snapkv: 'snapkv', streaming: 'streaming-llm' };

/**
 * Section 5 from what the engine last measured of the model (`app.model`: `{quality}` or
 * `{error}`; `app.modelDetails`), or its note on how to get there when the model is not the data.
 */
function writeModelFigures(base) {
  const on = Boolean(app.upload?.model);
  showModelSection(on);
  writeCompareModel(base.model);
  if (!on || !app.model) return;
  const ctx = { ...base, shown: app.upload.model, policy: METHOD_POLICY[app.good?.method], settings: app.good };
  writeModel(app.model, ctx);
  $('#model-on').classList.toggle('stale', app.modelDetailsFor !== app.model);
  // (the details change once per rest of the controls: not rewritten on every frame of a drag)
  const key = `${ctx.lang}|${ctx.policy}|${ctx.settings?.heads_budget}`;
  if (app.modelDetails && (app.detailsWritten?.d !== app.modelDetails || app.detailsWritten.key !== key)) {
    writeModelDetails(app.modelDetails, ctx);
    app.detailsWritten = { d: app.modelDetails, key };
  }
}

/** Section 5's details, in the order they are asked for (the texts first: what a learner watches). */
const MODEL_PARTS = ['text', 'policies', 'levers', 'allocation'];

/**
 * Takes the engine's first measure of the model (`model` of an update's reply) and asks for the
 * details once the controls rest, one part per request (each a few runs of the model), so a
 * change made meanwhile waits behind one part at most and the rest is asked for its own view.
 */
function tookModel(model) {
  app.model = model ?? null;
  if (!app.model?.quality) return;
  // (the model's share of the engine's compute, for the benchmark: benches/model.mjs)
  performance.measure('kvlab:model:quality', { start: performance.now() - model.ms, duration: model.ms });
  window.clearTimeout(app.detailsTimer);
  const asked = app.model;
  const details = {};
  const next = async (i) => {
    if (app.model !== asked) return; // (a newer view asks for its own)
    if (app.inFlight || app.pending.size) {
      app.detailsTimer = window.setTimeout(() => next(i), 150);
      return;
    }
    const part = MODEL_PARTS[i];
    try {
      const d = await request('modelPart', { part });
      if (app.model !== asked || !d) return;
      performance.measure(`kvlab:model:${part}`, { start: performance.now() - d.ms, duration: d.ms });
      details[part] = d;
    } catch (e) {
      if (!e.stopped) showError(null, e.message);
      return;
    }
    if (i + 1 < MODEL_PARTS.length) {
      next(i + 1);
      return;
    }
    app.modelDetails = details;
    app.modelDetailsFor = asked;
    writeModelFigures(sectionContext());
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
function sweepModel(asked) {
  app.sweepFor = null;
  const step = async () => {
    if (app.model !== asked) return;
    if (!app.compareVisible) {
      app.sweepFor = asked; // (the observer goes on when section 3b comes on screen)
      return;
    }
    if (app.inFlight || app.pending.size) {
      app.detailsTimer = window.setTimeout(step, 150);
      return;
    }
    let d;
    try {
      d = await request('modelPart', { part: 'sweep' });
    } catch (e) {
      if (!e.stopped) showError(null, e.message);
      return;
    }
    if (app.model !== asked || !d) return;
    if (d.Err) {
      showError(null, d.Err);
      return;
    }
    performance.measure('kvlab:model:sweep', { start: performance.now() - d.ms, duration: d.ms });
    if (d.Ok.curveDone) {
      app.stale.add('model-tradeoff');
      scheduleCatchUp(0);
    }
    if (d.Ok.done) performance.mark('kvlab:model:swept'); // (the tests wait for it)
    else app.detailsTimer = window.setTimeout(step, 0);
  };
  step();
}

/** The page as the section writers need to know it. */
const sectionContext = () => ({
  lang: app.lang,
  embed: app.good?.embed ?? null,
  tokens: app.upload?.tokens ?? null,
  // (section 3b's model columns: section 5's policies on the model, stale until remeasured)
  model: app.upload?.model
    ? { rows: app.modelDetails?.policies?.Ok ?? null, stale: app.modelDetailsFor !== app.model }
    : null,
});

function writeFigures(f) {
  const ctx = sectionContext();
  writeModelFigures(ctx);
  writeQuant(f, ctx);
  writeSelect(f, ctx);
  writeBudget(f, ctx);
  figure('data-description', f.data.description, describeData(f.data));
  writeTogether(f, ctx);
  // (A staged first view: the comparison and KIVI follow; a deferred comparison keeps the
  // figures on screen until the catch-up computes it.)
  if (!f.pending) writeCompare(f.compare, f.data.steps, ctx);
  if (!f.kiviPending) writeKivi(f.kivi, ctx);
}

/** Canvas CSS sizes, kept by a ResizeObserver so drawing never forces a layout. */
const canvasBoxes = new WeakMap();
const resized = new Set();
const observer = new ResizeObserver((entries) => {
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
function drawSpec(names) {
  const charts = [];
  const sizes = {};
  const shownIn = { quant: ['quant'], select: ['select'], compare: ['compare'], budget: ['budget'], together: ['together'], model: ['real-model'] };
  for (const name of new Set(names)) {
    const canvas = document.querySelector(`canvas[data-chart="${name}"]`);
    if (!canvas) continue;
    // In embed mode only one section is shown (checked without reading layout).
    if (app.good?.embed && !shownIn[app.good.embed].includes(canvas.closest('section')?.id)) continue;
    charts.push(name);
    sizes[name] = canvasSize(canvas);
  }
  return { charts, sizes, labels: app.labels, dark: app.dark, scale: window.devicePixelRatio || 1 };
}

const chartsOf = (sections) => [...sections].flatMap((s) => CHARTS[s] ?? []);

/** Page-side measures of the engine's timings (durations as the engine measured them). */
function measureTimings(timings, start, prefix = 'kvlab:') {
  if (!timings) return;
  let at = start;
  // The request's way to the engine (and its wait behind an earlier request), and the reply's
  // way back, when the engine says when it started and sent (epoch ms; the page's clock is
  // performance.now(), from timeOrigin).
  if (timings.started !== undefined) {
    at = Math.max(start, timings.started - performance.timeOrigin);
    performance.measure(`${prefix}to-engine`, { start, end: at });
    const sent = Math.max(at, timings.sent - performance.timeOrigin);
    performance.measure(`${prefix}from-engine`, { start: sent, end: Math.max(sent, performance.now()) });
  }
  if (timings.compute) {
    performance.measure(`${prefix}compute`, { start: at, duration: timings.compute });
    at += timings.compute;
  }
  for (const [name, ms] of Object.entries(timings.draws ?? {})) {
    performance.measure(`${prefix}draw:${name}`, { start: at, duration: ms });
    at += ms;
  }
}

/**
 * `data-busy` is set while anything on screen is not yet up to date (a change waits, or a
 * request is with the engine), `data-stale` while the rest is not: charts and the comparison
 * off screen (catchUp), the URL and the saved view (recorded after the painted frame). Tests
 * wait on both; the benchmark's input-to-paint latency on the first.
 */
function markBusy() {
  // (inFlight: an update stays busy until its reply is written, after its request has ended)
  const busy = app.requests > 0 || app.inFlight || app.frame !== 0 || app.pending.size > 0;
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

const STAGES = ['data', 'quantization', 'selection', 'budget', 'compare', 'kivi', 'draw'];

/** Shows the stage the engine is at (only once the box is up: a fast update writes nothing). */
function onProgress(_id, stage) {
  app.stage = stage;
  if (!$('#progress').hidden) writeStage();
}

function writeStage() {
  const bar = $('#progress-bar');
  // (`model:<share>`: the model's weights arriving, a share of their bytes)
  const fetching = app.stage?.startsWith('model:') ? Number(app.stage.slice(6)) : null;
  if (fetching !== null) {
    $('#progress-text').textContent = fill(t(app.lang, 'progress.model'), { pct: Math.round(100 * fetching) });
    bar.value = fetching * bar.max;
    return;
  }
  $('#progress-text').textContent = t(app.lang, app.stage ? `progress.${app.stage}` : 'progress.label');
  bar.value = app.stage ? STAGES.indexOf(app.stage) + 1 : 0;
}

/** A request to the engine; a progress box appears if it takes longer than 100 ms. */
async function request(op, payload, transfer, onPartial) {
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
async function busyWhile(task) {
  app.requests += 1;
  markBusy();
  try {
    return await task();
  } finally {
    app.requests -= 1;
    markBusy();
  }
}

/**
 * Redraws charts without recomputing (resize, theme, language): those on screen now, the
 * others when the controls rest (catchUp).
 */
async function redraw(names) {
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
function deferOffScreen(spec, comparisonPending) {
  const now = spec.charts.filter((c) => app.visible.has(c) && !(comparisonPending && NEEDS_COMPARISON.has(c)));
  const later = spec.charts.filter((c) => !now.includes(c));
  spec.charts = now;
  return later;
}

/** Records that `spec.charts` are up to date and `later` are not; schedules the catch-up. */
function drawn(spec, later) {
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
function scheduleCatchUp(frames) {
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
  // (Before the first view is complete, main() schedules it when it is.)
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
async function drawStale(name, start = performance.now()) {
  const spec = drawSpec([name]);
  const reply = await request('draw', { draw: spec });
  measureTimings(reply.timings, start, 'kvlab:later:');
  // (a chart the page no longer shows, e.g. after switching to an embed, leaves the set)
  app.stale.delete(name);
  drawn(spec, []);
}

/** Whether the engine left something for `complete`: the comparison or the bits lever. */
function leftForComplete(f) {
  return f.pending || f.together.fewerBits.pending;
}

/** Computes the deferred comparison, writes its figures, draws `charts` (of its charts). */
async function completeComparison(charts, start = performance.now()) {
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
const modelWanted = () => app.modelVisible || app.compareVisible;

/** Which charts and whether the comparison section are on screen (see deferOffScreen). */
const onScreen = new IntersectionObserver((entries) => {
  for (const e of entries) {
    const name = e.target.dataset.chart;
    if (name) {
      if (e.isIntersecting) app.visible.add(name);
      else app.visible.delete(name);
    } else if (e.target.id === 'together') {
      app.leversVisible = e.isIntersecting;
    } else if (e.target.id === 'real-model') {
      app.modelVisible = e.isIntersecting;
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
});

/**
 * The data's one-line description in the page's language: generated data from its generator's
 * settings (the engine's `description` says the same in English), uploads as the engine
 * describes them (file names and shapes).
 */
function describeData(d) {
  const model = app.upload?.model;
  if (d.uploaded && model) {
    // (the run's own facts: the layer and head chosen, the bytes the model read)
    const key = model.head < 0 ? 'data.model.description.mean' : 'data.model.description';
    return fill(t(app.lang, key), { layer: model.layer, head: model.head, bytes: grouped(app.upload.tokens.length - 1) });
  }
  if (d.uploaded) return app.upload?.about ? describeUpload(app.upload.about, d) : d.description;
  return fill(t(app.lang, 'data.description.generated'), generatorFields(d));
}

/** The generator's settings of data `d` (its figures) as the description templates name them. */
function generatorFields(d) {
  const g = d.generator;
  return {
    pattern: t(app.lang, `pattern.short.${g.pattern}`),
    S: d.steps,
    T: d.tokens,
    d: d.channels,
    outliers: g.outlierChannels,
    skewed: g.skewedChannels,
    seed: g.seed,
  };
}

// Uploads, worded from the upload module's fields (kvlab::io::FileAbout, AttentionAbout,
// KvAbout, LoadWarning; in English each equals the engine's own line).

const shapeText = (shape) => `[${shape.join(', ')}]`;

/** The shortest decimal that reads back as the same f32 (what Rust prints for an f32). */
function f32Text(v) {
  for (let p = 1; p < 10; p += 1) {
    const s = Number(v.toPrecision(p));
    if (Math.fround(s) === v) return String(s);
  }
  return String(v);
}

/** An uploaded file's one-line summary. */
function describeFile(file, about) {
  const tr = (key) => t(app.lang, key);
  const fields = { file, shape: shapeText(about.shape ?? []) };
  if (about.format === 'npy') {
    Object.assign(fields, { version: about.version, dtype: about.dtype, order: about.fortranOrder ? 'Fortran' : 'C' });
  } else if (about.format === 'csv') {
    Object.assign(fields, {
      delimiter: tr(`file.delimiter.${about.delimiter}`),
      header: tr(about.headerRow ? 'file.header.yes' : 'file.header.no'),
    });
  } else if (about.format === 'safetensors') {
    Object.assign(fields, { loaded: about.loaded, skipped: about.skipped });
  } else if (about.format === 'tokens') {
    fields.count = about.count;
  }
  return fill(tr(`file.about.${about.format}`), fields);
}

/**
 * The data in use made of an upload (`u`: its fields, kvlab::upload::UploadFigures) and what
 * the engine generated for the parts it did not give (`d`: the data's figures).
 */
function describeUpload(u, d) {
  const tr = (key) => t(app.lang, key);
  const kv = (k) => fill(tr('upload.kv'), {
    dims: `[${[k.layers != null && `L=${k.layers}`, k.heads != null && `H=${k.heads}`, `T=${k.tokens}`, `d=${k.channels}`].filter(Boolean).join(', ')}]`,
    pick: k.heads == null ? '' : fill(tr(k.layers != null ? 'upload.kv.layer-head' : 'upload.kv.head'), {
      layer: k.layer, layers: k.layers, lastLayer: k.layers - 1, head: k.head, heads: k.heads, lastHead: k.heads - 1,
    }),
    T: k.tokens,
    d: k.channels,
  });
  const uploaded = [
    u.attention && describeAttention(u.attention),
    u.keys && kv(u.keys),
    u.values && fill(tr('upload.values'), { kv: kv(u.values) }),
  ].filter(Boolean);
  const said = fill(tr('upload.description'), { parts: uploaded.join(tr('upload.join')) })
    + (u.tokensFrom ? fill(tr('upload.tokens'), { file: u.tokensFrom }) : '');
  if (!d.generator) return said;
  const { attention, keys, values } = d.uploaded;
  const fields = generatorFields(d);
  const kvWhich = keys ? (values ? null : 'values') : (values ? 'keys' : 'both');
  const generated = [
    !attention && fill(tr('upload.generated.attention'), fields),
    kvWhich && fill(tr(`upload.generated.kv.${kvWhich}`), fields),
  ].filter(Boolean);
  return said + tr('upload.join') + fill(tr('upload.generated'), { parts: generated.join(tr('upload.join')), seed: fields.seed });
}

/** An uploaded attention matrix's description (kvlab::io::AttentionAbout). */
function describeAttention(a) {
  const tr = (key) => t(app.lang, key);
  const { heads: h, steps: S, tokens: T } = a;
  return fill(tr('upload.attention'), {
    dims: `[${[h != null && `H=${h}`, a.causal ? `T=${T}` : `S=${S}`, `T=${T}`].filter(Boolean).join(', ')}]`,
    head: h == null ? '' : fill(tr(`upload.head.${a.pick}`), { head: a.head, heads: h, lastHead: h - 1 }),
    body: fill(tr(a.causal ? 'upload.body.causal' : S === T ? 'upload.body.square' : 'upload.body.steps'), { S, T }),
  });
}

/** One of the upload's warnings (`rowSums`: attention rows that do not sum to 1). */
function describeWarning(w) {
  const rows = w.kind === 'rowSums' && { row: shapeText(w.worstRow), sum: f32Text(w.worstSum), tolerance: f32Text(w.tolerance) };
  return fill(t(app.lang, `upload.warn.${w.kind}`), { ...w, ...rows });
}

/** Writes figures and formulas of `sections` (the engine has drawn their charts). */
function render(figures, sections) {
  app.figures = figures;
  writeView(figures, sections);
}

/**
 * Writes `figures` and the formulas of `sections` on the page (render; and the view drawn
 * ahead, whose figures are not the engine's yet).
 */
function writeView(figures, sections) {
  const tf = performance.now();
  fitRanges(figures);
  writeFigures(figures);
  performance.measure('kvlab:figures', { start: tf, end: performance.now() });
  const t0 = performance.now();
  renderFormulas(figures, app.good, (key) => t(app.lang, key), new Set([...sections, 'together']));
  performance.measure('kvlab:formulas', { start: t0, end: performance.now() });
}

/** Records the view in the URL (push on committed changes, replace while dragging). */
function recordUrl(push, q = app.query) {
  app.query = q;
  // A view on uploaded data says so in its link, which cannot carry the files (`data=upload`:
  // the engine's parser ignores the key; a page opened on it says what it shows instead).
  // The model's data is carried whole: its prompt, layer and head (`data=model`).
  let shown = q;
  if (app.upload) {
    const params = new URLSearchParams(q);
    const model = app.upload.model;
    params.set('data', model ? 'model' : 'upload');
    if (model) {
      params.set('prompt', model.prompt);
      params.set('model_layer', String(model.layer));
      params.set('model_head', String(model.head));
    }
    shown = params.toString();
  }
  const url = `${window.location.pathname}${shown ? `?${shown}` : ''}${window.location.hash}`;
  if (url !== `${window.location.pathname}${window.location.search}${window.location.hash}`) {
    if (push) window.history.pushState(null, '', url);
    else window.history.replaceState(null, '', url);
  }
  try {
    // An embedded section must not change the main page's remembered view.
    if (!app.good.embed) window.localStorage.setItem('kvlab.query', q);
  } catch {
    // storage may be blocked; the URL still holds the state
  }
}

/** Query `q` (the engine's, of settings sent in some language) in the page's language. */
function inLanguage(q) {
  const params = new URLSearchParams(q);
  if ((params.get('lang') ?? 'en') === app.lang) return q;
  if (app.lang === 'en') params.delete('lang');
  else params.set('lang', app.lang);
  return params.toString();
}

/**
 * Records the URL (push when a committed change is among those shown) two frames after the last
 * update; each update starts the count again. `app.urlTimer`: -1 while counting frames, a timer
 * id once the task is posted, 0 when nothing is to be recorded.
 */
function scheduleUrl() {
  app.urlSeq += 1;
  const seq = app.urlSeq;
  if (app.urlTimer > 0) clearTimeout(app.urlTimer);
  app.urlTimer = -1;
  let left = 2;
  const tick = () => {
    if (seq !== app.urlSeq) return; // a later update counts again
    if (--left > 0) {
      window.requestAnimationFrame(tick);
      return;
    }
    app.urlTimer = setTimeout(() => {
      app.urlTimer = 0;
      const push = app.urlCommit;
      app.urlCommit = false;
      recordUrl(push, app.query);
      markBusy();
    }, 0);
  };
  window.requestAnimationFrame(tick);
}

/** Sends the pending changes to the engine (one request at a time; later changes wait). */
async function flush() {
  app.frame = 0;
  if (app.inFlight || !app.pending.size) {
    markBusy();
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
  trimTimeline();
  performance.mark('kvlab:update:start');
  const start = performance.now();
  const inputAt = app.inputAt;
  app.inputAt = null;
  try {
    const charts = chartsOf(sections)
      .filter((c) => dataChanged || ![...changed.keys()].every((k) => UNCHANGED_BY[c]?.has(k)));
    // What is off screen is brought up to date when the controls rest (catchUp): the charts,
    // and the comparison while its section is off screen.
    // (Charts left stale that came on screen meanwhile are drawn with it.)
    const spec = drawSpec([...charts, ...[...app.stale].filter((c) => app.visible.has(c))]);
    const defer = !app.compareVisible;
    const later = deferOffScreen(spec, defer);
    // (the model's quality, one run of it, only while section 5 or 3b is on screen: a drag
    // elsewhere does not pay for it; the catch-up measures it when the controls rest)
    const reply = await request('update', {
      settings, draw: spec, defer, deferLever: !app.leversVisible, measureModel: modelWanted(),
    });
    measureTimings(reply.timings, start);
    clearErrors(settings);
    // The page's own note (on a stop, on the view kept in this browser) is about the view before
    // this one; a link's repairs stay: their values are still in use.
    if (app.note) showWarnings('#url-warnings', []);
    if (app.clamped && changed.has(app.clamped.field)) {
      const { control, ...said } = app.clamped;
      showError(control, errorText(said), said);
    }
    // (the language may have been switched while the engine computed: the view and its link
    // are in the page's language)
    settings.lang = app.lang;
    app.good = settings;
    app.enginePending = leftForComplete(reply.figures);
    if ([...changed.keys()].some((k) => k in BOUNDED || BOUNDED_BY.has(k))) writeControls(app.good);
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
  } catch (e) {
    if (e.stopped) return; // stop() has put the last good view back
    // The last good view stays; put the message next to the control that caused it. Keys the
    // person changed again meanwhile keep their newer value.
    const field = e.field;
    // A scheme change that leaves the bits below the new scheme's fewest (1 bit asymmetric,
    // then symmetric): the bits go to that fewest, said beside them, and the change is sent
    // again (it was refused, and the slider rested on 1 under a view of 4 bits).
    const r = e.refusal;
    if (field === 'bits' && !changed.has('bits') && r?.kind === 'bits' && r.bits < r.min) {
      const bits = $('#bits');
      app.settings.bits = r.min;
      writeControl(bits, r.min);
      for (const [k, c] of changed) if (!app.pending.has(k)) app.pending.set(k, c);
      app.pending.set('bits', bits);
      app.commit ||= commit;
      app.clamped = { control: bits, field: 'bits', textKey: 'quant.bits-raised', textFields: { bits: r.bits, min: r.min } };
      return;
    }
    const byField = field && document.querySelector(`[data-key="${field}"]`);
    const control = byField || [...changed.values()].pop() || null;
    clearErrors(app.good, control);
    showError(control, errorText(e), e);
    for (const key of changed.keys()) {
      if (app.pending.has(key)) continue;
      app.settings[key] = app.good[key];
      // A control moved with the refused change shows the value in use again (B moved below
      // the sinks went on showing 98 beside a view of 128); the refused one keeps what was typed.
      const c = document.querySelector(`[data-key="${key}"]`);
      if (c && c !== control) writeControl(c, app.good[key]);
    }
  } finally {
    app.inFlight = false;
    app.sent = null;
    app.lateCommit = false;
    // Changes made meanwhile (a slider being dragged): one request per frame.
    if (app.pending.size && !app.frame) app.frame = window.requestAnimationFrame(flush);
    markBusy();
  }
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

function schedule(control, commit) {
  const key = control.dataset.key;
  const value = settingFromControl(control);
  if (app.inFlight && !app.pending.has(key) && Object.is(app.sent?.[key], value)) {
    // The change event after the input event that sent this value: nothing to compute again,
    // only the history entry to record once the update is shown.
    app.lateCommit ||= commit;
    return;
  }
  app.inputAt ??= performance.now();
  app.settings[key] = value;
  app.pending.set(key, control);
  app.commit ||= commit;
  // (a value the page moved and said so, moved again by hand: the note is done)
  if (app.clamped?.field === key && !(key in BOUNDED)) app.clamped = null;
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
  if (key === 'bits') $('#bits-value').textContent = control.value;
  // (a slider and the number field beside it: each shows what the other was moved to)
  for (const o of document.querySelectorAll(`[data-key="${key}"]`)) if (o !== control) o.value = control.value;
  if (key === 'method') document.body.dataset.method = control.value;
  if (key === 'model') document.body.dataset.model = control.value === 'custom' ? 'custom' : 'preset';
  // An idle engine gets the change at once: after this task's other events (a select's input
  // and change come together), without waiting for the next frame. While the engine is busy
  // the change waits; flush() sends everything pending, one request per frame, when it replies.
  if (!app.frame && !app.inFlight) {
    app.frame = -1;
    queueMicrotask(() => {
      if (app.frame === -1) flush();
    });
  }
  markBusy();
}

/** Shows a complete new view (page load, back/forward, reset, upload) the engine computed. */
function show(settings, figures, query, push) {
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
async function applyAll(settings, push) {
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
async function useGenerated(settings, push) {
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

async function setLanguage(lang) {
  app.lang = lang;
  app.labels = chartLabels(lang);
  applyLanguage(lang);
  try {
    window.localStorage.setItem('kvlab.lang', lang);
  } catch {
    // ignore
  }
  for (const li of document.querySelectorAll('#file-list li[data-about]')) {
    li.querySelector('span').textContent = describeFile(li.dataset.file, JSON.parse(li.dataset.about));
    const remove = li.querySelector('button.remove');
    remove.textContent = t(lang, 'data.remove');
    remove.setAttribute('aria-label', fill(t(lang, 'data.remove.file'), { file: li.dataset.file }));
  }
  showRoles();
  for (const li of document.querySelectorAll('#file-list li[data-why]')) {
    li.textContent = describeSkipped(li.dataset.value, JSON.parse(li.dataset.why));
  }
  if (app.uploadNotes) showUploadWarnings({ warnings: app.uploadNotes });
  if (app.urlNotes) showUrlWarnings(app.urlNotes);
  if (app.note) showNote(app.note);
  if (!$('#progress').hidden) writeStage();
  for (const [slot, e] of app.shownErrors) if (!slot.hidden) slot.textContent = errorText(e);
  if (app.ahead && !app.figures) {
    // (the engine has no view yet: the one drawn ahead, worded again)
    app.good.lang = lang;
    app.settings.lang = lang;
    writeView(app.ahead.figures, ALL);
    paintAhead();
  } else if (app.client && app.good) {
    app.good.lang = lang;
    app.settings.lang = lang;
    render(app.figures, ALL);
    await busyWhile(async () => {
      await redraw(chartsOf(ALL));
      try {
        recordUrl(false, await request('toQuery', { settings: app.good }));
      } catch (e) {
        reportError(null, e);
      }
    });
  }
}

function download(name, blob) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

function showWarnings(target, list) {
  if (target === '#upload-warnings') app.uploadNotes = null;
  if (target === '#url-warnings') {
    app.urlNotes = null;
    app.note = null;
  }
  const el = $(target);
  if (!list.length) {
    if (!el.hidden) el.hidden = true;
    return;
  }
  el.textContent = list.join(' · ');
  el.hidden = false;
}

/** A note of the page's own in the link's box (`key`: its text), worded again on a switch. */
function showNote(key) {
  showWarnings('#url-warnings', [t(app.lang, key)]);
  app.note = key;
}

/**
 * What the engine repaired in the link (`warnings`: init's `{key, message, repair}`) in the
 * page's language, after the line saying so; the engine's English messages go to data-value.
 */
function showUrlWarnings(warnings) {
  showWarnings('#url-warnings', warnings.map(urlWarningText));
  const el = $('#url-warnings');
  el.dataset.value = warnings.map((w) => w.message).join(' · ');
  if (warnings.length) {
    el.prepend(t(app.lang, 'warn.url'));
    app.urlNotes = warnings;
  }
}

/**
 * The upload's warnings (`about.warnings`, fields) in the page's language; `lines`, the
 * engine's English lines, go to data-value (for tests, as figures' do).
 */
function showUploadWarnings(about, lines) {
  const notes = about?.warnings ?? [];
  showWarnings('#upload-warnings', notes.map(describeWarning));
  app.uploadNotes = notes.length ? notes : null;
  if (lines) $('#upload-warnings').dataset.value = lines.join(' · ');
  // (on a language switch `lines` is not given: the engine's lines stay as they were)
}

const MAX_UPLOAD = 256 * 1024 * 1024;

// Uploaded data survives a reload: the files and the tensor choice are kept in IndexedDB (in
// this browser only) until "Back to generated data" or "Reset".
const uploads = new Map(); // file name -> bytes, as read

function idbRequest(mode, action) {
  return new Promise((resolve, reject) => {
    const open = indexedDB.open('kvlab', 1);
    open.onupgradeneeded = () => open.result.createObjectStore('upload');
    open.onerror = () => reject(open.error);
    open.onsuccess = () => {
      const db = open.result;
      const tx = db.transaction('upload', mode);
      const req = action(tx.objectStore('upload'));
      tx.oncomplete = () => { db.close(); resolve(req?.result); };
      tx.onerror = () => { db.close(); reject(tx.error); };
    };
  });
}
/**
 * The upload saved for the next visit (IndexedDB). `localStorage['kvlab.upload']` says whether
 * there is one ('1') or not ('0'), so a visit opens (and on a first visit creates) the database
 * only when it has something to restore. (Opening it took 100-250 ms of a first visit here,
 * alongside the engine's start; the first view did not come measurably sooner without it.)
 * Without the flag (a browser that saved an upload before the flag existed) the page starts as
 * if nothing were saved and looks afterwards (restoreLegacyUpload).
 */
const savedUpload = {
  put: (value) => idbRequest('readwrite', (s) => s.put(value, 'current')).then((r) => { setSavedFlag('1'); return r; }),
  get: () => idbRequest('readonly', (s) => s.get('current')),
  clear: () => idbRequest('readwrite', (s) => s.delete('current')).then((r) => { setSavedFlag('0'); return r; }),
  flag: () => {
    try {
      return window.localStorage.getItem('kvlab.upload');
    } catch {
      return null; // storage blocked: IndexedDB is then most likely blocked too
    }
  },
};

function setSavedFlag(value) {
  try {
    window.localStorage.setItem('kvlab.upload', value);
  } catch {
    // storage may be blocked
  }
}

/**
 * A browser without the flag may hold an upload saved before the flag existed: once the first
 * view is up, look, and put it back as a load would have.
 */
function restoreLegacyUpload() {
  // (busy until it is known: the view may change)
  return busyWhile(async () => {
    const saved = await savedUpload.get().catch(() => null);
    setSavedFlag(saved?.files?.length ? '1' : '0');
    if (!saved?.files?.length || app.upload) return;
    const reply = await restoreUpload(saved, { settings: app.good });
    if (!reply || reply.stopped) return;
    await request('draw', { draw: drawSpec(chartsOf(ALL)) });
    show(reply.settings, reply.figures, reply.query, false);
  }).catch((e) => reportError(null, e));
}

/**
 * A tensor a file holds but the module did not load, in the page's language: `name: reason`
 * from the reason's fields (`why`: `{name, fileCap, refusal, file}`), or the module's English
 * line (`english`) in English or without fields.
 */
function describeSkipped(english, why) {
  if (!why || app.lang === 'en' || !LOAD_ZH[why.refusal?.kind]) return english;
  const said = errorText({ refusal: why.refusal, refusalOf: 'load', message: english });
  const prefix = `${why.file}：`;
  const reason = said.startsWith(prefix) ? said.slice(prefix.length) : said;
  return `${why.name}：${reason}${why.fileCap ? t(app.lang, 'upload.skipped.fileCap') : ''}`;
}

/** Loads a file into the page's list of uploaded files (and remembers its bytes). */
async function addFile(name, buf) {
  const summary = await request('loadFile', { name, bytes: buf });
  uploads.set(name, buf);
  // A file uploaded again under its name replaces the one listed.
  for (const old of document.querySelectorAll('#file-list li')) {
    if (old.dataset.file === summary.file || old.dataset.of === summary.file) old.remove();
  }
  const list = $('#file-list');
  const li = document.createElement('li');
  // In the page's language; the engine's English line stays in data-value (as figures' do).
  li.dataset.file = summary.file;
  li.dataset.about = JSON.stringify(summary.about);
  li.dataset.tensors = JSON.stringify(summary.tensors);
  li.dataset.value = summary.summary;
  const text = document.createElement('span');
  text.textContent = describeFile(summary.file, summary.about);
  const remove = document.createElement('button');
  remove.type = 'button';
  remove.className = 'remove';
  remove.textContent = t(app.lang, 'data.remove');
  remove.setAttribute('aria-label', fill(t(app.lang, 'data.remove.file'), { file: summary.file }));
  remove.addEventListener('click', () => busyWhile(() => removeFile(summary.file)).catch((e) => reportError(remove, e)));
  li.append(text, remove);
  list.append(li);
  for (const [i, s] of summary.skipped.entries()) {
    const sk = document.createElement('li');
    // (in the page's language from the reason's fields; the module's English in data-value)
    const why = summary.skippedWhy?.[i];
    sk.dataset.value = s;
    sk.dataset.of = summary.file;
    if (why) sk.dataset.why = JSON.stringify({ ...why, file: summary.file });
    sk.textContent = describeSkipped(s, why && { ...why, file: summary.file });
    sk.className = 'skipped';
    list.append(sk);
  }
}

/** Every tensor listed, in upload order: `{id, label}` (`id`: `file::tensor`, as the engine names it). */
function listedTensors() {
  return [...document.querySelectorAll('#file-list li[data-tensors]')].flatMap((li) => JSON.parse(li.dataset.tensors)
    .map((t) => ({ id: `${li.dataset.file}::${t.name}`, label: `${t.name} [${t.shape.join(', ')}]` })));
}

const ROLE_SELECTS = { attention: '#up-attention', keys: '#up-keys', values: '#up-values' };

/** The role selects list the tensors listed, each after "none (generated)"; `pick` sets them. */
function fillRoleSelects(pick) {
  const tensors = listedTensors();
  for (const [role, id] of Object.entries(ROLE_SELECTS)) {
    const sel = $(id);
    const none = new Option(t(app.lang, 'data.none'), '');
    none.dataset.i18n = 'data.none';
    sel.replaceChildren(none, ...tensors.map((x) => new Option(x.label, x.id)));
    sel.value = pick?.[role] ?? '';
  }
  $('#upload-choice').hidden = tensors.length === 0;
}

/**
 * After the list changed: the roles the engine proposes (kvlab::upload::Assignment) go into the
 * selects, with their reasons in one line, and the choice is checked before it is used.
 */
async function assignRoles() {
  if (!listedTensors().length) {
    fillRoleSelects(null);
    app.assignment = null;
    showRoles();
    showUploadWarnings(null, []);
    return;
  }
  const assignment = await request('assignRoles', {});
  app.assignment = { ...assignment, manual: new Set() };
  fillRoleSelects(assignment);
  showRoles();
  await checkChoice();
}

/** The assignment's reasons and what it could not settle, in the page's language (#upload-roles). */
function showRoles() {
  const el = $('#upload-roles');
  const a = app.assignment;
  if (!a) {
    el.hidden = true;
    return;
  }
  const tr = (key) => t(app.lang, key);
  const lines = a.reasons.map((r) => {
    const role = tr(`roles.${r.role}`);
    const manual = a.manual.has(r.role);
    const id = manual ? $(ROLE_SELECTS[r.role]).value : r.id;
    if (!id) return fill(tr(manual ? 'roles.none.manual' : 'roles.none'), { role });
    if (manual) {
      const x = listedTensors().find((x) => x.id === id);
      return fill(tr('roles.manual'), { role, label: x?.label ?? id });
    }
    return fill(tr('roles.line'), {
      role,
      name: r.name,
      shape: shapeText(r.shape),
      why: fill(tr(`roles.why.${r.why}`), { role, tokens: r.tokens }),
    });
  });
  if (a.tokensFrom) lines.push(fill(tr('roles.tokens'), { file: a.tokensFrom }));
  const notes = a.ambiguities.map((x) => fill(tr(`roles.amb.${x.kind}`), { ...x, role: x.role && tr(`roles.${x.role}`) }));
  el.replaceChildren();
  const roles = document.createElement('span');
  roles.className = 'roles';
  roles.textContent = lines.join(' · ');
  el.append(roles);
  if (notes.length) {
    const amb = document.createElement('span');
    amb.className = 'ambiguous';
    amb.textContent = `${tr('roles.ambiguous')} ${notes.join(' · ')}`;
    el.append(amb);
  }
  el.hidden = false;
}

/** The choice the upload controls show, as the engine takes it. */
function uploadChoice() {
  return {
    attention: $('#up-attention').value,
    keys: $('#up-keys').value,
    values: $('#up-values').value || null,
    headMode: $('#up-headmode').value,
    head: Number($('#up-head').value) || 0,
    layer: Number($('#up-layer').value) || 0,
    kvHead: Number($('#up-kvhead').value) || 0,
    normalise: $('#up-normalise').checked,
  };
}

/**
 * Checks the choice before it is used: its warnings (rows that do not sum to 1) show next to
 * the files and go when fixed (normalised, another tensor), a refusal shows at "Use", and only
 * the controls that apply to the chosen shapes are shown (heads for [H, S, T] attention, layer
 * and KV head for [L, H, T, d] and [H, T, d] K/V, normalising when attention is chosen).
 */
async function checkChoice() {
  const use = $('#up-use');
  const choice = uploadChoice();
  let about;
  try {
    ({ about } = await request('checkChoice', { choice }));
  } catch (e) {
    showUploadWarnings(null, []);
    reportError(use, e);
    return;
  }
  errorSlot(use).hidden = true;
  use.removeAttribute('aria-invalid');
  app.shownErrors.delete(errorSlot(use));
  showUploadWarnings(about, about.warnings.map((w) => w.english ?? ''));
  if (app.assignment && app.assignment.tokensFrom !== about.tokensFrom) {
    app.assignment.tokensFrom = about.tokensFrom;
    showRoles();
  }
  const kvs = [about.keys, about.values].filter(Boolean);
  const shown = {
    '#up-headmode': about.attention?.heads != null,
    '#up-head': about.attention?.heads != null && choice.headMode === 'head',
    '#up-layer': kvs.some((k) => k.layers != null),
    '#up-kvhead': kvs.some((k) => k.heads != null),
    '#up-normalise': about.attention != null,
  };
  for (const [id, on] of Object.entries(shown)) $(id).closest('.control').hidden = !on;
}

/** Reads picked files (one busy span, until their messages and choices are on screen). */
function onFiles(input) {
  return busyWhile(() => readFiles(input));
}

/**
 * Files picked with "Upload files" replace those listed (once one of them is read: a pick whose
 * every file is refused leaves the list as it was); "Add files" adds to them.
 */
async function readFiles(input) {
  const slot = errorSlot(input);
  slot.hidden = true;
  for (const i of document.querySelectorAll('#file, #file-add')) i.removeAttribute('aria-invalid'); // (the last pick's refusal goes with its message)
  const errors = []; // every refused file keeps its own message (worded again on a language switch)
  const picked = [...input.files];
  const names = new Set(picked.map((f) => f.name));
  let replace = input.id === 'file';
  for (const file of picked) {
    if (file.size > MAX_UPLOAD) {
      const textFields = { file: file.name, bytes: file.size };
      errors.push({ textKey: 'upload.aboveLimit', textFields, message: fill(TEXT.en['upload.aboveLimit'], textFields) });
      continue;
    }
    try {
      const buf = new Uint8Array(await file.arrayBuffer());
      await addFile(file.name, buf);
      if (replace) {
        replace = false;
        for (const li of [...document.querySelectorAll('#file-list li[data-file]')]) {
          if (!names.has(li.dataset.file)) await dropListed(li.dataset.file);
        }
      }
    } catch (e) {
      errors.push(e?.refusal ? e : { message: e?.message ?? String(e) });
    }
  }
  // (the same files may be picked again: a change event needs the input emptied)
  input.value = '';
  await assignRoles();
  if (errors.length) {
    const all = { list: errors, message: errors.map((e) => e.message).join('\n') };
    showError(input, errorText(all), all);
  }
}

/** Forgets a listed file, in the engine and on the page (the data in use stays). */
async function dropListed(name) {
  await request('dropFiles', { name });
  uploads.delete(name);
  for (const li of document.querySelectorAll('#file-list li')) {
    if (li.dataset.file === name || li.dataset.of === name) li.remove();
  }
}

/** Remove: forgets one listed file and proposes the roles again. */
async function removeFile(name) {
  await dropListed(name);
  await assignRoles();
  $('#file').focus();
}

/** A role select or a shape control changed: the choice is checked again. */
function onChoiceChanged(control) {
  const role = Object.entries(ROLE_SELECTS).find(([, id]) => $(id) === control)?.[0];
  if (role && app.assignment) {
    app.assignment.manual.add(role);
    showRoles();
  }
  return busyWhile(checkChoice);
}

async function onUse(button) {
  const choice = uploadChoice();
  try {
    const reply = await request('useUploaded', {
      choice, keep: { lang: app.lang, embed: app.good.embed }, draw: drawSpec(chartsOf(ALL)),
    });
    const used = new Set([choice.attention, choice.keys, choice.values].filter(Boolean).map((v) => v.split('::')[0]));
    const files = [...used].map((name) => ({ name, bytes: uploads.get(name) })).filter((f) => f.bytes);
    savedUpload.put({ files, choice }).catch(() => {}); // storage may be blocked: the view still works
    app.upload = { choice, about: reply.about, files, tokens: reply.tokens };
    errorSlot(button).hidden = true;
    showUploadWarnings(reply.about, reply.result.warnings);
    show(reply.settings, reply.figures, reply.query, true);
  } catch (e) {
    reportError(button, e);
  }
}

/** The model's run the page asks for: the prompt, layer and head chosen beside it. */
function modelChoice() {
  return { prompt: $('#model-prompt').value, layer: Number($('#model-layer').value), head: Number($('#model-head').value) };
}

/**
 * A link made on the model's data (`data=model&prompt=...&model_layer=&model_head=`) runs it
 * again; a layer or head the model lacks leaves that control as it is.
 */
function runLinkedModel(linked) {
  if (linked.get('data') !== 'model' || !linked.has('prompt')) return;
  $('#model-prompt').value = linked.get('prompt');
  for (const [id, key] of [['#model-layer', 'model_layer'], ['#model-head', 'model_head']]) {
    const select = $(id);
    const want = linked.get(key);
    if ([...select.options].some((o) => o.value === want)) select.value = want;
  }
  $('#model-box').open = true;
  onModel($('#model-use'));
}

/** Cells a side of each head's thumbnail. */
const THUMB = 32;

/**
 * Every layer's and head's attention of the model's run as small multiples (rows: layers,
 * columns: heads; √ weights, as the attention heatmap), the one in use outlined: a sink head is
 * a dark first column, a local head a dark diagonal. A click uses that head.
 */
async function showHeads(model) {
  const { layers, heads, size, cells } = await request('modelHeads', { size: THUMB });
  const box = $('#model-heads');
  const grid = box.querySelector('.grid');
  grid.style.setProperty('--heads', String(heads));
  const buttons = [];
  for (let l = 0; l < layers; l += 1) {
    for (let h = 0; h < heads; h += 1) {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'head';
      b.dataset.layer = String(l);
      b.dataset.head = String(h);
      b.setAttribute('aria-label', fill(t(app.lang, 'data.model.head-label'), { layer: l, head: h }));
      b.setAttribute('aria-pressed', String(l === model.layer && h === model.head));
      const c = document.createElement('canvas');
      c.width = size;
      c.height = size;
      const img = c.getContext('2d').createImageData(size, size);
      const at = (l * heads + h) * size * size;
      for (let i = 0; i < size * size; i += 1) {
        const v = Math.sqrt(Math.max(0, cells[at + i]));
        // (dark on white in both themes: the caption says darker is more weight)
        const shade = Math.round(255 * (1 - v));
        img.data.set([shade, shade, shade, 255], 4 * i);
      }
      c.getContext('2d').putImageData(img, 0, 0);
      const label = document.createElement('span');
      label.textContent = `L${l} H${h}`;
      b.append(c, label);
      b.addEventListener('click', () => {
        $('#model-layer').value = String(l);
        $('#model-head').value = String(h);
        onModel($('#model-use'));
      });
      buttons.push(b);
    }
  }
  grid.replaceChildren(...buttons);
  box.hidden = false;
}

/** Runs the model on the prompt and uses the layer and head chosen as the data. */
async function onModel(button) {
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
    await showHeads(model);
  } catch (e) {
    reportError(button, e);
  }
}

/** Replaces every chart canvas by a new one (a canvas handed to a worker cannot be handed again). */
function freshCanvases() {
  for (const [name, old] of Object.entries(app.canvases)) {
    const fresh = old.cloneNode(false);
    observer.unobserve(old);
    onScreen.unobserve(old);
    old.replaceWith(fresh);
    observer.observe(fresh);
    onScreen.observe(fresh);
    app.canvases[name] = fresh;
  }
}

/**
 * Stop: ends a computation that takes too long. The worker is replaced by a fresh one, which
 * gets the last good view back (its settings, and the uploaded files if the data was uploaded)
 * on new canvases (a canvas handed to a worker cannot be handed again). Before the first view,
 * main() starts over with the default view.
 */
function stop() {
  if (!app.client?.restart()) return;
  if (!app.ready) return; // main() sees its request stopped and falls back to the defaults
  if (app.frame) window.cancelAnimationFrame(app.frame);
  app.frame = 0;
  app.pending.clear();
  app.inputAt = null;
  freshCanvases();
  busyWhile(async () => {
    let reply = await request('init', { settings: app.good, lang: app.lang });
    if (app.upload) {
      // (the files in use first, then the rest of the list: a pick made since may have
      // replaced the list)
      for (const { name, bytes } of app.upload.files) await request('loadFile', { name, bytes });
      reply = await request('useUploaded', { choice: app.upload.choice, keep: { lang: app.lang, embed: app.good.embed } });
      const inUse = new Set(app.upload.files.map((f) => f.name));
      for (const [name, bytes] of uploads) if (!inUse.has(name)) await request('loadFile', { name, bytes });
    } else {
      for (const [name, bytes] of uploads) await request('loadFile', { name, bytes });
    }
    await app.client.attach(app.canvases);
    await request('draw', { draw: drawSpec(chartsOf(ALL)) });
    clearErrors();
    show(reply.settings, reply.figures, await request('toQuery', { settings: reply.settings }), false);
    showNote('progress.stopped');
  }).catch((e) => reportError(null, e));
}

function wire() {
  for (const c of controls()) {
    // A number being typed is used once it is committed (Enter, leaving the field, or its
    // arrows, which commit at once): the keystrokes on the way are not values. ("1" on the way
    // to "1024" in Tokens T took B, r and w down to 1 for good, and a reply to it could
    // overwrite the digits typed after it.) Sliders and selects are live.
    const typed = c.type === 'number';
    c.addEventListener('input', () => {
      if (typed) app.editing = c;
      else schedule(c, false);
    });
    c.addEventListener('change', () => {
      if (app.editing === c) app.editing = null;
      schedule(c, true);
    });
    // Escape gives up a number being typed: the value in use again.
    if (typed) {
      c.addEventListener('keydown', (e) => {
        if (e.key !== 'Escape' || app.editing !== c) return;
        app.editing = null;
        writeControl(c, app.settings[c.dataset.key]);
      });
    }
  }
  $('#reset').addEventListener('click', async () => {
    try {
      window.localStorage.removeItem('kvlab.query');
    } catch {
      // ignore
    }
    savedUpload.clear().catch(() => {});
    await busyWhile(async () => {
      const fresh = { ...(await request('defaults', {})), lang: app.lang };
      await useGenerated(fresh, true);
      // (what was said of the link opened, or of a stop, is about a view that is gone)
      showWarnings('#url-warnings', []);
    }).catch((e) => reportError(null, e));
  });
  $('#share').addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(window.location.href);
      $('#share').textContent = t(app.lang, 'share.done');
    } catch {
      $('#share').textContent = window.location.href;
    }
    setTimeout(() => { $('#share').textContent = t(app.lang, 'share'); }, 2000);
  });
  const exportText = (op, name, type) => async () => {
    try {
      download(name, new Blob([await request(op, {})], { type }));
    } catch (e) {
      reportError(null, e);
    }
  };
  $('#export-csv').addEventListener('click', exportText('exportCsv', 'kvlab-selection.csv', 'text/csv'));
  $('#export-json').addEventListener('click', exportText('exportJson', 'kvlab-view.json', 'application/json'));
  for (const b of document.querySelectorAll('[data-png]')) {
    b.addEventListener('click', async () => {
      try {
        const name = b.dataset.png;
        // (a chart still waiting for the catch-up is brought up to date first)
        if (app.enginePending && NEEDS_COMPARISON.has(name)) await completeComparison([name]);
        else if (app.stale.has(name)) await drawStale(name);
        const blob = await request('png', { name });
        if (blob) download(`kvlab-${b.dataset.png}.png`, blob);
      } catch (e) {
        reportError(null, e);
      }
    });
  }
  $('#file').addEventListener('change', (ev) => onFiles(ev.target));
  $('#file-add').addEventListener('change', (ev) => onFiles(ev.target));
  for (const id of [...Object.values(ROLE_SELECTS), '#up-headmode', '#up-head', '#up-layer', '#up-kvhead', '#up-normalise']) {
    $(id).addEventListener('change', (ev) => onChoiceChanged(ev.target));
  }
  $('#up-use').addEventListener('click', (ev) => onUse(ev.target));
  $('#model-use').addEventListener('click', (ev) => onModel(ev.target));
  $('#model-run').addEventListener('click', () => {
    $('#model-box').open = true;
    onModel($('#model-use'));
  });
  $('#use-generated').addEventListener('click', () => {
    savedUpload.clear().catch(() => {});
    useGenerated(app.good, true);
  });
  window.addEventListener('popstate', () => busyWhile(async () => {
    const parsed = await request('parseQuery', { query: window.location.search });
    await applyAll({ ...parsed.settings, lang: app.lang }, false);
  }).catch((e) => reportError(null, e)));
  window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', (e) => {
    app.dark = e.matches;
    paintAhead();
    if (app.figures) redraw(chartsOf(ALL));
  });
}

/**
 * Puts back the uploaded data of the last visit (`saved`, from `savedUpload.get()`); `first` is
 * init's reply. Returns the engine's reply for it; a failure forgets it and says so (null).
 */
async function restoreUpload(saved, first) {
  if (!saved?.files?.length) return null;
  try {
    for (const f of saved.files) await addFile(f.name, f.bytes);
    fillRoleSelects(saved.choice);
    const reply = await request('useUploaded', { choice: saved.choice, keep: { lang: app.lang, embed: first.settings.embed } });
    app.upload = { choice: saved.choice, about: reply.about, files: saved.files, tokens: reply.tokens };
    showUploadWarnings(reply.about, reply.result.warnings);
    // (only the controls the restored shapes use are shown)
    await checkChoice();
    return reply;
  } catch (e) {
    savedUpload.clear().catch(() => {});
    if (e.stopped) {
      // Stop pressed while restoring: the fresh worker has none of the files, so the page
      // forgets them too, and main() starts the generated view again.
      uploads.clear();
      $('#file-list').replaceChildren();
      fillRoleSelects(null);
      showWarnings('#upload-warnings', [t(app.lang, 'progress.stopped.upload')]);
      return { stopped: true };
    }
    showWarnings('#upload-warnings', [e.message ?? String(e)]);
    return null;
  }
}

/**
 * The default view drawn ahead (the `#first-view` block `cargo xtask dist` writes into
 * index.html: init's reply for an empty query, and the first screen's budget charts as SVG per
 * language and theme), when the page opens on the default view; otherwise null.
 */
function viewAhead(query) {
  const block = document.getElementById('first-view');
  const params = new URLSearchParams(query);
  params.delete('lang');
  if (!block || [...params.keys()].length) return null;
  try {
    return JSON.parse(block.textContent);
  } catch {
    return null; // (a damaged block: the engine's view comes a little later)
  }
}

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
 * The controls of the view drawn ahead look live before they are wired (the engine's first
 * view wires them, 200–300 ms later on a cold load). What a learner sets meanwhile is kept, by
 * key, and applied once the page is ready (applyEarlyInput), as a change made then. A control
 * changed again after the wiring goes its normal way, and its early value is forgotten.
 */
function keepEarlyInput() {
  const note = (e) => {
    const c = e.target;
    if (!(c instanceof Element) || !c.matches('[data-key]')) return;
    if (app.presented) app.early.delete(c.dataset.key);
    else app.early.set(c.dataset.key, c.value);
  };
  document.addEventListener('input', note, true);
  document.addEventListener('change', note, true);
  app.stopKeepingEarly = () => {
    document.removeEventListener('input', note, true);
    document.removeEventListener('change', note, true);
  };
}

/** The values set before the controls were wired (keepEarlyInput), applied as changes now. */
function applyEarlyInput() {
  app.stopKeepingEarly?.();
  app.stopKeepingEarly = null;
  for (const [key, value] of app.early) {
    const c = document.querySelector(`[data-key="${key}"]`);
    if (!c) continue;
    c.value = value;
    schedule(c, true);
  }
  app.early.clear();
}

/**
 * Puts the charts drawn ahead, in the page's language and theme, behind their canvases (a
 * canvas is transparent until the engine draws on it), scaled to fit. style.css leaves them
 * out on narrow screens, where they would be scaled too small to read (the engine's charts
 * come soon after); nothing here reads the layout, which is not done yet.
 */
function paintAhead() {
  if (!app.ahead) return;
  const charts = app.ahead.charts[app.lang]?.[app.dark ? 'dark' : 'light'] ?? {};
  for (const [name, svg] of Object.entries(charts)) {
    const canvas = app.canvases[name];
    if (!canvas) continue;
    canvas.classList.add('ahead');
    canvas.style.setProperty('--ahead', `url("data:image/svg+xml,${encodeURIComponent(svg)}")`);
  }
}

/** The engine's charts are drawn: the charts drawn ahead go. */
function dropAhead() {
  if (!app.ahead) return;
  app.ahead = null;
  for (const canvas of document.querySelectorAll('canvas.ahead')) {
    canvas.classList.remove('ahead');
    canvas.style.removeProperty('--ahead');
  }
}

/**
 * Marks the engine's start-up (epoch times from engine.js `epochNow`) on the page's timeline,
 * each step once.
 */
function markTimeline(timeline) {
  for (const [name, at] of Object.entries(timeline ?? {})) {
    const mark = `kvlab:load:engine-${name}`;
    const startTime = at - performance.timeOrigin;
    if (startTime >= 0 && !performance.getEntriesByName(mark).length) performance.mark(mark, { startTime });
  }
}

/** The controls and buttons that do nothing without the engine (disabled when it fails). */
const NEEDS_ENGINE = '[data-key], #reset, #file, #export-csv, #export-json, [data-png]';

async function main() {
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
  // URL first; with no query, the last view from this browser.
  let query = window.location.search;
  if (!query) {
    try {
      query = window.localStorage.getItem('kvlab.query') ?? '';
    } catch {
      query = '';
    }
    app.restored = query !== '';
  }
  // Figures are not live regions: an <output> is one (role status) by default, and a screen
  // reader would read out dozens of them at every move of a slider (#status says what happens).
  for (const o of document.querySelectorAll('output')) o.setAttribute('aria-live', 'off');
  const urlLang = new URLSearchParams(query).get('lang');
  app.linkOnUpload = new URLSearchParams(window.location.search).get('data') === 'upload';
  // (read now: the first view's URL replaces the address before the model can run)
  const linkedModel = new URLSearchParams(window.location.search);
  app.lang = initialLanguage(urlLang);
  app.labels = chartLabels(app.lang);
  applyLanguage(app.lang);
  // The language switch and Stop work from the start, also while a big first computation runs.
  $('#lang').addEventListener('click', () => setLanguage(app.lang === 'en' ? 'zh' : 'en'));
  $('#stop').addEventListener('click', () => stop());
  performance.mark('kvlab:update:start');
  // Read in parallel with the engine's start: a saved upload replaces the generated data.
  // (No IndexedDB here: nothing saved.)
  const savedFlag = savedUpload.flag();
  const savedPromise = savedFlag === '1' ? savedUpload.get().catch(() => null) : Promise.resolve(null);
  const canvases = app.canvases;
  for (const c of document.querySelectorAll('canvas[data-chart]')) {
    observer.observe(c);
    onScreen.observe(c);
    canvases[c.dataset.chart] = c;
  }
  onScreen.observe($('#compare'));
  onScreen.observe($('#together'));
  onScreen.observe($('#real-model'));
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
      const start = () => {
        if (!started) resolve(connectNow());
        started = true;
      };
      window.requestAnimationFrame(() => setTimeout(() => {
        performance.mark('kvlab:load:first-painted');
        start();
      }, 0));
      // (a tab opened in the background paints no frame until shown: start anyway)
      if (document.hidden) start();
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
  applyEarlyInput();
  if (savedFlag === null) restoreLegacyUpload();
  runLinkedModel(linkedModel);
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
    wire();
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

main();
