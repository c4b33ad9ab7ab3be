"""Tool approval through ``POST /ag-ui`` as AG-UI's interrupt / resume, with ``@ag-ui/client``.

``tests/node/ag_ui_approval_client.mjs`` drives ``HttpAgent``: a paused run finishes with an
interrupt outcome, the library keeps the interrupts in ``agent.pendingInterrupts``, and the
next ``runAgent({resume})`` answers every one (``buildResumeArray``, each entry echoing its
interrupt's metadata). One Node process runs every case against one served app and the
scripted model, which tells the cases apart by their question. Malformed resume entries are
refused from httpx as well.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from agentloop.events import Done
from agentloop.faces.ag_ui import APPROVAL_SCHEMA
from tests.fakes.approval_model import TURNS, ApprovalModel, first_user, results
from tests.fakes.node_client import run_node
from tests.fakes.pytest_plugin import provider_env_for_module
from tests.fakes.scripted_llm import RecordedRequest, ScriptedLLM
from tests.helpers import TEST_CONFIG
from tests.sample_tools import double, echo
from tests.served import AUTH, TOKEN, ServedApp, make_service

JSON = dict[str, Any]
PARAMS = {"forwardedProps": {"agentloop": {"tools": ["double", "echo"]}}}
CONFIG = TEST_CONFIG.model_copy(update={"approval_tools": ("double",)})
"""The operator's AGENTLOOP_APPROVAL_TOOLS: double waits for a person, echo does not."""
MODEL = ApprovalModel({**TURNS, "added": [("echo", {"text": "hi"})]})
"""The approval tests' model, with one more question: a call a request's own list holds."""

APPROVE = {"approved": True}
CASES: list[JSON] = [
    {"name": "approve", "question": "approve", "decisions": [APPROVE]},
    {
        "name": "deny",
        "question": "deny",
        "decisions": [{"approved": False, "reason": "not today"}],
        "followUp": "thanks",
    },
    {"name": "mixed", "question": "mixed", "decisions": [APPROVE]},
    {"name": "two", "question": "two", "decisions": [APPROVE, "cancel"], "followUp": "thanks"},
    {
        "name": "added",  # a request's own approval_tools, beside the operator's
        "question": "added",
        "params": {
            "forwardedProps": {"agentloop": {"tools": ["echo"], "approval_tools": ["echo"]}}
        },
        "decisions": [APPROVE],
    },
    {"name": "again", "question": "again", "decisions": [APPROVE], "again": [APPROVE]},
    {
        "name": "edited-arguments",
        "question": "approve",
        "decisions": [APPROVE],
        "tamper": {"arguments": '{"n": 1000000}'},
    },
    {
        "name": "flipped-token",
        "question": "approve",
        "decisions": [APPROVE],
        "tamper": {"token": "flip"},
    },
    {
        "name": "another-runs-token",
        "question": "approve",
        "decisions": [APPROVE],
        "tamper": {"token": "from:approve"},
    },
    {
        "name": "made-up-interrupt",
        "question": "approve",
        "decisions": [APPROVE],
        "tamper": {"interruptId": "call_made_up"},
    },
    {
        "name": "no-token",
        "question": "approve",
        "decisions": [APPROVE],
        "tamper": {"token": "drop"},
    },
]


@dataclass
class Session:
    url: str
    cases: dict[str, list[JSON]]
    printed: list[str]
    requests: list[RecordedRequest]
    finished: list[Done]

    def asked(self, question: str) -> list[RecordedRequest]:
        return [r for r in self.requests if first_user(r) == question]


