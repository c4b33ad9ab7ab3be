"""Where an answer came from: ``done.sources`` through ``/chat``, and ``source-url`` parts
through the ``ai`` package on ``/api/chat``.

The chat app is served on loopback with the real ``search_web`` (against the local Tavily
fake), ``scrape`` (against fixture pages on loopback, one with a hostile title) and
``ask_llm``; the scripted model, driven through the openai SDK, searches, reads a page
through a redirect, fails to read another, and asks a sub-agent that reads the hostile page
and the first page again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentloop.ask_llm import ask_llm_tool
from agentloop.events import Done, Event, event_adapter
from agentloop.sources import collect
from agentloop.tools.base import Tool
from agentloop.tools.scrape import ScrapeSettings, scrape_tool
from agentloop.tools.search import search_web_tool
from tests.fakes.loopback import LoopbackServer
from tests.fakes.node_client import run_node
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.fakes.search_apis import PAGES as FOUND
from tests.fakes.search_apis import SearchAPIs
from tests.helpers import TEST_CONFIG, iter_sse, validate_event
from tests.mcp_session import open_mcp_session
from tests.sample_tools import double
from tests.served import AUTH, TOKEN, ServedApp, make_service

JSON = dict[str, Any]
MODEL = "openai:gpt-4o-mini"
NEWS = (Path(__file__).resolve().parents[1] / "fixtures/pages/news_article/page.html").read_text()
NEWS_TITLE = "Marlow Vale approves floating solar farm on old quarry lake"
HOSTILE_TITLE = (
    "&lt;img src=x onerror=alert(1)&gt; &amp; &lt;/a&gt;\u202egnp.exe\u200b \x07Caf\u00e9 notes"
)
HOSTILE_SHOWN = "<img src=x onerror=alert(1)> & </a> gnp.exe Caf\u00e9 notes"
"""The hostile title as a source: its markup kept as text, the bidi override, zero-width
space and bell gone."""
HOSTILE = (
    f"<html><head><title>{HOSTILE_TITLE}</title></head><body><article>"
    + "<p>The caf\u00e9 opens at nine and closes at five on weekdays, all year.</p>" * 5
    + "</article></body></html>"
)
QUESTION = "What is free threading, and when does the cafe open?"
SUB_QUESTION = "When does the cafe open?"
ANSWER = "Free threading drops the GIL; the cafe opens at nine."
TOOLS = ["search_web", "scrape", "ask_llm"]


def site() -> Starlette:
    async def news(request: Request) -> Response:
        return Response(NEWS, media_type="text/html; charset=utf-8")

    async def moved(request: Request) -> Response:
        return Response(status_code=301, headers={"location": "/news"})

    async def hostile(request: Request) -> Response:
        return Response(HOSTILE.encode(), media_type="text/html; charset=utf-8")

    async def missing(request: Request) -> Response:
        return Response("gone", status_code=404)

    async def plain(request: Request) -> Response:
        return Response("Hello from a page with no title.\n", media_type="text/plain")

    routes = [Route("/news", news), Route("/moved", moved), Route("/cafe", hostile)]
    return Starlette(routes=[*routes, Route("/missing", missing), Route("/plain", plain)])


@pytest.fixture(scope="module")
def pages() -> Iterator[str]:
    with LoopbackServer(site(), name="source-pages") as server:
        yield server.url


@pytest.fixture(scope="module")
def apis() -> Iterator[SearchAPIs]:
    with SearchAPIs() as server:
        yield server


def first_user(request: RecordedRequest) -> str:
    return str(next(m["content"] for m in request.messages if m["role"] == "user"))


def results_read(request: RecordedRequest) -> int:
    return sum(m["role"] == "tool" for m in request.messages)


def researcher(pages: str) -> Callable[[RecordedRequest], Reply]:
    """The model: one step per turn, so the order of first use is the order of the steps."""
    top = [
        call("search_web", query="python free threading", count=3),
        call("scrape", url=f"{pages}/moved"),  # read as {pages}/news
        call("scrape", url=f"{pages}/missing"),  # fails: adds nothing
        call("ask_llm", query=SUB_QUESTION),
    ]
    sub = [call("scrape", url=f"{pages}/cafe"), call("scrape", url=f"{pages}/news")]

    def respond(request: RecordedRequest) -> Reply:
        steps, answer = (sub, "At nine.") if first_user(request) == SUB_QUESTION else (top, ANSWER)
        done = results_read(request)
        return Reply(tool_calls=[steps[done]]) if done < len(steps) else Reply(text=answer)

    return respond


def expected(pages: str) -> list[JSON]:
    return [
        *({"url": p.url, "title": p.title, "kind": "search"} for p in FOUND[:3]),
        {"url": f"{pages}/news", "title": NEWS_TITLE, "kind": "read"},
        {"url": f"{pages}/cafe", "title": HOSTILE_SHOWN, "kind": "read"},
    ]


def serve(tools: list[Tool]) -> ServedApp:
    # lifespan on: /mcp's session manager runs in it
    return ServedApp(make_service(tools, TEST_CONFIG), name="sources-app", lifespan="on")


@pytest.fixture
def app(llm: ScriptedLLM, pages: str, apis: SearchAPIs) -> Iterator[ServedApp]:
    llm.respond_with(researcher(pages))
    tools = [search_web_tool(apis.settings("tavily")), scrape_tool(LOOPBACK), ask_llm_tool()]
    with serve(tools) as served:
        yield served


LOOPBACK = ScrapeSettings(allow_loopback=True)


# -- /chat -----------------------------------------------------------------------------------


def test_done_lists_the_pages_read_and_results_found_sub_agents_included(
    app: ServedApp, pages: str
) -> None:
    body = {"messages": [{"role": "user", "content": QUESTION}], "model": MODEL, "tools": TOOLS}
    with httpx.stream("POST", f"{app.url}/chat", json=body, headers=AUTH, timeout=60) as response:
        assert response.status_code == 200
        events: list[Event] = [
            event_adapter().validate_python(data)
            for kind, data in iter_sse(response.iter_lines())
            if kind != "ping"
        ]
    for event in events:
        validate_event(event)  # the committed schema has the sources
    done = events[-1]
    assert isinstance(done, Done)
    assert done.depth == 0
    assert done.text == ANSWER

    assert [s.model_dump() for s in done.sources] == expected(pages)
    # The sub-agent's reads reached the parent's done: the same list the whole stream gives.
    assert done.sources == collect(events).sources()
    failed = [e for e in events if e.type == "tool_call_result" and not e.ok]
    assert [e.name for e in failed] == ["scrape"], "the 404 page was tried, and left out"
    assert any(e.depth == 1 and e.type == "tool_call_result" for e in events)


# -- /api/chat through the ai package ---------------------------------------------------------


def source_parts(message: JSON) -> list[JSON]:
    return [p for p in message["parts"] if p["type"] == "source-url"]


def test_source_url_parts_follow_the_answer(app: ServedApp, pages: str) -> None:
    body = {"model": MODEL, "agentloop": {"tools": TOOLS}}
    [[turn]] = [
        case["turns"]
        for case in run_node(
            "ui_stream_client.mjs",
            {"url": app.url, "token": TOKEN, "cases": [{"body": body, "turns": [QUESTION]}]},
        )["cases"]
    ]
    assert turn["errors"] == []
    assert turn["thrown"] is None
    message = turn["message"]
    done = app.done_of_message(message)

    parts = source_parts(message)
    assert [{"url": p["url"], "title": p["title"]} for p in parts] == [
        {"url": s["url"], "title": s["title"]} for s in expected(pages)
    ]
    assert [(s.url, s.title) for s in done.sources] == [(p["url"], p["title"]) for p in parts]
    assert len({p["sourceId"] for p in parts}) == len(parts)
    kinds = [p["type"] for p in message["parts"]]
    last_text = max(i for i, kind in enumerate(kinds) if kind == "text")
    assert kinds[last_text + 1 : last_text + 1 + len(parts)] == ["source-url"] * len(parts)
    assert "".join(p["text"] for p in message["parts"][last_text:] if p["type"] == "text") == (
        ANSWER
    )


def test_a_source_without_a_title_has_none_in_its_part(llm: ScriptedLLM, pages: str) -> None:
    llm.script(
        Reply(tool_calls=[call("scrape", url=f"{pages}/plain")]), Reply(text="It says hello.")
    )
    with serve([scrape_tool(LOOPBACK)]) as served:
        out = run_node(
            "ui_stream_client.mjs",
            {
                "url": served.url,
                "token": TOKEN,
                "cases": [{"body": {"model": MODEL}, "turns": ["What does it say?"]}],
            },
        )
    [[turn]] = [case["turns"] for case in out["cases"]]
    [part] = source_parts(turn["message"])
    assert part["url"] == f"{pages}/plain"
    assert "title" not in part, "the SDK's title is an optional string: left out, not null"


def test_a_continued_answer_adds_only_the_sources_its_message_lacks(
    llm: ScriptedLLM, pages: str
) -> None:
    """Paused for approval after reading one page, the answer's message shows that source;
    the continuation reads it again and one more: the message gets the new one only."""
    steps = [
        [call("scrape", url=f"{pages}/news"), call("double", n=21)],  # double waits
        [call("scrape", url=f"{pages}/moved")],  # the same page again, through a redirect
        [call("scrape", url=f"{pages}/cafe")],
    ]

    def respond(request: RecordedRequest) -> Reply:
        done = results_read(request)
        step = {0: 0, 2: 1, 3: 2}.get(done)
        return Reply(tool_calls=steps[step]) if step is not None else Reply(text=ANSWER)

    llm.respond_with(respond)
    body = {"model": MODEL, "agentloop": {"tools": ["scrape", "double"]}}
    body["agentloop"]["approval_tools"] = ["double"]
    case = {
        "name": "sources",
        "body": body,
        "question": QUESTION,
        "decisions": [{"approved": True}],
    }
    with serve([scrape_tool(LOOPBACK), double]) as served:
        out = run_node(
            "ui_approval_client.mjs", {"url": served.url, "token": TOKEN, "cases": [case]}
        )
        record = out["cases"]["sources"]
        assert record["errors"] == []
        paused, final = record["paused"][-1], record["final"][-1]
        dones = served.runs(2)

    news = {"url": f"{pages}/news", "title": NEWS_TITLE}
    cafe = {"url": f"{pages}/cafe", "title": HOSTILE_SHOWN}
    assert [s.stop_reason for s in dones] == ["approval_required", "completed"]
    assert [s.model_dump(exclude={"kind"}) for s in dones[0].sources] == [news]
    assert [s.model_dump(exclude={"kind"}) for s in dones[1].sources] == [news, cafe]
    shown = [{"url": p["url"], "title": p["title"]} for p in source_parts(paused)]
    assert shown == [news]
    shown = [{"url": p["url"], "title": p["title"]} for p in source_parts(final)]
    assert shown == [news, cafe], "each page once in the message, in order of first use"
    assert final["parts"][-1]["type"] == "source-url"


# -- the other faces: where their protocol has a place for them -------------------------------


def test_ag_ui_run_finished_result_has_the_sources(app: ServedApp, pages: str) -> None:
    params = {"forwardedProps": {"agentloop": {"model": MODEL, "tools": TOOLS}}}
    case = {"name": "sources", "turns": [{"user": QUESTION, "params": params}]}
    out = run_node("ag_ui_client.mjs", {"url": app.url, "token": TOKEN, "cases": [case]})

    [record] = out["cases"]["sources"]
    assert record["finished"]["outcome"] == "success"
    assert record["result"]["sources"] == expected(pages)


async def test_mcp_ask_result_has_the_sources(app: ServedApp, pages: str) -> None:
    async with open_mcp_session(app.url) as session:
        result = await session.call_tool("ask", {"question": QUESTION, "tools": TOOLS})

    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["sources"] == expected(pages)
