// The caller's conversations kept on the server (GET /threads, GET / PATCH / DELETE
// /threads/{id}, next to the chat URL), and the open one's id in the page's address
// (#thread=<id>), so a reload opens it again.

import { HttpFailure, readError } from "./errors.js";
import { chatUrl } from "./settings.js";

const threadsUrl = (endpoint) => chatUrl(endpoint).replace(/\/chat$/, "/threads");

// The statuses that say this server keeps no conversations now (none at all, or its store
// cannot be reached): the page then chats without saving.
export const UNAVAILABLE = new Set([404, 405, 501, 502, 503, 504]);

export class ThreadsApi {
  // chosen(): the settings, with the token to send (the Chat's, a signed-in one refreshed
  // when due); forList(): the same without a refresh, for the list the page loads by itself
  // (as the settings' lists are), so that loading it never spends a refresh on its own.
  constructor(chosen, forList = chosen) {
    this.chosen = chosen;
    this.forList = forList;
  }

  // One call; the JSON answer, or an HttpFailure (a TypeError when nothing answered).
  async call(path, method = "GET", body = undefined, chosenNow = this.chosen) {
    const chosen = await chosenNow();
    const headers = { accept: "application/json" };
    if (chosen.token) headers.authorization = `Bearer ${chosen.token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(threadsUrl(chosen.endpoint) + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
    if (!response.ok) {
      throw new HttpFailure(response.status, response.statusText, await readError(response));
    }
    return response.json();
  }

  // One page of the caller's threads, newest first: { data, next_cursor }.
  list(cursor = null) {
    const query = new URLSearchParams({ limit: "20" });
    if (cursor) query.set("cursor", cursor);
    return this.call(`?${query}`, "GET", undefined, this.forList);
  }

  get(id) {
    return this.call(`/${encodeURIComponent(id)}`);
  }

  rename(id, title) {
    return this.call(`/${encodeURIComponent(id)}`, "PATCH", { title });
  }

  remove(id) {
    return this.call(`/${encodeURIComponent(id)}`, "DELETE");
  }
}

// The thread the address names (#thread=<id>), or null.
export function threadInUrl() {
  const found = new URLSearchParams(location.hash.slice(1)).get("thread");
  return found && found.length <= 128 ? found : null;
}

// The address names the open thread (none: no hash), without a new history entry.
export function showThreadInUrl(id) {
  if (threadInUrl() === id) return;
  const hash = id ? `#thread=${encodeURIComponent(id)}` : "";
  history.replaceState(null, "", location.pathname + location.search + hash);
}

const relative = new Intl.RelativeTimeFormat("en", { numeric: "auto" });
const dayFormat = new Intl.DateTimeFormat("en", { month: "short", day: "numeric" });

// "just now", "5 minutes ago", "yesterday", "3 days ago", then the date: when a thread last
// changed (epoch seconds).
export function whenText(seconds, now = Date.now()) {
  const ago = Math.max(0, now / 1000 - seconds);
  if (ago < 60) return "just now";
  if (ago < 3600) return relative.format(-Math.floor(ago / 60), "minute");
  if (ago < 86400) return relative.format(-Math.floor(ago / 3600), "hour");
  if (ago < 7 * 86400) return relative.format(-Math.floor(ago / 86400), "day");
  return dayFormat.format(new Date(seconds * 1000));
}
