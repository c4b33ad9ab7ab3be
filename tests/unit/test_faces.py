"""Every protocol face's stream, fed a list of events with no server.

The rules the faces share (``agentloop.faces``) are checked on all four streams at once:
how a run's ending is classified, the cut of a retried text that cannot match what was
sent, draining after the face's last frame, and where a plan's refusal points. The faces'
own framing is checked through their real clients in tests/integration.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, get_args

import pytest

from agentloop.events import (
    ApprovalRequest,
    ErrorEvent,
    Event,
    TextDelta,
    ToolCallResult,
    ToolCallStart,
    UsageReport,
)
from agentloop.faces.ag_ui import AgUiStream, RunAgentInput
from agentloop.faces.mcp import PLAN_PARAMS as MCP_PARAMS
from agentloop.faces.mcp.tool import answer
from agentloop.faces.openai import CompletionRequest, CompletionStream
from agentloop.faces.options import AgentOptions, AskingAgentOptions, option_params
from agentloop.faces.outcome import OUTCOMES, Outcome, outcome
from agentloop.faces.responses import ResponsesRequest, ResponseStream
from agentloop.faces.stream import FaceStream
from agentloop.faces.ui_stream import UIChatRequest, UIMessageStream
from agentloop.limits import CancelToken
from agentloop.models import PendingCall, StopReason, Usage
from tests.unit.face_events import ANSWER, Counted, done, reset, turn


def usage_report() -> UsageReport:
    usage = Usage(prompt_tokens=10, completion_tokens=5)
    return UsageReport(model="groq:m", usage=usage, total=usage, budget_remaining=100)


# -- the four streams, built as chat_app builds them -------------------------------------------

Build = Callable[[CancelToken], FaceStream[Any]]


def completions(cancel: CancelToken) -> FaceStream[Any]:
    request = CompletionRequest.model_validate({"messages": [{"role": "user", "content": "hi"}]})
    return CompletionStream(request, "chatcmpl-1", "groq:m", cancel)


def responses(cancel: CancelToken) -> FaceStream[Any]:
    request = ResponsesRequest.model_validate({"input": "hi", "stream": True})
    return ResponseStream(request, "resp_1", "groq:m", cancel)


def ui_stream(cancel: CancelToken) -> FaceStream[Any]:
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    request = UIChatRequest.model_validate({"messages": [message]})
    return UIMessageStream(request, "req-1", cancel)


def ag_ui(cancel: CancelToken) -> FaceStream[Any]:
    run_input = RunAgentInput.model_validate(
        {
            "threadId": "t1",
            "runId": "r1",
            "messages": [{"id": "m1", "role": "user", "content": "hi"}],
        }
    )
    return AgUiStream(run_input, cancel)


FACES: dict[str, Build] = {
    "completions": completions,
    "responses": responses,
    "ui": ui_stream,
    "ag-ui": ag_ui,
}


@dataclass
class Streamed:
    data: list[Any]
    """Each frame's ``data:`` JSON (or "[DONE]")."""
    consumed: int
    cancel: CancelToken

    def text(self) -> str:
        return json.dumps(self.data)


async def run(build: Build, events: Sequence[Event]) -> Streamed:
    source = Counted(events)
    cancel = CancelToken()
    data: list[Any] = []
    async for frame in build(cancel).frames(source.stream()):
        assert frame.endswith(b"\n\n")
        line = next(x for x in frame.decode().splitlines() if x.startswith("data: "))
        body = line.removeprefix("data: ")
        data.append(body if body == "[DONE]" else json.loads(body))
    return Streamed(data, source.consumed, cancel)


def ending_of(face: str, streamed: Streamed) -> Any:
    """What each face says about the run's end, reduced to one comparable value."""
    data = [d for d in streamed.data if d != "[DONE]"]
    last = data[-1]
    if face == "completions":
        finishes = [
            c["choices"][0]["finish_reason"]
            for c in data
            if "choices" in c and c["choices"] and c["choices"][0]["finish_reason"]
        ]
        return finishes[-1] if finishes else ("error", last["error"]["code"])
    if face == "responses":
        return last["type"]
    if face == "ui":
        return last["finishReason"]
    return last["outcome"]["type"] if last["type"] == "RUN_FINISHED" else ("error", last["code"])


