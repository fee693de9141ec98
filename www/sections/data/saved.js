// Uploaded data survives a reload: the files and the tensor choice are kept in IndexedDB (in
// this browser only) until "Back to generated data" or "Reset".

import { t } from '../../i18n.js';
import { $ } from '../../lib/dom.js';
import { app } from '../../app/store.js';
import { request, busyWhile } from '../../app/requests.js';
import { reportError } from '../../app/errors.js';
import { showWarnings, showUploadWarnings } from '../../app/warnings.js';
import { ALL, chartsOf } from '../../app/registry.js';
import { drawSpec } from '../../app/schedule.js';
import { show } from '../../app/apply.js';
import { uploads, addFile } from './files.js';
import { fillRoleSelects, checkChoice } from './roles.js';

function idbRequest(mode, action) {
  return new Promise((resolve, reject) => {
    const open = indexedDB.open('kvlab', 1);
    open.onupgradeneeded = () => open.result.createObjectStore('upload');
    open.onerror = () => reject(open.error);
    open.onsuccess = () => {
      const db = open.result;
      const tx = db.transaction('upload', mode);
      const req = action(tx.objectStore('upload'));
      tx.oncomplete = () => { db.close(); resolve(req?.result); };
      tx.onerror = () => { db.close(); reject(tx.error); };
    };
  });
}

/**
 * The upload saved for the next visit (IndexedDB). `localStorage['kvlab.upload']` says whether
 * there is one ('1') or not ('0'), so a visit opens (and on a first visit creates) the database
 * only when it has something to restore. (Opening it took 100-250 ms of a first visit here,
 * alongside the engine's start; the first view did not come measurably sooner without it.)
 * Without the flag (a browser that saved an upload before the flag existed) the page starts as
 * if nothing were saved and looks afterwards (restoreLegacyUpload).
 */
export const savedUpload = {
  put: (value) => idbRequest('readwrite', (s) => s.put(value, 'current')).then((r) => { setSavedFlag('1'); return r; }),
  get: () => idbRequest('readonly', (s) => s.get('current')),
  clear: () => idbRequest('readwrite', (s) => s.delete('current')).then((r) => { setSavedFlag('0'); return r; }),
  flag: () => {
    try {
      return window.localStorage.getItem('kvlab.upload');
    } catch {
      return null; // storage blocked: IndexedDB is then most likely blocked too
    }
  },
};

function setSavedFlag(value) {
  try {
    window.localStorage.setItem('kvlab.upload', value);
  } catch {
    // storage may be blocked
  }
}

/**
 * A browser without the flag may hold an upload saved before the flag existed: once the first
 * view is up, look, and put it back as a load would have.
 */
export function restoreLegacyUpload() {
  // (busy until it is known: the view may change)
  return busyWhile(async () => {
    const saved = await savedUpload.get().catch(() => null);
    setSavedFlag(saved?.files?.length ? '1' : '0');
    if (!saved?.files?.length || app.upload) return;
    const reply = await restoreUpload(saved, { settings: app.good });
    if (!reply || reply.stopped) return;
    await request('draw', { draw: drawSpec(chartsOf(ALL)) });
    show(reply.settings, reply.figures, reply.query, false);
  }).catch((e) => reportError(null, e));
}

/**
 * Puts back the uploaded data of the last visit (`saved`, from `savedUpload.get()`); `first` is
 * init's reply. Returns the engine's reply for it; a failure forgets it and says so (null).
 */
export async function restoreUpload(saved, first) {
  if (!saved?.files?.length) return null;
  try {
    for (const f of saved.files) await addFile(f.name, f.bytes);
    fillRoleSelects(saved.choice);
    const reply = await request('useUploaded', { choice: saved.choice, keep: { lang: app.lang, embed: first.settings.embed } });
    app.upload = { choice: saved.choice, about: reply.about, files: saved.files, tokens: reply.tokens };
    showUploadWarnings(reply.about, reply.result.warnings);
    // (only the controls the restored shapes use are shown)
    await checkChoice();
    return reply;
  } catch (e) {
    savedUpload.clear().catch(() => {});
    if (e.stopped) {
      // Stop pressed while restoring: the fresh worker has none of the files, so the page
      // forgets them too, and the start begins the generated view again.
      uploads.clear();
      $('#file-list').replaceChildren();
      fillRoleSelects(null);
      showWarnings('#upload-warnings', [t(app.lang, 'progress.stopped.upload')]);
      return { stopped: true };
    }
    showWarnings('#upload-warnings', [e.message ?? String(e)]);
    return null;
  }
}
