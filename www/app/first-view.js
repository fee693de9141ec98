// The default view drawn ahead: `cargo xtask dist` writes init's reply for an empty query and
// the first screen's budget charts (SVG per language and theme) into index.html's
// `#first-view` block, so a first visit sees a meaningful page before the engine has started.
// Its controls look live meanwhile: what a learner sets is kept and applied once they are.

import { app } from './store.js';

/**
 * The default view drawn ahead (the `#first-view` block), when the page opens on the default
 * view (`query` has no key but `lang`); otherwise null.
 */
export function viewAhead(query) {
  const block = document.getElementById('first-view');
  const params = new URLSearchParams(query);
  params.delete('lang');
  if (!block || [...params.keys()].length) return null;
  try {
    return JSON.parse(block.textContent);
  } catch {
    return null; // (a damaged block: the engine's view comes a little later)
  }
}

/**
 * The controls of the view drawn ahead look live before they are wired (the engine's first
 * view wires them, 200–300 ms later on a cold load). What a learner sets meanwhile is kept, by
 * key, and applied once the page is ready (applyEarlyInput), as a change made then. A control
 * changed again after the wiring goes its normal way, and its early value is forgotten.
 */
export function keepEarlyInput() {
  const note = (e) => {
    const c = e.target;
    if (!(c instanceof Element) || !c.matches('[data-key]')) return;
    if (app.presented) app.early.delete(c.dataset.key);
    else app.early.set(c.dataset.key, c.value);
  };
  document.addEventListener('input', note, true);
  document.addEventListener('change', note, true);
  app.stopKeepingEarly = () => {
    document.removeEventListener('input', note, true);
    document.removeEventListener('change', note, true);
  };
}

/**
 * The values set before the controls were wired (keepEarlyInput), each applied as a change
 * now by `apply(control)`.
 */
export function applyEarlyInput(apply) {
  app.stopKeepingEarly?.();
  app.stopKeepingEarly = null;
  for (const [key, value] of app.early) {
    const c = document.querySelector(`[data-key="${key}"]`);
    if (!c) continue;
    c.value = value;
    apply(c);
  }
  app.early.clear();
}

/**
 * Puts the charts drawn ahead, in the page's language and theme, behind their canvases (a
 * canvas is transparent until the engine draws on it), scaled to fit. style.css leaves them
 * out on narrow screens, where they would be scaled too small to read (the engine's charts
 * come soon after); nothing here reads the layout, which is not done yet.
 */
export function paintAhead() {
  if (!app.ahead) return;
  const charts = app.ahead.charts[app.lang]?.[app.dark ? 'dark' : 'light'] ?? {};
  for (const [name, svg] of Object.entries(charts)) {
    const canvas = app.canvases[name];
    if (!canvas) continue;
    canvas.classList.add('ahead');
    canvas.style.setProperty('--ahead', `url("data:image/svg+xml,${encodeURIComponent(svg)}")`);
  }
}

/** The engine's charts are drawn: the charts drawn ahead go. */
export function dropAhead() {
  if (!app.ahead) return;
  app.ahead = null;
  for (const canvas of document.querySelectorAll('canvas.ahead')) {
    canvas.classList.remove('ahead');
    canvas.style.removeProperty('--ahead');
  }
}
