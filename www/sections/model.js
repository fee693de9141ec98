// Section 5's figures: the real model under the compressed cache (the model's module measures,
// this only words what it measured), its texts, the policies on it and the levers' verdict.

import { t, fill } from '../i18n.js';
import { bytes, fmt } from '../lib/format.js';
import { figure } from './common.js';

const { nats } = fmt;

/**
 * Whether the model is the data (`on`): the section shows its figures, or says how to get them.
 */
export function showModelSection(on) {
  const off = document.querySelector('#model-off');
  const body = document.querySelector('#model-on');
  if (off.hidden !== on) off.hidden = on;
  if (body.hidden === on) body.hidden = !on;
}

/**
 * Section 5's first figures from `m` (the engine's `{quality}` or `{error}`); `ctx.tokens`:
 * the prompt's token texts, `ctx.shown`: the layer and head in use.
 */
export function writeModel(m, ctx) {
  const err = document.querySelector('#model-error');
  if (m.error) {
    err.textContent = fill(t(ctx.lang, 'model.error'), { message: m.error.message });
    err.hidden = false;
    return;
  }
  err.hidden = true;
  const q = m.quality;
  const { tokens, prefill, evaluated } = q.protocol;
  figure('model-kl', q.meanKl, `${nats(q.meanKl)} nats`);
  figure('model-top1', q.top1Rate, fmt.pct(q.top1Rate));
  // (a one-byte prompt has no next byte to score: no loss, said as a dash)
  const loss = (v) => (v === null ? '—' : `${nats(v)} nats/byte`);
  figure('model-nll-full', q.nllFull ?? '', loss(q.nllFull));
  figure('model-nll-compressed', q.nll ?? '', loss(q.nll));
  figure('model-bytes', q.bytes, `${bytes(q.bytes)} / ${bytes(q.bytesFull)}`);
  figure('model-protocol', `${prefill}/${evaluated}`, fill(t(ctx.lang, 'model.protocol'), {
    t: tokens, bytes: tokens - 1, bytesUnit: t(ctx.lang, tokens === 2 ? 'unit.byte' : 'unit.bytes'),
    p: prefill, e: evaluated, n: Math.max(0, evaluated - 1),
  }));
  writeKept(q, ctx);
}

/** The prefill as text, the tokens the shown heads keep in full and the dropped ones faded. */
function writeKept(q, ctx) {
  const out = document.querySelector('[data-figure="model-kept"]');
  const { layer, head } = ctx.shown ?? { layer: 0, head: -1 };
  const which = head < 0 ? fill(t(ctx.lang, 'model.kept.mean'), { layer })
    : fill(t(ctx.lang, 'model.kept.head'), { layer, head });
  const texts = ctx.tokens ?? [];
  const kept = new Set(q.kept);
  const key = `${ctx.lang}|${which}|${q.kept.join(',')}|${q.protocol.prefill}`;
  if (out.dataset.value === key) return;
  out.dataset.value = key;
  const label = document.createElement('span');
  const all = q.kept.length >= q.protocol.prefill;
  label.textContent = fill(t(ctx.lang, 'model.kept'), { which, tokens: all ? t(ctx.lang, 'model.kept.all') : '' });
  const text = document.createElement('span');
  text.className = 'text kept-text';
  // (runs of kept or dropped bytes, token 0 the BOS as its own text)
  let run = null;
  for (let i = 0; i < q.protocol.prefill; i += 1) {
    const on = kept.has(i);
    if (!run || run.on !== on) {
      run = { on, el: document.createElement(on ? 'b' : 'span') };
      if (!on) run.el.className = 'dropped';
      text.append(run.el);
    }
    run.el.textContent += (texts[i] ?? '').replace(/\n/g, '⏎');
  }
  out.replaceChildren(label, ' ', all ? '' : text);
}

/** A text line of the texts' block: a label and the text, its part after `split` marked. */
function line(label, parts) {
  const div = document.createElement('div');
  div.className = 'line';
  const name = document.createElement('span');
  name.textContent = label;
  const text = document.createElement('span');
  text.className = 'text';
  text.append(...parts);
  div.append(name, text);
  return div;
}

