// The conversation's state and its runs: POST /chat, stream the events into a reply, and
// carry on from done.messages; a run paused for approvals waits here for the cards' decisions.
// A conversation is kept on the server as a thread: the first message sends thread_id "new"
// and adopts the id run_start names; later ones send only the new message with that id (the
// server puts the thread's messages before it). Where the server keeps no threads, the page
// sends the whole conversation each time, as it did before threads (this.local).
// A paused run lives in this page only: a reload loses it.
// A run on a thread is resumable (resume.js): a dropped connection is picked up again where it
// broke, and a page reloaded mid-answer follows the answer from its start. Stop asks the
// server to stop it (POST /chat/stream/cancel): it finishes its tool round, which the thread
// keeps.

import { encodeAttachments } from "./attach.js";
import { dollars, el, number, plural } from "./dom.js";
import { describeFailure, expectEventStream } from "./errors.js";
import { stopReason } from "./labels.js";
import { threadRefusal, threadsUnavailable } from "./refusals.js";
import { Reply } from "./reply.js";
import { cancelRun, forgetQuestion, onceEach, reconnect, rememberQuestion } from "./resume.js";
import { renderSaved } from "./saved.js";
import { chatUrl, loadUsage, selectedTools, toolList } from "./settings.js";
import { readJsonEvents } from "./sse.js";

function newRequest(chosen, messages, limits) {
  const body = { messages, tools: selectedTools(chosen) };
  if (chosen.model) body.model = chosen.model;
  if (limits.maxIterations !== null) body.max_iterations = limits.maxIterations;
  if (limits.tokenBudget !== null) body.token_budget = limits.tokenBudget;
  const asking = toolList(chosen.approvalTools);
  if (asking.length) body.approval_tools = asking;
  return { url: chatUrl(chosen.endpoint), headers: requestHeaders(chosen), body };
}

function requestHeaders(chosen) {
  const headers = { "content-type": "application/json", accept: "text/event-stream" };
  if (chosen.token) headers.authorization = `Bearer ${chosen.token}`;
  return headers;
}

// The status line for a request that failed.
const errorStatus = (failure) => `Error: ${failure.message || "request failed"}`;

// The run waits for decisions only when every pending call is an approval it can resume.
const waitsForApproval = (done, pending) =>
  done.stop_reason === "approval_required" &&
  Boolean(done.resume) &&
  pending.every((call) => call.kind === "approval");

export class Chat {
  // view: a ChatView; settings: a SettingsPanel; signin: a SignIn (its token wins over a
  // pasted one).
  constructor(view, settings, signin = null) {
    this.view = view;
    this.settings = settings;
    this.signin = signin;
    this.history = []; // the messages sent with the next request (before the new one)
    this.current = null; // { controller, reply } while a request streams
    this.generation = 0; // bumped by reset(), so a run that ends later leaves history alone
    // A run paused for approvals: { reply, request, base, conversation, resume, pending,
    // started }.
    this.pause = null;
    this.notices = new Set(); // notices said once per conversation (a model with no price)
    this.thread = null; // the server's thread of this conversation (null: none yet)
    this.local = false; // this conversation is kept in this page only (no thread)
    this.threadsAvailable = true; // the server keeps threads (the list's last load says)
    this.onThread = () => {}; // (id or null) the conversation's thread changed
    this.onRunEnd = () => {}; // a run ended (the list shows its thread's new time)
    // (id) its { messages, files } from the server (Conversations)
    this.loadThread = async () => null;
  }

  // The server offers sign-in: a refusal for want of a token asks for it first.
  get canSignIn() {
    return Boolean(this.signin && this.signin.available);
  }

  // The calls a paused run waits on ([] when none does).
  get pending() {
    return this.pause ? this.pause.pending.map((call) => ({ ...call })) : [];
  }

  // A message can be sent: nothing streams and nothing waits for decisions.
  get ready() {
    return !this.current && !this.pause;
  }

  updateComposer() {
    this.view.update(Boolean(this.current), Boolean(this.pause));
  }

  // Stop: the page stops reading at once; a run on a thread, which the page's leaving does
  // not stop (it is resumable), is asked to stop too: it finishes its tool round, which the
  // thread keeps. If the server cannot be asked, the status says the run goes on.
  stop() {
    if (!this.current) return;
    const { controller, request } = this.current;
    if (request?.body?.resumable && this.thread) {
      const thread = this.thread;
      this.chosen()
        .then((chosen) => cancelRun(chosen, thread))
        .then((asked) => {
          if (!asked) this.view.setStatus(NOT_STOPPED);
        });
    }
    controller.abort();
  }

