"""Local fakes of the four search APIs ``search_web`` talks to, on one loopback port.

Each answers in its provider's real wire format, with the field names the providers
document (the payloads are written for these tests, about one made-up topic):

* Tavily      ``POST /tavily/search``            JSON body, ``Authorization: Bearer <key>``
* Brave       ``GET  /brave/res/v1/web/search``  ``?q=&count=``, ``X-Subscription-Token``
* SearXNG     ``GET  /searxng/search``           ``?q=&format=json``
* DuckDuckGo  ``POST /duckduckgo/html/``         form ``q=``; an HTML results page

Keys are checked the way the providers check them (a wrong Tavily key is a 401 with
``{"detail": {"error": ...}}``, a wrong Brave key a 422 ``SUBSCRIPTION_TOKEN_INVALID``).
Every request is recorded (headers, query parameters, JSON or form body) so tests can check
what was sent. :meth:`SearchAPIs.fault` makes a provider answer with an error status in that
provider's error format (429 with rate-limit headers, 401, DuckDuckGo's 202 anomaly page,
...), or answer late, until :meth:`SearchAPIs.reset`.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from html import escape
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import parse_qsl, quote, urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from agentloop.tools.search import SearchSettings
from tests.fakes.loopback import LoopbackServer

Provider = Literal["tavily", "brave", "searxng", "duckduckgo"]
JSON = dict[str, Any]

TAVILY_KEY = "tvly-dev-fake0000000000000000000000"
BRAVE_KEY = "BSAfake000000000000000000000000"

# --------------------------------------------------------------------------------------------
# The pages every fake "finds": one topic, so the results look alike across providers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    title: str
    url: str
    text: str
    marked: str
    """``text`` with the query's words marked as ``<mark>`` for each provider to restyle."""


PAGES: tuple[Page, ...] = (
    Page(
        "Free-threaded CPython in 3.13 — What's New",
        "https://docs.example-python.org/3.13/whatsnew/3.13.html",
        "CPython 3.13 can be built without the global interpreter lock, so threads run "
        "Python code in parallel on several cores.",
        "CPython 3.13 can be built without the <mark>global interpreter lock</mark>, so "
        "threads run Python code in parallel on several cores.",
    ),
    Page(
        "PEP 703 - Making the Global Interpreter Lock Optional",
        "https://peps.example-python.org/pep-0703/",
        "This PEP proposes adding a build configuration to CPython that disables the GIL "
        "and describes the changes to reference counting it needs.",
        "This PEP proposes adding a build configuration to CPython that disables the "
        "<mark>GIL</mark> and describes the changes to reference counting it needs.",
    ),
    Page(
        "Python support for free threading — HOWTO",
        "https://docs.example-python.org/3/howto/free-threading-python.html",
        "Installers ship a python3.13t executable; check sys._is_gil_enabled() to see "
        "whether the GIL is active at run time.",
        "Installers ship a python3.13t executable; check sys._is_gil_enabled() to see "
        "whether the <mark>GIL</mark> is active at run time.",
    ),
    Page(
        "Benchmarks: single-threaded cost of the no-GIL build",
        "https://blog.example.net/2024/no-gil-benchmarks",
        "Measured on pyperformance, the free-threaded build was about 10% slower on "
        "single-threaded code & much faster on parallel workloads.",
        "Measured on pyperformance, the free-threaded build was about 10% slower on "
        "single-threaded code &amp; much faster on <mark>parallel</mark> workloads.",
    ),
    Page(
        "Global interpreter lock - Encyclopedia",
        "https://encyclopedia.example.org/wiki/Global_interpreter_lock",
        "A global interpreter lock is a mechanism used in interpreters to synchronise "
        "threads so that only one runs at a time.",
        "A <mark>global interpreter lock</mark> is a mechanism used in interpreters to "
        "synchronise threads so that only one runs at a time.",
    ),
    Page(
        "Porting C extensions to free-threaded Python",
        "https://extensions.example.dev/guide/free-threading",
        "Extension modules must declare Py_mod_gil support; otherwise importing them "
        "re-enables the GIL and prints a warning.",
        "Extension modules must declare Py_mod_gil support; otherwise importing them "
        "re-enables the <mark>GIL</mark> and prints a warning.",
    ),
    Page(
        "Discussion: is the GIL gone for good?",
        "https://forum.example.com/t/is-the-gil-gone-for-good/4242",
        "The free-threaded build is experimental in 3.13; the plan is to make it the "
        "default only once the ecosystem has caught up.",
        "The free-threaded build is experimental in 3.13; the plan is to make it the "
        "default only once the ecosystem has caught up.",
    ),
    Page(
        "Threads vs processes after the GIL",
        "https://tutorials.example.io/python/threads-vs-processes",
        "With the GIL disabled, a thread pool can replace a process pool for CPU-bound "
        "work without pickling data between processes.",
        "With the <mark>GIL</mark> disabled, a thread pool can replace a process pool for "
        "CPU-bound work without pickling data between processes.",
    ),
)


