// make bench's "faces" figure, JavaScript side: the real clients of two faces, timed.
//
// /api/chat: the `ai` package as useChat drives it (DefaultChatTransport posts the UI
// messages; readUIMessageStream builds the assistant message from the validated chunks).
// /ag-ui: @ag-ui/client's HttpAgent (parses, verifies and applies the events; subscribers
// see each one). The first text is the moment the library hands the caller a message that
// has text, on process.hrtime (CLOCK_MONOTONIC, the clock the model server marks with).
//
// One process serves many runs so every run is warm, as a browser tab is: each line of
// stdin is {face, url, prompt}; each answer is one line on stdout
// {ok, why, first_text (monotonic seconds), text}. stdin closing ends the process.
import { createInterface } from "node:readline";
import { HttpAgent } from "@ag-ui/client";
import { DefaultChatTransport, readUIMessageStream } from "ai";

const out = process.stdout;
console.log = console.error; // a library's chatter must not mix with the answers

const seconds = () => Number(process.hrtime.bigint()) / 1e9;
const textOf = (message) =>
  message.parts.filter((part) => part.type === "text").map((part) => part.text).join("");

const transports = new Map();

async function uiMessageStream(url, prompt) {
  if (!transports.has(url)) {
    const body = { agentloop: { tools: [] } }; // a tool-less run, as every face is asked
    transports.set(url, new DefaultChatTransport({ api: `${url}/api/chat`, body }));
  }
  const stream = await transports.get(url).sendMessages({
    chatId: "bench",
    messages: [{ id: "user-0", role: "user", parts: [{ type: "text", text: prompt }] }],
    abortSignal: undefined,
    trigger: "submit-message",
    messageId: undefined,
  });
  let firstText = null;
  let text = "";
  const errors = [];
  const snapshots = readUIMessageStream({ stream, onError: (error) => errors.push(error.message) });
  for await (const message of snapshots) {
    text = textOf(message);
    if (firstText === null && text.length > 0) firstText = seconds();
  }
  return { firstText, text, why: errors.join("; ") };
}

async function agUi(url, prompt) {
  const agent = new HttpAgent({ url: `${url}/ag-ui`, threadId: `bench-${seconds()}` });
  agent.addMessage({ id: "user-0", role: "user", content: prompt });
  let firstText = null;
  const errors = [];
  await agent.runAgent(
    { forwardedProps: { agentloop: { tools: [] } } },
    {
      onTextMessageContentEvent({ event }) {
        if (firstText === null && event.delta.length > 0) firstText = seconds();
      },
      onRunErrorEvent({ event }) {
        errors.push(event.message);
      },
    },
  );
  const answer = agent.messages.filter((message) => message.role === "assistant").at(-1);
  return { firstText, text: answer?.content ?? "", why: errors.join("; ") };
}

const faces = { "/api/chat": uiMessageStream, "/ag-ui": agUi };

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const { face, url, prompt } = JSON.parse(line);
  let answer;
  try {
    const { firstText, text, why } = await faces[face](url, prompt);
    answer = { ok: !why && firstText !== null, why, first_text: firstText, text };
  } catch (error) {
    const why = String(error?.message ?? error).slice(0, 300);
    answer = { ok: false, why, first_text: null, text: "" };
  }
  out.write(`${JSON.stringify(answer)}\n`);
}
