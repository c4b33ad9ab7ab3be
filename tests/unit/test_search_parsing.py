"""search_web's pure parts: cleaning, each provider's parser, errors' details, settings."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import httpx
import pytest
from pydantic import ValidationError

from agentloop.config import ConfigurationError
from agentloop.tools.search import SearchResult, SearchSettings, SearchWebArgs, search_web_tool
from agentloop.tools.search.base import clean_text, finalise, make_result, shorten, url_key
from agentloop.tools.search.brave import brave_error, brave_retry_after, parse_brave
from agentloop.tools.search.duckduckgo import is_anomaly_page, parse_duckduckgo, result_url
from agentloop.tools.search.searxng import parse_searxng, unresponsive_engines
from agentloop.tools.search.tavily import parse_tavily, tavily_error_text
from agentloop.tools.search.transport import (
    Transport,
    display_url,
    retry_after_seconds,
    shared_client,
)
from tests.fakes.search_apis import (
    PAGES,
    brave_error_body,
    brave_payload,
    duckduckgo_anomaly_page,
    duckduckgo_page,
    searxng_payload,
    tavily_error_body,
    tavily_payload,
)

# -- cleaning ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("The <strong>GIL</strong> is optional", "The GIL is optional"),
        ("<b>free</b>-threaded", "free-threaded"),
        ("it&#x27;s &amp; &quot;fast&quot;", 'it\'s & "fast"'),
        ("line one<br>line two<p>three</p>", "line one line two three"),
        ("  spaced \n\t out&nbsp;&nbsp;text ", "spaced out text"),
        ("generic Vec<T> and <stdio.h> survive", "generic Vec<T> and <stdio.h> survive"),
        ("a <!-- hidden --> b", "a b"),
        ('<span class="x">styled</span> <a href="https://e.org">link</a>', "styled link"),
        ("&lt;b&gt; written as text", "<b> written as text"),
        ("", ""),
    ],
)
def test_clean_text(raw: str, clean: str) -> None:
    assert clean_text(raw) == clean


def test_shorten_cuts_at_a_word_boundary() -> None:
    text = "one two three four five six seven eight nine ten"
    assert shorten(text, 100) == text
    short = shorten(text, 20)
    assert len(short) <= 20
    assert short == "one two three four…"
    assert shorten("x" * 50, 10) == "x" * 9 + "…"  # no space near: cut mid-word


@pytest.mark.parametrize(
    "url", [None, "", "ftp://example.org/f", "javascript:alert(1)", "/relative/path", 42]
)
def test_results_without_a_usable_url_are_dropped(url: object) -> None:
    assert make_result("Title", url, "snippet") is None


def test_a_result_without_title_is_titled_by_its_url() -> None:
    result = make_result("  ", " https://example.org/a ", "<b>x</b>")
    assert result == SearchResult("https://example.org/a", "https://example.org/a", "x")


def test_same_page_means_same_host_path_and_query() -> None:
    assert url_key("https://Example.org/a/") == url_key("http://example.org/a#top")
    assert url_key("https://example.org/") == url_key("https://example.org")
    assert url_key("https://example.org/a?x=1") != url_key("https://example.org/a?x=2")
    assert url_key("https://example.org:8443/a") != url_key("https://example.org/a")


def test_finalise_deduplicates_caps_and_shortens() -> None:
    long = "word " * 200
    results = [
        SearchResult("A", "https://a.example/x", long),
        SearchResult("A again", "https://a.example/x/#part", "dup"),
        SearchResult("B", "https://b.example/", "b"),
        SearchResult("C", "https://c.example/", "c"),
    ]
    kept = finalise(results, count=2, snippet_max_chars=60)
    assert [r.title for r in kept] == ["A", "B"]
    assert len(kept[0].snippet) <= 60
    assert kept[0].snippet.endswith("…")
    assert [r.title for r in finalise(results, 10, 400)] == ["A", "B", "C"]


# -- Tavily -------------------------------------------------------------------------------------


def test_parse_tavily() -> None:
    found = parse_tavily(tavily_payload("python gil", 3))
    assert found == [SearchResult(p.title, p.url, p.text) for p in PAGES[:3]]


def test_parse_tavily_skips_bad_items_and_refuses_other_shapes() -> None:
    payload = {
        "results": [{"title": "no url"}, "junk", {"url": "https://ok.example/", "content": 1}]
    }
    assert parse_tavily(payload) == [SearchResult("https://ok.example/", "https://ok.example/", "")]
    assert parse_tavily({"detail": {"error": "x"}}) is None
    assert parse_tavily(None) is None


def test_tavily_error_text() -> None:
    assert tavily_error_text(tavily_error_body(401)) == "Unauthorized: missing or invalid API key."
    assert tavily_error_text({"detail": "plain"}) == "plain"
    assert tavily_error_text("nope") is None


# -- Brave --------------------------------------------------------------------------------------


def test_parse_brave_strips_highlighting() -> None:
    found = parse_brave(brave_payload("python gil"))
    assert found is not None
    assert found[0] == SearchResult(PAGES[0].title, PAGES[0].url, PAGES[0].text)
    assert not any("<strong>" in r.snippet or "</strong>" in r.snippet for r in found)
    assert "&amp;" not in found[4].snippet
    assert "& much faster" in found[4].snippet
    # Brave listed the first page twice; the parser keeps both, finalise keeps one.
    assert found[1].url == PAGES[0].url + "#free-threaded"
    assert len(finalise(found, 10, 400)) == len(PAGES)


def test_parse_brave_without_web_section() -> None:
    assert parse_brave({"type": "search", "query": {"original": "x"}}) == []
    assert parse_brave({"type": "ErrorResponse"}) is None
    assert parse_brave({"type": "search", "web": {"results": "x"}}) is None


def test_brave_error_fields() -> None:
    assert brave_error(brave_error_body(422)) == (
        "SUBSCRIPTION_TOKEN_INVALID",
        "The provided subscription token is invalid.",
    )
    assert brave_error({"message": "other"}) == (None, None)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "12"}, 12),
        ({"X-RateLimit-Remaining": "0, 1985", "X-RateLimit-Reset": "1, 1419704"}, 1),
        ({"X-RateLimit-Remaining": "5, 0", "X-RateLimit-Reset": "1, 86400"}, 86400),
        ({"X-RateLimit-Remaining": "3, 10", "X-RateLimit-Reset": "2, 86400"}, 2),
        ({"X-RateLimit-Reset": "garbage"}, None),
        ({}, None),
    ],
)
def test_brave_retry_after(headers: dict[str, str], seconds: int | None) -> None:
    assert brave_retry_after(httpx.Headers(headers)) == seconds


def test_retry_after_as_http_date() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    headers = httpx.Headers({"Retry-After": "Wed, 01 Jan 2025 12:00:30 GMT"})
    assert retry_after_seconds(headers, now) == 30
    assert retry_after_seconds(httpx.Headers({"Retry-After": "soon"}), now) is None


# -- SearXNG ------------------------------------------------------------------------------------


def test_parse_searxng() -> None:
    found = parse_searxng(searxng_payload("python gil"))
    assert found is not None
    assert found[:2] == [SearchResult(p.title, p.url, p.text) for p in PAGES[:2]]
    assert len(found) == len(PAGES) + 1  # the http:// duplicate of the HOWTO page
    assert len(finalise(found, 10, 400)) == len(PAGES)
    assert parse_searxng("<html>login</html>") is None


def test_unresponsive_engines() -> None:
    payload = {"unresponsive_engines": [["google", "timeout"], ["bing"], [1, 2], "x"]}
    assert unresponsive_engines(payload) == ["google (timeout)", "bing"]
    assert unresponsive_engines({}) == []


# -- DuckDuckGo ---------------------------------------------------------------------------------


def test_parse_duckduckgo_page() -> None:
    found = parse_duckduckgo(duckduckgo_page("python <gil>"))
    assert [r.url for r in found] == [p.url for p in PAGES], "ad skipped, redirects decoded"
    assert found[0].title == "Free-threaded CPython in 3.13 — What's New"
    assert found[0].snippet == PAGES[0].text, "<b> highlighting stripped"
    assert found[3].snippet == PAGES[3].text, "entities decoded once"


def test_parse_duckduckgo_without_results() -> None:
    assert parse_duckduckgo("<html><body><div class='no-results'>No results.</div>") == []
    assert parse_duckduckgo(duckduckgo_anomaly_page()) == []


@pytest.mark.parametrize(
    ("href", "url"),
    [
        ("https://example.org/page", "https://example.org/page"),
        (
            "//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.org%2Fa%3Fb%3D1&rut=abc",
            "https://example.org/a?b=1",
        ),
        ("/l/?uddg=https%3A%2F%2Fexample.org%2F", "https://example.org/"),
        ("https://duckduckgo.com/y.js?ad_domain=x.example&u3=https%3A%2F%2Fx", None),
        ("//duckduckgo.com/l/?rut=abc", None),
        ("https://duckduckgo.com/settings", None),
        ("", None),
        (None, None),
    ],
)
def test_result_url(href: str | None, url: str | None) -> None:
    assert result_url(href) == url


def test_anomaly_page_is_recognised() -> None:
    assert is_anomaly_page(duckduckgo_anomaly_page())
    assert not is_anomaly_page(duckduckgo_page("anything"))


# -- transport ------------------------------------------------------------------------------


def test_provider_error_text_is_redacted_and_short() -> None:
    transport = Transport(httpx.AsyncClient(), 1.0, ("sekrit-key-123",))
    detail = transport.detail("bad key  sekrit-key-123\n given " + "x" * 500)
    assert detail is not None
    assert "sekrit" not in detail
    assert "[redacted]" in detail
    assert len(detail) <= 200
    assert "\n" not in detail
    assert transport.detail("   ") is None
    assert transport.detail(None) is None
    assert "sekrit-key-123" not in repr(transport)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:secret@searx.example.org/search?q=x", "https://searx.example.org/search"),
        ("http://[::1]:8888/search", "http://[::1]:8888/search"),
    ],
)
def test_urls_in_messages_lose_credentials_and_query(url: str, shown: str) -> None:
    assert display_url(url) == shown


def test_searxng_password_is_a_secret_to_redact() -> None:
    settings = SearchSettings(searxng_url="https://agent:p%40ss@searx.example.org")
    assert settings.secrets() == ("p@ss",)


def test_one_client_per_event_loop() -> None:
    async def two() -> tuple[httpx.AsyncClient, httpx.AsyncClient]:
        return shared_client(), shared_client()

    first, again = asyncio.run(two())
    assert first is again
    other, _ = asyncio.run(two())
    assert other is not first


# -- settings and arguments ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "provider"),
    [
        ({}, "duckduckgo"),
        ({"AGENTLOOP_SEARXNG_URL": "https://searx.example.org/"}, "searxng"),
        ({"BRAVE_API_KEY": "b", "AGENTLOOP_SEARXNG_URL": "https://s.example"}, "brave"),
        ({"TAVILY_API_KEY": "t", "BRAVE_API_KEY": "b"}, "tavily"),
        ({"TAVILY_API_KEY": "t", "AGENTLOOP_SEARCH_PROVIDER": "DuckDuckGo"}, "duckduckgo"),
        ({"TAVILY_API_KEY": "  ", "BRAVE_API_KEY": ""}, "duckduckgo"),
        ({"AGENTLOOP_SEARCH_PROVIDER": " "}, "duckduckgo"),
    ],
)
def test_provider_choice(env: dict[str, str], provider: str) -> None:
    assert SearchSettings.from_env(env).chosen_provider() == provider


def test_settings_from_env_reads_every_variable() -> None:
    settings = SearchSettings.from_env(
        {
            "AGENTLOOP_SEARCH_PROVIDER": "searxng",
            "AGENTLOOP_SEARXNG_URL": "https://searx.example.org/",
            "AGENTLOOP_TAVILY_URL": "http://127.0.0.1:9/tavily/",
            "AGENTLOOP_BRAVE_URL": "http://127.0.0.1:9/brave",
            "AGENTLOOP_DUCKDUCKGO_URL": "http://127.0.0.1:9/ddg",
            "AGENTLOOP_SEARCH_MAX_RESULTS": "3",
            "AGENTLOOP_SEARCH_TIMEOUT_S": "2.5",
            "AGENTLOOP_SEARCH_SNIPPET_MAX_CHARS": "120",
            "TAVILY_API_KEY": " tvly-abc ",
        }
    )
    assert settings.searxng_url == "https://searx.example.org"
    assert settings.tavily_url == "http://127.0.0.1:9/tavily"
    assert (settings.max_results, settings.timeout_s, settings.snippet_max_chars) == (3, 2.5, 120)
    assert settings.tavily_api_key is not None
    assert settings.tavily_api_key.get_secret_value() == "tvly-abc"
    assert settings.secrets() == ("tvly-abc",)
    assert "tvly-abc" not in repr(settings)
    assert "tvly-abc" not in str(settings)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"AGENTLOOP_SEARCH_PROVIDER": "bing"}, "AGENTLOOP_SEARCH_PROVIDER"),
        ({"AGENTLOOP_SEARXNG_URL": "searx.local"}, "AGENTLOOP_SEARXNG_URL"),
        ({"AGENTLOOP_SEARCH_MAX_RESULTS": "50"}, "AGENTLOOP_SEARCH_MAX_RESULTS"),
        ({"AGENTLOOP_SEARCH_TIMEOUT_S": "soon"}, "AGENTLOOP_SEARCH_TIMEOUT_S"),
    ],
)
def test_invalid_settings_name_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named) as caught:
        SearchSettings.from_env({**env, "TAVILY_API_KEY": "tvly-do-not-show"})
    assert "tvly-do-not-show" not in str(caught.value)


def test_arguments() -> None:
    args = SearchWebArgs.model_validate({"query": "  python gil  "})
    assert (args.query, args.count) == ("python gil", 5)
    for bad in ({"query": "   "}, {"query": "x", "count": 0}, {"query": "x", "count": 11}):
        with pytest.raises(ValidationError):
            SearchWebArgs.model_validate(bad)
    with pytest.raises(ValidationError):
        SearchWebArgs.model_validate({"query": "x" * 401})


def test_tool_definition() -> None:
    definition = search_web_tool(SearchSettings()).definition
    function = definition["function"]
    assert function["name"] == "search_web"
    assert "cite" in function["description"]
    assert function["parameters"]["required"] == ["query"]
    assert set(function["parameters"]["properties"]) == {"query", "count"}
    assert function["parameters"]["properties"]["count"]["maximum"] == 10