def _styled(page: Page, tag: str) -> str:
    return page.marked.replace("<mark>", f"<{tag}>").replace("</mark>", f"</{tag}>")


def _host(url: str) -> str:
    return urlsplit(url).hostname or ""


# --------------------------------------------------------------------------------------------
# Success payloads, one per provider
# --------------------------------------------------------------------------------------------


def tavily_payload(query: str, max_results: int = 5) -> JSON:
    """Tavily's search answer: results with title, url, content and a relevance score."""
    results = [
        {
            "url": page.url,
            "title": page.title,
            "content": page.text,
            "score": round(0.91 - 0.07 * i, 5),
            "raw_content": None,
        }
        for i, page in enumerate(PAGES[:max_results])
    ]
    return {
        "query": query,
        "follow_up_questions": None,
        "answer": None,
        "images": [],
        "results": results,
        "response_time": 1.12,
        "request_id": str(uuid.uuid4()),
    }


def _brave_result(page: Page, url: str | None = None) -> JSON:
    url = url or page.url
    parts = urlsplit(url)
    return {
        "title": page.title,
        "url": url,
        "is_source_local": False,
        "is_source_both": False,
        "description": _styled(page, "strong"),
        "page_age": "2024-10-07T00:00:00",
        "profile": {
            "name": _host(url),
            "url": url,
            "long_name": _host(url),
            "img": f"https://imgs.search.example/{_host(url)}.png",
        },
        "language": "en",
        "family_friendly": True,
        "type": "search_result",
        "subtype": "generic",
        "is_live": False,
        "meta_url": {
            "scheme": parts.scheme,
            "netloc": parts.netloc,
            "hostname": parts.hostname,
            "favicon": f"https://imgs.search.example/favicon/{_host(url)}.png",
            "path": "\u203a " + parts.path.strip("/").replace("/", " \u203a "),
        },
        "age": "October 7, 2024",
    }


def brave_payload(query: str, count: int = 20) -> JSON:
    """Brave's WebSearchApiResponse: ``web.results`` with HTML-highlighted descriptions.

    The second result is the first page again with a fragment, as Brave sometimes lists a
    page twice; a tool should show it once.
    """
    web = [_brave_result(PAGES[0]), _brave_result(PAGES[0], PAGES[0].url + "#free-threaded")]
    web += [_brave_result(page) for page in PAGES[1:]]
    web = web[:count]
    return {
        "query": {
            "original": query,
            "show_strict_warning": False,
            "is_navigational": False,
            "is_news_breaking": False,
            "spellcheck_off": True,
            "country": "us",
            "bad_results": False,
            "should_fallback": False,
            "postal_code": "",
            "city": "",
            "header_country": "",
            "more_results_available": True,
            "state": "",
        },
        "mixed": {
            "type": "mixed",
            "main": [{"type": "web", "index": i, "all": False} for i in range(len(web))],
            "top": [],
            "side": [],
        },
        "type": "search",
        "web": {"type": "search", "results": web, "family_friendly": True},
    }


def searxng_payload(query: str) -> JSON:
    """SearXNG's JSON format: every result it merged, whatever was asked for (no count).

    It lists the HOWTO page twice, once over http, as merged engines sometimes do.
    """
    results: list[JSON] = []
    pages = [*PAGES, PAGES[2]]
    for i, page in enumerate(pages):
        url = page.url if i < len(PAGES) else page.url.replace("https://", "http://")
        parts = urlsplit(url)
        results.append(
            {
                "url": url,
                "title": page.title,
                "content": page.text,
                "publishedDate": None,
                "thumbnail": "",
                "engine": "duckduckgo" if i % 2 else "brave",
                "template": "default.html",
                "parsed_url": [parts.scheme, parts.netloc, parts.path, "", "", ""],
                "img_src": "",
                "priority": "",
                "engines": ["brave", "duckduckgo"] if i < 3 else ["duckduckgo"],
                "positions": [i + 1],
                "score": round(4.0 / (i + 1), 4),
                "category": "general",
            }
        )
    return {
        "query": query,
        "number_of_results": 0,
        "results": results,
        "answers": [],
        "corrections": [],
        "infoboxes": [],
        "suggestions": ["python nogil build", "python 3.13t"],
        "unresponsive_engines": [],
    }


