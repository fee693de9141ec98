// The page's two languages, checked on the sources (no browser): both tables hold the same keys
// with the same `{placeholders}`, neither repeats a key (a repeated key in an object literal
// silently replaces the first: one did, and the "Back to generated data" button showed a data
// description's template), and every key the HTML and the scripts name exists.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { TEXT } from '../../www/i18n.js';

const www = (name) => readFileSync(new URL(`../../www/${name}`, import.meta.url), 'utf8');
const placeholders = (s) => [...s.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();

test('English and Chinese hold the same keys, with the same placeholders', () => {
  assert.deepEqual(Object.keys(TEXT.zh).sort(), Object.keys(TEXT.en).sort());
  for (const [key, en] of Object.entries(TEXT.en)) {
    assert.deepEqual(placeholders(TEXT.zh[key]), placeholders(en), `placeholders of ${key}`);
  }
});

test('no language table names a key twice', () => {
  // (JSON.parse keeps the last of two equal keys without a word: the files' own lines are read)
  for (const lang of ['en', 'zh']) {
    const source = www(`i18n/${lang}.json`);
    const keys = [...source.matchAll(/^ {2}"((?:[^"\\]|\\.)+)":/gm)].map((m) => m[1]);
    assert.equal(keys.length, Object.keys(TEXT[lang]).length, `${lang}: every key parsed`);
    const seen = new Set();
    assert.deepEqual(keys.filter((k) => seen.has(k) || !seen.add(k)), [], `${lang}: repeated keys`);
  }
});

test('every key the page names exists', () => {
  const html = www('index.html');
  const inHtml = [...html.matchAll(/data-i18n(?:-label)?="([^"]+)"/g)].map((m) => m[1]);
  assert.ok(inHtml.length > 100, `the HTML's keys found (${inHtml.length})`);
  assert.deepEqual(inHtml.filter((k) => !(k in TEXT.en)), []);
  // (every script of the page's own: its rooms name keys where they word things)
  const scripts = readdirSync(new URL('../../www/', import.meta.url), { recursive: true })
    .filter((f) => f.endsWith('.js') && !f.startsWith('pkg') && !f.startsWith('i18n/') && f !== 'fields.js');
  let found = 0;
  for (const file of scripts) {
    const literal = [...www(file).matchAll(/\btr?\((?:[\w.]+, )?'([^']+)'\)/g)].map((m) => m[1]);
    found += literal.length;
    assert.deepEqual(literal.filter((k) => !(k in TEXT.en)), [], file);
  }
  assert.ok(found > 50, `the scripts' keys found (${found})`);
  for (const pattern of ['sink-local', 'heavy-hitters', 'uniform', 'needle']) {
    assert.ok(`pattern.short.${pattern}` in TEXT.en, `the description's name of ${pattern}`);
  }
  // The keys the page builds from the engine's fields (kvlab::io::FileAbout's formats,
  // csv::Delimiter's keys, AttentionAbout's picks, the kinds of LoadWarning, state::Repair,
  // quant::QuantError, select::SelectError and lab::LabError::Channel, what a link's refused
  // setting is replaced by, Scheme's names and the grouped axes).
  const built = [
    ...['npy', 'csv', 'json', 'safetensors'].map((f) => `file.about.${f}`),
    ...['comma', 'tab', 'semicolon', 'space'].map((d) => `file.delimiter.${d}`),
    ...['head', 'mean', 'max', 'sum'].map((p) => `upload.head.${p}`),
    'upload.warn.rowSums',
    ...['outOfRange', 'notANumber', 'notOneOf', 'unknownModel', 'even', 'atMost', 'below'].map((k) => `repair.${k}`),
    ...['bits', 'groupSize', 'groupWithPerTensor'].map((k) => `quant.refused.${k}`),
    ...['budget', 'window', 'kernel', 'sinks'].map((k) => `select.refused.${k}`),
    'range.refused.channel', 'budget.refused.overflow', 'upload.refused.readersLost', 'repair.default', 'repair.every-default',
    ...['symmetric', 'asymmetric'].map((k) => `quant.scheme-name.${k}`),
    ...['tokens-per-channel', 'channels-per-token'].map((k) => `quant.axis.${k}`),
  ];
  assert.deepEqual(built.filter((k) => !(k in TEXT.en)), []);
});

test('a file refusal\'s place and role names are said in Chinese, names in quotes kept', async () => {
  const { placeName, LOAD_ZH } = await import('../../www/i18n.js');
  const cases = [
    ["header field 'shape'", "头部字段 'shape'"],
    ["tensor 'k' field 'dtype'", "张量 'k' 的字段 'dtype'"],
    ["tensor name 'q'", "张量名 'q'"],
    ["tensor 'attn'", "张量 'attn'"],
    ["field 'data'", "字段 'data'"],
    ['line 5, column 2', '第 5 行第 2 列'],
    ['data', '数据'], ['header length', '头部长度'], ['attention', '注意力'], ['head', '头'],
    ['the KV tensor', 'KV 张量'],
    ['K', 'K'], ['KV', 'KV'], ["something 'new'", "something 'new'"],
  ];
  for (const [en, zh] of cases) {
    assert.equal(placeName('zh', en), zh, en);
    assert.equal(placeName('en', en), en, `${en} stays in English`);
  }
  // (the templates themselves are checked against kvlab::io::LoadError::parts by a Rust test)
  assert.ok(Object.keys(LOAD_ZH).length > 40);
});