@pytest.fixture(scope="module")
def session(llm_server: ScriptedLLM) -> Iterator[Session]:
    with (
        provider_env_for_module(llm_server),
        ServedApp(make_service([double, echo], CONFIG), name="ag-ui-approvals") as served,
    ):
        llm_server.respond_with(MODEL)
        cases = [{"params": PARAMS, **case} for case in CASES]
        output = run_node(
            "ag_ui_approval_client.mjs", {"url": served.url, "token": TOKEN, "cases": cases}
        )
        # eleven pauses, eight continuations (one pausing again), two follow-ups
        finished = served.runs(21)
        yield Session(served.url, output["cases"], output["printed"], llm_server.requests, finished)


def of(record: JSON, kind: str) -> list[JSON]:
    return [e for e in record["events"] if e["type"] == kind]


def interrupts(record: JSON) -> list[JSON]:
    finished = record["finished"]
    assert finished["outcome"] == "interrupt"
    found: list[JSON] = finished["interrupts"]
    return found


def tool_messages(record: JSON) -> dict[str, str]:
    """The thread's tool results as the client holds them, by call id."""
    return {m["toolCallId"]: m["content"] for m in record["messages"] if m["role"] == "tool"}


# -- the flows ------------------------------------------------------------------------------


def test_a_call_that_needs_approval_is_an_interrupt(session: Session) -> None:
    [paused, _] = session.cases["approve"]

    [interrupt] = interrupts(paused)
    [started] = of(paused, "TOOL_CALL_START")
    assert started["toolCallName"] == "double"
    assert [e["delta"] for e in of(paused, "TOOL_CALL_ARGS")] == ['{"n": 21}']
    assert of(paused, "TOOL_CALL_RESULT") == []  # it did not run
    call_id = started["toolCallId"]
    assert interrupt["id"] == interrupt["toolCallId"] == call_id
    assert interrupt["reason"] == "tool_call"
    assert interrupt["responseSchema"] == APPROVAL_SCHEMA
    assert "double" in interrupt["message"]
    echoed = interrupt["metadata"]["agentloop"]
    assert (echoed["name"], echoed["arguments"]) == ("double", '{"n": 21}')
    assert isinstance(echoed["resume"], str)
    assert echoed["resume"]
    assert [i["id"] for i in paused["pending"]] == [call_id]  # the library keeps it open
    [finished] = of(paused, "RUN_FINISHED")  # the library hands an interrupt no result
    assert finished["result"]["stop_reason"] == "approval_required"
    # The thread holds the call, so the next run sends it back.
    [assistant] = [m for m in paused["messages"] if m["role"] == "assistant"]
    assert [c["id"] for c in assistant["toolCalls"]] == [call_id]
    assert assistant["content"] == "Let me check."


def test_an_approved_call_runs_in_the_resumed_run(session: Session) -> None:
    paused, resumed = session.cases["approve"]
    [interrupt] = interrupts(paused)
    call_id = interrupt["id"]

    assert resumed["sent"] == [
        {
            "interruptId": call_id,
            "status": "resolved",
            "payload": APPROVE,
            "metadata": interrupt["metadata"],
        }
    ]
    assert resumed["finished"]["outcome"] == "success"
    assert resumed["pending"] == []
    assert of(resumed, "TOOL_CALL_START") == []  # not started again, as the protocol says
    [result] = of(resumed, "TOOL_CALL_RESULT")
    assert result["toolCallId"] == call_id
    assert json.loads(result["content"]) == {"ok": True, "result": 42}
    assert json.loads(tool_messages(resumed)[call_id]) == {"ok": True, "result": 42}
    answer = "".join(e["delta"] for e in of(resumed, "TEXT_MESSAGE_CONTENT"))
    assert answer == "Results: 42."
    assert resumed["finished"]["result"]["iterations"] == 2  # carried over from the pause
    assert results(session.asked("approve")[1])[call_id] == {"ok": True, "result": 42}


