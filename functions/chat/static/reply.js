// One assistant reply: the events of its runs (a paused run's continuation included) rendered
// as text, tool cards and notes, the files its calls made under it (each also in its call's
// card), with a line of tokens, cost and budget under it.

import { ToolCard } from "./cards.js";
import { dollars, el, number, plural } from "./dom.js";
import { Gallery, readFileRef } from "./files.js";
import { ERROR_CODES, stopReason } from "./labels.js";
import { renderMarkdown } from "./markdown.js";
import { chatUrl } from "./settings.js";
import { sourceList } from "./sources.js";
import { Transcript } from "./transcript.js";

// What each event does to the reply: on(reply, data, transcript), the transcript being the
// run's own (a sub-agent's inside its ask_llm card). Anything newer: nothing to show.
const ON_EVENT = new Map([
  ["run_start", onRunStart],
  ["turn_start", (reply, data, transcript) => transcript.markAnswerStart()],
  ["text_delta", (reply, data, transcript) => transcript.appendText(data.text, reply)],
  // The provider's stream was cut and the turn is retried: its text so far is void.
  ["text_reset", (reply, data, transcript) => transcript.dropAnswer(reply)],
  ["tool_call_start", onToolCallStart],
  ["tool_call_result", onToolCallResult],
  ["approval_request", onApprovalRequest],
  ["file", (reply, data) => reply.showFile(data.file, data.call_id)],
  ["subagent_finish", onSubagentFinish],
  ["usage", onUsage],
  ["model_switched", onModelSwitched],
  ["notice", onNotice],
  ["error", onError],
  ["done", onDone],
]);

function onRunStart(reply, data) {
  if (data.depth) return;
  reply.model = data.model;
  reply.budget = data.budget_remaining;
  reply.showMeta();
}

// A new card for the call data names, in the run's transcript.
function addCard(reply, data, transcript) {
  const card = new ToolCard(data);
  reply.cards.set(data.call_id, card);
  transcript.append(card.el);
  return card;
}

function onToolCallStart(reply, data, transcript) {
  const decided = reply.cards.get(data.call_id);
  if (decided && decided.decision) {
    decided.start(); // approved or denied while paused: it runs (or is refused) now
    return;
  }
  addCard(reply, data, transcript);
}

function onToolCallResult(reply, data, transcript) {
  const card = reply.cards.get(data.call_id);
  if (card) card.finish(data);
  transcript.markAnswerStart();
}

function onApprovalRequest(reply, data, transcript) {
  addCard(reply, data, transcript).askApproval((decision) => {
    reply.decisions.set(data.call_id, decision);
    reply.onDecide();
  });
}

// subagent_start needs nothing: transcriptFor made the block (with the query) for its run.
function onSubagentFinish(reply, data) {
  const run = reply.runs.get(data.run_id);
  if (!run) return;
  const tokens = data.usage.prompt_tokens + data.usage.completion_tokens;
  run.el.after(
    el(
      "p",
      { class: "subagent-meta" },
      `${stopReason(data.stop_reason)} · ${plural(data.iterations, "turn")} · ` +
        `${number.format(tokens)} tokens · ${dollars(data.cost_usd)}`,
    ),
  );
}

function onUsage(reply, data) {
  reply.usage = data.total;
  reply.budget = data.budget_remaining;
  reply.cost = data.total_cost_usd;
  reply.showMeta();
}

function onModelSwitched(reply, data, transcript) {
  const text = `Switched model from ${data.from_model} to ${data.to_model}: ${data.reason}`;
  reply.note(transcript, "switch", text);
}

function onNotice(reply, data, transcript) {
  if (data.code !== "unpriced") {
    reply.note(transcript, "notice", data.message);
    return;
  }
  // Said where the cost is shown, quietly, not as a note above the answer.
  reply.unpriced = String(data.message || "No price is known for this model.");
  reply.showMeta();
}

function onError(reply, data, transcript) {
  reply.note(transcript, "error", `${ERROR_CODES[data.code] || "Error"}: ${data.message}`);
}

