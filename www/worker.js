// The page's Web Worker: loads the WebAssembly module and runs the engine (engine.js), so
// computing and drawing never block the page. Requests are handled strictly one after another.
// The page chooses the wasm build (`?wasm=simd128` or `?wasm=scalar` on this script's URL).

import { createEngine, loadWasm, epochNow } from './engine.js';

const started = epochNow();

const build = new URL(self.location.href).searchParams.get('wasm') === 'simd128' ? 'simd128' : 'scalar';
const post = (message, transfer) => self.postMessage(message, transfer ?? []);
// The page sends the compiled module first (`{wasmModule}`; null: fetch it here).
let gotModule;
const module = new Promise((resolve) => { gotModule = resolve; });
// The engine, or why the module failed.
const ready = Promise.all([loadWasm(build, module), module]).then(
  ([wasm, compiled]) => ({
    handle: createEngine(post, wasm, build, { started, wasmReady: epochNow() }, compiled ? 'page' : 'engine'),
  }),
  (e) => ({ failure: e }),
);
let chain = Promise.resolve();

self.onmessage = (event) => {
  const request = event.data;
  if ('wasmModule' in request) {
    gotModule(request.wasmModule);
    return;
  }
  chain = chain.then(async () => {
    const { handle, failure } = await ready;
    if (failure) {
      self.postMessage({ id: request.id, ok: false, error: { message: failure.message ?? String(failure), field: 'module' } });
      return;
    }
    await handle(request);
  });
};
