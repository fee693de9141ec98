// The page's Web Worker: loads the WebAssembly module and runs the engine (engine.js), so
// computing and drawing never block the page. Requests are handled strictly one after another.
// The page chooses the wasm build (`?wasm=simd128` or `?wasm=scalar` on this script's URL).

import { createEngine, loadWasm } from './engine.js';

const build = new URL(self.location.href).searchParams.get('wasm') === 'simd128' ? 'simd128' : 'scalar';
const post = (message, transfer) => self.postMessage(message, transfer ?? []);
// The engine, or why the module failed.
const ready = loadWasm(build).then((wasm) => ({ handle: createEngine(post, wasm, build) }), (e) => ({ failure: e }));
let chain = Promise.resolve();

self.onmessage = (event) => {
  const request = event.data;
  chain = chain.then(async () => {
    const { handle, failure } = await ready;
    if (failure) {
      self.postMessage({ id: request.id, ok: false, error: { message: failure.message ?? String(failure), field: 'module' } });
      return;
    }
    await handle(request);
  });
};
