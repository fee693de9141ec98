// What every section's writer shares: how a figure is written and the wording of a text for a
// section embedded alone (the number formats are lib/format.js). A writer gets the page's view of things as
// `ctx`: {lang, embed (the section shown alone, or null)}, plus what it alone needs.

import { TEXT, t } from '../i18n.js';

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

/**
 * The key of `key`'s wording for a section shown alone (`key.embed`, when the page is embedded
 * and there is one: a text that points to another section, which the embed hides), else `key`.
 */
export function aloneKey(key, embed) {
  return embed && `${key}.embed` in TEXT.en ? `${key}.embed` : key;
}

/** `key`'s text in `ctx.lang`, in its wording for a section shown alone if embedded. */
export const said = (ctx, key) => t(ctx.lang, aloneKey(key, ctx.embed));
