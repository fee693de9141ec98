// The language switch: every text the page wrote is worded again from what it kept (fields,
// not sentences), the charts are redrawn with their labels, and the link says the language.

import { applyLanguage, chartLabels } from '../i18n.js';
import { $ } from '../lib/dom.js';
import { render, writeView } from '../sections/index.js';
import { rewordFiles } from '../sections/data/files.js';
import { showRoles } from '../sections/data/roles.js';
import { app } from './store.js';
import { ALL, chartsOf } from './registry.js';
import { request, busyWhile, writeStage } from './requests.js';
import { reportError, rewordErrors } from './errors.js';
import { rewordWarnings } from './warnings.js';
import { redraw } from './schedule.js';
import { recordUrl } from './url.js';
import { paintAhead } from './first-view.js';

/** Switches the page to `lang` ('en' or 'zh'), remembered in this browser. */
export async function setLanguage(lang) {
  app.lang = lang;
  app.labels = chartLabels(lang);
  applyLanguage(lang);
  try {
    window.localStorage.setItem('kvlab.lang', lang);
  } catch {
    // storage may be blocked: the link still says the language
  }
  rewordFiles();
  showRoles();
  rewordWarnings();
  if (!$('#progress').hidden) writeStage();
  rewordErrors();
  if (app.ahead && !app.figures) {
    // (the engine has no view yet: the one drawn ahead, worded again)
    app.good.lang = lang;
    app.settings.lang = lang;
    writeView(app.ahead.figures, ALL);
    paintAhead();
  } else if (app.client && app.good) {
    app.good.lang = lang;
    app.settings.lang = lang;
    render(app.figures, ALL);
    await busyWhile(async () => {
      await redraw(chartsOf(ALL));
      try {
        recordUrl(false, await request('toQuery', { settings: app.good }));
      } catch (e) {
        reportError(null, e);
      }
    });
  }
}
