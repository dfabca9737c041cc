// Building DOM nodes. Every string given here becomes text (textContent or
// a text node), never markup: names and messages come from providers and
// must not run (a workspace named <img src=x onerror=alert(1)> is text).

/**
 * el makes an element. attrs are set as properties, except "class",
 * "for", aria-* and data-* which are set as attributes; a function value
 * whose key starts with "on" is an event listener. Children are nodes or
 * strings (text).
 * @param {string} tag
 * @param {Record<string, any>} [attrs]
 * @param {...(Node|string|null|undefined|false)} children
 * @returns {HTMLElement}
 */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") e.addEventListener(k.slice(2), v);
    else if (k === "class" || k === "for" || k.startsWith("aria-") || k.startsWith("data-") || k === "role") e.setAttribute(k, String(v));
    else e[k] = v;
  }
  append(e, children);
  return e;
}

/** append adds children (nodes or text) to parent. */
export function append(parent, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    parent.append(typeof c === "string" ? document.createTextNode(c) : c);
  }
}

/** clear removes every child of node. */
export function clear(node) {
  node.replaceChildren();
}

/** $ is document.getElementById. */
export const $ = (id) => document.getElementById(id);
