// The sections the page writes, in one list: each writes its own figures from the engine's
// (its charts are the engine's). A new section is a file here and a line in WRITERS.

import { renderFormulas } from '../formulas.js';
import { t } from '../i18n.js';
import { app } from '../app/store.js';
import { fitRanges } from '../app/controls.js';
import { writeBudget } from './budget.js';
import { writeQuant, writeKivi } from './quant.js';
import { writeSelect } from './select.js';
import { writeCompare } from './compare.js';
import { writeTogether } from './together.js';
import { writeModelFigures } from './model-run.js';
import { writeData } from './data.js';
import { writeEmbedSettings } from './embed.js';

/** The page as the section writers need to know it. */
export const sectionContext = () => ({
  lang: app.lang,
  embed: app.good?.embed ?? null,
  tokens: app.upload?.tokens ?? null,
  // (section 3b's model columns: section 5's policies on the model, stale until remeasured)
  model: app.upload?.model
    ? { rows: app.modelDetails?.policies?.Ok ?? null, stale: app.modelDetailsFor !== app.model }
    : null,
});

/** Every section's writer of the engine's figures `f`, in the order they are written. */
const WRITERS = [
  (f, ctx) => writeModelFigures(ctx),
  writeQuant,
  writeSelect,
  writeBudget,
  writeData,
  writeTogether,
  // (A staged first view: the comparison and KIVI follow; a deferred comparison keeps the
  // figures on screen until the catch-up computes it.)
  (f, ctx) => f.pending || writeCompare(f.compare, f.data.steps, ctx),
  (f, ctx) => f.kiviPending || writeKivi(f.kivi, ctx),
  writeEmbedSettings,
];

function writeFigures(f) {
  const ctx = sectionContext();
  for (const write of WRITERS) write(f, ctx);
}

/** Writes figures and formulas of `sections` (the engine has drawn their charts). */
export function render(figures, sections) {
  app.figures = figures;
  writeView(figures, sections);
}

/**
 * Writes `figures` and the formulas of `sections` on the page (render; and the view drawn
 * ahead, whose figures are not the engine's yet).
 */
export function writeView(figures, sections) {
  const tf = performance.now();
  fitRanges(figures);
  writeFigures(figures);
  performance.measure('kvlab:figures', { start: tf, end: performance.now() });
  const t0 = performance.now();
  renderFormulas(figures, app.good, (key) => t(app.lang, key), new Set([...sections, 'together']));
  performance.measure('kvlab:formulas', { start: t0, end: performance.now() });
}
