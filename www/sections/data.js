// The data's figures: its one-line description, "Back to generated data" while uploaded data
// is in use, and the generator's controls off meanwhile (they do nothing to it).

import { $ } from '../lib/dom.js';
import { figure } from './common.js';
import { describeData } from './data/describe.js';

/** Writes the data's figures of `f`. */
export function writeData(f) {
  figure('data-description', f.data.description, describeData(f.data));
  const { generated } = f.data;
  if ($('#use-generated').hidden !== generated) $('#use-generated').hidden = generated;
  for (const c of document.querySelectorAll('#data > .controls [data-key]')) {
    if (c.disabled === generated) c.disabled = !generated;
  }
}