def test_a_denied_call_is_an_error_result_the_model_reads(session: Session) -> None:
    paused, resumed, followed = session.cases["deny"]
    [interrupt] = interrupts(paused)
    call_id = interrupt["id"]

    [result] = of(resumed, "TOOL_CALL_RESULT")
    denial = json.loads(result["content"])
    assert denial["ok"] is False
    assert "a person denied this call: not today" in denial["error"]
    assert result["metadata"]["agentloop"]["ok"] is False
    [_, continued, asked_again] = session.asked("deny")
    assert results(continued)[call_id] == denial
    assert results(asked_again)[call_id] == denial  # the thread's history, sent back
    assert followed["finished"]["outcome"] == "success"


def test_a_mixed_turn_runs_the_free_call_at_once_and_the_other_when_approved(
    session: Session,
) -> None:
    paused, resumed = session.cases["mixed"]

    [interrupt] = interrupts(paused)
    assert interrupt["metadata"]["agentloop"]["name"] == "double"
    [ran] = of(paused, "TOOL_CALL_RESULT")  # echo, in the paused run
    assert json.loads(ran["content"]) == {"ok": True, "result": "hi"}
    assert [e["toolCallName"] for e in of(paused, "TOOL_CALL_START")] == ["echo", "double"]
    [result] = of(resumed, "TOOL_CALL_RESULT")
    assert result["toolCallId"] == interrupt["id"]
    answer = "".join(e["delta"] for e in of(resumed, "TEXT_MESSAGE_CONTENT"))
    assert answer == "Results: hi, 42."
    assert list(results(session.asked("mixed")[1])) == [ran["toolCallId"], interrupt["id"]]


def test_one_interrupt_resolved_and_one_cancelled(session: Session) -> None:
    paused, resumed, _ = session.cases["two"]
    one, two = (i["id"] for i in interrupts(paused))

    assert [(e["interruptId"], e["status"]) for e in resumed["sent"]] == [
        (one, "resolved"),
        (two, "cancelled"),
    ]
    contents = {e["toolCallId"]: json.loads(e["content"]) for e in of(resumed, "TOOL_CALL_RESULT")}
    assert contents[one] == {"ok": True, "result": 2}
    assert contents[two]["ok"] is False  # cancelled: not run
    answer = "".join(e["delta"] for e in of(resumed, "TEXT_MESSAGE_CONTENT"))
    assert answer == "Results: 2, denied."


def test_a_request_may_add_approval_tools(session: Session) -> None:
    paused, resumed = session.cases["added"]

    [interrupt] = interrupts(paused)
    assert interrupt["metadata"]["agentloop"]["name"] == "echo"
    assert resumed["finished"]["outcome"] == "success"


def test_a_resumed_run_may_be_interrupted_again(session: Session) -> None:
    paused, again, resumed = session.cases["again"]
    [first] = interrupts(paused)
    [second] = interrupts(again)

    assert second["id"] != first["id"]
    assert second["metadata"]["agentloop"]["arguments"] == '{"n": 42}'
    assert second["metadata"]["agentloop"]["resume"] != first["metadata"]["agentloop"]["resume"]
    assert [e["toolCallId"] for e in of(again, "TOOL_CALL_RESULT")] == [first["id"]]
    assert [e["toolCallId"] for e in of(again, "TOOL_CALL_START")] == [second["id"]]
    assert [e["toolCallId"] for e in of(resumed, "TOOL_CALL_RESULT")] == [second["id"]]
    answer = "".join(e["delta"] for e in of(resumed, "TEXT_MESSAGE_CONTENT"))
    assert answer == "Results: 42, 84."
    assert resumed["finished"]["result"]["iterations"] == 3


def test_the_call_that_runs_is_the_one_the_model_made(session: Session) -> None:
    """Arguments edited in the thread: the token's call runs, not the client's copy."""
    paused, resumed = session.cases["edited-arguments"]
    call_id = interrupts(paused)[0]["id"]

    [assistant] = [m for m in resumed["messages"] if m.get("toolCalls")]
    assert assistant["toolCalls"][0]["function"]["arguments"] == '{"n": 1000000}'
    [result] = of(resumed, "TOOL_CALL_RESULT")
    assert (result["toolCallId"], json.loads(result["content"])["result"]) == (call_id, 42)


