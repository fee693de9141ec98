// kvlab engine: owns the WebAssembly `Page` (the data and every derived view) and the chart
// canvases, and answers the page's requests. It runs in a Web Worker (worker.js), so a long
// computation never blocks the page: the canvases are transferred to it as OffscreenCanvases.
// Where a browser cannot do that, the page runs the same engine in its own thread (client.js)
// with the canvases themselves; nothing else differs.
//
// Requests are `{id, op, ...}`; every request gets one reply `{id, ok, value}` or
// `{id, ok: false, error: {message, field, refusal, refusalOf}}`; while computing, `{id, progress: stage}` messages
// name the stage about to run, and `init` may send its first view early as `{id, partial}`.
//
// The wasm module comes from one of two builds (scalar `pkg/` or simd128 `pkg-simd/`, see
// `wasmBuild`); both give bit-identical results. The file readers are a second module
// (`pkg-upload/`, the `upload/` crate), fetched on the first upload (`uploadsModule`): most
// visits never upload a file, and the readers are a fifth of the code.

import { uploadsModule, theModel, loadedModel, heldout } from './wasm.js';
import { plainError, asQuery, choiceArgs, epochNow } from './engine/values.js';
import { modelSweep } from './engine/sweep.js';
import { needleSweep } from './engine/needle.js';
import { COMPARISON_CHARTS } from './fields.js';

// (the worker's and the page's fallback's way in: one module to load)
export { wasmBuild, loadWasm } from './wasm.js';
export { epochNow } from './engine/values.js';

/** Charts drawn from the policy comparison (which a staged page computes last). */
const NEEDS_COMPARISON = new Set(COMPARISON_CHARTS);

/**
 * An engine on the loaded wasm module `wasm` (from `loadWasm`, build name `build`), posting its
 * messages with `post(message, transfer)`. `timeline` holds epoch times (`epochNow`) of the
 * engine's start-up (`started`, `wasmReady`); `init` returns them with its own. `compiledBy`:
 * 'page' when the module came compiled from the page (client.js), 'engine' when loadWasm
 * fetched it. Returns `handle(request)`, which runs one request to
 * completion (requests are handled strictly in order).
 */
