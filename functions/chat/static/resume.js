// A run on a thread is sent with `resumable: true`: the server keeps its stream and runs it to
// its end even when the page's connection drops. Every frame carries an SSE id; here the page
// picks the stream up again with GET /chat/stream?thread_id=<id> and Last-Event-ID (the
// frames after it, then the live rest until done), after a break, or after a reload (no id:
// the run from its start). 204: nothing runs on the thread (the run ended meanwhile).

import { HttpFailure, expectEventStream } from "./errors.js";
import { chatUrl } from "./settings.js";
import { readJsonEvents } from "./sse.js";

// The waits before each try after a break; a try that brought new frames starts them over.
const DELAYS_MS = [300, 1000, 2000, 4000, 8000];

// Statuses worth another try: the server (or what is in front of it) was briefly not there.
const PASSING = new Set([408, 429, 500, 502, 503, 504]);

const streamUrl = (endpoint, thread) =>
  `${chatUrl(endpoint)}/stream?thread_id=${encodeURIComponent(thread)}`;

// Resolves after ms, or at once when signal aborts.
function wait(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}

// The frame number an SSE id names, or 0 (none, or not one of the server's numbers).
export function frameNumber(id) {
  return /^\d{1,12}$/.test(id || "") ? Number(id) : 0;
}

// GET the thread's current stream after frame `after`: the response, or null for a 204.
// Throws an HttpFailure for an error status, a TypeError when nothing answered.
export async function openStream(chosen, thread, after, signal) {
  const headers = { accept: "text/event-stream" };
  if (chosen.token) headers.authorization = `Bearer ${chosen.token}`;
  if (after > 0) headers["last-event-id"] = String(after);
  const response = await fetch(streamUrl(chosen.endpoint, thread), {
    headers,
    signal,
    cache: "no-store",
  });
  if (response.status === 204) return null;
  await expectEventStream(response);
  return response;
}

// Stop on a thread: asks the server to stop the thread's run (a resumable run is not stopped
// by the page leaving). It finishes its tool round, which the thread keeps, and its stream
// ends with done. True when the server took it (202) or nothing ran any more (204).
export async function cancelRun(chosen, thread) {
  const headers = {};
  if (chosen.token) headers.authorization = `Bearer ${chosen.token}`;
  try {
    const url = `${streamUrl(chosen.endpoint, thread).replace("/stream?", "/stream/cancel?")}`;
    const response = await fetch(url, { method: "POST", headers, cache: "no-store" });
    return response.status === 202 || response.status === 204;
  } catch {
    return false;
  }
}

// Reads a stream's events into onEvent, which sees each frame once: a frame at or below the
// last one seen (seen.id) is skipped. Frames without an id (a run not kept) all pass.
export function onceEach(seen, onEvent) {
  return (type, data, id) => {
    const n = frameNumber(id);
    if (n && n <= seen.id) return;
    if (n) seen.id = n;
    onEvent(type, data);
  };
}

// After a break: tries again (DELAYS_MS) until the run's done arrives (isDone()), the server
// says nothing runs (ended: true), Stop (signal), or the tries run out ({ failure }).
// chosen(): the settings with a fresh token; onTry(): said before each try.
export async function reconnect({ chosen, thread, seen, onEvent, isDone, signal, onTry }) {
  let failure = null;
  for (let tries = 0; tries < DELAYS_MS.length; ) {
    onTry();
    await wait(DELAYS_MS[tries], signal);
    if (signal.aborted) return { failure: null, ended: false };
    const before = seen.id;
    try {
      const response = await openStream(await chosen(), thread, seen.id, signal);
      if (!response) return { failure: null, ended: true };
      await readJsonEvents(response.body, onceEach(seen, onEvent));
      if (isDone()) return { failure: null, ended: false };
      failure = null; // a replay that ended early (its own deadline): go on from its last id
    } catch (err) {
      if (signal.aborted) return { failure: null, ended: false };
      if (err instanceof HttpFailure && !PASSING.has(err.status)) return { failure: err };
      failure = err;
    }
    tries = seen.id > before ? 0 : tries + 1;
  }
  return { failure: failure || new Error("the connection could not be restored"), ended: false };
}

// The question of the answer in progress on a thread, kept for this tab (sessionStorage): a
// reload in the run's first moments may come before the server has appended it to the thread.
const ASKING = "agentloop.asking";

export function rememberQuestion(thread, text) {
  try {
    sessionStorage.setItem(ASKING, JSON.stringify({ thread, text }));
  } catch {
    // storage full or off: a reload shows the answer without its question
  }
}

export function forgetQuestion(thread) {
  if (questionFor(thread) !== null) sessionStorage.removeItem(ASKING);
}

export function questionFor(thread) {
  try {
    const kept = JSON.parse(sessionStorage.getItem(ASKING) || "null");
    return kept && kept.thread === thread && typeof kept.text === "string" ? kept.text : null;
  } catch {
    return null;
  }
}
