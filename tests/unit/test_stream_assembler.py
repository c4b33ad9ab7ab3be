"""StreamAssembler fed real openai and groq SDK chunk objects, and ``_retry_after``."""

from __future__ import annotations

import email.utils
import json
from collections.abc import Callable
from typing import Any, Literal

import groq.types.chat
import openai.types.chat
import pytest

from agentloop.llm import openai_compat
from agentloop.llm.openai_compat import StreamAssembler, _retry_after
from agentloop.models import Usage

Flavour = Literal["openai", "groq"]
both_flavours = pytest.mark.parametrize("flavour", ["openai", "groq"])

PARSERS: dict[Flavour, Callable[[dict[str, Any]], Any]] = {
    "openai": openai.types.chat.ChatCompletionChunk.model_validate,
    "groq": groq.types.chat.ChatCompletionChunk.model_validate,
}


def chunk(
    flavour: Flavour,
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    choices: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> Any:
    """One real SDK chunk object, as the SDK would parse it from the stream."""
    if choices is None:
        choices = [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}]
    data = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": choices,
        **extra,
    }
    return PARSERS[flavour](data)


def call_start(index: int, call_id: str, name: str) -> dict[str, Any]:
    return {
        "tool_calls": [
            {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
        ]
    }


def call_args(index: int, arguments: str) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "function": {"arguments": arguments}}]}


USAGE = {
    "prompt_tokens": 120,
    "completion_tokens": 30,
    "total_tokens": 150,
    "prompt_tokens_details": {"cached_tokens": 64},
}


# --- text --------------------------------------------------------------------------------------


@both_flavours
def test_text_deltas_concatenate(flavour: Flavour) -> None:
    assembler = StreamAssembler()
    chunks = [
        chunk(flavour, {"role": "assistant", "content": ""}),
        chunk(flavour, {"content": "Hello"}),
        chunk(flavour, {"content": ", "}),
        chunk(flavour, {"content": "wörld 漢字"}),
        chunk(flavour, {}, finish_reason="stop"),
    ]

    returned = [assembler.feed(c) for c in chunks]

    assert returned == ["", "Hello", ", ", "wörld 漢字", ""]
    turn = assembler.turn()
    assert turn.text == "Hello, wörld 漢字"
    assert turn.tool_calls == []
    assert turn.finish_reason == "stop"
    assert turn.usage is None


@both_flavours
def test_finish_reason_is_recorded(flavour: Flavour) -> None:
    assembler = StreamAssembler()

    assembler.feed(chunk(flavour, {"content": "partial"}))
    assert assembler.finish_reason is None
    assembler.feed(chunk(flavour, {}, finish_reason="length"))

    assert assembler.turn().finish_reason == "length"


# --- tool calls --------------------------------------------------------------------------------


@both_flavours
def test_interleaved_tool_calls_are_assembled_by_index(flavour: Flavour) -> None:
    assembler = StreamAssembler()
    weather_args = json.dumps({"city": "Paris", "unit": "celsius"})
    search_args = json.dumps({"query": "lambda streaming"})
    fragments = [
        {"role": "assistant", "content": None},
        call_start(0, "call_weather", "get_weather"),
        call_start(1, "call_search", "search_docs"),
        call_args(0, weather_args[:7]),
        call_args(1, search_args[:5]),
        call_args(0, weather_args[7:20]),
        call_args(1, search_args[5:]),
        call_args(0, weather_args[20:]),
    ]

    for delta in fragments:
        assert assembler.feed(chunk(flavour, delta)) == ""
    assembler.feed(chunk(flavour, {}, finish_reason="tool_calls"))

    turn = assembler.turn()
    assert turn.text == ""
    assert turn.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("call_weather", "get_weather", weather_args),
        ("call_search", "search_docs", search_args),
    ]
    assert all(c.type == "function" for c in turn.tool_calls)


@both_flavours
def test_id_and_name_are_kept_from_the_first_fragment(flavour: Flavour) -> None:
    assembler = StreamAssembler()
    repeated = {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_later",
                "type": "function",
                "function": {"name": "other_name", "arguments": '"}'},
            }
        ]
    }

    assembler.feed(chunk(flavour, call_start(0, "call_first", "lookup")))
    assembler.feed(chunk(flavour, call_args(0, '{"q": "')))
    assembler.feed(chunk(flavour, repeated, finish_reason="tool_calls"))

    [call] = assembler.turn().tool_calls
    assert (call.id, call.name, call.arguments) == ("call_first", "lookup", '{"q": "' + '"}')