export function createEngine(post, wasm, build, timeline = {}, compiledBy = 'engine') {
  const { Page, parseQuery, toQuery, modelPresets } = wasm;
  let page = null;
  const canvases = new Map(); // chart name -> canvas (OffscreenCanvas or HTMLCanvasElement)

  const now = () => performance.now();

  // The model's layer and head in use (`{layer, head}`, head -1: the mean) while the model's
  // run is the data; null for generated or uploaded data.
  let modelShown = null;

  /**
   * Section 5's first figures for the current settings, while the model is the data: its
   * quality under the compressed cache (`Model.quality`), given to the page's module for the
   * `kl` chart. `{quality}` or `{error}` (a refused setting: the rest of the page stands).
   */
  function measureModel(needle = true) {
    if (!modelShown || !loadedModel) return undefined;
    const t0 = now();
    try {
      const current = page.settings();
      const settings = JSON.stringify(current);
      const quality = JSON.parse(loadedModel.quality(settings, modelShown.layer, modelShown.head));
      const { tokens, prefill } = quality.protocol;
      page.useModelView(tokens, prefill, Float64Array.from(quality.kl), Float32Array.from(quality.marks),
        quality.bytesFull / Math.max(1, quality.bytes));
      sweep.sync(current);
      // (the learner's fact answered with the headline: what section 5 shows first)
      const t1 = now();
      const asked = needle && needleBefore !== null ? answers() : undefined;
      return { quality, needle: asked, ms: now() - t0, needleMs: asked ? now() - t1 : 0 };
    } catch (e) {
      return { error: plainError(e) };
    }
  }

  // The model's trade-off curves measured so far (engine/sweep.js), and the needle test's
  // accuracy (engine/needle.js).
  const sweep = modelSweep(() => page, () => modelShown?.prompt);
  const accuracy = needleSweep(() => page);
  // The learner's fact, once asked (`Model.needle`: the upload module keeps it): whether its
  // question is read before the compression; null before the first.
  let needleBefore = null;

  /** Every cache's answer to the learner's fact at the current settings (`Model.needle_answers`). */
  const answers = () => JSON.parse(loadedModel.needle_answers(JSON.stringify(page.settings()), needleBefore));

  /**
   * Draws `charts` with the page's labels/theme; returns `{name: ms}`. While the comparison is
   * pending (a staged page, or an update that deferred it) its charts are not drawn: they are
   * left out of the timings, and the page keeps them marked out of date.
   */
  function draw(spec) {
    const timings = {};
    if (!spec || !page) return timings;
    const pending = spec.charts.some((c) => NEEDS_COMPARISON.has(c)) && page.isPending();
    for (const name of spec.charts) {
      if (pending && NEEDS_COMPARISON.has(name)) continue;
      const canvas = canvases.get(name);
      const size = spec.sizes?.[name];
      if (!canvas || !size) continue;
      const [w, h] = size;
      if (canvas.width !== w) canvas.width = w;
      if (canvas.height !== h) canvas.height = h;
      const t0 = now();
      page.draw(name, canvas, spec.labels, spec.dark, spec.scale);
      timings[name] = now() - t0;
    }
    return timings;
  }

  /** Runs `compute(progress)` then draws; reports the durations. */
  function computeAndDraw(id, spec, compute) {
    const progress = (stage) => post({ id, progress: stage });
    const started = epochNow();
    const t0 = now();
    const value = compute(progress);
    const compute_ms = now() - t0;
    let draws = {};
    let drawError = null;
    if (spec?.charts?.length) progress('draw');
    try {
      draws = draw(spec);
    } catch (e) {
      drawError = plainError(e); // the numbers are good even if a chart could not be drawn
    }
    // (`started` and `sent` in epoch ms: the page places the work on its own clock and
    // measures the messages' transit)
    return { ...value, timings: { compute: compute_ms, draws, started, sent: epochNow() }, drawError };
  }

  /**
   * The upload module's `chosen` tensors (an upload's or the model's) in use, then the view of
   * their shape with the page's own keys `keep` (language, embed mode); `about`: what an
   * upload's description and warnings say, as fields the page words (none for the model).
   */
  function adopt(chosen, keep, progress) {
    let result;
    let about;
    let tokens;
    try {
      result = page.useChosen(chosen.attention(), chosen.steps, chosen.keys(), chosen.channels,
        chosen.values(), chosen.valuesWidth, chosen.tokens(), chosen.description, chosen.warnings(), progress);
      about = chosen.about();
      tokens = chosen.tokens();
    } finally {
      chosen.free();
    }
    const settings = { ...page.settings(), ...keep };
    const query = asQuery(settings);
    const figures = page.update(query, progress, false, false);
    return { result, about, tokens, settings, figures, query: toQuery(query) };
  }

  const ops = {
    /**
     * `{query, lang}`: parses the query, builds the page (falling back to the defaults).
     * `{settings}` instead of a query starts from a settings object the page already holds.
     * With `draw` (a draw spec; the canvases attached before), the first view goes out as
     * soon as it is computed (a `{id, partial}` message with the reply's fields but the
     * timings), so the page writes its figures while the charts are drawn here; the charts
     * of the first screen (`draw.first`) are drawn first and announced with
     * `{id, partial: {firstCharts}}`.
     */
    async init({ id, query, settings, lang, draw: spec }) {
      timeline.init = epochNow();
      const parsed = settings ? { settings: { ...settings }, warnings: [] } : parseQuery(query);
      parsed.settings.lang = lang;
      // ({key, message, repair}: the page words `repair` in its language)
      const warnings = [...parsed.warnings];
      const progress = (stage) => post({ id, progress: stage });
      // With charts on the first screen (`spec.first`) and more below it: those charts first,
      // drawn from a staged page (the comparison and KIVI not yet computed), a pause so they
      // are shown (a canvas shows what was drawn once the task drawing it ends), then the
      // comparison and KIVI, then the other charts.
      // (The comparison's own charts are never among them: they need the comparison.)
      const onFirst = new Set((spec?.first ?? []).filter((c) => !NEEDS_COMPARISON.has(c)));
      const staged = onFirst.size > 0 && onFirst.size < spec.charts.length;
      const construct = (s) => (staged ? Page.staged(asQuery(s), progress) : new Page(asQuery(s), progress));
      // A setting the engine refuses for this data (e.g. a link made for wider data asks for a
      // channel it does not have): that setting's default instead, and why (`refusal`: its
      // fields, for the page's language); every default when that does not help.
      let defaults = null; // (parsed only when a setting is refused: not on every start)
      for (let tries = 0; ; tries += 1) {
        try {
          page = construct(parsed.settings);
          break;
        } catch (e) {
          defaults ??= parseQuery('').settings;
          const key = e?.field;
          const one = tries < 8 && key in defaults && parsed.settings[key] !== defaults[key];
          warnings.push({
            key,
            message: `${e?.message ?? String(e)}; ${one ? 'the default is used' : 'every setting\'s default is used'}`,
            refusal: e?.refusal ?? null,
            refusalOf: e?.refusalOf ?? null,
            every: !one,
          });
          if (one) {
            parsed.settings = { ...parsed.settings, [key]: defaults[key] };
          } else {
            parsed.settings = { ...defaults, lang };
            page = new Page(asQuery(parsed.settings), progress);
            break;
          }
        }
      }
      timeline.computed = epochNow();
      const reply = () => ({
        settings: parsed.settings,
        warnings,
        presets: modelPresets(),
        figures: page.figures(),
        query: toQuery(asQuery(parsed.settings)),
        fingerprints: page.dataFingerprints(),
        build,
        compiledBy,
        timeline,
      });
      const first = reply();
      if (!spec?.charts?.length) return first;
      post({ id, partial: first });
      progress('draw');
      let draws = {};
      let drawError = null;
      let rest = spec.charts;
      let fellBack = false;
      try {
        if (first.figures.pending) {
          draws = draw({ ...spec, charts: spec.charts.filter((c) => onFirst.has(c)) });
          await new Promise((resolve) => { setTimeout(resolve, 0); });
          post({ id, partial: { firstCharts: Object.keys(draws) } });
          rest = spec.charts.filter((c) => !onFirst.has(c));
          try {
            page.complete(progress);
          } catch (e) {
            fallBack(e); // (every chart is drawn again below, from the defaults)
            rest = spec.charts;
            fellBack = true;
          }
          timeline.completed = epochNow();
          progress('draw');
        }
        Object.assign(draws, draw({ ...spec, charts: rest }));
      } catch (e) {
        drawError = plainError(e);
      }
      timeline.drawn = epochNow();
      return {
        ...reply(), fellBack, timings: { compute: timeline.computed - timeline.init, draws }, drawError,
      };
    },
    attach({ canvases: list }) {
      for (const [name, canvas] of Object.entries(list)) canvases.set(name, canvas);
      return null;
    },
    parseQuery: ({ query }) => parseQuery(query),
    defaults: () => parseQuery('').settings,
    toQuery: ({ settings }) => toQuery(asQuery(settings)),
    /**
     * `{settings, draw, defer, deferLever}`: applies the settings and draws `draw.charts`. With
     * `defer` a comparison the change makes stale is left for `complete` (the figures say
     * `pending`); with `deferLever`, the bits lever's second quantization when its RMSE is not
     * known yet (`together.fewerBits.pending`).
     */
    update: ({ id, settings, draw: spec, defer, deferLever, measureModel: measure = true, needle = true }) => computeAndDraw(id, spec, (progress) => {
      const query = asQuery(settings);
      const figures = page.update(query, progress, !!defer, !!deferLever);
      // (without `measureModel` the model's quality waits for the `measureModel` request:
      // `modelSkipped` says there is one to make)
      if (!measure) return { figures, query: toQuery(query), modelSkipped: Boolean(modelShown) };
      return { figures, query: toQuery(query), model: measureModel(needle) };
    }),
    /** `{draw}`: the model's quality an update left out (`modelSkipped`), then `draw.charts`. */
    measureModel: ({ id, draw: spec }) => computeAndDraw(id, spec, () => ({ model: measureModel() })),
    /** `{draw}`: computes what a deferring update left out, then draws `draw.charts`. */
    complete: ({ id, draw: spec }) => computeAndDraw(id, spec, (progress) => ({
      figures: page.complete(progress),
    })),
    draw: ({ draw: spec }) => ({ timings: { compute: 0, draws: draw(spec) } }),
    /** `{name, bytes}` → `{file, summary, about, tensors, skipped}` (`about`: the fields of `summary`). */
    loadFile: async ({ name, bytes }) => (await uploadsModule()).load(name, bytes),
    /** Forgets one uploaded file (`{name}`); the data in use stays. */
    dropFiles: async ({ name }) => (await uploadsModule()).remove(name),
    /** The roles proposed for the files kept (kvlab::upload::Assignment, as fields). */
    assignRoles: async () => (await uploadsModule()).assign(),
    /** What `choice` would give, before it is used: `about` (shapes, warnings) or the refusal. */
    checkChoice: async ({ choice }) => {
      const chosen = (await uploadsModule()).choose(...choiceArgs(choice));
      try {
        return { about: chosen.about() };
      } finally {
        chosen.free();
      }
    },
    useUploaded: async ({ id, choice, keep, draw: spec }) => {
      const uploads = await uploadsModule();
      modelShown = null;
      return computeAndDraw(id, spec, (progress) => adopt(uploads.choose(...choiceArgs(choice)), keep, progress));
    },
    /**
     * `{prompt, layer, head, keep}`: the model run on `prompt` (the last 255 bytes of a longer
     * one, said in the warnings), its layer `layer` and head `head` (-1: the heads' mean) in use
     * as uploaded data is.
     */
    useModel: async ({ id, prompt, layer, head, keep, draw: spec, measureModel: measure = true }) => {
      const model = await theModel((stage) => post({ id, progress: stage }));
      return computeAndDraw(id, spec, (progress) => {
        const adopted = adopt(model.choose(prompt, layer, head), keep, progress);
        modelShown = { layer, head, prompt };
        // (the curves belong to the page module's data, which this replaced)
        sweep.reset();
        accuracy.regive();
        // (as `update`: section 5 off screen, its quality waits for the catch-up)
        return measure ? { ...adopted, model: measureModel() } : { ...adopted, modelSkipped: true };
      });
    },
    /**
     * `{part}`: one of section 5's details for the current settings, while the model is the
     * data (`null` otherwise): `text` (64 bytes from the full cache, compressed once and held
     * at B), `policies` (every policy on the model), `levers`, `allocation` (the heads'
     * budgets) or `sweep` (the next point of the trade-off curves, see engine/sweep.js), as `{Ok: value}`
     * or `{Err: message}` with the milliseconds it took. Each a few
     * runs of the model: the page asks for them one by one once the controls rest, so a change
     * never waits behind all of them.
     */
    modelPart: async ({ part }) => {
      if (!modelShown || !loadedModel) return null;
      if (part === 'sweep') return sweep.part(loadedModel);
      if (part === 'accuracy') return accuracy.part(loadedModel, await heldout(), needleBefore ?? true);
      const settings = JSON.stringify(page.settings());
      const { layer, head } = modelShown;
      const run = {
        text: () => loadedModel.text(settings),
        policies: () => loadedModel.policies(settings),
        levers: () => loadedModel.levers(settings),
        allocation: () => loadedModel.allocation(settings, layer, head),
        // (the learner's fact, once asked: every cache's answer, where the update left them)
        needle: () => (needleBefore === null ? 'null' : loadedModel.needle_answers(settings, needleBefore)),
      }[part];
      if (!run) throw new Error(`no model part '${part}': needle, text, policies, levers, allocation, sweep or accuracy`);
      const t0 = now();
      try {
        return { Ok: JSON.parse(run()), ms: now() - t0 };
      } catch (e) {
        return { Err: e?.message ?? String(e), ms: now() - t0 };
      }
    },
    /**
     * `{key, value, distance, before, text}`: the learner's fact (`key` is `value`, asked
     * `distance` bytes of `text`, the learner's own, or of the held-out text later) built and run by the model, and every cache's answer
     * at the current settings, the question read before the compression or after it:
     * `{case: {text, fact, asked, answer, most}, answers, ms}`. A fact that cannot be asked is
     * refused with its fields (`refusalOf: 'needle'`), the last one asked kept.
     */
    needle: async ({ id, key, value, distance, before, text: own = null }) => {
      const model = await theModel((stage) => post({ id, progress: stage }));
      const text = own ?? await heldout();
      const t0 = now();
      const c = JSON.parse(model.needle(key, value, distance, text));
      needleBefore = Boolean(before);
      return { case: c, answers: answers(), ms: now() - t0 };
    },
    /** `{seed}`: a new fact to ask, `[name, number]` (`Model.needle_draw`). */
    needleDraw: async ({ seed }) => JSON.parse((await theModel()).constructor.needle_draw(seed)),
    /** `{size}`: every head's attention of the model's last run, pooled (`Model.thumbnails`). */
    modelHeads: async ({ size }) => {
      const model = await theModel();
      return { layers: model.layers, heads: model.heads, size, cells: model.thumbnails(size) };
    },
    useGenerated: ({ id, settings, draw: spec }) => computeAndDraw(id, spec, (progress) => {
      modelShown = null;
      const query = asQuery(settings);
      return { figures: page.useGenerated(query, progress), settings, query: toQuery(query) };
    }),
    fingerprints: () => page.dataFingerprints(),
    /** Bytes of wasm linear memory (init returns the running instance's exports). */
    memory: async () => (await wasm.default()).memory.buffer.byteLength,
    // (The exports hold the comparison: computed first if an update deferred it.)
    exportCsv: () => { page.complete(); return page.exportCsv(); },
    // (the JSON is written here: the wasm module gives the export as an object)
    exportJson: () => { page.complete(); return JSON.stringify(page.exportData(), null, 2); },
    /** A chart as a PNG blob. */
    async png({ name }) {
      const canvas = canvases.get(name);
      if (!canvas) throw new Error(`no chart '${name}'`);
      if (canvas.convertToBlob) return canvas.convertToBlob({ type: 'image/png' });
      return new Promise((resolve) => canvas.toBlob(resolve, 'image/png'));
    },
  };

  return async function handle(request) {
    const { id, op } = request;
    try {
      const fn = ops[op];
      if (!fn) throw new Error(`unknown request '${op}'`);
      const value = await fn(request);
      post({ id, ok: true, value });
    } catch (e) {
      post({ id, ok: false, error: plainError(e) });
    }
  };
}