  // "New chat": the run in progress is stopped, a paused run's calls never run.
  reset() {
    this.stop();
    this.generation += 1;
    this.history = [];
    this.pause = null;
    this.updateComposer();
    this.notices.clear();
    const had = this.thread;
    this.thread = null;
    this.local = false;
    if (had) this.onThread(null);
  }

  // A saved conversation (GET /threads/{id}) goes on from here.
  openSaved(id, messages) {
    this.reset();
    this.thread = id;
    this.history = messages;
    this.onThread(id);
  }

  // run_start named the thread this run is kept in: the conversation goes on there.
  adopt(id, started) {
    if (started !== this.generation || this.local || this.thread === id) return;
    this.thread = id;
    this.onThread(id);
  }

  // files: the composer's files sent with it (File objects); unsaved: sent again without a
  // thread, which the server could not keep (said under it).
  async send(text, unsaved = false, files = []) {
    const { limits, invalid } = this.settings.readLimits();
    if (!limits) {
      this.view.setStatus(`${invalid} in Settings is not a whole number from 1 up.`);
      this.view.restore(text, files);
      return;
    }
    const attachments = await this.readFiles(text, files);
    if (!attachments) return;
    const user = { role: "user", content: text };
    const messages = [...this.history, user];
    if (!this.thread && !this.history.length) this.local = !this.threadsAvailable;
    const request = newRequest(await this.chosen(), this.local ? messages : [user], limits);
    if (attachments.length) request.body.attachments = attachments;
    if (!this.local) {
      request.body.thread_id = this.thread || "new";
      request.body.resumable = true; // a dropped connection can be picked up again
    }
    request.conversation = messages; // what the model is sent, the thread's messages included
    request.question = text; // shown again if the page is reloaded during the answer
    const started = this.generation;
    const userArticle = this.view.addUserMessage(text, files.map((file) => file.name));
    const reply = new Reply(this.view.conversation, this.notices, request.url);
    reply.onDecide = () => this.decided();
    if (unsaved) reply.el.append(el("p", { class: "meta-note page-only" }, UNSAVED));
    this.view.setStatus("Running…");
    this.view.scrollToEnd();

    const outcome = await this.stream(request, reply);
    if (started !== this.generation) return; // the user started a new chat meanwhile
    if (this.thread) forgetQuestion(this.thread);
    if (reply.done) {
      this.settle(reply, request, messages, started);
    } else if (outcome.ended) {
      await this.endedAway(reply, messages, started);
    } else if (outcome.stopped || !outcome.failure || outcome.resumed) {
      this.breakOff(reply, messages, outcome, request.url);
    } else if (threadsUnavailable(request, outcome.failure)) {
      this.local = true; // nothing ran: the same message again, the conversation sent whole
      this.threadsAvailable = false;
      userArticle.remove();
      reply.el.remove();
      return this.send(text, true, files);
    } else {
      this.refused(request, outcome.failure, { reply, userArticle, text, files });
    }
    this.afterRun();
    this.onRunEnd();
  }

  // Nothing ran: refused for the thread's sake (said by refusals.js), or not sent.
  refused(request, failure, sent) {
    if (threadRefusal(this, request, failure, sent)) return;
    this.notSent(sent.reply, sent.userArticle, sent, failure, request.url);
  }

  // Under a finished answer, what is left of the caller's daily and monthly allowance, where
  // the server limits it (GET /v1/usage, read after the run settled, as the request was sent).
  async showAllowance(reply, request) {
    const limits = await loadUsage(request.url, request.headers.authorization);
    if (limits) reply.showAllowance(allowanceText(limits));
  }

  // The settings, with the signed-in token (refreshed when due) in place of a pasted one.
  async chosen() {
    const chosen = this.settings.read();
    const token = this.signin ? await this.signin.token() : null;
    return token ? { ...chosen, token } : chosen;
  }

  afterRun() {
    this.view.scrollToEnd();
    if (!this.pause) this.view.prompt.focus();
  }

  // The files as the request's attachments ([] for none); null when one cannot be read (the
  // message and its files are back in the composer, the status says why).
  async readFiles(text, files) {
    if (!files.length) return [];
    try {
      return await encodeAttachments(files);
    } catch (err) {
      this.view.setStatus(`Not sent: ${err.message}.`);
      this.view.restore(text, files);
      return null;
    }
  }

  // Nothing ran: the message is not part of the conversation; it goes back to edit, its
  // files to the composer. banner: what the reply says (the failure described, unless given).
  notSent(reply, userArticle, { text, files = [] }, failure, url, banner = null) {
    reply.finish("error", banner || describeFailure(failure, url, this.canSignIn));
    this.view.markNotSent(userArticle);
    this.view.setStatus(errorStatus(failure));
    this.view.restore(text, files);
  }

