"""The chat page's approval flow in Chromium: a call that needs a person's approval shows
Approve / Deny on its card, the run pauses, and the decisions continue it in the same reply.

The scripted model calls ``double`` (which needs approval) and ``echo`` (which does not);
the page talks to the real app, which signs the pause and checks the continuation.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.e2e.conftest import (
    OUTPUT,
    WAIT_MS,
    ServeChat,
    chat_bodies,
    open_chat,
    send,
    settings_button,
    wait_for_reply,
)
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG
from tests.sample_tools import double, echo

pytestmark = pytest.mark.e2e

expect.set_options(timeout=WAIT_MS)

APPROVING = TEST_CONFIG.model_copy(update={"approval_tools": ("double",)})
REPLY = "article.assistant"
TOP_ANSWER = "article.assistant > .transcript > .answer"
# The page's conversation state, read from its entry module (the page's own instance of it).
HISTORY = "async () => (await import('/static/app.js')).chat.history"
PENDING = "async () => (await import('/static/app.js')).chat.pending"


def card(page: Page, call_id: str | None) -> Locator:
    assert call_id is not None
    return page.locator(f'.tool-card[data-call-id="{call_id}"]')


def tool_results(request: RecordedRequest) -> dict[str | None, Any]:
    return {
        m["tool_call_id"]: json.loads(m["content"]) for m in request.messages if m["role"] == "tool"
    }


def answer_while_running(page: Page) -> list[str]:
    """The top-level answer as it grows, sampled until the reply stops running."""
    seen: list[str] = []
    deadline = time.monotonic() + WAIT_MS / 1000
    while time.monotonic() < deadline:
        state, text = page.evaluate(
            """() => {
                const reply = [...document.querySelectorAll('article.assistant')].pop();
                const parts = reply.querySelectorAll(':scope > .transcript > .answer');
                return [reply.dataset.state, [...parts].map((a) => a.textContent).join('')];
            }"""
        )
        if state == "running" and (not seen or seen[-1] != text):
            seen.append(text)
        if state != "running":
            break
        page.wait_for_timeout(20)
    return seen


def test_approve_runs_the_call_and_the_answer_streams_in_the_same_reply(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([double, echo], APPROVING)
    asked, echoed = call("double", n=21), call("echo", text="hi")
    answer = "21 doubled is **42**, and echo said hi. " + " ".join(["Checked."] * 30)
    llm.script(
        Reply(text="Let me check.", tool_calls=[asked, echoed]),
        Reply(text=answer, chunk_delay=0.01),
        Reply(text="You are welcome."),
    )
    bodies = chat_bodies(page)
    open_chat(page, server, extra_tools="double, echo")

    send(page, "Double 21 and echo hi.")
    wait_for_reply(page, "paused")

    waiting = card(page, asked.id)
    expect(waiting).to_have_attribute("data-status", "approval")
    expect(waiting.locator(".tool-status")).to_have_text("needs approval")
    expect(waiting.locator(".tool-args")).to_have_text("n: 21")
    expect(card(page, echoed.id)).to_have_attribute("data-status", "done")  # it needed nobody
    expect(card(page, echoed.id).get_by_role("button")).to_have_count(0)
    expect(page.get_by_role("status")).to_have_text("Waiting for your decision on 1 tool call.")
    expect(page.get_by_role("textbox", name="Message")).to_be_disabled()
    expect(page.get_by_role("button", name="Send")).to_be_disabled()
    expect(page.locator(REPLY).last.locator(".meta")).to_contain_text("waiting for your approval")
    assert page.evaluate(PENDING) == [
        {"call_id": asked.id, "name": "double", "arguments": '{"n": 21}', "kind": "approval"}
    ]
    assert page.evaluate(HISTORY) == []  # nothing settled yet
    assert len(llm.requests) == 1
    assert len(bodies) == 1
    page.screenshot(path=str(OUTPUT.joinpath("approval_waiting.png")))

    waiting.get_by_role("button", name="Approve").click()
    grown = answer_while_running(page)
    wait_for_reply(page)

    assert len(grown) >= 2, grown  # it streamed
    assert len(grown[-1]) > len(grown[0]), grown
    expect(page.locator(REPLY)).to_have_count(1)  # the same reply went on
    expect(waiting).to_have_attribute("data-status", "done")
    expect(waiting.locator(".approval-decision")).to_have_text("Approved.")
    expect(waiting.locator(".tool-result pre")).to_contain_text('"result": 42')
    expect(page.locator(TOP_ANSWER).last).to_contain_text("21 doubled is 42, and echo said hi.")
    expect(page.locator(REPLY).last.locator(".meta")).to_contain_text("completed · 2 turns")
    expect(page.get_by_role("status")).to_have_text("Done.")
    order = page.evaluate(
        """() => [...document.querySelector('article.assistant > .transcript').children]
                  .map((n) => n.className + (n.dataset.name ? ':' + n.dataset.name : ''))"""
    )
    assert order == ["answer md", "tool-card:echo", "tool-card:double", "answer md"]

    # The continuation: the conversation and the paused run's messages, the token, the decision.
    first, second = bodies
    assert second["resume"]
    assert second["approvals"] == [{"call_id": asked.id, "approved": True}]
    assert second["messages"][0] == first["messages"][0]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool"]
    assert second["tools"] == first["tools"] == ["double", "echo"]
    results = tool_results(llm.requests[1])
    assert results[asked.id] == {"ok": True, "result": 42}
    assert results[echoed.id] == {"ok": True, "result": "hi"}
    assert [d.stop_reason for d in server.finished] == ["approval_required", "completed"]

    # The conversation goes on from the continued run: the server takes the history back.
    expect(page.get_by_role("textbox", name="Message")).to_be_enabled()
    history = page.evaluate(HISTORY)
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "tool", "assistant"]
    send(page, "Thanks!")
    expect(page.locator(f'{REPLY}[data-state="done"]')).to_have_count(2)
    expect(page.locator(TOP_ANSWER).last).to_have_text("You are welcome.")
    assert "resume" not in bodies[2]
    assert "approvals" not in bodies[2]
    assert [m["role"] for m in llm.requests[2].messages[1:]] == [
        "user", "assistant", "tool", "tool", "assistant", "user"
    ]  # fmt: skip


def test_deny_with_a_reason_and_the_model_reads_the_denial(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([double, echo])  # no approval tools on the server: the page asks
    once, twice = call("double", n=1), call("double", n=2)
    llm.script(
        Reply(tool_calls=[once, twice]),
        Reply(text="You declined doubling 1 (*not that one*), so only 2 was doubled: 4."),
    )
    bodies = chat_bodies(page)
    open_chat(page, server, extra_tools="double")
    settings_button(page).click()
    page.get_by_label("Ask before running").fill("double")
    settings_button(page).click()

    send(page, "Double 1 and 2.")
    wait_for_reply(page, "paused")
    assert bodies[0]["approval_tools"] == ["double"]
    expect(page.get_by_role("status")).to_have_text("Waiting for your decision on 2 tool calls.")

    denied = card(page, once.id)
    denied.get_by_role("textbox", name="Reason for denying double (optional)").fill("not that one")
    denied.get_by_role("button", name="Deny").click()
    expect(denied).to_have_attribute("data-status", "denied")
    expect(denied.locator(".approval-decision")).to_have_text("Denied: not that one")
    # One call is still undecided: nothing is sent, the composer stays off.
    expect(page.get_by_role("status")).to_have_text("Waiting for your decision on 1 tool call.")
    expect(page.get_by_role("textbox", name="Message")).to_be_disabled()
    page.wait_for_timeout(200)
    assert len(bodies) == 1
    assert len(llm.requests) == 1

    card(page, twice.id).get_by_role("button", name="Approve").click()
    wait_for_reply(page)

    assert bodies[1]["approvals"] == [
        {"call_id": once.id, "approved": False, "reason": "not that one"},
        {"call_id": twice.id, "approved": True},
    ]
    results = tool_results(llm.requests[-1])  # what the model read
    assert results[once.id]["ok"] is False
    assert "a person denied this call: not that one" in results[once.id]["error"]
    assert results[twice.id] == {"ok": True, "result": 4}
    expect(denied).to_have_attribute("data-status", "denied")
    expect(denied.locator(".tool-status")).to_have_text("denied")
    expect(denied.locator(".tool-result summary")).to_contain_text(
        re.compile(r"^Error: a person denied this call: not that one")
    )
    expect(card(page, twice.id)).to_have_attribute("data-status", "done")
    expect(page.locator(TOP_ANSWER).last).to_have_text(
        "You declined doubling 1 (not that one), so only 2 was doubled: 4."
    )
    expect(page.get_by_role("textbox", name="Message")).to_be_enabled()


def test_a_new_chat_drops_the_pause(page: Page, serve_chat: ServeChat, llm: ScriptedLLM) -> None:
    server = serve_chat([double], APPROVING)
    llm.script(Reply(tool_calls=[call("double", n=5)]), Reply(text="Hello again."))
    bodies = chat_bodies(page)
    open_chat(page, server, extra_tools="double")

    send(page, "Double 5.")
    wait_for_reply(page, "paused")
    page.get_by_role("button", name="New chat").click()

    expect(page.get_by_role("textbox", name="Message")).to_be_enabled()
    assert page.evaluate(PENDING) == []
    send(page, "Hello?")
    wait_for_reply(page)
    expect(page.locator(TOP_ANSWER).last).to_have_text("Hello again.")
    assert [m["content"] for m in bodies[1]["messages"]] == ["Hello?"]
    assert "resume" not in bodies[1]
