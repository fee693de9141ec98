// Section 5's needle test: the learner's fact in a King James passage, asked at its end; the
// answer each cache gives (full, every policy at the settings in use, KIVI), byte by byte;
// the strip of which bytes a cache kept; and the accuracy chart's words, the ordering it shows
// with its ties. The engine asks and measures (`needle`, `modelPart` `needle` and `accuracy`);
// this words what it measured.

import { t, fill } from '../i18n.js';
import { POLICY_OF } from '../fields.js';
import { $ } from '../lib/dom.js';
import { fmt, num } from '../lib/format.js';
import { app } from '../app/store.js';
import { request } from '../app/requests.js';
import { errorSlot, reportError } from '../app/errors.js';
import { recordUrl } from '../app/url.js';
import { figure } from './common.js';

/** The fact asked for, as the controls say it. */
function asking() {
  return {
    key: $('#needle-key').value,
    value: $('#needle-value').value,
    distance: Number($('#needle-distance').value),
    before: $('#needle-before').checked,
    // (the learner's own text around the fact: the data section's prompt)
    text: $('#needle-own').checked ? $('#model-prompt').value : null,
  };
}

/**
 * Asks the engine for the learner's fact and every cache's answer; a fact it refuses is said
 * beside the control that caused it (the distance for one that does not fit), the last answered
 * fact kept on screen.
 */
export async function askNeedle() {
  const ask = asking();
  const start = performance.now();
  const seq = (app.needleSeq = (app.needleSeq ?? 0) + 1);
  for (const id of ['#needle-key', '#needle-value', '#needle-distance', '#needle-own']) {
    const slot = errorSlot($(id));
    if (slot) slot.hidden = true;
    $(id).removeAttribute('aria-invalid');
  }
  try {
    const r = await request('needle', ask);
    if (seq !== app.needleSeq) return; // (a newer ask is on its way)
    performance.measure('kvlab:model:needle', { start: performance.now() - r.ms, duration: r.ms });
    const beforeChanged = app.needleAsk?.before !== ask.before;
    app.needleAsk = ask;
    app.needle = { case: r.case, answers: r.answers };
    app.needleFor = app.model;
    const slider = $('#needle-distance');
    if (Number(slider.max) !== r.case.most) slider.max = String(r.case.most);
    writeNeedle({ lang: app.lang, embed: app.good?.embed });
    performance.mark('kvlab:needle:answered'); // (the tests and the benchmark wait for it)
    // Ask to the frame painted with every answer (the next animation frame starts after it):
    // the needle issue's latency, benches/model.mjs.
    window.requestAnimationFrame(() => performance.measure('kvlab:needle:ask', { start, end: performance.now() }));
    if (beforeChanged) restartAccuracy();
    recordUrl(false); // (the link carries the fact)
  } catch (e) {
    if (seq !== app.needleSeq) return;
    const f = e?.refusal;
    const at = { long: '#needle-distance', text: '#needle-own' }[f?.kind]
      ?? (f?.what === 'value' ? '#needle-value' : '#needle-key');
    reportError($(at), e);
  }
}

/** The accuracy chart's curves, measured again (the question read before or after changed). */
let restartAccuracy = () => {};
export function onAccuracyRestart(fn) {
  restartAccuracy = fn;
}

/** Takes every cache's answer at the settings now in use (with the headline, or as the first detail). */
export function tookNeedleAnswers(answers) {
  if (!answers || !app.needle) return;
  app.needle = { ...app.needle, answers };
}

/** The bytes of `text` as spans: kept shares shaded in quarters, the fact marked, the question underlined. */
function strip(c, kept) {
  const out = document.createDocumentFragment();
  let run = null;
  for (let i = 0; i < c.answer[0]; i += 1) {
    // (past the compressed prefill: read after the compression, never dropped)
    const share = i < kept.length ? kept[i] : 100;
    const cls = [`k${Math.round(share / 25) * 25}`];
    if (i >= c.fact[0] && i < c.fact[1]) cls.push('fact');
    if (i >= c.asked) cls.push('question');
    if (i >= kept.length) cls.push('after');
    const name = cls.join(' ');
    if (!run || run.className !== name) {
      run = document.createElement('span');
      run.className = name;
      out.append(run);
    }
    run.textContent += c.text[i] === '\n' ? '⏎' : c.text[i];
  }
  return out;
}

