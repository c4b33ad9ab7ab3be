// A conversation opened while a run goes on in it (a reload in the middle of an answer, or
// the list opening a thread another tab is running): after the saved messages are shown,
// GET /chat/stream without Last-Event-ID gives the run from its start, then live; its answer
// is shown as it would have been live. 204: nothing runs, the saved conversation stands.

import { describeFailure } from "./errors.js";
import { stopReason } from "./labels.js";
import { Reply } from "./reply.js";
import { forgetQuestion, onceEach, openStream, questionFor } from "./resume.js";
import { splitAttached, textOf } from "./saved.js";
import { chatUrl } from "./settings.js";
import { readJsonEvents } from "./sse.js";

// The run's first rounds may be in the thread already (saved round by round), or all of it
// (it ended between the two reads, its stream not yet marked ended): then the saved answer
// shown last (tail) is this run's, and the replay shows it again. The replay's first tool
// call tells (the tail has it), or its done (the saved conversation ends with its answer):
// the tail goes, and the question this tab kept (the thread's own is the one above it).
class SavedTail {
  constructor(tail, asked, history) {
    this.tail = tail;
    this.asked = asked;
    this.last = history.length ? history[history.length - 1] : null;
    this.checked = false;
  }

  onEvent(type, data) {
    if (this.checked || type !== "tool_call_start" || data.depth) return;
    this.checked = true;
    if (this.tail && this.tail.cards.has(data.call_id)) this.drop();
  }

  onDone(done) {
    const answers = (done.messages || []).filter((m) => m && m.role === "assistant");
    const answer = answers.length ? answers[answers.length - 1] : null;
    const last = this.last;
    if (answer && last && last.role === "assistant" && same(last, answer)) this.drop();
  }

  drop() {
    if (this.tail) this.tail.el.remove();
    if (this.asked) this.asked.remove();
    this.tail = null;
    this.asked = null;
  }
}

const same = (a, b) => JSON.stringify([a.content, a.tool_calls]) ===
  JSON.stringify([b.content, b.tool_calls]);

// The question this tab kept for the run on thread id, unless the thread shows it already
// (the server appends it as the run starts; a reload in the first moments may come before).
function unsavedQuestion(id, history) {
  const question = questionFor(id);
  const last = history.length ? history[history.length - 1] : null;
  if (question === null || !last || last.role !== "user") return question;
  return splitAttached(textOf(last.content)).text === question ? null : question;
}

// Follows the run going on in thread id, if one is (tail: renderSaved's last answer).
export async function followRun(chat, id, tail) {
  if (!chat.ready || chat.thread !== id) return;
  const controller = new AbortController();
  const started = chat.generation;
  let response;
  let chosen;
  try {
    chosen = await chat.chosen();
    response = await openStream(chosen, id, 0, controller.signal);
  } catch {
    return; // not readable now: the saved conversation stands
  }
  if (!response) return;
  if (!chat.ready || chat.thread !== id || started !== chat.generation) {
    controller.abort();
    return;
  }
  const question = unsavedQuestion(id, chat.history);
  const asked = question === null ? null : chat.view.addUserMessage(question);
  const reply = new Reply(chat.view.conversation, chat.notices, chatUrl(chosen.endpoint));
  chat.current = { controller, reply };
  chat.updateComposer();
  chat.view.setStatus("An answer is in progress in this conversation; following it…");
  chat.view.scrollToEnd();
  const seen = { id: 0 };
  const saved = new SavedTail(tail, asked, chat.history);
  const onEvent = onceEach(seen, (type, data) => {
    saved.onEvent(type, data);
    chat.view.follow(() => reply.handle(type, data));
    if (type === "done" && !data.depth) saved.onDone(data);
  });
  let outcome = { failure: null, ended: false };
  try {
    await readJsonEvents(response.body, onEvent);
  } catch (err) {
    outcome.failure = err;
  }
  if (!reply.done && !controller.signal.aborted && started === chat.generation) {
    outcome = await chat.pickUp(reply, seen, onEvent, controller.signal);
  }
  if (chat.current && chat.current.controller === controller) chat.current = null;
  chat.updateComposer();
  if (started !== chat.generation) return;
  forgetQuestion(id);
  await settleFollowed(chat, reply, { ...outcome, stopped: controller.signal.aborted }, started);
  chat.afterRun();
  chat.onRunEnd();
}

// The followed run is over: the conversation goes on from the thread as the server keeps it.
async function settleFollowed(chat, reply, outcome, started) {
  if (reply.done) {
    const thread = await chat.loadThread(chat.thread).catch(() => null);
    if (started !== chat.generation) return;
    if (thread) chat.history = thread.messages;
    const reason = reply.done.stop_reason;
    if ((reply.done.pending || []).length) {
      reply.finish("stopped", PAUSED_AWAY);
      chat.view.setStatus("The run waits for decisions this page cannot give.");
      return;
    }
    reply.finish("done");
    chat.view.setStatus(reason === "completed" ? "Done." : `Done: ${stopReason(reason)}.`);
  } else if (outcome.ended) {
    await chat.endedAway(reply, chat.history, started);
  } else if (outcome.stopped) {
    chat.breakOff(reply, chat.history, outcome, "");
  } else {
    const failure = outcome.failure || new Error("the connection closed before the run ended");
    reply.finish("error", describeFailure(failure, "the server", chat.canSignIn));
    chat.view.setStatus("Lost the answer in progress; reload the page to see it.");
  }
}

const PAUSED_AWAY =
  "This run paused for your approval, which the page that started it would have asked " +
  "for; a reloaded page cannot give it. Its calls did not run: ask again in a new message.";
