// Stop: ends a computation that takes too long by replacing the worker with a fresh one, which
// gets the last good view back.

import { app } from './store.js';
import { ALL, chartsOf } from './registry.js';
import { request, busyWhile } from './requests.js';
import { clearErrors, reportError } from './errors.js';
import { showNote } from './warnings.js';
import { drawSpec, freshCanvases } from './schedule.js';
import { show } from './apply.js';
import { uploads } from '../sections/data/files.js';

/**
 * Stop: the worker is replaced by a fresh one, which gets the last good view back (its
 * settings, and the uploaded files if the data was uploaded) on new canvases (a canvas handed
 * to a worker cannot be handed again). Before the first view, the start begins again with the
 * default view.
 */
export function stop() {
  if (!app.client?.restart()) return;
  if (!app.ready) return; // start.js sees its request stopped and falls back to the defaults
  if (app.frame) window.cancelAnimationFrame(app.frame);
  app.frame = 0;
  app.pending.clear();
  app.inputAt = null;
  freshCanvases();
  busyWhile(async () => {
    let reply = await request('init', { settings: app.good, lang: app.lang });
    if (app.upload) {
      // (the files in use first, then the rest of the list: a pick made since may have
      // replaced the list)
      for (const { name, bytes } of app.upload.files) await request('loadFile', { name, bytes });
      reply = await request('useUploaded', { choice: app.upload.choice, keep: { lang: app.lang, embed: app.good.embed } });
      const inUse = new Set(app.upload.files.map((f) => f.name));
      for (const [name, bytes] of uploads) if (!inUse.has(name)) await request('loadFile', { name, bytes });
    } else {
      for (const [name, bytes] of uploads) await request('loadFile', { name, bytes });
    }
    await app.client.attach(app.canvases);
    await request('draw', { draw: drawSpec(chartsOf(ALL)) });
    clearErrors();
    show(reply.settings, reply.figures, await request('toQuery', { settings: reply.settings }), false);
    showNote('progress.stopped');
  }).catch((e) => reportError(null, e));
}