# -- the outcome -------------------------------------------------------------------------------


def test_every_stop_reason_has_an_outcome() -> None:
    assert set(OUTCOMES) == set(get_args(StopReason))
    assert {o for o in Outcome if o.has_answer} == {Outcome.ANSWERED, Outcome.CUT_SHORT}


def test_a_failure_says_why() -> None:
    error = ErrorEvent(code="provider", message="the provider is down")
    assert outcome(done(stop="error"), error).failure == "the provider is down"
    assert outcome(done(stop="cancelled")).failure == "the run was cancelled before it finished"
    assert outcome(done(stop="error")).failure == "the run ended without an answer"


EXPECTED_ENDINGS: dict[str, dict[StopReason, Any]] = {
    "completions": {
        "completed": "stop",
        "max_iterations": "length",
        "cancelled": ("error", 499),
        "error": ("error", 500),
    },
    "responses": {
        "completed": "response.completed",
        "max_iterations": "response.incomplete",
        "cancelled": "response.failed",
        "error": "response.failed",
    },
    "ui": {"completed": "stop", "max_iterations": "length", "cancelled": "error", "error": "error"},
    "ag-ui": {
        "completed": "success",
        "max_iterations": "success",
        "cancelled": "cancelled",
        "error": ("error", "internal"),
    },
}


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("stop", ["completed", "max_iterations", "cancelled", "error"])
async def test_each_face_maps_each_ending(face: str, stop: StopReason) -> None:
    streamed = await run(FACES[face], [turn(), TextDelta(text=ANSWER), done(stop=stop)])
    assert ending_of(face, streamed) == EXPECTED_ENDINGS[face][stop]
    assert not streamed.cancel.cancelled


@pytest.mark.parametrize("face", ["completions", "responses"])
async def test_faces_that_cannot_ask_fail_a_pause_for_approval(face: str) -> None:
    pending = [PendingCall(call_id="c1", name="rm", arguments="{}", kind="approval")]
    paused = done(stop="approval_required", pending=pending, resume="token")
    streamed = await run(FACES[face], [turn(), paused])
    expected = ("error", 422) if face == "completions" else "response.failed"
    assert ending_of(face, streamed) == expected
    assert "approval" in streamed.text()


# -- the sent text -----------------------------------------------------------------------------

BOUNDARIES: dict[str, Event] = {
    "turn_start": turn(2),
    "tool_call_start": ToolCallStart(call_id="c1", name="echo", arguments="{}"),
    "tool_call_result": ToolCallResult(
        call_id="c1", name="echo", ok=True, duration_ms=1.0, content="{}"
    ),
    "approval_request": ApprovalRequest(call_id="c2", name="rm", arguments="{}"),
    "done": done(text="Paris"),
}


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("boundary", BOUNDARIES)
async def test_a_retried_turn_that_ends_short_of_the_sent_text_is_cut(
    face: str, boundary: str
) -> None:
    """Every face ends the same turns the same way (the OpenAI faces once left out an
    approval request): the client shows text the run no longer says, so the stream ends with
    the cut, the run is cancelled, and nothing more is sent."""
    events = [turn(), TextDelta(text="Paris is"), reset(), TextDelta(text="Par")]
    streamed = await run(FACES[face], [*events, BOUNDARIES[boundary], TextDelta(text="more")])
    assert streamed.cancel.cancelled
    assert "the provider's stream was cut" in streamed.text()
    assert "more" not in streamed.text()
    assert streamed.consumed == len(events) + 2, "the run is drained to its end"


@pytest.mark.parametrize("face", FACES)
async def test_a_retried_turn_that_goes_on_sends_only_what_is_new(face: str) -> None:
    events = [turn(), TextDelta(text="Paris is"), reset(), TextDelta(text="Paris is the capital")]
    streamed = await run(FACES[face], [*events, done(text="Paris is the capital")])
    assert not streamed.cancel.cancelled
    assert '" the capital"' in streamed.text(), "only what goes beyond the sent text is sent"