/** The answer's bytes, each marked right or wrong. */
function answerCell(a, lang) {
  const td = document.createElement('td');
  td.className = 'answer';
  [...a.said].forEach((ch, i) => {
    const b = document.createElement('span');
    b.className = a.right[i] ? 'right' : 'wrong';
    b.textContent = ch === '\n' ? '⏎' : ch;
    td.append(b);
  });
  const mark = document.createElement('span');
  mark.className = a.correct ? 'verdict-right' : 'verdict-wrong';
  mark.textContent = a.correct ? ' ✓' : ' ✗';
  mark.title = t(lang, a.correct ? 'needle.right' : 'needle.wrong');
  td.append(mark);
  td.dataset.value = a.said;
  return td;
}

/** Section 5's needle block from `app.needle` (its fact, answers and strip) and `app.needleSummary`. */
export function writeNeedle(ctx) {
  const { lang } = ctx;
  if (!app.needle) return;
  const { case: c, answers } = app.needle;
  const truth = c.text.slice(c.answer[0], c.answer[1]);
  const method = POLICY_OF[app.good?.method] ?? 'kivi';
  const shown = answers.find((a) => a.name === app.needleStrip) ?? answers.find((a) => a.name === method) ?? answers[0];
  const prompt = $('#needle-prompt');
  prompt.replaceChildren(strip(c, shown.kept));
  prompt.dataset.fact = c.text.slice(c.fact[0], c.fact[1]);
  prompt.dataset.shows = shown.name;
  figure('needle-strip', shown.name, fill(t(lang, 'needle.strip'), {
    policy: t(lang, `policy.${shown.name}`),
    after: shown.kept.length < c.answer[0] ? t(lang, 'needle.strip.after') : '',
  }));
  const head = document.createElement('tr');
  head.className = 'truth';
  const th = document.createElement('th');
  th.scope = 'row';
  th.colSpan = 4;
  th.textContent = fill(t(lang, 'needle.fact'), { value: truth });
  head.append(th);
  const rows = answers.map((a) => {
    const tr = document.createElement('tr');
    tr.dataset.policy = a.name;
    tr.dataset.correct = String(a.correct);
    if (a.name === shown.name) tr.className = 'current';
    const name = document.createElement('th');
    name.scope = 'row';
    const pick = document.createElement('button');
    pick.type = 'button';
    pick.className = 'link';
    pick.textContent = t(lang, `policy.${a.name}`);
    pick.addEventListener('click', () => {
      app.needleStrip = a.name;
      writeNeedle(ctx);
    });
    name.append(pick);
    const kept = document.createElement('td');
    kept.textContent = fmt.pct(a.keptValue);
    kept.dataset.value = String(a.keptValue);
    const r = document.createElement('td');
    r.textContent = fmt.ratio(a.rOverall);
    r.dataset.value = String(a.rOverall);
    tr.append(name, answerCell(a, lang), kept, r);
    return tr;
  });
  $('#needle-rows').replaceChildren(head, ...rows);
  // (at B <= r the policies with a recent window keep the same bytes: one answer, said)
  const { budget: b, recent: r } = app.good ?? {};
  figure('needle-same', b <= r ? `${b}/${r}` : '', b <= r ? fill(t(lang, 'needle.same'), { b, r }) : '');
  writeOrder(ctx);
}

/**
 * The line under the accuracy chart: at the chart's budget nearest the B in use, the policies
 * from most facts recalled to fewest, grouped where they differ by less than two standard
 * errors over the cases (a tie, said with the spread), and the full cache's share.
 */
