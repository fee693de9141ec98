// The model's heads as small multiples, painted from the engine's pooled attention (the pixels
// are the engine's numbers; this only shades them): a sink head is a dark first column, a local
// head a dark diagonal. A click uses that head.

import { t, fill } from '../i18n.js';
import { $ } from '../lib/dom.js';
import { app } from '../app/store.js';
import { request } from '../app/requests.js';

/** Cells a side of each head's thumbnail. */
const THUMB = 32;

/**
 * Every layer's and head's attention of the model's run as small multiples (rows: layers,
 * columns: heads; √ weights, as the attention heatmap), the one in use (`model`: its layer and
 * head) outlined; a click picks that layer and head and calls `run`.
 */
export async function showHeads(model, run) {
  const { layers, heads, size, cells } = await request('modelHeads', { size: THUMB });
  const box = $('#model-heads');
  const grid = box.querySelector('.grid');
  grid.style.setProperty('--heads', String(heads));
  const buttons = [];
  for (let l = 0; l < layers; l += 1) {
    for (let h = 0; h < heads; h += 1) {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'head';
      b.dataset.layer = String(l);
      b.dataset.head = String(h);
      b.setAttribute('aria-label', fill(t(app.lang, 'data.model.head-label'), { layer: l, head: h }));
      b.setAttribute('aria-pressed', String(l === model.layer && h === model.head));
      const c = document.createElement('canvas');
      c.width = size;
      c.height = size;
      const img = c.getContext('2d').createImageData(size, size);
      const at = (l * heads + h) * size * size;
      for (let i = 0; i < size * size; i += 1) {
        const v = Math.sqrt(Math.max(0, cells[at + i]));
        // (dark on white in both themes: the caption says darker is more weight)
        const shade = Math.round(255 * (1 - v));
        img.data.set([shade, shade, shade, 255], 4 * i);
      }
      c.getContext('2d').putImageData(img, 0, 0);
      const label = document.createElement('span');
      label.textContent = `L${l} H${h}`;
      b.append(c, label);
      b.addEventListener('click', () => {
        $('#model-layer').value = String(l);
        $('#model-head').value = String(h);
        run();
      });
      buttons.push(b);
    }
  }
  grid.replaceChildren(...buttons);
  box.hidden = false;
}
