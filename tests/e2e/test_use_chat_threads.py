"""A React ``useChat`` page on a chat the server keeps, in Chromium (issue 27's acceptance).

The page is ``tests/node/use_chat_page`` with ``?chat=<id>`` (``ThreadApp.jsx``): ``useChat``
with that id, a ``DefaultChatTransport`` whose ``prepareSendMessagesRequest`` sends only the
last message (``{id, message, agentloop: {resumable: true}}``), ``resume: true``, and the
earlier messages loaded from ``GET /threads/{id}``. It is bundled and served as in
``test_use_chat.py`` (whose fixtures these tests use): the same app, store and browser.
"""

from __future__ import annotations

import json
import secrets
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, Response, expect

from tests.e2e import test_use_chat as use_chat
from tests.e2e.conftest import OUTPUT, WAIT_MS, chat_bodies
from tests.e2e.test_use_chat import PAGE_PREFIX, ServeUseChat, UseChatServer, send, wait_finished
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.integration.thread_faces import conversation
from tests.sample_tools import echo
from tests.served import TOKEN

pytestmark = pytest.mark.e2e

expect.set_options(timeout=WAIT_MS)

# The page's fixtures: the bundle (once per module) and the app with the page in front.
use_chat_bundle = use_chat.use_chat_bundle
serve_use_chat = use_chat.serve_use_chat

ANSWER = " ".join(f"part{i}" for i in range(60))
"""The answer the reload interrupts: 60 chunks 50 ms apart, about three seconds."""


def thread_page_url(server: UseChatServer, chat_id: str) -> str:
    """The page in its thread mode on ``chat_id``, told its token in the fragment."""
    config = quote(json.dumps({"token": TOKEN}))
    return f"{server.url}{PAGE_PREFIX}?chat={chat_id}#{config}"


def new_chat_id() -> str:
    """A chat id as a client makes one: 128 random bits."""
    return "chat_" + secrets.token_hex(16)


def shown(page: Page) -> list[tuple[str, str]]:
    """The page's messages as (role, text of its text parts)."""
    found: list[list[str]] = page.evaluate(
        """() => [...document.querySelectorAll('article.message')].map((m) => [
            m.dataset.role,
            [...m.querySelectorAll(':scope > .text')].map((t) => t.textContent).join(''),
        ])"""
    )
    return [(role, text) for role, text in found]


def stream_answers(page: Page, chat_id: str) -> list[int]:
    """The statuses of the page's ``GET /api/chat/{id}/stream`` (useChat's resume), in order."""
    statuses: list[int] = []

    def answered(response: Response) -> None:
        if response.url.endswith(f"/api/chat/{chat_id}/stream"):
            statuses.append(response.status)

    page.on("response", answered)
    return statuses


