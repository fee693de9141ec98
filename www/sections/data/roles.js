// The uploaded tensors' roles: the engine proposes which tensor is the attention, the keys and
// the values (kvlab::upload::Assignment), the selects show it with its reasons, a choice is
// checked before it is used, and "Use" makes it the data.

import { t, fill } from '../../i18n.js';
import { $ } from '../../lib/dom.js';
import { app } from '../../app/store.js';
import { request, busyWhile } from '../../app/requests.js';
import { errorSlot, reportError } from '../../app/errors.js';
import { showUploadWarnings } from '../../app/warnings.js';
import { ALL, chartsOf } from '../../app/registry.js';
import { drawSpec } from '../../app/schedule.js';
import { show } from '../../app/apply.js';
import { shapeText } from './describe.js';
import { uploads } from './files.js';
import { savedUpload } from './saved.js';

/** Every tensor listed, in upload order: `{id, label}` (`id`: `file::tensor`, as the engine names it). */
function listedTensors() {
  return [...document.querySelectorAll('#file-list li[data-tensors]')].flatMap((li) => JSON.parse(li.dataset.tensors)
    .map((x) => ({ id: `${li.dataset.file}::${x.name}`, label: `${x.name} [${x.shape.join(', ')}]` })));
}

const ROLE_SELECTS = { attention: '#up-attention', keys: '#up-keys', values: '#up-values' };

/** The role selects list the tensors listed, each after "none (generated)"; `pick` sets them. */
export function fillRoleSelects(pick) {
  const tensors = listedTensors();
  for (const [role, id] of Object.entries(ROLE_SELECTS)) {
    const sel = $(id);
    const none = new Option(t(app.lang, 'data.none'), '');
    none.dataset.i18n = 'data.none';
    sel.replaceChildren(none, ...tensors.map((x) => new Option(x.label, x.id)));
    sel.value = pick?.[role] ?? '';
  }
  $('#upload-choice').hidden = tensors.length === 0;
}

/**
 * After the list changed: the roles the engine proposes (kvlab::upload::Assignment) go into the
 * selects, with their reasons in one line, and the choice is checked before it is used.
 */
export async function assignRoles() {
  if (!listedTensors().length) {
    fillRoleSelects(null);
    app.assignment = null;
    showRoles();
    showUploadWarnings(null, []);
    return;
  }
  const assignment = await request('assignRoles', {});
  app.assignment = { ...assignment, manual: new Set() };
  fillRoleSelects(assignment);
  showRoles();
  await checkChoice();
}

/** The assignment's reasons and what it could not settle, in the page's language (#upload-roles). */
export function showRoles() {
  const el = $('#upload-roles');
  const a = app.assignment;
  if (!a) {
    el.hidden = true;
    return;
  }
  const tr = (key) => t(app.lang, key);
  const lines = a.reasons.map((r) => {
    const role = tr(`roles.${r.role}`);
    const manual = a.manual.has(r.role);
    const id = manual ? $(ROLE_SELECTS[r.role]).value : r.id;
    if (!id) return fill(tr(manual ? 'roles.none.manual' : 'roles.none'), { role });
    if (manual) {
      const x = listedTensors().find((x) => x.id === id);
      return fill(tr('roles.manual'), { role, label: x?.label ?? id });
    }
    return fill(tr('roles.line'), {
      role,
      name: r.name,
      shape: shapeText(r.shape),
      why: fill(tr(`roles.why.${r.why}`), { role, tokens: r.tokens }),
    });
  });
  if (a.tokensFrom) lines.push(fill(tr('roles.tokens'), { file: a.tokensFrom }));
  const notes = a.ambiguities.map((x) => fill(tr(`roles.amb.${x.kind}`), { ...x, role: x.role && tr(`roles.${x.role}`) }));
  el.replaceChildren();
  const roles = document.createElement('span');
  roles.className = 'roles';
  roles.textContent = lines.join(' · ');
  el.append(roles);
  if (notes.length) {
    const amb = document.createElement('span');
    amb.className = 'ambiguous';
    amb.textContent = `${tr('roles.ambiguous')} ${notes.join(' · ')}`;
    el.append(amb);
  }
  el.hidden = false;
}

