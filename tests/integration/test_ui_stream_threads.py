"""``POST /api/chat`` on threads through the AI SDK's own chat engine (``Chat`` from
``@ai-sdk/react``, what ``useChat`` wraps) sending only the last message, as the AI SDK's
persistence guide shows (``tests/node/ui_thread_client.mjs``): the chat id is the caller's
thread, made by its first request. The scripted model says what the server sent it; a second
principal on the same chat id has a thread of their own. Refusals are plain HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.node_client import run_node
from tests.fakes.scripted_llm import Reply, ScriptedLLM
from tests.integration.thread_faces import OTHER, ThreadedApp, conversation
from tests.served import TOKEN

JSON = dict[str, Any]
CHAT = "kX3fQ9pLm2VtR7aB"
"""A chat id as the AI SDK's generateId makes one."""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ThreadedApp]:
    with ThreadedApp(tmp_path, "ui-stream-threads") as app:
        yield app


def chats(served: ThreadedApp, *cases: JSON) -> list[list[JSON]]:
    """Each case (one ``Chat``, as one page load) run through the AI SDK; its turns."""
    out = run_node("ui_thread_client.mjs", {"url": served.url, "cases": list(cases)})
    return [case["turns"] for case in out["cases"]]


def user(text: str) -> JSON:
    return {"id": f"u-{len(text)}", "role": "user", "parts": [{"type": "text", "text": text}]}


def test_sending_only_the_last_message_keeps_the_chat_on_its_thread(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text="Paris."), Reply(text="About 2.1 million."), Reply(text="The Seine."))
    [turns, reloaded] = chats(
        served,
        {"token": TOKEN, "chatId": CHAT, "turns": ["Capital of France?", "Its population?"]},
        {"token": TOKEN, "chatId": CHAT, "turns": ["And its river?"]},  # a reload: no messages
    )
    for turn in [*turns, *reloaded]:
        assert (turn["status"], turn["error"]) == ("ready", None)
        assert set(turn["sent"]) == {"id", "message"}
        assert turn["sent"]["id"] == CHAT
    assert [m["text"] for m in turns[1]["texts"]] == [
        "Capital of France?",
        "Paris.",
        "Its population?",
        "About 2.1 million.",
    ]
    assert [m["text"] for m in reloaded[0]["texts"]] == ["And its river?", "The Seine."]
    assert [conversation(r)[-1] for r in llm.requests] == [
        ("user", "Capital of France?"),
        ("user", "Its population?"),
        ("user", "And its river?"),
    ]
    earlier = [
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
        ("user", "Its population?"),
        ("assistant", "About 2.1 million."),
    ]
    assert conversation(llm.requests[2]) == [*earlier, ("user", "And its river?")]
    assert served.kept(CHAT) == [*earlier, ("user", "And its river?"), ("assistant", "The Seine.")]


def test_another_principal_on_the_same_chat_id_has_a_thread_of_their_own(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text="Noted, 1234."), Reply(text="I have nothing of yours."))
    chats(served, {"token": TOKEN, "chatId": CHAT, "turns": ["My PIN is 1234."]})
    [theirs] = chats(served, {"token": OTHER, "chatId": CHAT, "turns": ["What is my PIN?"]})
    assert theirs[0]["error"] is None
    assert conversation(llm.requests[1]) == [("user", "What is my PIN?")]
    assert served.kept(CHAT, OTHER) == [
        ("user", "What is my PIN?"),
        ("assistant", "I have nothing of yours."),
    ]
    assert served.kept(CHAT) == [("user", "My PIN is 1234."), ("assistant", "Noted, 1234.")]


def test_the_whole_chat_in_messages_stays_stateless(served: ThreadedApp, llm: ScriptedLLM) -> None:
    llm.script(Reply(text="Hi."))
    body = {"id": CHAT, "messages": [user("Hello")], "trigger": "submit-message"}
    response = served.call("POST", "/api/chat", json=body)
    assert response.status_code == 200, response.text
    assert '"finish"' in response.text
    assert served.kept(CHAT) is None
    assert served.call("GET", "/threads").json()["data"] == []


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"id": CHAT, "message": user("hi"), "messages": [user("hi")]}, "message"),
        ({"message": user("hi")}, "id"),
        ({"id": "new", "message": user("hi")}, "id"),
        ({"id": "a/b", "message": user("hi")}, "id"),
        ({"id": CHAT, "message": {**user("hi"), "role": "assistant"}}, "message.role"),
        ({"id": CHAT, "message": user("hi"), "trigger": "regenerate-message"}, "trigger"),
        (
            {"id": CHAT, "message": user("hi"), "agentloop": {"thread_id": "other"}},
            "agentloop.thread_id",
        ),
        ({"id": CHAT}, "messages"),
    ],
)
def test_bad_thread_bodies_are_422_before_anything_runs(
    served: ThreadedApp, llm: ScriptedLLM, body: JSON, param: str
) -> None:
    response = served.call("POST", "/api/chat", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["param"] == param
    assert llm.requests == []
    assert served.call("GET", "/threads").json()["data"] == []
