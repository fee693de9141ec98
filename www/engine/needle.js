// Section 5's accuracy chart: each policy's share of the built-in facts recalled against the
// cache's R_overall, measured one case of one curve at a time (one request each, so a change
// of the controls waits behind one at most), kept while the settings that change the curves
// rest (a drag of B or a method switch moves only the ring: the curve `current`) and given to
// the page's module as each curve is complete. The curves: `full` (the full cache, one point
// a case), every policy of section 5's table over the budgets, then `current` (the setting in
// use, one point a case); the upload module's `Model.needle_point` numbers them.

import { SWEPT } from '../fields.js';

/** The share of `rows`' cases whose point `j` recalled the fact, and their mean R_overall. */
function mean(rows, j) {
  const at = rows.map((r) => r[Math.min(j, r.length - 1)]);
  return {
    budget: at[0].budget,
    recalled: at.filter((p) => p.correct).length / at.length,
    rOverall: at.reduce((s, p) => s + p.rOverall, 0) / at.length,
  };
}

/** A complete curve's points (`{budget, recalled, rOverall}`), one per budget. */
function pointsOf(c) {
  const n = Math.min(...c.rows.map((r) => r.length));
  return Array.from({ length: n }, (_, j) => mean(c.rows, j));
}

/**
 * The accuracy chart's curves for the page's module `page()` (the current `Page`), on the
 * built-in facts: they do not depend on the data in use.
 */
export function needleSweep(page) {
  let sweep = { key: null, ring: null, curves: [], done: false };

  /** What the page says under the chart: the complete curves' points, the cases. */
  const summary = () => {
    const done = sweep.curves.filter((c) => c.done);
    return { cases: done[0]?.cases ?? 0, curves: done.map((c) => ({ name: c.name, points: pointsOf(c) })) };
  };

  /** The complete curves to the page's module (the `needle` chart), flat. */
  const give = () => {
    const { curves } = summary();
    const xs = curves.flatMap((c) => c.points.map((p) => p.rOverall));
    const right = Math.max(1, ...xs);
    // (the full cache's level drawn across the chart: the ceiling every policy is judged by)
    const drawn = curves.map((c) => (c.name === 'full'
      ? { ...c, points: [c.points[0], { ...c.points[0], rOverall: right }] } : c));
    page().useModelSweep(true, drawn.map((c) => c.name), Uint32Array.from(drawn, (c) => c.points.length),
      Float64Array.from(drawn.flatMap((c) => c.points.map((p) => p.rOverall))),
      Float64Array.from(drawn.flatMap((c) => c.points.map((p) => p.recalled))));
  };

  /** Forgets the curves when `settings` or `before` changed what they measure, the ring when B or the method did. */
  const sync = (settings, before) => {
    const key = JSON.stringify([before, ...SWEPT.map((k) => settings[k])]);
    const ring = JSON.stringify([key, settings.budget, settings.method]);
    if (sweep.key !== key) {
      sweep = { key, ring, curves: [], done: false };
      give();
    } else if (sweep.ring !== ring) {
      sweep.ring = ring;
      sweep.curves = sweep.curves.filter((c) => c.name !== 'current');
      sweep.done = false;
      give();
    }
  };

  return {
    /**
     * Gives the curves again to the page's module, which keeps them with the data they were
     * given for: a new run of the model (another prompt) leaves the built-in facts as they were.
     */
    regive() {
      give();
    },
    /**
     * The next case of the curves for the current settings (`model.needle_point`, a few
     * answers of the model): `{Ok: {curveDone, done, summary}}` (`summary` once a curve is
     * complete), `{Ok: {done: true}}` once every curve is measured, or `{Err}`.
     */
    part(model, text, before) {
      const t0 = performance.now();
      const current = page().settings();
      sync(current, before);
      if (sweep.done) return { Ok: { done: true, summary: summary() }, ms: 0 };
      try {
        // (curves are numbered 0, 1, ... and kept in order: the first not complete, or the
        // next; the ring, measured again after a change of B, comes last)
        const open = sweep.curves.find((c) => !c.done) ?? null;
        const at = open?.index ?? (sweep.curves.at(-1)?.index ?? -1) + 1;
        const r = JSON.parse(model.needle_point(JSON.stringify(current), text, at, open ? open.rows.length : 0, before));
        if (!r) {
          sweep.done = true;
          return { Ok: { done: true, summary: summary() }, ms: performance.now() - t0 };
        }
        const c = open ?? { index: at, name: r.name, cases: r.cases, rows: [], done: false };
        if (!open) sweep.curves.push(c);
        c.rows.push(r.points);
        c.done = c.rows.length >= r.cases;
        if (c.done) give();
        return { Ok: { curveDone: c.done, done: false, ...(c.done && { summary: summary() }) }, ms: performance.now() - t0 };
      } catch (e) {
        return { Err: e?.message ?? String(e), ms: performance.now() - t0 };
      }
    },
  };
}
