"""The source collector behind ``done.sources`` and the research report's sources.

It reads tool events, which carry what web pages and search APIs returned: hostile input.
These tests feed it events as the loop emits them (the ``{"ok": ...}`` envelopes the tools'
results are rendered into) and check what it keeps, in what order, and how it cleans it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentloop.events import Event, Source, ToolCallResult, ToolCallStart
from agentloop.sources import (
    MAX_SOURCES,
    MAX_TITLE_CHARS,
    MAX_URL_CHARS,
    SourceCollector,
    clean_title,
    clean_url,
    collect,
)
from agentloop.tools.results import ToolResult

_ids = iter(range(1_000_000))


def tool(
    name: str, arguments: dict[str, Any], result: Any, *, ok: bool = True, run_id: str = "top"
) -> list[Event]:
    """A call's start and result, the result rendered as the loop renders it."""
    call_id = f"call_{next(_ids)}"
    rendered = ToolResult(ok=True, result=result) if ok else ToolResult.failure(str(result))
    return [
        ToolCallStart(call_id=call_id, name=name, arguments=json.dumps(arguments), run_id=run_id),
        ToolCallResult(
            call_id=call_id,
            name=name,
            ok=ok,
            duration_ms=1.0,
            content=rendered.render(20_000),
            run_id=run_id,
        ),
    ]


def search(*hits: tuple[Any, Any], run_id: str = "top") -> list[Event]:
    results = [{"title": title, "url": url, "snippet": "s"} for title, url in hits]
    return tool("search_web", {"query": "q"}, {"query": "q", "results": results}, run_id=run_id)


def read(url: str, title: Any = None, final_url: str | None = None, **kw: Any) -> list[Event]:
    page = {"url": url, "final_url": final_url or url, "title": title, "content": "text"}
    return tool("scrape", {"url": url}, page, **kw)


def kept(events: list[Event], limit: int = MAX_SOURCES) -> list[tuple[str, str | None, str]]:
    return [(s.url, s.title, s.kind) for s in collect(events, limit).sources()]


def test_sources_in_order_of_first_use_each_url_once() -> None:
    events = [
        *search(("A", "https://a.example/"), ("B", "https://b.example/")),
        *read("https://c.example/start", "C page", final_url="https://c.example/end"),
        *search(("B again", "https://b.example/"), ("D", "https://d.example/")),
        *read("https://c.example/end", "C page, second visit"),
    ]

    assert kept(events) == [
        ("https://a.example/", "A", "search"),
        ("https://b.example/", "B", "search"),
        ("https://c.example/end", "C page", "read"),
        ("https://d.example/", "D", "search"),
    ]


def test_a_search_result_the_run_then_read_keeps_its_place_and_becomes_read() -> None:
    events = [
        *search(("Listed title", "https://a.example/"), ("B", "https://b.example/")),
        *read("https://b.example/", "The page's own title"),
        *read("https://a.example/", None),  # text/plain: no title of its own
    ]

    assert kept(events) == [
        ("https://a.example/", "Listed title", "read"),
        ("https://b.example/", "The page's own title", "read"),
    ]


def test_failed_calls_and_other_tools_add_nothing() -> None:
    events = [
        *tool("search_web", {"query": "q"}, "rate limited", ok=False),
        *tool("scrape", {"url": "https://down.example/"}, "timed out", ok=False),
        *tool("execute_code", {"code": "1"}, {"results": [{"url": "https://x.example/"}]}),
        *tool(
            "mcp__web__scrape", {"url": "https://y.example/"}, {"final_url": "https://y.example/"}
        ),
    ]

    collector = collect(events)

    assert collector.sources() == []
    assert collector.unread() == ["https://down.example/"]


def test_a_page_that_failed_and_was_then_read_is_not_unread() -> None:
    events = [
        *tool("scrape", {"url": "https://flaky.example/"}, "timed out", ok=False),
        *read("https://flaky.example/", "Flaky"),
        *tool("scrape", {"url": "https://flaky.example/"}, "timed out", ok=False),
    ]

    collector = collect(events)

    assert kept(events) == [("https://flaky.example/", "Flaky", "read")]
    assert collector.unread() == []


def test_calls_of_different_runs_with_the_same_id_are_told_apart() -> None:
    # A sub-agent's model may reuse the parent's call ids; the start says which URL was asked.
    top = ToolCallStart(
        call_id="call_1", name="scrape", arguments='{"url": "https://top.example/"}'
    )
    sub = ToolCallStart(
        call_id="call_1", name="scrape", arguments='{"url": "https://sub.example/"}', run_id="sub"
    )
    failed = ToolResult.failure("timed out").render(1000)
    sub_failed = ToolCallResult(
        call_id="call_1", name="scrape", ok=False, duration_ms=1, content=failed, run_id="sub"
    )

    assert collect([top, sub, sub_failed]).unread() == ["https://sub.example/"]


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "[1, 2]",
        '{"ok": true, "result": {"results": "not a list"}}',
        '{"ok": true, "result": {"results": [1, null, {"url": 5}, {"title": "no url"}]}}',
        '{"ok": true, "truncated": true, "result": "{\\"results\\": [{\\"url\\": \\"https://x.e'
        '[... 900 of 1000 characters cut ...]"}',
    ],
)
def test_malformed_search_results_add_nothing(content: str) -> None:
    events: list[Event] = [
        ToolCallStart(call_id="c", name="search_web", arguments="{}"),
        ToolCallResult(call_id="c", name="search_web", ok=True, duration_ms=1, content=content),
    ]

    assert collect(events).sources() == []


