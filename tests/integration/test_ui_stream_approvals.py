"""Tool approval through ``POST /api/chat`` with the AI SDK's own approval flow, under Node.

``tests/node/ui_approval_client.mjs`` drives ``@ai-sdk/react``'s ``Chat`` (what ``useChat``
runs) over ``DefaultChatTransport``: the paused answer's tool parts go ``approval-requested``,
``addToolApprovalResponse`` answers them, and the Chat sends the continuation by itself
(``lastAssistantMessageIsCompleteWithApprovalResponses``). One Node process runs every case
against one served app and the scripted model, which tells the cases apart by their question;
the tests check what the Chat holds, what the transport posted, and what the model was sent.
Malformed continuations are refused from httpx as well.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from agentloop.events import Done
from tests.fakes.approval_model import ApprovalModel, first_user, results
from tests.fakes.node_client import run_node
from tests.fakes.pytest_plugin import provider_env_for_module
from tests.fakes.scripted_llm import RecordedRequest, ScriptedLLM
from tests.helpers import TEST_CONFIG
from tests.sample_tools import double, echo
from tests.served import TOKEN, ServedApp, make_service

JSON = dict[str, Any]
OPTIONS = {"agentloop": {"tools": ["double", "echo"], "approval_tools": ["double"]}}
CASES: list[JSON] = [
    {"name": "approve", "question": "approve", "decisions": [{"approved": True}]},
    {
        "name": "deny",
        "question": "deny",
        "decisions": [{"approved": False, "reason": "not today"}],
        "followUp": "thanks",
    },
    {"name": "mixed", "question": "mixed", "decisions": [{"approved": True}]},
    {
        "name": "two",
        "question": "two",
        "decisions": [{"approved": True}, {"approved": False}],
        "followUp": "thanks",
    },
    {
        "name": "again",
        "question": "again",
        "decisions": [{"approved": True}],
        "again": [{"approved": True}],
    },
    {
        "name": "edited-input",
        "question": "approve",
        "decisions": [{"approved": True}],
        "tamper": {"input": {"n": 1000000}},
    },
    {
        "name": "flipped-token",
        "question": "approve",
        "decisions": [{"approved": True}],
        "tamper": {"token": "flip"},
    },
    {
        "name": "another-runs-token",
        "question": "approve",
        "decisions": [{"approved": True}],
        "tamper": {"token": "from:approve"},
    },
    {
        "name": "made-up-call",
        "question": "approve",
        "decisions": [{"approved": True}],
        "tamper": {"toolCallId": "call_made_up"},
    },
    {
        "name": "no-token",
        "question": "approve",
        "decisions": [{"approved": True}],
        "tamper": {"token": "drop"},
    },
]


@dataclass
class Session:
    url: str
    cases: dict[str, JSON]
    requests: list[RecordedRequest]
    finished: list[Done]

    def asked(self, question: str) -> list[RecordedRequest]:
        return [r for r in self.requests if first_user(r) == question]


@pytest.fixture(scope="module")
def session(llm_server: ScriptedLLM) -> Iterator[Session]:
    with (
        provider_env_for_module(llm_server),
        ServedApp(make_service([double, echo], TEST_CONFIG), name="ui-approvals") as served,
    ):
        llm_server.respond_with(ApprovalModel())
        cases = [{**case, "body": OPTIONS} for case in CASES]
        output = run_node(
            "ui_approval_client.mjs", {"url": served.url, "token": TOKEN, "cases": cases}
        )
        # ten pauses, seven continuations (one pausing again), two follow-ups
        finished = served.runs(19)
        yield Session(served.url, output["cases"], llm_server.requests, finished)


def call_ids(record: JSON) -> list[str]:
    """The paused turn's call ids, in the model's order (as the model made them)."""
    paused = record["paused"][-1]
    return [p["toolCallId"] for p in paused["parts"] if p["type"].startswith("tool-")]


def tool_parts(message: JSON) -> dict[str, JSON]:
    """The message's tool parts, by call id."""
    return {p["toolCallId"]: p for p in message["parts"] if p["type"].startswith("tool-")}


def last_text(message: JSON) -> str:
    """The text of the message's last step: the answer a UI shows."""
    parts = message["parts"]
    start = max((i for i, p in enumerate(parts) if p["type"] == "step-start"), default=-1)
    return "".join(p["text"] for p in parts[start + 1 :] if p["type"] == "text")


def continuation(record: JSON) -> JSON:
    """The body the transport posted to continue the paused run."""
    body: JSON = record["bodies"][1]
    return body


