"""HTTP for the search providers: one client per event loop, bounded time and size.

A client's connection pool belongs to the loop it was made on (one loop for a Lambda
container's life, one per ``asyncio.run`` in tests), so clients are cached per loop like the
SDK clients in ``agentloop.llm.registry``. Timeouts and network failures become
:class:`ToolError`s that name the provider and what to check, so the model (and whoever
reads the transcript) learns what to configure instead of reading a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from agentloop.tools.base import ToolError
from agentloop.tools.search.base import SearchResult

logger = logging.getLogger("agentloop.tools.search")

CONNECT_TIMEOUT_S = 5.0
MAX_BODY_BYTES = 2_000_000
"""A results page is tens of kilobytes; anything far bigger is not a search answer."""

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)


def shared_client() -> httpx.AsyncClient:
    """This event loop's client, created on first use."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.is_closed:
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(10.0, connect=CONNECT_TIMEOUT_S),
            limits=httpx.Limits(max_connections=20, max_keepalive_connections=10),
            max_redirects=5,
        )
        _clients[loop] = client
    return client


def display_url(url: str) -> str:
    """``url`` without userinfo or query, safe to show in an error message."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass(frozen=True)
class HttpReply:
    status: int
    headers: httpx.Headers
    content: bytes
    encoding: str

    @property
    def text(self) -> str:
        return self.content.decode(self.encoding or "utf-8", errors="replace")

    def json(self) -> Any:
        """The parsed body, or None when it is not JSON."""
        try:
            return json.loads(self.text)
        except ValueError:
            return None


@dataclass(frozen=True)
class Transport:
    """How providers make requests: the shared client, a total time limit, secrets to hide."""

    client: httpx.AsyncClient
    limit_s: float
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def redact(self, text: str) -> str:
        """``text`` with any configured key replaced, for text that came from a provider."""
        for secret in self.secrets:
            if len(secret) >= 4:
                text = text.replace(secret, "[redacted]")
        return text

    def detail(self, text: object, limit: int = 200) -> str | None:
        """A provider's own error text, redacted, on one line and short; None when empty."""
        if not isinstance(text, str):
            return None
        text = self.redact(" ".join(text.split()))
        if not text:
            return None
        return text if len(text) <= limit else text[: limit - 1] + "…"

    async def request(
        self,
        method: str,
        url: str,
        *,
        label: str,
        configure: str,
        follow_redirects: bool = False,
        **kwargs: Any,
    ) -> HttpReply:
        """Send one request and read the body, within ``limit_s`` in total.

        ``label`` names the provider in messages; ``configure`` says which setting points
        at it, for the message when it cannot be reached.
        """
        shown = display_url(url)
        try:
            # httpx's timeouts are per phase (connect, each read); a server that trickles
            # bytes could exceed them many times over, so the whole exchange is bounded too.
            async with asyncio.timeout(self.limit_s):
                return await self._exchange(method, url, label, follow_redirects, kwargs)
        except (TimeoutError, httpx.RequestError) as exc:
            raise self._failure(exc, label, shown, configure) from None

    async def _exchange(
        self, method: str, url: str, label: str, follow_redirects: bool, kwargs: dict[str, Any]
    ) -> HttpReply:
        """The request and its body (at most ``MAX_BODY_BYTES``), each phase time-bounded."""
        phases = httpx.Timeout(self.limit_s, connect=min(CONNECT_TIMEOUT_S, self.limit_s))
        async with self.client.stream(
            method, url, timeout=phases, follow_redirects=follow_redirects, **kwargs
        ) as response:
            content = await _read_capped(response, label)
            return HttpReply(
                status=response.status_code,
                headers=response.headers,
                content=content,
                encoding=response.encoding or "utf-8",
            )

    def _failure(
        self, exc: TimeoutError | httpx.RequestError, label: str, shown: str, configure: str
    ) -> ToolError:
        """What the model is told when the exchange failed: a timeout, a redirect loop, an
        unreachable provider, or a broken exchange (most specific first: a timeout is also
        a transport error)."""
        if isinstance(exc, TimeoutError | httpx.TimeoutException):
            logger.warning("search: %s timed out after %.1f s", label, self.limit_s)
            return ToolError(
                f"{label} did not answer within {self.limit_s:.3g} s ({shown}): check network "
                f"access to it, or raise AGENTLOOP_SEARCH_TIMEOUT_S",
                hint="try the search once more, or answer without it and say search was slow",
            )
        if isinstance(exc, httpx.TooManyRedirects):
            return ToolError(
                f"{label} redirected too many times ({shown}): check {configure}",
                hint="answer without web search and say that it is misconfigured",
            )
        if isinstance(exc, httpx.TransportError):
            logger.warning("search: %s unreachable: %s", label, type(exc).__name__)
            return ToolError(
                f"could not reach {label} at {shown} ({type(exc).__name__}): check {configure} "
                "and that the function has outbound internet access",
                hint="answer without web search and say that search is unavailable",
            )
        logger.warning("search: %s exchange failed: %s", label, type(exc).__name__)
        return ToolError(  # e.g. a body that does not decompress
            f"the exchange with {label} at {shown} failed ({type(exc).__name__})",
            hint="try the search once more, or answer without it",
        )