/** `split` ({same, rest, partsAt}) as text with its differing part marked. */
function marked(split, lang) {
  if (split.partsAt === null) return [split.same];
  const m = document.createElement('mark');
  m.textContent = split.rest;
  m.title = fill(t(lang, 'model.text.parts'), { at: split.partsAt });
  return [split.same, m];
}

/**
 * Section 5's details from `d` (the engine's `modelDetails`): the texts, the policies' table,
 * the sinks' sentence, the heads' budgets, the levers.
 */
export function writeModelDetails(d, ctx) {
  const { lang } = ctx;
  const texts = document.querySelector('#model-texts');
  if (d.text.Ok) {
    const x = d.text.Ok;
    const ctxSpan = document.createElement('span');
    ctxSpan.className = 'ctx';
    ctxSpan.textContent = `…${x.context}`;
    const lines = [
      line(t(lang, 'model.text.context'), [ctxSpan]),
      line(t(lang, 'model.text.full'), [x.full]),
      line(t(lang, 'model.text.once'), marked(x.once, lang)),
    ];
    const policy = ctx.policy ? t(lang, `policy.${ctx.policy}`) : '';
    lines.push(line(t(lang, 'model.text.evicting'), x.evicting ? marked(x.evicting, lang)
      : [fill(t(lang, 'model.text.no-evict'), { policy })]));
    if (x.cut > 0) {
      const note = document.createElement('p');
      note.className = 'note';
      note.dataset.cut = String(x.cut);
      note.textContent = fill(t(lang, 'model.text.cut'), {
        kept: x.prefill - 1, context: x.prefill + x.bytes, bytes: x.bytes, n: x.cut,
      });
      lines.push(note);
    }
    texts.replaceChildren(...lines);
  } else {
    texts.replaceChildren(d.text.Err ?? '');
  }
  const rows = d.policies.Ok ?? [];
  writeRows(rows, ctx);
  writeSinks(rows, lang);
  writeOracle(rows, lang);
  if (d.policies.Err) figure('model-sinks', '', d.policies.Err);
  writeAllocation(d.allocation, ctx);
  writeModelLevers(d.levers, lang);
}

function writeRows(rows, ctx) {
  const body = document.querySelector('#model-rows');
  const trs = rows.map((r) => {
    const tr = document.createElement('tr');
    tr.dataset.policy = r.name;
    if (r.name === ctx.policy) tr.className = 'current';
    const th = document.createElement('th');
    th.scope = 'row';
    th.textContent = t(ctx.lang, `policy.${r.name}`);
    if (r.sameAs) {
      // (the same kept tokens in every head: the same numbers, said rather than left a puzzle)
      const same = document.createElement('span');
      same.className = 'same';
      const policy = t(ctx.lang, `policy.${r.sameAs}`);
      same.textContent = ` ${fill(t(ctx.lang, 'model.same'), { policy })}`;
      same.title = fill(t(ctx.lang, 'model.same.label'), { policy });
      tr.dataset.sameAs = r.sameAs;
      th.append(same);
    }
    tr.append(th);
    const cells = r.error ? [[r.error, '']] : [[nats(r.kl), r.kl], [fmt.pct(r.top1), r.top1],
      [nats(r.nll), r.nll], [bytes(r.bytes), r.bytes]];
    for (const [text, value] of cells) {
      const td = document.createElement('td');
      td.textContent = text;
      td.dataset.value = String(value);
      if (cells.length === 1) td.colSpan = 4;
      tr.append(td);
    }
    return tr;
  });
  body.replaceChildren(...trs);
  document.querySelector('#model-same').hidden = !rows.some((r) => r.sameAs);
}

/**
 * What the oracle knows that the policies do not, and whether it is the best here, from the
 * numbers: the lowest KL among the rows that drop tokens at B (the full cache less token 0
 * and KIVI keep every other token: not among them).
 */
