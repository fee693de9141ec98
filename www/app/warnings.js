// The page's notes boxes: what the engine repaired in a link (#url-warnings), the upload's
// warnings (#upload-warnings), the model's (#model-warnings) and the page's own notes, each
// kept as fields so a language switch words it again.

import { t } from '../i18n.js';
import { $ } from '../lib/dom.js';
import { app } from './store.js';
import { urlWarningText } from './errors.js';
import { describeWarning } from '../sections/data/describe.js';

/** Shows `list` (texts) in the box `target`, or hides it when empty. */
export function showWarnings(target, list) {
  if (target === '#upload-warnings') app.uploadNotes = null;
  if (target === '#url-warnings') {
    app.urlNotes = null;
    app.note = null;
  }
  const el = $(target);
  if (!list.length) {
    if (!el.hidden) el.hidden = true;
    return;
  }
  el.textContent = list.join(' · ');
  el.hidden = false;
}

/** A note of the page's own in the link's box (`key`: its text), worded again on a switch. */
export function showNote(key) {
  showWarnings('#url-warnings', [t(app.lang, key)]);
  app.note = key;
}

/**
 * What the engine repaired in the link (`warnings`: init's `{key, message, repair}`) in the
 * page's language, after the line saying so; the engine's English messages go to data-value.
 */
export function showUrlWarnings(warnings) {
  showWarnings('#url-warnings', warnings.map(urlWarningText));
  const el = $('#url-warnings');
  el.dataset.value = warnings.map((w) => w.message).join(' · ');
  if (warnings.length) {
    el.prepend(t(app.lang, 'warn.url'));
    app.urlNotes = warnings;
  }
}

/**
 * The upload's warnings (`about.warnings`, fields) in the page's language; `lines`, the
 * engine's English lines, go to data-value (for tests, as figures' do).
 */
export function showUploadWarnings(about, lines) {
  const notes = about?.warnings ?? [];
  showWarnings('#upload-warnings', notes.map(describeWarning));
  app.uploadNotes = notes.length ? notes : null;
  if (lines) $('#upload-warnings').dataset.value = lines.join(' · ');
  // (on a language switch `lines` is not given: the engine's lines stay as they were)
}

/** Every box worded again in the page's language (a language switch). */
export function rewordWarnings() {
  if (app.uploadNotes) showUploadWarnings({ warnings: app.uploadNotes });
  if (app.urlNotes) showUrlWarnings(app.urlNotes);
  if (app.note) showNote(app.note);
}
