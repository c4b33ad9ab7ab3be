// The conversation and the composer as the person sees them: messages, the status line, the
// empty page's example prompts, and which controls are on while a run streams or waits.

import { AttachPicker, attachedList } from "./attach.js";
import { el } from "./dom.js";

// Prompts the empty page offers; each names the tools it needs, so a click shows what the
// agent can do. Clicking one puts it in the message box, to send or edit.
const EXAMPLES = [
  {
    tools: "execute_code",
    text: "Use Python to list the prime numbers below 100 and add them up.",
  },
  {
    tools: "search_web, scrape",
    text: "Search the web for what changed in the latest Python release and summarise it.",
  },
  {
    tools: "scrape",
    text: "Read https://www.python.org/about/ and sum it up in three bullet points.",
  },
  { tools: "no tools", text: "Explain the difference between a process and a thread." },
];

function emptyState(onPick) {
  const list = el("ul", { class: "examples", "aria-label": "Example prompts" });
  for (const example of EXAMPLES) {
    const button = el(
      "button",
      { type: "button", class: "example" },
      el("span", { class: "example-text" }, example.text),
      el("span", { class: "example-tools" }, example.tools),
    );
    button.addEventListener("click", () => onPick(example.text));
    list.append(el("li", {}, button));
  }
  return el(
    "section",
    { class: "empty-hint", id: "empty-hint", "aria-label": "Getting started" },
    el(
      "p",
      { class: "empty-lead" },
      "Ask something. Answers stream in as the agent works; tool calls show up as cards.",
    ),
    el("p", { class: "empty-try" }, "Or start from an example:"),
    list,
  );
}

export class ChatView {
  constructor() {
    this.conversation = document.getElementById("conversation");
    this.form = document.getElementById("composer");
    this.prompt = document.getElementById("prompt");
    this.sendButton = document.getElementById("send");
    this.stopButton = document.getElementById("stop");
    this.status = document.getElementById("status");
    this.idle = this.prompt.placeholder;
    this.attachments = new AttachPicker();
  }

  setStatus(text) {
    this.status.textContent = text;
  }

  // An empty conversation with the example prompts; onPick(text) when one is clicked.
  // Without onPick, the one given last.
  clear(onPick = this.onPick) {
    this.onPick = onPick;
    this.conversation.replaceChildren(emptyState(onPick));
  }

  // The example goes into the message box, the cursor after it.
  offer(text) {
    this.prompt.value = text;
    this.prompt.focus();
    this.prompt.setSelectionRange(text.length, text.length);
  }

  // A message that did not go out goes back into an empty message box, to edit; its files
  // back among the composer's.
  restore(text, files = []) {
    if (!this.prompt.value.trim()) this.prompt.value = text;
    this.attachments.restore(files);
  }

  // Send is off while a run streams; the whole composer is off while a paused run waits
  // for decisions (a new message cannot come between a turn's calls and their results).
  update(running, paused) {
    this.sendButton.disabled = running || paused;
    this.stopButton.disabled = !running;
    this.prompt.disabled = paused;
    this.attachments.setDisabled(paused);
    this.prompt.placeholder = paused ? "Approve or deny the tool calls above to go on." : this.idle;
    document.body.classList.toggle("running", running);
    document.body.classList.toggle("paused", paused);
  }

  // fileNames: the names of the files sent with it.
  addUserMessage(text, fileNames = []) {
    const hint = document.getElementById("empty-hint");
    if (hint) hint.remove();
    const article = el("article", { class: "msg user", "aria-label": "your message" });
    article.append(el("div", { class: "md" }, text));
    const attached = attachedList(fileNames);
    if (attached) article.append(attached);
    this.conversation.append(article);
    return article;
  }

  markNotSent(article) {
    article.classList.add("not-sent");
    article.append(el("span", { class: "unsent-label" }, "not sent"));
  }

  // Runs change() and keeps the conversation scrolled to its end if it was there before.
  follow(change) {
    const box = this.conversation;
    const stick = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
    change();
    if (stick) box.scrollTop = box.scrollHeight;
  }

  scrollToEnd() {
    this.conversation.scrollTop = this.conversation.scrollHeight;
  }
}
