// Drives the AI SDK's resume (`useChat({resume: true})` calls `chat.resumeStream()` when a
// page loads) with the `Chat` class `useChat` wraps, from @ai-sdk/react.
//
// Input: {url, token, chatId, text}. A first Chat sends `text` on the chat's thread as a
// resumable run ({id, message, agentloop: {resumable: true}}) and stops (the page is
// reloaded) once part of the answer has arrived. A second Chat on the same id (the reloaded
// page, no messages yet) calls resumeStream(): GET /api/chat/{id}/stream. A third one does the
// same after the run has ended (a 204: nothing to resume).
// Output (last line): {partial, resumed: {status, error, texts, statuses}, after: {...}}.
import { Chat } from "@ai-sdk/react";
import { DefaultChatTransport } from "ai";

const input = JSON.parse(process.env.AGENTLOOP_TEST_INPUT ?? "{}");
const requests = [];

function transport() {
  return new DefaultChatTransport({
    api: `${input.url}/api/chat`,
    headers: { authorization: `Bearer ${input.token}` },
    prepareSendMessagesRequest: ({ messages, id }) => ({
      body: { message: messages[messages.length - 1], id, agentloop: { resumable: true } },
    }),
    fetch: async (url, init) => {
      const response = await fetch(url, init);
      requests.push({ method: init?.method ?? "GET", url: String(url), status: response.status });
      return response;
    },
  });
}

function textOf(message) {
  return message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
}

function state(chat, statuses) {
  return {
    status: chat.status,
    error: chat.error ? String(chat.error.message ?? chat.error) : null,
    texts: chat.messages.map((m) => ({ role: m.role, text: textOf(m) })),
    statuses,
  };
}

async function until(check) {
  for (let i = 0; i < 1000 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
}

// The first page: sends, and is left (stop aborts its request) with part of the answer shown.
const first = new Chat({ id: input.chatId, transport: transport() });
const sending = first.sendMessage({ text: input.text });
await until(() => first.messages.length === 2 && textOf(first.messages[1]).length > 0);
const partial = first.messages.length === 2 ? textOf(first.messages[1]) : null;
await first.stop();
await sending;

// The reloaded page: resume: true reconnects to the stream still running.
const statuses = [];
const second = new Chat({
  id: input.chatId,
  transport: transport(),
  onFinish: () => statuses.push("finished"),
});
await second.resumeStream();
const resumed = state(second, statuses);

// The resumed stream ended with the run (its log is ended before its last frame is sent):
// there is nothing more to resume.
const third = new Chat({ id: input.chatId, transport: transport() });
await third.resumeStream();
console.log(JSON.stringify({ partial, resumed, after: state(third, []), requests }));
