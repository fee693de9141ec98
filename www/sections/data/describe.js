// The data's words: its one-line description (generated data from the generator's settings,
// an upload from the upload module's fields: kvlab::io::FileAbout, AttentionAbout, KvAbout,
// LoadWarning; in English each equals the engine's own line), in the page's language.

import { t, fill } from '../../i18n.js';
import { grouped } from '../../lib/format.js';
import { app } from '../../app/store.js';

/**
 * The data's one-line description in the page's language: generated data from its generator's
 * settings (the engine's `description` says the same in English), uploads as the engine
 * describes them (file names and shapes).
 */
export function describeData(d) {
  const model = app.upload?.model;
  if (d.uploaded && model) {
    // (the run's own facts: the layer and head chosen, the bytes the model read)
    const key = model.head < 0 ? 'data.model.description.mean' : 'data.model.description';
    return fill(t(app.lang, key), { layer: model.layer, head: model.head, bytes: grouped(app.upload.tokens.length - 1) });
  }
  if (d.uploaded) return app.upload?.about ? describeUpload(app.upload.about, d) : d.description;
  return fill(t(app.lang, 'data.description.generated'), generatorFields(d));
}

/** The generator's settings of data `d` (its figures) as the description templates name them. */
function generatorFields(d) {
  const g = d.generator;
  return {
    pattern: t(app.lang, `pattern.short.${g.pattern}`),
    S: d.steps,
    T: d.tokens,
    d: d.channels,
    outliers: g.outlierChannels,
    skewed: g.skewedChannels,
    seed: g.seed,
  };
}

/** A shape as text: `[2, 3]`. */
export const shapeText = (shape) => `[${shape.join(', ')}]`;

/** The shortest decimal that reads back as the same f32 (what Rust prints for an f32). */
function f32Text(v) {
  for (let p = 1; p < 10; p += 1) {
    const s = Number(v.toPrecision(p));
    if (Math.fround(s) === v) return String(s);
  }
  return String(v);
}

/** An uploaded file's one-line summary. */
export function describeFile(file, about) {
  const tr = (key) => t(app.lang, key);
  const fields = { file, shape: shapeText(about.shape ?? []) };
  if (about.format === 'npy') {
    Object.assign(fields, { version: about.version, dtype: about.dtype, order: about.fortranOrder ? 'Fortran' : 'C' });
  } else if (about.format === 'csv') {
    Object.assign(fields, {
      delimiter: tr(`file.delimiter.${about.delimiter}`),
      header: tr(about.headerRow ? 'file.header.yes' : 'file.header.no'),
    });
  } else if (about.format === 'safetensors') {
    Object.assign(fields, { loaded: about.loaded, skipped: about.skipped });
  } else if (about.format === 'tokens') {
    fields.count = about.count;
  }
  return fill(tr(`file.about.${about.format}`), fields);
}

/**
 * The data in use made of an upload (`u`: its fields, kvlab::upload::UploadFigures) and what
 * the engine generated for the parts it did not give (`d`: the data's figures).
 */
function describeUpload(u, d) {
  const tr = (key) => t(app.lang, key);
  const kv = (k, name) => fill(tr('upload.kv'), {
    name,
    dims: `[${[k.layers != null && `L=${k.layers}`, k.heads != null && `H=${k.heads}`, `T=${k.tokens}`, `d=${k.channels}`].filter(Boolean).join(', ')}]`,
    pick: k.heads == null ? '' : fill(tr(k.layers != null ? 'upload.kv.layer-head' : 'upload.kv.head'), {
      layer: k.layer, layers: k.layers, lastLayer: k.layers - 1, head: k.head, heads: k.heads, lastHead: k.heads - 1,
    }),
    T: k.tokens,
    d: k.channels,
  });
  const uploaded = [
    u.attention && describeAttention(u.attention),
    u.keys && kv(u.keys, 'K'),
    u.values && kv(u.values, 'V'),
  ].filter(Boolean);
  const said = fill(tr('upload.description'), { parts: uploaded.join(tr('upload.join')) })
    + (u.tokensFrom ? fill(tr('upload.tokens'), { file: u.tokensFrom }) : '');
  if (!d.generator) return said;
  const { attention, keys, values } = d.uploaded;
  const fields = generatorFields(d);
  const kvWhich = keys ? (values ? null : 'values') : (values ? 'keys' : 'both');
  const generated = [
    !attention && fill(tr('upload.generated.attention'), fields),
    kvWhich && fill(tr(`upload.generated.kv.${kvWhich}`), fields),
  ].filter(Boolean);
  return said + tr('upload.join') + fill(tr('upload.generated'), { parts: generated.join(tr('upload.join')), seed: fields.seed });
}

/** An uploaded attention matrix's description (kvlab::io::AttentionAbout). */
function describeAttention(a) {
  const tr = (key) => t(app.lang, key);
  const { heads: h, steps: S, tokens: T } = a;
  return fill(tr('upload.attention'), {
    dims: `[${[h != null && `H=${h}`, a.causal ? `T=${T}` : `S=${S}`, `T=${T}`].filter(Boolean).join(', ')}]`,
    head: h == null ? '' : fill(tr(`upload.head.${a.pick}`), { head: a.head, heads: h, lastHead: h - 1 }),
    body: fill(tr(a.causal ? 'upload.body.causal' : S === T ? 'upload.body.square' : 'upload.body.steps'), { S, T }),
  });
}

/** One of the upload's warnings (`rowSums`: attention rows that do not sum to 1). */
export function describeWarning(w) {
  const rows = w.kind === 'rowSums' && { row: shapeText(w.worstRow), sum: f32Text(w.worstSum), tolerance: f32Text(w.tolerance) };
  return fill(t(app.lang, `upload.warn.${w.kind}`), { ...w, ...rows });
}
