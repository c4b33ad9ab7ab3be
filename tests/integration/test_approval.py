"""Tool approval through ``POST /chat``: a run pauses on calls that need a person, and the next
request continues it with the decisions, checked against the signed token it was given.

The scripted model calls ``double`` (which needs approval here) and ``echo`` (which does not);
every run goes through the real app, the real groq SDK and the scripted server.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from agentloop.auth import BearerAuth, hash_token
from agentloop.events import Done, Event, event_adapter
from agentloop.models import ChatRequest
from agentloop.server.identity import api_keys
from agentloop.server.service import ChatService
from agentloop.signing import Signer
from chat_app import create_app
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG, check_run_invariants, parse_sse
from tests.sample_tools import double, echo
from tests.served import AUTH, LOCAL, PRINCIPAL, make_service

USER = {"role": "user", "content": "Double 21 and echo hi."}
CONFIG = TEST_CONFIG.model_copy(update={"approval_tools": ("double",)})


@pytest.fixture
def service() -> ChatService:
    return make_service([double, echo], config=CONFIG)


@pytest.fixture
def client(service: ChatService) -> Iterator[TestClient]:
    with TestClient(create_app(service), base_url=LOCAL) as test_client:
        yield test_client


def run(client: TestClient, body: dict[str, Any]) -> tuple[list[Event], Done]:
    """One /chat request to its end; the events, checked like every run's."""
    body = {"model": "groq:m", "tools": ["double", "echo"], **body}
    with client.stream("POST", "/chat", json=body, headers=AUTH) as response:
        assert response.status_code == 200, response.read()
        events = [
            event_adapter().validate_python(data)
            for _, data in parse_sse(response.iter_lines())
            if data is not None
        ]
    done = events[-1]
    assert isinstance(done, Done)
    check_run_invariants(ChatRequest.model_validate(body), events)
    return events, done


def refused(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    body = {"model": "groq:m", "tools": ["double", "echo"], **body}
    response = client.post("/chat", json=body, headers=AUTH)
    assert response.status_code == 422, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


def tool_results(request: RecordedRequest) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request.messages if m["role"] == "tool"}


def pause(client: TestClient, llm: ScriptedLLM) -> tuple[list[Event], Done, list[str]]:
    """A turn calling double (needs approval) and echo (does not): the run pauses."""
    asks = [call("double", n=21), call("echo", text="hi")]
    llm.script(Reply(text="Let me check. ", tool_calls=asks, usage=(100, 20)))
    events, done = run(client, {"messages": [USER]})
    return events, done, [c.id for c in asks]


def test_a_call_that_needs_approval_pauses_the_run(client: TestClient, llm: ScriptedLLM) -> None:
    events, done, (doubled, _) = pause(client, llm)

    assert done.stop_reason == "approval_required"
    assert [(p.call_id, p.name, p.kind) for p in done.pending] == [(doubled, "double", "approval")]
    requests = [e for e in events if e.type == "approval_request"]
    assert [(e.call_id, e.name, json.loads(e.arguments)) for e in requests] == [  # type: ignore[union-attr]
        (doubled, "double", {"n": 21})
    ]
    ran = [e.name for e in events if e.type == "tool_call_result"]  # type: ignore[union-attr]
    assert ran == ["echo"], "the call that needs no approval ran; the other did not"
    assert [m.role for m in done.messages] == ["assistant", "tool"]  # calls, echo's result
    assert done.resume is not None
    assert done.text == ""  # the shown text restarted after echo's result
    assert done.iterations == 1


def test_approved_calls_run_and_the_loop_goes_on(client: TestClient, llm: ScriptedLLM) -> None:
    _, paused, (doubled, echoed) = pause(client, llm)
    llm.script(Reply(text="21 doubled is 42.", usage=(200, 10)))

    events, done = run(
        client,
        {
            "messages": [USER, *[m.model_dump() for m in paused.messages]],
            "resume": paused.resume,
            "approvals": [{"call_id": doubled, "approved": True}],
        },
    )

    assert done.stop_reason == "completed"
    assert done.text == "21 doubled is 42."
    ran = [(e.call_id, e.ok) for e in events if e.type == "tool_call_result"]  # type: ignore[union-attr]
    assert ran == [(doubled, True)]
    results = tool_results(llm.requests[-1])
    assert json.loads(results[doubled]) == {"ok": True, "result": 42}
    assert echoed in results  # the result from before the pause, taken from the token
    # the budget and iterations go on from the pause
    assert done.iterations == 2
    assert done.usage.total_tokens == 120 + 210
    assert done.usage_by_depth[0].total_tokens == 330


def test_denied_calls_become_errors_the_model_reads(client: TestClient, llm: ScriptedLLM) -> None:
    _, paused, (doubled, _) = pause(client, llm)
    llm.script(Reply(text="I won't double it then."))

    events, done = run(
        client,
        {
            "messages": [USER, *[m.model_dump() for m in paused.messages]],
            "resume": paused.resume,
            "approvals": [{"call_id": doubled, "approved": False, "reason": "not today"}],
        },
    )

    assert done.stop_reason == "completed"
    result = json.loads(tool_results(llm.requests[-1])[doubled])
    assert result["ok"] is False
    assert "a person denied this call: not today" in result["error"]
    assert [e.ok for e in events if e.type == "tool_call_result"] == [False]  # type: ignore[union-attr]


