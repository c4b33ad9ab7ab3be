// Drives POST /ag-ui with @ag-ui/client's HttpAgent: the real client parses, verifies and
// reduces the stream, and this script reports what the library made of it.
//
// Input (AGENTLOOP_TEST_INPUT): {url, token, cases: [{name, initialMessages?, turns: [{user,
// params?, abortOn?}]}]}. Each case is one thread (one HttpAgent); each turn adds a user
// message and calls runAgent(params). Output: one JSON line {cases: {name: [turn record]}},
// plus the warnings and errors the library printed (schema deviations it stripped, for one).
import { HttpAgent } from "@ag-ui/client";

const input = JSON.parse(process.env.AGENTLOOP_TEST_INPUT);
const printed = [];
for (const level of ["warn", "error"]) {
  console[level] = (...args) => printed.push(`${level}: ${args.map(String).join(" ")}`);
}

async function runTurn(agent, caseName, index, turn) {
  const record = {
    events: [],
    callbacks: [],
    finished: null,
    runErrors: [],
    failed: null,
    thrown: null,
    result: null,
  };
  agent.headers = {
    ...agent.headers,
    // The app takes its request id from here locally, so the test can find this run's done.
    "x-amzn-lambda-context": JSON.stringify({ request_id: `${caseName}-${index}` }),
  };
  agent.addMessage({ id: `${caseName}-user-${index}`, role: "user", content: turn.user });
  const subscriber = {
    onEvent({ event }) {
      record.events.push(structuredClone(event));
      if (turn.abortOn === event.type) agent.abortRun(); // the user closes the tab
    },
    onRunFinishedEvent({ outcome, result, event }) {
      record.finished = { outcome, result: result ?? null, usage: event.usage ?? null };
    },
    onRunErrorEvent({ event }) {
      record.runErrors.push({ code: event.code ?? null, message: event.message });
    },
    onRunFailed({ error }) {
      record.failed = { message: String(error?.message ?? error), status: error?.status ?? null };
    },
    onSubagentStartedEvent({ event }) {
      record.callbacks.push(["started", event.subagentRunId]);
    },
    onSubagentFinishedEvent({ event }) {
      record.callbacks.push(["finished", event.subagentRunId]);
    },
    onSubagentErrorEvent({ event }) {
      record.callbacks.push(["error", event.subagentRunId]);
    },
  };
  try {
    const { result } = await agent.runAgent(turn.params ?? {}, subscriber);
    record.result = result ?? null;
  } catch (error) {
    record.thrown = { message: String(error?.message ?? error), status: error?.status ?? null };
  }
  record.messages = structuredClone(agent.messages);
  return record;
}

const cases = {};
for (const testCase of input.cases) {
  const agent = new HttpAgent({
    url: `${input.url}/ag-ui`,
    headers: { Authorization: `Bearer ${input.token}` },
    threadId: `thread-${testCase.name}`,
    initialMessages: testCase.initialMessages ?? [],
  });
  cases[testCase.name] = [];
  for (const [index, turn] of testCase.turns.entries()) {
    cases[testCase.name].push(await runTurn(agent, testCase.name, index, turn));
  }
}
console.log(JSON.stringify({ cases, printed }));
