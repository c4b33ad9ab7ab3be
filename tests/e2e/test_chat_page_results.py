"""What the chat page shows of a run's results, in Chromium against the real app and tools.

* ``done.sources`` as links under the answer: the real ``search_web`` (against the local
  Tavily fake) and ``scrape`` (against a loopback page whose title holds markup);
* ``execute_code``'s outcome as terminal output, from the real tool on the local backend;
* the ``unpriced`` notice, said once and quietly where the cost is shown.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Dialog, Page, expect
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentloop.sandbox.settings import SandboxSettings
from agentloop.tools.execute_code import execute_code_tool
from agentloop.tools.scrape import ScrapeSettings, scrape_tool
from agentloop.tools.search import search_web_tool
from tests.e2e.conftest import WAIT_MS, ServeChat, open_chat, send, wait_for_reply
from tests.fakes.loopback import LoopbackServer
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.fakes.search_apis import PAGES as FOUND
from tests.fakes.search_apis import SearchAPIs
from tests.helpers import TEST_CONFIG
from tests.sample_tools import echo

pytestmark = pytest.mark.e2e

expect.set_options(timeout=WAIT_MS)

REPLY = "article.assistant"
HOSTILE_TITLE = "<img src=x onerror=alert(1)> Opening hours</a><b>bold</b>"
HOSTILE_PAGE = (
    "<html><head><title>&lt;img src=x onerror=alert(1)&gt; Opening hours&lt;/a&gt;"
    "&lt;b&gt;bold&lt;/b&gt;</title></head><body><article>"
    + "<p>The cafe opens at nine and closes at five on weekdays, all year round.</p>" * 5
    + "</article></body></html>"
)


@pytest.fixture(scope="module")
def cafe() -> Iterator[str]:
    """A loopback site with one page whose title holds markup."""

    async def hostile(request: Request) -> Response:
        return Response(HOSTILE_PAGE, media_type="text/html; charset=utf-8")

    with LoopbackServer(Starlette(routes=[Route("/cafe", hostile)]), name="cafe") as server:
        yield f"{server.url}/cafe"


@pytest.fixture(scope="module")
def apis() -> Iterator[SearchAPIs]:
    with SearchAPIs() as server:
        yield server


def test_sources_are_links_under_the_answer_and_a_title_stays_text(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM, apis: SearchAPIs, cafe: str
) -> None:
    server = serve_chat(
        [search_web_tool(apis.settings("tavily")), scrape_tool(ScrapeSettings(allow_loopback=True))]
    )
    llm.script(
        Reply(tool_calls=[call("search_web", query="python free threading", count=2)]),
        Reply(tool_calls=[call("scrape", url=cafe)]),
        Reply(text="Free threading drops the GIL; the cafe opens at nine."),
    )
    dialogs: list[str] = []

    def record(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", record)
    open_chat(page, server, tools=("search_web", "scrape"))

    send(page, "What is free threading, and when does the cafe open?")
    wait_for_reply(page)

    reply = page.locator(REPLY).last
    sources = reply.get_by_role("navigation", name="Sources")
    links = sources.get_by_role("link")
    expect(links).to_have_count(3)
    # In the order of first use: the two search results, then the page read.
    expect(links).to_have_text([FOUND[0].title, FOUND[1].title, HOSTILE_TITLE])
    hrefs = [links.nth(i).get_attribute("href") for i in range(3)]
    assert hrefs == [FOUND[0].url, FOUND[1].url, cafe]
    for i in range(3):
        expect(links.nth(i)).to_have_attribute("target", "_blank")
        expect(links.nth(i)).to_have_attribute("rel", "noopener noreferrer")
    # The title's markup is text: nothing was injected, nothing ran.
    assert reply.locator("img, b").count() == 0
    assert sources.locator("a").count() == 3
    assert dialogs == []
    # Below the answer, above the run's figures.
    order = page.evaluate(
        """() => [...document.querySelector('article.assistant').children]
                  .map((n) => n.className || n.tagName.toLowerCase())"""
    )
    assert order == ["transcript", "sources", "meta"]

    # A link opens in a new tab that cannot reach back to the page, and gets no referrer.
    with page.context.expect_page() as opened:
        links.nth(2).click()
    tab = opened.value
    tab.wait_for_load_state()
    assert tab.url == cafe
    assert tab.evaluate("() => [window.opener === null, document.referrer]") == [True, ""]
    tab.close()


def test_a_source_that_is_not_http_is_never_a_link(page: Page, serve_chat: ServeChat) -> None:
    """The page's own rule, whatever the server sends: only http(s) URLs become links."""
    server = serve_chat([])
    page.goto(server.url + "/")
    shown: dict[str, Any] = page.evaluate(
        """async (sources) => {
            const { sourceList } = await import('/static/sources.js');
            const list = sourceList(sources) || document.createElement('ol');
            return {
                hrefs: [...list.querySelectorAll('a')].map((a) => a.getAttribute('href')),
                items: [...list.querySelectorAll('li')].map((li) => li.textContent),
                tags: [...list.querySelectorAll('*')].map((n) => n.tagName.toLowerCase()),
            };
        }""",
        [
            {"url": "javascript:alert(1)", "title": "<img src=x onerror=alert(1)>"},
            {"url": "data:text/html,<script>alert(1)</script>", "title": None},
            {"url": "/relative/path", "title": "relative"},
            {"url": "https://example.org/a?b=1", "title": None},
            {"url": "http://example.com/", "title": "  Example\n  site  "},
            {"title": "no url"},
            "not an object",
        ],
    )
    assert shown["hrefs"] == ["https://example.org/a?b=1", "http://example.com/"]
    assert shown["items"] == [
        "<img src=x onerror=alert(1)>",
        "data:text/html,<script>alert(1)</script>",
        "relative",
        "https://example.org/a?b=1",
        "Example siteexample.com",
    ]
    assert set(shown["tags"]) <= {"p", "ol", "li", "a", "span"}


