"""The reference chat page (``GET /``) in Chromium, against the app and the scripted model."""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agentloop.ask_llm import ask_llm_tool
from tests.e2e.conftest import (
    OUTPUT,
    TOKEN,
    WAIT_MS,
    ServeChat,
    open_chat,
    send,
    settings_button,
    wait_for_reply,
)
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.sample_tools import echo, gate_tool

pytestmark = pytest.mark.e2e

expect.set_options(timeout=WAIT_MS)

REPLY = "article.assistant"
TOP_ANSWER = "article.assistant > .transcript > .answer"
# The page's conversation state, read from its entry module (the page's own instance of it).
HISTORY = "async () => (await import('/static/app.js')).chat.history"


def reply_snapshot(page: Page) -> tuple[str | None, str]:
    """(state, text of the top-level answer) of the latest reply, read in one go."""
    state, text = page.evaluate(
        """() => {
            const reply = [...document.querySelectorAll('article.assistant')].pop();
            if (!reply) return [null, ''];
            const answers = reply.querySelectorAll(':scope > .transcript > .answer');
            return [reply.dataset.state, [...answers].map((a) => a.textContent).join('')];
        }"""
    )
    return state, text


ANSWER = (
    "# Paris\n\n"
    "The capital of France is **Paris**, on the *Seine*; it has been the capital for most "
    "of the last thousand years, with a short break during the war.\n\n"
    "- population: about 2.1 million\n"
    "- best known for `the Eiffel Tower`\n\n"
    "```python\nprint('bonjour')\n```\n\n"
    "Raw <b>markup</b> stays text."
)


