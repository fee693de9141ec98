// The page's side of the engine (engine.js): a Web Worker when the browser can draw on
// transferred canvases (OffscreenCanvas), otherwise the same engine on the page's own thread.
// Either way `call(op, payload)` returns a promise of the reply, and progress messages go to
// `onProgress(id, stage)`. The wasm build (simd128 or scalar) is chosen here, on the page, by
// feature detection.

import { wasmBuild } from './wasm.js';

/** True when charts can be drawn from a worker. */
export function workerPossible() {
  return typeof Worker !== 'undefined'
    && typeof OffscreenCanvas !== 'undefined'
    && typeof HTMLCanvasElement !== 'undefined'
    && 'transferControlToOffscreen' in HTMLCanvasElement.prototype;
}

/** The compiled wasm module of build `build`, or null if it cannot be compiled here. */
async function compileWasm(build) {
  const url = new URL(build === 'simd128' ? './pkg-simd/kvlab_bg.wasm' : './pkg/kvlab_bg.wasm', import.meta.url);
  try {
    return await WebAssembly.compileStreaming(fetch(url));
  } catch {
    return null;
  }
}

function toError(e) {
  const err = new Error(e?.message ?? String(e));
  err.field = e?.field ?? null;
  err.refusal = e?.refusal ?? null;
  err.refusalOf = e?.refusalOf ?? null;
  return err;
}

/** Connects to an engine; returns `{mode, call, attach}`. */
export async function connect(onProgress) {
  const waiting = new Map(); // request id -> {resolve, reject}
  let next = 1;
  const receive = (m) => {
    if (m.progress) {
      onProgress(m.id, m.progress);
      return;
    }
    if (m.partial) {
      waiting.get(m.id)?.onPartial?.(m.partial);
      return;
    }
    const w = waiting.get(m.id);
    if (!w) return;
    waiting.delete(m.id);
    if (m.ok) w.resolve(m.value);
    else w.reject(toError(m.error));
  };
  let send;
  let worker = null;
  const failAll = (err) => {
    for (const w of waiting.values()) w.reject(err);
    waiting.clear();
  };
  const build = wasmBuild();
  // The module is fetched and compiled here, from the start, while the worker starts (in
  // parallel); the worker gets the compiled module. Null if that fails (e.g. a server that sends
  // the wasm without its MIME type): the engine then fetches it itself.
  const compiled = compileWasm(build);
  const startWorker = () => {
    const started = new Worker(new URL(`./worker.js?wasm=${build}`, import.meta.url), { type: 'module' });
    worker = started;
    compiled.then((module) => {
      try {
        started.postMessage({ wasmModule: module });
      } catch {
        started.postMessage({ wasmModule: null }); // cannot be sent here: the worker fetches it
      }
    });
    worker.onmessage = (e) => receive(e.data);
    worker.onerror = (e) => {
      // The worker script itself failed (not a request): every waiting request fails with it.
      failAll(toError({ message: e.message || 'the worker could not start', field: 'module' }));
    };
    send = (message, transfer) => worker.postMessage(message, transfer);
  };
  const mode = workerPossible() ? 'worker' : 'page';
  if (mode === 'worker') {
    startWorker();
  } else {
    const { createEngine, loadWasm } = await import('./engine.js');
    const wasm = await loadWasm(build, compiled);
    const handle = createEngine((message) => receive(message), wasm, build, {}, (await compiled) ? 'page' : 'engine');
    let chain = Promise.resolve();
    send = (message) => {
      chain = chain.then(() => handle(message));
    };
  }
  /** Sends a request; `onPartial(value)` gets any early part of the reply (see engine.js init). */
  const call = (op, payload = {}, transfer = [], onPartial = null) => new Promise((resolve, reject) => {
    const id = next;
    next += 1;
    waiting.set(id, { resolve, reject, onPartial });
    try {
      send({ id, op, ...payload }, transfer);
    } catch (e) {
      waiting.delete(id);
      reject(toError(e));
    }
  });
  /** Hands chart canvases (`{name: canvas}`) to the engine: transferred to a worker. */
  const attach = (canvases) => {
    if (mode === 'page') return call('attach', { canvases });
    const offscreen = {};
    for (const [name, canvas] of Object.entries(canvases)) {
      offscreen[name] = canvas.transferControlToOffscreen();
    }
    return call('attach', { canvases: offscreen }, Object.values(offscreen));
  };
  /**
   * Stops the worker mid-computation and starts a fresh one (no data, no canvases: the page
   * sets it up again). Waiting requests fail with an error whose `stopped` is true. Only in
   * worker mode (a computation on the page's thread cannot be interrupted).
   */
  const restart = () => {
    if (mode !== 'worker') return false;
    worker.terminate();
    const err = toError({ message: 'stopped', field: null });
    err.stopped = true;
    failAll(err);
    startWorker();
    return true;
  };
  return { mode, build, call, attach, restart };
}