PROGRAM = """\
import sys
print("first line")
print("  indented <b>not bold</b>")
print("Traceback: something went wrong", file=sys.stderr)
sys.exit(3)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the local sandbox needs Linux")
def test_a_code_result_is_shown_as_terminal_output(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM, tmp_path: Path
) -> None:
    # The real tool on the local backend; the program is this test's own, so it may run
    # without namespaces (the isolation has its own tests).
    sandbox = SandboxSettings(backend="local", tmp_root=str(tmp_path), isolation="unisolated")
    server = serve_chat([execute_code_tool(sandbox)])
    llm.script(
        Reply(tool_calls=[call("execute_code", code=PROGRAM)]),
        Reply(text="The program failed with exit status 3."),
    )
    open_chat(page, server, tools=("execute_code",))

    send(page, "Run it.")
    wait_for_reply(page)

    card = page.locator('.tool-card[data-name="execute_code"]')
    expect(card).to_have_attribute("data-status", "done")  # the call worked; the program failed
    output = card.get_by_role("group", name="program output")
    expect(output).to_be_visible()
    status = output.locator(".terminal-status")
    expect(status).to_have_text(re.compile(r"^exit 3 · \d+(\.\d)? m?s$"))
    expect(status).to_have_attribute("data-failed", "true")
    stdout = output.get_by_label("stdout of the program")
    stderr = output.get_by_label("stderr of the program")
    assert stdout.text_content() == "first line\n  indented <b>not bold</b>\n"
    assert stderr.text_content() == "Traceback: something went wrong\n"
    expect(stdout).to_be_visible()
    expect(stderr).to_be_visible()
    # Terminal text, not a JSON blob: no escapes, no envelope, no markup.
    assert "\\n" not in (output.text_content() or "")
    assert '"exit_code"' not in (card.text_content() or "")
    assert card.locator("b").count() == 0
    expect(card.locator(".tool-result")).to_have_count(0)


def test_a_model_without_a_price_is_said_once_where_the_cost_is(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    unpriced = "groq:no-such-model-in-any-table"
    server = serve_chat([echo], TEST_CONFIG.model_copy(update={"default_model": unpriced}))
    llm.script(
        Reply(tool_calls=[call("echo", text="x")]),
        Reply(text="First answer."),
        Reply(text="Second answer."),
    )
    open_chat(page, server, extra_tools="echo")

    send(page, "One")
    wait_for_reply(page)
    first = page.locator(REPLY).last
    # The run's work and its answer, with nothing about prices heading them.
    expect(first.locator(".note")).to_have_count(0)
    shown = first.locator(":scope > .transcript > *").evaluate_all(
        "(ns) => ns.map((n) => n.className)"
    )
    assert shown == ["tool-card", "answer md"]
    note = first.locator(".meta-note")
    expect(note).to_have_text(f"No price is known for {unpriced}: this request's cost is unknown.")
    cost = first.locator(".meta .cost-unknown")
    expect(cost).to_have_text("cost unknown")
    expect(cost).to_have_attribute("title", re.compile("No price is known"))

    send(page, "Two")
    expect(page.locator(f'{REPLY}[data-state="done"]')).to_have_count(2)
    second = page.locator(REPLY).last
    expect(second.locator(".meta .cost-unknown")).to_have_text("cost unknown")
    expect(second.locator(".meta-note")).to_have_count(0)  # said once
    expect(second.locator(".note")).to_have_count(0)
    expect(page.locator(".meta-note")).to_have_count(1)
