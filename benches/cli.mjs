// What the benchmark scripts share: `--name value` options (`option` for trace.mjs and
// control.mjs, `flags` for page.mjs and wasm.mjs, which refuse unknown ones), the served page
// they drive (KVLAB_URL) and the Chromium they launch (KVLAB_CHROMIUM).

/** The value after `--name` on the command line, or `fallback`. */
export function option(name, fallback) {
  const args = process.argv.slice(2);
  const i = args.indexOf(`--${name}`);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
}

/**
 * The command-line arguments `argv` one by one, each as `[arg, next]`: `next()` takes the value
 * after it (and throws when there is none).
 */
export function* flags(argv) {
  for (let i = 0; i < argv.length; i += 1) {
    const a = argv[i];
    yield [a, () => {
      i += 1;
      if (i >= argv.length) throw new Error(`${a} needs a value`);
      return argv[i];
    }];
  }
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