# -- the flows ------------------------------------------------------------------------------


def test_a_call_that_needs_approval_pauses_with_the_sdks_approval_parts(session: Session) -> None:
    record = session.cases["approve"]
    [doubled] = call_ids(record)

    assert record["errors"] == []
    [_, paused] = record["paused"]
    assert paused["role"] == "assistant"
    part = tool_parts(paused)[doubled]
    assert part["type"] == "tool-double"
    assert part["state"] == "approval-requested"
    assert part["input"] == {"n": 21}
    assert part["approval"] == {"id": doubled}
    metadata = paused["metadata"]
    assert metadata["stopReason"] == "approval_required"
    assert isinstance(metadata["resume"], str)
    assert metadata["resume"]
    # The transport sent the paused message back as the Chat held it, token included.
    body = continuation(record)
    assert body["messages"][-1]["id"] == paused["id"]
    assert body["messages"][-1]["metadata"]["resume"] == metadata["resume"]
    sent = tool_parts(body["messages"][-1])[doubled]
    assert sent["state"] == "approval-responded"
    assert sent["approval"]["approved"] is True


def test_an_approved_call_runs_and_the_answer_continues_the_same_message(
    session: Session,
) -> None:
    record = session.cases["approve"]
    [doubled] = call_ids(record)

    [_, message] = record["final"]  # the continuation went on in the paused message
    assert message["id"] == record["paused"][1]["id"]
    part = tool_parts(message)[doubled]
    assert part["state"] == "output-available"
    assert json.loads(part["output"]) == {"ok": True, "result": 42}
    assert last_text(message) == "Results: 42."
    assert message["metadata"]["stopReason"] == "completed"
    assert message["metadata"]["resume"] is None  # the spent token is cleared
    assert message["metadata"]["iterations"] == 2  # carried over from the pause
    [first, second] = session.asked("approve")[:2]
    assert results(second)[doubled] == {"ok": True, "result": 42}
    assert doubled not in results(first)


def test_a_denied_call_is_output_denied_and_the_model_reads_why(session: Session) -> None:
    record = session.cases["deny"]
    [doubled] = call_ids(record)

    message = record["final"][1]
    part = tool_parts(message)[doubled]
    assert part["state"] == "output-denied"
    assert part["approval"] == {"id": doubled, "approved": False, "reason": "not today"}
    assert last_text(message) == "Results: denied."
    [_, continued, followed] = session.asked("deny")
    denial = results(continued)[doubled]
    assert denial["ok"] is False
    assert "a person denied this call: not today" in denial["error"]
    # The next question sends the denied part back as the denial the model read.
    assert [m["role"] for m in followed.messages if m["role"] != "system"] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert results(followed)[doubled] == denial  # as the model read it in the continuation
    assert record["followed"][-1]["parts"][-1]["text"] == "You're welcome."


def test_a_mixed_turn_runs_the_free_call_at_once_and_the_other_when_approved(
    session: Session,
) -> None:
    record = session.cases["mixed"]
    echoed, doubled = call_ids(record)  # echo's part came first: it ran at once

    paused = tool_parts(record["paused"][1])
    assert paused[echoed]["state"] == "output-available"
    assert json.loads(paused[echoed]["output"]) == {"ok": True, "result": "hi"}
    assert paused[doubled]["state"] == "approval-requested"
    final = record["final"][1]
    assert {k: p["state"] for k, p in tool_parts(final).items()} == {
        doubled: "output-available",
        echoed: "output-available",
    }
    assert last_text(final) == "Results: hi, 42."  # echo's result kept from before the pause
    [first, second] = session.asked("mixed")
    assert results(first) == {}  # the pause asked the model nothing more
    assert list(results(second)) == [echoed, doubled]


def test_two_approvals_answered_differently(session: Session) -> None:
    record = session.cases["two"]
    one, two = call_ids(record)

    body = continuation(record)
    sent = tool_parts(body["messages"][-1])
    assert [sent[c]["approval"]["approved"] for c in (one, two)] == [True, False]
    final = tool_parts(record["final"][1])
    assert (final[one]["state"], final[two]["state"]) == ("output-available", "output-denied")
    assert last_text(record["final"][1]) == "Results: 2, denied."
    [_, continued, followed] = session.asked("two")
    assert results(followed)[one] == {"ok": True, "result": 2}
    assert results(followed)[two] == results(continued)[two]  # the denial the model read


