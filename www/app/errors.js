// Errors and repairs as the page says them: an engine refusal's fields worded in the page's
// language (kvlab::state::Repair, quant::QuantError, select::SelectError, io::LoadError, ...),
// shown next to the control that caused it, kept to be worded again on a language switch.

import { TEXT, LOAD_ZH, t, fill, placeName } from '../i18n.js';
import { $ } from '../lib/dom.js';
import { app } from './store.js';
import { writeControl } from './controls.js';

/** A Chinese character (the templates' spacing around names said in Chinese, errorText). */
const HAN = /[\u4e00-\u9fff]/;

/** The message slot of `control` (its `.control`'s `.error`), or null. */
export function errorSlot(control) {
  return control?.closest('.control')?.querySelector('.error') ?? null;
}

/** Shows `message` next to `control` (or in the status line); `error`, the engine's, when it is one. */
export function showError(control, message, error = null) {
  const slot = errorSlot(control) ?? $('#status');
  slot.textContent = message;
  slot.hidden = false;
  // (kept to word it again on a language switch; the engine's English in data-value, as
  // figures keep theirs)
  if (error) {
    app.shownErrors.set(slot, error);
    if (error.message) slot.dataset.value = error.message;
    else delete slot.dataset.value;
  } else {
    app.shownErrors.delete(slot);
    delete slot.dataset.value;
  }
  control?.setAttribute('aria-invalid', 'true');
}

/** Shows a failed request's message (a request cut short by Stop is not an error). */
export function reportError(control, e) {
  if (e?.stopped) return;
  showError(control, errorText(e), e);
}

/**
 * One of the link's repairs in the page's language: a value out of its range (`repair`), or a
 * setting the engine refused for this data (`refusal`, see `errorText`) and what is used
 * instead (`every`: every setting's default); any other in English, the engine's message.
 */
export function urlWarningText(w) {
  if (w.repair) return describeRepair(w.key, w.repair, true);
  if (w.textKey) return fill(t(app.lang, w.textKey), w.textFields);
  // (a warning names its setting `key`; an engine error its `field`)
  const said = w.refusal ? errorText({ ...w, field: w.key }) : null;
  if (said === null || said === w.message) return w.message;
  return said + t(app.lang, w.every ? 'repair.every-default' : 'repair.default');
}

/**
 * An engine error's text: a setting out of range, a bits / group size the quantizer refuses,
 * a budget, window, kernel or sinks the selection refuses, a model too large to count (`refusal`,
 * the fields of kvlab::state::Repair, quant::QuantError, select::SelectError,
 * lab::LabError::Channel or budget::BudgetError::Overflow, by `refusalOf`) in the page's
 * language; a file the upload module refuses (`refusalOf: 'load'`, io::LoadError::visit's
 * fields) in Chinese from LOAD_ZH, in English as the module said it; a message of the page's own
 * (`textKey`, `textFields`) or several (`list`, one per line); any other its message (in
 * English). `repaired`: a repair whose replacement is used (said with it).
 */
