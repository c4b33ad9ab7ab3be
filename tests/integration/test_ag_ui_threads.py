"""``POST /ag-ui`` on threads through ``@ag-ui/client``'s ``HttpAgent``
(``tests/node/ag_ui_thread_client.mjs``), opted in with ``forwardedProps.agentloop.thread_id``
set to the run's ``threadId``: the agent sends its whole message list every run, the server
keeps the thread (authoritative) and takes as new the turn after the last assistant or tool
message. A second principal on the same threadId has a thread of their own. Refusals are
plain HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.node_client import run_node
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.integration.thread_faces import OTHER, ThreadedApp, conversation
from tests.sample_tools import echo
from tests.served import TOKEN

JSON = dict[str, Any]
THREAD = "3f2c9a4e-8b1d-4c6f-9e7a-5d0b1c2e3f4a"
"""A threadId as HttpAgent makes one (a UUID)."""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ThreadedApp]:
    with ThreadedApp(tmp_path, "ag-ui-threads", [echo]) as app:
        yield app


def runs(served: ThreadedApp, *cases: JSON) -> list[list[JSON]]:
    """Each case (one HttpAgent on its threadId) run through @ag-ui/client; its runs."""
    out = run_node("ag_ui_thread_client.mjs", {"url": served.url, "cases": list(cases)})
    return [list(turns) for turns in out["cases"]]


def ok(turn: JSON) -> None:
    assert (turn["runErrors"], turn["failed"], turn["thrown"]) == ([], None, None), turn


def test_runs_on_one_thread_id_keep_the_conversation_once(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    llm.script(
        Reply(text="Paris."),
        Reply(text="Echoing.", tool_calls=[call("echo", text="hi")]),
        Reply(text="Echoed hi."),
        Reply(text="The Seine."),
    )
    asked = ["Capital of France?", "Echo hi.", "And its river?"]
    [turns] = runs(served, {"token": TOKEN, "threadId": THREAD, "turns": asked})
    for turn in turns:
        ok(turn)
    assert [len(turn["sent"]) for turn in turns] == [1, 3, 7]  # the whole list, every run
    kept = served.kept(THREAD)
    assert kept is not None
    assert [text for role, text in kept if role == "user"] == asked
    last = conversation(llm.requests[-1])
    assert last == kept[:-1]  # the model saw the thread, each message once
    assert [role for role, _ in last] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert kept[-1] == ("assistant", "The Seine.")


def test_another_principal_on_the_same_thread_id_has_a_thread_of_their_own(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text="Noted, 1234."), Reply(text="I have nothing of yours."))
    [mine] = runs(served, {"token": TOKEN, "threadId": THREAD, "turns": ["My PIN is 1234."]})
    [theirs] = runs(served, {"token": OTHER, "threadId": THREAD, "turns": ["What is my PIN?"]})
    ok(mine[0])
    ok(theirs[0])
    assert conversation(llm.requests[1]) == [("user", "What is my PIN?")]
    assert served.kept(THREAD, OTHER) == [
        ("user", "What is my PIN?"),
        ("assistant", "I have nothing of yours."),
    ]
    assert served.kept(THREAD) == [("user", "My PIN is 1234."), ("assistant", "Noted, 1234.")]


def run_input(**fields: Any) -> JSON:
    messages = [{"id": "u1", "role": "user", "content": "hi"}]
    props = {"agentloop": {"thread_id": THREAD}}
    return {"threadId": THREAD, "runId": "r1", "messages": messages, "forwardedProps": props} | (
        fields
    )


def test_without_thread_id_nothing_is_kept(served: ThreadedApp, llm: ScriptedLLM) -> None:
    llm.script(Reply(text="Hi."))
    response = served.call("POST", "/ag-ui", json=run_input(forwardedProps={}))
    assert response.status_code == 200, response.text
    assert "RUN_FINISHED" in response.text
    assert served.kept(THREAD) is None


RESUME = [{"interruptId": "c1", "status": "cancelled", "metadata": {"agentloop": {"resume": "t"}}}]


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        (
            {"forwardedProps": {"agentloop": {"thread_id": "other"}}},
            "forwardedProps.agentloop.thread_id",
        ),
        (
            {"threadId": "new", "forwardedProps": {"agentloop": {"thread_id": "new"}}},
            "forwardedProps.agentloop.thread_id",
        ),
        ({"resume": RESUME}, "resume"),
        ({"context": [{"description": "page", "value": "home"}]}, "context"),
        ({"messages": [{"id": "a1", "role": "assistant", "content": "Hi."}]}, "messages"),
    ],
)
def test_bad_thread_runs_are_422_before_anything_runs(
    served: ThreadedApp, llm: ScriptedLLM, fields: JSON, param: str
) -> None:
    response = served.call("POST", "/ag-ui", json=run_input(**fields))
    assert response.status_code == 422, response.text
    assert response.json()["error"]["param"] == param
    assert llm.requests == []
    assert served.call("GET", "/threads").json()["data"] == []


def test_a_turn_sent_again_after_its_answer_was_lost_is_a_409_not_kept_twice(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    """The client's view holds fewer of the user's turns than the thread: the turn it sends
    as new was answered already (its answer never reached the client)."""
    llm.script(Reply(text="Hello."), Reply(text="Hello again."), Reply(text="Fine."))
    first = served.call("POST", "/ag-ui", json=run_input())
    assert first.status_code == 200, first.text
    again = served.call("POST", "/ag-ui", json=run_input(runId="r2"))
    assert again.status_code == 409, again.text
    assert "moved on" in again.json()["error"]["message"]
    assert served.kept(THREAD) == [("user", "hi"), ("assistant", "Hello.")]
    assert len(llm.requests) == 1
    caught_up = [
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "a1", "role": "assistant", "content": "Hello."},
        {"id": "u2", "role": "user", "content": "hi"},
    ]
    same_words = served.call("POST", "/ag-ui", json=run_input(runId="r3", messages=caught_up))
    assert same_words.status_code == 200, "the same words again, as a new turn, are kept"
    kept = served.kept(THREAD)
    assert kept is not None
    assert [text for role, text in kept if role == "user"] == ["hi", "hi"]