def _ddg_redirect(url: str) -> str:
    return f"//duckduckgo.com/l/?uddg={quote(url, safe='')}&amp;rut={uuid.uuid4().hex}"


def duckduckgo_page(query: str) -> str:
    """DuckDuckGo's HTML results page: an ad first, then organic results.

    Organic links alternate between the page's own URL and DuckDuckGo's ``/l/?uddg=``
    redirect, as the endpoint has served both; snippets highlight with ``<b>``.
    """
    shown = escape(query)
    blocks = [
        '<div class="result results_links results_links_deep result--ad ">'
        '<div class="links_main links_deep result__body">'
        '<h2 class="result__title"><a rel="nofollow" class="result__a" '
        'href="https://duckduckgo.com/y.js?ad_domain=ads.example.com&amp;ad_provider=bingv7aa'
        '&amp;u3=https%3A%2F%2Fads.example.com%2Fclick">Learn Python Fast - Sponsored</a></h2>'
        '<a class="result__snippet" href="https://duckduckgo.com/y.js?ad_domain=ads.example.com">'
        "Courses for every level.</a>"
        '<button class="badge--ad">Ad</button></div></div>'
    ]
    for i, page in enumerate(PAGES):
        href = _ddg_redirect(page.url) if i % 2 else escape(page.url)
        snippet = _styled(page, "b").replace("'", "&#x27;")
        blocks.append(
            '<div class="result results_links results_links_deep web-result ">\n'
            '  <div class="links_main links_deep result__body">\n'
            f'    <h2 class="result__title">\n      <a rel="nofollow" class="result__a" '
            f'href="{href}">{escape(page.title)}</a>\n    </h2>\n'
            '    <div class="result__extras"><div class="result__extras__url">'
            '<span class="result__icon"><a rel="nofollow" href="'
            f'{href}"><img class="result__icon__img" width="16" height="16" alt="" '
            f'src="//external-content.duckduckgo.com/ip3/{_host(page.url)}.ico" name="i15" />'
            f'</a></span><a class="result__url" href="{href}">{_host(page.url)}</a>'
            "<span>&nbsp; &nbsp; 2024-10-07T00:00:00.0000000</span></div></div>\n"
            f'    <a class="result__snippet" href="{href}">{snippet}</a>\n'
            '    <div class="clear"></div>\n  </div>\n</div>'
        )
    return (
        "<!DOCTYPE html>\n<html><head>"
        '<meta http-equiv="content-type" content="text/html; charset=UTF-8">'
        f"<title>{shown} at DuckDuckGo</title></head><body>"
        '<div id="links" class="results">'
        + "\n".join(blocks)
        + '<div class="nav-link"><form action="/html/" method="post">'
        f'<input type="hidden" name="q" value="{shown}"></form></div>'
        "</div></body></html>"
    )


def duckduckgo_anomaly_page() -> str:
    """The bot check DuckDuckGo serves (with HTTP 202) to an address that searched too much."""
    tiles = "".join(
        f'<img class="anomaly-modal__image" src="/assets/anomaly/tile-{i}.jpg" alt="">'
        for i in range(9)
    )
    return (
        "<!DOCTYPE html><html><head><title>DuckDuckGo</title></head><body>"
        '<form id="challenge-form" action="//duckduckgo.com/anomaly.js?sv=html&amp;cc=botnet" '
        'method="POST"><div class="anomaly-modal__mask"><div class="anomaly-modal__modal">'
        '<div class="anomaly-modal__title">Unfortunately, bots use DuckDuckGo too.</div>'
        '<div class="anomaly-modal__description">Please complete the following challenge to '
        "confirm this search was made by a human.</div>"
        f'<div class="anomaly-modal__puzzle">{tiles}</div></div></div></form></body></html>'
    )


# --------------------------------------------------------------------------------------------
# Error payloads, one family per provider
# --------------------------------------------------------------------------------------------

_TAVILY_ERRORS = {
    400: "Query is too long. Max query length is 400 characters.",
    401: "Unauthorized: missing or invalid API key.",
    403: "Forbidden: this API key is not allowed to use this endpoint.",
    429: "Your request has been blocked due to excessive requests. Please reduce rate of requests.",
    432: "This request exceeds your plan's set usage limit. Please upgrade your plan or "
    "contact support@tavily.com",
    433: "This request exceeds the pay-as-you-go limit. You can increase your limit on the "
    "Tavily dashboard.",
    500: "Internal Server Error",
}