def test_mixed_decisions_in_one_turn(client: TestClient, llm: ScriptedLLM) -> None:
    first, second = call("double", n=1), call("double", n=2)
    llm.script(Reply(tool_calls=[first, second]), Reply(text="Only 2 was doubled: 4."))
    _, paused = run(client, {"messages": [USER]})
    assert [p.call_id for p in paused.pending] == [first.id, second.id]

    _, done = run(
        client,
        {
            "messages": [USER, *[m.model_dump() for m in paused.messages]],
            "resume": paused.resume,
            "approvals": [
                {"call_id": second.id, "approved": True},
                {"call_id": first.id, "approved": False},
            ],
        },
    )

    results = tool_results(llm.requests[-1])
    assert json.loads(results[first.id])["ok"] is False
    assert json.loads(results[second.id]) == {"ok": True, "result": 4}
    assert done.text == "Only 2 was doubled: 4."


def test_a_run_can_pause_again_after_it_resumes(client: TestClient, llm: ScriptedLLM) -> None:
    _, first, (doubled, _) = pause(client, llm)
    again = call("double", n=42)
    llm.script(Reply(tool_calls=[again]), Reply(text="84."))
    history = [USER, *[m.model_dump() for m in first.messages]]
    _, second = run(
        client,
        {
            "messages": history,
            "resume": first.resume,
            "approvals": [{"call_id": doubled, "approved": True}],
        },
    )
    assert second.stop_reason == "approval_required"
    assert [p.call_id for p in second.pending] == [again.id]

    _, done = run(
        client,
        {
            "messages": [*history, *[m.model_dump() for m in second.messages]],
            "resume": second.resume,
            "approvals": [{"call_id": again.id, "approved": True}],
        },
    )
    assert done.text == "84."
    assert done.iterations == 3


def test_a_forged_or_edited_pending_call_is_refused(
    client: TestClient, service: ChatService, llm: ScriptedLLM
) -> None:
    _, paused, (doubled, _) = pause(client, llm)
    assert paused.resume is not None
    history = [USER, *[m.model_dump() for m in paused.messages]]
    approve = [{"call_id": doubled, "approved": True}]

    # The arguments edited in the history: the call that runs is the token's, not this one.
    edited = json.loads(json.dumps(history))
    edited[1]["tool_calls"][0]["function"]["arguments"] = '{"n": 1000000}'
    llm.script(Reply(text="done"))
    run(client, {"messages": edited, "resume": paused.resume, "approvals": approve})
    assert json.loads(tool_results(llm.requests[-1])[doubled]) == {"ok": True, "result": 42}

    # A token signed with another key, or altered, or cut short.
    continuation = service.setup.signer.for_principal(PRINCIPAL.id).verify(paused.resume)
    foreign = Signer(b"another server's key!").sign(continuation)
    for token, fragment in [
        (foreign, "signature"),
        (paused.resume[:-4] + "AAAA", "signature"),
        (paused.resume[:40], "not a token"),
        ("hello", "not a token"),
    ]:
        error = refused(client, {"messages": history, "resume": token, "approvals": approve})
        assert error["param"] == "resume"
        assert fragment in error["message"]

    # The conversation before the pause changed.
    changed = [{"role": "user", "content": "Double 1000 instead."}, *history[1:]]
    error = refused(client, {"messages": changed, "resume": paused.resume, "approvals": approve})
    assert error["param"] == "resume"

    # A new question slipped in after the paused turn (before the waiting call's result).
    extra = [*history, {"role": "user", "content": "and delete everything"}]
    error = refused(client, {"messages": extra, "resume": paused.resume, "approvals": approve})
    assert "have no tool result before this message" in error["message"]


def test_an_approval_for_a_call_of_another_run_is_refused(
    client: TestClient, llm: ScriptedLLM
) -> None:
    _, one, (one_call, _) = pause(client, llm)
    _, other, (other_call, _) = pause(client, llm)
    history = [USER, *[m.model_dump() for m in one.messages]]

    for approvals, fragment in [
        ([{"call_id": other_call, "approved": True}], "no call"),
        ([{"call_id": "call_made_up", "approved": True}], "no call"),
        ([], "wait for a decision"),
    ]:
        error = refused(client, {"messages": history, "resume": one.resume, "approvals": approvals})
        assert error["param"] == "approvals"
        assert fragment in error["message"]
    # approvals without a token
    error = refused(
        client, {"messages": history, "approvals": [{"call_id": one_call, "approved": True}]}
    )
    assert error["param"] == "approvals"
    assert other.resume != one.resume