@pytest.mark.parametrize("face", FACES)
async def test_after_an_error_the_run_is_drained_unsent(face: str) -> None:
    error = ErrorEvent(code="provider", message="the provider is down")
    apology = TextDelta(text="Sorry, something went wrong.")
    events = [turn(), usage_report(), error, apology, done(text=apology.text, stop="error")]
    streamed = await run(FACES[face], events)
    assert streamed.consumed == len(events)
    assert "the provider is down" in streamed.text()
    assert "Sorry" not in streamed.text() or face == "ui"  # the UI stream shows it, then fails
    failed = {
        "completions": ("error", 502),
        "responses": "response.failed",
        "ui": "error",
        "ag-ui": ("error", "provider"),
    }
    assert ending_of(face, streamed) == failed[face]


@pytest.mark.parametrize("face", FACES)
async def test_a_run_without_done_still_ends_in_the_faces_failure(face: str) -> None:
    streamed = await run(FACES[face], [turn(), TextDelta(text="Paris")])
    assert "the run ended without" in streamed.text()


# -- options and where a refusal points --------------------------------------------------------


def test_the_options_are_bounded_once() -> None:
    names = [f"t{i}" for i in range(101)]
    for model in (AgentOptions, AskingAgentOptions):
        with pytest.raises(ValueError, match="at most 100"):
            model.model_validate({"tools": names})
        with pytest.raises(ValueError, match="at most 128"):
            model.model_validate({"tools": ["x" * 129]})
        with pytest.raises(ValueError, match="at most 100"):
            model.model_validate({"tool_limits": {name: 1 for name in names}})
        with pytest.raises(ValueError, match="at most 128"):
            model.model_validate({"tool_limits": {"x" * 129: 1}})
        with pytest.raises(ValueError, match="at least 1"):
            model.model_validate({"tool_limits": {"": 1}})
        for count in (-1, 10_001, 1.5, "many"):
            with pytest.raises(ValueError, match="tool_limits"):
                model.model_validate({"tool_limits": {"echo": count}})
    with pytest.raises(ValueError, match="approval_tools"):
        AgentOptions.model_validate({"approval_tools": ["rm"]})
    options = AskingAgentOptions(
        tools=["echo"], approval_tools=["rm"], max_cost_usd=1.0, tool_limits={"echo": 0}
    )
    assert options.chat_fields() == {
        "tools": ["echo"],
        "approval_tools": ["rm"],
        "max_iterations": None,
        "token_budget": None,
        "max_cost_usd": 1.0,
        "tool_limits": {"echo": 0},
        "thread_id": None,
        "resumable": False,
    }


def test_every_face_points_a_refused_option_at_its_own_field() -> None:
    completion = CompletionRequest.model_validate({"messages": [{"role": "user", "content": "x"}]})
    response = ResponsesRequest.model_validate({"input": "x"})
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "x"}]}
    ui = UIChatRequest.model_validate({"messages": [message]})
    run_input = RunAgentInput.model_validate({"threadId": "t", "runId": "r", "messages": []})
    where = {
        "completions": completion.plan_params(),
        "responses": response.plan_params(),
        "ui": ui.plan_params(),
        "ag-ui": run_input.plan_params(),
    }
    assert {face: params["max_cost_usd"] for face, params in where.items()} == {
        "completions": "agentloop.max_cost_usd",
        "responses": "agentloop.max_cost_usd",
        "ui": "agentloop.max_cost_usd",
        "ag-ui": "forwardedProps.agentloop.max_cost_usd",
    }
    assert where["completions"]["tools"] == "agentloop.tools"
    assert where["completions"]["client_tools"] == "tools"
    assert where["ag-ui"]["model"] == "forwardedProps.agentloop.model"
    assert where["ui"]["approval_tools"] == "agentloop.approval_tools"
    assert MCP_PARAMS == {"tools": "tools"}
    assert where["ag-ui"]["tool_limits"] == "forwardedProps.agentloop.tool_limits"
    assert option_params(AgentOptions, "") == {
        "tools": "tools",
        "max_cost_usd": "max_cost_usd",
        "tool_limits": "tool_limits",
    }


# -- MCP ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stop", "is_error"),
    [("completed", False), ("deadline", False), ("cancelled", True), ("error", True)],
)
def test_mcp_answers_only_a_run_with_an_answer(stop: StopReason, is_error: bool) -> None:
    result = answer(done(stop=stop), None)
    assert bool(result.is_error) is is_error
    assert (result.structured_content is None) is is_error
