// `cargo xtask dist` runs this on dist/ after copying www/ there: the page's modules, written
// as rooms of one concern each (main.js and what it imports; engine.js and what it imports),
// are joined into one module per entry with esbuild, so a visit downloads two files, not forty,
// and gzip sees each as a whole (the split alone cost a quarter more bytes at start). The files
// bundled into an entry are removed from dist/; what is loaded by URL stays (worker.js, the
// wasm bindings in pkg*/, the model), and so does every relative URL, since each entry lies
// where its source does. No minifying here: minify.mjs runs after it.
//
// Usage: node xtask/bundle.mjs DIST ENTRY...   (ENTRY: a .js file under DIST, e.g. main.js)
// Prints one line per entry: `bundled ENTRY: N modules`.

import { build } from 'esbuild';
import { readdir, rm, rmdir } from 'node:fs/promises';
import path from 'node:path';

const [dist, ...entries] = process.argv.slice(2);
if (!dist || !entries.length) {
  console.error('usage: node xtask/bundle.mjs DIST ENTRY...');
  process.exit(2);
}
// What is loaded by URL or on demand stays a file of its own: the other entries (engine.js is
// imported by the worker, and by the page only where it cannot start a worker), the wasm
// bindings.
const external = ['./pkg/*', './pkg-simd/*', './pkg-upload/*', './pkg-upload-simd/*', ...entries.map((e) => `./${e}`)];
const joined = new Set();
for (const entry of entries) {
  let result;
  try {
    result = await build({
      entryPoints: [path.join(dist, entry)],
      outfile: path.join(dist, entry),
      allowOverwrite: true,
      bundle: true,
      format: 'esm',
      target: 'es2022',
      external,
      metafile: true,
      logLevel: 'warning',
      legalComments: 'none',
    });
  } catch (e) {
    console.error(`cannot bundle ${entry}: ${e.message ?? e}`);
    process.exit(1);
  }
  const inputs = Object.keys(result.metafile.inputs);
  for (const input of inputs) joined.add(path.resolve(input));
  console.log(`bundled ${entry}: ${inputs.length} modules`);
}
for (const entry of entries) joined.delete(path.resolve(dist, entry));
for (const file of joined) await rm(file);
// (and the folders they leave empty)
const folders = [...new Set([...joined].map((f) => path.dirname(f)))]
  .sort((a, b) => b.length - a.length);
for (const dir of folders) {
  if (dir.startsWith(path.resolve(dist) + path.sep) && !(await readdir(dir)).length) await rmdir(dir);
}
