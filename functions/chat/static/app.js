// agentloop reference chat page: POST /chat, read the SSE stream, render it.
//
// No dependencies and no build step. Untrusted text (the model's answer, tool arguments and
// results, error messages) only ever reaches the page as text nodes: the markdown renderer
// below builds DOM nodes itself and never assigns HTML strings.
"use strict";

(() => {
  // ---- small DOM helpers ------------------------------------------------------------------

  function el(tag, attrs, ...children) {
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

  const number = new Intl.NumberFormat("en");
  // cost_usd is null when the model has no known price: say so, never show a made-up number.
  const dollars = (cost) =>
    cost === null || cost === undefined
      ? "cost unknown"
      : `$${cost >= 1 ? cost.toFixed(2) : cost.toFixed(cost >= 0.01 ? 4 : 6)}`;

  function formatDuration(ms) {
    if (ms < 1000) return `${Math.round(ms)} ms`;
    if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
    return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
  }

  // ---- markdown -----------------------------------------------------------------------------
  // Paragraphs, headings, lists (nested), block quotes, fenced code, rules, tables; inline
  // code, bold, italic, strikethrough, links and bare URLs. Output is DOM nodes only.

  const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
  const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
  const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
  const QUOTE = /^ {0,3}> ?(.*)$/;
  const LIST_ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:([ \t]+)(.*)|$)/;
  const TABLE_SEP = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
  const ESCAPABLE = "\\`*_{}[]()#+-.!~>|<";

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

  function listMarker(line) {
    const m = LIST_ITEM.exec(line);
    if (!m || m[1].length > 3) return null;
    if (RULE.test(line)) return null;
    const ordered = /\d/.test(m[2]);
    const content = m[4] || "";
    const gap = m[3] ? Math.min(indentOf(m[3]), 4) : 1;
    return {
      ordered,
      start: ordered ? parseInt(m[2], 10) : 1,
      indent: m[1].length,
      width: m[1].length + m[2].length + gap,
      content,
    };
  }

  function isTableStart(lines, i) {
    return (
      lines[i].includes("|") &&
      i + 1 < lines.length &&
      lines[i + 1].includes("-") &&
      TABLE_SEP.test(lines[i + 1])
    );
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

  function renderMarkdown(source, parent) {
    const lines = String(source).replace(/\r\n?/g, "\n").split("\n");
    renderBlocks(lines, parent);
    return parent;
  }

  function renderBlocks(lines, parent) {
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      if (!line.trim()) {
        i += 1;
        continue;
      }
      let m = FENCE.exec(line);
      if (m) {
        const fence = m[1];
        const body = [];
        const indent = indentOf(line);
        i += 1;
        // An unclosed fence runs to the end: that is how a code block looks mid-stream.
        while (i < lines.length && !isClosingFence(lines[i], fence)) {
          body.push(dedent(lines[i], indent));
          i += 1;
        }
        if (i >= lines.length && body.length && !body[body.length - 1].trim()) body.pop();
        i += 1;
        const code = el("code", m[2] ? { class: `language-${m[2]}` } : {}, body.join("\n"));
        parent.append(el("pre", m[2] ? { dataset: { lang: m[2] } } : {}, code));
        continue;
      }
      m = HEADING.exec(line);
      if (m) {
        const heading = el(`h${m[1].length}`);
        renderInline(m[2] || "", heading);
        parent.append(heading);
        i += 1;
        continue;
      }
      if (RULE.test(line)) {
        parent.append(el("hr"));
        i += 1;
        continue;
      }
      if (QUOTE.test(line)) {
        const inner = [];
        while (i < lines.length && lines[i].trim()) {
          const q = QUOTE.exec(lines[i]);
          inner.push(q ? q[1] : lines[i]);
          i += 1;
        }
        const quote = el("blockquote");
        renderBlocks(inner, quote);
        parent.append(quote);
        continue;
      }
      if (listMarker(line)) {
        i = renderList(lines, i, parent);
        continue;
      }
      if (isTableStart(lines, i)) {
        i = renderTable(lines, i, parent);
        continue;
      }
      const paragraph = [line.trim()];
      i += 1;
      while (i < lines.length && lines[i].trim() && !startsBlock(lines, i)) {
        paragraph.push(lines[i].trim());
        i += 1;
      }
      const p = el("p");
      renderInline(paragraph.join("\n"), p);
      parent.append(p);
    }
  }

  function isClosingFence(line, fence) {
    const trimmed = line.trim();
    return (
      indentOf(line) < 4 &&
      trimmed.length >= fence.length &&
      trimmed === fence[0].repeat(trimmed.length)
    );
  }

  function renderList(lines, i, parent) {
    const first = listMarker(lines[i]);
    const list = el(first.ordered ? "ol" : "ul");
    if (first.ordered && first.start !== 1) list.setAttribute("start", String(first.start));
    while (i < lines.length) {
      const marker = listMarker(lines[i]);
      if (!marker || marker.ordered !== first.ordered || marker.indent > first.indent + 1) break;
      // Lines indented past the marker (or by two spaces, as models often write nested
      // lists) belong to the item; so do lazy continuation lines of its paragraph.
      const inside = Math.min(marker.width, marker.indent + 2);
      const item = [marker.content];
      let loose = false;
      i += 1;
      while (i < lines.length) {
        const line = lines[i];
        if (!line.trim()) {
          let j = i + 1;
          while (j < lines.length && !lines[j].trim()) j += 1;
          if (j < lines.length && indentOf(lines[j]) >= inside) {
            for (let k = i; k < j; k += 1) item.push("");
            loose = true;
            i = j;
            continue;
          }
          break;
        }
        if (indentOf(line) >= inside) {
          item.push(dedent(line, marker.width));
          i += 1;
          continue;
        }
        if (startsBlock(lines, i)) break;
        item.push(line.trim());
        i += 1;
      }
      const li = el("li");
      renderBlocks(item, li);
      if (!loose && li.firstChild && li.firstChild.nodeName === "P") {
        li.firstChild.replaceWith(...li.firstChild.childNodes); // a tight item: no <p>
      }
      list.append(li);
      // Blank lines between items of the same list keep the list going.
      let j = i;
      while (j < lines.length && !lines[j].trim()) j += 1;
      const next = j < lines.length ? listMarker(lines[j]) : null;
      if (j > i && next && next.ordered === first.ordered && next.indent <= first.indent + 1) {
        i = j;
      }
    }
    parent.append(list);
    return i;
  }

  function splitRow(line) {
    let row = line.trim();
    if (row.startsWith("|")) row = row.slice(1);
    if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
    return row.split(/(?<!\\)\|/).map((cell) => cell.trim().replace(/\\\|/g, "|"));
  }

  function renderTable(lines, i, parent) {
    const header = splitRow(lines[i]);
    const aligns = splitRow(lines[i + 1]).map((cell) => {
      if (cell.startsWith(":") && cell.endsWith(":")) return "center";
      if (cell.endsWith(":")) return "right";
      if (cell.startsWith(":")) return "left";
      return null;
    });
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
    i += 2;
    while (i < lines.length && lines[i].trim() && lines[i].includes("|")) {
      tbody.append(row(splitRow(lines[i]), "td"));
      i += 1;
    }
    parent.append(el("div", { class: "table-wrap" }, el("table", {}, thead, tbody)));
    return i;
  }

  function safeHref(raw) {
    const href = raw.trim().replace(/^<(.*)>$/, "$1");
    try {
      const url = new URL(href);
      return ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : null;
    } catch {
      return null;
    }
  }

  function link(href, parent, label) {
    const a = el("a", { href, target: "_blank", rel: "noopener noreferrer nofollow" });
    renderInline(label, a);
    parent.append(a);
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

  // Emphasis: a run of 1-3 '*' or '_' (or '~~') closed by the same run; returns the node.
  function parseEmphasis(src, i) {
    const ch = src[i];
    let n = 1;
    while (src[i + n] === ch) n += 1;
    if (ch === "~" ? n !== 2 : n > 3) return null;
    const after = src[i + n];
    if (after === undefined || /\s/.test(after)) return null;
    if (ch === "_" && i > 0 && /[\p{L}\p{N}]/u.test(src[i - 1])) return null;
    let j = i + n;
    for (;;) {
      j = src.indexOf(ch, j);
      if (j === -1) return null;
      let run = 1;
      while (src[j + run] === ch) run += 1;
      const closes =
        run === n &&
        !/\s/.test(src[j - 1]) &&
        !(ch === "_" && /[\p{L}\p{N}]/u.test(src[j + run] || ""));
      if (closes && j > i + n) {
        const inner = src.slice(i + n, j);
        let node;
        if (ch === "~") node = el("del");
        else if (n === 1) node = el("em");
        else if (n === 2) node = el("strong");
        else {
          node = el("strong");
          const em = el("em");
          node.append(em);
          renderInline(inner, em);
          return { node, end: j + n };
        }
        renderInline(inner, node);
        return { node, end: j + n };
      }
      j += run;
    }
  }

  function renderInline(src, parent) {
    let text = "";
    const flush = () => {
      if (text) parent.append(document.createTextNode(text));
      text = "";
    };
    let i = 0;
    while (i < src.length) {
      const c = src[i];
      if (c === "\\" && i + 1 < src.length && ESCAPABLE.includes(src[i + 1])) {
        text += src[i + 1];
        i += 2;
        continue;
      }
      if (c === "\n") {
        flush();
        parent.append(el("br"));
        i += 1;
        continue;
      }
      if (c === "`") {
        let n = 1;
        while (src[i + n] === "`") n += 1;
        let close = -1;
        let j = i + n;
        while ((j = src.indexOf("`", j)) !== -1) {
          let run = 1;
          while (src[j + run] === "`") run += 1;
          if (run === n) {
            close = j;
            break;
          }
          j += run;
        }
        if (close === -1) {
          text += "`".repeat(n);
          i += n;
          continue;
        }
        let code = src.slice(i + n, close).replace(/\n/g, " ");
        if (code.length > 2 && code[0] === " " && code[code.length - 1] === " " && code.trim()) {
          code = code.slice(1, -1);
        }
        flush();
        parent.append(el("code", {}, code));
        i = close + n;
        continue;
      }
      if (c === "[") {
        const found = parseLink(src, i);
        if (found) {
          const href = safeHref(found.href);
          flush();
          if (href) link(href, parent, found.label);
          else renderInline(found.label, parent); // unsafe scheme: keep the words only
          i = found.end;
          continue;
        }
      }
      if (c === "<") {
        const m = /^<((?:https?:\/\/|mailto:)[^\s<>]+)>/.exec(src.slice(i, i + 2048));
        const href = m && safeHref(m[1]);
        if (href) {
          flush();
          parent.append(
            el("a", { href, target: "_blank", rel: "noopener noreferrer nofollow" }, m[1]),
          );
          i += m[0].length;
          continue;
        }
      }
      if (c === "h" && (i === 0 || /[\s(*_~"']/.test(src[i - 1]))) {
        const m = /^https?:\/\/[^\s<>]+/.exec(src.slice(i, i + 2048));
        const url = m && trimUrl(m[0]);
        const href = url && url.length > 8 && safeHref(url);
        if (href) {
          flush();
          const a = el("a", { href, target: "_blank", rel: "noopener noreferrer nofollow" }, url);
          parent.append(a);
          i += url.length;
          continue;
        }
      }
      if (c === "*" || c === "_" || c === "~") {
        const found = parseEmphasis(src, i);
        if (found) {
          flush();
          parent.append(found.node);
          i = found.end;
          continue;
        }
        let n = 1;
        while (src[i + n] === c) n += 1;
        text += c.repeat(n);
        i += n;
        continue;
      }
      text += c;
      i += 1;
    }
    flush();
  }

  // ---- SSE ------------------------------------------------------------------------------------

  // Feed it decoded text as it arrives; it calls onEvent(type, data) per complete event.
  // Comment lines (": ping") are ignored; an incomplete event at the end is dropped.
  class SSEParser {
    constructor(onEvent) {
      this.onEvent = onEvent;
      this.buffer = "";
      this.type = "";
      this.data = [];
    }

    push(chunk) {
      this.buffer += chunk;
      let start = 0;
      for (;;) {
        let end = start;
        while (end < this.buffer.length && this.buffer[end] !== "\n" && this.buffer[end] !== "\r") {
          end += 1;
        }
        if (end >= this.buffer.length) break;
        if (this.buffer[end] === "\r" && end === this.buffer.length - 1) break; // \r\n split?
        const line = this.buffer.slice(start, end);
        start = end + (this.buffer[end] === "\r" && this.buffer[end + 1] === "\n" ? 2 : 1);
        this.line(line);
      }
      this.buffer = this.buffer.slice(start);
    }

    line(line) {
      if (line === "") {
        if (this.data.length) this.onEvent(this.type || "message", this.data.join("\n"));
        this.type = "";
        this.data = [];
        return;
      }
      if (line.startsWith(":")) return;
      const colon = line.indexOf(":");
      const field = colon === -1 ? line : line.slice(0, colon);
      let value = colon === -1 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") this.type = value;
      else if (field === "data") this.data.push(value);
    }
  }

  // ---- settings -------------------------------------------------------------------------------

  const STORAGE_KEY = "agentloop.settings";
  const DEFAULT_SETTINGS = {
    endpoint: "",
    token: "",
    model: "",
    maxIterations: "",
    tokenBudget: "",
    tools: ["search_web", "scrape", "execute_code"],
    extraTools: "",
    approvalTools: "",
  };

  function loadSettings() {
    try {
      const stored = JSON.parse(localStorage.getItem(STORAGE_KEY) || "{}");
      return { ...DEFAULT_SETTINGS, ...(stored && typeof stored === "object" ? stored : {}) };
    } catch {
      return { ...DEFAULT_SETTINGS };
    }
  }

  function saveSettings(settings) {
    try {
      localStorage.setItem(STORAGE_KEY, JSON.stringify(settings));
    } catch {
      // storage full or disabled: the settings still apply to this page
    }
  }

  function toolList(text) {
    return [
      ...new Set(
        String(text || "")
          .split(/[\s,]+/)
          .map((name) => name.trim())
          .filter(Boolean),
      ),
    ];
  }

  function selectedTools(settings) {
    return [...new Set([...(settings.tools || []), ...toolList(settings.extraTools)])];
  }

  function chatUrl(endpoint) {
    const base = String(endpoint || "").trim();
    if (!base) return new URL("chat", document.baseURI).href;
    const trimmed = base.replace(/\/+$/, "");
    return /\/chat$/.test(trimmed) ? trimmed : `${trimmed}/chat`;
  }

  function toolsUrl(endpoint) {
    return chatUrl(endpoint).replace(/\/chat$/, "/tools");
  }

  function modelsUrl(endpoint) {
    return chatUrl(endpoint).replace(/\/chat$/, "/v1/models");
  }

  // A limit field: empty is the server's default (null); anything else must be a whole
  // number from 1 up. Returns { value } or { error } (a sentence for the field).
  function readLimit(input) {
    const raw = input.value.trim();
    if (!raw && !input.validity.badInput) return { value: null };
    const value = Number(raw);
    if (!raw || !Number.isSafeInteger(value) || value < 1) {
      return { error: "Enter a whole number from 1 up, or leave it empty for the default." };
    }
    return { value };
  }

  // The model picker, filled from GET /v1/models: the server's default (its first model)
  // stays the first choice, sent as no model at all; a saved choice is kept while offered.
  async function loadModels(select, chosen, saved) {
    const headers = chosen.token ? { authorization: `Bearer ${chosen.token}` } : {};
    let ids;
    try {
      const response = await fetch(modelsUrl(chosen.endpoint), { headers });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const listing = await response.json();
      const data = Array.isArray(listing && listing.data) ? listing.data : [];
      ids = data.map((m) => (m && typeof m.id === "string" ? m.id : "")).filter(Boolean);
    } catch {
      ids = null; // no list (no token yet, another server): keep what the person saved
    }
    fillModels(select, ids, saved);
  }

  // ids: the offered models, the server's default first; null when unknown.
  function fillModels(select, ids, saved) {
    const options = [];
    if (ids && ids.length) {
      options.push(el("option", { value: "" }, `${ids[0]} (default)`));
      for (const id of [...new Set(ids.slice(1))]) options.push(el("option", { value: id }, id));
    } else {
      options.push(el("option", { value: "" }, "server default"));
      if (ids === null && saved) options.push(el("option", { value: saved }, saved));
    }
    select.replaceChildren(...options);
    select.dataset.source = ids && ids.length ? "server" : "unknown"; // for tests to wait on
    const offered = options.some((option) => option.value === saved);
    select.value = offered ? saved : "";
  }

  // The MCP servers' tools the server offers (GET /tools), as checkboxes in the settings.
  // They are opt-in: checked ones are sent in "tools" like the built-in ones.
  async function loadMcpTools(container, chosen) {
    const headers = chosen.token ? { authorization: `Bearer ${chosen.token}` } : {};
    let listing;
    try {
      const response = await fetch(toolsUrl(chosen.endpoint), { headers });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      listing = await response.json();
    } catch {
      container.replaceChildren(); // an older server, or no token yet: nothing to list
      return;
    }
    const servers = Array.isArray(listing.mcp_servers) ? listing.mcp_servers : [];
    const nodes = [];
    for (const server of servers) {
      const tools = Array.isArray(server.tools) ? server.tools : [];
      const title = server.reachable
        ? `MCP server ${server.server}`
        : `MCP server ${server.server} (not reachable yet)`;
      nodes.push(el("p", { class: "extra-label" }, title));
      for (const name of tools) {
        const box = el("input", { type: "checkbox", name: "tool", value: String(name) });
        box.checked = (chosen.tools || []).includes(String(name));
        nodes.push(el("label", {}, box, ` ${name}`));
      }
    }
    container.replaceChildren(...nodes);
  }

  // ---- one assistant reply: runs, text, tool cards, notes -------------------------------------

  const STOP_REASONS = {
    completed: "completed",
    max_iterations: "stopped at the iteration limit",
    budget: "stopped at the token budget",
    deadline: "stopped at the time limit",
    cancelled: "cancelled",
    error: "ended with an error",
    approval_required: "waiting for your approval",
    client_tools: "waiting for the client's tools",
    suspended: "suspended until its next invocation",
  };

  const ERROR_CODES = {
    configuration: "Configuration error",
    invalid_request: "Invalid request",
    provider: "Model provider error",
    invalid_output: "Answer did not match the requested format",
    internal: "Internal error",
  };

  // A run's transcript: text segments, tool cards and notes, in the order they happened.
  class Transcript {
    constructor(container) {
      this.el = container;
      this.segment = null;
      // Where the run's current answer began (a turn_start or tool_call_result): the text a
      // text_reset drops is what was streamed since then.
      this.mark = { segment: null, length: 0, added: [] };
    }

    appendText(text, reply) {
      if (!this.segment) {
        this.segment = { text: "", el: el("div", { class: "answer md" }) };
        this.el.append(this.segment.el);
        this.mark.added.push(this.segment);
      }
      this.segment.text += text;
      reply.scheduleRender(this.segment);
    }

    markAnswerStart() {
      const segment = this.segment;
      this.mark = { segment, length: segment ? segment.text.length : 0, added: [] };
    }

    dropAnswer(reply) {
      for (const segment of this.mark.added) {
        segment.el.remove();
        reply.pending.delete(segment);
      }
      const kept = this.mark.segment;
      if (kept) {
        kept.text = kept.text.slice(0, this.mark.length);
        reply.scheduleRender(kept);
      }
      this.segment = kept;
      this.mark = { segment: kept, length: kept ? kept.text.length : 0, added: [] };
    }

    append(node) {
      this.segment = null;
      this.el.append(node);
    }

    text() {
      return [...this.el.querySelectorAll(":scope > .answer")].map((n) => n.textContent).join("");
    }
  }

  function formatArguments(raw) {
    let args;
    try {
      args = JSON.parse(raw);
    } catch {
      return raw;
    }
    if (!args || typeof args !== "object" || Array.isArray(args)) return JSON.stringify(args);
    return Object.entries(args)
      .map(([key, value]) =>
        typeof value === "string" && value.includes("\n")
          ? `${key}:\n${value}`
          : `${key}: ${JSON.stringify(value)}`,
      )
      .join("\n");
  }

  function formatResult(raw) {
    try {
      return JSON.stringify(JSON.parse(raw), null, 2);
    } catch {
      return raw;
    }
  }

  // execute_code's outcome ({exit_code, stdout, stderr, truncated, duration_ms, timed_out,
  // killed_by, notes}) inside the result envelope, or null when the content is anything else
  // (a sandbox failure, an envelope cut to text): those show as the generic result.
  function codeOutcome(raw) {
    let parsed;
    try {
      parsed = JSON.parse(raw);
    } catch {
      return null;
    }
    const outcome = parsed && parsed.ok === true ? parsed.result : null;
    if (!outcome || typeof outcome !== "object") return null;
    if (typeof outcome.stdout !== "string" || typeof outcome.stderr !== "string") return null;
    return outcome;
  }

  // Terminal colour and cursor sequences a program may print: shown as nothing.
  const ANSI_ESCAPE = /\u001b\[[0-9;?]*[ -/]*[@-~]|\u001b[@-_]/g;

  function terminal(outcome) {
    const status = [];
    const exit = outcome.exit_code;
    const failed = exit !== 0 || outcome.timed_out;
    if (outcome.timed_out) status.push("timed out");
    if (typeof outcome.killed_by === "string" && outcome.killed_by) {
      status.push(`killed by ${outcome.killed_by}`);
    } else if (Number.isInteger(exit)) {
      status.push(`exit ${exit}`);
    } else if (!outcome.timed_out) {
      status.push("exit status unknown");
    }
    if (Number.isFinite(outcome.duration_ms)) status.push(formatDuration(outcome.duration_ms));
    if (outcome.truncated) status.push("output cut (start and end kept)");
    const streams = [];
    for (const name of ["stdout", "stderr"]) {
      const text = outcome[name].replace(ANSI_ESCAPE, "");
      if (!text) continue;
      streams.push(
        el(
          "div",
          { class: `stream stream-${name}` },
          el("span", { class: "stream-name" }, name),
          el("pre", { tabindex: 0, "aria-label": `${name} of the program` }, text),
        ),
      );
    }
    if (!streams.length) streams.push(el("p", { class: "stream-empty" }, "No output."));
    const notes = Array.isArray(outcome.notes) ? outcome.notes.filter((n) => typeof n === "string") : [];
    return el(
      "div",
      { class: "terminal", role: "group", "aria-label": "program output" },
      el(
        "p",
        { class: "terminal-status", dataset: { failed: failed ? "true" : "false" } },
        status.join(" · "),
      ),
      ...streams,
      notes.length ? el("ul", { class: "terminal-notes" }, ...notes.map((n) => el("li", {}, n))) : null,
    );
  }

  class ToolCard {
    constructor(event) {
      this.callId = event.call_id;
      this.name = event.name;
      this.el = el("div", {
        class: "tool-card",
        role: "group",
        "aria-label": `tool call ${event.name}`,
        dataset: {
          callId: event.call_id,
          name: event.name,
          depth: String(event.depth || 0),
          status: "running",
        },
      });
      this.statusEl = el("span", { class: "tool-status" }, "running");
      this.durationEl = el("span", { class: "tool-duration" });
      this.el.append(
        el(
          "div",
          { class: "tool-head" },
          el("span", { class: "tool-icon", "aria-hidden": "true" }),
          el("span", { class: "tool-name" }, event.name),
          this.statusEl,
          this.durationEl,
        ),
      );
      const args = formatArguments(event.arguments || "");
      if (args && args !== "{}") this.el.append(el("pre", { class: "tool-args" }, args));
      this.subagents = null;
      this.decision = null; // { approved, reason } once a person decided a call that waits
      this.panel = null;
    }

    // A call that waits for a person: Approve / Deny (with an optional reason) on the card.
    // onDecide(decision) is called once; the decision cannot be taken back.
    askApproval(onDecide) {
      this.setStatus("needs approval", "approval");
      const reason = el("input", {
        type: "text",
        class: "approval-reason",
        maxlength: 500,
        placeholder: "Reason for denying (optional)",
        "aria-label": `Reason for denying ${this.name} (optional)`,
      });
      const approve = el("button", { type: "button", class: "approve" }, "Approve");
      const deny = el("button", { type: "button", class: "deny" }, "Deny");
      this.panel = el(
        "div",
        { class: "approval", role: "group", "aria-label": `approve or deny ${this.name}` },
        el("p", { class: "approval-ask" }, "This call waits for your approval."),
        el("div", { class: "approval-controls" }, reason, approve, deny),
      );
      this.el.append(this.panel);
      const decide = (approved) => {
        if (this.decision || !this.panel) return;
        const why = approved ? "" : reason.value.trim();
        this.decision = why ? { approved, reason: why } : { approved };
        this.panel.replaceChildren(
          el(
            "p",
            { class: "approval-decision" },
            approved ? "Approved." : `Denied${why ? `: ${why}` : "."}`,
          ),
        );
        this.setStatus(approved ? "approved" : "denied");
        onDecide(this.decision);
      };
      approve.addEventListener("click", () => decide(true));
      deny.addEventListener("click", () => decide(false));
      reason.addEventListener("keydown", (event) => {
        if (event.key === "Enter" && !event.isComposing) {
          event.preventDefault();
          decide(false);
        }
      });
    }

    // The pause is over without a decision (the stream broke, a new chat): no buttons left.
    withdrawApproval() {
      if (!this.panel || this.decision) return;
      this.panel.replaceChildren(el("p", { class: "approval-decision" }, "Not decided; not run."));
      this.panel = null;
      this.setStatus("stopped");
    }

    // A decided call's own tool_call_start, in the continued run: the card it already has.
    start() {
      this.setStatus("running");
    }

    subagentBlock(runId, query) {
      if (!this.subagents) {
        this.subagents = el("div", { class: "subagents" });
        const result = this.el.querySelector(".tool-result");
        if (result) result.before(this.subagents);
        else this.el.append(this.subagents);
      }
      const block = el("div", { class: "subagent", dataset: { runId } });
      block.append(el("p", { class: "subagent-query" }, "Sub-agent: ", el("q", {}, query || "…")));
      const transcript = el("div", { class: "transcript sub" });
      block.append(transcript);
      this.subagents.append(block);
      return { block, transcript: new Transcript(transcript) };
    }

    finish(event) {
      const ok = Boolean(event.ok);
      if (ok) this.setStatus("done");
      else this.setStatus(this.decision && !this.decision.approved ? "denied" : "failed");
      this.durationEl.textContent = formatDuration(event.duration_ms || 0);
      let label = "Result";
      if (!ok) {
        try {
          const parsed = JSON.parse(event.content);
          if (parsed && parsed.error) label = `Error: ${parsed.error}`;
        } catch {
          // not JSON: the generic label will do
        }
      }
      const outcome = this.name === "execute_code" ? codeOutcome(event.content || "") : null;
      if (outcome) {
        this.el.append(terminal(outcome));
        return;
      }
      const content = formatResult(event.content || "");
      const details = el(
        "details",
        { class: "tool-result", open: !ok },
        el("summary", {}, label, el("span", { class: "size" }, ` (${number.format(content.length)} chars)`)),
        el("pre", {}, content),
      );
      this.el.append(details);
    }

    setStatus(label, status = label) {
      this.el.dataset.status = status;
      this.statusEl.textContent = label;
    }
  }

  // A source's link target: http(s) only; anything else (javascript:, data:, a relative
  // path) is shown as text and never becomes a link.
  function sourceHref(raw) {
    if (typeof raw !== "string") return null;
    try {
      const url = new URL(raw);
      return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
    } catch {
      return null;
    }
  }

  const clip = (text, limit) => (text.length > limit ? `${text.slice(0, limit - 1)}…` : text);

  // done.sources ([{url, title}], in order of first use) as a list of links under the answer.
  // Titles come from web pages: they are only ever text.
  function sourceList(sources) {
    const items = [];
    for (const source of sources) {
      if (!source || typeof source.url !== "string" || !source.url) continue;
      const href = sourceHref(source.url);
      const title = typeof source.title === "string" ? source.title.replace(/\s+/g, " ").trim() : "";
      const label = clip(title || source.url, 200);
      let host = "";
      if (href) host = new URL(href).host;
      const item = el("li", {});
      if (href) {
        item.append(el("a", { href, target: "_blank", rel: "noopener noreferrer" }, label));
      } else {
        item.append(el("span", { class: "source-text" }, label));
      }
      if (host && label !== source.url) item.append(el("span", { class: "source-host" }, host));
      items.push(item);
    }
    if (!items.length) return null;
    return el(
      "nav",
      { class: "sources", "aria-label": "Sources" },
      el("p", { class: "sources-title" }, "Sources"),
      el("ol", {}, ...items),
    );
  }

  class Reply {
    constructor(conversation, notices = new Set()) {
      this.el = el("article", {
        class: "msg assistant",
        "aria-label": "agentloop's answer",
        "aria-busy": "true",
        dataset: { state: "running" },
      });
      const transcript = el("div", { class: "transcript" });
      this.meta = el("p", { class: "meta" }, "waiting for the server…");
      this.el.append(transcript, this.meta);
      conversation.append(this.el);
      this.main = new Transcript(transcript);
      this.runs = new Map(); // run_id -> Transcript
      this.cards = new Map(); // call_id -> ToolCard
      this.pending = new Set();
      this.frame = 0;
      this.done = null;
      this.model = "";
      this.usage = null;
      this.budget = null;
      this.cost = undefined; // undefined: no call priced yet; null: unknown
      this.unpriced = ""; // the server's notice that a model has no known price
      this.notices = notices; // notices already said on this page: each is said once
      this.sources = null; // the list under the answer
      this.sourceSeen = []; // every source of this reply's runs (a paused one's continued)
      this.metaNote = null;
      this.decisions = new Map(); // call_id -> { approved, reason? }, for a paused run
      this.onDecide = () => {};
    }

    // A paused run goes on in the same reply: the continued run's events land here too.
    resume() {
      this.done = null;
      this.el.dataset.state = "running";
      this.el.setAttribute("aria-busy", "true");
      this.meta.textContent = "continuing…";
    }

    scheduleRender(segment) {
      this.pending.add(segment);
      if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
    }

    flush() {
      if (this.frame) cancelAnimationFrame(this.frame);
      this.frame = 0;
      for (const segment of this.pending) {
        segment.el.replaceChildren();
        renderMarkdown(segment.text, segment.el);
      }
      this.pending.clear();
    }

    transcriptFor(event) {
      if (!event.depth) return this.main;
      const known = this.runs.get(event.run_id);
      if (known) return known;
      const card = this.cards.get(event.parent_call_id);
      if (!card) return this.main; // should not happen; keep the event visible anyway
      const { transcript } = card.subagentBlock(event.run_id, event.query);
      this.runs.set(event.run_id, transcript);
      return transcript;
    }

    note(transcript, kind, ...text) {
      transcript.append(el("p", { class: `note note-${kind}` }, ...text));
    }

    handle(type, data) {
      const transcript = this.transcriptFor(data);
      switch (type) {
        case "run_start":
          if (!data.depth) {
            this.model = data.model;
            this.budget = data.budget_remaining;
            this.showMeta();
          }
          break;
        case "turn_start":
          transcript.markAnswerStart();
          break;
        case "text_delta":
          transcript.appendText(data.text, this);
          break;
        case "text_reset":
          // The provider's stream was cut and the turn is retried: its text so far is void.
          transcript.dropAnswer(this);
          break;
        case "tool_call_start": {
          const decided = this.cards.get(data.call_id);
          if (decided && decided.decision) {
            decided.start(); // approved or denied while paused: it runs (or is refused) now
            break;
          }
          const card = new ToolCard(data);
          this.cards.set(data.call_id, card);
          transcript.append(card.el);
          break;
        }
        case "tool_call_result": {
          const card = this.cards.get(data.call_id);
          if (card) card.finish(data);
          transcript.markAnswerStart();
          break;
        }
        case "approval_request": {
          const card = new ToolCard(data);
          this.cards.set(data.call_id, card);
          transcript.append(card.el);
          card.askApproval((decision) => {
            this.decisions.set(data.call_id, decision);
            this.onDecide();
          });
          break;
        }
        case "subagent_start": {
          // transcriptFor created the block (with the query) for this run_id
          break;
        }
        case "subagent_finish": {
          const run = this.runs.get(data.run_id);
          if (run) {
            const tokens = data.usage.prompt_tokens + data.usage.completion_tokens;
            run.el.after(
              el(
                "p",
                { class: "subagent-meta" },
                `${STOP_REASONS[data.stop_reason] || data.stop_reason} · ` +
                  `${data.iterations} turn${data.iterations === 1 ? "" : "s"} · ` +
                  `${number.format(tokens)} tokens · ${dollars(data.cost_usd)}`,
              ),
            );
          }
          break;
        }
        case "usage":
          this.usage = data.total;
          this.budget = data.budget_remaining;
          this.cost = data.total_cost_usd;
          this.showMeta();
          break;
        case "model_switched":
          this.note(
            transcript,
            "switch",
            `Switched model from ${data.from_model} to ${data.to_model}: ${data.reason}`,
          );
          break;
        case "notice":
          if (data.code === "unpriced") {
            // Said where the cost is shown, quietly, not as a note above the answer.
            this.unpriced = String(data.message || "No price is known for this model.");
            this.showMeta();
          } else {
            this.note(transcript, "notice", data.message);
          }
          break;
        case "error":
          this.note(
            transcript,
            "error",
            `${ERROR_CODES[data.code] || "Error"}: ${data.message}`,
          );
          break;
        case "done":
          if (!data.depth) {
            this.done = data;
            this.usage = data.usage;
            this.budget = data.budget_remaining;
            this.cost = data.cost_usd;
          }
          break;
        default:
          break; // anything newer: nothing to show
      }
    }

    tokens() {
      if (!this.usage) return null;
      return this.usage.prompt_tokens + this.usage.completion_tokens;
    }

    showMeta() {
      const parts = [];
      if (this.model) parts.push(this.model);
      const tokens = this.tokens();
      if (tokens !== null) parts.push(`${number.format(tokens)} tokens used`);
      if (this.cost !== undefined) parts.push(this.costPart(dollars(this.cost)));
      if (this.budget !== null && this.budget !== undefined) {
        parts.push(`${number.format(this.budget)} left in budget`);
      }
      this.setMeta(parts);
    }

    // The cost, with the unpriced notice as its explanation (hover, and screen readers).
    costPart(text) {
      if (!this.unpriced || !text.startsWith("cost unknown")) return text;
      return el("span", { class: "cost-unknown", title: this.unpriced }, text);
    }

    setMeta(parts) {
      const nodes = [];
      parts.forEach((part, index) => {
        if (index) nodes.push(" · ");
        nodes.push(part);
      });
      this.meta.replaceChildren(...nodes);
      if (this.unpriced && !this.notices.has(this.unpriced) && !this.metaNote) {
        // The first answer on this page that has no price says why, once, under its cost.
        this.notices.add(this.unpriced);
        this.metaNote = el("p", { class: "meta-note" }, this.unpriced);
        this.meta.after(this.metaNote);
      }
    }

    finish(state, message) {
      this.flush();
      this.el.dataset.state = state;
      this.el.setAttribute("aria-busy", "false");
      for (const card of this.cards.values()) {
        if (card.el.dataset.status === "running") card.setStatus("stopped");
        if (state !== "paused") card.withdrawApproval();
      }
      const parts = [];
      if (this.done) {
        const d = this.done;
        parts.push(STOP_REASONS[d.stop_reason] || d.stop_reason);
        parts.push(`${d.iterations} turn${d.iterations === 1 ? "" : "s"}`);
        const tokens = this.tokens();
        let used = `${number.format(tokens)} tokens (${number.format(d.usage.prompt_tokens)} in, ` +
          `${number.format(d.usage.completion_tokens)} out)`;
        const byDepth = d.usage_by_depth || [];
        if (byDepth.length > 1) {
          const sub = byDepth
            .slice(1)
            .reduce((sum, u) => sum + u.prompt_tokens + u.completion_tokens, 0);
          used += `, ${number.format(sub)} by sub-agents`;
        }
        parts.push(used);
        let cost = dollars(d.cost_usd);
        const costByDepth = d.cost_by_depth || [];
        if (costByDepth.length > 1 && d.cost_usd !== null) {
          cost += `, ${dollars(costByDepth.slice(1).reduce((sum, c) => sum + c, 0))} by sub-agents`;
        }
        parts.push(this.costPart(cost));
        parts.push(`${number.format(d.budget_remaining)} left in budget`);
        if (this.model) parts.push(this.model);
        this.setMeta(parts);
        this.showSources(d.sources);
      } else if (state !== "error") {
        this.showMeta();
      } else {
        this.meta.remove();
        if (this.metaNote) {
          this.metaNote.remove();
          this.notices.delete(this.unpriced); // not seen after all: the next answer says it
        }
      }
      if (message) {
        this.el.append(
          el("div", { class: `banner banner-${state}`, role: "alert" }, ...[].concat(message)),
        );
      }
    }

    // A continued run's done may list only what it used itself: the reply shows both runs'.
    showSources(sources) {
      if (!Array.isArray(sources)) return;
      const known = new Set(this.sourceSeen.map((s) => s.url));
      for (const source of sources) {
        if (source && typeof source.url === "string" && !known.has(source.url)) {
          known.add(source.url);
          this.sourceSeen.push(source);
        }
      }
      const list = sourceList(this.sourceSeen);
      if (this.sources) this.sources.remove();
      this.sources = list;
      if (list) this.meta.before(list);
    }

    answerText() {
      this.flush(); // text still waiting for its render frame is part of the answer too
      return this.main.text();
    }
  }

  // ---- errors -------------------------------------------------------------------------------

  class HttpFailure extends Error {
    constructor(status, statusText, error) {
      super(error.message || statusText || `HTTP ${status}`);
      this.status = status;
      this.statusText = statusText;
      this.error = error;
    }
  }

  const STATUS_TITLES = {
    400: "Bad request",
    401: "Not authorized",
    403: "Forbidden",
    404: "Not found",
    405: "Not allowed",
    413: "Too large",
    415: "Unsupported content type",
    422: "Request rejected",
    429: "Too many requests",
    500: "Server error",
    502: "Bad gateway",
    503: "Service unavailable",
    504: "Gateway timeout",
  };

  function hintFor(failure) {
    const param = failure.error.param || "";
    if (failure.status === 401 || failure.status === 403) {
      return "Check the bearer token in Settings.";
    }
    if (failure.status === 413) return "Shorten the message or start a new chat.";
    if (failure.status === 422 && param.startsWith("approval_tools")) {
      return "Check “Ask before running” in Settings.";
    }
    if (failure.status === 422 && (param === "resume" || param === "approvals")) {
      return "The paused run cannot go on; ask again in a new message.";
    }
    if (failure.status === 422 && param.startsWith("tools")) {
      return "Change the tools in Settings.";
    }
    if (failure.status === 422 && param === "model") return "Check the model in Settings.";
    if (failure.status === 422 && param === "max_iterations") {
      return "Check max iterations in Settings.";
    }
    if (failure.status === 422 && param === "token_budget") {
      return "Check the token budget in Settings.";
    }
    if (failure.status === 404) return "Check the endpoint URL in Settings.";
    return "";
  }

  async function readError(response) {
    const text = await response.text().catch(() => "");
    try {
      const body = JSON.parse(text);
      if (body && body.error) {
        if (typeof body.error === "string") return { message: body.error };
        return body.error;
      }
      if (body && typeof body.message === "string") return { message: body.message };
    } catch {
      // not JSON: a proxy's page, say
    }
    return { message: text.trim().slice(0, 300) };
  }

  function describeFailure(err, url) {
    if (err instanceof HttpFailure) {
      const title = STATUS_TITLES[err.status] || err.statusText || "Request failed";
      const hint = hintFor(err);
      let message = String(err.error.message || "").trim();
      if (hint && message && !/[.!?]$/.test(message)) message += ".";
      return [
        el("strong", {}, `${title} (HTTP ${err.status}): `),
        message,
        hint ? el("span", { class: "hint" }, ` ${hint}`) : null,
      ];
    }
    if (err instanceof TypeError) {
      return [
        el("strong", {}, "Could not reach the server: "),
        `${url} did not answer (${err.message}). `,
        el(
          "span",
          { class: "hint" },
          "Check the endpoint URL in Settings; a server on another origin must allow this " +
            "page's origin (CORS).",
        ),
      ];
    }
    return [el("strong", {}, "Error: "), String(err && err.message ? err.message : err)];
  }

  // ---- the page -------------------------------------------------------------------------------

  // Prompts the empty page offers; each names the tools it needs, so a click shows what the
  // agent can do. Clicking one puts it in the message box, to send or edit.
  const EXAMPLES = [
    {
      tools: "execute_code",
      text: "Use Python to list the prime numbers below 100 and add them up.",
    },
    {
      tools: "search_web, scrape",
      text: "Search the web for what changed in the latest Python release and summarise it.",
    },
    {
      tools: "scrape",
      text: "Read https://www.python.org/about/ and sum it up in three bullet points.",
    },
    { tools: "no tools", text: "Explain the difference between a process and a thread." },
  ];

  function emptyState(onPick) {
    const list = el("ul", { class: "examples", "aria-label": "Example prompts" });
    for (const example of EXAMPLES) {
      const button = el(
        "button",
        { type: "button", class: "example" },
        el("span", { class: "example-text" }, example.text),
        el("span", { class: "example-tools" }, example.tools),
      );
      button.addEventListener("click", () => onPick(example.text));
      list.append(el("li", {}, button));
    }
    return el(
      "section",
      { class: "empty-hint", id: "empty-hint", "aria-label": "Getting started" },
      el(
        "p",
        { class: "empty-lead" },
        "Ask something. Answers stream in as the agent works; tool calls show up as cards.",
      ),
      el("p", { class: "empty-try" }, "Or start from an example:"),
      list,
    );
  }

  function start() {
    const conversation = document.getElementById("conversation");
    const form = document.getElementById("composer");
    const prompt = document.getElementById("prompt");
    const sendButton = document.getElementById("send");
    const stopButton = document.getElementById("stop");
    const status = document.getElementById("status");
    const settingsForm = document.getElementById("settings-form");
    const newChat = document.getElementById("new-chat");

    let history = []; // the messages sent with the next request (before the new one)
    let current = null; // { controller, reply }
    let generation = 0; // bumped by "New chat", so a run that ends later leaves history alone
    // A run paused for approvals: { reply, request, base, conversation, resume, pending,
    // started }. It lives in this page only: a reload loses it (the server keeps nothing).
    let pause = null;

    // settings form <-> localStorage
    const settings = loadSettings();
    settingsForm.elements.endpoint.value = settings.endpoint;
    settingsForm.elements.token.value = settings.token;
    const modelPicker = settingsForm.elements.model;
    let wantedModel = typeof settings.model === "string" ? settings.model : "";
    fillModels(modelPicker, null, wantedModel);
    settingsForm.elements.maxIterations.value = settings.maxIterations;
    settingsForm.elements.tokenBudget.value = settings.tokenBudget;
    settingsForm.elements.extraTools.value = settings.extraTools;
    settingsForm.elements.approvalTools.value = settings.approvalTools;
    for (const box of settingsForm.querySelectorAll('input[name="tool"]')) {
      box.checked = settings.tools.includes(box.value);
    }
    const readSettingsForm = () => ({
      endpoint: settingsForm.elements.endpoint.value.trim(),
      token: settingsForm.elements.token.value.trim(),
      model: settingsForm.elements.model.value.trim(),
      maxIterations: settingsForm.elements.maxIterations.value.trim(),
      tokenBudget: settingsForm.elements.tokenBudget.value.trim(),
      tools: [...settingsForm.querySelectorAll('input[name="tool"]:checked')].map((b) => b.value),
      extraTools: settingsForm.elements.extraTools.value.trim(),
      approvalTools: settingsForm.elements.approvalTools.value.trim(),
    });
    settingsForm.addEventListener("input", () => saveSettings(readSettingsForm()));
    settingsForm.addEventListener("change", () => saveSettings(readSettingsForm()));
    modelPicker.addEventListener("change", () => {
      wantedModel = modelPicker.value;
    });
    const mcpTools = document.getElementById("mcp-tools");
    loadMcpTools(mcpTools, settings);
    loadModels(modelPicker, settings, wantedModel);
    for (const name of ["endpoint", "token"]) {
      settingsForm.elements[name].addEventListener("change", () => {
        loadMcpTools(mcpTools, readSettingsForm());
        loadModels(modelPicker, readSettingsForm(), wantedModel);
      });
    }
    settingsForm.addEventListener("submit", (event) => event.preventDefault());

    // The limits: checked as they are typed, and again before a message goes out.
    const limitFields = [
      { input: settingsForm.elements.maxIterations, error: "error-iterations" },
      { input: settingsForm.elements.tokenBudget, error: "error-budget" },
    ];
    const checkLimit = ({ input, error }) => {
      const result = readLimit(input);
      const message = document.getElementById(error);
      message.textContent = result.error || "";
      message.hidden = !result.error;
      input.setAttribute("aria-invalid", result.error ? "true" : "false");
      return result;
    };
    for (const field of limitFields) {
      field.input.addEventListener("input", () => checkLimit(field));
      checkLimit(field);
    }

    // The settings panel: beside the conversation on a wide screen, a sheet over it on a
    // narrow one (CSS decides); the toggle, Close and Escape open and close it.
    const settingsPanel = document.getElementById("settings");
    const settingsToggle = document.getElementById("settings-toggle");
    // On a narrow screen the open panel covers the page: what is behind it is inert.
    const narrow = window.matchMedia("(max-width: 760px)");
    const behindSheet = [document.querySelector(".top"), document.querySelector(".chat-column")];
    const updateInert = () => {
      const covered = !settingsPanel.hidden && narrow.matches;
      for (const node of behindSheet) node.inert = covered;
    };
    narrow.addEventListener("change", updateInert);
    const setSettingsOpen = (open, focus = true) => {
      settingsPanel.hidden = !open;
      settingsToggle.setAttribute("aria-expanded", String(open));
      document.body.classList.toggle("settings-open", open);
      updateInert();
      if (!focus) return;
      if (open) document.getElementById("settings-title").focus();
      else settingsToggle.focus();
    };
    settingsToggle.addEventListener("click", () => setSettingsOpen(settingsPanel.hidden));
    document.getElementById("settings-close").addEventListener("click", () => {
      setSettingsOpen(false);
    });
    settingsPanel.addEventListener("keydown", (event) => {
      if (event.key === "Escape") setSettingsOpen(false);
    });

    const setStatus = (text) => {
      status.textContent = text;
    };

    const idle = prompt.placeholder;
    const notices = new Set(); // notices said once per conversation (a model with no price)

    const pickExample = (text) => {
      if (pause) return;
      prompt.value = text;
      prompt.focus();
      prompt.setSelectionRange(text.length, text.length);
    };
    conversation.replaceChildren(emptyState(pickExample));

    // Send is off while a run streams; the whole composer is off while a paused run waits
    // for decisions (a new message cannot come between a turn's calls and their results).
    const updateComposer = () => {
      sendButton.disabled = Boolean(current) || Boolean(pause);
      stopButton.disabled = !current;
      prompt.disabled = Boolean(pause);
      prompt.placeholder = pause ? "Approve or deny the tool calls above to go on." : idle;
      document.body.classList.toggle("running", Boolean(current));
      document.body.classList.toggle("paused", Boolean(pause));
    };

    const nearBottom = () =>
      conversation.scrollHeight - conversation.scrollTop - conversation.clientHeight < 80;

    function addUserMessage(text) {
      const hint = document.getElementById("empty-hint");
      if (hint) hint.remove();
      const article = el("article", { class: "msg user", "aria-label": "your message" });
      article.append(el("div", { class: "md" }, text));
      conversation.append(article);
      return article;
    }

    function newRequest(chosen, messages, limits) {
      const body = { messages, tools: selectedTools(chosen) };
      if (chosen.model) body.model = chosen.model;
      if (limits.maxIterations !== null) body.max_iterations = limits.maxIterations;
      if (limits.tokenBudget !== null) body.token_budget = limits.tokenBudget;
      const asking = toolList(chosen.approvalTools);
      if (asking.length) body.approval_tools = asking;
      const headers = { "content-type": "application/json", accept: "text/event-stream" };
      if (chosen.token) headers.authorization = `Bearer ${chosen.token}`;
      return { url: chatUrl(chosen.endpoint), headers, body };
    }

    // POST one request and stream its events into reply; { failure, stopped } at the end.
    async function stream(request, reply) {
      const controller = new AbortController();
      current = { controller, reply };
      updateComposer();
      let failure = null;
      try {
        const response = await fetch(request.url, {
          method: "POST",
          headers: request.headers,
          body: JSON.stringify(request.body),
          signal: controller.signal,
          cache: "no-store",
        });
        if (!response.ok) {
          throw new HttpFailure(response.status, response.statusText, await readError(response));
        }
        const type = response.headers.get("content-type") || "";
        if (!type.startsWith("text/event-stream") || !response.body) {
          throw new Error(`expected an event stream, got ${type || "no content type"}`);
        }
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        const parser = new SSEParser((eventType, raw) => {
          let data;
          try {
            data = JSON.parse(raw);
          } catch {
            return;
          }
          const stick = nearBottom();
          reply.handle(data.type || eventType, data);
          if (stick) conversation.scrollTop = conversation.scrollHeight;
        });
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          parser.push(decoder.decode(value, { stream: true }));
        }
        parser.push(decoder.decode());
      } catch (err) {
        failure = err;
      }
      current = null;
      updateComposer();
      return { failure, stopped: controller.signal.aborted };
    }

    // The run broke off (stopped, cut, refused) after `base`: what was shown stays part of
    // the conversation as the answer; a paused turn's calls and results do not.
    function breakOff(reply, base, outcome, url) {
      const partial = reply.answerText().trim();
      history = partial ? [...base, { role: "assistant", content: partial }] : [...base];
      if (outcome.stopped) {
        reply.finish(
          "stopped",
          "Stopped. The server stops the agent after the tool round in progress.",
        );
        setStatus("Stopped.");
      } else if (outcome.failure) {
        reply.finish("error", describeFailure(outcome.failure, url));
        setStatus(`Error: ${outcome.failure.message || "request failed"}`);
      } else {
        reply.finish("error", "The connection closed before the run finished.");
        setStatus("Connection lost.");
      }
    }

    // The run's done arrived: the conversation goes on from it, or it waits for decisions.
    function settle(reply, request, base, started) {
      const done = reply.done;
      const sent = request.body.messages;
      const pending = done.pending || [];
      if (pending.length) {
        if (
          done.stop_reason !== "approval_required" ||
          !done.resume ||
          pending.some((call) => call.kind !== "approval")
        ) {
          // Client tools: this page declares none, so nothing here can run them.
          const failure = new Error("the run waits for client-side tools; this page has none");
          breakOff(reply, base, { failure }, request.url);
          return;
        }
        pause = {
          reply,
          request,
          base,
          conversation: [...sent, ...done.messages],
          resume: done.resume,
          pending,
          started,
        };
        reply.finish("paused");
        updateComposer();
        decided();
        return;
      }
      history = [...sent, ...done.messages];
      reply.finish("done");
      const reason = done.stop_reason;
      setStatus(reason === "completed" ? "Done." : `Done: ${STOP_REASONS[reason] || reason}.`);
    }

    // A decision was made on a card: once every waiting call has one, the run goes on.
    function decided() {
      if (!pause) return; // the run's done has not arrived yet: settle() calls this again
      const { reply } = pause;
      const open = pause.pending.filter((call) => !reply.decisions.has(call.call_id));
      if (open.length) {
        const calls = `${open.length} tool call${open.length === 1 ? "" : "s"}`;
        setStatus(`Waiting for your decision on ${calls}.`);
        return;
      }
      continueRun(pause);
    }

    async function continueRun(paused) {
      pause = null;
      const { reply } = paused;
      const approvals = paused.pending.map((call) => ({
        call_id: call.call_id,
        ...reply.decisions.get(call.call_id),
      }));
      const request = {
        ...paused.request,
        body: {
          ...paused.request.body,
          messages: paused.conversation,
          resume: paused.resume,
          approvals,
        },
      };
      reply.resume();
      setStatus("Running…");
      const outcome = await stream(request, reply);
      if (paused.started !== generation) return;
      if (reply.done) settle(reply, request, paused.base, paused.started);
      else breakOff(reply, paused.base, outcome, request.url);
      conversation.scrollTop = conversation.scrollHeight;
      if (!pause) prompt.focus();
    }

    // The limits as numbers (null: the server's default), or null when one is not valid:
    // then the settings open at the field that says what is wrong.
    function readLimits() {
      const [iterations, budget] = limitFields.map(checkLimit);
      const wrong = limitFields.find((field, index) => [iterations, budget][index].error);
      if (wrong) {
        setSettingsOpen(true, false);
        wrong.input.focus();
        const label = wrong.input.labels[0].textContent;
        setStatus(`${label} in Settings is not a whole number from 1 up.`);
        return null;
      }
      return { maxIterations: iterations.value, tokenBudget: budget.value };
    }

    async function send(text) {
      const chosen = readSettingsForm();
      const limits = readLimits();
      if (!limits) {
        if (!prompt.value.trim()) prompt.value = text;
        return;
      }
      const userMessage = { role: "user", content: text };
      const messages = [...history, userMessage];
      const request = newRequest(chosen, messages, limits);

      const started = generation;
      const userArticle = addUserMessage(text);
      const reply = new Reply(conversation, notices);
      reply.onDecide = decided;
      setStatus("Running…");
      conversation.scrollTop = conversation.scrollHeight;

      const outcome = await stream(request, reply);
      if (started !== generation) return; // the user started a new chat meanwhile
      if (reply.done) {
        settle(reply, request, messages, started);
      } else if (outcome.stopped || !outcome.failure) {
        breakOff(reply, messages, outcome, request.url);
      } else {
        // Nothing ran: the message is not part of the conversation; put it back to edit.
        const failure = outcome.failure;
        reply.finish("error", describeFailure(failure, request.url));
        userArticle.classList.add("not-sent");
        userArticle.append(el("span", { class: "unsent-label" }, "not sent"));
        setStatus(`Error: ${failure.message || "request failed"}`);
        if (!prompt.value.trim()) prompt.value = text;
      }
      conversation.scrollTop = conversation.scrollHeight;
      if (!pause) prompt.focus();
    }

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const text = prompt.value.trim();
      if (!text || current || pause) return;
      prompt.value = "";
      send(text);
    });

    prompt.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        if (!current && !pause) form.requestSubmit();
      }
    });

    stopButton.addEventListener("click", () => {
      if (current) current.controller.abort();
    });

    newChat.addEventListener("click", () => {
      if (current) current.controller.abort();
      generation += 1;
      history = [];
      pause = null; // its calls never run: the server kept nothing
      updateComposer();
      notices.clear();
      conversation.replaceChildren(emptyState(pickExample));
      setStatus("Ready.");
      prompt.focus();
    });

    window.agentloop = {
      get history() {
        return history;
      },
      // The calls a paused run waits on ([] when none does).
      get pending() {
        return pause ? pause.pending.map((call) => ({ ...call })) : [];
      },
    };
  }

  // For tests and for anyone reusing the pieces.
  window.agentloopMarkdown = (source) => renderMarkdown(source, document.createElement("div"));
  window.AgentloopSSEParser = SSEParser;
  window.agentloopSources = (sources) => sourceList(sources) || el("ol");

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