def test_a_resume_that_overruns_the_budget_ends_with_budget_and_an_answer(
    client: TestClient, llm: ScriptedLLM
) -> None:
    llm.script(Reply(tool_calls=[call("double", n=21)], usage=(900, 50)))
    _, paused = run(client, {"messages": [USER], "token_budget": 1000})
    assert paused.stop_reason == "approval_required"
    # The forced answer is a plain summary: nothing is left for a model call.
    _, done = run(
        client,
        {
            "messages": [USER, *[m.model_dump() for m in paused.messages]],
            "resume": paused.resume,
            "approvals": [{"call_id": paused.pending[0].call_id, "approved": True}],
            "token_budget": 1000,
        },
    )
    assert done.stop_reason == "budget"
    assert "42" in done.text  # the approved call's result, in the summary
    assert done.usage.total_tokens == 950  # carried over; no further model call was affordable
    assert llm.pending == 0


def test_a_request_may_add_approval_tools_but_not_remove_them(
    client: TestClient, llm: ScriptedLLM
) -> None:
    llm.script(Reply(tool_calls=[call("echo", text="hi")]))
    _, done = run(client, {"messages": [USER], "approval_tools": ["echo"]})
    assert [p.name for p in done.pending] == ["echo"]

    llm.script(Reply(tool_calls=[call("double", n=2)]))
    _, done = run(client, {"messages": [USER], "approval_tools": []})
    assert [p.name for p in done.pending] == ["double"]  # the operator's stays

    error = refused(client, {"messages": [USER], "approval_tools": ["rm_rf"]})
    assert error["param"] == "approval_tools"


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city (runs in the client).",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def test_client_tools_pause_for_their_results(client: TestClient, llm: ScriptedLLM) -> None:
    weather, echoed = call("get_weather", city="Paris"), call("echo", text="hi")
    llm.script(Reply(tool_calls=[weather, echoed]), Reply(text="Sunny, and hi."))
    _, paused = run(client, {"messages": [USER], "client_tools": [WEATHER]})
    assert llm.requests[0].tool_names == ["double", "echo", "get_weather"]
    assert paused.stop_reason == "client_tools"
    assert [(p.call_id, p.kind) for p in paused.pending] == [(weather.id, "client")]

    result = {"role": "tool", "tool_call_id": weather.id, "content": "sunny"}
    _, done = run(
        client,
        {
            "messages": [USER, *[m.model_dump() for m in paused.messages], result],
            "resume": paused.resume,
            "client_tools": [WEATHER],
        },
    )
    assert done.text == "Sunny, and hi."
    results = tool_results(llm.requests[-1])
    assert results[weather.id] == "sunny"
    assert echoed.id in results
    assert all(m.role != "tool" or m.tool_call_id != weather.id for m in done.messages)

    # The client's result is missing, or one comes for a call that does not wait.
    for messages in (
        [USER, *[m.model_dump() for m in paused.messages]],
        [USER, *[m.model_dump() for m in paused.messages], {**result, "tool_call_id": "nope"}],
    ):
        error = refused(
            client, {"messages": messages, "resume": paused.resume, "client_tools": [WEATHER]}
        )
        assert error["param"] in ("resume", None), error


def test_a_client_tool_may_not_shadow_a_server_tool(client: TestClient) -> None:
    shadow = {"type": "function", "function": {"name": "echo"}}
    error = refused(client, {"messages": [USER], "client_tools": [shadow]})
    assert error["param"] == "client_tools"


def test_another_caller_cannot_continue_a_paused_run(
    service: ChatService, llm: ScriptedLLM
) -> None:
    """A resume token is bound to the caller its run paused for: another key's request with
    it is refused like a forged token, and nothing of the run goes on."""
    alice, bob = "al_alice-key-0123456789", "al_bob-key-0123456789"
    keys = [f"alice:{hash_token(alice)}", f"bob:{hash_token(bob)}"]
    two_callers = dataclasses.replace(service, authenticate=api_keys(BearerAuth(lambda: keys)))
    with TestClient(create_app(two_callers), base_url=LOCAL) as client:
        asks = [call("double", n=21), call("echo", text="hi")]
        llm.script(Reply(text="Let me check. ", tool_calls=asks, usage=(100, 20)))
        body = {"model": "groq:m", "tools": ["double", "echo"], "messages": [USER]}
        with client.stream("POST", "/chat", json=body, headers=bearer(alice)) as response:
            frames = [data for _, data in parse_sse(response.iter_lines()) if data is not None]
        paused = Done.model_validate(frames[-1])
        assert paused.stop_reason == "approval_required"
        assert paused.resume is not None
        go_on = {
            **body,
            "messages": [USER, *[m.model_dump() for m in paused.messages]],
            "resume": paused.resume,
            "approvals": [{"call_id": asks[0].id, "approved": True}],
        }
        calls_before = len(llm.requests)
        refused = client.post("/chat", json=go_on, headers=bearer(bob))
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["param"] == "resume"
        assert "signature" in refused.json()["error"]["message"]
        assert len(llm.requests) == calls_before  # no model call, and double never ran

        llm.script(Reply(text="21 doubled is 42."))
        with client.stream("POST", "/chat", json=go_on, headers=bearer(alice)) as response:
            frames = [data for _, data in parse_sse(response.iter_lines()) if data is not None]
        assert Done.model_validate(frames[-1]).text == "21 doubled is 42."


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}
