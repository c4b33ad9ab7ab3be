// Small DOM and formatting helpers the page's modules share.
//
// Untrusted text only ever reaches the page through el(): strings become text nodes, never HTML.

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export const number = new Intl.NumberFormat("en");

// cost_usd is null when the model has no known price: say so, never show a made-up number.
export const dollars = (cost) =>
  cost === null || cost === undefined
    ? "cost unknown"
    : `$${cost >= 1 ? cost.toFixed(2) : cost.toFixed(cost >= 0.01 ? 4 : 6)}`;

export function formatDuration(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

export const clip = (text, limit) =>
  text.length > limit ? `${text.slice(0, limit - 1)}…` : text;

export const plural = (count, word) => `${count} ${word}${count === 1 ? "" : "s"}`;

// `raw` as an http(s) URL (resolved against `base` when one is given), or null: javascript:,
// data:, a relative one without a base, no URL at all. What the page links to or shows comes
// from the server, the model or the web, and never runs in the page.
export function httpHref(raw, base) {
  if (typeof raw !== "string" || !raw) return null;
  try {
    const url = base === undefined ? new URL(raw) : new URL(raw, base);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch {
    return null;
  }
}
