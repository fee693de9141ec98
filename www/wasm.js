// The engine's WebAssembly modules: which build this browser runs (simd128 or scalar), the
// page's module, and the upload module (the file readers and kvlab's trained model), fetched on
// the first upload or the first run of the model. URLs are relative to this file, which lies
// beside them (and so does every bundle `cargo xtask dist` makes of it).

/** Bytes of a module using a SIMD instruction (`i8x16.popcnt`): valid only with simd128. */
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0,
  10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11]);

/** Which build this browser runs: 'simd128' where it validates a SIMD module, else 'scalar'. */
export function wasmBuild() {
  try {
    return WebAssembly.validate(SIMD_PROBE) ? 'simd128' : 'scalar';
  } catch {
    return 'scalar';
  }
}

/**
 * Loads and instantiates build `build` (URLs relative to this file), from `module` (a compiled
 * `WebAssembly.Module`, or a promise of one) when given; returns the bindings.
 */
export async function loadWasm(build, module = null) {
  const [mod, compiled] = await Promise.all([
    build === 'simd128' ? import('./pkg-simd/kvlab.js') : import('./pkg/kvlab.js'),
    module,
  ]);
  await mod.default(compiled ? { module_or_path: compiled } : undefined);
  return mod;
}

/**
 * The upload module's file store (`Uploads`), fetched and instantiated on the first call; later
 * calls return the same store (the files uploaded so far stay in the upload module's memory).
 * When the module cannot be fetched (offline before it was ever loaded, a host missing the
 * file), the error says so and the next upload tries again: under a new URL, because a module
 * that failed to load stays failed under its own URL for the worker's lifetime.
 */
let uploadsPromise = null;
let uploadsAttempts = 0;
let uploadExports = null; // the upload module's exports (its Model class too), once loaded
export function uploadsModule() {
  if (!uploadsPromise) {
    uploadsAttempts += 1;
    // (its simd128 build where the browser has SIMD: the model runs twice as fast in it)
    const folder = wasmBuild() === 'simd128' ? 'pkg-upload-simd' : 'pkg-upload';
    const url = new URL(`./${folder}/kvlab_upload.js`, import.meta.url);
    if (uploadsAttempts > 1) url.searchParams.set('attempt', String(uploadsAttempts));
    uploadsPromise = (async () => {
      try {
        const mod = await import(url.href);
        await mod.default();
        uploadExports = mod;
        return new mod.Uploads();
      } catch (e) {
        uploadsPromise = null;
        // (with its fields, which the page words in its language: upload.refused.readersLost)
        const refusal = { kind: 'readersLost', module: url.pathname.split('/').slice(-2).join('/'), detail: e?.message ?? String(e) };
        throw Object.assign(new Error(`The file readers (${refusal.module}) could not be loaded: `
          + `${refusal.detail}. Check the connection, then upload the file again.`), { field: 'file', refusal, refusalOf: 'upload' });
      }
    })();
  }
  return uploadsPromise;
}

/**
 * kvlab's trained model (`model/`: its card and f16 weights, ~1.6 MB), run by the upload
 * module: fetched and loaded on its first use, never at start. A failed fetch is said, and the
 * next use tries again.
 */
let modelPromise = null;

/**
 * The model's weights (`model/model.safetensors`, 1.6 MB), said as `model:<share>` progress
 * (every 5% of the bytes) while they arrive, so the page shows how much is in. XMLHttpRequest,
 * not a fetch body's stream: Chromium reported a streamed fetch read to its end as aborted on
 * a server keeping its connection open (ERR_ABORTED, the bytes all there). A server that
 * compresses them without a length gives no share: the page then says nothing until they are in.
 */
function weightsWithProgress(progress) {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open('GET', new URL('./model/model.safetensors', import.meta.url));
    x.responseType = 'arraybuffer';
    let said = -1;
    x.onprogress = (e) => {
      if (!e.lengthComputable || !e.total) return;
      const share = Math.min(1, Math.floor((20 * e.loaded) / e.total) / 20);
      if (share !== said) progress(`model:${share}`);
      said = share;
    };
    x.onload = () => (x.status === 200 ? resolve(new Uint8Array(x.response))
      : reject(new Error(`model.safetensors: HTTP ${x.status}`)));
    x.onerror = () => reject(new Error('model.safetensors: the request failed'));
    x.send();
  });
}
/** The Model, once loaded (a live binding: the engine reads it as it is now). */
export let loadedModel = null;

/** The model, fetched and loaded on its first use; `progress(stage)` hears of its weights. */
export function theModel(progress = () => {}) {
  if (!modelPromise) {
    modelPromise = (async () => {
      await uploadsModule();
      const card = async () => {
        const r = await fetch(new URL('./model/model.json', import.meta.url));
        if (!r.ok) throw new Error(`model.json: HTTP ${r.status}`);
        return r.text();
      };
      try {
        const [text, weights] = await Promise.all([card(), weightsWithProgress(progress)]);
        loadedModel = new uploadExports.Model(text, weights);
        return loadedModel;
      } catch (e) {
        modelPromise = null;
        throw Object.assign(new Error(`The model could not be loaded: ${e?.message ?? e}. `
          + 'Check the connection, then run it again.'), { field: 'model' });
      }
    })();
  }
  return modelPromise;
}

/**
 * The held-out text beside the model (`model/heldout.txt`: King James verses the trainer never
 * read), the needle test's filler: fetched on its first use.
 */
let heldoutPromise = null;
export function heldout() {
  heldoutPromise ??= (async () => {
    const r = await fetch(new URL('./model/heldout.txt', import.meta.url));
    if (!r.ok) {
      heldoutPromise = null;
      throw Object.assign(new Error(`model/heldout.txt: HTTP ${r.status}`), { field: 'model' });
    }
    return r.text();
  })();
  return heldoutPromise;
}
