// kvlab page: wires the DOM to the WebAssembly module. It holds no math: every number shown
// comes from the Rust crate, and the large arrays stay inside wasm behind the `Lab` handle.
//
// Extending the page: add a control in index.html with a real <label>, add its key to
// `readState`/`writeState` (so a link reproduces the view), and call a small `Lab` method.

import init, { Lab } from './pkg/kvlab.js';

/** The keys shown: `tokens x channels`, from a fixed seed so a link reproduces the view. */
const SPEC = { tokens: 128, channels: 64, seed: 1 };

/** Texts the page writes; kept together so they can be translated. */
const TEXT = {
  xCaption: (channel) => `key value x (channel ${channel})`,
  yCaption: 'tokens',
  ready: (spec, channel) =>
    `Keys: ${spec.tokens} tokens × ${spec.channels} channels (seed ${spec.seed}); showing channel ${channel}.`,
  failed: 'The WebAssembly module could not be loaded: ',
};

const el = {
  section: document.getElementById('quant'),
  bits: document.getElementById('bits'),
  bitsValue: document.getElementById('bits-value'),
  bitsError: document.getElementById('bits-error'),
  canvas: document.getElementById('channel-chart'),
  status: document.getElementById('status'),
  figure: (name) => document.querySelector(`[data-figure="${name}"]`),
};

/** The view's state from the URL query (`?bits=4`), falling back to the controls' defaults. */
function readState() {
  const params = new URLSearchParams(window.location.search);
  const bits = Number.parseInt(params.get('bits') ?? '', 10);
  const min = Number(el.bits.min);
  const max = Number(el.bits.max);
  return {
    bits: Number.isInteger(bits) && bits >= min && bits <= max ? bits : Number(el.bits.value),
  };
}

/** Puts the state in the URL without adding a history entry. */
function writeState(state) {
  const url = new URL(window.location.href);
  url.searchParams.set('bits', String(state.bits));
  window.history.replaceState(null, '', url);
}

/** Shows a figure: `data-value` holds the exact number, the text a rounded one. */
function showFigure(name, value, text) {
  const out = el.figure(name);
  if (!out) return;
  out.dataset.value = String(value);
  out.textContent = text;
}

const format = {
  error: (v) => (Number.isFinite(v) ? v.toPrecision(3) : String(v)),
  ratio: (v) => `${v.toFixed(2)}×`,
  db: (v) => (v === Infinity ? '∞ dB' : `${v.toFixed(1)} dB`),
};

function showError(target, error) {
  target.textContent = error instanceof Error ? error.message : String(error);
  target.hidden = false;
}

function clearError(target) {
  target.textContent = '';
  target.hidden = true;
}

/** Sizes the canvas to its CSS box in device pixels, then lets Rust draw the current view. */
function draw(lab) {
  const ratio = window.devicePixelRatio || 1;
  const box = el.canvas.getBoundingClientRect();
  const width = Math.max(1, Math.round(box.width * ratio));
  const height = Math.max(1, Math.round(box.height * ratio));
  if (el.canvas.width !== width) el.canvas.width = width;
  if (el.canvas.height !== height) el.canvas.height = height;
  lab.drawChannel(el.canvas, ratio, TEXT.xCaption(lab.channel()), TEXT.yCaption);
}

/** Quantizes with `bits`, shows the figures and redraws; on error keeps the last good view. */
function update(lab, bits) {
  let figures;
  try {
    figures = lab.quantize(bits);
    draw(lab);
  } catch (error) {
    showError(el.bitsError, error);
    return;
  }
  clearError(el.bitsError);
  el.bitsValue.textContent = String(figures.bits);
  showFigure('max-abs-error', figures.maxAbsError, format.error(figures.maxAbsError));
  showFigure('mean-abs-error', figures.meanAbsError, format.error(figures.meanAbsError));
  showFigure('snr-db', figures.snrDb, format.db(figures.snrDb));
  showFigure('r-quant', figures.rQuant, format.ratio(figures.rQuant));
  writeState({ bits: figures.bits });
}

async function main() {
  try {
    await init();
  } catch (error) {
    el.section.dataset.state = 'failed';
    el.status.textContent = TEXT.failed + (error instanceof Error ? error.message : String(error));
    el.status.classList.add('error');
    return;
  }
  const lab = new Lab(SPEC.tokens, SPEC.channels, SPEC.seed);
  const state = readState();
  el.bits.value = String(state.bits);
  update(lab, state.bits);

  el.bits.addEventListener('input', () => update(lab, Number(el.bits.value)));

  let pending = false;
  new ResizeObserver(() => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      try {
        draw(lab);
      } catch (error) {
        showError(el.bitsError, error);
      }
    });
  }).observe(el.canvas);

  el.status.textContent = TEXT.ready(SPEC, lab.channel());
  el.section.dataset.state = 'ready';
}

main();
