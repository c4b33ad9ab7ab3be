"""Tavily: ``POST {base}/search`` with a JSON body, the key as ``Authorization: Bearer``.

The answer is ``{"query", "results": [{"title", "url", "content", "score", ...}], ...}``;
errors carry ``{"detail": {"error": "..."}}``. Besides 401 and 429, Tavily uses 432 (the
plan's usage limit) and 433 (the pay-as-you-go limit), which only the dashboard can lift.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from agentloop.tools.base import ToolError
from agentloop.tools.search.base import ResultFields, SearchResult, parse_results
from agentloop.tools.search.transport import (
    ALTERNATIVES,
    HttpReply,
    Transport,
    auth_failed,
    bad_body,
    bad_query,
    rate_limited,
    refused,
    results_or_raise,
    retry_after_seconds,
    unexpected,
)

LABEL = "Tavily"
KEY_ENV = "TAVILY_API_KEY"
URL_ENV = "AGENTLOOP_TAVILY_URL"
MAX_COUNT = 20  # Tavily's documented maximum for max_results
SPARE = 2
"""Asked for beyond ``count``, so de-duplication still leaves enough; a basic search costs
one credit whatever max_results is."""
_FIELDS = ResultFields(title="title", url="url", snippet="content")


def parse_tavily(payload: Any) -> list[SearchResult] | None:
    """Results from a Tavily answer; None when it is not shaped like one."""
    return parse_results(payload, _FIELDS)


def tavily_error_text(payload: Any) -> object:
    """The message in Tavily's ``{"detail": {"error": ...}}`` (or a plain ``detail``)."""
    if not isinstance(payload, dict):
        return None
    detail = payload.get("detail")
    if isinstance(detail, dict):
        return detail.get("error")
    return detail


class TavilySearch:
    name = "tavily"

    def __init__(self, *, api_key: str, base_url: str, transport: Transport) -> None:
        self._api_key = api_key
        self._url = f"{base_url}/search"
        self._transport = transport

    def __repr__(self) -> str:  # never show the key
        return f"TavilySearch(url={self._url!r})"

    async def search(self, query: str, count: int) -> list[SearchResult]:
        body = {
            "query": query,
            "max_results": min(count + SPARE, MAX_COUNT),
            "search_depth": "basic",
            "topic": "general",
            "include_answer": False,
            "include_raw_content": False,
            "include_images": False,
        }
        reply = await self._transport.request(
            "POST",
            self._url,
            label=LABEL,
            configure=URL_ENV,
            json=body,
            headers={"Authorization": f"Bearer {self._api_key}", "Accept": "application/json"},
        )
        return results_or_raise(
            reply,
            parse_tavily,
            self._error,
            partial(bad_body, LABEL, "Tavily's search results JSON"),
        )

    def _error(self, reply: HttpReply) -> ToolError:
        detail = self._transport.detail(tavily_error_text(reply.json()))
        status = reply.status
        if status == 401:
            return auth_failed(LABEL, status, KEY_ENV, detail=detail)
        if status == 403:
            return refused(LABEL, status, f"check {KEY_ENV} and what its plan allows.", detail)
        if status == 429:
            return rate_limited(
                LABEL,
                status,
                retry_after_seconds(reply.headers),
                f"lower the request rate, use a plan with higher limits, or configure another "
                f"provider ({ALTERNATIVES}).",
                detail,
            )
        if status == 432:
            return refused(
                LABEL,
                status,
                "the plan's usage limit is used up: upgrade the Tavily plan or configure "
                "another provider.",
                detail,
            )
        if status == 433:
            return refused(
                LABEL,
                status,
                "the pay-as-you-go limit is reached: raise it on the Tavily dashboard or "
                "configure another provider.",
                detail,
            )
        if status == 400:
            return bad_query(LABEL, status, "plain words, at most 400 characters", detail)
        return unexpected(LABEL, reply, detail)
