// Section 3b's figures: the policy table, one row per policy, and what its rows measure.

import { t, fill } from '../i18n.js';
import { fmt } from '../lib/format.js';
import { figure, said } from './common.js';

/** The policy table (`s`: the steps S of the data): text only (no HTML), one row per policy; cells are rewritten in place. */
export function writeCompare(c, s, ctx) {
  const steps = (n) => t(ctx.lang, n === 1 ? 'unit.step' : 'unit.steps');
  // (with steps held out, the table's mass retained is over other steps than section 3's)
  const rows = c.evalRows < s
    ? fill(said(ctx, 'compare.rows'), { o: c.observedRows, oSteps: steps(c.observedRows), e: c.evalRows, eSteps: steps(c.evalRows), s })
    : fill(said(ctx, 'compare.rows.all'), { s, sSteps: steps(s) });
  figure('compare-rows', `${c.observedRows}/${c.evalRows}`,
    rows + (c.outputError ? '' : ` ${t(ctx.lang, 'compare.no-output-error')}`));
  const body = document.querySelector('#compare-rows');
  const COLS = ['kept', 'mass-mean', 'mass-worst', 'out-mean', 'out-worst', 'r-token'];
  const rowsOf = (r) => {
    const q = r.quality;
    if (!q) return [[r.error ?? '', '']];
    const pct = (v) => (v === null ? '—' : fmt.pct(v));
    return [[String(q.kept), q.kept], [fmt.pct(q.mass_mean), q.mass_mean], [fmt.pct(q.mass_worst), q.mass_worst],
      [pct(q.output_error_mean), q.output_error_mean], [pct(q.output_error_worst), q.output_error_worst],
      [fmt.ratio(q.r_token), q.r_token]];
  };
  const same = body.rows.length === c.rows.length
    && c.rows.every((r, i) => body.rows[i].dataset.policy === r.policy
      && body.rows[i].cells.length === 1 + rowsOf(r).length + MODEL_COLS.length
      && body.rows[i].dataset.lang === ctx.lang);
  if (!same) {
    body.replaceChildren(...c.rows.map((r) => {
      const tr = document.createElement('tr');
      tr.dataset.policy = r.policy;
      tr.dataset.lang = ctx.lang;
      const th = document.createElement('th');
      th.scope = 'row';
      th.textContent = t(ctx.lang, `policy.${r.policy}`);
      tr.append(th);
      rowsOf(r).forEach((_, i, all) => {
        const td = document.createElement('td');
        td.dataset.col = COLS[i];
        if (all.length === 1) td.colSpan = 6;
        tr.append(td);
      });
      for (const col of MODEL_COLS) {
        const td = document.createElement('td');
        td.dataset.col = col;
        td.hidden = true;
        tr.append(td);
      }
      return tr;
    }));
  }
  c.rows.forEach((r, i) => {
    rowsOf(r).forEach(([text, value], k) => {
      const td = body.rows[i].cells[k + 1];
      const v = String(value);
      // Unchanged cells are left alone: every DOM write costs layout.
      if (td.dataset.value !== v) td.dataset.value = v;
      if (td.textContent !== text) td.textContent = text;
    });
  });
  writeCompareModel(ctx.model ?? null);
}

const MODEL_COLS = ['model-kl', 'model-top1'];

/**
 * The real model's columns of the policy table and its trade-off chart, shown while the model is
 * the data (`model`: `{rows, stale}`, `rows` section 5's policies on the model, null until they
 * are measured; `model` null: hidden). The cells say "…" until the model's rows arrive, and are
 * dimmed while they belong to an earlier setting.
 */
export function writeCompareModel(model) {
  const on = model !== null;
  const show = (el) => {
    if (el.hidden === on) el.hidden = !on;
  };
  document.querySelectorAll('#compare th[data-col^="model-"], #compare-rows td[data-col^="model-"]').forEach(show);
  show(document.querySelector('#compare-model-note'));
  show(document.querySelector('#compare-model'));
  if (!on) return;
  const byName = new Map((model.rows ?? []).map((r) => [r.name, r]));
  for (const tr of document.querySelector('#compare-rows').rows) {
    const r = byName.get(tr.dataset.policy);
    const cells = [['model-kl', r?.kl], ['model-top1', r?.top1]];
    for (const [col, v] of cells) {
      const td = tr.querySelector(`td[data-col="${col}"]`);
      if (!td) continue;
      const text = v === undefined || v === null ? (r?.error ? '—' : '…')
        : col === 'model-kl' ? fmt.nats(v) : fmt.pct(v);
      if (td.textContent !== text) td.textContent = text;
      const value = String(v ?? '');
      if (td.dataset.value !== value) td.dataset.value = value;
      td.classList.toggle('stale', Boolean(model.stale));
    }
  }
}
