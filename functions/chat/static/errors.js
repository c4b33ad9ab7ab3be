// A failed request said as a sentence: what went wrong, and what to change.

import { el } from "./dom.js";

export class HttpFailure extends Error {
  constructor(status, statusText, error) {
    super(error.message || statusText || `HTTP ${status}`);
    this.status = status;
    this.statusText = statusText;
    this.error = error;
  }
}

const STATUS_TITLES = {
  400: "Bad request",
  401: "Not authorized",
  403: "Forbidden",
  404: "Not found",
  405: "Not allowed",
  413: "Too large",
  415: "Unsupported content type",
  422: "Request rejected",
  429: "Too many requests",
  500: "Server error",
  502: "Bad gateway",
  503: "Service unavailable",
  504: "Gateway timeout",
};

// What to change for a 422, by the request field the refusal points at (its param).
const PARAM_HINTS = [
  [(param) => param.startsWith("approval_tools"), "Check “Ask before running” in Settings."],
  [
    (param) => param === "resume" || param === "approvals",
    "The paused run cannot go on; ask again in a new message.",
  ],
  [(param) => param.startsWith("tools"), "Change the tools in Settings."],
  [(param) => param === "model", "Check the model in Settings."],
  [(param) => param === "max_iterations", "Check max iterations in Settings."],
  [(param) => param === "token_budget", "Check the token budget in Settings."],
];

function hintFor(failure, canSignIn) {
  if (failure.status === 401 || failure.status === 403) {
    return canSignIn
      ? "Sign in (or check the bearer token in Settings)."
      : "Check the bearer token in Settings.";
  }
  if (failure.status === 413 && failure.error.param === "attachments") {
    return (
      "Attach fewer or smaller files, or start a new chat: a conversation's files may add " +
      "up to 4 MiB."
    );
  }
  if (failure.status === 413) return "Shorten the message or start a new chat.";
  if (failure.status === 422) {
    const param = String(failure.error.param || "");
    const found = PARAM_HINTS.find(([matches]) => matches(param));
    if (found) return found[1];
  }
  if (failure.status === 404) return "Check the endpoint URL in Settings.";
  return "";
}

export async function readError(response) {
  const text = await response.text().catch(() => "");
  try {
    const body = JSON.parse(text);
    if (body && body.error) {
      if (typeof body.error === "string") return { message: body.error };
      return body.error;
    }
    if (body && typeof body.message === "string") return { message: body.message };
  } catch {
    // not JSON: a proxy's page, say
  }
  return { message: text.trim().slice(0, 300) };
}

// Throws unless the response is an event stream: an HttpFailure for an error status.
export async function expectEventStream(response) {
  if (!response.ok) {
    throw new HttpFailure(response.status, response.statusText, await readError(response));
  }
  const type = response.headers.get("content-type") || "";
  if (!type.startsWith("text/event-stream") || !response.body) {
    throw new Error(`expected an event stream, got ${type || "no content type"}`);
  }
}

// The banner's content for a request to url that failed with err.
// canSignIn: the server offers sign-in (then a 401 asks for it first).
export function describeFailure(err, url, canSignIn = false) {
  if (err instanceof HttpFailure) {
    const title = STATUS_TITLES[err.status] || err.statusText || "Request failed";
    const hint = hintFor(err, canSignIn);
    let message = String(err.error.message || "").trim();
    if (hint && message && !/[.!?]$/.test(message)) message += ".";
    return [
      el("strong", {}, `${title} (HTTP ${err.status}): `),
      message,
      hint ? el("span", { class: "hint" }, ` ${hint}`) : null,
    ];
  }
  if (err instanceof TypeError) {
    return [
      el("strong", {}, "Could not reach the server: "),
      `${url} did not answer (${err.message}). `,
      el(
        "span",
        { class: "hint" },
        "Check the endpoint URL in Settings; a server on another origin must allow this " +
          "page's origin (CORS).",
      ),
    ];
  }
  return [el("strong", {}, "Error: "), String(err && err.message ? err.message : err)];
}
