// A minimal chat page on @ai-sdk/react's useChat, as a web UI author would write it, so the
// end-to-end test drives agentloop's POST /api/chat through the real client code.
//
// The transport is the DEFAULT one (DefaultChatTransport, default path /api/chat, same origin);
// only the bearer header and the extra body fields (agent options) are given to it. Both come
// from the URL fragment, a JSON object {token, body}, so the page knows nothing about the
// server's option names and the fragment never reaches the server.
import { useState } from "react";
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, getToolName, isDataUIPart, isToolUIPart } from "ai";

function readConfig() {
  try {
    const raw = decodeURIComponent(window.location.hash.slice(1));
    const config = raw ? JSON.parse(raw) : {};
    return typeof config === "object" && config !== null ? config : {};
  } catch {
    return {};
  }
}

export const config = readConfig();
export const authHeaders = config.token ? { authorization: `Bearer ${config.token}` } : {};
const transport = new DefaultChatTransport({ headers: authHeaders, body: config.body ?? {} });

function json(value) {
  return value === undefined ? "" : JSON.stringify(value, null, 2);
}

function ToolPart({ part }) {
  const name = getToolName(part);
  return (
    <section className="tool" data-tool={name} data-state={part.state} data-call-id={part.toolCallId}>
      <div className="tool-head">
        <span className="tool-name">{name}</span> · <span className="tool-state">{part.state}</span>
      </div>
      <pre className="tool-input">{json(part.input)}</pre>
      {part.state === "output-available" && <pre className="tool-output">{json(part.output)}</pre>}
      {part.state === "output-error" && <pre className="tool-error">{part.errorText}</pre>}
    </section>
  );
}

function Part({ part }) {
  if (part.type === "text") {
    return (
      <div className="text" data-state={part.state ?? ""}>
        {part.text}
      </div>
    );
  }
  if (part.type === "step-start") return null;
  if (isToolUIPart(part)) return <ToolPart part={part} />;
  if (isDataUIPart(part)) {
    // Sub-agent parts and any other data-* the server sends, shown as they arrive.
    return (
      <section className="data" data-type={part.type} data-id={part.id ?? ""}>
        <div className="data-type">{part.type}</div>
        <pre className="data-json">{json(part.data)}</pre>
      </section>
    );
  }
  return (
    <section className="part" data-type={part.type}>
      <pre>{json(part)}</pre>
    </section>
  );
}

export function App() {
  return <ChatView title="useChat" options={{ transport }} />;
}

// The chat as useChat shows it; `options` are useChat's (the thread page adds id, messages,
// resume and its own transport), `title` the page's heading.
export function ChatView({ title, options }) {
  const [finishes, setFinishes] = useState([]);
  const { messages, sendMessage, status, stop, error } = useChat({
    ...options,
    onFinish: ({ isAbort, isError, isDisconnect, finishReason }) =>
      setFinishes((all) => [...all, { isAbort, isError, isDisconnect, finishReason }]),
  });
  const [input, setInput] = useState("");
  const last = finishes.at(-1);
  const busy = status === "submitted" || status === "streaming";
  window.useChatPage = { messages, status }; // for the test's diagnostics

  function submit(event) {
    event.preventDefault();
    const text = input.trim();
    if (!text || busy) return;
    sendMessage({ text });
    setInput("");
  }

  return (
    <main>
      <h1>{title}</h1>
      <p className="status" role="status" data-status={status}>
        {status}
      </p>
      {/* Every end of a response useChat reports, so a test knows the stream is over. */}
      <p className="finished" data-count={finishes.length} data-last={last ? json(last) : ""}>
        {last ? `finished ${finishes.length}: ${last.finishReason ?? "no finish reason"}` : ""}
        {last?.isAbort ? " (stopped)" : ""}
      </p>
      <div className="messages">
        {messages.map((message) => (
          <article key={message.id} className="message" data-role={message.role}>
            <div className="role">{message.role}</div>
            {message.parts.map((part, index) => (
              <Part key={index} part={part} />
            ))}
            {message.metadata !== undefined && (
              <details className="metadata">
                <summary>metadata</summary>
                <pre>{json(message.metadata)}</pre>
              </details>
            )}
          </article>
        ))}
      </div>
      {error && <p role="alert">{error.message}</p>}
      <form onSubmit={submit}>
        <input
          aria-label="Message"
          value={input}
          onChange={(event) => setInput(event.target.value)}
          placeholder="Ask something"
        />
        <button type="submit" disabled={busy || !input.trim()}>
          Send
        </button>
        <button type="button" onClick={() => stop()} disabled={!busy}>
          Stop
        </button>
      </form>
    </main>
  );
}
