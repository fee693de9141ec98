// `cargo xtask dist` runs this on the JavaScript and CSS it copies into dist/, rewriting each
// file in place with a maintained minifier: terser for the ES modules (compressed, locals
// renamed; top-level names and exports stay as written, so the modules still import each other
// by name), csso for the style sheet.
//
// Usage: node xtask/minify.mjs FILE...   (each .js or .css file; any failure names its file)

import { readFile, writeFile } from 'node:fs/promises';
import { minify as minifyJs } from 'terser';
import { minify as minifyCss } from 'csso';

for (const file of process.argv.slice(2)) {
  const source = await readFile(file, 'utf8');
  let out;
  try {
    if (file.endsWith('.css')) {
      out = minifyCss(source).css;
    } else {
      out = (await minifyJs(source, {
        module: true,
        compress: { passes: 2 },
        mangle: true,
        format: { comments: false },
      })).code;
    }
  } catch (e) {
    const at = e.line === undefined ? '' : ` (line ${e.line}, column ${e.col})`;
    console.error(`cannot minify ${file}: ${e.message ?? e}${at}`);
    process.exit(1);
  }
  await writeFile(file, out);
}