@both_flavours
def test_tool_calls_are_ordered_by_index_not_arrival(flavour: Flavour) -> None:
    assembler = StreamAssembler()

    assembler.feed(chunk(flavour, call_start(1, "call_b", "second")))
    assembler.feed(chunk(flavour, call_start(0, "call_a", "first")))
    assembler.feed(chunk(flavour, {}, finish_reason="tool_calls"))

    assert [c.id for c in assembler.turn().tool_calls] == ["call_a", "call_b"]


@both_flavours
def test_text_and_tool_calls_in_one_turn(flavour: Flavour) -> None:
    assembler = StreamAssembler()

    assembler.feed(chunk(flavour, {"content": "Let me check."}))
    assembler.feed(chunk(flavour, call_start(0, "call_1", "lookup")))
    assembler.feed(chunk(flavour, call_args(0, "{}"), finish_reason="tool_calls"))

    turn = assembler.turn()
    assert turn.text == "Let me check."
    assert [(c.id, c.arguments) for c in turn.tool_calls] == [("call_1", "{}")]


# --- usage -------------------------------------------------------------------------------------


def test_openai_usage_comes_from_the_final_chunk_without_choices() -> None:
    assembler = StreamAssembler()

    assembler.feed(chunk("openai", {"content": "Hi"}, usage=None))
    assembler.feed(chunk("openai", {}, finish_reason="stop", usage=None))
    assert assembler.usage is None
    assert assembler.feed(chunk("openai", choices=[], usage=USAGE)) == ""

    turn = assembler.turn()
    assert turn.usage == Usage(prompt_tokens=120, completion_tokens=30, cached_tokens=64)
    assert turn.finish_reason == "stop"
    assert turn.text == "Hi"


def test_openai_usage_without_prompt_details_has_no_cached_tokens() -> None:
    assembler = StreamAssembler()
    usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}

    assembler.feed(chunk("openai", choices=[], usage=usage))

    assert assembler.usage == Usage(prompt_tokens=10, completion_tokens=2, cached_tokens=0)


def test_groq_usage_comes_from_x_groq_on_the_finishing_chunk() -> None:
    assembler = StreamAssembler()

    assembler.feed(chunk("groq", {"content": "Hi"}, x_groq={"id": "req_1"}))
    assert assembler.usage is None
    assembler.feed(chunk("groq", {}, finish_reason="stop", x_groq={"id": "req_1", "usage": USAGE}))

    turn = assembler.turn()
    assert turn.usage == Usage(prompt_tokens=120, completion_tokens=30, cached_tokens=64)
    assert turn.finish_reason == "stop"


def test_groq_usage_without_cached_tokens() -> None:
    assembler = StreamAssembler()
    usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12, "queue_time": 0.01}

    assembler.feed(chunk("groq", {}, finish_reason="stop", x_groq={"usage": usage}))

    assert assembler.usage == Usage(prompt_tokens=10, completion_tokens=2, cached_tokens=0)


# --- _retry_after ------------------------------------------------------------------------------


class FrozenTime:
    """Stands in for the ``time`` module inside ``openai_compat``."""

    now = 1_700_000_000.0

    @classmethod
    def time(cls) -> float:
        return cls.now


@pytest.fixture
def frozen_time(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(openai_compat, "time", FrozenTime)
    return FrozenTime.now


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "2.5"}, 2.5),
        ({"retry-after-ms": "soon", "retry-after": "3"}, 3.0),
        ({"retry-after-ms": "", "retry-after": "3"}, 3.0),
    ],
)
def test_retry_after_numbers(headers: dict[str, str], expected: float) -> None:
    assert _retry_after(headers) == expected


def test_retry_after_http_date(frozen_time: float) -> None:
    headers = {"retry-after": email.utils.formatdate(frozen_time + 30, usegmt=True)}

    assert _retry_after(headers) == 30.0


def test_retry_after_http_date_in_the_past_is_zero(frozen_time: float) -> None:
    headers = {"retry-after": email.utils.formatdate(frozen_time - 3_600, usegmt=True)}

    assert _retry_after(headers) == 0.0


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"retry-after": ""},
        {"retry-after": "soon"},
        {"retry-after": "Someday, 99 Foo"},
        {"retry-after-ms": "abc"},
        {"x-ratelimit-reset": "5"},
    ],
)
def test_retry_after_garbage_or_missing_is_none(headers: dict[str, str]) -> None:
    assert _retry_after(headers) is None