async def _read_capped(response: httpx.Response, label: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ToolError(
                f"{label} sent more than {MAX_BODY_BYTES // 1_000_000} MB; "
                "that is not a search results page",
                hint="answer without web search",
            )
        chunks.append(chunk)
    return b"".join(chunks)


# -- what to say when a provider refuses ------------------------------------------------------

ALTERNATIVES = "TAVILY_API_KEY, BRAVE_API_KEY or AGENTLOOP_SEARXNG_URL"

_NO_RETRY_HINT = "do not search again in this run; answer from what you know and say why"
_WAIT_HINT = "wait before searching again, or answer from what you have and say search is limited"


def retry_after_seconds(headers: httpx.Headers, now: datetime | None = None) -> int | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date), if any."""
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    if raw.isdigit():
        return int(raw)
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    delta = (when - (now or datetime.now(UTC))).total_seconds()
    return max(0, round(delta))


def _said(label: str, detail: str | None) -> str:
    return f" {label} said: {detail}" if detail else ""


def rate_limited(
    label: str,
    status: int,
    retry_after: int | None,
    advice: str,
    detail: str | None = None,
    *,
    subject: str = "this client",
) -> ToolError:
    """The provider is throttling us: say for how long, if known, and what would help."""
    when = f", retry after {retry_after} s" if retry_after is not None else ""
    logger.warning("search: %s rate limited (HTTP %d%s)", label, status, when)
    return ToolError(
        f"{label} is rate limiting {subject} (HTTP {status}{when}): {advice}"
        + _said(label, detail),
        hint=_WAIT_HINT,
    )


def auth_failed(
    label: str, status: int, what: str, code: str | None = None, detail: str | None = None
) -> ToolError:
    """The provider refused the credentials: name the variable to fix, never its value."""
    coded = f", {code}" if code else ""
    logger.warning("search: %s refused the key (HTTP %d%s)", label, status, coded)
    return ToolError(
        f"{label} rejected the key (HTTP {status}{coded}): check {what}." + _said(label, detail),
        hint=_NO_RETRY_HINT,
    )


def refused(label: str, status: int, message: str, detail: str | None = None) -> ToolError:
    """Any other refusal that configuration, not the model, has to fix."""
    logger.warning("search: %s refused the request (HTTP %d)", label, status)
    return ToolError(
        f"{label} refused the request (HTTP {status}): {message}" + _said(label, detail),
        hint=_NO_RETRY_HINT,
    )


def bad_query(label: str, status: int, limits: str, detail: str | None = None) -> ToolError:
    """The provider found fault with the query itself: the model can fix that."""
    return ToolError(
        f"{label} rejected the query (HTTP {status})." + _said(label, detail),
        hint=f"rephrase the query ({limits}) and try once more",
    )


def unexpected(label: str, reply: HttpReply, detail: str | None = None) -> ToolError:
    """A status the provider's documentation does not lead us to expect, or a server error."""
    logger.warning("search: %s answered HTTP %d", label, reply.status)
    if reply.status >= 500:
        return ToolError(
            f"{label} had a server error (HTTP {reply.status})." + _said(label, detail),
            hint="try the search once more later, or answer without it",
        )
    return ToolError(
        f"{label} answered HTTP {reply.status}, which this tool does not expect."
        + _said(label, detail),
        hint="answer without web search",
    )


def bad_body(label: str, expected: str) -> ToolError:
    logger.warning("search: %s sent an unexpected body", label)
    return ToolError(
        f"{label} answered, but not with {expected}",
        hint="try the search once more, or answer without it",
    )


def results_or_raise(
    reply: HttpReply,
    parse: Callable[[Any], list[SearchResult] | None],
    refusal: Callable[[HttpReply], ToolError],
    malformed: Callable[[], ToolError],
) -> list[SearchResult]:
    """The results of a JSON answer, or the error to raise: every JSON provider's last step.

    Anything but HTTP 200 is the provider's ``refusal``; a 200 whose body ``parse`` does not
    recognise is ``malformed`` (called only then, as the errors log when they are made).
    """
    if reply.status != 200:
        raise refusal(reply)
    found = parse(reply.json())
    if found is None:
        raise malformed()
    return found