@pytest.mark.parametrize(
    ("case", "param", "fragment"),
    [
        ("flipped-token", "resume", "signature"),
        ("another-runs-token", "resume", "calls were changed"),
        ("made-up-interrupt", "resume", "no call 'call_made_up' of this run waits"),
        ("no-token", "resume.0.metadata.agentloop.resume", "echo the interrupt's metadata"),
    ],
)
def test_a_forged_or_edited_approval_is_refused(
    session: Session, case: str, param: str, fragment: str
) -> None:
    _, refused = session.cases[case]

    assert refused["thrown"]["status"] == 422
    error = json.loads(refused["thrown"]["message"].removeprefix("HTTP 422: "))["error"]
    assert error["param"] == param
    assert fragment in error["message"]
    assert refused["events"] == []


def test_every_run_ended_as_the_flow_says(session: Session) -> None:
    assert [line for line in session.printed if "[ag-ui]" in line] == []
    for name in ("approve", "deny", "mixed", "two", "added", "again", "edited-arguments"):
        for record in session.cases[name]:
            assert (record["failed"], record["thrown"]) == (None, None), name
    stops = sorted(done.stop_reason for done in session.finished)
    assert stops == sorted(["approval_required"] * 12 + ["completed"] * 9)
    assert len(session.asked("approve")) == 2 + 2 + 4  # refused: only the pause's call


# -- malformed resume entries, from httpx ---------------------------------------------------


def body(*entries: JSON) -> JSON:
    return {
        "threadId": "t",
        "runId": "r",
        "messages": [
            {"id": "u1", "role": "user", "content": "approve"},
            {
                "id": "a1",
                "role": "assistant",
                "toolCalls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "double", "arguments": "{}"},
                    }
                ],
            },
        ],
        "resume": list(entries),
        **PARAMS,
    }


TOKEN_ECHO = {"agentloop": {"resume": "al1.x.y"}}
REFUSALS: dict[str, tuple[JSON, str, str]] = {
    "resolved without a decision": (
        body({"interruptId": "c1", "status": "resolved", "metadata": TOKEN_ECHO}),
        "resume.0.payload.approved",
        "needs payload",
    ),
    "edited arguments": (
        body(
            {
                "interruptId": "c1",
                "status": "resolved",
                "payload": {"approved": True, "editedArgs": {"n": 2}},
                "metadata": TOKEN_ECHO,
            }
        ),
        "resume.0.payload.editedArgs",
        "cannot be edited",
    ),
    "answered twice": (
        body(
            {"interruptId": "c1", "status": "cancelled", "metadata": TOKEN_ECHO},
            {"interruptId": "c1", "status": "cancelled", "metadata": TOKEN_ECHO},
        ),
        "resume.1.interruptId",
        "answered twice",
    ),
    "tokens of two runs": (
        body(
            {"interruptId": "c1", "status": "cancelled", "metadata": TOKEN_ECHO},
            {
                "interruptId": "c2",
                "status": "cancelled",
                "metadata": {"agentloop": {"resume": "a"}},
            },
        ),
        "resume",
        "different runs",
    ),
    "unknown status": (
        body({"interruptId": "c1", "status": "later", "metadata": TOKEN_ECHO}),
        "resume.0.status",
        "'resolved' or 'cancelled'",
    ),
    "a token this server did not issue": (
        body({"interruptId": "c1", "status": "cancelled", "metadata": TOKEN_ECHO}),
        "resume",
        "not a token this server issued",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_malformed_resume_entries_are_a_422(session: Session, case: str) -> None:
    raw, param, fragment = REFUSALS[case]

    response = httpx.post(f"{session.url}/ag-ui", json=raw, headers=AUTH)

    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["param"] == param
    assert fragment in error["message"]
