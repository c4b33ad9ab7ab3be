// agentloop reference chat page: POST /chat, read the SSE stream, render it.
//
// ES modules, no dependencies and no build step (the page's CSP: script-src 'self'). This is
// the entry index.html loads; the pieces are its imports:
//   markdown.js, inline.js   markdown to DOM nodes (blocks, then the text inside them)
//   sse.js                   the SSE parser over a fetch() body
//   chat.js                  the conversation: requests, runs, pauses for approval
//   resume.js, follow.js     a run's stream picked up again after a break, or a reload
//   conversations.js, threads.js, thread-list.js, saved.js   the conversations the server
//                            keeps: the list, the open one in the address, a saved one shown
//   reply.js                 one answer: events into transcripts, cards and its summary line
//   transcript.js, cards.js, terminal.js, sources.js, files.js   what a reply is made of
//   attach.js                the composer's files, sent with a message
//   settings.js, settings-panel.js                     the settings and their panel
//   signin.js, oidc.js, account.js                     signing in with the server's issuer
//   view.js, errors.js, labels.js, dom.js              the composer, failures, words, helpers
// Untrusted text (the model's answer, tool arguments and results, error messages) only ever
// reaches the page as text nodes: the renderer builds DOM nodes itself and never assigns HTML.

import { AccountView } from "./account.js";
import { Chat } from "./chat.js";
import { Conversations } from "./conversations.js";
import { SettingsPanel } from "./settings-panel.js";
import { SignIn } from "./signin.js";
import { ChatView } from "./view.js";

// Sign-in, where the server offers it: the header shows who is signed in, and the lists the
// settings offer (and the saved conversations: onSession) are asked for again with its token.
function startSignIn(panel, onSession) {
  let account = null;
  const signin = new SignIn(() => {
    account.render();
    if (signin.session) panel.loadLists({ ...panel.read(), token: signin.bearer() });
    onSession();
  });
  account = new AccountView(signin);
  signin.start(panel.read().endpoint);
  return signin;
}

function start() {
  const view = new ChatView();
  const panel = new SettingsPanel();
  let conversations = null;
  const chat = new Chat(view, panel, startSignIn(panel, () => conversations?.load()));
  conversations = new Conversations(chat, view);
  watchConnection(panel, () => conversations.load());
  const pickExample = (text) => {
    if (!chat.pause) view.offer(text);
  };
  view.clear(pickExample);

  view.form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = view.prompt.value.trim();
    if (!text || !chat.ready) return;
    view.prompt.value = "";
    chat.send(text, false, view.attachments.take());
  });
  view.prompt.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (chat.ready) view.form.requestSubmit();
    }
  });
  view.stopButton.addEventListener("click", () => chat.stop());
  document.getElementById("new-chat").addEventListener("click", () => {
    chat.reset();
    conversations.forget();
    view.clear(pickExample);
    view.setStatus("Ready.");
    view.prompt.focus();
  });
  conversations.load();
  return chat;
}

// Another endpoint or token: another server or caller, whose conversations the list shows.
function watchConnection(panel, reload) {
  for (const name of ["endpoint", "token"]) {
    panel.form.elements[name].addEventListener("change", reload);
  }
}

// A module runs once the document is parsed. The page's state, for tests to read (history,
// pending) through import("/static/app.js"): the same module instance as the page's.
export const chat = start();
