"""SearXNG: ``GET {base}/search?q=&format=json`` on an instance you run (no key).

The answer is ``{"query", "number_of_results", "results": [{"title", "url", "content",
"engine", ...}], "unresponsive_engines": [[engine, reason], ...], ...}``. An instance answers
403 when the JSON format is not enabled in its ``settings.yml`` (``search.formats``), and 429
when its bot limiter blocks the client.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

from agentloop.tools.base import ToolError
from agentloop.tools.search.base import ResultFields, SearchResult, parse_results
from agentloop.tools.search.transport import (
    HttpReply,
    Transport,
    display_url,
    rate_limited,
    refused,
    results_or_raise,
    retry_after_seconds,
    unexpected,
)

LABEL = "SearXNG"
URL_ENV = "AGENTLOOP_SEARXNG_URL"
_FIELDS = ResultFields(title="title", url="url", snippet="content")


def parse_searxng(payload: Any) -> list[SearchResult] | None:
    """Results from a SearXNG JSON answer; None when it is not shaped like one."""
    return parse_results(payload, _FIELDS)


def unresponsive_engines(payload: Any) -> list[str]:
    """``"engine (reason)"`` for each engine the instance could not get an answer from."""
    if not isinstance(payload, dict) or not isinstance(payload.get("unresponsive_engines"), list):
        return []
    described: list[str] = []
    for entry in payload["unresponsive_engines"]:
        if isinstance(entry, list | tuple) and entry and all(isinstance(p, str) for p in entry):
            engine, *reason = entry
            described.append(f"{engine} ({reason[0]})" if reason else engine)
    return described


class SearxngSearch:
    name = "searxng"

    def __init__(self, *, base_url: str, transport: Transport) -> None:
        # Credentials in the URL become basic auth, kept out of the URL that httpx logs.
        parts = urlsplit(base_url)
        self._auth: httpx.BasicAuth | None = None
        if parts.username is not None:
            self._auth = httpx.BasicAuth(unquote(parts.username), unquote(parts.password or ""))
        base = display_url(base_url)
        # Tolerate the search endpoint itself being configured instead of the base URL.
        self._url = base if base.endswith("/search") else f"{base}/search"
        self._transport = transport

    def __repr__(self) -> str:
        return f"SearxngSearch(url={self._url!r})"

    async def search(self, query: str, count: int) -> list[SearchResult]:
        reply = await self._transport.request(
            "GET",
            self._url,
            label=LABEL,
            configure=URL_ENV,
            follow_redirects=True,
            params={"q": query, "format": "json"},
            headers={"Accept": "application/json"},
            auth=self._auth,
        )
        found = results_or_raise(reply, parse_searxng, self._error, self._not_searxng)
        silent = [] if found else unresponsive_engines(reply.json())
        if silent:
            raise ToolError(
                "SearXNG found nothing because its engines did not answer: "
                + self._transport.redact(", ".join(silent[:5])),
                hint="try once more later, or answer without web search",
            )
        return found

    def _not_searxng(self) -> ToolError:
        """A 200 whose body is not SearXNG's JSON: most likely the wrong URL (a login page)."""
        return ToolError(
            f"{self._url} did not answer with SearXNG's JSON: check that "
            f"{URL_ENV} is the instance's base URL",
            hint="answer without web search and say that it is misconfigured",
        )

    def _error(self, reply: HttpReply) -> ToolError:
        status = reply.status
        if status == 403:
            return refused(
                LABEL,
                status,
                "the instance does not serve format=json; add json to search.formats in its "
                "settings.yml.",
            )
        if status == 401:
            return refused(
                LABEL,
                status,
                f"the instance wants credentials; put them in {URL_ENV} "
                "(https://user:password@host) or allow this client.",
            )
        if status == 429:
            return rate_limited(
                LABEL,
                status,
                retry_after_seconds(reply.headers),
                "the instance's bot limiter blocks this client; exempt it in the limiter "
                "settings (limiter.toml pass_ip) or turn server.limiter off for a private "
                "instance.",
            )
        if status == 404:
            return refused(LABEL, status, f"no search endpoint there: check {URL_ENV}.")
        return unexpected(LABEL, reply)
