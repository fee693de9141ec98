// The page's buttons and the browser's own events (Back, the colour scheme): Reset, Share,
// the exports, each chart's PNG, the upload's and the model's buttons.

import { t } from '../i18n.js';
import { $, download } from '../lib/dom.js';
import { onFiles } from '../sections/data/files.js';
import { wireRoles } from '../sections/data/roles.js';
import { savedUpload } from '../sections/data/saved.js';
import { wireModel } from '../sections/model-run.js';
import { app } from './store.js';
import { ALL, NEEDS_COMPARISON, chartsOf } from './registry.js';
import { request, busyWhile } from './requests.js';
import { reportError } from './errors.js';
import { showWarnings } from './warnings.js';
import { redraw, completeComparison, drawStale } from './schedule.js';
import { applyAll, useGenerated } from './apply.js';
import { forgetKeptView, embedLink } from './url.js';
import { paintAhead } from './first-view.js';

/** Wires every button and the browser's events (once, with the controls). */
export function wireButtons() {
  $('#reset').addEventListener('click', async () => {
    forgetKeptView();
    savedUpload.clear().catch(() => {});
    await busyWhile(async () => {
      const fresh = { ...(await request('defaults', {})), lang: app.lang };
      await useGenerated(fresh, true);
      // (what was said of the link opened, or of a stop, is about a view that is gone)
      showWarnings('#url-warnings', []);
    }).catch((e) => reportError(null, e));
  });
  $('#share').addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(window.location.href);
      $('#share').textContent = t(app.lang, 'share.done');
    } catch {
      $('#share').textContent = window.location.href;
    }
    setTimeout(() => { $('#share').textContent = t(app.lang, 'share'); }, 2000);
  });
  // Each section's own ?embed= link with the view's settings: copied, and shown beside the
  // button (to select by hand where the clipboard is refused) until the next copy.
  for (const b of document.querySelectorAll('[data-embed]')) {
    b.addEventListener('click', async () => {
      const link = embedLink(b.dataset.embed);
      const out = b.parentElement.querySelector('.embed-url');
      out.textContent = link;
      out.dataset.value = link;
      out.hidden = false;
      try {
        await navigator.clipboard.writeText(link);
        b.textContent = t(app.lang, 'embed.copied');
      } catch {
        b.textContent = t(app.lang, 'embed.select');
      }
      setTimeout(() => { b.textContent = t(app.lang, 'embed.copy'); }, 2000);
    });
  }
  const exportText = (op, name, type) => async () => {
    try {
      download(name, new Blob([await request(op, {})], { type }));
    } catch (e) {
      reportError(null, e);
    }
  };
  $('#export-csv').addEventListener('click', exportText('exportCsv', 'kvlab-selection.csv', 'text/csv'));
  $('#export-json').addEventListener('click', exportText('exportJson', 'kvlab-view.json', 'application/json'));
  for (const b of document.querySelectorAll('[data-png]')) {
    b.addEventListener('click', async () => {
      try {
        const name = b.dataset.png;
        // (a chart still waiting for the catch-up is brought up to date first)
        if (app.enginePending && NEEDS_COMPARISON.has(name)) await completeComparison([name]);
        else if (app.stale.has(name)) await drawStale(name);
        const blob = await request('png', { name });
        if (blob) download(`kvlab-${b.dataset.png}.png`, blob);
      } catch (e) {
        reportError(null, e);
      }
    });
  }
  $('#file').addEventListener('change', (ev) => onFiles(ev.target));
  $('#file-add').addEventListener('change', (ev) => onFiles(ev.target));
  wireRoles();
  wireModel();
  $('#use-generated').addEventListener('click', () => {
    savedUpload.clear().catch(() => {});
    useGenerated(app.good, true);
  });
  window.addEventListener('popstate', () => busyWhile(async () => {
    const parsed = await request('parseQuery', { query: window.location.search });
    await applyAll({ ...parsed.settings, lang: app.lang }, false);
  }).catch((e) => reportError(null, e)));
  window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', (e) => {
    app.dark = e.matches;
    paintAhead();
    if (app.figures) redraw(chartsOf(ALL));
  });
}
