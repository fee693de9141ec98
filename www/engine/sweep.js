// Section 3b's trade-off on the model: its curves, measured a point at a time (one run of the
// model per request, so a change never waits behind a whole curve), kept while the settings
// that change them rest (a drag of B moves only the ring) and given to the page's module as
// each curve is complete. Which settings change a curve is Rust's table's (`SWEPT`: those
// that affect the section `model-tradeoff`).

import { SWEPT } from '../fields.js';

/**
 * The model's curves for the page's module `page()` (the current `Page`) and the prompt
 * `prompt()` of the model's run.
 */
export function modelSweep(page, prompt) {
  let sweep = { key: null, curves: [] };
  const now = () => performance.now();

  /** The finished curves to the page's module (the `model-tradeoff` chart), flat. */
  const give = () => {
    const c = sweep.curves.filter((x) => x.done);
    page().useModelSweep(false, c.map((x) => x.name), Uint32Array.from(c, (x) => x.points.length),
      Float64Array.from(c.flatMap((x) => x.points.map((p) => p.rOverall))),
      Float64Array.from(c.flatMap((x) => x.points.map((p) => p.kl))));
  };

  /** Forgets the curves when `settings` (or the prompt) changed what they measure. */
  const sync = (settings) => {
    const key = JSON.stringify([prompt(), ...SWEPT.map((k) => settings[k])]);
    if (sweep.key === key) return;
    sweep = { key, curves: [] };
    give();
  };

  return {
    sync,
    /** Forgets every curve (the page's module has new data: the model's new run). */
    reset() {
      sweep = { key: null, curves: [] };
    },
    /**
     * The next point of the curves for the current settings (`model.sweep`, one run of the
     * model): `{Ok: {curveDone, done}}`, a finished curve given to the page's module
     * (`curveDone`), `{Ok: {done: true}}` once every curve is measured, or `{Err}`.
     */
    part(model) {
      const current = page().settings();
      sync(current);
      const t0 = now();
      try {
        const last = sweep.curves.at(-1);
        const open = last && !last.done;
        const index = sweep.curves.length - (open ? 1 : 0);
        const r = JSON.parse(model.sweep(JSON.stringify(current), index, open ? last.points.length : 0));
        if (!r) return { Ok: { done: true }, ms: now() - t0 };
        if (!open) sweep.curves.push({ name: r.name, points: [], done: false });
        const c = sweep.curves[index];
        if (r.point) c.points.push(r.point);
        c.done = Boolean(r.error) || c.points.length >= r.of;
        if (c.done) give();
        return { Ok: { curveDone: c.done, done: false }, ms: now() - t0 };
      } catch (e) {
        return { Err: e?.message ?? String(e), ms: now() - t0 };
      }
    },
  };
}
