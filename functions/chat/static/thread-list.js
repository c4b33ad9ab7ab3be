// The list of the caller's conversations: a sidebar on a wide screen, a drawer on a narrow
// one (the header's Chats button). Each opens with a click, is renamed in place and deleted
// after a second click that confirms it; "More" reads the next page.

import { el } from "./dom.js";
import { whenText } from "./threads.js";

const byId = (id) => document.getElementById(id);
const titleOf = (thread) => thread.title || "Untitled conversation";

// A thread's Rename or Delete: a sign, named for screen readers with the thread's title.
const actionButton = (verb, title, sign) =>
  el(
    "button",
    { type: "button", class: "thread-action", "aria-label": `${verb} “${title}”`, title: verb },
    sign,
  );

export class ThreadList {
  // actions: { open(id), rename(id, title) -> Promise, remove(id) -> Promise, more() }
  constructor(actions) {
    this.actions = actions;
    this.panel = byId("threads");
    this.items = byId("thread-items");
    this.problem = byId("threads-problem");
    this.moreButton = byId("threads-more");
    this.toggle = byId("threads-toggle");
    this.narrow = window.matchMedia("(max-width: 760px)");
    this.active = null;
    this.moreButton.addEventListener("click", () => actions.more());
    this.toggle.addEventListener("click", () => this.setOpen(!this.isOpen()));
    byId("threads-close").addEventListener("click", () => this.setOpen(false));
    this.panel.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.isOpen()) this.setOpen(false);
    });
    this.narrow.addEventListener("change", () => this.setOpen(false, false));
  }

  isOpen() {
    return document.body.classList.contains("threads-open");
  }

  // The drawer (narrow screens only; the sidebar is always there on a wide one).
  setOpen(open, focus = true) {
    document.body.classList.toggle("threads-open", open);
    this.toggle.setAttribute("aria-expanded", String(open));
    document.querySelector(".chat-column").inert = open && this.narrow.matches;
    if (!focus) return;
    if (open) byId("threads-title").focus();
    else if (this.narrow.matches) this.toggle.focus();
  }

  // A first page (replace) or the next one (append); cursor: whether there is more.
  show(threads, cursor, append = false) {
    this.say("");
    const nodes = threads.map((thread) => this.item(thread));
    if (append) this.items.append(...nodes);
    else this.items.replaceChildren(...nodes);
    if (!this.items.children.length) {
      this.items.append(el("li", { class: "thread-none" }, "No saved conversations yet."));
    }
    this.moreButton.hidden = !cursor;
    this.markActive(this.active);
  }

  clear() {
    this.items.replaceChildren();
    this.moreButton.hidden = true;
  }

  // A short problem under the heading ("" takes it away); the list itself stays as it was.
  say(text) {
    this.problem.textContent = text;
    this.problem.hidden = !text;
  }

  markActive(id) {
    this.active = id;
    for (const node of this.items.querySelectorAll(".thread-item")) {
      if (node.dataset.threadId === id) node.setAttribute("aria-current", "true");
      else node.removeAttribute("aria-current");
    }
  }

  item(thread) {
    const node = el("li", { class: "thread-item", dataset: { threadId: thread.id } });
    this.fillItem(node, thread);
    return node;
  }

  fillItem(node, thread) {
    const title = titleOf(thread);
    const open = el(
      "button",
      { type: "button", class: "thread-open", title },
      el("span", { class: "thread-title" }, title),
      el("span", { class: "thread-time" }, whenText(thread.updated_at)),
    );
    open.addEventListener("click", () => {
      this.actions.open(thread.id);
      if (this.narrow.matches) this.setOpen(false, false);
    });
    const rename = actionButton("Rename", title, "✎");
    rename.addEventListener("click", () => this.startRename(node, thread));
    const remove = actionButton("Delete", title, "✕");
    remove.addEventListener("click", () => this.confirmDelete(node, thread));
    node.replaceChildren(open, rename, remove);
    this.markActive(this.active);
  }

  // The title becomes a text box: Enter (or Save) renames, Escape (or Cancel) leaves it.
  startRename(node, thread) {
    const input = el("input", {
      type: "text",
      class: "thread-title-input",
      maxlength: 200,
      "aria-label": "New title",
    });
    input.value = thread.title || "";
    const form = el(
      "form",
      { class: "thread-edit" },
      input,
      el("button", { type: "submit" }, "Save"),
      el("button", { type: "button", class: "cancel" }, "Cancel"),
    );
    const back = () => this.fillItem(node, thread);
    form.querySelector(".cancel").addEventListener("click", back);
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.stopPropagation();
        back();
      }
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const title = input.value.trim();
      if (!title || title === thread.title) return back();
      return this.actions.rename(thread.id, title).then(
        (renamed) => this.fillItem(node, { ...thread, ...renamed }),
        (failure) => this.say(`Could not rename it: ${failure.message}`),
      );
    });
    node.replaceChildren(form);
    input.focus();
    input.select();
  }

  // A second, explicit Delete: a conversation deleted is gone for good.
  confirmDelete(node, thread) {
    const yes = el("button", { type: "button", class: "danger" }, "Delete");
    const no = el("button", { type: "button" }, "Cancel");
    node.replaceChildren(
      el(
        "div",
        { class: "thread-confirm", role: "group", "aria-label": "Confirm delete" },
        el("p", {}, `Delete “${titleOf(thread)}” for good?`),
        el("div", { class: "thread-confirm-buttons" }, yes, no),
      ),
    );
    no.addEventListener("click", () => this.fillItem(node, thread));
    yes.addEventListener("click", () =>
      this.actions.remove(thread.id).then(
        () => node.remove(),
        (failure) => {
          this.fillItem(node, thread);
          this.say(`Could not delete it: ${failure.message}`);
        },
      ),
    );
    no.focus();
  }
}
