// What the page knows of its settings and charts, read from their one source each: the
// settings, their sections and bounds from fields.js (generated from Rust's table of settings),
// the charts from index.html's canvases. Nothing here is a list kept by hand.

import { FIELDS, SECTIONS, COMPARISON_CHARTS } from '../fields.js';

/** Which sections a settings key affects (the data's keys, absent here, affect everything). */
export const SECTIONS_OF = Object.fromEntries(Object.entries(FIELDS)
  .filter(([, f]) => f.sections).map(([k, f]) => [k, f.sections]));
/** Bound `b`'s largest value when its bounding setting is `v` (fields.js BOUNDS). */
export const limitOf = (b, v) => (b.share ? Math.floor(b.share / Math.max(1, v)) : b.times * v + b.plus);
/** Every section an update can change (a data change changes them all). */
export const ALL = SECTIONS;
// Charts of a section that some of its controls do not change: the policy strips show which
// tokens each policy keeps, which the quantization controls (those that change what the bits
// change) leave alone.
const QUANT = String(SECTIONS_OF.bits);
export const UNCHANGED_BY = {
  strips: new Set(Object.keys(SECTIONS_OF).filter((k) => String(SECTIONS_OF[k]) === QUANT)),
};
/** Charts drawn from the policy comparison (not drawn while the engine defers it). */
export const NEEDS_COMPARISON = new Set(COMPARISON_CHARTS);

// The charts of each section, as its canvases name them: index.html is the one list (a new
// chart is a canvas there and a `render::Chart` in the engine, nothing here). Read on first
// use, once the page is there.
let charts = null;

/** The charts of `sections`, in the page's order. */
export function chartsOf(sections) {
  charts ??= Object.fromEntries(ALL.map((s) => [s,
    [...document.querySelectorAll(`[data-section="${s}"] canvas[data-chart]`)].map((c) => c.dataset.chart)]));
  return [...sections].flatMap((s) => charts[s] ?? []);
}