/** The choice the upload controls show, as the engine takes it. */
function uploadChoice() {
  return {
    attention: $('#up-attention').value,
    keys: $('#up-keys').value,
    values: $('#up-values').value || null,
    headMode: $('#up-headmode').value,
    head: Number($('#up-head').value) || 0,
    layer: Number($('#up-layer').value) || 0,
    kvHead: Number($('#up-kvhead').value) || 0,
    normalise: $('#up-normalise').checked,
  };
}

/**
 * Checks the choice before it is used: its warnings (rows that do not sum to 1) show next to
 * the files and go when fixed (normalised, another tensor), a refusal shows at "Use", and only
 * the controls that apply to the chosen shapes are shown (heads for [H, S, T] attention, layer
 * and KV head for [L, H, T, d] and [H, T, d] K/V, normalising when attention is chosen).
 */
export async function checkChoice() {
  const use = $('#up-use');
  const choice = uploadChoice();
  let about;
  try {
    ({ about } = await request('checkChoice', { choice }));
  } catch (e) {
    showUploadWarnings(null, []);
    reportError(use, e);
    return;
  }
  errorSlot(use).hidden = true;
  use.removeAttribute('aria-invalid');
  app.shownErrors.delete(errorSlot(use));
  showUploadWarnings(about, about.warnings.map((w) => w.english ?? ''));
  if (app.assignment && app.assignment.tokensFrom !== about.tokensFrom) {
    app.assignment.tokensFrom = about.tokensFrom;
    showRoles();
  }
  const kvs = [about.keys, about.values].filter(Boolean);
  const shown = {
    '#up-headmode': about.attention?.heads != null,
    '#up-head': about.attention?.heads != null && choice.headMode === 'head',
    '#up-layer': kvs.some((k) => k.layers != null),
    '#up-kvhead': kvs.some((k) => k.heads != null),
    '#up-normalise': about.attention != null,
  };
  for (const [id, on] of Object.entries(shown)) $(id).closest('.control').hidden = !on;
}

/** A role select or a shape control changed: the choice is checked again. */
function onChoiceChanged(control) {
  const role = Object.entries(ROLE_SELECTS).find(([, id]) => $(id) === control)?.[0];
  if (role && app.assignment) {
    app.assignment.manual.add(role);
    showRoles();
  }
  return busyWhile(checkChoice);
}

/** "Use": the choice becomes the data (kept for the next visit). */
async function onUse(button) {
  const choice = uploadChoice();
  try {
    const reply = await request('useUploaded', {
      choice, keep: { lang: app.lang, embed: app.good.embed }, draw: drawSpec(chartsOf(ALL)),
    });
    const used = new Set([choice.attention, choice.keys, choice.values].filter(Boolean).map((v) => v.split('::')[0]));
    const files = [...used].map((name) => ({ name, bytes: uploads.get(name) })).filter((f) => f.bytes);
    savedUpload.put({ files, choice }).catch(() => {}); // storage may be blocked: the view still works
    app.upload = { choice, about: reply.about, files, tokens: reply.tokens };
    errorSlot(button).hidden = true;
    showUploadWarnings(reply.about, reply.result.warnings);
    show(reply.settings, reply.figures, reply.query, true);
  } catch (e) {
    reportError(button, e);
  }
}

/** Wires the role selects, the shape controls and "Use". */
export function wireRoles() {
  for (const id of [...Object.values(ROLE_SELECTS), '#up-headmode', '#up-head', '#up-layer', '#up-kvhead', '#up-normalise']) {
    $(id).addEventListener('change', (ev) => onChoiceChanged(ev.target));
  }
  $('#up-use').addEventListener('click', (ev) => onUse(ev.target));
}