def test_a_streamed_answer_appears_progressively(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([])
    llm.script(Reply(text=ANSWER, chunk_delay=0.02))
    open_chat(page, server)

    send(page, "What is the capital of France?")
    observed: list[str] = []
    deadline = time.monotonic() + WAIT_MS / 1000
    while time.monotonic() < deadline:
        state, text = reply_snapshot(page)
        if state == "running" and text and (not observed or observed[-1] != text):
            observed.append(text)
        if state not in (None, "running"):
            break
        page.wait_for_timeout(25)

    assert len(observed) >= 2, f"the answer did not grow while streaming: {observed}"
    assert len(observed[-1]) > len(observed[0])
    wait_for_reply(page)
    reply = page.locator(REPLY).last
    answer = page.locator(TOP_ANSWER).last
    expect(answer.locator("h1")).to_have_text("Paris")
    expect(answer.locator("strong")).to_have_text("Paris")
    expect(answer.locator("em")).to_have_text("Seine")
    expect(answer.locator("li")).to_have_count(2)
    expect(answer.locator("li code")).to_have_text("the Eiffel Tower")
    expect(answer.locator("pre code.language-python")).to_have_text("print('bonjour')")
    expect(answer.locator("b")).to_have_count(0)
    expect(answer).to_contain_text("Raw <b>markup</b> stays text.")
    expect(reply.locator(".meta")).to_contain_text(re.compile(r"completed · 1 turn · [\d,]+ tok"))
    expect(reply.locator(".meta")).to_contain_text("left in budget")
    expect(page.get_by_role("status")).to_have_text("Done.")
    history = page.evaluate(HISTORY)
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert history[1]["content"] == ANSWER
    # The user message went out with the server's defaults and the chosen tools only.
    [request] = llm.requests
    assert request.messages[-1] == {"role": "user", "content": "What is the capital of France?"}

    # A narrow screen: nothing sticks out sideways, the composer stays usable.
    page.set_viewport_size({"width": 380, "height": 760})
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    expect(page.get_by_role("button", name="Stop")).to_be_visible()


def test_a_cut_and_retried_turn_shows_only_the_retried_text(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([])
    llm.script(
        Reply(text="Half of a first attempt that the line cuts off here", cut_after=5),
        Reply(text="The retried answer, whole."),
    )
    open_chat(page, server)

    send(page, "Tell me.")
    wait_for_reply(page)

    expect(page.locator(TOP_ANSWER)).to_have_text("The retried answer, whole.")
    history = page.evaluate(HISTORY)
    assert history[-1] == {"role": "assistant", "content": "The retried answer, whole."}
    assert len(llm.requests) == 2


def test_a_tool_card_goes_from_running_to_done(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    gate = threading.Event()
    server = serve_chat([gate_tool(gate)])
    llm.script(
        Reply(text="Let me open the gate.", tool_calls=[call("gate", name="g1")]),
        Reply(text="The gate is **open**."),
    )
    open_chat(page, server, extra_tools="gate")

    try:
        send(page, "Open the gate")
        card = page.locator('.tool-card[data-name="gate"]')
        expect(card).to_have_attribute("data-status", "running")
        expect(card.locator(".tool-status")).to_have_text("running")
        expect(card.locator(".tool-args")).to_have_text('name: "g1"')
        expect(page.get_by_role("button", name="Stop")).to_be_enabled()
        page.screenshot(path=str(OUTPUT.joinpath("tool_card_running.png")))
    finally:
        gate.set()

    expect(card).to_have_attribute("data-status", "done")
    expect(card.locator(".tool-status")).to_have_text("done")
    expect(card.locator(".tool-duration")).to_have_text(re.compile(r"^\d+(\.\d)? m?s$"))
    result = card.locator(".tool-result")
    expect(result.locator("pre")).not_to_be_visible()  # collapsed until asked for
    result.locator("summary").click()
    expect(result.locator("pre")).to_be_visible()
    expect(result.locator("pre")).to_contain_text("opened g1")
    wait_for_reply(page)
    expect(page.locator(TOP_ANSWER).last).to_have_text("The gate is open.")
    # Text before the tool call, the card, then the answer: in the order they happened.
    order = page.evaluate(
        """() => [...document.querySelector('article.assistant > .transcript').children]
                  .map((n) => n.className)"""
    )
    assert order == ["answer md", "tool-card", "answer md"]
    expect(page.get_by_role("button", name="Stop")).to_be_disabled()


def test_sub_agent_work_is_nested_under_its_ask_llm_call(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([ask_llm_tool(), echo])
    llm.script(
        Reply(tool_calls=[call("ask_llm", query="What does echo say?")]),  # top level
        Reply(tool_calls=[call("echo", text="nested hello")]),  # the sub-agent
        Reply(text="The echo said nested hello."),  # the sub-agent's answer
        Reply(text="The sub-agent heard **nested hello**."),  # top level, final
    )
    open_chat(page, server, tools=("ask_llm",), extra_tools="echo")

    send(page, "Ask a sub-agent what echo says")
    wait_for_reply(page)

    top_cards = page.locator("article.assistant > .transcript > .tool-card")
    expect(top_cards).to_have_count(1)
    parent = top_cards.first
    expect(parent).to_have_attribute("data-name", "ask_llm")
    expect(parent).to_have_attribute("data-status", "done")
    expect(parent.locator(".subagent-query")).to_have_text("Sub-agent: What does echo say?")
    nested = parent.locator(".subagent .tool-card")
    expect(nested).to_have_count(1)
    expect(nested).to_have_attribute("data-name", "echo")
    expect(nested).to_have_attribute("data-depth", "1")
    expect(nested).to_have_attribute("data-status", "done")
    expect(nested.locator(".tool-args")).to_have_text('text: "nested hello"')
    expect(parent.locator(".transcript.sub > .answer")).to_have_text("The echo said nested hello.")
    expect(parent.locator(".subagent-meta")).to_contain_text("completed · 2 turns")
    expect(page.locator(TOP_ANSWER).last).to_have_text("The sub-agent heard nested hello.")
    expect(page.locator(REPLY).last.locator(".meta")).to_contain_text("by sub-agents")


def test_stop_ends_the_run_and_the_server_records_cancelled(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve_chat([])
    long_answer = " ".join(f"word{i}" for i in range(400))
    llm.script(Reply(text=long_answer, chunk_delay=0.05))  # 20 s if nobody stops it
    open_chat(page, server)

    with caplog.at_level(logging.INFO, logger="agentloop.chat_app"):
        send(page, "Talk for a long time")
        expect(page.locator(TOP_ANSWER).last).to_contain_text("word3")
        page.get_by_role("button", name="Stop").click()
        wait_for_reply(page, "stopped")
        [done] = server.runs(1)
    assert done.stop_reason == "cancelled"
    finished = [r for r in caplog.records if r.getMessage() == "run finished"]
    assert [getattr(r, "stop_reason", None) for r in finished] == ["cancelled"]

    reply = page.locator(REPLY).last
    expect(reply.get_by_role("alert")).to_contain_text("Stopped.")
    expect(page.get_by_role("status")).to_have_text("Stopped.")
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    expect(page.get_by_role("button", name="Stop")).to_be_disabled()
    state, shown = reply_snapshot(page)
    assert state == "stopped"
    assert "word399" not in shown
    # What was shown stays part of the conversation.
    history = page.evaluate(HISTORY)
    assert history[-1] == {"role": "assistant", "content": shown.strip()}


def test_a_wrong_token_shows_the_401_message(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([])
    open_chat(page, server, token="not-the-token")

    send(page, "hello")
    wait_for_reply(page, "error")

    alert = page.locator(REPLY).last.get_by_role("alert")
    expect(alert).to_have_text(
        "Not authorized (HTTP 401): invalid token. Check the bearer token in Settings."
    )
    expect(page.get_by_role("status")).to_contain_text("invalid token")
    # The message is not part of the conversation: it is back in the box, to resend.
    expect(page.get_by_role("textbox", name="Message")).to_have_value("hello")
    assert llm.requests == []
    assert page.evaluate(HISTORY) == []


def test_continue_after_the_iteration_limit(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([echo])
    llm.script(
        Reply(tool_calls=[call("echo", text="first step")]),  # the one iteration allowed
        Reply(text="Halfway there."),  # the answer written at the limit (no tools)
        Reply(text="Both steps are done."),  # after "continue"
    )
    open_chat(page, server, extra_tools="echo", max_iterations=1)

    send(page, "Do two steps")
    wait_for_reply(page)
    first = page.locator(REPLY).last
    expect(first.locator(".note-notice")).to_have_text(
        "Reached the limit of 1 tool iterations; send a message to continue."
    )
    expect(first.locator(".meta")).to_contain_text("stopped at the iteration limit")

    send(page, "continue")
    expect(page.locator(f'{REPLY}[data-state="done"]')).to_have_count(2)
    expect(page.locator(TOP_ANSWER).last).to_have_text("Both steps are done.")

    [second] = [r for r in llm.requests if r.messages[-1].get("content") == "continue"]
    body: dict[str, Any] = second.body
    messages = body["messages"]
    calls = [m for m in messages if m["role"] == "assistant" and m.get("tool_calls")]
    assert len(calls) == 1
    [tool_call] = calls[0]["tool_calls"]
    assert tool_call["function"]["name"] == "echo"
    assert "first step" in tool_call["function"]["arguments"]
    [result] = [m for m in messages if m["role"] == "tool"]
    assert result["tool_call_id"] == tool_call["id"]
    assert "first step" in result["content"]
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert users == ["Do two steps", "continue"]


def test_markdown_never_turns_text_into_markup(page: Page, serve_chat: ServeChat) -> None:
    server = serve_chat([])
    page.goto(server.url + "/")
    rendered = page.evaluate(
        """async (source) => {
            const { renderMarkdown } = await import('/static/markdown.js');
            const root = renderMarkdown(source, document.createElement('div'));
            return {
                html: root.innerHTML,
                hrefs: [...root.querySelectorAll('a')].map((a) => a.getAttribute('href')),
                tags: [...root.querySelectorAll('*')].map((n) => n.tagName.toLowerCase()),
            };
        }""",
        "<img src=x onerror=alert(1)> [click](javascript:alert(1)) "
        "[ok](https://example.com/a_(b)) <script>x</script> https://example.org/x.\n\n"
        "1. one\n   - nested *item*\n2. two\n\n| a | b |\n|---|--:|\n| `x` | **2** |\n",
    )
    assert rendered["hrefs"] == ["https://example.com/a_(b)", "https://example.org/x"]
    assert "img" not in rendered["tags"]
    assert "script" not in rendered["tags"]
    assert "&lt;img src=x onerror=alert(1)&gt;" in rendered["html"]
    for tag in ("ol", "ul", "em", "table", "th", "td", "code", "strong"):
        assert tag in rendered["tags"], tag


def test_errors_are_readable(page: Page, serve_chat: ServeChat, llm: ScriptedLLM) -> None:
    server = serve_chat([echo])
    page.goto(server.url + "/")
    settings_button(page).click()
    page.get_by_label("Bearer token").fill(TOKEN)

    # The default tool choice names tools this server does not have: 422, naming them.
    send(page, "hello")
    wait_for_reply(page, "error")
    expect(page.locator(REPLY).last.get_by_role("alert")).to_have_text(
        re.compile(
            r"^Request rejected \(HTTP 422\): unknown tool\(s\) "
            r"\['search_web', 'scrape', 'execute_code'\]; available: echo\. "
            r"Change the tools in Settings\.\s*$"
        )
    )

    # Nobody listening at the endpoint: a network error, said plainly.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    page.get_by_label("Endpoint URL").fill(closed)
    for name in ("search_web", "scrape", "execute_code"):
        page.get_by_role("checkbox", name=name).uncheck()
    page.get_by_role("textbox", name="Message").fill("")
    send(page, "hello again")
    expect(page.locator(f'{REPLY}[data-state="error"]')).to_have_count(2)
    expect(page.locator(REPLY).last.get_by_role("alert")).to_contain_text(
        f"Could not reach the server: {closed}/chat did not answer"
    )

    # The provider fails mid-run: an error event, shown in the answer; the run still ends.
    page.get_by_label("Endpoint URL").fill("")
    llm.respond_with(lambda request: Reply(status=400, error_message="the model is on fire"))
    box = page.get_by_role("textbox", name="Message")
    box.fill("")
    box.type("first line")
    box.press("Shift+Enter")
    box.type("second line")
    box.press("Enter")
    wait_for_reply(page)
    note = page.locator(REPLY).last.locator(".note-error")
    expect(note).to_contain_text("Model provider error:")
    expect(note).to_contain_text("the model is on fire")
    expect(page.locator(REPLY).last.locator(".meta")).to_contain_text("ended with an error")
    assert llm.requests[0].messages[-1]["content"] == "first line\nsecond line"
    assert server.finished[-1].stop_reason == "error"


# The page's SSE reader over a stream of the given text: the (type, data) it hands on.
READ_EVENTS = """async (text) => {
    const { readJsonEvents } = await import('/static/sse.js');
    const body = new Response(text).body;
    const seen = [];
    await readJsonEvents(body, (type, data) => seen.push([type, data]));
    return seen;
}"""


def test_event_data_that_is_no_json_object_is_skipped(page: Page, serve_chat: ServeChat) -> None:
    server = serve_chat([])
    page.goto(server.url + "/")
    stream = (
        "event: text_delta\ndata: null\n\n"
        "event: text_delta\ndata: 7\n\n"
        'event: text_delta\ndata: "hi"\n\n'
        "event: text_delta\ndata: [1]\n\n"
        "event: text_delta\ndata: {not json\n\n"
        'event: text_delta\ndata: {"text": "ok"}\n\n'
    )
    assert page.evaluate(READ_EVENTS, stream) == [["text_delta", {"text": "ok"}]]
