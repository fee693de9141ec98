// Hostile input through the real page (issue 7): every malformed file of
// tests/fixtures/malformed/ chosen in the real file input shows its own message next to the
// input, leaves the figures on screen as they were, and leaves the page working; parameters
// beyond their ranges (in the URL and typed into controls) are refused or repaired without
// breaking anything. Every test also checks for console errors and requests to other origins.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch, open, urlWith, figure, figureText, setNumber, settle, npy } from './helpers.mjs';

const MALFORMED = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/malformed');

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** A small, non-default view, so "unchanged" and "changed" are both visible in the figures. */
const START = { tokens: 128, steps: 32, channels: 16, budget: 40, recent: 8, bits: 3 };

/** File -> a distinctive phrase of its `LoadError` message (src/io/error.rs). */
const CASES = [
  ['empty.npy', /is empty \(0 bytes\): expected a \.npy, \.safetensors/],
  ['npy_truncated_header.npy', /truncated in header: needs \d+ bytes from the start, the file has 60/],
  ['npy_truncated_magic.npy', /truncated in magic and version: needs 8 bytes from the start, the file has 5/],
  ['npy_bad_magic.npy', /magic is '.*': a \.npy file starts with '\\x93NUMPY'/],
  ['npy_png_renamed.npy', /magic is '\\x89PNG/],
  // 10^15 elements: more than usize::MAX in wasm32, where usize is 32 bits
  ['npy_huge_shape.npy', /declares shape \[100000, 100000, 100000\] = (1000000000000000|more than usize::MAX) elements: at most \d+ elements are allowed/],
  ['npy_shape_negative.npy', /header field 'shape' is \(-3, 4\): expected axis lengths that are non-negative integers/],
  ['npy_complex64.npy', /header field 'descr' is '<c8' \(complex64\): supported dtypes are/],
  ['npy_nan.npy', /value NaN at index \[0, 1\] is not finite/],
  ['npy_data_short.npy', /data has 44 bytes but shape \[3, 4\] of <f4 needs 48/],
  ['st_too_short.safetensors', /truncated in header length: needs 8 bytes from the start, the file has 3/],
  ['st_header_beyond_file.safetensors', /header length is 4096 bytes but 8 bytes are available/],
  ['st_offsets_beyond_data.safetensors', /tensor 'a' data_offsets end at 16 but the data section has 8 bytes/],
  ['st_overlap.safetensors', /tensor 'b' data_offsets \[4, 12\] overlap tensor 'a' \[0, 8\]/],
  ['st_bad_json.safetensors', /invalid JSON/],
  ['csv_ragged.csv', /line 2 has 2 cells but line 1 has 3: every row must have the same number of columns/],
  ['csv_latin1.csv', /is not UTF-8 text: byte 0xe9 at line 2/],
  ['csv_utf16.csv', /is not UTF-8 text: .*it looks like UTF-16/],
  ['csv_nan.csv', /value NaN at index \[1, 1\] is not finite/],
  ['csv_decimal_comma.csv', /decimal commas are not supported/],
  ['json_syntax.json', /invalid JSON/],
  ['json_ragged.json', /nested lists must be rectangular/],
  ['json_huge_shape.json', /field 'shape' declares shape \[100000, 100000, 100000\]/],
  ['unknown_format.bin', /cannot tell the format from extension 'bin'/],
];

const WATCHED = ['kept-count', 'r-quant', 'max-abs-error'];

async function snapshot(page) {
  const out = {};
  for (const name of WATCHED) out[name] = await figureText(page, name);
  return out;
}

function fileError(page) {
  return page.locator('#file').locator('xpath=..').locator('.error');
}

/** No request left the page's origin (data: and blob: URLs are local). */
function assertOneOrigin(requests) {
  const origin = new URL(urlWith()).origin;
  const foreign = requests.filter((r) => {
    const u = new URL(r);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.origin !== origin;
  });
  assert.deepEqual(foreign, [], 'no request to another origin');
  assert.ok(requests.length > 0, 'the request log recorded the page load');
}

/** The page still computes: Bits -> 6 changes the max abs error, and the error slots clear. */
async function assertAlive(page, before) {
  await setNumber(page, 'Bits', 6);
  const after = await figure(page, 'max-abs-error');
  assert.notEqual(after, Number(before['max-abs-error']), 'a later control change still updates the figures');
  assert.ok(after < Number(before['max-abs-error']), `6 bits beat 3 bits: ${after} < ${before['max-abs-error']}`);
  assert.equal(await figureText(page, 'kept-count'), before['kept-count'], 'bits never change the selection');
}

for (const [file, expected] of CASES) {
  test(`malformed upload ${file}: its message, the figures kept, the page alive`, async () => {
    const { page, problems, requests } = await open(browser.context, urlWith(START));
    const before = await snapshot(page);
    await page.locator('details.upload summary').click();
    await page.getByLabel('Upload files', { exact: true }).setInputFiles(path.join(MALFORMED, file));
    const err = fileError(page);
    await err.waitFor({ state: 'visible' });
    const message = await err.textContent();
    assert.ok(message.includes(file), `the message names the file: ${message}`);
    assert.match(message, expected);
    assert.equal(await err.locator('*').count(), 0, 'the message is text, never HTML');
    assert.equal(await page.locator('#file-list li', { hasText: file }).count(), 0, 'the bad file is not listed');
    await settle(page);
    assert.deepEqual(await snapshot(page), before, 'the figures on screen are unchanged');
    assert.match(await page.locator('[data-figure="data-description"]').textContent(), /generated/);
    await assertAlive(page, before);
    assertOneOrigin(requests);
    assert.deepEqual(problems, []);
    await page.close();
  });
}

test('a good file and a bad one in one pick: the good one loads, the bad one is refused, the view stays', async () => {
  const { page, problems, requests } = await open(browser.context, urlWith(START));
  const before = await snapshot(page);
  await page.locator('details.upload summary').click();
  const good = npy([4, 3], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  await page.getByLabel('Upload files', { exact: true }).setInputFiles([
    { name: 'good.npy', mimeType: 'application/octet-stream', buffer: good },
    { name: 'csv_ragged.csv', mimeType: 'text/csv', buffer: readFileSync(path.join(MALFORMED, 'csv_ragged.csv')) },
  ]);
  await page.locator('#file-list li', { hasText: 'good.npy' }).waitFor();
  const err = fileError(page);
  await err.waitFor({ state: 'visible' });
  assert.match(await err.textContent(), /csv_ragged\.csv: line 2 has 2 cells/);
  assert.equal(await page.locator('#file-list li', { hasText: 'csv_ragged.csv' }).count(), 0);
  assert.deepEqual(await snapshot(page), before, 'loading files does not change the data in use');
  await assertAlive(page, before);
  assertOneOrigin(requests);
  assert.deepEqual(problems, []);
  await page.close();
});

test('in 中文 every refused file and skipped tensor is worded in Chinese, the module\'s English kept, and a switch words it again', async (t) => {
  // (its own browser: the language is remembered, and the other tests read English)
  const own = await launch();
  t.after(() => own.close()); // (also when it fails: an open browser keeps the process alive)
  const { page, problems } = await open(own.context, urlWith({ ...START, lang: 'zh' }));
  await page.locator('details.upload summary').click();
  const err = fileError(page);
  const han = /[\u4e00-\u9fff]/;
  for (const [file, expected] of CASES) {
    await page.locator('#file').setInputFiles(path.join(MALFORMED, file));
    await page.waitForFunction((f) => {
      const slot = document.querySelector('#file').parentElement.querySelector('.error');
      return !slot.hidden && slot.dataset.value?.includes(f);
    }, file);
    const shown = await err.textContent();
    const english = await err.getAttribute('data-value');
    assert.match(english, expected, `${file}: the module's English message, kept in data-value`);
    assert.ok(shown.startsWith(file), `${file}: the Chinese message names the file first: ${shown}`);
    assert.match(shown, han, `${file}: in Chinese: ${shown}`);
    assert.notEqual(shown, english);
    assert.doesNotMatch(shown, /\{\w+\}/, `${file}: every field filled: ${shown}`);
    // The numbers the English names are named in Chinese too (file names, shapes, counts).
    const numbers = (t) => (t.replace(file, '').match(/\d+/g) ?? []).sort();
    assert.deepEqual(numbers(shown).filter((n) => !numbers(english).includes(n)), [], `${file}: no number the English does not name`);
  }
  // Chinese place names and the line/column of a CSV cell.
  assert.match(await err.textContent(), /^unknown_format\.bin：无法从扩展名 'bin' 或开头的字节判断格式/);
  await page.locator('#file').setInputFiles(path.join(MALFORMED, 'npy_complex64.npy'));
  await page.waitForFunction(() => document.querySelector('#file').parentElement.querySelector('.error').dataset.value?.includes('complex64'));
  assert.match(await err.textContent(), /头部字段 'descr' 为 '<c8'（complex64）：支持的数据类型为/);
  await page.locator('#file').setInputFiles(path.join(MALFORMED, 'csv_decimal_comma.csv'));
  await page.waitForFunction(() => document.querySelector('#file').parentElement.querySelector('.error').dataset.value?.includes('csv_decimal_comma'));
  assert.match(await err.textContent(), /第 \d+ 行第 \d+ 列：'[^']*,[^']*' 不是数字（不支持小数逗号/);

  // Two refused files at once, each its own line; the switch words both in English, exactly
  // the module's messages.
  await page.locator('#file').setInputFiles([
    path.join(MALFORMED, 'csv_ragged.csv'), path.join(MALFORMED, 'empty.npy'),
  ]);
  await page.waitForFunction(() => document.querySelector('#file').parentElement.querySelector('.error').dataset.value?.includes('empty.npy'));
  const both = (await err.textContent()).split('\n');
  assert.equal(both.length, 2);
  assert.match(both[0], /^csv_ragged\.csv：第 2 行有 2 个单元格，但第 1 行有 3 个/);
  assert.match(both[1], /^empty\.npy 是空文件（0 字节）/);
  await page.locator('#lang').click();
  await page.waitForFunction(() => document.documentElement.lang === 'en');
  assert.equal(await err.textContent(), await err.getAttribute('data-value'));
  assert.match(await err.textContent(), /^csv_ragged\.csv: line 2 has 2 cells but line 1 has 3: every row must have the same number of columns\nempty\.npy is empty \(0 bytes\)/);

  // A choice the module refuses (T differs between attention and keys), in Chinese.
  await page.locator('#lang').click();
  await page.waitForFunction(() => document.documentElement.lang === 'zh-CN');
  await page.locator('#file').setInputFiles([
    { name: 'a.npy', mimeType: 'application/octet-stream', buffer: npy([2, 4], [0.5, 0.5, 0, 0, 0.25, 0.25, 0.25, 0.25]) },
    { name: 'k.npy', mimeType: 'application/octet-stream', buffer: npy([3, 2], [1, 2, 3, 4, 5, 6]) },
  ]);
  await page.locator('#file-list li', { hasText: 'k.npy' }).waitFor();
  await page.locator('#up-attention').selectOption('a.npy::a.npy');
  await page.locator('#up-keys').selectOption('k.npy::k.npy');
  await page.locator('#up-use').click();
  const useErr = page.locator('#up-use').locator('xpath=..').locator('.error');
  await useErr.waitFor({ state: 'visible' });
  assert.equal(await useErr.textContent(), '注意力覆盖 T=4 个 token，但 KV 张量的 T=3：它们必须来自同一个提示');
  assert.match(await useErr.getAttribute('data-value'), /^attention covers T=4 tokens but the KV tensor has T=3/);

  // A safetensors file with a float tensor and an integer one: the float one loads, the other
  // is listed as skipped, with its reason in Chinese (the module's English in data-value).
  const header = Buffer.from(JSON.stringify({
    k: { dtype: 'F32', shape: [2, 2], data_offsets: [0, 16] },
    ids: { dtype: 'I64', shape: [2], data_offsets: [16, 32] },
  }));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(header.length));
  const data = Buffer.alloc(32);
  [1, 2, 3, 4].forEach((v, i) => data.writeFloatLE(v, 4 * i));
  await page.locator('#file').setInputFiles([
    { name: 'mixed.safetensors', mimeType: 'application/octet-stream', buffer: Buffer.concat([length, header, data]) },
  ]);
  const skipped = page.locator('#file-list li.skipped');
  await skipped.waitFor();
  assert.equal(await skipped.textContent(),
    "ids：张量 'ids' 的数据类型为 I64，不是浮点数：可加载的类型为 F16、BF16、F32 和 F64");
  assert.equal(await skipped.getAttribute('data-value'),
    "ids: tensor 'ids' has dtype I64, which is not a float: loadable dtypes are F16, BF16, F32 and F64");

  // A safetensors file none of whose tensors loads: refused, each tensor's reason in Chinese as
  // a skipped one's is; a header listing no tensor says so.
  const safetensors = (name, tensors, bytes) => {
    const head = Buffer.from(JSON.stringify(tensors));
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(head.length));
    return { name, mimeType: 'application/octet-stream', buffer: Buffer.concat([len, head, Buffer.alloc(bytes)]) };
  };
  const refusedAs = async (name) => {
    await page.waitForFunction((f) => document.querySelector('#file').parentElement.querySelector('.error').dataset.value?.includes(f), name);
    return [await err.textContent(), await err.getAttribute('data-value')];
  };
  await page.locator('#file').setInputFiles([safetensors('ints.safetensors', {
    ids: { dtype: 'I64', shape: [2], data_offsets: [0, 16] },
    pos: { dtype: 'I32', shape: [2], data_offsets: [16, 24] },
  }, 24)]);
  const [intsZh, intsEn] = await refusedAs('ints.safetensors');
  const loadable = '不是浮点数：可加载的类型为 F16、BF16、F32 和 F64';
  assert.equal(intsZh, `ints.safetensors：没有可加载的浮点张量：ids：张量 'ids' 的数据类型为 I64，${loadable}；`
    + `pos：张量 'pos' 的数据类型为 I32，${loadable}`);
  assert.match(intsEn, /^ints\.safetensors: no loadable float tensor: tensor 'ids' has dtype I64, .*; tensor 'pos' has dtype I32/);
  await page.locator('#file').setInputFiles([safetensors('none.safetensors', {}, 0)]);
  const [noneZh, noneEn] = await refusedAs('none.safetensors');
  assert.equal(noneZh, 'none.safetensors：没有可加载的浮点张量：文件头没有列出任何张量');
  assert.equal(noneEn, 'none.safetensors: no loadable float tensor: the header lists no tensors');

  await page.locator('#lang').click();
  await page.waitForFunction(() => document.documentElement.lang === 'en');
  assert.equal(await skipped.textContent(), await skipped.getAttribute('data-value'));
  assert.equal(await err.textContent(), noneEn);
  assert.deepEqual(problems, []);
});

