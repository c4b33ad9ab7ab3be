// Drives POST /ag-ui on threads with @ag-ui/client's HttpAgent: one agent per case on its
// threadId, opted in with forwardedProps.agentloop.thread_id = threadId. HttpAgent sends its
// whole message list every run; the server keeps the thread and takes the new turn.
//
// Input: {url, cases: [{token, threadId, turns: [text, ...]}]}. Each turn adds a user message
// and calls runAgent. Output (last line): {cases: [[{sent, messages, runErrors, failed,
// thrown}]]}: the messages the run posted, the agent's messages after it, and what failed.
import { HttpAgent } from "@ag-ui/client";

const input = JSON.parse(process.env.AGENTLOOP_TEST_INPUT);
const posted = [];
const realFetch = globalThis.fetch;
globalThis.fetch = async (url, init) => {
  posted.push(JSON.parse(init.body));
  return realFetch(url, init);
};

async function runTurn(agent, index, text) {
  const record = { sent: null, messages: [], runErrors: [], failed: null, thrown: null };
  agent.addMessage({ id: `${agent.threadId}-user-${index}`, role: "user", content: text });
  const subscriber = {
    onRunErrorEvent({ event }) {
      record.runErrors.push({ code: event.code ?? null, message: event.message });
    },
    onRunFailed({ error }) {
      record.failed = { message: String(error?.message ?? error), status: error?.status ?? null };
    },
  };
  const forwardedProps = { agentloop: { thread_id: agent.threadId } };
  try {
    await agent.runAgent({ forwardedProps }, subscriber);
  } catch (error) {
    record.thrown = { message: String(error?.message ?? error), status: error?.status ?? null };
  }
  record.sent = posted.at(-1)?.messages ?? null;
  record.messages = agent.messages.map((m) => ({ role: m.role, content: m.content ?? "" }));
  return record;
}

const cases = [];
for (const spec of input.cases) {
  const agent = new HttpAgent({
    url: `${input.url}/ag-ui`,
    headers: { Authorization: `Bearer ${spec.token}` },
    threadId: spec.threadId,
  });
  const turns = [];
  for (const [index, text] of spec.turns.entries()) turns.push(await runTurn(agent, index, text));
  cases.push(turns);
}
console.log(JSON.stringify({ cases }));
