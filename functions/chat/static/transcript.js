// A run's transcript: text segments, tool cards and notes, in the order they happened.

import { el } from "./dom.js";

export class Transcript {
  constructor(container) {
    this.el = container;
    this.segment = null;
    // Where the run's current answer began (a turn_start or tool_call_result): the text a
    // text_reset drops is what was streamed since then.
    this.mark = { segment: null, length: 0, added: [] };
  }

  // reply renders the segment on its next frame (reply.scheduleRender).
  appendText(text, reply) {
    if (!this.segment) {
      this.segment = { text: "", el: el("div", { class: "answer md" }) };
      this.el.append(this.segment.el);
      this.mark.added.push(this.segment);
    }
    this.segment.text += text;
    reply.scheduleRender(this.segment);
  }

  markAnswerStart() {
    const segment = this.segment;
    this.mark = { segment, length: segment ? segment.text.length : 0, added: [] };
  }

  dropAnswer(reply) {
    for (const segment of this.mark.added) {
      segment.el.remove();
      reply.pending.delete(segment);
    }
    const kept = this.mark.segment;
    if (kept) {
      kept.text = kept.text.slice(0, this.mark.length);
      reply.scheduleRender(kept);
    }
    this.segment = kept;
    this.mark = { segment: kept, length: kept ? kept.text.length : 0, added: [] };
  }

  append(node) {
    this.segment = null;
    this.el.append(node);
  }

  text() {
    return [...this.el.querySelectorAll(":scope > .answer")].map((n) => n.textContent).join("");
  }
}