  // The thread of the conversation is gone (deleted elsewhere): a new chat, the message
  // back in the box.
  threadGone(text, files = []) {
    this.reset();
    this.view.clear();
    this.view.conversation.prepend(
      el(
        "p",
        { class: "banner banner-error thread-gone", role: "alert" },
        "That conversation is no longer there (deleted elsewhere?). This is a new chat: " +
          "your message is back in the box, send it to start over.",
      ),
    );
    this.view.setStatus("Conversation not found; this is a new chat.");
    this.view.restore(text, files);
  }

  // From here on the conversation is kept in this page only (said under the reply).
  // The address stops naming the thread: a reload would show less than the page does.
  goLocal(reply, why) {
    this.local = true;
    reply.el.append(el("p", { class: "meta-note page-only" }, why));
    if (this.thread) {
      this.thread = null;
      this.onThread(null);
    }
  }

  // POST one request and stream its events into reply; a resumable run's stream that breaks
  // is picked up again. { failure, stopped, ended, resumed } at the end (ended: the run ended
  // out of sight; resumed: its events began, so a failure is not a message left unsent).
  async stream(request, reply) {
    const controller = new AbortController();
    const started = this.generation;
    this.current = { controller, reply, request };
    this.updateComposer();
    const seen = { id: 0 }; // the last frame shown
    const onEvent = onceEach(seen, (type, data) => {
      if (type === "run_start" && !data.depth && data.thread_id) {
        this.adopt(data.thread_id, started);
        if (request.body.resumable) rememberQuestion(data.thread_id, request.question);
      }
      this.view.follow(() => reply.handle(type, data));
    });
    let failure = null;
    try {
      const response = await fetch(request.url, {
        method: "POST",
        headers: request.headers,
        body: JSON.stringify(request.body),
        signal: controller.signal,
        cache: "no-store",
      });
      await expectEventStream(response);
      await readJsonEvents(response.body, onEvent);
    } catch (err) {
      failure = err;
    }
    let ended = false;
    const resumable = request.body.resumable && seen.id > 0 && this.thread;
    if (resumable && !reply.done && !controller.signal.aborted && started === this.generation) {
      ({ failure, ended } = await this.pickUp(reply, seen, onEvent, controller.signal));
    }
    if (this.current && this.current.controller === controller) this.current = null;
    this.updateComposer();
    return { failure, stopped: controller.signal.aborted, ended, resumed: seen.id > 0 };
  }

  // The stream broke before done: GET /chat/stream from the last frame shown, a few times.
  pickUp(reply, seen, onEvent, signal) {
    return reconnect({
      chosen: () => this.chosen(),
      thread: this.thread,
      seen,
      onEvent,
      isDone: () => Boolean(reply.done),
      signal,
      onTry: () => {
        reply.el.dataset.reconnecting = "true";
        this.view.setStatus("Connection lost; reconnecting…");
      },
    }).then((outcome) => {
      delete reply.el.dataset.reconnecting;
      if (signal.aborted) return outcome;
      this.view.setStatus("Running…");
      if (reply.done && !reply.el.querySelector(".resumed")) {
        reply.meta.after(el("p", { class: "meta-note resumed" }, RESUMED));
      }
      return outcome;
    });
  }

  // The run ended while the connection was down (a 204 on reconnecting): the thread as the
  // server keeps it now, its final answer included, replaces what the page showed.
  async endedAway(reply, base, started) {
    let thread = null;
    try {
      thread = await this.loadThread(this.thread);
    } catch {
      thread = null;
    }
    if (started !== this.generation) return;
    if (!thread) {
      this.breakOff(reply, base, { failure: new Error(ENDED_UNSEEN) }, "");
      return;
    }
    this.history = thread.messages;
    this.view.conversation.replaceChildren();
    renderSaved(this.view, thread.messages, thread.files, reply.chatUrl);
    this.view.setStatus("The answer finished while the connection was down; here it is.");
  }

  // The run broke off (stopped, cut, refused) after `base`: what was shown stays part of
  // the conversation as the answer; a paused turn's calls and results do not.
  breakOff(reply, base, outcome, url) {
    const partial = reply.answerText().trim();
    this.history = partial ? [...base, { role: "assistant", content: partial }] : [...base];
    if (outcome.stopped) {
      const why = this.thread
        ? STOPPED_ON_THREAD
        : "Stopped. The server stops the agent after the tool round in progress.";
      reply.finish("stopped", why);
      if (this.thread) reply.cards.forEach(finishesOnServer);
      this.view.setStatus("Stopped.");
    } else if (outcome.failure) {
      const said = describeFailure(outcome.failure, url, this.canSignIn);
      reply.finish("error", this.thread && outcome.resumed ? [...said, GOES_ON] : said);
      this.view.setStatus(errorStatus(outcome.failure));
    } else {
      reply.finish("error", "The connection closed before the run finished.");
      this.view.setStatus("Connection lost.");
    }
  }

