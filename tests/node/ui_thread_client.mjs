// Drives POST /api/chat with the AI SDK's own chat engine (the `Chat` class `useChat` wraps,
// from @ai-sdk/react) sending only the last message, as the AI SDK's persistence guide does:
// DefaultChatTransport's prepareSendMessagesRequest makes the body {message, id}, the chat id
// being the server's thread.
//
// Input: {url, cases: [{token, chatId, turns: [text, ...]}]}. Each case is one Chat (a page
// load) on its chat id; each turn is sendMessage({text}).
// Output (last line): {cases: [{turns: [{status, error, sent, texts}]}]}: the chat's status and
// error after the turn, the body the transport posted, and the chat's messages as text.
import { Chat } from "@ai-sdk/react";
import { DefaultChatTransport } from "ai";

const input = JSON.parse(process.env.AGENTLOOP_TEST_INPUT ?? "{}");

function textOf(message) {
  return message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
}

async function runCase(spec) {
  const sent = [];
  const transport = new DefaultChatTransport({
    api: `${input.url}/api/chat`,
    headers: { authorization: `Bearer ${spec.token}` },
    prepareSendMessagesRequest: ({ messages, id }) => ({
      body: { message: messages[messages.length - 1], id },
    }),
    fetch: async (url, init) => {
      sent.push(JSON.parse(init.body));
      return fetch(url, init);
    },
  });
  const chat = new Chat({ id: spec.chatId, transport });
  const turns = [];
  for (const text of spec.turns) {
    await chat.sendMessage({ text });
    turns.push({
      status: chat.status,
      error: chat.error ? String(chat.error.message ?? chat.error) : null,
      sent: sent.at(-1) ?? null,
      texts: chat.messages.map((m) => ({ role: m.role, text: textOf(m) })),
    });
  }
  return { turns };
}

const cases = [];
for (const spec of input.cases) cases.push(await runCase(spec));
console.log(JSON.stringify({ cases }));
