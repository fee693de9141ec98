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

/** A document holding `elements`, installed as `globalThis.document`. */
export function installDocument(elements) {
  const matches = (el, sel) => {
    if (sel === '[data-key]') return 'key' in el.dataset;
    let m = sel.match(/^\[data-key="([^"]+)"\]$/);
    if (m) return el.dataset.key === m[1];
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
  return doc;
}

/** Fires `type` on `el` (an input's `input`, `change`, or a `keydown` with `key`). */
export function fire(el, type, fields = {}) {
  const event = new Event(type);
  Object.assign(event, fields);
  el.dispatchEvent(event);
}