def test_three_turns_send_only_the_last_message_and_a_reload_shows_the_thread(
    page: Page, serve_use_chat: ServeUseChat, llm: ScriptedLLM
) -> None:
    server = serve_use_chat([echo])
    chat_id = new_chat_id()
    llm.script(
        Reply(tool_calls=[call("echo", text="one")]),
        Reply(text="Echo said one."),
        Reply(text="Two it is."),
        Reply(text="Three, and done."),
    )
    bodies = chat_bodies(page, "/api/chat")
    resumes = stream_answers(page, chat_id)
    page.goto(thread_page_url(server, chat_id))
    expect(page.get_by_role("status")).to_have_text("ready")  # a new chat: a 404, then empty

    turns = ["Say one with echo", "Now two", "And three"]
    for count, text in enumerate(turns, start=1):
        send(page, text)
        assert wait_finished(page, count)["finishReason"] == "stop"
    expect(page.get_by_role("alert")).to_have_count(0)
    answers = ["Echo said one.", "Two it is.", "Three, and done."]
    expected = [
        pair
        for asked, said in zip(turns, answers, strict=True)
        for pair in (("user", asked), ("assistant", said))
    ]
    assert shown(page) == expected

    # Each body holds the chat id and only the new message, never the conversation.
    assert len(bodies) == 3
    for body, text in zip(bodies, turns, strict=True):
        assert set(body) == {"id", "message", "agentloop"}
        assert body["id"] == chat_id
        assert body["agentloop"] == {"resumable": True}
        assert body["message"]["role"] == "user"
        assert body["message"]["parts"] == [{"type": "text", "text": text}]
    # ... and the server put the thread's turns before it: the model's last request has them.
    assert conversation(llm.requests[3]) == [
        ("user", turns[0]),
        ("assistant", ""),  # the echo call
        ("tool", str(llm.requests[1].messages[-1]["content"])),  # echo's result, as made
        ("assistant", answers[0]),
        ("user", turns[1]),
        ("assistant", answers[1]),
        ("user", turns[2]),
    ]
    assert [d.stop_reason for d in server.finished.wait(3)] == ["completed"] * 3
    assert resumes == []  # a new chat has nothing to resume: the page did not ask

    live_tool = page.locator("section.tool").inner_text()

    # A reload: the page loads the thread (GET /threads/{id}), nothing is running to resume.
    page.reload()
    expect(page.get_by_role("status")).to_have_text("ready")
    expect(page.locator("article.message")).to_have_count(6)
    assert shown(page) == expected
    tool = page.locator("section.tool")
    expect(tool).to_have_count(1)
    expect(tool).to_have_attribute("data-tool", "echo")
    expect(tool).to_have_attribute("data-state", "output-available")
    assert json.loads(tool.locator(".tool-input").inner_text()) == {"text": "one"}
    assert tool.inner_text() == live_tool  # the kept call and result, shown as streamed
    assert resumes == [204]  # the reloaded page asked; nothing was running
    expect(page.get_by_role("alert")).to_have_count(0)


def test_a_reload_in_the_middle_of_an_answer_resumes_it(
    page: Page, serve_use_chat: ServeUseChat, llm: ScriptedLLM
) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    server = serve_use_chat([])
    chat_id = new_chat_id()
    llm.script(Reply(text="Hello."), Reply(text=ANSWER, chunk_delay=0.05))
    resumes = stream_answers(page, chat_id)
    page.goto(thread_page_url(server, chat_id))
    send(page, "Hi")
    assert wait_finished(page, 1)["finishReason"] == "stop"
    send(page, "Count to sixty")
    reply = page.locator('article.message[data-role="assistant"]').last
    expect(reply.locator(".text")).to_contain_text("part3")
    assert "part59" not in (reply.text_content() or "")

    page.reload()  # the answer is still being written
    assert wait_finished(page, 1) == {
        "finishReason": "stop",
        "isAbort": False,
        "isError": False,
        "isDisconnect": False,
    }
    expect(page.get_by_role("status")).to_have_text("ready")
    expect(page.get_by_role("alert")).to_have_count(0)
    assert resumes == [200]  # the reloaded page found the run in flight and replayed it
    assert shown(page) == [  # the thread (the question kept as its run started), then the
        ("user", "Hi"),  # resumed answer, whole and once
        ("assistant", "Hello."),
        ("user", "Count to sixty"),
        ("assistant", ANSWER),
    ]
    first, second = server.finished.wait(2)
    assert (first.stop_reason, second.stop_reason) == ("completed", "completed")
    assert second.text == ANSWER  # the reload cancelled nothing
    OUTPUT.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUTPUT / "use_chat_resumed.png"))

    # The resumed run was kept: the next turn goes on from it.
    llm.script(Reply(text="Sixty it was."))
    send(page, "Thanks")
    assert wait_finished(page, 2)["finishReason"] == "stop"
    assert conversation(llm.requests[2])[-3:] == [
        ("user", "Count to sixty"),
        ("assistant", ANSWER),
        ("user", "Thanks"),
    ]
