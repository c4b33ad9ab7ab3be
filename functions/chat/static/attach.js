// The composer's files: chosen with Attach, shown as removable chips until the message goes,
// then sent with it as `attachments: [{name, data}]` (base64). The server's bounds are checked
// here first, each one said in a sentence: at most 10 files, 4 MiB each and 4 MiB together
// (a run's working directory holds no more).

import { el, plural } from "./dom.js";
import { sizeText } from "./files.js";

const MIB = 1024 * 1024;
export const MAX_FILES = 10;
export const MAX_FILE_BYTES = 4 * MIB;
export const MAX_TOTAL_BYTES = 4 * MIB;

// A list of names as a sentence's part: "a.csv", "a.csv and b.csv", "a, b and c".
function names(files) {
  const quoted = files.map((file) => `“${file.name}”`);
  if (quoted.length < 2) return quoted.join("");
  return `${quoted.slice(0, -1).join(", ")} and ${quoted[quoted.length - 1]}`;
}

// The files of `chosen` that fit next to `kept`, and a sentence for those that do not.
export function fitting(kept, chosen) {
  const taken = [...kept];
  const tooBig = [];
  const noRoom = [];
  const overTotal = [];
  let total = kept.reduce((sum, file) => sum + file.size, 0);
  for (const file of chosen) {
    if (file.size > MAX_FILE_BYTES) tooBig.push(file);
    else if (taken.length >= MAX_FILES) noRoom.push(file);
    else if (total + file.size > MAX_TOTAL_BYTES) overTotal.push(file);
    else {
      taken.push(file);
      total += file.size;
    }
  }
  const said = [];
  if (tooBig.length) {
    const each = tooBig.length === 1 ? "it is" : "they are";
    said.push(`Not attached: ${names(tooBig)}; a file may be at most 4 MiB, and ${each} larger.`);
  }
  if (noRoom.length) {
    said.push(`Not attached: ${names(noRoom)}; a message takes at most ${MAX_FILES} files.`);
  }
  if (overTotal.length) {
    said.push(`Not attached: ${names(overTotal)}; a message's files may add up to 4 MiB.`);
  }
  return { files: taken, problem: said.join(" ") };
}

// A file's bytes as standard base64 (FileReader's data: URL, without its head).
function base64Of(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => {
      const url = String(reader.result || "");
      resolve(url.slice(url.indexOf(",") + 1));
    };
    reader.onerror = () => reject(new Error(`could not read “${file.name}”`));
    reader.readAsDataURL(file);
  });
}

// The request's attachments for files (File objects).
export async function encodeAttachments(files) {
  return Promise.all(files.map(async (file) => ({ name: file.name, data: await base64Of(file) })));
}

// The attached names under a sent message (text only).
export function attachedList(fileNames) {
  if (!fileNames.length) return null;
  return el(
    "ul",
    { class: "attached", "aria-label": "Attached files" },
    ...fileNames.map((name) => el("li", { class: "file-chip" }, el("span", {}, name))),
  );
}

export class AttachPicker {
  constructor() {
    this.input = document.getElementById("attach-input");
    this.button = document.getElementById("attach");
    this.list = document.getElementById("attachments");
    this.problem = document.getElementById("attach-problem");
    this.files = [];
    this.button.addEventListener("click", () => this.input.click());
    this.input.addEventListener("change", () => {
      this.add([...this.input.files]);
      this.input.value = ""; // the same file can be chosen again after its removal
    });
  }

  add(chosen) {
    const { files, problem } = fitting(this.files, chosen);
    this.files = files;
    this.say(problem);
    this.render();
  }

  remove(index) {
    this.files.splice(index, 1);
    this.say("");
    this.render();
    (this.list.querySelector(".chip-remove") || this.button).focus();
  }

  // The files to send with a message, the composer emptied of them.
  take() {
    const files = this.files;
    this.files = [];
    this.say("");
    this.render();
    return files;
  }

  // Files of a message that did not go out: back in the composer, before any chosen since.
  restore(files) {
    if (files && files.length) this.add([...files, ...this.take()]);
  }

  say(text) {
    this.problem.textContent = text;
    this.problem.hidden = !text;
  }

  render() {
    this.list.replaceChildren(...this.files.map((file, index) => this.chip(file, index)));
    this.list.hidden = !this.files.length;
    const count = this.files.length;
    const label = count ? `Attach files (${plural(count, "file")} attached)` : "Attach files";
    this.button.setAttribute("aria-label", label);
  }

  chip(file, index) {
    const remove = el(
      "button",
      { type: "button", class: "chip-remove", "aria-label": `Remove ${file.name}` },
      "×",
    );
    remove.addEventListener("click", () => this.remove(index));
    return el(
      "li",
      { class: "file-chip" },
      el("span", { class: "chip-name", title: file.name }, file.name),
      el("span", { class: "chip-size" }, sizeText(file.size)),
      remove,
    );
  }

  // Off while a paused run waits for decisions, as the message box is.
  setDisabled(disabled) {
    this.button.disabled = disabled;
    for (const button of this.list.querySelectorAll("button")) button.disabled = disabled;
  }
}
