// Numbers as the page writes them: the one place that formats a count, a ratio or bytes (the
// formulas, the sections' figures and the upload's words all read from here). It computes
// nothing: every value comes from Rust's figures.

/** A short number for formulas: 4 significant digits, plain integers as they are. */
export function num(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return '—';
  if (v === Infinity) return '∞';
  if (Number.isInteger(v) && Math.abs(v) < 1e9) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(3);
  return String(Number(v.toPrecision(4)));
}

/** Bytes as text with a binary unit (as Rust's `render::budget::bytes_text` writes them). */
export function bytes(b) {
  if (b < 1024) return `${b} B`;
  if (b < 1024 ** 2) return `${(b / 1024).toFixed(1)} KiB`;
  if (b < 1024 ** 3) return `${(b / 1024 ** 2).toFixed(2)} MiB`;
  return `${(b / 1024 ** 3).toFixed(2)} GiB`;
}

/** GiB as text, a small cache in a smaller unit (not '0.000 GiB'). */
export const gib = (v) => (v < 0.01 ? bytes(Math.round(v * 1024 ** 3)) : `${v.toFixed(3)} GiB`);

/**
 * An integer with thousands separators (1,234,567). Not `toLocaleString`: its first call loads
 * locale data, ~30 ms on the page's thread.
 */
export function grouped(n) {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** The figures' formats: errors, ratios, decibels, shares and nats. */
export const fmt = {
  err: (v) => (Number.isFinite(v) ? v.toPrecision(3) : String(v)),
  ratio: (v) => `${num(v)}×`,
  db: (v) => (v === Infinity || v === null ? '∞ dB' : `${v.toFixed(1)} dB`),
  pct: (v) => `${(100 * v).toFixed(1)}%`,
  /** Nats with three significant digits (tiny ones in powers of ten: KL of 1e-9 is not 0). */
  nats: (v) => {
    if (v === null || v === undefined || !Number.isFinite(v)) return '—';
    if (v !== 0 && Math.abs(v) < 1e-3) return v.toExponential(2);
    return v.toPrecision(3);
  },
};
