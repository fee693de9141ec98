// A fake of the few DOM pieces the controls touch, for node's test runner: elements that are
// EventTargets with `dataset`, `value`, `id`, `type` and attributes, and a document that finds
// them by the selectors the page uses (`[data-key]`, `[data-key="k"]`, `output[for="id"]`).
// The page's modules read `document` when called, never when imported.

/** An element: `{tag, key, id, type, value, attrs}`. */
export class FakeElement extends EventTarget {
  constructor({ tag = 'input', key = null, id = '', type = 'text', value = '', attrs = {} } = {}) {
    super();
    this.tagName = tag.toUpperCase();
    this.id = id;
    this.type = type;
    this.value = String(value);
    this.textContent = '';
    this.dataset = key === null ? {} : { key };
    this.attrs = { ...attrs };
  }

  hasAttribute(name) {
    return name in this.attrs;
  }

  getAttribute(name) {
    return this.attrs[name] ?? null;
  }
}

/** A select: its `options` (FakeOption), `add`, `replaceChildren`; `value` picks an option. */
export class FakeSelect extends FakeElement {
  constructor(fields = {}, options = []) {
    super({ ...fields, tag: 'select' });
    this.options = [...options];
    this.picked = options[0]?.value ?? '';
  }

  get value() {
    return this.picked;
  }

  set value(v) {
    // (as a browser: a value no option has selects nothing)
    this.picked = this.options?.some((o) => o.value === String(v)) ? String(v) : '';
  }

  add(option) {
    this.options.push(option);
  }

  replaceChildren(...options) {
    this.options = options;
  }
}

/** An <option> (the page makes them with `new Option(text, value)`). */
export class FakeOption {
  constructor(text = '', value = text) {
    this.text = text;
    this.value = String(value);
    this.dataset = {};
  }
}

/** A document holding `elements`, installed as `globalThis.document`. */
export function installDocument(elements) {
  const matches = (el, sel) => {
    if (sel === '[data-key]') return 'key' in el.dataset;
    let m = sel.match(/^\[data-key="([^"]+)"\]$/);
    if (m) return el.dataset.key === m[1];
    m = sel.match(/^select\[data-key="([^"]+)"\]$/);
    if (m) return el.tagName === 'SELECT' && el.dataset.key === m[1];
    m = sel.match(/^output\[for="([^"]+)"\]$/);
    if (m) return el.tagName === 'OUTPUT' && el.attrs.for === m[1];
    throw new Error(`the fake document does not know the selector ${sel}`);
  };
  const doc = {
    body: { dataset: {} },
    activeElement: null,
    querySelectorAll: (sel) => elements.filter((el) => matches(el, sel)),
    querySelector: (sel) => elements.find((el) => matches(el, sel)) ?? null,
  };
  globalThis.document = doc;
  globalThis.Option = FakeOption;
  return doc;
}

/** Fires `type` on `el` (an input's `input`, `change`, or a `keydown` with `key`). */
export function fire(el, type, fields = {}) {
  const event = new Event(type);
  Object.assign(event, fields);
  el.dispatchEvent(event);
}
