// Files through POST /api/chat with the real `ai` package, as useChat sends and shows them:
// the user's message carries file parts (data: URLs, as convertFileListToFileUIParts makes
// them), the assistant message the library builds from the stream holds the run's file
// parts, and each part's url is fetched as a page would (relative to the API's origin).
//
// Input: {url, token, turns: [{text, files: [{mediaType, filename?, url}]}]}. Each turn
// appends its user message to the conversation and sends the whole of it (so a later turn
// sends back the assistant's file parts and the earlier user files).
// Output (last line): {turns: [{message, chunks, errors, thrown, fetched: [{url, status,
// contentType, disposition, base64}]}]}.
import { DefaultChatTransport, readUIMessageStream } from "ai";

const input = JSON.parse(process.env.AGENTLOOP_TEST_INPUT ?? "{}");

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

async function fetchFile(part) {
  const response = await fetch(new URL(part.url, input.url));
  const bytes = Buffer.from(await response.arrayBuffer());
  return {
    url: part.url,
    status: response.status,
    contentType: response.headers.get("content-type"),
    disposition: response.headers.get("content-disposition"),
    base64: bytes.toString("base64"),
  };
}

async function turn(transport, messages) {
  const result = { message: null, chunks: [], errors: [], thrown: null, fetched: [] };
  try {
    const stream = await transport.sendMessages({
      chatId: "chat-files",
      messages,
      abortSignal: undefined,
      trigger: "submit-message",
      messageId: undefined,
    });
    const [forMessages, forChunks] = stream.tee();
    const chunks = collect(forChunks).catch((error) => {
      result.errors.push(`chunks: ${error.message}`);
      return [];
    });
    for await (const message of readUIMessageStream({
      stream: forMessages,
      onError: (error) => result.errors.push(error.message),
    })) {
      result.message = message;
    }
    result.chunks = await chunks;
    for (const part of result.message?.parts ?? []) {
      if (part.type === "file") result.fetched.push(await fetchFile(part));
    }
  } catch (error) {
    result.thrown = String(error?.message ?? error);
  }
  return result;
}

const transport = new DefaultChatTransport({
  api: `${input.url}/api/chat`,
  headers: { authorization: `Bearer ${input.token}` },
});
const messages = [];
const turns = [];
for (const [index, spec] of input.turns.entries()) {
  const files = (spec.files ?? []).map((file) => ({ type: "file", ...file }));
  messages.push({
    id: `user-${index}`,
    role: "user",
    parts: [{ type: "text", text: spec.text }, ...files],
  });
  const result = await turn(transport, structuredClone(messages));
  turns.push(result);
  if (!result.message) break;
  messages.push(result.message);
}
console.log(JSON.stringify({ turns }));
