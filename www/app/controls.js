// The controls: every element with `data-key` is one setting of Rust's table (FIELDS), read,
// written and ranged the same way whatever its key. A number being typed is a value only once
// committed; a slider and the number field beside it (and an <output for> it) show each other's
// value; a control marked `data-mirror` shows its value on <body> too, for the style sheet.
// Ranges are Rust's: each setting's own from FIELDS, narrowed to the data in use by the bounds
// between settings (BOUNDS) at the lab's figures, so a slider never rests on a value the engine
// would refuse.

import { FIELDS, BOUNDS } from '../fields.js';
import { app } from './store.js';
import { limitOf } from './registry.js';

/** Every control of the page. */
export const controls = (root = document) => root.querySelectorAll('[data-key]');

/** The setting a control's value stands for (numbers as numbers, `auto` as null). */
export function settingFromControl(control) {
  const field = FIELDS[control.dataset.key];
  const raw = control.value;
  if (field?.auto && raw === 'auto') return null;
  if (field?.numeric || field?.auto) {
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
  const text = v === null || v === undefined ? 'auto' : String(v);
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
 * Gives every number and slider its setting's range and step (the table's `min`, `max`,
 * `step`): the page's HTML holds none of them.
 */
export function rangeControls() {
  for (const c of controls()) {
    const f = FIELDS[c.dataset.key];
    if (f?.min === undefined || (c.type !== 'range' && c.type !== 'number')) continue;
    c.min = String(f.min);
    c.max = String(f.max);
    c.step = String(f.step);
  }
}

/**
 * What the data in use allows (`f`, the lab's figures): each bound whose setting is one of the
 * data's counts (T, S, d in `f.data`, named as the settings are) at that count (B and r up to
 * T, w up to S, the channel shown below d...), Bits from the scheme's fewest and B from
 * StreamingLLM's sinks (`f.quant.bitsMin`, `f.select.budgetMin`). A map key -> {min, max}.
 */
export function dataRanges(f) {
  const out = new Map();
  const narrow = (key, min, max) => {
    const r = out.get(key) ?? { min, max };
    out.set(key, { min: Math.max(r.min, min), max: Math.min(r.max, max) });
  };
  for (const b of BOUNDS) {
    const v = f.data?.[b.by];
    if (Number.isFinite(v)) narrow(b.key, 0, limitOf(b, v));
  }
  if (Number.isFinite(f.quant?.bitsMin)) narrow('bits', f.quant.bitsMin, Infinity);
  if (Number.isFinite(f.select?.budgetMin)) narrow('budget', f.select.budgetMin, Infinity);
  return out;
}

/**
 * Narrows the controls to what the data in use allows ([`dataRanges`]), within each setting's
 * own range. A select of an `auto` setting lists `auto` and the range.
 */
export function fitRanges(f) {
  for (const [key, { min, max }] of dataRanges(f)) {
    const own = FIELDS[key] ?? {};
    const lo = Math.max(min, own.min ?? min);
    const hi = Math.min(max, own.max ?? max);
    if (own.auto) listOptions(key, lo, hi);
    else setRange(key, lo, hi);
  }
}

/** Sets `key`'s sliders and number fields to `min..max`. */
function setRange(key, min, max) {
  for (const el of document.querySelectorAll(`[data-key="${key}"]`)) {
    if (el.max === String(max) && el.min === String(min)) continue;
    el.min = String(min);
    el.max = String(max);
    // A slider's value was clamped to its old range when written (Reset, Back, a link: B =
    // 800 shown at 512): the value in use again, now that it fits.
    const want = app.settings?.[key];
    if (el.type === 'range' && want !== undefined) writeControl(el, want);
  }
}

/**
 * Lists `min..max` after the select's own `auto` option (index.html's, worded as every text is)
 * in the select of setting `key`, when they changed.
 */
function listOptions(key, min, max) {
  for (const sel of document.querySelectorAll(`select[data-key="${key}"]`)) {
    if (sel.options.length === max - min + 2 && sel.options[1]?.value === String(min)) continue;
    // (the setting in use: a value of a link was not an option yet when the controls were
    // written, and the select fell back to auto)
    const set = app.settings?.[key];
    const keep = set === null || set === undefined ? sel.value : String(set);
    const numbers = [];
    for (let j = min; j <= max; j += 1) numbers.push(new Option(String(j), String(j)));
    sel.replaceChildren(sel.options[0], ...numbers);
    sel.value = [...sel.options].some((o) => o.value === keep) ? keep : 'auto';
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