def test_a_page_result_cut_to_text_is_the_url_asked_for_untitled() -> None:
    events: list[Event] = [
        ToolCallStart(call_id="c", name="scrape", arguments='{"url": "https://long.example/"}'),
        ToolCallResult(
            call_id="c",
            name="scrape",
            ok=True,
            duration_ms=1,
            content='{"ok": true, "truncated": true, "result": "{\\"url\\": \\"https://lo…"}',
        ),
    ]

    assert kept(events) == [("https://long.example/", None, "read")]


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(document.cookie)",
        "JAVASCRIPT://example.com/%0aalert(1)",
        "data:text/html,<script>alert(1)</script>",
        "file:///etc/passwd",
        "/relative/path",
        "https://",
        "http://[::1",
        "https://a.example/\u202etxt.exe",
        "https://a.example/x\ny",
        "https://a.example/x y",
        "https://a.example/" + "a" * MAX_URL_CHARS,
        "",
        None,
        42,
        ["https://a.example/"],
    ],
)
def test_urls_that_are_not_plain_web_addresses_are_not_kept(url: Any) -> None:
    assert clean_url(url) is None
    assert kept(search(("T", url))) == []
    # a page whose final URL is bad: the URL it was fetched as, if that one is good
    assert kept(read("https://b.example/", "B", final_url=url)) == [
        ("https://b.example/", "B", "read")
    ]


def test_plain_web_addresses_are_kept_as_they_are() -> None:
    for url in (
        "https://a.example/",
        "HTTP://A.example:8080/p?q=1#f",
        "https://xn--bcher-kva.example/",
    ):
        assert clean_url(url) == url
    assert clean_url("  https://a.example/  ") == "https://a.example/"


def test_titles_lose_control_and_format_characters_and_are_bounded() -> None:
    assert clean_title("A\u202egnp.exe\u200b title\x07\x1b[31m red\r\n  next\u0085") == (
        "A gnp.exe title [31m red next"
    )
    assert clean_title('<img src=x onerror=alert(1)> & "quoted"') == (
        '<img src=x onerror=alert(1)> & "quoted"'
    ), "markup is kept as text: the page shows it as text"
    assert clean_title("lone \ud800 surrogate") == "lone surrogate"
    assert clean_title(" \x00\u200b ") is None
    assert clean_title(None) is None
    assert clean_title({"title": "x"}) is None
    long = clean_title("word " * 1000)
    assert long is not None
    assert len(long) == MAX_TITLE_CHARS
    assert long.endswith("\u2026")


def test_hostile_titles_are_cleaned_where_they_are_collected() -> None:
    events = [
        *search(("\u202eevil\x00 listing", "https://a.example/")),
        *read("https://b.example/", "x" * 10_000),
    ]

    [listed, page] = collect(events).sources()

    assert listed.title == "evil listing"
    assert page.title is not None
    assert len(page.title) == MAX_TITLE_CHARS


def test_at_most_the_limit_and_a_page_read_displaces_the_latest_search_result() -> None:
    hits = [(f"T{i}", f"https://s.example/{i}") for i in range(8)]
    events = [
        *search(*hits),
        *read("https://r.example/1", "R1"),
        *read("https://r.example/2", "R2"),
        *search(("late", "https://late.example/")),
    ]

    assert [url for url, _, _ in kept(events, limit=5)] == [
        "https://s.example/0",
        "https://s.example/1",
        "https://s.example/2",
        "https://r.example/1",
        "https://r.example/2",
    ]


def test_when_every_source_is_a_page_read_later_pages_are_left_out() -> None:
    events = [event for i in range(7) for event in read(f"https://r.example/{i}", f"R{i}")]

    assert [url for url, _, _ in kept(events, limit=3)] == [
        "https://r.example/0",
        "https://r.example/1",
        "https://r.example/2",
    ]


def test_the_default_limit_holds_against_a_flood() -> None:
    hits = [(f"T{i}", f"https://s.example/{i}") for i in range(200)]
    events = [*search(*hits[:100]), *search(*hits[100:]), *read("https://r.example/", "R")]

    sources = collect(events).sources()

    assert len(sources) == MAX_SOURCES
    assert sources[-1].url == "https://r.example/"


def test_sources_handed_out_are_copies() -> None:
    collector = SourceCollector()
    for event in search(("Listed", "https://a.example/")):
        collector.see(event)
    before = collector.sources()
    for event in read("https://a.example/", "Read"):
        collector.see(event)

    assert before == [Source(url="https://a.example/", title="Listed", kind="search")]
    assert collector.sources() == [Source(url="https://a.example/", title="Read", kind="read")]
