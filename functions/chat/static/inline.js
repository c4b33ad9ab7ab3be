// Markdown inside a block: code spans, bold, italic, strikethrough, links and bare URLs, line
// breaks and backslash escapes. Output is DOM nodes only; a link is made only for http(s) and
// mailto URLs, anything else keeps its words as text.

import { el } from "./dom.js";

const ESCAPABLE = "\\`*_{}[]()#+-.!~>|<";
const WORD = /[\p{L}\p{N}]/u;
const LINK_ATTRS = { target: "_blank", rel: "noopener noreferrer nofollow" };

// Each handler reads the construct that starts at src[i]: { text, end } (literal text),
// { nodes, end } (elements), or null (the character is plain text).
const HANDLERS = new Map([
  ["\\", escaped],
  ["\n", lineBreak],
  ["`", codeSpan],
  ["[", bracketLink],
  ["<", angleLink],
  ["h", bareUrl],
  ["*", emphasisRun],
  ["_", emphasisRun],
  ["~", emphasisRun],
]);

export function renderInline(src, parent) {
  let text = "";
  const flush = () => {
    if (text) parent.append(document.createTextNode(text));
    text = "";
  };
  let i = 0;
  while (i < src.length) {
    const handler = HANDLERS.get(src[i]);
    const found = handler ? handler(src, i) : null;
    if (!found) {
      text += src[i];
      i += 1;
    } else if (found.text !== undefined) {
      text += found.text;
      i = found.end;
    } else {
      flush();
      parent.append(...found.nodes);
      i = found.end;
    }
  }
  flush();
}

// The link target a markdown link may have: http(s) and mailto URLs only, else null.
function safeHref(raw) {
  const href = raw.trim().replace(/^<(.*)>$/, "$1");
  try {
    const url = new URL(href);
    return ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

function runLength(src, i) {
  let n = 1;
  while (src[i + n] === src[i]) n += 1;
  return n;
}

function escaped(src, i) {
  if (i + 1 < src.length && ESCAPABLE.includes(src[i + 1])) return { text: src[i + 1], end: i + 2 };
  return null;
}

function lineBreak(src, i) {
  return { nodes: [el("br")], end: i + 1 };
}

// `code`, closed by a run of as many backticks; unclosed, the backticks are text.
function codeSpan(src, i) {
  const n = runLength(src, i);
  let close = -1;
  let j = i + n;
  while ((j = src.indexOf("`", j)) !== -1) {
    const run = runLength(src, j);
    if (run === n) {
      close = j;
      break;
    }
    j += run;
  }
  if (close === -1) return { text: "`".repeat(n), end: i + n };
  let code = src.slice(i + n, close).replace(/\n/g, " ");
  if (code.length > 2 && code[0] === " " && code[code.length - 1] === " " && code.trim()) {
    code = code.slice(1, -1);
  }
  return { nodes: [el("code", {}, code)], end: close + n };
}

// [label](url "title"); an unsafe scheme keeps the label's words only.
function bracketLink(src, i) {
  const found = parseLink(src, i);
  if (!found) return null;
  const href = safeHref(found.href);
  const holder = href ? el("a", { href, ...LINK_ATTRS }) : document.createDocumentFragment();
  renderInline(found.label, holder);
  return { nodes: [holder], end: found.end };
}

// [label](url "title"): returns {label, href, end} or null.
function parseLink(src, start) {
  let depth = 0;
  let i = start;
  for (; i < src.length; i += 1) {
    if (src[i] === "\\") i += 1;
    else if (src[i] === "[") depth += 1;
    else if (src[i] === "]" && --depth === 0) break;
  }
  if (i >= src.length || src[i + 1] !== "(") return null;
  const label = src.slice(start + 1, i);
  let j = i + 2;
  depth = 1;
  for (; j < src.length; j += 1) {
    if (src[j] === "(") depth += 1;
    else if (src[j] === ")" && --depth === 0) break;
    else if (src[j] === "\n") return null;
  }
  if (j >= src.length) return null;
  const target = src.slice(i + 2, j).trim().split(/\s+/)[0] || "";
  return { label, href: target, end: j + 1 };
}

// <https://...> or <mailto:...>
function angleLink(src, i) {
  const m = /^<((?:https?:\/\/|mailto:)[^\s<>]+)>/.exec(src.slice(i, i + 2048));
  const href = m && safeHref(m[1]);
  if (!href) return null;
  return { nodes: [el("a", { href, ...LINK_ATTRS }, m[1])], end: i + m[0].length };
}

// A bare http(s) URL at the start of a word; trailing punctuation stays text.
function bareUrl(src, i) {
  if (i > 0 && !/[\s(*_~"']/.test(src[i - 1])) return null;
  const m = /^https?:\/\/[^\s<>]+/.exec(src.slice(i, i + 2048));
  const url = m && trimUrl(m[0]);
  const href = url && url.length > 8 && safeHref(url);
  if (!href) return null;
  return { nodes: [el("a", { href, ...LINK_ATTRS }, url)], end: i + url.length };
}

function trimUrl(url) {
  let out = url;
  for (;;) {
    const last = out[out.length - 1];
    if (/[.,:;!?"'*_~]/.test(last)) out = out.slice(0, -1);
    else if (last === ")" && out.split(")").length > out.split("(").length) {
      out = out.slice(0, -1);
    } else return out;
  }
}

// A run of 1-3 '*' or '_' (or '~~') closed by the same run; otherwise the run is text.
function emphasisRun(src, i) {
  const n = runLength(src, i);
  const found = parseEmphasis(src, i, n);
  if (!found) return { text: src[i].repeat(n), end: i + n };
  return { nodes: [found.node], end: found.end };
}

function parseEmphasis(src, i, n) {
  const ch = src[i];
  if (ch === "~" ? n !== 2 : n > 3) return null;
  const after = src[i + n];
  if (after === undefined || /\s/.test(after)) return null;
  if (ch === "_" && i > 0 && WORD.test(src[i - 1])) return null;
  const close = findCloser(src, ch, i + n, n);
  if (close === -1) return null;
  return { node: emphasisNode(ch, n, src.slice(i + n, close)), end: close + n };
}

// Where a run of n ch that opened just before `from` closes, or -1.
function findCloser(src, ch, from, n) {
  let j = from;
  for (;;) {
    j = src.indexOf(ch, j);
    if (j === -1) return -1;
    const run = runLength(src, j);
    const closes =
      run === n && !/\s/.test(src[j - 1]) && !(ch === "_" && WORD.test(src[j + run] || ""));
    if (closes && j > from) return j;
    j += run;
  }
}

function emphasisNode(ch, n, inner) {
  let node;
  if (ch === "~") node = el("del");
  else if (n === 1) node = el("em");
  else node = el("strong");
  let target = node;
  if (ch !== "~" && n === 3) {
    target = el("em");
    node.append(target);
  }
  renderInline(inner, target);
  return node;
}
