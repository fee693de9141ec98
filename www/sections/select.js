// Section 3's figures: the kept set (as ranges, and as the prompt's own tokens when an upload
// has them), its parts, R_token and the attention mass it retains.

import { t, fill } from '../i18n.js';
import { fmt, grouped } from '../lib/format.js';
import { figure } from './common.js';

/**
 * Writes section 3's figures of `f`; `ctx.tokens`: the prompt's token texts of an upload, or
 * null.
 */
export function writeSelect(f, ctx) {
  const sel = f.select;
  figure('kept-count', sel.keptCount, `${sel.keptCount} / ${f.data.tokens}`);
  figure('kept-indices', sel.keptRanges, shortRanges(sel.keptRanges, ctx));
  writeKeptTokens(sel.keptRanges, ctx);
  figure('r-token', sel.rToken, fmt.ratio(sel.rToken));
  figure('roles', `${sel.heavyCount}/${sel.recentCount}/${sel.sinkCount}`,
    `${sel.heavyCount} / ${sel.recentCount} / ${sel.sinkCount}`);
  figure('mass-mean', sel.massMean, fmt.pct(sel.massMean));
  figure('mass-worst', sel.massWorst, fmt.pct(sel.massWorst));
  // (B's smallest, StreamingLLM's sinks, said beside the slider that starts there)
  figure('budget-min', sel.budgetMin,
    fill(t(ctx.lang, 'select.budget-min'), { sinks: grouped(sel.sinkCount), min: grouped(sel.budgetMin) }));
}

/**
 * At most 60 ranges of a compact range list for reading (`data-value` keeps them all; the
 * exports have every index). At T = 131,072 the full list is ~23,000 characters, and laying out
 * that much text took the page's thread over 50 ms per update.
 */
function shortRanges(ranges, ctx, max = 60) {
  // A line breaks between ranges, never inside one: a space after each comma, and the
  // non-breaking hyphen (U+2011) within a range ("480-511" was split as "480-" / "511").
  const readable = (r) => r.replaceAll('-', '\u2011').replaceAll(',', ', ');
  let at = -1;
  for (let n = 0; n < max; n += 1) {
    at = ranges.indexOf(',', at + 1);
    if (at < 0) return readable(ranges);
  }
  const rest = ranges.slice(at + 1).split(',').length;
  return `${readable(ranges.slice(0, at))}, … ${fill(t(ctx.lang, 'fig.more-ranges'), { n: grouped(rest) })}`;
}

/** What #kept-tokens shows: {texts, ranges, lang} (rewritten only when one changes). */
let shownTokens = null;

/** The most kept tokens written as text: a longer list would be a wall of text on a phone. */
const KEPT_TOKENS_SHOWN = 256;

/**
 * With the prompt's token texts (an upload's), the kept tokens as text, each with its index and
 * never split across lines (`ranges`: the kept set as compact ranges).
 */
function writeKeptTokens(ranges, ctx) {
  const texts = ctx.tokens;
  const row = document.querySelector('#kept-tokens-row');
  row.hidden = !texts;
  const out = row.querySelector('[data-figure="kept-tokens"]');
  const shown = { texts, ranges, lang: ctx.lang };
  const last = shownTokens;
  if (!texts || (last?.texts === texts && last.ranges === ranges && last.lang === ctx.lang)) return;
  shownTokens = shown;
  out.dataset.value = ranges;
  const kept = ranges ? ranges.split(',').flatMap((r) => {
    const [a, b = a] = r.split('-').map(Number);
    return Array.from({ length: b - a + 1 }, (_, i) => a + i);
  }) : [];
  const chips = kept.slice(0, KEPT_TOKENS_SHOWN).map((i) => {
    const tok = document.createElement('span');
    tok.className = 'tok';
    const index = document.createElement('b');
    index.textContent = i;
    tok.append(index, `‘${(texts[i] ?? '').replaceAll('\n', '⏎')}’`);
    return tok;
  });
  if (kept.length > KEPT_TOKENS_SHOWN) {
    chips.push(fill(t(ctx.lang, 'fig.more-tokens'), { n: grouped(kept.length - KEPT_TOKENS_SHOWN) }));
  }
  out.replaceChildren(...chips);
}
