"""The OpenAI face's translation of agent events, fed event sequences directly.

How each way a run ends becomes a finish_reason or an error object (streamed and not,
the same object both ways), and how a ``text_reset`` is honoured on a stream whose sent
text cannot be taken back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from agentloop.events import (
    ErrorCode,
    ErrorEvent,
    Event,
    TextDelta,
    ToolCallResult,
    ToolCallStart,
)
from agentloop.faces.openai import (
    CompletionRequest,
    CompletionStream,
    OpenAIOptions,
    StreamOptions,
    collect_completion,
    refusal,
)
from agentloop.http_api import HttpError
from agentloop.limits import CancelToken
from agentloop.models import StopReason, UserMessage
from tests.unit.face_events import ANSWER, Counted, done, reset, turn


def delta(text: str, depth: int = 0) -> TextDelta:
    return TextDelta(text=text, depth=depth)


def tool_round(name: str = "echo") -> list[Event]:
    return [
        ToolCallStart(call_id="c1", name=name, arguments="{}"),
        ToolCallResult(call_id="c1", name=name, ok=True, duration_ms=3.0, content="{}"),
    ]


def completion_request(*, show_tools: bool = False, usage: bool = False) -> CompletionRequest:
    return CompletionRequest(
        messages=[UserMessage(content="What is the capital of France?")],
        stream=True,
        stream_options=StreamOptions(include_usage=usage),
        agentloop=OpenAIOptions(show_tools=show_tools),
    )


@dataclass
class Streamed:
    frames: list[Any]
    """Each frame's JSON, or "[DONE]"."""
    consumed: int
    cancel: CancelToken
    contents: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.contents = [
            chunk["choices"][0]["delta"]["content"]
            for chunk in self.chunks
            if chunk["choices"] and set(chunk["choices"][0]["delta"]) == {"content"}
        ]

    @property
    def chunks(self) -> list[dict[str, Any]]:
        return [f for f in self.frames if isinstance(f, dict) and "error" not in f]

    @property
    def text(self) -> str:
        return "".join(self.contents)

    @property
    def finishes(self) -> list[str]:
        return [
            c["choices"][0]["finish_reason"]
            for c in self.chunks
            if c["choices"] and c["choices"][0]["finish_reason"] is not None
        ]

    @property
    def errors(self) -> list[dict[str, Any]]:
        return [f for f in self.frames if isinstance(f, dict) and "error" in f]


