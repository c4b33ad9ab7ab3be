// Files a run made (the `file` event's FileRef, GET /threads/{id}'s `files`): pictures in an
// <img>, anything else a download link. A file's name is only ever text; its url is followed
// only as http(s), a relative one taken from the API the page talks to (the chat URL's base).

import { el, httpHref } from "./dom.js";

// What the server lets the page put in an <img> (an SVG there runs no script).
const IMAGE_TYPES = new Set([
  "image/png",
  "image/jpeg",
  "image/gif",
  "image/webp",
  "image/svg+xml",
]);

// "http://host/api" for the chat URL "http://host/api/chat".
export const apiBase = (chatUrl) => String(chatUrl || "").replace(/\/chat$/, "");

// The link to a file: an absolute http(s) url as it is, a relative one under the API's base;
// null for anything else (javascript:, data:, no url).
export function fileHref(raw, chatUrl) {
  if (typeof raw !== "string") return null;
  const base = apiBase(chatUrl);
  const fromRoot = raw.startsWith("/") && !raw.startsWith("//"); // the API's own path
  return httpHref(fromRoot ? base + raw : raw, `${base}/`);
}

// "1.2 KB" (as the server names sizes to the model).
export function sizeText(size) {
  if (typeof size !== "number" || !Number.isFinite(size) || size < 0) return "";
  if (size < 1024) return `${size} B`;
  if (size < 1024 * 1024) return `${(size / 1024).toFixed(1)} KB`;
  return `${(size / 1024 / 1024).toFixed(1)} MB`;
}

// A FileRef the page can show ({ id, name, mediaType, size, href, callId }), or null.
export function readFileRef(raw, chatUrl, callId = null) {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return null;
  const name = typeof raw.name === "string" && raw.name ? raw.name : "file";
  const id = typeof raw.id === "string" && raw.id ? raw.id : `${name}:${raw.url}`;
  const made = typeof raw.call_id === "string" ? raw.call_id : null;
  return {
    id,
    name,
    mediaType: typeof raw.media_type === "string" ? raw.media_type : "",
    size: typeof raw.size === "number" ? raw.size : null,
    href: fileHref(raw.url, chatUrl),
    expiresAt: typeof raw.expires_at === "number" ? raw.expires_at : null,
    callId: callId || made,
  };
}

const EXPIRED =
  "This link has expired: reopen the conversation (or reload the page) for a fresh one.";

// A link past its file's expiry is not followed (it would only answer 403): it says so.
function guard(link, file) {
  link.addEventListener("click", (event) => {
    if (file.expiresAt === null || Date.now() / 1000 < file.expiresAt) return;
    event.preventDefault();
    const said = link.parentElement && link.parentElement.querySelector(".file-expired");
    if (!said) link.after(el("span", { class: "file-expired", role: "status" }, EXPIRED));
  });
  return link;
}

const UNAVAILABLE = "Not available now: reopen the conversation for a fresh link.";

const SMALL = 48; // pixels: a picture smaller both ways is drawn larger

const isImage = (file) => Boolean(file.href) && IMAGE_TYPES.has(file.mediaType);

// The picture; if it cannot be loaded (a link expired), a sentence in its place. One of an
// icon's size is drawn larger, its pixels kept sharp.
function picture(file, className) {
  const img = el("img", { class: className, src: file.href, alt: file.name, decoding: "async" });
  img.addEventListener("load", () => {
    if (img.naturalWidth < SMALL && img.naturalHeight < SMALL) img.classList.add("small");
  });
  img.addEventListener("error", () => {
    const missing = el("span", { class: "file-missing" }, UNAVAILABLE);
    (img.closest("a") || img).replaceWith(missing); // its link would fail the same way
  });
  return img;
}

// A picture's link: it opens in a new tab that cannot reach back to the page.
function opens(file, ...children) {
  const attrs = { href: file.href, target: "_blank", rel: "noopener noreferrer" };
  return guard(el("a", attrs, ...children), file);
}

function caption(file) {
  const size = sizeText(file.size);
  return el(
    "figcaption",
    {},
    el("span", { class: "file-name" }, file.name),
    size ? el("span", { class: "file-size" }, size) : null,
  );
}

// A link that downloads the file (the server serves every non-image as an attachment).
function download(file) {
  const size = sizeText(file.size);
  const name = file.href
    ? guard(
        el(
          "a",
          { class: "file-name", href: file.href, download: file.name, rel: "noopener noreferrer" },
          file.name,
        ),
        file,
      )
    : el("span", { class: "file-name" }, file.name);
  return el(
    "li",
    { class: "file-link", dataset: { fileId: file.id } },
    name,
    size ? el("span", { class: "file-size" }, size) : null,
  );
}

// The files of one tool call, at the end of its card: pictures at the card's width, links.
export class CardFiles {
  constructor(card) {
    this.el = el("div", { class: "tool-files" });
    this.links = null;
    card.append(this.el);
  }

  add(file) {
    if (isImage(file)) {
      const figure = el("figure", { class: "file-figure", dataset: { fileId: file.id } });
      figure.append(opens(file, picture(file, "file-image")), caption(file));
      if (this.links) this.links.before(figure);
      else this.el.append(figure);
      return;
    }
    if (!this.links) {
      this.links = el("ul", { class: "file-links", "aria-label": "Files" });
      this.el.append(this.links);
    }
    this.links.append(download(file));
  }
}

// The files of a whole answer, under it: a row of thumbnails, then the other files' links.
export class Gallery {
  constructor() {
    this.el = el("section", { class: "files", "aria-label": "Files from this answer" });
    this.thumbs = el("div", { class: "gallery" });
    this.links = el("ul", { class: "file-links" });
    this.el.append(el("p", { class: "files-title" }, "Files"), this.thumbs, this.links);
    this.thumbs.hidden = true;
    this.links.hidden = true;
  }

  add(file) {
    if (isImage(file)) {
      const figure = el("figure", { class: "thumb", dataset: { fileId: file.id } });
      figure.append(opens(file, picture(file, "thumb-image")), caption(file));
      this.thumbs.append(figure);
      this.thumbs.hidden = false;
      return;
    }
    this.links.append(download(file));
    this.links.hidden = false;
  }
}
