// kvlab page: boots. It holds no math: every number shown comes from the Rust crate, which runs
// with its data in a Web Worker (engine.js, worker.js; client.js has the fallback when a
// browser cannot draw from a worker), so the page never freezes.
//
// The rooms (each a module of one concern): app/store.js the state; app/controls.js the
// controls, read and written as Rust's table of settings says (fields.js); app/update.js the
// update transaction and app/apply.js what its replies do; app/schedule.js what is drawn when;
// app/requests.js the engine's requests and the busy marks; app/url.js the link; app/errors.js
// and app/warnings.js the messages; app/perf.js the performance timeline; app/first-view.js
// the view drawn ahead; app/start.js the cold start; sections/ one writer per section of the
// note (sections/index.js lists them), sections/data/ the uploads.
//
// Here: the link and storage are read, the page's language set, the controls ranged, the
// charts observed, and the start begun.

import { initialLanguage, applyLanguage, chartLabels } from './i18n.js';
import { $ } from './lib/dom.js';
import { app } from './app/store.js';
import { startQuery } from './app/url.js';
import { observe } from './app/schedule.js';
import { rangeControls } from './app/controls.js';
import { STEPS } from './app/requests.js';
import { setLanguage } from './app/language.js';
import { stop } from './app/stop.js';
import { start } from './app/start.js';

// URL first; with no query, the last view from this browser.
const { query, restored } = startQuery();
app.restored = restored;
// Section 5 alone (`?embed=model`) carries its B, bits and method: put in place before the
// controls are worded, ranged and bound, and only then (elsewhere one control has one label).
const alone = $('#model-embed-template');
if (new URLSearchParams(query).get('embed') === 'model') alone.replaceWith(alone.content.cloneNode(true));
app.dark = window.matchMedia('(prefers-color-scheme: dark)').matches;
// Figures are not live regions: an <output> is one (role status) by default, and a screen
// reader would read out dozens of them at every move of a slider (#status says what happens).
for (const o of document.querySelectorAll('output')) o.setAttribute('aria-live', 'off');
const linked = new URLSearchParams(window.location.search);
app.linkOnUpload = linked.get('data') === 'upload';
app.lang = initialLanguage(new URLSearchParams(query).get('lang'));
app.labels = chartLabels(app.lang);
applyLanguage(app.lang);
// The controls' ranges and the progress bar's steps are Rust's (fields.js): none in the HTML.
rangeControls();
$('#progress-bar').max = STEPS.length;
// The language switch and Stop work from the start, also while a big first computation runs.
$('#lang').addEventListener('click', () => setLanguage(app.lang === 'en' ? 'zh' : 'en'));
$('#stop').addEventListener('click', () => stop());
observe();
// (the address's own parameters are read now: the first view's URL replaces the address
// before the model can run)
start(query, linked);
