// done.sources ([{url, title}], in order of first use) as a list of links under the answer.
// Titles come from web pages: they are only ever text.

import { clip, el, httpHref } from "./dom.js";

function sourceItem(source) {
  // http(s) only: anything else (javascript:, data:, a relative path) stays text.
  const href = httpHref(source.url);
  const title = typeof source.title === "string" ? source.title.replace(/\s+/g, " ").trim() : "";
  const label = clip(title || source.url, 200);
  const item = el("li", {});
  if (href) {
    item.append(el("a", { href, target: "_blank", rel: "noopener noreferrer" }, label));
  } else {
    item.append(el("span", { class: "source-text" }, label));
  }
  const host = href ? new URL(href).host : "";
  if (host && label !== source.url) item.append(el("span", { class: "source-host" }, host));
  return item;
}

// The list, or null when no source has a URL.
export function sourceList(sources) {
  const items = sources
    .filter((source) => source && typeof source.url === "string" && source.url)
    .map(sourceItem);
  if (!items.length) return null;
  return el(
    "nav",
    { class: "sources", "aria-label": "Sources" },
    el("p", { class: "sources-title" }, "Sources"),
    el("ol", {}, ...items),
  );
}