test('markup in a file name and in its cells is shown as text, never run or fetched', async () => {
  const { page, problems, requests } = await open(browser.context, urlWith(START));
  const before = await snapshot(page);
  await page.locator('details.upload summary').click();
  const name = '<img src=x onerror=window.pwned=1>.csv';
  const body = '1,2\n3,<img src="http://evil.example/x.png" onerror="window.pwned=2">\n';
  await page.getByLabel('Upload files', { exact: true }).setInputFiles([
    { name, mimeType: 'text/csv', buffer: Buffer.from(body) },
  ]);
  const err = fileError(page);
  await err.waitFor({ state: 'visible' });
  const message = await err.textContent();
  assert.ok(message.includes(name), `the name is shown as typed: ${message}`);
  assert.match(message, /line 2, column 2: '<img src="http:\/\/evil\.example\/x\.png"/);
  assert.equal(await page.locator('img').count(), 0, 'no element was made from the file');
  assert.equal(await page.evaluate(() => window.pwned), undefined, 'no handler ran');
  assert.deepEqual(await snapshot(page), before);
  assertOneOrigin(requests);
  assert.deepEqual(problems, []);
  await page.close();
});

test('parameters far beyond their ranges in the URL are repaired with messages; the page works', async () => {
  const { page, problems, requests } = await open(
    browser.context,
    urlWith('tokens=128&budget=999999&recent=-1&bits=3&kernel=1e308&window=NaN&context=0&layers=1e400&seed=-7'),
  );
  const warn = page.locator('#url-warnings');
  await warn.waitFor({ state: 'visible' });
  const text = await warn.textContent();
  assert.match(text, /budget 999999 is out of range/);
  assert.match(text, /recent -1 is out of range/);
  assert.match(text, /window 'NaN' is not a number/);
  assert.match(text, /context 0 is out of range: must be a whole number between 1 and \d+; 1 is used/);
  assert.equal(await figure(page, 'kept-count'), 128, 'B clamped to T = 128: every token kept');
  const before = await snapshot(page);
  await assertAlive(page, before);
  assertOneOrigin(requests);
  assert.deepEqual(problems, []);
  await page.close();
});

test('a URL whose repaired value the data still refuses falls back to that default and says why', async () => {
  // group 100000 is clamped to 65536, which is still more than T = 128 tokens per channel
  const { page, problems, requests } = await open(browser.context, urlWith('tokens=128&bits=3&group=100000'));
  const warn = page.locator('#url-warnings');
  await warn.waitFor({ state: 'visible' });
  assert.match(await warn.textContent(),
    /group size 65536 is out of range: must be between 1 and 128 \(tokens per channel\); the default is used$/);
  // the other settings of the link stay
  assert.equal(await page.locator('#tokens').inputValue(), '128');
  assert.equal(await page.locator('#bits').inputValue(), '3');
  assert.equal(await page.locator('#group').inputValue(), '0');
  const before = await snapshot(page);
  await assertAlive(page, before);
  assertOneOrigin(requests);
  assert.deepEqual(problems, []);
  await page.close();
});

test('a link asking for more values than generated data holds keeps its T and is told which setting follows', async () => {
  // 2048 x 131072 values is over the 64 Mi a generated matrix holds: steps follows T (at most
  // 512 there), said by name; before, tokens went back to its default with 'undefined 2048 …'.
  const { page, problems } = await open(browser.context, urlWith('tokens=131072&steps=2048'));
  const warn = page.locator('#url-warnings');
  await warn.waitFor({ state: 'visible' });
  assert.equal(await warn.textContent(),
    'Some link parameters were repaired: steps 2048 is out of range: must be at most 64 Mi / tokens (512); 512 is used');
  assert.equal(await page.locator('#tokens').inputValue(), '131072');
  assert.equal(await page.locator('#steps').inputValue(), '512');
  assert.deepEqual(problems, []);
  await page.close();
});

test('an empty field or a decimal typed into a whole-number control is refused by name, not made 0 or rounded', async () => {
  const { page, problems } = await open(browser.context, urlWith({ seed: 7 }));
  const before = await snapshot(page);
  for (const [label, id, typed, said] of [
    ['Seed', 'seed', '', "seed '' is not a number: must be a whole number between 0 and 9007199254740992"],
    ['Outlier channels', 'outliers', '2.5', 'outliers 2.5 is out of range: must be a whole number between 0 and 1024'],
    ['Tokens T', 'tokens', '', "tokens '' is not a number: must be a whole number between 1 and 131072"],
  ]) {
    await setNumber(page, label, typed);
    const err = page.locator(`#${id}`).locator('xpath=..').locator('.error');
    await err.waitFor({ state: 'visible' });
    assert.equal(await err.textContent(), said);
    assert.deepEqual(await snapshot(page), before, 'the last good view stays');
  }
  assert.deepEqual(problems, []);
  await page.close();
});

test('a B typed into a refused view goes back to the value in use, in both its controls', async () => {
  // B below StreamingLLM's 128 sinks: the slider cannot go there (it starts at 128); typed in
  // its number field it is refused (the message at the sinks), the view stays at 128.
  const { page, problems } = await open(browser.context, urlWith('method=streaming&sinks=128'));
  assert.equal(await page.locator('#budget-b').getAttribute('min'), '128');
  // (typed and Enter, as a person does: no second change event, which would send the value
  // in use written back)
  const exact = page.getByLabel('Budget B, exact value');
  await exact.fill('98');
  await exact.press('Enter');
  const err = page.locator('#sinks').locator('xpath=..').locator('.error');
  await err.waitFor({ state: 'visible' });
  assert.match(await err.textContent(), /sinks 128 is out of range: must be between 0 and 98 \(the budget B\)/);
  assert.equal(await page.locator('#budget-b').inputValue(), '128');
  assert.equal(await page.getByLabel('Budget B, exact value').inputValue(), '128');
  assert.equal(await figure(page, 'kept-count'), 128);
  assert.deepEqual(problems, []);
  await page.close();
});

test('SnapKV on two tokens: the pooling kernel follows T, and the rest of the link stays', async () => {
  // The default kernel 7 is wider than 2 T + 1 = 5: it used to be refused, and the whole link
  // with it (every setting's default, bits and method too).
  const { page, problems } = await open(browser.context, urlWith('tokens=2&method=snapkv&bits=3'));
  assert.equal(await page.locator('#url-warnings').isVisible(), false, 'nothing the link set was repaired');
  assert.equal(await page.locator('#method').inputValue(), 'snapkv');
  assert.equal(await page.locator('#bits').inputValue(), '3');
  assert.equal(await page.locator('#kernel').inputValue(), '5');
  assert.equal(await figure(page, 'kept-count'), 2);
  assert.deepEqual(problems, []);
  await page.close();
});

test('invalid values typed into controls are refused next to the control; the page keeps working', async () => {
  const { page, problems, requests } = await open(browser.context, urlWith(START));
  const before = await snapshot(page);

  // Group size far beyond the data (and beyond the control's own max).
  await setNumber(page, 'Group size', 100000);
  const groupErr = page.locator('#group').locator('xpath=..').locator('.error');
  await groupErr.waitFor({ state: 'visible' });
  assert.match(await groupErr.textContent(), /group( size)? 100000 is out of range/);
  assert.deepEqual(await snapshot(page), before, 'the last good view stays');
  assert.deepEqual(problems, []);

  // Budget B typed beyond T (the slider clamps itself; a number typed into the URL state or a
  // script does not): set it on the element directly, as a script or extension could.
  await page.locator('#budget-b').evaluate((el) => {
    el.max = '1000000';
    el.value = '1000000';
    el.dispatchEvent(new Event('input', { bubbles: true }));
    el.dispatchEvent(new Event('change', { bubbles: true }));
  });
  await settle(page);
  const budgetErr = page.locator('#budget-b').locator('xpath=..').locator('.error');
  await budgetErr.waitFor({ state: 'visible' });
  assert.match(await budgetErr.textContent(), /1000000/);
  assert.deepEqual(await snapshot(page), before, 'the last good view stays');
  assert.deepEqual(problems, []);

  // A negative seed, which the settings' unsigned field cannot hold: the same message as the
  // URL's check, naming the value and the range (not a type error from the conversion).
  await setNumber(page, 'Seed', -5);
  const seedErr = page.locator('#seed').locator('xpath=..').locator('.error');
  await seedErr.waitFor({ state: 'visible' });
  assert.equal(await seedErr.textContent(), 'seed -5 is out of range: must be a whole number between 0 and 9007199254740992');
  assert.deepEqual(await snapshot(page), before, 'the last good view stays');
  await setNumber(page, 'Seed', 1);

  // Steps typed above T (START has T = 128): S follows T, as it does when T moves below S, and
  // the page says so next to the control, as a link's repair is said; the next change clears it.
  await setNumber(page, 'Steps S', 500);
  const stepsErr = page.locator('#steps').locator('xpath=..').locator('.error');
  await stepsErr.waitFor({ state: 'visible' });
  assert.equal(await stepsErr.textContent(), 'steps 500 is out of range: must be at most tokens (128); 128 is used');
  assert.equal(await page.locator('#steps').inputValue(), '128');
  assert.match(await figureText(page, 'data-description'), /S=128 x T=128/);
  await setNumber(page, 'Steps S', START.steps);
  assert.equal(await stepsErr.isVisible(), false, 'a good value clears the message');
  assert.deepEqual(await snapshot(page), before, 'back to the view before');

  // Outlier channels typed above d (START has d = 16): used at d, said the same way. Lowering d
  // below them takes them along without a message (as T takes S along).
  const dataRow = () => page.locator('#outliers').locator('xpath=../..').locator(':scope > .control').evaluateAll((controls) => controls.map((c) => {
    const box = c.getBoundingClientRect();
    return { x: box.x, width: box.width, labelY: c.querySelector('label').getBoundingClientRect().y + window.scrollY };
  }));
  const rowBefore = await dataRow();
  await setNumber(page, 'Outlier channels', 900);
  const outliersErr = page.locator('#outliers').locator('xpath=..').locator('.error');
  await outliersErr.waitFor({ state: 'visible' });
  // The message wraps inside its control: no control of the Data row changes width or moves
  // sideways, and those on its line or above stay where they were (lines below move down).
  const rowAfter = await dataRow();
  const line = rowBefore[5].labelY; // #outliers, the sixth control
  assert.deepEqual(rowAfter.map(({ x, width }) => ({ x, width })), rowBefore.map(({ x, width }) => ({ x, width })));
  assert.deepEqual(rowAfter.filter((_, i) => rowBefore[i].labelY <= line), rowBefore.filter((c) => c.labelY <= line));
  assert.equal(await outliersErr.textContent(), 'outliers 900 is out of range: must be at most channels (16); 16 is used');
  assert.equal(await page.locator('#outliers').inputValue(), '16');
  assert.match(await figureText(page, 'data-description'), /\(16 outlier channels/);
  await setNumber(page, 'Channels d', 2);
  assert.equal(await outliersErr.isVisible(), false, 'a change of d clears the message');
  assert.equal(await page.locator('#outliers').inputValue(), '2');
  assert.match(await figureText(page, 'data-description'), /d=2 \(2 outlier channels/);
  assert.equal(await page.locator('.control .error:not([hidden])').count(), 0, 'd taking the outliers along says nothing');
  await setNumber(page, 'Channels d', START.channels);
  await setNumber(page, 'Outlier channels', 4);
  assert.deepEqual(await snapshot(page), before, 'back to the view before');
  assert.deepEqual(problems, []);

  // A custom model too large to count in bytes a number holds exactly (each dimension within its
  // range): refused with its message next to the model, not an internal conversion error.
  await page.locator('#model').selectOption('custom');
  await settle(page);
  const modelErr = page.locator('.control .error:not([hidden])');
  const type = async (key, value) => {
    const input = page.locator(`[data-key="${key}"]`);
    await input.fill(String(value));
    await input.press('Enter');
    await settle(page);
  };
  // 64 layers x 64 KV heads x 1024 x 2^22 tokens x 2 (K and V) x 2 bytes = 2^46 bytes: counted.
  for (const [key, value] of [['layers', 64], ['kv_heads', 64], ['head_dim', 1024], ['context', 4194304]]) await type(key, value);
  assert.equal(await modelErr.count(), 0, 'a 64 TiB cache is counted');
  const modelBefore = await figureText(page, 'gib-final');
  await type('batch', 1024); // 2^56 bytes: a u64 holds it, a number does not exactly
  await modelErr.first().waitFor();
  assert.deepEqual(await modelErr.allTextContents(), ["the cache size is above 2^53 - 1 bytes (8 PiB), the largest byte count shown exactly: reduce batch, context or the model's dimensions"]);
  assert.equal(await figureText(page, 'gib-final'), modelBefore, 'the last good breakdown stays');
  assert.deepEqual(problems, []);
  await page.locator('#model').selectOption({ index: 0 });
  await settle(page);

  // Context length 0 (below the control's min): refused or repaired, never a crash.
  await setNumber(page, 'Context length', 0);
  await settle(page);
  assert.deepEqual(problems, [], 'context 0 typed into the control: no panic');
  assert.deepEqual(await snapshot(page), before, 'the data figures stay');

  await assertAlive(page, before);
  assertOneOrigin(requests);
  assert.deepEqual(problems, []);
  await page.close();
});

test('deliberately invalid calls into the engine are refused with messages; the page keeps working', async () => {
  const { page, problems } = await open(browser.context, urlWith(START));
  const before = await snapshot(page);
  // Straight into the wasm module through the page's debugging handle, past every check the
  // page's own controls make. A panic would abort the module and break every later call.
  const replies = await page.evaluate(async () => {
    const settings = await window.kvlab.call('parseQuery', { query: '' });
    const calls = [
      ['update', { settings: { ...settings.settings, bits: 99 } }],
      ['update', { settings: { ...settings.settings, tokens: -5 } }],
      ['update', { settings: { ...settings.settings, budget: Number.NaN } }],
      ['update', { settings: 'not an object' }],
      ['update', { settings: { ...settings.settings, method: 'nonsense' } }],
      ['draw', { draw: { charts: ['hist'], sizes: { hist: [300, 200] }, labels: 42, dark: false, scale: 1 } }],
      ['loadFile', { name: 'x.npy', bytes: new Uint8Array([0x93, 0x4e, 0x55]) }],
      ['useUploaded', { choice: { attention: 'missing::a', keys: 'missing::k', values: null, headMode: 'mean', head: 0, layer: 0, kvHead: 0, normalise: false } }],
      ['useUploaded', { choice: 42 }],
      ['useUploaded', { choice: { attention: 'a.npy', keys: 'k.npy', headMode: 'head', head: -1 } }],
      ['noSuchOperation', {}],
    ];
    const out = [];
    for (const [op, payload] of calls) {
      try {
        await window.kvlab.call(op, payload);
        out.push([op, 'accepted']);
      } catch (e) {
        out.push([op, e.message]);
      }
    }
    return out;
  });
  for (const [op, message] of replies) {
    assert.notEqual(message, 'accepted', `${op} with invalid input is refused`);
    assert.ok(message.length > 10 && !/unreachable|RuntimeError/.test(message), `${op}: a message, not a crash: ${message}`);
  }
  assert.match(replies[0][1], /bits.*99/i, 'the message names the value');
  assert.match(replies[1][1], /^tokens -5 is out of range: must be a whole number between 1 and /);
  assert.match(replies[2][1], /^budget 'NaN' is not a number/);
  assert.match(replies[3][1], /^settings must be an object of the page's settings, not "not an object"/);
  assert.match(replies[4][1], /^method 'nonsense' is not one of h2o, snapkv, streaming/);
  assert.deepEqual(replies[9], ['useUploaded', 'tensor choice rejected: head must be a whole number from 0, got -1']);
  await assertAlive(page, before);
  assert.deepEqual(problems, []);
  await page.close();
});
