// Section 4's figures: both levers on one measure, and the verdict the engine gives.

import { t } from '../i18n.js';
import { bytes, fmt } from '../lib/format.js';
import { figure } from './common.js';

/** Writes section 4's figures of `f`. */
export function writeTogether(f, ctx) {
  figure('r-overall', f.together.rOverall, fmt.ratio(f.together.rOverall));
  writeLevers(f.together, ctx);
}

/** Writes the levers' table of `tg` (the engine's `together` figures). */
export function writeLevers(tg, ctx) {
  // Deferred while the section was off screen: the table's last figures stay until the
  // catch-up (both rows are computed together, so the verdict compares figures of one view).
  if (tg.fewerBits.pending) return;
  // Both rows are measured by the engine on one figure, the attention output's error; this
  // only words them (a percentage and a rise in percentage points, 2 significant digits).
  const pct = (v) => `${(100 * v).toPrecision(3)}%`;
  const points = (v) => {
    const p = Math.abs(100 * v);
    return `${v < 0 ? '−' : '+'}${p < 10 ? p.toPrecision(2) : p.toFixed(1)}`;
  };
  const unit = t(ctx.lang, 'unit.points');
  for (const [name, l] of [['bits', tg.fewerBits], ['tokens', tg.fewerTokens]]) {
    if (l.costPerKib === null) {
      const na = t(ctx.lang, 'lever.impossible');
      figure(`lever-${name}-saves`, 0, na);
      figure(`lever-${name}-cost`, 0, na);
      figure(`lever-${name}-per`, 0, na);
      continue;
    }
    const saved = l.bytesBefore - l.bytesAfter;
    const rise = l.qualityAfter - l.qualityBefore;
    figure(`lever-${name}-saves`, saved, bytes(saved));
    figure(`lever-${name}-cost`, rise, `${t(ctx.lang, 'lever.error')} ${pct(l.qualityBefore)} → ${pct(l.qualityAfter)}`
      + ` (${points(rise)} ${unit})`);
    figure(`lever-${name}-per`, l.costPerKib, `${points(l.costPerKib)} ${unit} / KiB`);
  }
  const verdict = tg.verdict ?? '';
  figure('lever-verdict', verdict, verdict ? t(ctx.lang, `lever.verdict.${verdict}`) : '');
}
