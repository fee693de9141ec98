// The note's formulas in MathML (rendered natively by Chromium, Firefox and Safari), with the
// current numbers substituted. Built with createElementNS: no HTML strings, no user text.
// Holds no math: every number comes from the figures Rust computed.

import { fill } from './i18n.js';
import { num, bytes } from './lib/format.js';

const NS = 'http://www.w3.org/1998/Math/MathML';

function el(tag, ...children) {
  const e = document.createElementNS(NS, tag);
  for (const c of children) {
    e.append(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return e;
}
const mi = (s) => el('mi', s);
const mn = (s) => el('mn', String(s));
const mo = (s) => el('mo', s);
const mtext = (s) => el('mtext', s);
const row = (...c) => el('mrow', ...c);
const frac = (a, b) => el('mfrac', a, b);
const sub = (a, b) => el('msub', typeof a === 'string' ? mi(a) : a, typeof b === 'string' ? mi(b) : b);
const sup = (a, b) => el('msup', typeof a === 'string' ? mi(a) : a, typeof b === 'string' ? mn(b) : b);
const subsup = (a, b, c) => el('msubsup', a, b, c);
const hat = (x) => {
  const m = el('mover', mi(x), mo('^'));
  m.setAttribute('accent', 'true');
  return m;
};
const abs = (...c) => row(mo('|'), ...c, mo('|'));
const eq = () => mo('=');
/** Horizontal space: MathML trims spaces inside mtext. */
const gap = (em = 1.5) => {
  const s = el('mspace');
  s.setAttribute('width', `${em}em`);
  return s;
};
const name = (s) => el('mi', s); // multi-letter identifiers render upright

/** Tokens `a` to `b` (counted from 1, as the note does) as a set; null when empty. */
const span = (a, b) => (a > b ? null : row(mo('{'), mn(a), ...(a < b ? [mo('…'), mn(b)] : []), mo('}')));

/**
 * Section 2's shown group: the note writes `scale_j` for channel j; a token's group is
 * `scale_t`, the whole tensor's plain `scale`. Symbols with that index, and the group's name
 * ("token 0, channels 0–31") from the same templates the histogram's title uses.
 */
function shownGroup(q, tr) {
  const g = q.group;
  const whole = g.from === 0 && g.to + 1 >= g.len;
  const kind = { 'per-channel': 'channel', 'per-token': 'token' }[g.granularity];
  const key = kind ? `chart.group.${kind}${whole ? '' : '-run'}` : 'chart.group.tensor';
  const i = kind === 'channel' ? 'j' : kind === 'token' ? 't' : null;
  const indexed = (sym, upper) => {
    if (upper) return i ? subsup(sym, mi(i), upper) : sup(sym, upper);
    return i ? sub(sym, mi(i)) : sym;
  };
  return {
    i,
    name: fill(tr(key), { index: g.index, from: g.from, to: g.to }),
    scale: () => indexed(mi('scale')),
    zp: () => indexed(mi('zero_point')),
    x: (upper) => indexed(mi('x'), upper),
    xHat: () => indexed(hat('x')),
    q: () => indexed(mi('q')),
  };
}

/** A number, a negative one with the minus sign (−), not a hyphen. */
const signed = (v) => mn(v < 0 ? `−${num(-v)}` : num(v));

function math(...children) {
  const m = el('math', ...children);
  m.setAttribute('display', 'block');
  return m;
}

/** Every formula slot of the page: id -> (figures, settings) -> <math>. */
export const FORMULAS = {
  'f-budget': (f) => {
    const b = f.budget.data;
    return math(
      sub('M', row(mi('KV'), mo(','), mi('final'))), eq(),
      sub('T', 'kept'), mo('×'), sub(mi('bytes'), mi('token')), mo('+'),
      sub('M', 'meta'), mo('+'), sub('M', 'index'),
      eq(), mn(b.t_kept), mo('×'), mn(num(b.bytes_token_codes)), gap(0.2), mtext('B'), mo('+'),
      mtext(bytes(b.m_meta)), mo('+'), mtext(bytes(b.m_index)),
      eq(), mtext(bytes(b.m_final)),
    );
  },
  'f-bytes-fp': (f, s, tr) => {
    const m = f.budget.model;
    // (a custom MLA model's latent and RoPE key, as its fields give them: (d_c + d_R))
    const paren = (...xs) => row(mo('('), ...xs, mo(')'));
    const split = s.model === 'custom' && s.mla_latent > 0 && s.mla_rope > 0;
    const width = split
      ? [paren(sub(mi('d'), mi('c')), mo('+'), sub(mi('d'), mi('R'))), paren(mn(s.mla_latent), mo('+'), mn(s.mla_rope))]
      : [sub(mi('d'), mi('latent')), mn(m.mla_latent)];
    const terms = m.mla_latent
      ? [mi('L'), mo('×'), width[0], mo('×'), sub('s', 'fp'), eq(),
        mn(m.layers), mo('×'), width[1], mo('×'), mn(m.fp_bytes)]
      : [mn(2), mo('×'), mi('L'), mo('×'), sub(mi('n'), mi('kv')), mo('×'), sub(mi('d'), mi('head')),
        mo('×'), sub('s', 'fp'), eq(), mn(2), mo('×'), mn(m.layers), mo('×'), mn(m.n_kv_heads),
        mo('×'), mn(m.d_head), mo('×'), mn(m.fp_bytes)];
    // (sliding layers hold only their window: said under the formula, sections/budget.js)
    return math(sub(mi('bytes'), row(mi('token'), mo(','), mi('fp'))), eq(), ...terms, eq(),
      mtext(bytes(f.budget.extrapolated.bytes_token_fp)));
  },
  'f-scale': (f, s, tr) => {
    const q = f.quant;
    const g = shownGroup(q, tr);
    const label = [gap(), mtext(`(${g.name})`)];
    // (a group whose values are all equal, e.g. of one value, is stored exactly: scale = |x|)
    if (q.groupMin === q.groupMax) {
      return math(g.scale(), eq(), abs(g.x()), eq(), mn(num(q.scale)),
        gap(), mtext(`(${g.name}: ${tr('formula.constant-group')})`));
    }
    if (s.scheme === 'symmetric') {
      return math(
        g.scale(), eq(),
        frac(row(mo('max'), abs(g.x())), row(sup(mn(2), row(mi('b'), mo('−'), mn(1))), mo('−'), mn(1))),
        eq(), frac(mn(num(q.groupMaxAbs)), mn(q.qmax)), eq(), mn(num(q.scale)), ...label,
      );
    }
    return math(
      g.scale(), eq(),
      frac(row(g.x(mi('max')), mo('−'), g.x(mi('min'))),
        row(sup(mn(2), mi('b')), mo('−'), mn(1))),
      eq(), frac(row(signed(q.groupMax), mo('−'), q.groupMin < 0 ? row(mo('('), signed(q.groupMin), mo(')')) : signed(q.groupMin)), mn(q.qmax)),
      eq(), mn(num(q.scale)), ...label,
    );
  },
  'f-zero': (f, s, tr) => {
    const q = f.quant;
    if (s.scheme === 'symmetric') {
      return math(mtext(tr('formula.no-zero-point')));
    }
    const g = shownGroup(q, tr);
    return math(
      g.zp(), eq(), mi('round'), row(mo('('), mo('−'),
        frac(g.x(mi('min')), g.scale()), mo(')')),
      eq(), mn(q.zeroPoint ?? 0), gap(), mtext(`(${g.name})`),
    );
  },
  'f-q': (f, s, tr) => {
    const g = shownGroup(f.quant, tr);
    const inner = s.scheme === 'symmetric'
      ? frac(g.x(), g.scale())
      : row(frac(g.x(), g.scale()), mo('+'), g.zp());
    const range = s.scheme === 'symmetric'
      ? row(mo('−'), mn(f.quant.qmax), mo('…'), mn(f.quant.qmax))
      : row(mn(0), mo('…'), mn(f.quant.qmax));
    return math(g.q(), eq(), mi('round'), row(mo('('), inner, mo(')')), mo('∈'), row(mo('['), range, mo(']')),
      mo(','), gap(2), g.xHat(), eq(), g.scale(), mo('·'),
      s.scheme === 'symmetric' ? g.q() : row(mo('('), g.q(), mo('−'), g.zp(), mo(')')));
  },
  'f-bound-elem': (f, s, tr) => {
    const q = f.quant;
    const g = shownGroup(q, tr);
    const holds = q.group.maxError <= q.group.bound;
    return math(abs(g.x(), mo('−'), g.xHat()), mo('≤'), frac(mn(1), mn(2)), g.scale(),
      gap(), mtext(`${g.name}:`), gap(0.4), mn(num(q.group.maxError)), mo(holds ? '≤' : '>'), mn(num(q.group.bound)),
      gap(), mtext(fill(tr('formula.groups-within'), { within: q.group.groupsWithin, groups: q.groups })));
  },
  'f-bound-row': (f, s, tr) => {
    // Token t's squared error against the sum of its elements' scales: the channels' own per
    // channel, the token's (d times) per token, the tensor's (d times) per tensor.
    const g = shownGroup(f.quant, tr);
    const sum = g.i === 'j'
      ? row(mo('∑'), sup(g.scale(), mn(2)))
      : row(mi('d'), mo('·'), sup(g.scale(), mn(2)));
    return math(
      sup(row(mo('‖'), sub('x', 't'), mo('−'), sub(hat('x'), mi('t')), mo('‖')), mn(2)), mo('≤'), frac(mn(1), mn(4)),
      sum, gap(), mtext(tr(f.quant.rowBoundHolds ? 'formula.row-holds' : 'formula.row-fails')),
    );
  },
  'f-rquant': (f, s, tr) => {
    const st = f.quant.stats;
    return math(sub('R', 'quant'), mo('≈'), frac(sub('s', 'fp'), sub('s', 'q')), eq(),
      frac(mn(16), mn(f.quant.bits)), eq(), mn(num(st.compression_ratio_no_meta)),
      gap(2), mtext(tr('formula.with-scales')), gap(0.4), frac(mtext(bytes(f.quant.fpBytes)), row(mtext(bytes(f.quant.codeBytes)), mo('+'), mtext(bytes(f.quant.metaBytes)))),
      eq(), mn(num(st.compression_ratio)));
  },
  'f-score': (f, s, tr) => {
    const over = s.method === 'snapkv'
      ? row(mi('t'), mo('∈'), sub('W', 'obs'))
      : row(mi('t'), mo('='), mn(1));
    const to = s.method === 'snapkv' ? null : sub('T', 'obs');
    const sum = to ? el('munderover', mo('∑'), over, to) : el('munder', mo('∑'), over);
    const lhs = s.method === 'snapkv' ? subsup(mi('score'), mi('i'), mi('snap')) : sub(mi('score'), mi('i'));
    const note = s.method === 'snapkv'
      ? mtext(`(${fill(tr('formula.last-w'), { w: s.window, S: f.data.steps })}${s.pool === 'none' ? '' : `, ${tr(`pool.${s.pool}`)}, k = ${s.kernel}`})`)
      : mtext(`(T_obs = ${f.data.steps}${s.method === 'streaming' ? `; ${tr('formula.streaming-unused')}` : ''})`);
    return math(lhs, eq(), sum, sub(mi('a'), row(mi('t'), mo(','), mi('i'))), gap(), note);
  },
  'f-keep': (f, s, tr) => {
    const t = f.data.tokens;
    const recent = span(f.select.recentStart + 1, t);
    if (s.method === 'streaming') {
      const sinks = Math.min(s.sinks, s.budget);
      const parts = [span(1, sinks), recent].filter(Boolean);
      return math(mi('𝒦'), eq(), ...(parts.length ? parts.flatMap((p, i) => (i ? [mo('∪'), p] : [p])) : [mo('∅')]),
        gap(), mtext(`s = ${sinks}`));
    }
    const heavy = Math.max(0, s.budget - Math.min(s.recent, t));
    return math(mi('𝒦'), eq(), mi('TopK'), row(mo('('), mi('score'), mo(','), row(mi('B'), mo('−'), mi('r')), mo(')')),
      mo('∪'), row(mo('{'), row(mi('T'), mo('−'), mi('r'), mo('+'), mn(1)), mo(','), mo('…'), mo(','), mi('T'), mo('}')),
      eq(), mi('TopK'), row(mo('('), mi('score'), mo(','), mn(heavy), mo(')')),
      mo('∪'), recent ?? mo('∅'));
  },
  'f-rtoken': (f) => math(sub('R', 'token'), eq(), frac(sub('T', 'total'), sub('T', 'kept')), eq(),
    frac(mn(f.data.tokens), mn(f.select.keptCount)), eq(), mn(num(f.select.rToken))),
  'f-roverall': (f) => {
    const b = f.budget.data;
    return math(sub('R', 'overall'), eq(),
      frac(row(sub('T', 'total'), mo('×'), subsup(mi('bytes'), mi('token'), mi('fp'))),
        row(sub('T', 'kept'), mo('×'), subsup(mi('bytes'), mi('token'), mi('quant')), mo('+'), sub('M', 'meta'), mo('+'), sub('M', 'index'))),
      eq(),
      frac(row(mn(b.t_total), mo('×'), mn(b.bytes_token_fp)),
        row(mn(b.t_kept), mo('×'), mn(num(b.bytes_token_codes)), mo('+'), mn(b.m_meta), mo('+'), mn(b.m_index))),
      eq(), mn(num(b.r_overall)));
  },
};

/** Same element name and attributes (children not compared). */
function sameShell(a, b) {
  if (a.nodeType !== b.nodeType || a.nodeName !== b.nodeName) return false;
  if (a.nodeType !== Node.ELEMENT_NODE) return true;
  if (a.attributes.length !== b.attributes.length) return false;
  for (const { name, value } of b.attributes) {
    if (a.getAttribute(name) !== value) return false;
  }
  return true;
}

/**
 * Makes `old` equal to `fresh` (a node of the same shell) touching as little as possible: text
 * that changed is rewritten in place, a child whose shape changed is replaced. A formula whose
 * numbers change then re-lays out those numbers, not all of its MathML.
 */
function patch(old, fresh) {
  if (old.nodeType === Node.TEXT_NODE) {
    if (old.data !== fresh.data) old.data = fresh.data;
    return;
  }
  const a = old.childNodes;
  const b = fresh.childNodes;
  if (a.length !== b.length) {
    old.replaceChildren(...b);
    return;
  }
  for (let i = 0; i < b.length; i += 1) {
    if (sameShell(a[i], b[i])) patch(a[i], b[i]);
    else a[i].replaceWith(b[i].cloneNode(true));
  }
}

/**
 * Replaces the content of every formula slot present in the page (of `sections` only, when
 * given): `tr(key)` words a text in the page's language.
 */
export function renderFormulas(figures, settings, tr, sections = null) {
  for (const [id, build] of Object.entries(FORMULAS)) {
    const slot = document.getElementById(id);
    // (only changed sections are rebuilt: a formula belongs to the section it stands in)
    if (!slot || (sections && !sections.has(slot.closest('[data-section]')?.dataset.section))) continue;
    const fresh = build(figures, settings, tr);
    // An unchanged formula is left in place, a changed one patched where it changed:
    // replacing it would cost a layout of all its MathML.
    if (slot.childNodes.length === 1 && sameShell(slot.firstChild, fresh)) patch(slot.firstChild, fresh);
    else slot.replaceChildren(fresh);
  }
}