  // The run's done arrived: the conversation goes on from it, or it waits for decisions.
  settle(reply, request, base, started) {
    const done = reply.done;
    const sent = request.conversation;
    const pending = done.pending || [];
    if (!pending.length) {
      this.history = [...sent, ...done.messages];
      reply.finish("done");
      this.showAllowance(reply, request);
      const reason = done.stop_reason;
      this.view.setStatus(reason === "completed" ? "Done." : `Done: ${stopReason(reason)}.`);
      return;
    }
    if (!waitsForApproval(done, pending)) {
      // Client tools: this page declares none, so nothing here can run them.
      const failure = new Error("the run waits for client-side tools; this page has none");
      this.breakOff(reply, base, { failure }, request.url);
      return;
    }
    const conversation = [...sent, ...done.messages];
    this.pause = { reply, request, base, conversation, resume: done.resume, pending, started };
    reply.finish("paused");
    this.updateComposer();
    this.decided();
  }

  // A decision was made on a card: once every waiting call has one, the run goes on.
  decided() {
    if (!this.pause) return; // the run's done has not arrived yet: settle() calls this again
    const { reply } = this.pause;
    const open = this.pause.pending.filter((call) => !reply.decisions.has(call.call_id));
    if (open.length) {
      this.view.setStatus(`Waiting for your decision on ${plural(open.length, "tool call")}.`);
      return;
    }
    this.continueRun(this.pause);
  }

  async continueRun(paused) {
    this.pause = null;
    const { reply } = paused;
    const approvals = paused.pending.map((call) => ({
      call_id: call.call_id,
      ...reply.decisions.get(call.call_id),
    }));
    const body = { ...paused.request.body, messages: paused.conversation, resume: paused.resume };
    delete body.attachments; // they went with the question, into the run's working directory
    if (body.thread_id) {
      // A thread cannot take a paused run's continuation yet (it would keep the paused
      // turn twice): the conversation goes on in this page, sent whole.
      delete body.thread_id;
      delete body.resumable; // only a run on a thread can be resumed
      this.goLocal(reply, PAUSED_OFF_THREAD);
    }
    const headers = requestHeaders(await this.chosen()); // a token refreshed meanwhile
    const request = { ...paused.request, headers, body: { ...body, approvals } };
    request.conversation = paused.conversation;
    reply.resume();
    this.view.setStatus("Running…");
    const outcome = await this.stream(request, reply);
    if (paused.started !== this.generation) return;
    if (reply.done) this.settle(reply, request, paused.base, paused.started);
    else this.breakOff(reply, paused.base, outcome, request.url);
    this.afterRun();
    this.onRunEnd();
  }
}

// A call cut off by Stop on a thread runs to its end on the server, which keeps its result.
function finishesOnServer(card) {
  if (card.el.dataset.status === "stopped") card.setStatus("finishing on the server", "stopped");
}

// Stop on a thread: the server is asked to stop the run after its tool round, which it keeps.
const STOPPED_ON_THREAD =
  "Stopped. The server finishes the tool round in progress and keeps it in this " +
  "conversation: send “continue” to go on from there.";

// Stop on a thread when the server could not be asked to stop the run (it was sent
// resumable, so the page's leaving does not stop it): it runs to its end and is kept.
const NOT_STOPPED =
  "The server could not be asked to stop: the answer goes on there and is kept in this " +
  "conversation (reload the page to see it).";

const RESUMED =
  "The connection dropped during this answer; the page picked it up again where it broke.";

const GOES_ON =
  " The answer goes on on the server and is kept in this conversation: reload the page to " +
  "see it.";

const ENDED_UNSEEN =
  "the connection dropped and the answer finished meanwhile, but the conversation could " +
  "not be loaded again: reload the page to see it";

const UNSAVED =
  "Saved conversations are unavailable right now: this conversation is kept in this page " +
  "only.";

const PAUSED_OFF_THREAD =
  "The approved run goes on in this page only: saved conversations cannot continue a " +
  "paused run yet, so what follows is not saved on the server.";

// "$0.9650 left today · $19.97 left this month": the money and token limits (the load
// limits, runs in flight and requests a minute, say nothing about what an answer costs).
export function allowanceText(limits) {
  const left = (name) => {
    const limit = limits[name];
    return limit && typeof limit.remaining === "number" ? limit.remaining : null;
  };
  const parts = [];
  if (left("usd_per_day") !== null) parts.push(`${dollars(left("usd_per_day"))} left today`);
  if (left("usd_per_month") !== null) {
    parts.push(`${dollars(left("usd_per_month"))} left this month`);
  }
  if (left("tokens_per_day") !== null) {
    parts.push(`${number.format(left("tokens_per_day"))} tokens left today`);
  }
  return parts.join(" · ");
}
