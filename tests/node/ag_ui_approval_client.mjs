// Tool approval through POST /ag-ui with @ag-ui/client's HttpAgent: a run that ends with an
// interrupt outcome leaves agent.pendingInterrupts; the next runAgent({resume}) answers each
// one, built with the library's buildResumeArray and echoing the interrupt's metadata.
//
// Input: {url, token, cases: [{name, question, params, decisions: [{approved, reason?} |
//   "cancel"], again?, tamper?: {token?: "flip" | "drop" | "from:<case>", interruptId?,
//   arguments?}, followUp?}]}.
// Each case asks its question; when the run is interrupted it answers the pending interrupts
// in order with `decisions` (after applying `tamper`, as a hostile client could), a second
// interrupt with `again`, and, once a run succeeds, asks `followUp`. Output (last line):
// {cases: {name: [run record]}, printed}, with what the library made of each run: its events,
// its outcome and interrupts, the thread's messages, and what it threw or reported as failed.
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const input = JSON.parse(process.env.AGENTLOOP_TEST_INPUT);
const printed = [];
for (const level of ["warn", "error"]) {
  console[level] = (...args) => printed.push(`${level}: ${args.map(String).join(" ")}`);
}
const tokens = {};

async function run(agent, params) {
  const record = { events: [], finished: null, failed: null, thrown: null, sent: null };
  record.sent = structuredClone(params.resume ?? null);
  const subscriber = {
    onEvent({ event }) {
      record.events.push(structuredClone(event));
    },
    onRunFinishedEvent({ outcome, result, interrupts }) {
      record.finished = { outcome, result: result ?? null, interrupts: interrupts ?? null };
    },
    onRunFailed({ error }) {
      record.failed = { message: String(error?.message ?? error), status: error?.status ?? null };
    },
  };
  try {
    await agent.runAgent(params, subscriber);
  } catch (error) {
    record.thrown = { message: String(error?.message ?? error), status: error?.status ?? null };
  }
  record.messages = structuredClone(agent.messages);
  record.pending = structuredClone(agent.pendingInterrupts);
  return record;
}

function answers(interrupts, spec) {
  const responses = {};
  for (const [index, interrupt] of interrupts.entries()) {
    const decision = spec.decisions[index];
    const metadata = structuredClone(interrupt.metadata);
    const tamper = spec.tamper ?? {};
    if (tamper.token === "drop") delete metadata.agentloop.resume;
    if (tamper.token === "flip") {
      const token = metadata.agentloop.resume;
      metadata.agentloop.resume =
        token.slice(0, 20) + (token[20] === "A" ? "B" : "A") + token.slice(21);
    }
    if (tamper.token?.startsWith("from:")) {
      metadata.agentloop.resume = tokens[tamper.token.slice(5)];
    }
    responses[interrupt.id] =
      decision === "cancel"
        ? { status: "cancelled", metadata }
        : { status: "resolved", payload: decision, metadata };
  }
  return responses;
}

async function runCase(spec) {
  const agent = new HttpAgent({
    url: `${input.url}/ag-ui`,
    headers: { Authorization: `Bearer ${input.token}` },
    threadId: `thread-${spec.name}`,
  });
  agent.addMessage({ id: `${spec.name}-user-0`, role: "user", content: spec.question });
  const records = [await run(agent, spec.params ?? {})];
  const interrupts = agent.pendingInterrupts;
  tokens[spec.name] = interrupts[0]?.metadata?.agentloop?.resume;
  if (interrupts.length === 0 || !spec.decisions) return records;

  if (spec.tamper?.arguments) {
    // The thread's copy of the call edited before it is approved.
    const asked = agent.messages.flatMap((m) => m.toolCalls ?? []);
    asked.find((c) => c.id === interrupts[0].toolCallId).function.arguments = spec.tamper.arguments;
  }
  if (spec.tamper?.interruptId) {
    // Past the client's own check that every pending interrupt is answered.
    agent.pendingInterrupts = interrupts.map((i) => ({ ...i, id: spec.tamper.interruptId }));
  }
  const resume = buildResumeArray(agent.pendingInterrupts, answers(agent.pendingInterrupts, spec));
  records.push(await run(agent, { ...(spec.params ?? {}), resume }));
  if (spec.again && agent.pendingInterrupts.length > 0) {
    const again = { decisions: spec.again };
    const next = buildResumeArray(agent.pendingInterrupts, answers(agent.pendingInterrupts, again));
    records.push(await run(agent, { ...(spec.params ?? {}), resume: next }));
  }

  if (spec.followUp && records.at(-1).finished?.outcome === "success") {
    agent.addMessage({ id: `${spec.name}-user-1`, role: "user", content: spec.followUp });
    records.push(await run(agent, spec.params ?? {}));
  }
  return records;
}

const cases = {};
for (const spec of input.cases) cases[spec.name] = await runCase(spec);
console.log(JSON.stringify({ cases, printed }));
