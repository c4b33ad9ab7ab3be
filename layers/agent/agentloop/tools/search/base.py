"""What every provider returns, and the clean-up that makes providers interchangeable.

Providers disagree on markup (Brave highlights with ``<strong>``, DuckDuckGo with ``<b>``),
entities and whitespace; the model should see the same plain ``{title, url, snippet}`` from
all of them, one result per page, never more than it asked for.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from agentloop.net.urls import usable_url


@dataclass(frozen=True)
class SearchResult:
    title: str
    url: str
    snippet: str

    def as_dict(self) -> dict[str, str]:
        return {"title": self.title, "url": self.url, "snippet": self.snippet}


class SearchProvider(Protocol):
    """One search backend. Failures the model should read are raised as ``ToolError``."""

    @property
    def name(self) -> str: ...

    async def search(self, query: str, count: int) -> list[SearchResult]: ...


# Only real HTML element names are stripped, so plain-text snippets that mention "Vec<T>" or
# "<stdio.h>" keep them; block elements become a space so that the words on either side of
# them do not run together.
_INLINE_TAG_NAMES = (
    "a abbr b bdi bdo big cite code del dfn em font i img ins kbd mark nobr q s samp small "
    "span strike strong sub sup time tt u var wbr"
)
_BLOCK_TAG_NAMES = (
    "blockquote br dd div dl dt h1 h2 h3 h4 h5 h6 hr li ol p pre table tbody td th thead tr ul"
)
_INLINE_TAGS = frozenset(_INLINE_TAG_NAMES.split())
_BLOCK_TAGS = frozenset(_BLOCK_TAG_NAMES.split())
_TAG_RE = re.compile(r"<!--.*?-->|</?([A-Za-z][A-Za-z0-9]*)(?:\s[^<>]*)?/?>", re.DOTALL)


def _replace_tag(match: re.Match[str]) -> str:
    name = match.group(1)
    if name is None:  # a comment
        return " "
    name = name.lower()
    if name in _INLINE_TAGS:
        return ""
    if name in _BLOCK_TAGS:
        return " "
    return match.group(0)


def collapse_whitespace(text: str) -> str:
    """One space between words (non-breaking spaces and newlines included), none at the ends."""
    return " ".join(text.split())


def clean_text(text: str) -> str:
    """Plain text from a provider's snippet: HTML tags stripped, entities unescaped."""
    return collapse_whitespace(html.unescape(_TAG_RE.sub(_replace_tag, text)))


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, at a word boundary when one is near."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"


def make_result(title: object, url: object, snippet: object) -> SearchResult | None:
    """A cleaned result from a provider's raw fields; None when the URL is unusable."""
    good_url = usable_url(url)
    if good_url is None:
        return None
    clean_title = clean_text(title) if isinstance(title, str) else ""
    clean_snippet = clean_text(snippet) if isinstance(snippet, str) else ""
    return SearchResult(title=clean_title or good_url, url=good_url, snippet=clean_snippet)


@dataclass(frozen=True)
class ResultFields:
    """Which keys of a provider's result object hold the title, the URL and the snippet."""

    title: str = "title"
    url: str = "url"
    snippet: str = "content"


def results_from(items: object, fields: ResultFields) -> list[SearchResult] | None:
    """Cleaned results from a provider's list of result objects; None when it is not a list.

    Items that are not objects, or whose URL is unusable, are skipped: one odd result should
    not cost the model the others.
    """
    if not isinstance(items, list):
        return None
    found: list[SearchResult] = []
    for item in items:
        if isinstance(item, dict):
            result = make_result(
                item.get(fields.title), item.get(fields.url), item.get(fields.snippet)
            )
            if result is not None:
                found.append(result)
    return found


def parse_results(payload: Any, fields: ResultFields) -> list[SearchResult] | None:
    """Results from an answer shaped ``{"results": [...], ...}`` (Tavily, SearXNG).

    None when the answer is not shaped like that, so the provider can say what went wrong.
    """
    if not isinstance(payload, dict):
        return None
    return results_from(payload.get("results"), fields)


def url_key(url: str) -> tuple[str, str, str]:
    """What makes two URLs the same page here: host, path (no trailing slash) and query.

    The scheme and the fragment are ignored: ``http://x/a`` and ``https://x/a#top`` are the
    same page to a reader.
    """
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.port is not None and parts.port not in (80, 443):
        host = f"{host}:{parts.port}"
    return host, parts.path.rstrip("/") or "/", parts.query


def finalise(results: list[SearchResult], count: int, snippet_max_chars: int) -> list[SearchResult]:
    """At most ``count`` results, one per page (first wins), snippets shortened."""
    seen: set[tuple[str, str, str]] = set()
    kept: list[SearchResult] = []
    for result in results:
        key = url_key(result.url)
        if key in seen:
            continue
        seen.add(key)
        kept.append(
            SearchResult(
                title=shorten(result.title, 300),
                url=result.url,
                snippet=shorten(result.snippet, snippet_max_chars),
            )
        )
        if len(kept) == count:
            break
    return kept