export function writeOrder(ctx) {
  const s = app.needleSummary;
  const policies = (s?.curves ?? []).filter((c) => c.name !== 'full' && c.name !== 'current');
  const full = s?.curves.find((c) => c.name === 'full');
  if (!full || !policies.length) {
    figure('needle-order', '', fill(t(ctx.lang, 'needle.order.pending'), { n: 16 }));
    return;
  }
  const n = s.cases;
  const b = app.good?.budget ?? 32;
  // (the chart's budgets below the prefill: the one nearest B on the log scale)
  const budgets = policies[0].points.slice(0, -1).map((p) => p.budget);
  const at = budgets.reduce((best, x) => (Math.abs(Math.log(x / b)) < Math.abs(Math.log(best / b)) ? x : best), budgets[0]);
  const rows = policies.map((c) => ({ name: c.name, p: c.points.find((x) => x.budget === at) }))
    .filter((x) => x.p).sort((x, y) => y.p.recalled - x.p.recalled);
  const se = (p) => Math.sqrt((p * (1 - p)) / n);
  const groups = [];
  let widest = 0;
  for (const x of rows) {
    const g = groups.at(-1);
    const top = g?.[0].p.recalled;
    // (two standard errors of the difference of two shares over the same n cases)
    const spread = g ? 2 * Math.sqrt(se(top) ** 2 + se(x.p.recalled) ** 2) : 0;
    // (equal shares are a tie whatever the spread: two policies at 100% have none)
    if (g && (top === x.p.recalled || top - x.p.recalled < spread)) {
      g.push(x);
      widest = Math.max(widest, spread);
    } else {
      groups.push([x]);
    }
  }
  const pct = (v) => `${Math.round(100 * v)}%`;
  const words = groups.map((g) => {
    const names = g.map((x) => t(ctx.lang, `policy.${x.name}`)).join(ctx.lang === 'zh' ? '、' : ', ');
    const lo = pct(g.at(-1).p.recalled);
    const hi = pct(g[0].p.recalled);
    return `${names} ${lo === hi ? hi : `${lo}–${hi}`}`;
  }).join(' > ');
  const r = rows.reduce((sum, x) => sum + x.p.rOverall, 0) / rows.length;
  let text = fill(t(ctx.lang, 'needle.order'), { budget: at, r: num(Number(r.toPrecision(2))), n, groups: words, full: pct(full.points[0].recalled) });
  if (groups.some((g) => g.length > 1)) text += ` ${fill(t(ctx.lang, 'needle.order.ties'), { n, se: pct(widest / 2) })}`;
  // (the oracle reads the answer's own attention: where even it is not in the first group, said)
  const oracle = groups.findIndex((g) => g.some((x) => x.name === 'oracle'));
  if (oracle > 0) {
    text += ` ${fill(t(ctx.lang, 'needle.order.oracle'), { best: groups[0].map((x) => t(ctx.lang, `policy.${x.name}`)).join(ctx.lang === 'zh' ? '、' : ', ') })}`;
  }
  figure('needle-order', `${at}|${rows.map((x) => `${x.name}:${x.p.recalled}`).join(',')}`, text);
}

/** A new fact to ask (`Model.needle_draw`): the name and number fields filled, then asked. */
async function drawFact(button) {
  app.needleDraws = (app.needleDraws ?? 0) + 1;
  try {
    const [key, value] = await request('needleDraw', { seed: app.needleDraws });
    $('#needle-key').value = key;
    $('#needle-value').value = value;
    await askNeedle();
  } catch (e) {
    reportError(button, e);
  }
}

/**
 * Wires the fact's controls: a change of the name, number or distance asks again once typing
 * rests; the query-aware box and "New fact" at once.
 */
export function wireNeedle() {
  let timer = 0;
  const soon = () => {
    window.clearTimeout(timer);
    timer = window.setTimeout(askNeedle, 200);
  };
  for (const id of ['#needle-key', '#needle-value']) $(id).addEventListener('input', soon);
  const distance = $('#needle-distance');
  distance.addEventListener('input', () => {
    distance.nextElementSibling.value = distance.value;
    soon();
  });
  $('#needle-before').addEventListener('change', askNeedle);
  $('#needle-own').addEventListener('change', askNeedle);
  $('#needle-new').addEventListener('click', (ev) => drawFact(ev.target));
}

/** The first fact, drawn when section 5 first shows the model's figures. */
export async function firstNeedle() {
  if (app.needle || app.needleSeq) return;
  if (!$('#needle-key').value) await drawFact($('#needle-new'));
  else await askNeedle();
}
