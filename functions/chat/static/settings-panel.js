// The settings panel: the form kept in step with localStorage, the lists the server offers,
// the limit fields checked as they are typed, and the panel opened and closed (beside the
// conversation on a wide screen, a sheet over it on a narrow one: CSS decides).

import {
  fillModels,
  loadMcpTools,
  loadModels,
  loadSettings,
  readLimit,
  saveSettings,
} from "./settings.js";

const byId = (id) => document.getElementById(id);

export class SettingsPanel {
  constructor() {
    this.form = byId("settings-form");
    this.panel = byId("settings");
    this.toggle = byId("settings-toggle");
    this.mcpTools = byId("mcp-tools");
    this.limitFields = [
      { input: this.form.elements.maxIterations, error: "error-iterations" },
      { input: this.form.elements.tokenBudget, error: "error-budget" },
    ];
    // On a narrow screen the open panel covers the page: what is behind it is inert.
    this.narrow = window.matchMedia("(max-width: 760px)");
    this.behindSheet = [document.querySelector(".top"), document.querySelector(".chat-column")];
    const settings = loadSettings();
    this.wantedModel = typeof settings.model === "string" ? settings.model : "";
    this.fill(settings);
    this.watchForm();
    this.watchLimits();
    this.watchPanel();
    this.loadLists(settings);
  }

  fill(settings) {
    const fields = this.form.elements;
    fields.endpoint.value = settings.endpoint;
    fields.token.value = settings.token;
    fillModels(fields.model, null, this.wantedModel);
    fields.maxIterations.value = settings.maxIterations;
    fields.tokenBudget.value = settings.tokenBudget;
    fields.extraTools.value = settings.extraTools;
    fields.approvalTools.value = settings.approvalTools;
    for (const box of this.form.querySelectorAll('input[name="tool"]')) {
      box.checked = settings.tools.includes(box.value);
    }
  }

  // The settings as the form shows them now.
  read() {
    const fields = this.form.elements;
    const checked = this.form.querySelectorAll('input[name="tool"]:checked');
    return {
      endpoint: fields.endpoint.value.trim(),
      token: fields.token.value.trim(),
      model: fields.model.value.trim(),
      maxIterations: fields.maxIterations.value.trim(),
      tokenBudget: fields.tokenBudget.value.trim(),
      tools: [...checked].map((box) => box.value),
      extraTools: fields.extraTools.value.trim(),
      approvalTools: fields.approvalTools.value.trim(),
    };
  }

  watchForm() {
    const fields = this.form.elements;
    this.form.addEventListener("input", () => saveSettings(this.read()));
    this.form.addEventListener("change", () => saveSettings(this.read()));
    fields.model.addEventListener("change", () => {
      this.wantedModel = fields.model.value;
    });
    for (const name of ["endpoint", "token"]) {
      fields[name].addEventListener("change", () => this.loadLists(this.read()));
    }
    this.form.addEventListener("submit", (event) => event.preventDefault());
  }

  // What the server the settings point at offers: its MCP tools and its models.
  loadLists(chosen) {
    loadMcpTools(this.mcpTools, chosen);
    loadModels(this.form.elements.model, chosen, this.wantedModel);
  }

  // The limits: checked as they are typed, and again before a message goes out.
  watchLimits() {
    for (const field of this.limitFields) {
      field.input.addEventListener("input", () => this.checkLimit(field));
      this.checkLimit(field);
    }
  }

  checkLimit({ input, error }) {
    const result = readLimit(input);
    const message = byId(error);
    message.textContent = result.error || "";
    message.hidden = !result.error;
    input.setAttribute("aria-invalid", result.error ? "true" : "false");
    return result;
  }

  // The limits as numbers (null: the server's default) in { limits }, or, when one is not
  // valid, { invalid: its label }: the panel opens at the field that says what is wrong.
  readLimits() {
    const results = this.limitFields.map((field) => this.checkLimit(field));
    const wrong = results.findIndex((result) => result.error);
    if (wrong >= 0) {
      const { input } = this.limitFields[wrong];
      this.setOpen(true, false);
      input.focus();
      return { invalid: input.labels[0].textContent };
    }
    const [iterations, budget] = results;
    return { limits: { maxIterations: iterations.value, tokenBudget: budget.value } };
  }

  // The toggle, Close and Escape open and close the panel.
  watchPanel() {
    this.narrow.addEventListener("change", () => this.updateInert());
    this.toggle.addEventListener("click", () => this.setOpen(this.panel.hidden));
    byId("settings-close").addEventListener("click", () => this.setOpen(false));
    this.panel.addEventListener("keydown", (event) => {
      if (event.key === "Escape") this.setOpen(false);
    });
  }

  updateInert() {
    const covered = !this.panel.hidden && this.narrow.matches;
    for (const node of this.behindSheet) node.inert = covered;
  }

  setOpen(open, focus = true) {
    this.panel.hidden = !open;
    this.toggle.setAttribute("aria-expanded", String(open));
    document.body.classList.toggle("settings-open", open);
    this.updateInert();
    if (!focus) return;
    if (open) byId("settings-title").focus();
    else this.toggle.focus();
  }
}