def tavily_error_body(status: int) -> JSON:
    return {"detail": {"error": _TAVILY_ERRORS.get(status, "Request failed")}}


_BRAVE_ERRORS: dict[int, tuple[str, str, JSON]] = {
    401: ("SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid.", {}),
    422: (
        "SUBSCRIPTION_TOKEN_INVALID",
        "The provided subscription token is invalid.",
        {"component": "authentication"},
    ),
    429: (
        "RATE_LIMITED",
        "Request rate limit exceeded for plan",
        {
            "plan": "Free",
            "rate_limit": 1,
            "rate_current": 1,
            "quota_limit": 2000,
            "quota_current": 15,
            "org_rate_limit": None,
            "org_rate_current": 0,
            "component": "rate_limiter",
        },
    ),
}


def brave_error_body(status: int) -> JSON:
    code, detail, meta = _BRAVE_ERRORS.get(status, ("UNKNOWN", "Something went wrong.", {}))
    return {
        "type": "ErrorResponse",
        "error": {
            "id": str(uuid.uuid4()),
            "status": status,
            "code": code,
            "detail": detail,
            "meta": meta,
        },
        "time": int(time.time()),
    }


BRAVE_RATE_HEADERS = {
    "X-RateLimit-Limit": "1, 2000",
    "X-RateLimit-Policy": "1;w=1, 2000;w=2592000",
    "X-RateLimit-Remaining": "0, 1985",
    "X-RateLimit-Reset": "1, 1419704",
}


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


@dataclass
class Fault:
    """How a provider misbehaves until reset.

    ``delay``: seconds before anything is sent. ``status``: answer it with the provider's
    own error body (``body`` replaces that body; ``retry_after`` adds the header). ``body``
    with no status replaces a successful answer (a string is sent as ``content_type``).
    """

    status: int | None = None
    delay: float = 0.0
    retry_after: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    content_type: str = "text/html; charset=utf-8"


@dataclass
class SearchRequest:
    """One request a fake received, as the client sent it."""

    provider: Provider
    method: str
    path: str
    headers: dict[str, str]
    params: dict[str, str]
    json: Any = None
    form: dict[str, str] = field(default_factory=dict)


