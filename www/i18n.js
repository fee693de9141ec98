// The page's words in English and 中文 (the user's note is Chinese). The texts themselves are
// www/i18n/en.json and zh.json (read by Rust too: the charts' labels, the first view), and
// load-zh.json: a file the upload module refused, in Chinese, by its kind (templates of the
// fields kvlab::io::LoadError::parts gives; a Rust test checks that every kind has one and that
// it names exactly those fields; in English the page shows the module's own message). The
// build writes them into i18n/text.js as one module (cargo xtask dist). Keys are used by
// `data-i18n` attributes in index.html, by chart labels passed to Rust, and by main.js. Terms
// follow the glossary of math-spec.md §5.

import { TEXT, LOAD_ZH } from './i18n/text.js';

export { TEXT, LOAD_ZH };

/** The language to use: URL first, then the remembered choice, then the browser's. */
export function initialLanguage(fromUrl) {
  if (fromUrl === 'en' || fromUrl === 'zh') return fromUrl;
  try {
    const saved = window.localStorage.getItem('kvlab.lang');
    if (saved === 'en' || saved === 'zh') return saved;
  } catch {
    // storage may be blocked (private mode); fall through
  }
  return (navigator.language || 'en').toLowerCase().startsWith('zh') ? 'zh' : 'en';
}

/** Text for `key` in `lang`, falling back to English, then to the key itself. */
export function t(lang, key) {
  return TEXT[lang]?.[key] ?? TEXT.en[key] ?? key;
}

/**
 * A file refusal's words that name a place or a role (`field`, `role`, `axis`, `left`, `right`
 * of kvlab::io::LoadError::parts: "header field 'shape'", "line 3, column 2", "attention", ...)
 * in `lang`; names in quotes stay as they are, and words it does not know stay in English.
 */
export function placeName(lang, text) {
  if (lang !== 'zh' || typeof text !== 'string') return text;
  const exact = {
    data: '数据', header: '头部', 'header length': '头部长度', 'JSON header': 'JSON 头部',
    'magic and version': '魔数和版本', attention: '注意力', 'the KV tensor': 'KV 张量', head: '头',
    layer: '层', keys: 'Key', values: 'Value',
  };
  if (text in exact) return exact[text];
  const patterns = [
    [/^tensor '(.*)' field '(.*)'$/, "张量 '$1' 的字段 '$2'"],
    [/^tensor name '(.*)'$/, "张量名 '$1'"],
    [/^tensor '(.*)'$/, "张量 '$1'"],
    [/^header field '(.*)'$/, "头部字段 '$1'"],
    [/^field '(.*)'$/, "字段 '$1'"],
    [/^line (\d+), column (\d+)$/, '第 $1 行第 $2 列'],
  ];
  for (const [re, zh] of patterns) if (re.test(text)) return text.replace(re, zh);
  return text;
}

/** `template` with each `{name}` replaced by `fields[name]` (unknown names are left as they are). */
export function fill(template, fields) {
  return template.replace(/\{(\w+)\}/g, (m, k) => (k in fields ? String(fields[k]) : m));
}

/** Writes every `[data-i18n]` element's text (and `[data-i18n-label]` aria-labels). */
export function applyLanguage(lang) {
  document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
  for (const el of document.querySelectorAll('[data-i18n]')) {
    el.textContent = t(lang, el.dataset.i18n);
  }
  for (const el of document.querySelectorAll('[data-i18n-label]')) {
    el.setAttribute('aria-label', t(lang, el.dataset.i18nLabel));
  }
  // Each PNG button names its chart (eleven buttons said the same).
  for (const b of document.querySelectorAll('[data-png]')) {
    const chart = document.querySelector(`canvas[data-chart="${b.dataset.png}"]`)?.getAttribute('aria-label');
    if (chart) b.setAttribute('aria-label', `${t(lang, 'export.png.label')}: ${chart}`);
  }
  document.title = t(lang, 'title');
}

/** The chart labels (keys starting with `chart.`, `state.`, `budget.`) for Rust. */
export function chartLabels(lang) {
  const out = {};
  for (const key of Object.keys(TEXT.en)) {
    if (key.startsWith('chart.') || key.startsWith('state.') || key.startsWith('budget.') || key.startsWith('policy.')) {
      out[key] = t(lang, key);
    }
  }
  out['budget.index'] = t(lang, 'budget.index.term');
  return out;
}
