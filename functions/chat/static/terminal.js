// execute_code's result shown as terminal output: stdout and stderr, the exit status and the
// program's time.

import { el, formatDuration } from "./dom.js";

// Terminal colour and cursor sequences a program may print: shown as nothing.
const ANSI_ESCAPE = /\u001b\[[0-9;?]*[ -/]*[@-~]|\u001b[@-_]/g;

// execute_code's outcome ({exit_code, stdout, stderr, truncated, duration_ms, timed_out,
// killed_by, notes}) inside the result envelope, or null when the content is anything else
// (a sandbox failure, an envelope cut to text): those show as the generic result.
export function codeOutcome(raw) {
  let parsed;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return null;
  }
  const outcome = parsed && parsed.ok === true ? parsed.result : null;
  if (!outcome || typeof outcome !== "object") return null;
  if (typeof outcome.stdout !== "string" || typeof outcome.stderr !== "string") return null;
  return outcome;
}

export function terminal(outcome) {
  const notes = Array.isArray(outcome.notes)
    ? outcome.notes.filter((n) => typeof n === "string")
    : [];
  return el(
    "div",
    { class: "terminal", role: "group", "aria-label": "program output" },
    terminalStatus(outcome),
    ...terminalStreams(outcome),
    notes.length
      ? el("ul", { class: "terminal-notes" }, ...notes.map((n) => el("li", {}, n)))
      : null,
  );
}

// "exit 0 · 12 ms", "timed out · killed by SIGKILL · 10.0 s", ...
function terminalStatus(outcome) {
  const status = [];
  const exit = outcome.exit_code;
  const failed = exit !== 0 || outcome.timed_out;
  if (outcome.timed_out) status.push("timed out");
  if (typeof outcome.killed_by === "string" && outcome.killed_by) {
    status.push(`killed by ${outcome.killed_by}`);
  } else if (Number.isInteger(exit)) {
    status.push(`exit ${exit}`);
  } else if (!outcome.timed_out) {
    status.push("exit status unknown");
  }
  if (Number.isFinite(outcome.duration_ms)) status.push(formatDuration(outcome.duration_ms));
  if (outcome.truncated) status.push("output cut (start and end kept)");
  return el(
    "p",
    { class: "terminal-status", dataset: { failed: failed ? "true" : "false" } },
    status.join(" · "),
  );
}

function terminalStreams(outcome) {
  const streams = [];
  for (const name of ["stdout", "stderr"]) {
    const text = outcome[name].replace(ANSI_ESCAPE, "");
    if (!text) continue;
    streams.push(
      el(
        "div",
        { class: `stream stream-${name}` },
        el("span", { class: "stream-name" }, name),
        el("pre", { tabindex: 0, "aria-label": `${name} of the program` }, text),
      ),
    );
  }
  if (!streams.length) streams.push(el("p", { class: "stream-empty" }, "No output."));
  return streams;
}
