// Section 2's figures: the quantization's errors, ratios and bounds, and the KIVI panel.

import { t, fill } from '../i18n.js';
import { bytes, num, fmt } from '../lib/format.js';
import { figure } from './common.js';

/** Writes section 2's figures of `f` (the engine's figures). */
export function writeQuant(f, ctx) {
  const q = f.quant;
  const st = q.stats;
  figure('max-abs-error', st.max_abs, fmt.err(st.max_abs));
  figure('mean-abs-error', st.mean_abs, fmt.err(st.mean_abs));
  figure('rmse', st.rmse, fmt.err(st.rmse));
  figure('snr-db', st.snr_db ?? Infinity, fmt.db(st.snr_db));
  figure('r-quant', st.compression_ratio, fmt.ratio(st.compression_ratio));
  figure('r-quant-no-meta', st.compression_ratio_no_meta, fmt.ratio(st.compression_ratio_no_meta));
  figure('bound-max', q.boundMax, fmt.err(q.boundMax));
  const hold = q.elementBoundHolds && q.rowBoundHolds;
  figure('bounds-hold', hold, t(ctx.lang, hold ? 'bounds.yes' : 'bounds.no'));
}

/** Writes the KIVI panel's figures of `k`. */
export function writeKivi(k, ctx) {
  for (const [name, st, err] of [['k', k.bytes.keys, k.keyError], ['v', k.bytes.values, k.valueError]]) {
    figure(`kivi-${name}-codes`, st.codes, bytes(st.codes));
    figure(`kivi-${name}-meta`, st.scales + st.zero_points, bytes(st.scales + st.zero_points));
    figure(`kivi-${name}-res`, st.residual, `${bytes(st.residual)} (${st.residual_tokens})`);
    figure(`kivi-${name}-total`, st.total, bytes(st.total));
    figure(`kivi-${name}-bits`, st.effective_bits, num(st.effective_bits));
    figure(`kivi-${name}-rmse`, err.rmse, fmt.err(err.rmse));
  }
  figure('kivi-ebits', k.bytes.effective_bits, `${num(k.bytes.effective_bits)} ${t(ctx.lang, 'kivi.bits-per')}`);
  figure('kivi-ratio', k.bytes.compression_ratio, `${fmt.ratio(k.bytes.compression_ratio)} ${t(ctx.lang, 'kivi.vs-fp16')}`);
  const [pc, pt] = k.keysChannelVsToken;
  for (const [name, g] of [['pc', pc], ['pt', pt]]) {
    figure(`kivi-${name}-rmse`, g.rmse, fmt.err(g.rmse));
    figure(`kivi-${name}-max`, g.maxAbs, fmt.err(g.maxAbs));
    figure(`kivi-${name}-rel`, g.meanChannelRelativeRmse, fmt.pct(g.meanChannelRelativeRmse));
  }
  // The caption says what the table shows: which granularity wins on which measure (the
  // engine's verdict), and whether these keys have the outlier channels that decide it.
  const v = k.keysVerdict;
  const tr = (key) => t(ctx.lang, key);
  const measures = [['rmse', v.rmse], ['max', v.maxAbs], ['rel', v.relative]];
  const won = (side) => measures.filter(([, w]) => w === side).map(([m]) => tr(`kivi.m.${m}`)).join(tr('kivi.and'));
  const [channel, token] = [won('channel'), won('token')];
  const which = channel && token ? 'split' : channel ? 'channel' : token ? 'token' : 'tie';
  figure('kivi-verdict', `${v.rmse}/${v.maxAbs}/${v.relative}/${v.outliers}`,
    `${fill(tr(`kivi.verdict.${which}`), { channel, token })} ${fill(tr(v.outliers ? 'kivi.why.outliers' : 'kivi.why.none'), { ratio: v.outlierRatio.toFixed(1) })}`);
}