async def stream(events: Sequence[Event], **options: bool) -> Streamed:
    source = Counted(events)
    cancel = CancelToken()
    translator = CompletionStream(completion_request(**options), "chatcmpl-1", "groq:m", cancel)
    frames: list[Any] = []
    async for frame in translator.frames(source.stream()):
        assert frame.startswith(b"data: ")
        assert frame.endswith(b"\n\n")
        data = frame[len(b"data: ") : -2].decode()
        frames.append(data if data == "[DONE]" else json.loads(data))
    assert frames[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert frames[-1] == "[DONE]"
    assert frames.count("[DONE]") == 1
    return Streamed(frames, source.consumed, cancel)


async def collect(events: Sequence[Event], *, show_tools: bool = False) -> dict[str, Any]:
    request = completion_request(show_tools=show_tools)
    return await collect_completion(request, Counted(events).stream(), "chatcmpl-1", "groq:m")


async def collect_error(events: Sequence[Event]) -> HttpError:
    with pytest.raises(HttpError) as caught:
        await collect(events)
    return caught.value


# -- how a run ends ------------------------------------------------------------------------


async def test_an_answer_streams_and_finishes_with_stop() -> None:
    events: list[Event] = [
        turn(1),
        delta("Paris is "),
        delta("the capital."),
        done("Paris is the capital."),
    ]

    streamed = await stream(events, usage=True)

    assert streamed.contents == ["Paris is ", "the capital."]
    assert streamed.finishes == ["stop"]
    assert streamed.errors == []
    assert streamed.frames[-2]["usage"]["total_tokens"] == 15
    body = await collect(events)
    assert body["choices"][0]["message"]["content"] == "Paris is the capital."
    assert body["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize("stop", ["max_iterations", "budget", "deadline"])
async def test_a_limit_finishes_with_length(stop: StopReason) -> None:
    events: list[Event] = [turn(1), delta("What I found."), done("What I found.", stop)]

    streamed = await stream(events)
    body = await collect(events)

    assert streamed.finishes == ["length"]
    assert streamed.errors == []
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["choices"][0]["message"]["content"] == "What I found."


@pytest.mark.parametrize(
    ("code", "status"),
    [("provider", 502), ("configuration", 503), ("invalid_request", 422), ("internal", 500)],
)
async def test_a_failed_run_is_one_error_object_streamed_or_not(
    code: ErrorCode, status: int
) -> None:
    summary = "I could not finish the answer: the model failed."
    events: list[Event] = [
        turn(1),
        delta("Par"),
        ErrorEvent(code=code, message="it went wrong"),
        delta(summary),  # the loop's apology: no answer, so not sent
        done("Par", "error"),
    ]

    streamed = await stream(events)
    error = await collect_error(events)

    assert error.status == status
    assert error.headers == {"x-should-retry": "false"}
    expected = {"message": "it went wrong", "type": f"{code}_error", "param": None, "code": status}
    assert error.body() == {"error": expected}
    assert streamed.errors == [error.body()]
    assert streamed.text == "Par"
    assert streamed.finishes == [], "no finish_reason: the answer is not complete"
    assert streamed.frames[-2:] == [error.body(), "[DONE]"]
    assert streamed.consumed == len(events), "the rest of the run is drained, not dropped"
    assert not streamed.cancel.cancelled


async def test_an_error_stop_without_an_error_event_is_still_an_error() -> None:
    events: list[Event] = [turn(1), delta("Hm."), done("Hm.", "error")]

    streamed = await stream(events)
    error = await collect_error(events)

    assert (error.status, error.type) == (500, "internal_error")
    assert streamed.errors == [error.body()]
    assert streamed.finishes == []


async def test_a_cancelled_run_is_not_a_stop() -> None:
    events: list[Event] = [turn(1), delta("Partial"), done("Partial", "cancelled")]

    streamed = await stream(events)
    error = await collect_error(events)

    assert (error.status, error.type) == (499, "cancelled")
    assert streamed.errors == [error.body()]
    assert streamed.finishes == []


async def test_sub_agents_do_not_reach_the_answer() -> None:
    events: list[Event] = [
        turn(1),
        delta("Asking."),
        delta("inner text", depth=1),
        reset(1, depth=1),
        ErrorEvent(code="provider", message="inner failure", depth=1),
        done("inner", "error", depth=1),
        delta(" Done."),
        done("Asking. Done."),
    ]

    streamed = await stream(events)

    assert streamed.text == "Asking. Done."
    assert streamed.errors == []
    assert streamed.finishes == ["stop"]


async def test_tool_lines_only_when_asked() -> None:
    events: list[Event] = [turn(1), *tool_round(), turn(2), delta("Paris."), done("Paris.")]

    plain = await stream(events)
    shown = await stream(events, show_tools=True)
    body = await collect(events, show_tools=True)

    assert plain.text == "Paris."
    assert shown.text == "\n\n> calling `echo` {}\n\n> `echo` ok in 3 ms\n\nParis."
    assert body["choices"][0]["message"]["content"] == shown.text


# -- text_reset ----------------------------------------------------------------------------


async def test_a_retried_turn_repeating_the_sent_text_sends_only_the_rest() -> None:
    events: list[Event] = [
        turn(1),
        delta("Paris"),
        delta(" is"),
        reset(1),
        delta("Par"),  # held back: already on the client's screen
        delta("is is the"),  # crosses the end of the sent text: only " the" is new
        delta(" capital."),
        done("Paris is the capital."),
    ]

    streamed = await stream(events)

    assert streamed.contents == ["Paris", " is", " the", " capital."]
    assert streamed.text == "Paris is the capital."
    assert streamed.finishes == ["stop"]
    assert streamed.errors == []
    assert not streamed.cancel.cancelled


@pytest.mark.parametrize("cut", range(1, len(ANSWER)))
async def test_a_repeated_turn_is_lossless_wherever_it_was_cut(cut: int) -> None:
    sent = [ANSWER[i : i + 3] for i in range(0, cut, 3)]
    sent[-1] = ANSWER[len("".join(sent[:-1])) : cut]
    retried = [ANSWER[i : i + 5] for i in range(0, len(ANSWER), 5)]
    events: list[Event] = [
        turn(1),
        *map(delta, sent),
        reset(1),
        *map(delta, retried),
        done(ANSWER),
    ]

    streamed = await stream(events)

    assert streamed.text == ANSWER
    assert streamed.finishes == ["stop"]


async def test_a_reset_voids_only_the_text_since_the_turn_began() -> None:
    events: list[Event] = [
        turn(1),
        delta("Let me look. "),
        *tool_round(),
        turn(2),
        delta("The ans"),
        reset(2),
        delta("The answer."),
        done("The answer."),
    ]

    streamed = await stream(events)

    assert streamed.text == "Let me look. The answer."
    assert streamed.finishes == ["stop"]


async def test_a_reset_voids_only_the_text_since_the_last_tool_result() -> None:
    # A final answer written after a tool round, at a limit, has no turn_start of its own.
    events: list[Event] = [
        turn(1),
        delta("Checking. "),
        *tool_round(),
        delta("What I fou"),
        reset(1),
        delta("What I found."),
        done("What I found.", "max_iterations"),
    ]

    streamed = await stream(events)

    assert streamed.text == "Checking. What I found."
    assert streamed.finishes == ["length"]


async def test_resets_in_a_row() -> None:
    events: list[Event] = [
        turn(1),
        delta("Paris is"),
        reset(1),
        delta("Paris"),
        reset(1),
        delta("Paris is the capital."),
        done("Paris is the capital."),
    ]

    streamed = await stream(events)

    assert streamed.text == "Paris is the capital."
    assert streamed.finishes == ["stop"]


async def test_a_reset_with_nothing_sent_changes_nothing() -> None:
    events: list[Event] = [turn(1), reset(1), delta("Paris."), done("Paris.")]

    streamed = await stream(events)

    assert streamed.contents == ["Paris."]
    assert streamed.finishes == ["stop"]


async def test_blank_voided_text_is_left_and_the_answer_follows() -> None:
    # A whitespace-only reply is voided and replaced by a forced answer: blank shows as nothing.
    events: list[Event] = [
        turn(1),
        delta("\n\n"),
        reset(1),
        delta("The answer."),
        done("The answer."),
    ]

    streamed = await stream(events)

    assert streamed.text == "\n\nThe answer."
    assert streamed.finishes == ["stop"]
    assert streamed.errors == []


async def test_a_retried_turn_saying_something_else_ends_the_stream() -> None:
    events: list[Event] = [
        turn(1),
        delta("Paris is"),
        reset(1),
        delta("Paris"),
        delta(" was"),
        delta(" the capital."),
        done("Paris was the capital."),
    ]

    streamed = await stream(events)

    assert streamed.text == "Paris is", "nothing of the departing text is sent"
    assert streamed.finishes == []
    [error] = streamed.errors
    assert error["error"]["type"] == "stream_cut"
    assert error["error"]["code"] == 502
    assert error["error"]["param"] is None
    assert (
        "a retry, or a non-streamed request, will get the whole answer"
        in (error["error"]["message"])
    )
    assert streamed.frames[-2:] == [error, "[DONE]"]
    assert streamed.cancel.cancelled, "no point finishing an answer the client cannot get"
    assert streamed.consumed == len(events)


@pytest.mark.parametrize(
    "ending",
    [
        [done("Paris", "completed")],
        [*tool_round()],
        [turn(2), delta("Paris is the capital."), done("Paris is the capital.")],
    ],
    ids=["done", "tool-call", "next-turn"],
)
async def test_a_retried_turn_ending_short_of_the_sent_text_ends_the_stream(
    ending: list[Event],
) -> None:
    events: list[Event] = [turn(1), delta("Paris is the"), reset(1), delta("Paris"), *ending]

    streamed = await stream(events, show_tools=True)

    assert streamed.text == "Paris is the"
    assert [e["error"]["type"] for e in streamed.errors] == ["stream_cut"]
    assert streamed.finishes == []


async def test_the_non_streamed_answer_leaves_voided_text_out() -> None:
    events: list[Event] = [
        turn(1),
        delta("Paris is"),
        reset(1),
        delta("Paris was"),  # departs: fatal for a stream, nothing for a whole answer
        delta(" the capital."),
        done("Paris was the capital."),
    ]

    body = await collect(events)

    assert body["choices"][0]["message"]["content"] == "Paris was the capital."
    assert body["choices"][0]["finish_reason"] == "stop"


# -- retry policy for refusals -------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "retry_header"),
    [
        (400, "false"),
        (401, "false"),
        (413, "false"),
        (415, "false"),
        (422, "false"),
        (408, None),
        (503, None),
    ],
)
def test_refusals_say_whether_a_client_retry_can_help(
    status: int, retry_header: str | None
) -> None:
    error = refusal(HttpError(status, "some_error", "no", headers={"www-authenticate": "Bearer"}))

    assert error.headers.get("x-should-retry") == retry_header
    assert error.headers["www-authenticate"] == "Bearer"
