// Tool approval through POST /api/chat with the real AI SDK chat: @ai-sdk/react's Chat class
// (what useChat drives) over DefaultChatTransport, continuing by itself once every approval
// of the paused step is answered (sendAutomaticallyWhen:
// lastAssistantMessageIsCompleteWithApprovalResponses), as a page using
// addToolApprovalResponse does.
//
// Input: {url, token, cases: [{name, body, question, decisions: [{approved, reason?}], again?,
//   tamper?: {token?: "flip" | "drop" | "from:<case>", toolCallId?, input?}, followUp?}]}.
// Each case asks its question; when the answer pauses, it answers the approval-requested parts
// in order with `decisions` (after applying `tamper` to the chat's messages, as a hostile page
// could) and waits for the continuation; if that pauses again, `again` answers it; `followUp`
// then asks one more question. Output (last line): {cases: {name: {paused, finals, final,
// followed, bodies, errors}}}: the messages as the Chat holds them after each phase, and the
// JSON bodies the transport posted.
import { Chat } from "@ai-sdk/react";
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";

const input = JSON.parse(process.env.AGENTLOOP_TEST_INPUT);
const tokens = {};

async function until(predicate, what) {
  const deadline = Date.now() + 20_000;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function tampered(messages, tamper) {
  const copy = structuredClone(messages);
  const last = copy[copy.length - 1];
  if (tamper.token === "drop") delete last.metadata.resume;
  if (tamper.token === "flip") {
    const token = last.metadata.resume;
    last.metadata.resume = token.slice(0, 20) + (token[20] === "A" ? "B" : "A") + token.slice(21);
  }
  if (tamper.token?.startsWith("from:")) last.metadata.resume = tokens[tamper.token.slice(5)];
  const asked = last.parts.find((part) => part.state === "approval-requested");
  if (tamper.toolCallId) asked.toolCallId = tamper.toolCallId;
  if (tamper.input) asked.input = tamper.input;
  return copy;
}

async function runCase(spec) {
  const bodies = [];
  const errors = [];
  let finishes = 0;
  const transport = new DefaultChatTransport({
    api: `${input.url}/api/chat`,
    headers: { authorization: `Bearer ${input.token}` },
    body: spec.body ?? {},
    fetch: async (url, init) => {
      bodies.push(JSON.parse(init.body));
      return fetch(url, init);
    },
  });
  const chat = new Chat({
    transport,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    onError: (error) => errors.push(error.message),
    onFinish: () => {
      finishes += 1;
    },
  });
  const record = { paused: null, finals: [], final: null, followed: null, bodies, errors };

  await chat.sendMessage({ text: spec.question });
  await until(() => finishes === 1 && chat.status !== "streaming", "the first answer");
  record.paused = structuredClone(chat.messages);
  const last = chat.messages[chat.messages.length - 1];
  tokens[spec.name] = last.metadata?.resume;
  const asked = last.parts.filter((part) => part.state === "approval-requested");
  if (asked.length === 0 || !spec.decisions) return record;

  if (spec.tamper) chat.messages = tampered(chat.messages, spec.tamper);
  for (const decisions of [spec.decisions, ...(spec.again ? [spec.again] : [])]) {
    const ids = chat.messages.at(-1).parts
      .filter((part) => part.state === "approval-requested")
      .map((part) => part.approval.id);
    if (ids.length === 0) break;
    const before = finishes;
    for (const [index, id] of ids.entries()) {
      const { approved, reason } = decisions[index];
      await chat.addToolApprovalResponse({ id, approved, reason });
    }
    const settled = () => finishes === before + 1 && ["ready", "error"].includes(chat.status);
    await until(settled, "the continuation");
    record.finals.push(structuredClone(chat.messages));
  }
  record.final = record.finals.at(-1);

  if (spec.followUp && chat.status === "ready") {
    const before = finishes;
    await chat.sendMessage({ text: spec.followUp });
    await until(() => finishes === before + 1 && chat.status !== "streaming", "the follow-up");
    record.followed = structuredClone(chat.messages);
  }
  return record;
}

const cases = {};
for (const spec of input.cases) cases[spec.name] = await runCase(spec);
console.log(JSON.stringify({ cases }));
