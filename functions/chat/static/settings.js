// What the settings mean: kept in localStorage (the token in sessionStorage), turned into the
// server's URLs, the limit rule, and the lists the server offers (models, MCP tools) as form
// controls.

import { el } from "./dom.js";

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

// A pasted token is a long-lived secret: it stays in this tab's sessionStorage (gone when the
// tab closes), never in localStorage with the other settings.
const TOKEN_KEY = "agentloop.token";

function readJson(storage, key) {
  try {
    const value = JSON.parse(storage.getItem(key) || "{}");
    return value && typeof value === "object" && !Array.isArray(value) ? value : {};
  } catch {
    return {};
  }
}

function readToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  } catch {
    return "";
  }
}

export function loadSettings() {
  const stored = readJson(localStorage, STORAGE_KEY);
  let token = readToken();
  if ("token" in stored) {
    // An older page kept the token with the settings: it moves to this tab's session.
    token = token || String(stored.token || "");
    delete stored.token;
    saveSettings({ ...DEFAULT_SETTINGS, ...stored, token });
  }
  return { ...DEFAULT_SETTINGS, ...stored, token };
}

export function saveSettings(settings) {
  const { token, ...kept } = settings;
  try {
    localStorage.setItem(STORAGE_KEY, JSON.stringify(kept));
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // storage full or disabled: the settings still apply to this page
  }
}

// "a, b c" -> ["a", "b", "c"], each name once.
export function toolList(text) {
  return [
    ...new Set(
      String(text || "")
        .split(/[\s,]+/)
        .map((name) => name.trim())
        .filter(Boolean),
    ),
  ];
}

export function selectedTools(settings) {
  return [...new Set([...(settings.tools || []), ...toolList(settings.extraTools)])];
}

export function chatUrl(endpoint) {
  const base = String(endpoint || "").trim();
  if (!base) return new URL("chat", document.baseURI).href;
  const trimmed = base.replace(/\/+$/, "");
  return /\/chat$/.test(trimmed) ? trimmed : `${trimmed}/chat`;
}

const toolsUrl = (endpoint) => chatUrl(endpoint).replace(/\/chat$/, "/tools");
const modelsUrl = (endpoint) => chatUrl(endpoint).replace(/\/chat$/, "/v1/models");

// A limit field: empty is the server's default (null); anything else must be a whole
// number from 1 up. Returns { value } or { error } (a sentence for the field).
export function readLimit(input) {
  const raw = input.value.trim();
  if (!raw && !input.validity.badInput) return { value: null };
  const value = Number(raw);
  if (!raw || !Number.isSafeInteger(value) || value < 1) {
    return { error: "Enter a whole number from 1 up, or leave it empty for the default." };
  }
  return { value };
}

// GET a JSON listing from the server the settings point at; undefined when there is none.
async function listing(url, chosen) {
  const headers = chosen.token ? { authorization: `Bearer ${chosen.token}` } : {};
  try {
    const response = await fetch(url, { headers });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    return await response.json();
  } catch {
    return undefined; // no token yet, an older or another server
  }
}

// What is left of the caller's limits (GET /v1/usage next to the chat URL, with the
// request's authorization): its limits by name, or null when the server sets none for this
// caller (or cannot say).
export async function loadUsage(chatUrlSent, authorization) {
  const url = chatUrlSent.replace(/\/chat$/, "/v1/usage");
  const token = authorization ? authorization.replace(/^Bearer /, "") : "";
  const usage = await listing(url, { token });
  const limits = usage && usage.limited && usage.limits;
  return limits && typeof limits === "object" ? limits : null;
}

// The model picker, filled from GET /v1/models: the server's default (its first model)
// stays the first choice, sent as no model at all; a saved choice is kept while offered.
export async function loadModels(select, chosen, saved) {
  const models = await listing(modelsUrl(chosen.endpoint), chosen);
  let ids = null; // no list: keep what the person saved
  if (models !== undefined) {
    const data = Array.isArray(models && models.data) ? models.data : [];
    ids = data.map((m) => (m && typeof m.id === "string" ? m.id : "")).filter(Boolean);
  }
  fillModels(select, ids, saved);
}

// ids: the offered models, the server's default first; null when unknown.
export function fillModels(select, ids, saved) {
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
export async function loadMcpTools(container, chosen) {
  const tools = await listing(toolsUrl(chosen.endpoint), chosen);
  if (tools === undefined) {
    container.replaceChildren(); // nothing to list
    return;
  }
  const servers = Array.isArray(tools && tools.mcp_servers) ? tools.mcp_servers : [];
  const nodes = [];
  for (const server of servers) {
    const names = Array.isArray(server.tools) ? server.tools : [];
    const title = server.reachable
      ? `MCP server ${server.server}`
      : `MCP server ${server.server} (not reachable yet)`;
    nodes.push(el("p", { class: "extra-label" }, title));
    for (const name of names) {
      const box = el("input", { type: "checkbox", name: "tool", value: String(name) });
      box.checked = (chosen.tools || []).includes(String(name));
      nodes.push(el("label", {}, box, ` ${name}`));
    }
  }
  container.replaceChildren(...nodes);
}