function writeOracle(rows, lang) {
  const oracle = rows.find((r) => r.name === 'oracle' && !r.error);
  const others = rows.filter((r) => !r.error && !['oracle', 'drop-first', 'kivi'].includes(r.name));
  if (!oracle || !others.length) {
    figure('model-oracle', '', '');
    return;
  }
  const best = others.reduce((a, b) => (b.kl < a.kl ? b : a));
  const beaten = best.kl < oracle.kl;
  figure('model-oracle', beaten ? best.name : 'oracle', fill(t(lang, beaten ? 'model.oracle.beaten' : 'model.oracle.best'), {
    oracle: nats(oracle.kl), best: t(lang, `policy.${best.name}`), kl: nats(best.kl),
  }));
}

/** The sinks' lesson, worded from the numbers: whether this model pays for dropping them. */
function writeSinks(rows, lang) {
  const kl = (name) => rows.find((r) => r.name === name)?.kl ?? null;
  const [window, streaming, first] = [kl('window-only'), kl('streaming-llm'), kl('drop-first')];
  if (window === null || streaming === null || first === null) {
    figure('model-sinks', '', '');
    return;
  }
  const ratio = streaming > 0 ? window / streaming : Infinity;
  // (5x: the compression issue's lesson, the window alone against StreamingLLM; below 1.5x the
  // sinks are worth little: "barely" would be contradicted by a ratio of 3)
  const key = ratio >= 5 ? 'model.sinks.yes' : ratio >= 1.5 ? 'model.sinks.some' : 'model.sinks.no';
  figure('model-sinks', ratio, fill(t(lang, key), {
    window: nats(window), streaming: nats(streaming), ratio: Number.isFinite(ratio) ? ratio.toFixed(1) : '∞', first: nats(first),
  }));
}

function writeAllocation(a, ctx) {
  if (a.Ok === null) {
    figure('model-allocation', '', t(ctx.lang, 'model.allocation.none'));
    return;
  }
  if (a.Err) {
    figure('model-allocation', '', a.Err);
    return;
  }
  const { uniform, mass } = a.Ok;
  const layer = ctx.shown?.layer ?? 0;
  const shown = ctx.settings?.heads_budget === 'mass' ? mass : uniform;
  figure('model-allocation', `${uniform.meanKl}/${mass.meanKl}`, fill(t(ctx.lang, 'model.allocation'), {
    uniform: nats(uniform.meanKl), mass: nats(mass.meanKl), layer, counts: (shown.keptCounts[layer] ?? []).join(', '),
  }));
}

function writeModelLevers(l, lang) {
  const names = [['bits', 'fewerBits'], ['tokens', 'fewerTokens']];
  if (l.Err) {
    for (const [name] of names) for (const c of ['saves', 'cost', 'per']) figure(`model-lever-${name}-${c}`, '', '—');
    figure('model-verdict', '', l.Err);
    return;
  }
  const r = l.Ok;
  for (const [name, key] of names) {
    const c = r[key];
    if (!c || c.klPerKib === null) {
      const na = t(lang, 'lever.impossible');
      for (const part of ['saves', 'cost', 'per']) figure(`model-lever-${name}-${part}`, 0, na);
      continue;
    }
    const saved = r.bytes - c.bytes;
    figure(`model-lever-${name}-saves`, saved, bytes(saved));
    figure(`model-lever-${name}-cost`, c.kl, `${nats(r.kl)} → ${nats(c.kl)} nats`);
    figure(`model-lever-${name}-per`, c.klPerKib, `${c.klPerKib >= 0 ? '+' : '−'}${nats(Math.abs(c.klPerKib))} nats / KiB`);
  }
  // (a lever that did not raise the KL is said to be free, not to "add less")
  const pulled = r.verdict && r[r.verdict === 'bits' ? 'fewerBits' : 'fewerTokens'];
  const free = pulled && pulled.kl <= r.kl;
  const key = `model.verdict.${r.verdict ?? 'none'}${free ? '.free' : ''}`;
  figure('model-verdict', r.verdict ?? '', fill(t(lang, key), { delta: free ? nats(pulled.kl - r.kl) : '' }));
}
