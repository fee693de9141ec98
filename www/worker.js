// The page's Web Worker: loads the WebAssembly module and runs the engine (engine.js), so
// computing and drawing never block the page. Requests are handled strictly one after another.

import init from './pkg/kvlab.js';
import { createEngine } from './engine.js';

const handle = createEngine((message, transfer) => self.postMessage(message, transfer ?? []));
const ready = init().then(() => null, (e) => e); // null, or why the module failed
let chain = Promise.resolve();

self.onmessage = (event) => {
  const request = event.data;
  chain = chain.then(async () => {
    const failure = await ready;
    if (failure) {
      self.postMessage({ id: request.id, ok: false, error: { message: failure.message ?? String(failure), field: 'module' } });
      return;
    }
    await handle(request);
  });
};
