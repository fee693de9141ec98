// The link and the view kept in this browser: the address holds the view's query (the engine
// writes it from Rust's table of settings), recorded once the controls rest; localStorage
// keeps the last view for a bare address.

import { app } from './store.js';
import { markBusy } from './requests.js';

/**
 * The query a visit opens on: the address's, or with none the last view from this browser
 * (`restored` says which).
 */
export function startQuery() {
  const query = window.location.search;
  if (query) return { query, restored: false };
  try {
    const kept = window.localStorage.getItem('kvlab.query') ?? '';
    return { query: kept, restored: kept !== '' };
  } catch {
    return { query: '', restored: false };
  }
}

/**
 * The link's query of the view whose settings' query is `q` (the engine's). A view on uploaded
 * data says so in its link, which cannot carry the files (`data=upload`: the engine's parser
 * ignores the key; a page opened on it says what it shows instead). The model's data is
 * carried whole: its prompt, layer and head (`data=model`).
 */
export function linkQuery(q = app.query) {
  if (!app.upload) return q;
  const params = new URLSearchParams(q);
  const model = app.upload.model;
  params.set('data', model ? 'model' : 'upload');
  if (model) {
    params.set('prompt', model.prompt);
    params.set('model_layer', String(model.layer));
    params.set('model_head', String(model.head));
    // (section 5's fact, once asked)
    const fact = app.needleAsk;
    if (fact) {
      params.set('fact_name', fact.key);
      params.set('fact_number', fact.value);
      params.set('fact_distance', String(fact.distance));
      params.set('fact_asked', fact.before ? 'before' : 'after');
    }
  }
  return params.toString();
}

/**
 * The link that shows section `section` alone (`?embed=`, for an iframe) with the view's
 * settings: the page's own address with the view's query.
 */
export function embedLink(section) {
  const params = new URLSearchParams(linkQuery());
  params.set('embed', section);
  return `${window.location.origin}${window.location.pathname}?${params}`;
}

/** Records the view in the URL (push on committed changes, replace while dragging). */
export function recordUrl(push, q = app.query) {
  app.query = q;
  const shown = linkQuery(q);
  const url = `${window.location.pathname}${shown ? `?${shown}` : ''}${window.location.hash}`;
  if (url !== `${window.location.pathname}${window.location.search}${window.location.hash}`) {
    if (push) window.history.pushState(null, '', url);
    else window.history.replaceState(null, '', url);
  }
  try {
    // An embedded section must not change the main page's remembered view.
    if (!app.good.embed) window.localStorage.setItem('kvlab.query', q);
  } catch {
    // storage may be blocked; the URL still holds the state
  }
}

/** Forgets the view kept in this browser (Reset). */
export function forgetKeptView() {
  try {
    window.localStorage.removeItem('kvlab.query');
  } catch {
    // storage may be blocked: nothing was kept
  }
}

/** Query `q` (the engine's, of settings sent in some language) in the page's language. */
export function inLanguage(q) {
  const params = new URLSearchParams(q);
  if ((params.get('lang') ?? 'en') === app.lang) return q;
  if (app.lang === 'en') params.delete('lang');
  else params.set('lang', app.lang);
  return params.toString();
}

/**
 * Records the URL (push when a committed change is among those shown) two frames after the last
 * update; each update starts the count again. `app.urlTimer`: -1 while counting frames, a timer
 * id once the task is posted, 0 when nothing is to be recorded.
 */
export function scheduleUrl() {
  app.urlSeq += 1;
  const seq = app.urlSeq;
  if (app.urlTimer > 0) clearTimeout(app.urlTimer);
  app.urlTimer = -1;
  let left = 2;
  const tick = () => {
    if (seq !== app.urlSeq) return; // a later update counts again
    if (--left > 0) {
      window.requestAnimationFrame(tick);
      return;
    }
    app.urlTimer = setTimeout(() => {
      app.urlTimer = 0;
      const push = app.urlCommit;
      app.urlCommit = false;
      recordUrl(push, app.query);
      markBusy();
    }, 0);
  };
  window.requestAnimationFrame(tick);
}
