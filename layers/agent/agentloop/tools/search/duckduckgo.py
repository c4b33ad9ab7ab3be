"""DuckDuckGo's HTML endpoint: ``POST {base}/html/`` with the form field ``q``; no key.

Best effort only. It is a page for people, not an API: DuckDuckGo throttles addresses that
search often, cloud addresses (a Lambda's) most of all, by answering HTTP 202 with a CAPTCHA
("anomaly") page instead of results. Each organic result is a ``div.result`` holding an
``a.result__a`` (title; its ``href`` is the page itself, or DuckDuckGo's ``/l/?uddg=`` redirect
carrying the page's URL) and an ``a.result__snippet``; ads are ``div.result--ad`` and link
through ``/y.js``, and are skipped.
"""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import parse_qs, urlsplit

from agentloop.net.urls import usable_url
from agentloop.tools.base import ToolError
from agentloop.tools.search.base import SearchResult, collapse_whitespace
from agentloop.tools.search.transport import (
    ALTERNATIVES,
    HttpReply,
    Transport,
    rate_limited,
    retry_after_seconds,
    unexpected,
)

LABEL = "DuckDuckGo"
URL_ENV = "AGENTLOOP_DUCKDUCKGO_URL"

_ADVICE = f"configure {ALTERNATIVES} for reliable search."
_BREAKS = frozenset({"br", "p", "div", "li", "td", "tr"})


def is_anomaly_page(text: str) -> bool:
    """True for DuckDuckGo's bot-check page, which can come with HTTP 200 as well as 202."""
    return "anomaly-modal" in text or "anomaly.js" in text


def result_url(href: str | None) -> str | None:
    """The page a result links to: the ``uddg`` target of a redirect link, else ``href``.

    None for ads (``/y.js``) and for anything else on DuckDuckGo itself.
    """
    if not href:
        return None
    href = href.strip()
    if href.startswith("//"):
        href = "https:" + href
    parts = urlsplit(href)
    host = (parts.hostname or "").lower()
    if host and host != "duckduckgo.com" and not host.endswith(".duckduckgo.com"):
        return href
    if parts.path.startswith("/l/"):
        target = parse_qs(parts.query).get("uddg")
        return target[0] if target else None
    return None


class _ResultsParser(HTMLParser):
    """Collects ``(title, href, snippet)`` for each organic result, in page order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[list[str]] = []  # [title, href, snippet]
        self._in_ad = False
        self._capture: str | None = None  # "title" or "snippet"
        self._capture_tag = ""
        self._depth = 0
        self._text: list[str] = []
        self._href = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._capture is not None:
            if tag == self._capture_tag:
                self._depth += 1
            if tag in _BREAKS:
                self._text.append(" ")
            return
        values = dict(attrs)
        classes = set((values.get("class") or "").split())
        if "result" in classes:
            self._in_ad = "result--ad" in classes
        elif "result__a" in classes and not self._in_ad:
            self._start("title", tag)
            self._href = values.get("href") or ""
        elif "result__snippet" in classes and not self._in_ad and self.found:
            self._start("snippet", tag)

    def handle_endtag(self, tag: str) -> None:
        if self._capture is None or tag != self._capture_tag:
            return
        self._depth -= 1
        if self._depth > 0:
            return
        text = collapse_whitespace("".join(self._text))
        if self._capture == "title":
            self.found.append([text, self._href, ""])
        elif not self.found[-1][2]:
            self.found[-1][2] = text
        self._capture = None

    def handle_data(self, data: str) -> None:
        if self._capture is not None:
            self._text.append(data)

    def _start(self, what: str, tag: str) -> None:
        self._capture = what
        self._capture_tag = tag
        self._depth = 1
        self._text = []


def parse_duckduckgo(page: str) -> list[SearchResult]:
    """Organic results from a DuckDuckGo HTML results page (ads and unusable links left out)."""
    parser = _ResultsParser()
    parser.feed(page)
    parser.close()
    found: list[SearchResult] = []
    for title, href, snippet in parser.found:
        # The parser already turned markup and entities into text; only the URL needs checking.
        url = usable_url(result_url(href))
        if url is not None:
            found.append(SearchResult(title=title or url, url=url, snippet=snippet))
    return found


class DuckDuckGoSearch:
    name = "duckduckgo"

    def __init__(self, *, base_url: str, user_agent: str, transport: Transport) -> None:
        self._url = f"{base_url}/html/"
        self._user_agent = user_agent
        self._transport = transport

    def __repr__(self) -> str:
        return f"DuckDuckGoSearch(url={self._url!r})"

    async def search(self, query: str, count: int) -> list[SearchResult]:
        reply = await self._transport.request(
            "POST",
            self._url,
            label=LABEL,
            configure=URL_ENV,
            follow_redirects=True,
            data={"q": query},
            headers={"User-Agent": self._user_agent, "Accept": "text/html"},
        )
        if reply.status == 200 and not is_anomaly_page(reply.text):
            return parse_duckduckgo(reply.text)
        raise self._error(reply)

    def _error(self, reply: HttpReply) -> ToolError:
        status = reply.status
        if status in (200, 202, 403, 429):
            # 202 (or 200) with the anomaly page is DuckDuckGo's way of saying "too many".
            return rate_limited(
                LABEL,
                status,
                retry_after_seconds(reply.headers),
                _ADVICE,
                subject="this IP",
            )
        return unexpected(LABEL, reply)