export function errorText(e) {
  if (e?.list) return e.list.map(errorText).join('\n');
  const fields = e?.refusal;
  if (fields && e.refusalOf === 'repair') return describeRepair(e.field, fields, Boolean(e.repaired));
  // (a file the upload module refused: in English its own message)
  if (fields && e.refusalOf === 'load') {
    let template = app.lang === 'zh' ? LOAD_ZH[fields.kind] : null;
    if (!template) return e.message;
    const named = {};
    for (const k of ['field', 'role', 'axis', 'left', 'right', 'first', 'second']) {
      if (!(k in fields)) continue;
      const said = placeName(app.lang, fields[k]);
      named[k] = said;
      // (the templates space these names off the Chinese around them, as a Latin name needs;
      // a name said in Chinese joins its neighbours: '注意力的形状', not '注意力 的形状')
      if (HAN.test(said.at(0))) template = template.replace(new RegExp(`(${HAN.source}) \\{${k}\\}`), `$1{${k}}`);
      if (HAN.test(said.at(-1))) template = template.replace(new RegExp(`\\{${k}\\} (?=${HAN.source})`), `{${k}}`);
    }
    // (a file none of whose tensors loads: each tensor's reason worded as a skipped one is)
    if (fields.skipped) {
      const reasons = fields.skipped.map((why) => describeSkipped('', { ...why, file: fields.file }));
      if (reasons.includes('')) return e.message;
      named.reasons = reasons.join('；') || t(app.lang, 'upload.skipped.none');
    }
    return fill(template, { ...fields, ...named });
  }
  // (a message the page itself words)
  if (e?.textKey) return fill(t(app.lang, e.textKey), e.textFields);
  // (the ranges a learner can type past; a refusal about the data itself keeps its message)
  const key = fields && `${e.refusalOf}.refused.${fields.kind}`;
  if (!key || !(key in TEXT.en)) return e?.message ?? String(e);
  return fill(t(app.lang, key), {
    ...fields,
    ...(fields.scheme && { scheme: t(app.lang, `quant.scheme-name.${fields.scheme}`) }),
    ...(fields.axis && { axis: t(app.lang, `quant.axis.${fields.axis.replaceAll(' ', '-')}`) }),
    ...(fields.what && { what: t(app.lang, `needle.what.${fields.what}`) }),
  });
}

/**
 * A value the engine refused or repaired (`repair`, fields) for the settings key `key`, in the
 * page's language; with `repaired`, what is used instead too (in English, the engine's message).
 */
function describeRepair(key, repair, repaired) {
  const template = t(app.lang, `repair.${repair.kind}`);
  const said = fill(template, {
    key,
    ...repair,
    options: repair.options?.join(', '),
    ...(repair.scheme && { scheme: t(app.lang, `quant.scheme-name.${repair.scheme}`) }),
  });
  // (a repair whose words say what is used: the bits raised to the scheme's fewest)
  if (!repaired || template.includes('{used}')) return said;
  const used = repair.used ?? repair.limit;
  return said + (used === undefined
    ? t(app.lang, 'repair.default')
    : fill(t(app.lang, 'repair.used'), { used }));
}

/**
 * A tensor a file holds but the module did not load, in the page's language: `name: reason`
 * from the reason's fields (`why`: `{name, fileCap, refusal, file}`), or the module's English
 * line (`english`) in English or without fields.
 */
export function describeSkipped(english, why) {
  if (!why || app.lang === 'en' || !LOAD_ZH[why.refusal?.kind]) return english;
  const said = errorText({ refusal: why.refusal, refusalOf: 'load', message: english });
  const prefix = `${why.file}：`;
  const reason = said.startsWith(prefix) ? said.slice(prefix.length) : said;
  return `${why.name}：${reason}${why.fileCap ? t(app.lang, 'upload.skipped.fileCap') : ''}`;
}

/**
 * Clears the messages next to the controls. With `used` (the settings now in use), a control
 * whose value was refused shows the value in use again (`except`, refused once more, keeps
 * what was typed): a field never goes on showing a refused value without its message.
 */
export function clearErrors(used = null, except = null) {
  // Only messages that are showing: rewriting an unchanged element still costs style and layout.
  for (const e of document.querySelectorAll('.control .error:not([hidden])')) {
    e.textContent = '';
    e.hidden = true;
    delete e.dataset.value;
    app.shownErrors.delete(e);
  }
  for (const c of document.querySelectorAll('[aria-invalid]')) {
    c.removeAttribute('aria-invalid');
    const key = c.dataset.key;
    if (used && key && c !== except && key in used) writeControl(c, used[key]);
  }
}

/** Every message shown next to a control, worded again in the page's language. */
export function rewordErrors() {
  for (const [slot, e] of app.shownErrors) if (!slot.hidden) slot.textContent = errorText(e);
}
