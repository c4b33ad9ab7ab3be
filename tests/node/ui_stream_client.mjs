// Drives POST /api/chat with the real `ai` package, as useChat does: DefaultChatTransport
// posts the conversation (UI messages) and readUIMessageStream builds the assistant's
// UIMessage from the chunks the transport has parsed and validated against the SDK's schema.
//
// Input: {url, token, cases: [{body?, turns: [text, ...], abortOnText?}]}. Each turn appends
// a user message to the case's conversation, sends it all, and appends the assistant message
// the library built, so a second turn sends back what the first one produced.
// Output (last line): {cases: [{turns: [{message, chunks, errors, thrown, aborted}]}]}.
import { DefaultChatTransport, readUIMessageStream } from "ai";

const input = JSON.parse(process.env.AGENTLOOP_TEST_INPUT ?? "{}");

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

async function turn(transport, messages, abortOnText) {
  const controller = new AbortController();
  const result = { message: null, chunks: [], errors: [], thrown: null, aborted: false };
  try {
    const stream = await transport.sendMessages({
      chatId: "chat-1",
      messages,
      abortSignal: controller.signal,
      trigger: "submit-message",
      messageId: undefined,
    });
    const [forMessages, forChunks] = stream.tee();
    const chunks = collect(forChunks).catch((error) => {
      result.errors.push(`chunks: ${error.message}`);
      return [];
    });
    const snapshots = readUIMessageStream({
      stream: forMessages,
      onError: (error) => result.errors.push(error.message),
    });
    for await (const message of snapshots) {
      result.message = message;
      const text = message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
      if (abortOnText && text.length > 0 && !result.aborted) {
        result.aborted = true;
        controller.abort(); // as useChat's stop() does
        break;
      }
    }
    result.chunks = await chunks;
  } catch (error) {
    result.thrown = String(error?.message ?? error);
  }
  return result;
}

async function runCase(spec) {
  const transport = new DefaultChatTransport({
    api: `${input.url}/api/chat`,
    headers: { authorization: `Bearer ${spec.token ?? input.token}` },
    body: spec.body ?? {},
  });
  const messages = [];
  const turns = [];
  for (const [index, text] of spec.turns.entries()) {
    messages.push({ id: `user-${index}`, role: "user", parts: [{ type: "text", text }] });
    const result = await turn(transport, structuredClone(messages), spec.abortOnText);
    turns.push(result);
    if (!result.message) break;
    messages.push(result.message);
  }
  return { turns };
}

const cases = [];
for (const spec of input.cases) cases.push(await runCase(spec));
console.log(JSON.stringify({ cases }));
