// The values the engine's requests carry: a tensor choice checked before the upload module
// sees it, a settings object as the query Rust reads, an error as a plain object the page can
// word, and the clock both sides share.

/**
 * The arguments of `Uploads.choose` from a choice `{attention, keys, values?, headMode, head,
 * layer, kvHead, normalise}` (absent fields as the page's defaults); throws an error naming the
 * field and the value for anything else.
 */
export function choiceArgs(choice) {
  const refuse = (message) => Object.assign(new Error(`tensor choice rejected: ${message}`), { field: 'file' });
  if (choice === null || typeof choice !== 'object' || Array.isArray(choice)) {
    throw refuse(`expected an object {attention, keys, values, headMode, head, layer, kvHead, normalise}, got ${JSON.stringify(choice)}`);
  }
  const text = (key, fallback) => {
    const v = choice[key] ?? fallback;
    if (typeof v !== 'string') throw refuse(`${key} must be a tensor name (text), got ${JSON.stringify(v)}`);
    return v;
  };
  const index = (key) => {
    const v = choice[key] ?? 0;
    if (!Number.isSafeInteger(v) || v < 0) throw refuse(`${key} must be a whole number from 0, got ${JSON.stringify(v)}`);
    return v;
  };
  const values = choice.values == null || choice.values === '' ? undefined : text('values');
  return [text('attention', ''), text('keys', ''), values, text('headMode', 'head'), index('head'),
    index('layer'), index('kvHead'), Boolean(choice.normalise)];
}

/** Milliseconds since the epoch, comparable between the page and a worker (cold-load timeline). */
export function epochNow() {
  return performance.timeOrigin + performance.now();
}

/**
 * An `Error` from wasm (or anywhere) as a plain object the page can show (`refusal`: a refusal's
 * fields, for the page's language, and `refusalOf`, whose: see kvlab::js::lab_error).
 */
export function plainError(e) {
  return {
    message: e?.message ?? String(e),
    field: e?.field ?? null,
    refusal: e?.refusal ?? null,
    refusalOf: e?.refusalOf ?? null,
  };
}

/**
 * A settings object as the query string the wasm module reads settings from (Rust's
 * `Settings::checked`: a link's parser, refusing what a link would have repaired). Empty values
 * are left out: `channel: null` (automatic) and `embed: null` are the defaults.
 */
export function asQuery(settings) {
  if (settings === null || typeof settings !== 'object' || Array.isArray(settings)) {
    throw new Error(`settings must be an object of the page's settings, not ${JSON.stringify(settings)}`);
  }
  return Object.entries(settings)
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join('&');
}
