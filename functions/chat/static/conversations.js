// The saved conversations and the chat together: the list loaded (and again after each run,
// a rename, a delete, a new token), a conversation opened from it or from the address, and
// the address kept naming the open one. Where the server keeps no threads now (a 503, or no
// /threads at all), the list says so and the chat sends whole conversations instead.

import { followRun } from "./follow.js";
import { renderSaved } from "./saved.js";
import { chatUrl } from "./settings.js";
import { ThreadList } from "./thread-list.js";
import { ThreadsApi, UNAVAILABLE, showThreadInUrl, threadInUrl } from "./threads.js";

const UNAVAILABLE_TEXT =
  "Saved conversations are unavailable right now: chats are kept in this page only.";
const SIGN_IN_TEXT = "Sign in, or set the bearer token in Settings, to see your conversations.";

// The settings with the signed-in token as it is (no refresh), else the pasted one.
function listChoice(chat) {
  const chosen = chat.settings.read();
  const signin = chat.signin;
  return signin && signin.session ? { ...chosen, token: signin.bearer() } : chosen;
}

// GET /threads/{id}'s answer as the page uses it: { messages, files }.
function readThread(thread) {
  const messages = thread && Array.isArray(thread.messages) ? thread.messages : [];
  const files = thread && Array.isArray(thread.files) ? thread.files : [];
  return { messages, files };
}

export class Conversations {
  constructor(chat, view) {
    this.chat = chat;
    this.view = view;
    this.api = new ThreadsApi(() => chat.chosen(), () => listChoice(chat));
    this.list = new ThreadList({
      open: (id) => this.open(id),
      rename: (id, title) => this.api.rename(id, title),
      remove: (id) => this.remove(id),
      more: () => this.load(true),
    });
    this.cursor = null;
    this.loads = 0; // the latest load wins: an older answer arriving late is dropped
    this.wanted = threadInUrl(); // opened once the list loads (the token may come later)
    chat.onThread = (id) => {
      showThreadInUrl(id);
      this.list.markActive(id);
    };
    chat.onRunEnd = () => this.load();
    chat.loadThread = async (id) => readThread(await this.api.get(id));
    window.addEventListener("hashchange", () => {
      const id = threadInUrl();
      if (id && id !== chat.thread) this.open(id);
    });
  }

  // "New chat": no conversation is open (nor wanted from the address).
  forget() {
    this.wanted = null;
    showThreadInUrl(null);
    this.list.markActive(null);
  }

  // The first page again (more: the next one). A 401 asks for a token; "unavailable" turns
  // threads off for new chats until a load works again.
  async load(more = false) {
    const load = ++this.loads;
    try {
      const page = await this.api.list(more ? this.cursor : null);
      if (load !== this.loads) return;
      this.chat.threadsAvailable = true;
      this.cursor = page.next_cursor || null;
      this.list.show(Array.isArray(page.data) ? page.data : [], this.cursor, more);
      if (this.wanted && this.chat.ready && !this.chat.history.length) this.open(this.wanted);
      this.wanted = null; // the page went on without it meanwhile
    } catch (failure) {
      if (load !== this.loads) return;
      if (!more) this.list.clear(); // what it showed may be another caller's
      this.list.say(this.problemText(failure));
    }
  }

  problemText(failure) {
    if (failure.status === 401 || failure.status === 403) return SIGN_IN_TEXT;
    if (UNAVAILABLE.has(failure.status)) {
      this.chat.threadsAvailable = false;
      return UNAVAILABLE_TEXT;
    }
    return `Could not load your conversations: ${failure.message || "no answer"}.`;
  }

  // Shows a saved conversation and goes on with it, following a run going on in it (a reload
  // in the middle of an answer); a missing one starts a new chat.
  async open(id) {
    this.wanted = null;
    if (id === this.chat.thread) return; // open already (a run on it may be going on)
    this.view.setStatus("Opening the conversation…");
    let thread;
    try {
      thread = await this.api.get(id);
    } catch (failure) {
      this.openFailed(id, failure);
      return;
    }
    const { messages, files } = readThread(thread);
    this.chat.openSaved(id, messages);
    this.view.conversation.replaceChildren();
    let tail = null;
    const url = chatUrl(this.chat.settings.read().endpoint);
    if (messages.length) tail = renderSaved(this.view, messages, files, url);
    else this.view.clear();
    this.view.setStatus("Ready.");
    this.view.scrollToEnd();
    followRun(this.chat, id, tail);
  }

  openFailed(id, failure) {
    if (failure.status !== 404) {
      this.view.setStatus(`Could not open the conversation: ${failure.message}`);
      return;
    }
    if (this.chat.thread === id || threadInUrl() === id) {
      this.chat.reset();
      this.view.clear();
    }
    this.view.setStatus("That conversation is no longer there; this is a new chat.");
    this.load();
  }

  // Deleted: gone from the list; the open conversation, if it was that one, becomes a new chat.
  async remove(id) {
    await this.api.remove(id);
    if (this.chat.thread === id) {
      this.chat.reset();
      this.view.clear();
      this.view.setStatus("Conversation deleted.");
    }
    this.load();
  }
}
