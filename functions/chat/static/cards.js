// A tool call's card: its arguments, running / done / failed, its duration and result (or
// execute_code's terminal), the files it made, the Approve / Deny a waiting call asks for, and
// the sub-agents an ask_llm call runs, nested inside it.

import { el, formatDuration, number } from "./dom.js";
import { CardFiles } from "./files.js";
import { codeOutcome, terminal } from "./terminal.js";
import { Transcript } from "./transcript.js";

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

// A failed call's result label: the error its envelope names, when it names one.
function failureLabel(content) {
  try {
    const parsed = JSON.parse(content);
    if (parsed && parsed.error) return `Error: ${parsed.error}`;
  } catch {
    // not JSON: the generic label will do
  }
  return "Result";
}

export class ToolCard {
  constructor(event) {
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
    this.files = null; // the files it made (CardFiles), at the card's end
  }

  // A file the call made (files.js readFileRef): a picture or a link at the end of the card.
  showFile(file) {
    if (!this.files) this.files = new CardFiles(this.el);
    this.files.add(file);
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
    const decide = (approved) => this.decide(approved, reason.value.trim(), onDecide);
    approve.addEventListener("click", () => decide(true));
    deny.addEventListener("click", () => decide(false));
    reason.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.isComposing) {
        event.preventDefault();
        decide(false);
      }
    });
  }

  decide(approved, reason, onDecide) {
    if (this.decision || !this.panel) return;
    const why = approved ? "" : reason;
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

  // The transcript of one sub-agent run, in a block of its own inside this card.
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
    return new Transcript(transcript);
  }

  finish(event) {
    const ok = Boolean(event.ok);
    if (ok) this.setStatus("done");
    else this.setStatus(this.decision && !this.decision.approved ? "denied" : "failed");
    this.durationEl.textContent = formatDuration(event.duration_ms || 0);
    const outcome = this.name === "execute_code" ? codeOutcome(event.content || "") : null;
    if (outcome) {
      this.el.append(terminal(outcome));
    } else {
      const label = ok ? "Result" : failureLabel(event.content);
      const content = formatResult(event.content || "");
      const size = el("span", { class: "size" }, ` (${number.format(content.length)} chars)`);
      const summary = el("summary", {}, label, size);
      const details = el("details", { class: "tool-result", open: !ok }, summary);
      details.append(el("pre", {}, content));
      this.el.append(details);
    }
    if (this.files) this.el.append(this.files.el); // the files stay last
  }

  setStatus(label, status = label) {
    this.el.dataset.status = status;
    this.statusEl.textContent = label;
  }
}
