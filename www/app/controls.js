// The controls: every element with `data-key` is one setting of Rust's table (FIELDS), read and
// written the same way whatever its key. A number being typed is a value only once committed;
// a slider and the number field beside it (and an <output for> beside it) show each other's
// value; a control marked `data-mirror` shows its value on <body> too, for the style sheet.

import { t, fill } from '../i18n.js';
import { $ } from '../lib/dom.js';
import { grouped } from '../lib/format.js';
import { figure } from '../sections/common.js';
import { app } from './store.js';
import { NUMERIC } from './registry.js';

/** Every control of the page. */
export const controls = (root = document) => root.querySelectorAll('[data-key]');

/** The setting a control's value stands for (numbers as numbers, `auto` as null). */
export function settingFromControl(control) {
  const key = control.dataset.key;
  const raw = control.value;
  if (key === 'channel') return raw === 'auto' ? null : Number(raw);
  if (NUMERIC.has(key)) {
    // What is not a whole number goes as typed: the engine's check names it (an empty field
    // is not 0, nor 2.5 silently 3).
    const n = Number(raw);
    return raw.trim() !== '' && Number.isSafeInteger(n) ? n : raw;
  }
  return raw;
}

/** Shows setting value `v` in control `c` and its echoes (not in a number being typed there). */
export function writeControl(c, v) {
  if (c === app.editing && c === document.activeElement) return;
  const text = c.dataset.key === 'channel' ? (v === null || v === undefined ? 'auto' : String(v)) : String(v);
  c.value = text;
  // (the setting, not `c.value`: a slider clamps to its range, B = 800 shown at 512, and the
  // field beside it says 800)
  echo(c, text, (o) => !(o === app.editing && o === document.activeElement));
}

/**
 * Shows control `c`'s value `value` where it is echoed: the number field beside a slider (or
 * the slider beside a field) when `also(other)` allows, an <output for> it, and <body> when it
 * is mirrored there.
 */
function echo(c, value, also = () => true) {
  const key = c.dataset.key;
  for (const o of document.querySelectorAll(`[data-key="${key}"]`)) {
    if (o !== c && also(o)) o.value = value;
  }
  if (c.id) for (const o of document.querySelectorAll(`output[for="${c.id}"]`)) o.textContent = value;
  if (c.hasAttribute('data-mirror')) document.body.dataset[key] = value;
}

/** Shows settings `s` in every control. */
export function writeControls(s) {
  for (const c of controls()) writeControl(c, s[c.dataset.key]);
}

/**
 * Slider ranges follow the data and the engine: B and r up to T, w up to S, channels 0..d-1;
 * Bits from the scheme's fewest, B from the method's smallest (StreamingLLM's sinks). A slider
 * never rests on a value the engine would refuse; its number field beside it gets the same range.
 */
export function fitRanges(f) {
  const T = f.data.tokens;
  const setRange = (key, min, max) => {
    for (const el of document.querySelectorAll(`[data-key="${key}"]`)) {
      if (el.max === String(max) && el.min === String(min)) continue;
      el.min = String(min);
      el.max = String(max);
      // A slider's value was clamped to its old range when written (Reset, Back, a link: B =
      // 800 shown at 512): the value in use again, now that it fits.
      const want = app.settings?.[key];
      if (el.type === 'range' && want !== undefined) writeControl(el, want);
    }
  };
  setRange('bits', f.quant.bitsMin, 16);
  setRange('budget', f.select.budgetMin, T);
  setRange('recent', 0, T);
  setRange('window', 1, f.data.steps);
  setRange('future', 0, Math.max(0, f.data.steps - 1));
  figure('budget-min', f.select.budgetMin,
    fill(t(app.lang, 'select.budget-min'), { sinks: grouped(f.select.sinkCount), min: grouped(f.select.budgetMin) }));
  const ch = $('#channel');
  if (ch.options.length !== f.data.channels + 1) {
    // (the setting in use: a channel of a link was not an option yet when the controls were
    // written, and the select fell back to auto)
    const set = app.settings?.channel;
    const keep = set === null || set === undefined ? ch.value : String(set);
    ch.replaceChildren();
    const auto = new Option(t(app.lang, 'quant.channel.auto'), 'auto');
    auto.dataset.i18n = 'quant.channel.auto';
    ch.add(auto);
    for (let j = 0; j < f.data.channels; j += 1) ch.add(new Option(String(j), String(j)));
    ch.value = [...ch.options].some((o) => o.value === keep) ? keep : 'auto';
  }
  if ($('#use-generated').hidden !== f.data.generated) $('#use-generated').hidden = f.data.generated;
  // The generator's controls do nothing to uploaded data: off while it is in use.
  for (const c of document.querySelectorAll('#data > .controls [data-key]')) {
    if (c.disabled === f.data.generated) c.disabled = !f.data.generated;
  }
}

/**
 * Wires every control under `root`: `onChange(control, commit)` when its value changes (a
 * slider or a select at once, `commit` false while it moves; a number typed only once
 * committed). The control's echoes follow its value first.
 */
export function bindControls(root, onChange) {
  const changed = (c, commit) => {
    echo(c, c.value);
    onChange(c, commit);
  };
  for (const c of controls(root)) {
    // A number being typed is used once it is committed (Enter, leaving the field, or its
    // arrows, which commit at once): the keystrokes on the way are not values. ("1" on the way
    // to "1024" in Tokens T took B, r and w down to 1 for good, and a reply to it could
    // overwrite the digits typed after it.) Sliders and selects are live.
    const typed = c.type === 'number';
    c.addEventListener('input', () => {
      if (typed) app.editing = c;
      else changed(c, false);
    });
    c.addEventListener('change', () => {
      if (app.editing === c) app.editing = null;
      changed(c, true);
    });
    // Escape gives up a number being typed: the value in use again.
    if (typed) {
      c.addEventListener('keydown', (e) => {
        if (e.key !== 'Escape' || app.editing !== c) return;
        app.editing = null;
        writeControl(c, app.settings[c.dataset.key]);
      });
    }
  }
}
