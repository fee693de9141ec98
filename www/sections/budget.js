// Section 1's figures: the cache's bytes on the data and on the model, the context that fits.

import { t, fill } from '../i18n.js';
import { bytes, gib, fmt, grouped } from '../lib/format.js';
import { figure } from './common.js';

/** Writes section 1's figures of `f`. */
export function writeBudget(f, ctx) {
  const b = f.budget;
  figure('bytes-final', b.data.m_final, bytes(b.data.m_final));
  figure('bytes-final-2', b.data.m_final, bytes(b.data.m_final));
  figure('bytes-fp-data', b.data.m_fp, bytes(b.data.m_fp));
  figure('gib-final', b.modelGibFinal, gib(b.modelGibFinal));
  figure('gib-fp', b.modelGibFp, gib(b.modelGibFp));
  figure('r-overall-model', b.extrapolated.r_overall, fmt.ratio(b.extrapolated.r_overall));
  // (where every layer slides the cache stops at the window; past the search's limit, more fit)
  const tok = (n, kind) => (kind === 'tokens'
    ? `${grouped(n)} ${t(ctx.lang, 'budget.tokens')}`
    : fill(t(ctx.lang, `budget.fit.${kind}`), { n: grouped(n) }));
  figure('context-fit', b.contextFit, tok(b.contextFit, b.contextFitKind));
  // Sliding layers hold only their window (Mistral at 128k keeps 32,768 tokens by the
  // fraction, and its cache holds 4,096 of them): the caption says what the cache holds, and
  // the note under the formula what the per-token bytes are multiplied by.
  const m = b.model;
  const slide = m.sliding?.layers > 0 && b.extrapolated.t_total > m.sliding.window ? m.sliding : null;
  const all = slide && slide.layers >= m.layers;
  const words = {
    kept: grouped(b.keptAtContext), context: grouped(b.extrapolated.t_total), n: slide?.layers, L: m.layers,
    rest: m.layers - (slide?.layers ?? 0), w: grouped(slide?.window ?? 0),
    held: grouped(Math.min(b.keptAtContext, slide?.window ?? Infinity)),
  };
  const held = slide && b.keptAtContext > slide.window ? fill(t(ctx.lang, `budget.held.${all ? 'all' : 'some'}`), words) : '';
  figure('kept-at-context', b.keptAtContext, fill(t(ctx.lang, `budget.kept.${b.keep}`), {
    kept: grouped(b.keptAtContext), context: grouped(b.extrapolated.t_total),
    dataKept: grouped(b.data.t_kept), T: grouped(b.data.t_total), bits: f.quant.bits,
  }) + held);
  const note = document.querySelector('[data-figure="sliding-note"]');
  note.hidden = !slide;
  if (slide) figure('sliding-note', slide.window, fill(t(ctx.lang, `formula.sliding.${all ? 'all' : 'some'}`), words));
  figure('scope-copies', b.kvCopyFactor, fill(t(ctx.lang, 'scope.copies'),
    { n: grouped(b.selectionCopies), k: b.kvCopyFactor }));
  figure('context-fit-fp', b.contextFitFp, tok(b.contextFitFp, b.contextFitFpKind));
}
