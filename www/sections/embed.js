// A section shown alone for an iframe (`?embed=`): the settings it depends on stated in words
// at its top (Rust's EMBED_KEYS: its own, and the data's description), so a link's "these
// bits" are said; and each section's "Copy embed link" (app/buttons.js), its own `?embed=`.

import { t, fill } from '../i18n.js';
import { EMBED_KEYS } from '../fields.js';
import { app } from '../app/store.js';
import { describeData } from './data/describe.js';

/** Controls the page hides for the method or model in use (style.css's rules). */
const NOT_IN_USE = 'body:not([data-method="snapkv"]) .snapkv-only, body:not([data-method="streaming"]) .streaming-only, '
  + 'body[data-method="streaming"] .not-streaming, body:not([data-model="custom"]) .custom-only';

/** Setting `key` in words: its control's label and the value it shows (null: no control). */
function settingText(key, value) {
  const control = document.querySelector(`[data-key="${key}"]`);
  if (!control || control.closest('.control')?.matches(NOT_IN_USE)) return null;
  const label = control.id ? document.querySelector(`label[for="${control.id}"]`)?.textContent : null;
  const shown = control.tagName === 'SELECT'
    ? [...control.options].find((o) => o.value === String(value ?? 'auto'))?.textContent ?? String(value)
    : String(value ?? 'auto');
  return `${label ?? key} = ${shown}`;
}

/**
 * In a section shown alone (`ctx.embed`), writes the settings it depends on from `f` (the
 * lab's figures) and the view's settings, in the page's language.
 */
export function writeEmbedSettings(f, ctx) {
  if (!ctx.embed) return;
  const out = document.querySelector(`[data-section="${ctx.embed}"] [data-figure="embed-settings-${ctx.embed}"]`);
  if (!out) return;
  const keys = EMBED_KEYS[ctx.embed] ?? [];
  const settings = keys.map((k) => settingText(k, app.good?.[k])).filter(Boolean);
  const text = fill(t(ctx.lang, 'embed.settings'), { data: describeData(f.data), settings: settings.join(t(ctx.lang, 'upload.join')) });
  out.dataset.value = keys.map((k) => `${k}=${app.good?.[k] ?? 'auto'}`).join('&');
  if (out.textContent !== text) out.textContent = text;
}
