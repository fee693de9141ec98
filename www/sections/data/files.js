// The uploaded files' list: files read (the page keeps their bytes, to replay them to a fresh
// worker after Stop), listed with their summary in the page's language, removed one by one.

import { TEXT, t, fill } from '../../i18n.js';
import { $ } from '../../lib/dom.js';
import { app } from '../../app/store.js';
import { request, busyWhile } from '../../app/requests.js';
import { errorSlot, showError, errorText, reportError, describeSkipped } from '../../app/errors.js';
import { describeFile } from './describe.js';
import { assignRoles } from './roles.js';

/** The largest file read (bytes); a larger one is refused before it is read. */
const MAX_UPLOAD = 256 * 1024 * 1024;

/** File name -> bytes, as read: every file listed. */
export const uploads = new Map();

/** Loads a file into the page's list of uploaded files (and remembers its bytes). */
export async function addFile(name, buf) {
  const summary = await request('loadFile', { name, bytes: buf });
  uploads.set(name, buf);
  // A file uploaded again under its name replaces the one listed.
  for (const old of document.querySelectorAll('#file-list li')) {
    if (old.dataset.file === summary.file || old.dataset.of === summary.file) old.remove();
  }
  const list = $('#file-list');
  const li = document.createElement('li');
  // In the page's language; the engine's English line stays in data-value (as figures' do).
  li.dataset.file = summary.file;
  li.dataset.about = JSON.stringify(summary.about);
  li.dataset.tensors = JSON.stringify(summary.tensors);
  li.dataset.value = summary.summary;
  const text = document.createElement('span');
  text.textContent = describeFile(summary.file, summary.about);
  const remove = document.createElement('button');
  remove.type = 'button';
  remove.className = 'remove';
  remove.textContent = t(app.lang, 'data.remove');
  remove.setAttribute('aria-label', fill(t(app.lang, 'data.remove.file'), { file: summary.file }));
  remove.addEventListener('click', () => busyWhile(() => removeFile(summary.file)).catch((e) => reportError(remove, e)));
  li.append(text, remove);
  list.append(li);
  for (const [i, s] of summary.skipped.entries()) {
    const sk = document.createElement('li');
    // (in the page's language from the reason's fields; the module's English in data-value)
    const why = summary.skippedWhy?.[i];
    sk.dataset.value = s;
    sk.dataset.of = summary.file;
    if (why) sk.dataset.why = JSON.stringify({ ...why, file: summary.file });
    sk.textContent = describeSkipped(s, why && { ...why, file: summary.file });
    sk.className = 'skipped';
    list.append(sk);
  }
}

/** The list worded again in the page's language (a language switch). */
export function rewordFiles() {
  for (const li of document.querySelectorAll('#file-list li[data-about]')) {
    li.querySelector('span').textContent = describeFile(li.dataset.file, JSON.parse(li.dataset.about));
    const remove = li.querySelector('button.remove');
    remove.textContent = t(app.lang, 'data.remove');
    remove.setAttribute('aria-label', fill(t(app.lang, 'data.remove.file'), { file: li.dataset.file }));
  }
  for (const li of document.querySelectorAll('#file-list li[data-why]')) {
    li.textContent = describeSkipped(li.dataset.value, JSON.parse(li.dataset.why));
  }
}

/** Reads picked files (one busy span, until their messages and choices are on screen). */
export function onFiles(input) {
  return busyWhile(() => readFiles(input));
}

/**
 * Files picked with "Upload files" replace those listed (once one of them is read: a pick whose
 * every file is refused leaves the list as it was); "Add files" adds to them.
 */
async function readFiles(input) {
  const slot = errorSlot(input);
  slot.hidden = true;
  for (const i of document.querySelectorAll('#file, #file-add')) i.removeAttribute('aria-invalid'); // (the last pick's refusal goes with its message)
  const errors = []; // every refused file keeps its own message (worded again on a language switch)
  const picked = [...input.files];
  const names = new Set(picked.map((f) => f.name));
  let replace = input.id === 'file';
  for (const file of picked) {
    if (file.size > MAX_UPLOAD) {
      const textFields = { file: file.name, bytes: file.size };
      errors.push({ textKey: 'upload.aboveLimit', textFields, message: fill(TEXT.en['upload.aboveLimit'], textFields) });
      continue;
    }
    try {
      const buf = new Uint8Array(await file.arrayBuffer());
      await addFile(file.name, buf);
      if (replace) {
        replace = false;
        for (const li of [...document.querySelectorAll('#file-list li[data-file]')]) {
          if (!names.has(li.dataset.file)) await dropListed(li.dataset.file);
        }
      }
    } catch (e) {
      errors.push(e?.refusal ? e : { message: e?.message ?? String(e) });
    }
  }
  // (the same files may be picked again: a change event needs the input emptied)
  input.value = '';
  await assignRoles();
  if (errors.length) {
    const all = { list: errors, message: errors.map((e) => e.message).join('\n') };
    showError(input, errorText(all), all);
  }
}

/** Forgets a listed file, in the engine and on the page (the data in use stays). */
async function dropListed(name) {
  await request('dropFiles', { name });
  uploads.delete(name);
  for (const li of document.querySelectorAll('#file-list li')) {
    if (li.dataset.file === name || li.dataset.of === name) li.remove();
  }
}

/** Remove: forgets one listed file and proposes the roles again. */
async function removeFile(name) {
  await dropListed(name);
  await assignRoles();
  $('#file').focus();
}
