// What every section's writer shares: how a figure is written, the number formats, and the
// wording of a text for a section embedded alone. A writer gets the page's view of things as
// `ctx`: {lang, embed (the section shown alone, or null)}, plus what it alone needs.

import { TEXT, t } from '../i18n.js';
import { num } from '../formulas.js';

/** Writes a figure: `data-value` holds the exact value, the text a readable one. */
export function figure(name, value, text) {
  const v = String(value);
  const shown = text ?? v;
  for (const out of document.querySelectorAll(`[data-figure="${name}"]`)) {
    // Unchanged figures are left alone: every DOM write costs layout.
    if (out.dataset.value !== v) out.dataset.value = v;
    if (out.textContent !== shown) out.textContent = shown;
  }
}

export const fmt = {
  err: (v) => (Number.isFinite(v) ? v.toPrecision(3) : String(v)),
  ratio: (v) => `${num(v)}×`,
  db: (v) => (v === Infinity || v === null ? '∞ dB' : `${v.toFixed(1)} dB`),
  pct: (v) => `${(100 * v).toFixed(1)}%`,
  /** Nats with three significant digits (tiny ones in powers of ten: KL of 1e-9 is not 0). */
  nats: (v) => {
    if (v === null || v === undefined || !Number.isFinite(v)) return '—';
    if (v !== 0 && Math.abs(v) < 1e-3) return v.toExponential(2);
    return v.toPrecision(3);
  },
};

/**
 * An integer with thousands separators (1,234,567). Not `toLocaleString`: its first call loads
 * locale data, ~30 ms on the page's thread.
 */
export function grouped(n) {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/**
 * The key of `key`'s wording for a section shown alone (`key.embed`, when the page is embedded
 * and there is one: a text that points to another section, which the embed hides), else `key`.
 */
export function aloneKey(key, embed) {
  return embed && `${key}.embed` in TEXT.en ? `${key}.embed` : key;
}

/** `key`'s text in `ctx.lang`, in its wording for a section shown alone if embedded. */
export const said = (ctx, key) => t(ctx.lang, aloneKey(key, ctx.embed));
