// The few DOM helpers every room uses.

/** The first element matching `sel`. */
export const $ = (sel) => document.querySelector(sel);

/** Saves `blob` as a file named `name` (an export, a chart's PNG). */
export function download(name, blob) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}
