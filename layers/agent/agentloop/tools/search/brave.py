"""Brave Search: ``GET {base}/res/v1/web/search?q=&count=`` with ``X-Subscription-Token``.

Results are in ``web.results[]`` as ``{"title", "url", "description", ...}``; descriptions
highlight the query with ``<strong>``. Errors are ``{"type": "ErrorResponse", "error":
{"status", "code", "detail", ...}}``: an invalid key is HTTP 422 with code
``SUBSCRIPTION_TOKEN_INVALID``, throttling is 429 ``RATE_LIMITED``. Rate limits come in
``X-RateLimit-Remaining`` / ``X-RateLimit-Reset`` as one comma-separated value per window
(per second, per month), reset in seconds.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import httpx

from agentloop.tools.base import ToolError
from agentloop.tools.search.base import ResultFields, SearchResult, results_from
from agentloop.tools.search.transport import (
    ALTERNATIVES,
    HttpReply,
    Transport,
    auth_failed,
    bad_body,
    bad_query,
    rate_limited,
    results_or_raise,
    retry_after_seconds,
    unexpected,
)

LABEL = "Brave"
KEY_ENV = "BRAVE_API_KEY"
URL_ENV = "AGENTLOOP_BRAVE_URL"
MAX_COUNT = 20  # Brave's documented maximum for count
SPARE = 3
"""Asked for beyond ``count``: Brave lists some pages twice, and a request costs the same."""

_AUTH_CODES = frozenset({"SUBSCRIPTION_TOKEN_INVALID"})
_FIELDS = ResultFields(title="title", url="url", snippet="description")


def parse_brave(payload: Any) -> list[SearchResult] | None:
    """Web results from a Brave answer; an answer without a ``web`` section has none."""
    if not isinstance(payload, dict):
        return None
    web = payload.get("web")
    if web is None:
        # Brave leaves out sections with nothing in them.
        return [] if payload.get("type") == "search" else None
    if not isinstance(web, dict):
        return None
    return results_from(web.get("results", []), _FIELDS)


def brave_error(payload: Any) -> tuple[str | None, object]:
    """``(code, detail)`` from Brave's ``ErrorResponse``."""
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        error = payload["error"]
        code = error.get("code")
        return (code if isinstance(code, str) else None), error.get("detail")
    return None, None


def brave_retry_after(headers: httpx.Headers) -> int | None:
    """When Brave will take requests again: ``Retry-After``, else the exhausted window's reset.

    With ``X-RateLimit-Remaining: 0, 1500`` and ``X-RateLimit-Reset: 1, 1419704`` the
    per-second window is the one used up, so the answer is 1 s; if every window still has
    room (a burst limit), the shortest reset is the best guess.
    """
    explicit = retry_after_seconds(headers)
    if explicit is not None:
        return explicit
    resets = _int_list(headers.get("x-ratelimit-reset"))
    if not resets:
        return None
    remaining = _int_list(headers.get("x-ratelimit-remaining"))
    exhausted = [
        reset
        for reset, left in zip(resets, remaining, strict=False)
        if left is not None and left <= 0 and reset is not None
    ]
    if exhausted:
        return max(exhausted)
    known = [reset for reset in resets if reset is not None]
    return min(known) if known else None


def _int_list(raw: str | None) -> list[int | None]:
    if not raw:
        return []
    values: list[int | None] = []
    for part in raw.split(","):
        part = part.strip()
        values.append(int(part) if part.isdigit() else None)
    return values


class BraveSearch:
    name = "brave"

    def __init__(self, *, api_key: str, base_url: str, transport: Transport) -> None:
        self._api_key = api_key
        self._url = f"{base_url}/res/v1/web/search"
        self._transport = transport

    def __repr__(self) -> str:  # never show the key
        return f"BraveSearch(url={self._url!r})"

    async def search(self, query: str, count: int) -> list[SearchResult]:
        reply = await self._transport.request(
            "GET",
            self._url,
            label=LABEL,
            configure=URL_ENV,
            params={"q": query, "count": min(count + SPARE, MAX_COUNT)},
            headers={"X-Subscription-Token": self._api_key, "Accept": "application/json"},
        )
        return results_or_raise(
            reply, parse_brave, self._error, partial(bad_body, LABEL, "Brave's web search JSON")
        )

    def _error(self, reply: HttpReply) -> ToolError:
        code, raw_detail = brave_error(reply.json())
        detail = self._transport.detail(raw_detail)
        status = reply.status
        if status in (401, 403) or code in _AUTH_CODES:
            return auth_failed(LABEL, status, KEY_ENV, code, detail)
        if status == 429:
            return rate_limited(
                LABEL,
                status,
                brave_retry_after(reply.headers),
                f"the plan's per-second or monthly quota is used up; use a larger Brave plan "
                f"or configure another provider ({ALTERNATIVES}).",
                detail,
            )
        if status in (400, 422):
            return bad_query(LABEL, status, "at most 400 characters and 50 words", detail)
        return unexpected(LABEL, reply, detail)