function onDone(reply, data) {
  if (data.depth) return;
  reply.done = data;
  reply.usage = data.usage;
  reply.budget = data.budget_remaining;
  reply.cost = data.cost_usd;
}

const sumTokens = (usages) =>
  usages.reduce((sum, u) => sum + u.prompt_tokens + u.completion_tokens, 0);

export class Reply {
  // chatUrlSent: the chat URL its run was asked at (a file's relative link is under its base).
  constructor(conversation, notices = new Set(), chatUrlSent = chatUrl("")) {
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
    this.chatUrl = chatUrlSent;
    this.gallery = null; // the files of its runs, under the answer
    this.fileIds = new Set(); // each file shown once
  }

  // A file a call made (a FileRef): in that call's card, and in the gallery under the answer.
  showFile(raw, callId = null) {
    const file = readFileRef(raw, this.chatUrl, callId);
    if (!file || this.fileIds.has(file.id)) return;
    this.fileIds.add(file.id);
    const card = file.callId ? this.cards.get(file.callId) : null;
    if (card) card.showFile(file);
    if (!this.gallery) {
      this.gallery = new Gallery();
      this.main.el.after(this.gallery.el);
    }
    this.gallery.add(file);
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
    const transcript = card.subagentBlock(event.run_id, event.query);
    this.runs.set(event.run_id, transcript);
    return transcript;
  }

  note(transcript, kind, ...text) {
    transcript.append(el("p", { class: `note note-${kind}` }, ...text));
  }

  handle(type, data) {
    const transcript = this.transcriptFor(data);
    const on = ON_EVENT.get(type);
    if (on) on(this, data, transcript);
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

  // What is left of the caller's allowance, after the line's other parts (a later answer).
  showAllowance(text) {
    if (!text || !this.meta.isConnected) return;
    this.meta.append(" · ", el("span", { class: "allowance" }, text));
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

  // The run is over (state: done, paused, stopped, error); message: a banner under it.
  finish(state, message) {
    this.flush();
    this.el.dataset.state = state;
    this.el.setAttribute("aria-busy", "false");
    for (const card of this.cards.values()) {
      if (card.el.dataset.status === "running") card.setStatus("stopped");
      if (state !== "paused") card.withdrawApproval();
    }
    if (this.done) {
      this.setMeta(this.summary(this.done));
      this.showSources(this.done.sources);
    } else if (state !== "error") {
      this.showMeta();
    } else {
      this.dropMeta();
    }
    if (message) {
      this.el.append(
        el("div", { class: `banner banner-${state}`, role: "alert" }, ...[].concat(message)),
      );
    }
  }

  // The line under a finished run: how it ended, turns, tokens, cost, budget left, model.
  summary(done) {
    const parts = [stopReason(done.stop_reason), plural(done.iterations, "turn")];
    let used =
      `${number.format(this.tokens())} tokens (${number.format(done.usage.prompt_tokens)} in, ` +
      `${number.format(done.usage.completion_tokens)} out)`;
    const byDepth = done.usage_by_depth || [];
    if (byDepth.length > 1) used += `, ${number.format(sumTokens(byDepth.slice(1)))} by sub-agents`;
    parts.push(used);
    let cost = dollars(done.cost_usd);
    const costByDepth = done.cost_by_depth || [];
    if (costByDepth.length > 1 && done.cost_usd !== null) {
      cost += `, ${dollars(costByDepth.slice(1).reduce((sum, c) => sum + c, 0))} by sub-agents`;
    }
    parts.push(this.costPart(cost));
    parts.push(`${number.format(done.budget_remaining)} left in budget`);
    if (this.model) parts.push(this.model);
    return parts;
  }

  // Nothing ran: no line under the reply, and a notice it showed counts as not said.
  dropMeta() {
    this.meta.remove();
    if (this.metaNote) {
      this.metaNote.remove();
      this.notices.delete(this.unpriced); // not seen after all: the next answer says it
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
