// A saved conversation (GET /threads/{id}'s messages, OpenAI's wire form) shown the way the
// page showed it live, as far as the messages tell: the person's messages, and per answer its
// text and a card for each tool call with its result; the thread's files (GET /threads/{id}'s
// `files`, fresh links) in the card of the call that made them and under its answer. The
// note the server adds to a message sent with files is shown as the list of their names.
// What the messages do not keep (how long a call took, a sub-agent's own steps, tokens and
// cost) is not shown.

import { ToolCard } from "./cards.js";
import { Reply } from "./reply.js";

// The text of a message's content: a string, or OpenAI's list of parts.
export function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part) => (part && typeof part.text === "string" ? part.text : ""))
    .filter(Boolean)
    .join("\n");
}

// A result's envelope says whether the call worked ({"ok": false, "error": ...} when not).
function resultOk(content) {
  try {
    const parsed = JSON.parse(content);
    return !(parsed && typeof parsed === "object" && (parsed.ok === false || parsed.error));
  } catch {
    return true;
  }
}

// The server's note on a message sent with files (agentloop/files/workspace.py), and one
// file in it: "name (type/subtype, 1.2 KB)".
const ATTACHED_NOTE = /\n\n\[Attached files, in execute_code's working directory: (.*)\]$/s;
const ATTACHED_FILE = /(.+?) \([\w.+-]+\/[\w.+-]+, [\d.]+ [KM]?B\)(?:, |$)/gs;

// A user message's text and the names of the files sent with it.
export function splitAttached(text) {
  const found = ATTACHED_NOTE.exec(text);
  if (!found) return { text, names: [] };
  const names = [...found[1].matchAll(ATTACHED_FILE)].map((match) => match[1]);
  return names.length ? { text: text.slice(0, found.index), names } : { text, names: [] };
}

function savedReply(view, chatUrl) {
  const reply = new Reply(view.conversation, new Set(), chatUrl);
  reply.meta.remove(); // no tokens or cost are kept with the messages
  return reply;
}

function addCalls(reply, calls) {
  for (const call of Array.isArray(calls) ? calls : []) {
    const fn = (call && call.function) || {};
    const card = new ToolCard({
      call_id: String(call.id || ""),
      name: String(fn.name || "tool"),
      arguments: typeof fn.arguments === "string" ? fn.arguments : "",
    });
    reply.cards.set(card.el.dataset.callId, card);
    reply.main.append(card.el);
  }
}

function addResult(reply, message) {
  const content = textOf(message.content);
  const card = reply.cards.get(String(message.tool_call_id || ""));
  if (!card) return;
  card.finish({ ok: resultOk(content), content, duration_ms: 0 });
  card.durationEl.textContent = ""; // not kept
  reply.main.markAnswerStart();
}

// Each file in the answer whose card is the call that made it; one made where no card shows
// (a sub-agent's call) under the last answer.
function placeFiles(replies, files) {
  if (!replies.length || !Array.isArray(files)) return;
  for (const file of files) {
    const callId = file && typeof file.call_id === "string" ? file.call_id : "";
    const reply = replies.find((each) => each.cards.has(callId)) || replies[replies.length - 1];
    reply.showFile(file);
  }
}

// Renders messages into the view's (emptied) conversation; the answers' state is "saved".
// files: the thread's (FileRefs), their relative links under chatUrl's base.
// Returns the last answer when the messages end with one (else null): a run still going on
// may have saved its first rounds there already (see follow.js).
export function renderSaved(view, messages, files = [], chatUrl = undefined) {
  let reply = null;
  const replies = [];
  for (const message of Array.isArray(messages) ? messages : []) {
    if (!message || typeof message !== "object") continue;
    if (message.role === "user") {
      const { text, names } = splitAttached(textOf(message.content));
      view.addUserMessage(text, names);
      reply = null;
      continue;
    }
    if (message.role !== "assistant" && message.role !== "tool") continue;
    if (!reply) {
      reply = savedReply(view, chatUrl);
      replies.push(reply);
    }
    if (message.role === "tool") {
      addResult(reply, message);
      continue;
    }
    const text = textOf(message.content);
    if (text) reply.main.appendText(text, reply);
    addCalls(reply, message.tool_calls);
  }
  placeFiles(replies, files);
  for (const each of replies) each.finish("saved");
  return reply;
}
