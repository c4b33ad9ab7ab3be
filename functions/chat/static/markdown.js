// Markdown blocks: paragraphs, headings, lists (nested), block quotes, fenced code, rules and
// tables; the text inside them goes to inline.js. Output is DOM nodes only, never HTML strings.

import { el } from "./dom.js";
import { renderInline } from "./inline.js";

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const LIST_ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:([ \t]+)(.*)|$)/;
const TABLE_SEP = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;

// Renders source into parent (and returns parent).
export function renderMarkdown(source, parent) {
  const lines = String(source).replace(/\r\n?/g, "\n").split("\n");
  renderBlocks(lines, parent);
  return parent;
}

// Each reader renders the block that starts at lines[i] and returns the index after it, or
// returns null when no such block starts there. A paragraph always does.
const BLOCKS = [fencedCode, heading, rule, blockQuote, list, table, paragraph];

function renderBlocks(lines, parent) {
  let i = 0;
  while (i < lines.length) {
    if (!lines[i].trim()) {
      i += 1;
      continue;
    }
    for (const block of BLOCKS) {
      const next = block(lines, i, parent);
      if (next !== null) {
        i = next;
        break;
      }
    }
  }
}

function indentOf(line) {
  let width = 0;
  for (const ch of line) {
    if (ch === " ") width += 1;
    else if (ch === "\t") width += 4 - (width % 4);
    else break;
  }
  return width;
}

function dedent(line, amount) {
  let i = 0;
  let width = 0;
  while (i < line.length && width < amount && (line[i] === " " || line[i] === "\t")) {
    width += line[i] === "\t" ? 4 - (width % 4) : 1;
    i += 1;
  }
  return line.slice(i);
}

function skipBlank(lines, i) {
  let j = i;
  while (j < lines.length && !lines[j].trim()) j += 1;
  return j;
}

function startsBlock(lines, i) {
  const line = lines[i];
  return (
    FENCE.test(line) ||
    HEADING.test(line) ||
    RULE.test(line) ||
    QUOTE.test(line) ||
    listMarker(line) !== null ||
    isTableStart(lines, i)
  );
}

// An unclosed fence runs to the end: that is how a code block looks mid-stream.
function fencedCode(lines, i, parent) {
  const m = FENCE.exec(lines[i]);
  if (!m) return null;
  const [, fence, lang] = m;
  const indent = indentOf(lines[i]);
  const body = [];
  let j = i + 1;
  while (j < lines.length && !isClosingFence(lines[j], fence)) {
    body.push(dedent(lines[j], indent));
    j += 1;
  }
  if (j >= lines.length && body.length && !body[body.length - 1].trim()) body.pop();
  const code = el("code", lang ? { class: `language-${lang}` } : {}, body.join("\n"));
  parent.append(el("pre", lang ? { dataset: { lang } } : {}, code));
  return j + 1;
}

function isClosingFence(line, fence) {
  const trimmed = line.trim();
  return (
    indentOf(line) < 4 &&
    trimmed.length >= fence.length &&
    trimmed === fence[0].repeat(trimmed.length)
  );
}

function heading(lines, i, parent) {
  const m = HEADING.exec(lines[i]);
  if (!m) return null;
  const node = el(`h${m[1].length}`);
  renderInline(m[2] || "", node);
  parent.append(node);
  return i + 1;
}

function rule(lines, i, parent) {
  if (!RULE.test(lines[i])) return null;
  parent.append(el("hr"));
  return i + 1;
}

function blockQuote(lines, i, parent) {
  if (!QUOTE.test(lines[i])) return null;
  const inner = [];
  let j = i;
  while (j < lines.length && lines[j].trim()) {
    const q = QUOTE.exec(lines[j]);
    inner.push(q ? q[1] : lines[j]);
    j += 1;
  }
  const quote = el("blockquote");
  renderBlocks(inner, quote);
  parent.append(quote);
  return j;
}

function paragraph(lines, i, parent) {
  const text = [lines[i].trim()];
  let j = i + 1;
  while (j < lines.length && lines[j].trim() && !startsBlock(lines, j)) {
    text.push(lines[j].trim());
    j += 1;
  }
  const p = el("p");
  renderInline(text.join("\n"), p);
  parent.append(p);
  return j;
}

