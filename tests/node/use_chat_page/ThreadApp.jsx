// The same page on a chat the server keeps, as the AI SDK's persistence and resume guides
// write it: useChat with the chat id from the URL (?chat=<id>), sending only the last message
// ({id, message}: the server's thread has the others) as a resumable run, and resume: true once
// the chat has a thread, so a page reloaded in the middle of an answer reconnects to it
// (GET /api/chat/{id}/stream).
//
// The earlier messages come from GET /threads/{id} (OpenAI wire form) before useChat starts
// (a 404 is a new chat: empty, and no resume):
// a user message is its text; an assistant turn (the assistant messages and tool results up to
// the next user message) is one UI message with its text and finished tool parts.
import { useEffect, useState } from "react";
import { DefaultChatTransport } from "ai";
import { ChatView, authHeaders } from "./App.jsx";

function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((part) => part && part.type === "text" && typeof part.text === "string")
    .map((part) => part.text)
    .join("");
}

// Tool arguments travel as JSON text; shown as the value they are when they parse.
function parsedJson(raw) {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

function toolParts(toolCalls, results) {
  return (toolCalls ?? []).map((call) => {
    const part = {
      type: "dynamic-tool",
      toolName: call.function?.name ?? "tool",
      toolCallId: call.id,
      input: parsedJson(call.function?.arguments ?? "{}"),
    };
    const result = results.get(call.id);
    return result === undefined
      ? { ...part, state: "output-error", errorText: "no result was kept" }
      : { ...part, state: "output-available", output: result }; // text, as the stream sends it
  });
}

// The thread's wire messages as useChat's UI messages (system messages are the server's own).
export function toUIMessages(wire) {
  const results = new Map(
    wire.filter((m) => m.role === "tool").map((m) => [m.tool_call_id, textOf(m.content)]),
  );
  const messages = [];
  wire.forEach((m, index) => {
    if (m.role === "user") {
      const text = textOf(m.content);
      messages.push({ id: `kept-${index}`, role: "user", parts: [{ type: "text", text }] });
    } else if (m.role === "assistant") {
      let turn = messages.at(-1);
      if (turn?.role !== "assistant") {
        turn = { id: `kept-${index}`, role: "assistant", parts: [] };
        messages.push(turn);
      }
      const text = textOf(m.content);
      turn.parts.push({ type: "step-start" }, ...toolParts(m.tool_calls, results));
      if (text) turn.parts.push({ type: "text", text, state: "done" });
    }
  });
  return messages;
}

async function loadThread(chatId) {
  const response = await fetch(`/threads/${encodeURIComponent(chatId)}`, { headers: authHeaders });
  // A new chat: its first message makes the thread, and there is nothing to resume (the
  // stream route answers a chat id with no thread as it answers another person's: a 404).
  if (response.status === 404) return { messages: [], exists: false };
  if (!response.ok) throw new Error(`GET /threads/${chatId}: ${response.status}`);
  const body = await response.json();
  return { messages: toUIMessages(Array.isArray(body.messages) ? body.messages : []), exists: true };
}

export function ThreadApp({ chatId }) {
  const [initial, setInitial] = useState(null);
  const [loadError, setLoadError] = useState(null);
  const [transport] = useState(
    () =>
      new DefaultChatTransport({
        headers: authHeaders,
        prepareSendMessagesRequest: ({ messages, id }) => ({
          body: { id, message: messages[messages.length - 1], agentloop: { resumable: true } },
        }),
      }),
  );
  useEffect(() => {
    loadThread(chatId).then(setInitial, (error) => setLoadError(String(error.message ?? error)));
  }, [chatId]);

  if (loadError) return <p role="alert">{loadError}</p>;
  if (initial === null) {
    return (
      <main>
        <p className="status" role="status" data-status="loading">
          loading
        </p>
      </main>
    );
  }
  return (
    <ChatView
      title={`useChat · chat ${chatId}`}
      options={{ id: chatId, messages: initial.messages, transport, resume: initial.exists }}
    />
  );
}
