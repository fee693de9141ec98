// What the by-hand benchmark scripts (trace.mjs, control.mjs) share: their `--name value`
// options, the served page they drive (KVLAB_URL) and the Chromium they launch (KVLAB_CHROMIUM).

/** The value after `--name` on the command line, or `fallback`. */
export function option(name, fallback) {
  const args = process.argv.slice(2);
  const i = args.indexOf(`--${name}`);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
}

/** KVLAB_URL (the served dist/); exits with a message when it is not set. */
export function servedUrl() {
  const base = process.env.KVLAB_URL;
  if (!base) {
    console.error('set KVLAB_URL to the served dist/, e.g. http://127.0.0.1:8123/');
    process.exit(2);
  }
  return base;
}

/** The Chromium to launch: KVLAB_CHROMIUM, else the system's. */
export const CHROMIUM = process.env.KVLAB_CHROMIUM || '/usr/bin/chromium';
