"""The chat page's conversations kept on the server (threads), in Chromium, against the app
(its threads in each test's own SQLite store, see conftest) and the scripted model: a
conversation survives a reload, later messages go out alone, the list renames and deletes,
Stop keeps the tool round for "continue", a busy or deleted thread is said, and a server that
cannot keep threads still chats. Pictures of the list and an open conversation at 1280x800
and 390x844 go to ``test-output/screenshots/threads-*.png``."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import WAIT_MS, ServeChat, chat_bodies, open_chat, send, wait_for_reply
from tests.e2e.screenshot import SHOTS, SIZES
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.sample_tools import echo, gate_tool
from tests.served import AUTH, ServedApp

pytestmark = pytest.mark.e2e

expect.set_options(timeout=WAIT_MS)

REPLY = "article.assistant"
ITEMS = "#thread-items .thread-item"


def open_thread_id(page: Page) -> str:
    """The thread the page's address names, once it names one."""
    expect(page).to_have_url(re.compile(r"#thread=th_"))
    return page.url.split("#thread=", 1)[1]


def server_threads(server: ServedApp) -> list[dict[str, Any]]:
    answer = httpx.get(f"{server.url}/threads", headers=AUTH, timeout=10)
    assert answer.status_code == 200, answer.text
    data: list[dict[str, Any]] = answer.json()["data"]
    return data


