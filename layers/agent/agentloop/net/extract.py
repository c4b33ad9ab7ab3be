"""A web page's main text as markdown: readability-lxml finds the article, markdownify writes it.

Chosen over trafilatura by measurement on ``tests/fixtures/pages`` (see ``docs/tools.md``):
the same sentence recall, better headings, code blocks and titles, and a quarter of the
installed size. After readability has chosen the article, a small prune pass drops the
blocks inside it whose class or id names them as adverts, promos, share bars, cookie banners
or forum signatures, which readability keeps when they sit within the text. (Pruning
*before* readability changes which block it picks: on a forum thread it then kept one post.)

Everything here is CPU-bound and synchronous: callers run it off the event loop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import lxml.etree  # type: ignore[import-untyped]
import lxml.html  # type: ignore[import-untyped]
from markdownify import markdownify
from readability import Document  # type: ignore[import-untyped]
from readability.htmls import shorten_title  # type: ignore[import-untyped]
from readability.readability import Unparseable  # type: ignore[import-untyped]

__all__ = ["ExtractedPage", "extract_main"]

# Parts of class/id names (split on "-", "_" and spaces) that mark a block as boilerplate
# wherever it sits. Whole parts only: "ad" matches "ad-slot" but not "header" or "load".
_BOILERPLATE_PARTS = frozenset(
    {
        "ad",
        "ads",
        "adunit",
        "adslot",
        "adsbygoogle",
        "advert",
        "advertisement",
        "sponsor",
        "sponsored",
        "promo",
        "newsletter",
        "optin",
        "share",
        "sharing",
        "social",
        "cookie",
        "cookies",
        "consent",
        "paywall",
        "signature",
        "postprofile",
        "breadcrumb",
        "breadcrumbs",
    }
)
_NEVER_PRUNED = frozenset({"html", "body", "main", "article"})
# A block holding more than this share of the page's text is the content, whatever its name.
_MAX_PRUNED_SHARE = 0.4
_SPLIT = re.compile(r"[-_\s]+")
_BLANK_LINES = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_TRAILING_SPACE = re.compile(r"[ \t]+\n")
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>", re.IGNORECASE)

_MARKDOWN_OPTIONS: dict[str, Any] = {
    "heading_style": "ATX",
    "bullets": "-",
    "strip": ["a", "img"],  # link text stays; URLs and images would only cost tokens
    "escape_underscores": False,  # the reader is a model, not a renderer: keep snake_case
    "escape_asterisks": False,
    "bs4_options": "lxml",
}


DEFAULT_MAX_HTML_CHARS = 250_000
# Elements that never hold article text but can be most of a page's bytes.
_NOT_CONTENT = ("script", "style", "template", "svg", "iframe", "object", "embed", "canvas")


@dataclass(frozen=True)
class ExtractedPage:
    title: str | None
    markdown: str
    input_truncated: bool = False  # the page's markup was cut to max_html_chars first


def extract_main(
    html: str, url: str | None = None, *, max_html_chars: int = DEFAULT_MAX_HTML_CHARS
) -> ExtractedPage:
    """The page's title and main text as markdown (empty when the page has no text).

    Readability's scoring grows faster than the page (a 500 KB page of many sibling posts
    takes seconds), so the markup, less scripts, styles and embeds, is first cut to
    ``max_html_chars``: far more text than a tool result carries, at a bounded cost.
    """
    if not html.strip():
        return ExtractedPage(title=None, markdown="")
    tree = _parse(html)
    if tree is None:
        return ExtractedPage(title=None, markdown="")
    title = _title(tree)
    tree, cut = _bounded(tree, max_html_chars)
    try:
        body = Document(tree, url=url).summary(html_partial=True)
    except Unparseable:
        body = ""
    markdown = _to_markdown(_without_boilerplate(body))
    if not markdown:
        # readability found no article (a page of short blocks): keep the cleaned body instead.
        body_el = tree.find("body")
        if body_el is not None:
            markdown = _to_markdown(lxml.html.tostring(body_el, encoding="unicode"))
    return ExtractedPage(title=title, markdown=markdown, input_truncated=cut)


def _bounded(tree: Any, limit: int) -> tuple[Any, bool]:
    """The tree without non-content elements, cut to ``limit`` characters of markup."""
    for element in list(tree.iter(*_NOT_CONTENT)):
        if element.getparent() is not None:
            element.drop_tree()  # keeps the tail text that follows the element
    markup = str(lxml.html.tostring(tree, encoding="unicode"))
    if len(markup) <= limit:
        return tree, False
    at = markup.rfind("<", 0, limit)  # do not cut inside a tag
    shorter = _parse(markup[: at if at > 0 else limit])
    return (shorter, True) if shorter is not None else (tree, False)


def _parse(html: str) -> Any:
    """An lxml tree, or None for a document lxml cannot make anything of."""
    html = _XML_DECLARATION.sub("", html, count=1)  # lxml refuses str input that declares one
    parser = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True)
    try:
        return lxml.html.document_fromstring(html.encode("utf-8", "replace"), parser=parser)
    except (ValueError, lxml.etree.ParserError):
        return None


def _without_boilerplate(html: str) -> str:
    """The article HTML readability chose, less the blocks named as boilerplate."""
    if not html.strip():
        return html
    try:
        fragment = lxml.html.fromstring(html)
    except (ValueError, lxml.etree.ParserError):
        return html
    _prune_boilerplate(fragment)
    return str(lxml.html.tostring(fragment, encoding="unicode"))


def _prune_boilerplate(tree: Any) -> None:
    total = len(tree.text_content())
    doomed = []
    for element in tree.iter():
        if not isinstance(element.tag, str) or element.tag in _NEVER_PRUNED:
            continue
        names = f"{element.get('class', '')} {element.get('id', '')}".lower()
        if not _BOILERPLATE_PARTS.intersection(_SPLIT.split(names)):
            continue
        if total and len(element.text_content()) > _MAX_PRUNED_SHARE * total:
            continue
        doomed.append(element)
    for element in doomed:
        if element.getparent() is not None:
            element.drop_tree()


def _title(tree: Any) -> str | None:
    """The article's title: the <title> trimmed of the site name, else og:title, else <h1>."""
    title = _clean(shorten_title(tree))
    if title:
        return title
    for meta in tree.iterfind(".//meta[@property='og:title']"):
        if _clean(meta.get("content")):
            return _clean(meta.get("content"))
    h1 = tree.find(".//h1")
    return _clean(h1.text_content()) if h1 is not None else None


def _clean(text: str | None) -> str | None:
    return " ".join(text.split()) or None if text else None


def _to_markdown(html: str) -> str:
    if not html.strip():
        return ""
    text = markdownify(html, **_MARKDOWN_OPTIONS)
    text = _TRAILING_SPACE.sub("\n", text)
    return _BLANK_LINES.sub("\n\n", text).strip()
