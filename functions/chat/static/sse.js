// Server-sent events read from a fetch() body (EventSource can neither POST nor send a token).

// Feed it decoded text as it arrives; it calls onEvent(type, data, id) per complete event, id
// being the last `id:` seen (as SSE keeps it: it carries over to later events; "" if none).
// Comment lines (": ping") are ignored; an incomplete event at the end is dropped.
export class SSEParser {
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.buffer = "";
    this.type = "";
    this.data = [];
    this.id = "";
  }

  push(chunk) {
    this.buffer += chunk;
    let start = 0;
    for (;;) {
      let end = start;
      while (end < this.buffer.length && this.buffer[end] !== "\n" && this.buffer[end] !== "\r") {
        end += 1;
      }
      if (end >= this.buffer.length) break;
      if (this.buffer[end] === "\r" && end === this.buffer.length - 1) break; // \r\n split?
      const line = this.buffer.slice(start, end);
      start = end + (this.buffer[end] === "\r" && this.buffer[end + 1] === "\n" ? 2 : 1);
      this.line(line);
    }
    this.buffer = this.buffer.slice(start);
  }

  line(line) {
    if (line === "") {
      if (this.data.length) this.onEvent(this.type || "message", this.data.join("\n"), this.id);
      this.type = "";
      this.data = [];
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.type = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id" && !value.includes("\0")) this.id = value;
  }
}

// Reads an event stream to its end, calling onEvent(type, data, id) with each event's data parsed
// as JSON (the data's own "type" wins over the event name); data that is not a JSON object
// (not JSON, null, a number, a list) is skipped: every event the page handles is an object.
export async function readJsonEvents(body, onEvent) {
  const parser = new SSEParser((eventType, raw, id) => {
    let data;
    try {
      data = JSON.parse(raw);
    } catch {
      return;
    }
    if (!data || typeof data !== "object" || Array.isArray(data)) return;
    onEvent(data.type || eventType, data, id);
  });
  const reader = body.getReader();
  const decoder = new TextDecoder();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    parser.push(decoder.decode(value, { stream: true }));
  }
  parser.push(decoder.decode());
}