// ---- lists ------------------------------------------------------------------------------------

function listMarker(line) {
  const m = LIST_ITEM.exec(line);
  if (!m || m[1].length > 3) return null;
  if (RULE.test(line)) return null;
  const ordered = /\d/.test(m[2]);
  const gap = m[3] ? Math.min(indentOf(m[3]), 4) : 1;
  return {
    ordered,
    start: ordered ? parseInt(m[2], 10) : 1,
    indent: m[1].length,
    width: m[1].length + m[2].length + gap,
    content: m[4] || "",
  };
}

function list(lines, i, parent) {
  const first = listMarker(lines[i]);
  if (!first) return null;
  const node = el(first.ordered ? "ol" : "ul");
  if (first.ordered && first.start !== 1) node.setAttribute("start", String(first.start));
  const sameList = (marker) =>
    marker !== null && marker.ordered === first.ordered && marker.indent <= first.indent + 1;
  let j = i;
  while (j < lines.length && sameList(listMarker(lines[j]))) {
    const item = gatherItem(lines, j, listMarker(lines[j]));
    node.append(listItem(item));
    j = item.end;
    // Blank lines between items of the same list keep the list going.
    const next = skipBlank(lines, j);
    if (next > j && next < lines.length && sameList(listMarker(lines[next]))) j = next;
  }
  parent.append(node);
  return j;
}

// The lines of the item that starts at lines[start]: lines indented past the marker (or by
// two spaces, as models often write nested lists), and lazy continuation lines of its
// paragraph. Loose: blank lines inside it.
function gatherItem(lines, start, marker) {
  const inside = Math.min(marker.width, marker.indent + 2);
  const body = [marker.content];
  let loose = false;
  let i = start + 1;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      const j = skipBlank(lines, i);
      if (j >= lines.length || indentOf(lines[j]) < inside) break;
      for (let k = i; k < j; k += 1) body.push("");
      loose = true;
      i = j;
    } else if (indentOf(line) >= inside) {
      body.push(dedent(line, marker.width));
      i += 1;
    } else if (startsBlock(lines, i)) {
      break;
    } else {
      body.push(line.trim());
      i += 1;
    }
  }
  return { body, loose, end: i };
}

function listItem({ body, loose }) {
  const li = el("li");
  renderBlocks(body, li);
  if (!loose && li.firstChild && li.firstChild.nodeName === "P") {
    li.firstChild.replaceWith(...li.firstChild.childNodes); // a tight item: no <p>
  }
  return li;
}

// ---- tables -----------------------------------------------------------------------------------

function isTableStart(lines, i) {
  return (
    lines[i].includes("|") &&
    i + 1 < lines.length &&
    lines[i + 1].includes("-") &&
    TABLE_SEP.test(lines[i + 1])
  );
}

function splitRow(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
  return row.split(/(?<!\\)\|/).map((cell) => cell.trim().replace(/\\\|/g, "|"));
}

function alignment(cell) {
  if (cell.startsWith(":") && cell.endsWith(":")) return "center";
  if (cell.endsWith(":")) return "right";
  if (cell.startsWith(":")) return "left";
  return null;
}

function table(lines, i, parent) {
  if (!isTableStart(lines, i)) return null;
  const header = splitRow(lines[i]);
  const aligns = splitRow(lines[i + 1]).map(alignment);
  const row = (cells, tag) => {
    const tr = el("tr");
    header.forEach((_, index) => {
      const cell = el(tag, aligns[index] ? { class: `align-${aligns[index]}` } : {});
      renderInline(cells[index] || "", cell);
      tr.append(cell);
    });
    return tr;
  };
  const thead = el("thead", {}, row(header, "th"));
  const tbody = el("tbody");
  let j = i + 2;
  while (j < lines.length && lines[j].trim() && lines[j].includes("|")) {
    tbody.append(row(splitRow(lines[j]), "td"));
    j += 1;
  }
  parent.append(el("div", { class: "table-wrap" }, el("table", {}, thead, tbody)));
  return j;
}