def test_a_continued_run_may_pause_again_in_the_same_message(session: Session) -> None:
    record = session.cases["again"]
    [first] = call_ids(record)

    between, final = (messages[-1] for messages in record["finals"])
    [_, second] = tool_parts(between)
    assert tool_parts(between)[first]["state"] == "output-available"
    assert tool_parts(between)[second]["state"] == "approval-requested"
    first_token = record["paused"][-1]["metadata"]["resume"]
    assert between["metadata"]["resume"] not in (None, first_token)
    # The second continuation sends the whole message: the first call done, the second answered.
    sent = tool_parts(record["bodies"][2]["messages"][-1])
    assert (sent[first]["state"], sent[second]["state"]) == (
        "output-available",
        "approval-responded",
    )
    assert final["id"] == between["id"] == record["paused"][-1]["id"]
    assert {p["state"] for p in tool_parts(final).values()} == {"output-available"}
    assert last_text(final) == "Results: 42, 84."
    assert final["metadata"]["iterations"] == 3
    assert final["metadata"]["resume"] is None


def test_the_call_that_runs_is_the_one_the_model_made(session: Session) -> None:
    """Arguments edited in the page: the token's call runs, not the client's copy."""
    record = session.cases["edited-input"]

    sent = continuation(record)["messages"][-1]
    assert [p["input"] for p in tool_parts(sent).values()] == [{"n": 1000000}]
    assert last_text(record["final"][1]) == "Results: 42."


@pytest.mark.parametrize(
    ("case", "param", "fragment"),
    [
        ("flipped-token", "messages.1.metadata.resume", "signature"),
        ("another-runs-token", "messages.1.metadata.resume", "calls were changed"),
        ("made-up-call", "messages.1.metadata.resume", "calls were changed"),
        ("no-token", "messages.1.metadata.resume", "needs its token"),
    ],
)
def test_a_forged_or_edited_approval_is_refused(
    session: Session, case: str, param: str, fragment: str
) -> None:
    record = session.cases[case]

    [error_text] = record["errors"]  # the transport throws the answer's text
    error = json.loads(error_text)["error"]
    assert (error["code"], error["param"]) == (422, param)
    assert fragment in error["message"]
    assert len(session.asked("approve")) == 2 + 2 + 4  # refused: only the pause's call


def test_every_run_ended_as_the_flow_says(session: Session) -> None:
    for name in ("approve", "deny", "mixed", "two", "again", "edited-input"):
        assert session.cases[name]["errors"] == [], name
    stops = sorted(done.stop_reason for done in session.finished)
    assert stops == sorted(["approval_required"] * 11 + ["completed"] * 8)


# -- malformed continuations, from httpx ----------------------------------------------------

USER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "approve"}]}


def paused_message(state: str, **part: Any) -> JSON:
    tool = {"type": "tool-double", "toolCallId": "call_x", "input": {"n": 1}, "state": state}
    return {
        "id": "a1",
        "role": "assistant",
        "metadata": {"resume": "al1.x.y"},
        "parts": [{"type": "step-start"}, {**tool, **part}],
    }


RESPONDED = {"approval": {"id": "call_x", "approved": True}}
REFUSALS: dict[str, tuple[list[JSON], str, str]] = {
    "an answered approval before the last message": (
        [USER, paused_message("approval-responded", **RESPONDED), USER],
        "messages.1.parts.1.state",
        "must be in the last message",
    ),
    "an unanswered approval sent back": (
        [USER, paused_message("approval-requested", approval={"id": "call_x"}), USER],
        "messages.1.parts.1.state",
        "waits for a person's approval",
    ),
    "a response without its decision": (
        [USER, paused_message("approval-responded", approval={"id": "call_x"})],
        "messages.1.parts.1.approval.approved",
        "needs its decision",
    ),
    "a token this server did not issue": (
        [USER, paused_message("approval-responded", **RESPONDED)],
        "messages.1.metadata.resume",
        "not a token this server issued",
    ),
    "no token": (
        [USER, {**paused_message("approval-responded", **RESPONDED), "metadata": None}],
        "messages.1.metadata.resume",
        "needs its token",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_malformed_continuations_are_a_422(session: Session, case: str) -> None:
    messages, param, fragment = REFUSALS[case]

    response = httpx.post(
        f"{session.url}/api/chat",
        json={"messages": messages, **OPTIONS},
        headers={"authorization": f"Bearer {TOKEN}"},
    )

    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["param"] == param
    assert fragment in error["message"]