class SearchAPIs:
    """The four fakes on one loopback server; use as a context manager or start()/stop()."""

    def __init__(self) -> None:
        self.requests: list[SearchRequest] = []
        self._faults: dict[Provider, Fault] = {}
        self._lock = threading.Lock()
        routes = [
            Route("/tavily/search", self._tavily, methods=["POST"]),
            Route("/brave/res/v1/web/search", self._brave, methods=["GET"]),
            Route("/searxng/search", self._searxng, methods=["GET", "POST"]),
            Route("/duckduckgo/html/", self._duckduckgo, methods=["GET", "POST"]),
        ]
        self.server = LoopbackServer(Starlette(routes=routes), name="search-apis")

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- what tests use -----------------------------------------------------------------------

    def url(self, provider: Provider) -> str:
        return f"{self.server.url}/{provider}"

    def settings(self, provider: Provider | None = None, **overrides: Any) -> SearchSettings:
        """Settings with every provider pointed here and the keys the fakes accept."""
        values: dict[str, Any] = {
            "provider": provider,
            "tavily_api_key": TAVILY_KEY,
            "brave_api_key": BRAVE_KEY,
            "searxng_url": self.url("searxng"),
            "tavily_url": self.url("tavily"),
            "brave_url": self.url("brave"),
            "duckduckgo_url": self.url("duckduckgo"),
        }
        values.update(overrides)
        return SearchSettings.model_validate(values)

    def env(self) -> dict[str, str]:
        """The base-URL variables that point every provider here (no keys, no choice)."""
        return {
            "AGENTLOOP_TAVILY_URL": self.url("tavily"),
            "AGENTLOOP_BRAVE_URL": self.url("brave"),
            "AGENTLOOP_DUCKDUCKGO_URL": self.url("duckduckgo"),
        }

    def fault(self, provider: Provider, fault: Fault | None = None, **fields: Any) -> None:
        """Make ``provider`` misbehave (``Fault`` or its fields as keywords) until reset."""
        with self._lock:
            self._faults[provider] = fault or Fault(**fields)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._faults.clear()

    def requests_to(self, provider: Provider) -> list[SearchRequest]:
        with self._lock:
            return [r for r in self.requests if r.provider == provider]

    # -- handlers -----------------------------------------------------------------------------

    async def _record(self, provider: Provider, request: Request) -> tuple[SearchRequest, Fault]:
        body = await request.body()
        content_type = request.headers.get("content-type", "")
        recorded = SearchRequest(
            provider=provider,
            method=request.method,
            path=request.url.path,
            headers={k.lower(): v for k, v in request.headers.items()},
            params=dict(request.query_params),
        )
        if body and content_type.startswith("application/json"):
            recorded.json = json.loads(body)
        elif body and content_type.startswith("application/x-www-form-urlencoded"):
            # Parsed here: Starlette's request.form() needs python-multipart.
            recorded.form = dict(parse_qsl(body.decode(), keep_blank_values=True))
        with self._lock:
            self.requests.append(recorded)
            fault = self._faults.get(provider, Fault())
        await self._wait(request, fault.delay)
        return recorded, fault

    @staticmethod
    async def _wait(request: Request, seconds: float) -> None:
        """Sleep, but stop once the client has given up (so shutdown never waits on us)."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            if await request.is_disconnected():
                return
            await asyncio.sleep(min(0.05, max(0.0, until - time.monotonic())))

    @staticmethod
    def _fault_headers(fault: Fault) -> dict[str, str]:
        headers = dict(fault.headers)
        if fault.retry_after is not None:
            headers["Retry-After"] = fault.retry_after
        return headers

    @staticmethod
    def _replacement(fault: Fault, status: int = 200) -> Response:
        headers = SearchAPIs._fault_headers(fault)
        if isinstance(fault.body, str | bytes):
            return Response(fault.body, status, headers, media_type=fault.content_type)
        return JSONResponse(fault.body, status, headers)

    async def _tavily(self, request: Request) -> Response:
        recorded, fault = await self._record("tavily", request)
        status = fault.status
        if status is None and recorded.headers.get("authorization") != f"Bearer {TAVILY_KEY}":
            status = 401
        if status is not None:
            if fault.body is not None:
                return self._replacement(fault, status)
            return JSONResponse(tavily_error_body(status), status, self._fault_headers(fault))
        if fault.body is not None:
            return self._replacement(fault)
        body = recorded.json if isinstance(recorded.json, dict) else {}
        query = str(body.get("query", ""))
        return JSONResponse(tavily_payload(query, int(body.get("max_results", 5))))

    async def _brave(self, request: Request) -> Response:
        recorded, fault = await self._record("brave", request)
        status = fault.status
        if status is None and recorded.headers.get("x-subscription-token") != BRAVE_KEY:
            status = 422
        if status is not None:
            if fault.body is not None:
                return self._replacement(fault, status)
            headers = self._fault_headers(fault)
            if status == 429:
                headers = {**BRAVE_RATE_HEADERS, **headers}
            return JSONResponse(brave_error_body(status), status, headers)
        if fault.body is not None:
            return self._replacement(fault)
        count = int(recorded.params.get("count", "20"))
        return JSONResponse(
            brave_payload(recorded.params.get("q", ""), count),
            headers={
                "X-RateLimit-Limit": "1, 2000",
                "X-RateLimit-Policy": "1;w=1, 2000;w=2592000",
                "X-RateLimit-Remaining": "0, 1999",
                "X-RateLimit-Reset": "1, 1419704",
            },
        )

    async def _searxng(self, request: Request) -> Response:
        recorded, fault = await self._record("searxng", request)
        params = {**recorded.params, **recorded.form}
        status = fault.status
        if status is None and params.get("format") != "json":
            status = 403  # as an instance without json in search.formats answers
        if status is not None:
            if fault.body is not None:
                return self._replacement(fault, status)
            text = {403: "Forbidden", 429: "Too Many Requests"}.get(status, "Error")
            return PlainTextResponse(text, status, self._fault_headers(fault))
        if fault.body is not None:
            return self._replacement(fault)
        return JSONResponse(searxng_payload(params.get("q", "")))

    async def _duckduckgo(self, request: Request) -> Response:
        recorded, fault = await self._record("duckduckgo", request)
        if fault.status is not None:
            if fault.body is not None:
                return self._replacement(fault, fault.status)
            headers = self._fault_headers(fault)
            return HTMLResponse(duckduckgo_anomaly_page(), fault.status, headers)
        if fault.body is not None:
            return self._replacement(fault)
        query = recorded.form.get("q") or recorded.params.get("q", "")
        return HTMLResponse(duckduckgo_page(query))