def test_a_conversation_survives_a_reload_and_goes_on_with_only_the_new_message(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([echo])
    bodies = chat_bodies(page)
    llm.script(
        Reply(text="Let me check.", tool_calls=[call("echo", text="Paris")]),
        Reply(text="The capital of France is **Paris**."),
    )
    open_chat(page, server, extra_tools="echo")
    send(page, "Capital of France?")
    wait_for_reply(page)
    thread_id = open_thread_id(page)
    assert bodies[0]["thread_id"] == "new"
    assert bodies[0]["messages"] == [{"role": "user", "content": "Capital of France?"}]
    item = page.locator(f'{ITEMS}[data-thread-id="{thread_id}"]')
    expect(item).to_have_attribute("aria-current", "true")
    expect(item.locator(".thread-title")).to_have_text("Capital of France?")
    expect(item.locator(".thread-time")).to_have_text("just now")

    page.reload()
    expect(page.locator(".msg.user")).to_have_text(["Capital of France?"])
    saved = page.locator(f'{REPLY}[data-state="saved"]')
    expect(saved).to_have_count(1)
    card = saved.locator('.tool-card[data-name="echo"]')
    expect(card).to_have_attribute("data-status", "done")
    expect(card.locator(".tool-args")).to_have_text('text: "Paris"')
    expect(card.locator(".tool-result pre")).to_contain_text("Paris")
    expect(saved.locator(".answer").last.locator("strong")).to_have_text("Paris")
    expect(page.locator(f'{ITEMS}[aria-current="true"]')).to_have_attribute(
        "data-thread-id", thread_id
    )

    llm.script(Reply(text="About 2.1 million."))
    send(page, "Its population?")
    wait_for_reply(page)
    assert bodies[-1]["thread_id"] == thread_id
    assert bodies[-1]["messages"] == [{"role": "user", "content": "Its population?"}]
    sent = [m for m in llm.requests[-1].messages if m["role"] != "system"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[0]["content"] == "Capital of France?"
    assert "Paris" in sent[2]["content"]
    assert sent[-1]["content"] == "Its population?"
    assert open_thread_id(page) == thread_id


def test_the_list_renames_and_deletes(page: Page, serve_chat: ServeChat, llm: ScriptedLLM) -> None:
    server = serve_chat([])
    llm.script(Reply(text="One."), Reply(text="Two."))
    open_chat(page, server)
    send(page, "First question")
    wait_for_reply(page)
    first = open_thread_id(page)
    page.get_by_role("button", name="New chat").click()
    expect(page).not_to_have_url(re.compile("#thread="))
    send(page, "Second question")
    wait_for_reply(page)
    second = open_thread_id(page)
    expect(page.locator(".thread-title")).to_have_text(["Second question", "First question"])

    page.get_by_role("button", name="Rename “First question”").click()
    box = page.get_by_role("textbox", name="New title")
    expect(box).to_be_focused()
    box.fill("Trip plans")
    box.press("Enter")
    expect(page.locator(".thread-title")).to_have_text(["Second question", "Trip plans"])
    titles = {t["id"]: t["title"] for t in server_threads(server)}
    assert titles == {first: "Trip plans", second: "Second question"}

    # Delete asks once more; Cancel keeps it.
    page.get_by_role("button", name="Delete “Second question”").click()
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator(ITEMS)).to_have_count(2)
    page.get_by_role("button", name="Delete “Second question”").click()
    page.get_by_role("button", name="Delete", exact=True).click()
    expect(page.locator(ITEMS)).to_have_count(1)
    assert [t["id"] for t in server_threads(server)] == [first]
    # It was the open one: the page is a new chat now.
    expect(page).not_to_have_url(re.compile("#thread="))
    expect(page.locator(".msg")).to_have_count(0)

    page.locator(".thread-open").click()
    expect(page.locator(".msg.user")).to_have_text(["First question"])
    assert open_thread_id(page) == first


def test_stop_mid_tool_round_keeps_it_and_continue_goes_on_from_its_result(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    gate = threading.Event()
    server = serve_chat([gate_tool(gate)])
    llm.script(Reply(tool_calls=[call("gate", name="g1")]), Reply(text="Carried on."))
    open_chat(page, server, extra_tools="gate")
    try:
        send(page, "Open the gate, then tell me.")
        expect(page.locator('.tool-card[data-name="gate"]')).to_have_attribute(
            "data-status", "running"
        )
        page.get_by_role("button", name="Stop").click()
        wait_for_reply(page, "stopped")
        alert = page.locator(REPLY).last.get_by_role("alert")
        expect(alert).to_contain_text("send “continue” to go on")
        expect(page.locator(".tool-status")).to_have_text("finishing on the server")
        thread_id = open_thread_id(page)

        # The round still runs on the server: the thread is busy, and the page says so.
        send(page, "continue")
        wait_for_reply(page, "error")
        expect(page.locator(REPLY).last.get_by_role("alert")).to_have_text(
            re.compile("run going on already")
        )
        expect(page.get_by_role("textbox", name="Message")).to_have_value("continue")
    finally:
        gate.set()
    [stopped] = server.runs(1)
    assert stopped.stop_reason == "cancelled"

    page.get_by_role("button", name="Send").click()  # "continue", back in the box
    wait_for_reply(page)
    expect(page.locator(REPLY).last.locator(".answer")).to_have_text("Carried on.")
    sent = llm.requests[-1].messages
    [result] = [m for m in sent if m["role"] == "tool"]
    assert "opened g1" in result["content"]
    calls = [c for m in sent if m["role"] == "assistant" for c in m.get("tool_calls") or ()]
    assert [c["id"] for c in calls] == [result["tool_call_id"]]
    assert sent[-1] == {"role": "user", "content": "continue"}
    assert open_thread_id(page) == thread_id


def test_a_thread_deleted_elsewhere_starts_a_new_chat(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([])
    llm.script(Reply(text="Kept."), Reply(text="A fresh start."))
    open_chat(page, server)
    send(page, "Keep this")
    wait_for_reply(page)
    thread_id = open_thread_id(page)
    gone = httpx.delete(f"{server.url}/threads/{thread_id}", headers=AUTH, timeout=10)
    assert gone.status_code == 200

    send(page, "And now?")
    expect(page.get_by_role("alert")).to_contain_text("no longer there")
    expect(page).not_to_have_url(re.compile("#thread="))
    expect(page.get_by_role("textbox", name="Message")).to_have_value("And now?")
    page.get_by_role("button", name="Send").click()
    wait_for_reply(page)
    assert open_thread_id(page) != thread_id
    assert [m["content"] for m in llm.requests[-1].messages[1:]] == ["And now?"]


def test_without_threads_the_page_chats_in_the_page_and_says_so(
    page: Page,
    serve_chat: ServeChat,
    llm: ScriptedLLM,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "file").write_text("not a folder")  # a store that cannot be opened: 503
    monkeypatch.setenv("AGENTLOOP_STORE", f"sqlite:///{tmp_path / 'file' / 'store.db'}")
    server = serve_chat([])
    bodies = chat_bodies(page)
    llm.script(Reply(text="Hello."), Reply(text="Still here."))
    open_chat(page, server)
    expect(page.locator("#threads-problem")).to_have_text(
        "Saved conversations are unavailable right now: chats are kept in this page only."
    )
    send(page, "Hi")
    wait_for_reply(page)
    send(page, "Again")
    expect(page.locator(f'{REPLY}[data-state="done"]')).to_have_count(2)
    assert all("thread_id" not in body for body in bodies)
    assert [m["content"] for m in bodies[-1]["messages"]] == ["Hi", "Hello.", "Again"]


def test_pictures_of_the_list_and_an_open_conversation(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([echo])
    open_chat(page, server, extra_tools="echo")
    for question in ("Plan a weekend in Lyon", "What is a closure in Python?"):
        llm.script(Reply(text=f"Here is an answer to: {question}"))
        send(page, question)
        wait_for_reply(page)
        page.get_by_role("button", name="New chat").click()
    llm.script(
        Reply(text="I'll ask the echo tool.", tool_calls=[call("echo", text="bonjour")]),
        Reply(text="The echo tool said **bonjour**, so the line works."),
    )
    send(page, "Check that the echo tool answers")
    wait_for_reply(page)
    thread_id = open_thread_id(page)
    page.reload()  # the open conversation as the server keeps it
    expect(page.locator(f'{REPLY}[data-state="saved"]')).to_have_count(1)
    SHOTS.mkdir(parents=True, exist_ok=True)
    for size, (width, height) in SIZES.items():
        page.set_viewport_size({"width": width, "height": height})
        overflow = page.evaluate("() => document.documentElement.scrollWidth - innerWidth")
        assert overflow <= 0, f"{size}: the page scrolls sideways"
        page.screenshot(path=str(SHOTS / f"threads-{size}.png"))
        if width < 600:
            expect(page.locator("#threads")).to_be_hidden()
            page.get_by_role("button", name="Chats").click()
            expect(page.locator(ITEMS)).to_have_count(3)
            expect(page.locator(f'{ITEMS}[aria-current="true"]')).to_have_attribute(
                "data-thread-id", thread_id
            )
            page.screenshot(path=str(SHOTS / f"threads-drawer-{size}.png"))
            page.get_by_role("button", name="Hide").click()
            expect(page.locator("#threads")).to_be_hidden()
        else:
            expect(page.locator(ITEMS)).to_have_count(3)


def test_more_reads_the_next_page_of_the_list(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([])
    llm.respond_with(lambda request: Reply(text="ok"))
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=10) as http:
        for i in range(21):
            body = {"messages": [{"role": "user", "content": f"question {i}"}], "tools": []}
            answer = http.post("/chat", json={**body, "thread_id": "new"})
            assert answer.status_code == 200, answer.text
    open_chat(page, server)
    expect(page.locator(ITEMS)).to_have_count(20)
    expect(page.locator(".thread-title").first).to_have_text("question 20")
    page.get_by_role("button", name="More").click()
    expect(page.locator(ITEMS)).to_have_count(21)
    expect(page.locator(".thread-title").last).to_have_text("question 0")
    expect(page.get_by_role("button", name="More")).to_be_hidden()


def test_a_run_paused_for_approval_goes_on_in_the_page(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    """The server does not continue a paused run inside a thread: the page continues it
    with the whole conversation and its token, and keeps the conversation from then on."""
    server = serve_chat([echo])
    bodies = chat_bodies(page)
    llm.script(
        Reply(tool_calls=[call("echo", text="hi")]),
        Reply(text="Echoed."),
        Reply(text="Next answer."),
    )
    open_chat(page, server, extra_tools="echo")
    page.get_by_role("banner").get_by_role("button", name="Settings").click()
    page.get_by_label("Ask before running").fill("echo")
    page.get_by_role("button", name="Close").click()
    send(page, "Echo hi")
    wait_for_reply(page, "paused")
    thread_id = open_thread_id(page)
    page.get_by_role("button", name="Approve").click()
    wait_for_reply(page)
    expect(page.locator(".page-only")).to_contain_text("goes on in this page only")
    expect(page).not_to_have_url(re.compile("#thread="))
    assert "thread_id" not in bodies[1]
    assert bodies[1]["resume"]
    assert [m["role"] for m in bodies[1]["messages"]] == ["user", "assistant"]

    send(page, "And next?")
    expect(page.locator(f'{REPLY}[data-state="done"]')).to_have_count(2)
    assert "thread_id" not in bodies[2]
    roles = [m["role"] for m in bodies[2]["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
    kept = httpx.get(f"{server.url}/threads/{thread_id}", headers=AUTH, timeout=10).json()
    assert [m["role"] for m in kept["messages"]] == ["user"], "saved without the paused turn"
