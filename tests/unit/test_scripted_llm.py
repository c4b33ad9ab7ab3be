"""The scripted LLM server, seen through the real openai and groq SDKs.

These pin down what the fake promises the library's tests: realistic streaming, both usage
placements, error statuses the SDKs map to their exception classes, and cut connections.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

import groq
import httpx
import httpx2
import openai
import pytest

from tests.fakes.scripted_llm import (
    EXHAUSTED_MESSAGE,
    RecordedRequest,
    Reply,
    ScriptedLLM,
    ToolCallSpec,
    Usage,
    call,
    split_arguments,
)

Flavour = Literal["openai", "groq"]
both_flavours = pytest.mark.parametrize("flavour", ["openai", "groq"])
MESSAGES = [{"role": "user", "content": "hi"}]

pytestmark = pytest.mark.usefixtures("provider_env")


def client(flavour: Flavour) -> Any:
    """A real SDK client, configured only by provider_env's environment variables."""
    if flavour == "openai":
        return openai.AsyncOpenAI(max_retries=0)
    return groq.AsyncGroq(max_retries=0)


def sdk(flavour: Flavour) -> Any:
    return openai if flavour == "openai" else groq


async def stream_chunks(flavour: Flavour, **kwargs: Any) -> list[Any]:
    async with client(flavour) as c:
        stream = await c.chat.completions.create(
            model="test-model", messages=MESSAGES, stream=True, **kwargs
        )
        return [chunk async for chunk in stream]


async def complete(flavour: Flavour, **kwargs: Any) -> Any:
    async with client(flavour) as c:
        return await c.chat.completions.create(model="test-model", messages=MESSAGES, **kwargs)


def error_of(exc: Any) -> dict[str, Any]:
    """The inner error object: openai's ``.body`` is it, groq's ``.body`` is the whole JSON."""
    body: dict[str, Any] = exc.body
    return body.get("error", body)


async def drain(stream: Any, into: list[Any]) -> None:
    async for chunk in stream:
        into.append(chunk)


def content_deltas(chunks: list[Any]) -> list[str]:
    return [
        ch.choices[0].delta.content for ch in chunks if ch.choices and ch.choices[0].delta.content
    ]


def finish_reasons(chunks: list[Any]) -> list[str]:
    return [
        ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason
    ]


@both_flavours
async def test_text_is_streamed_in_several_deltas(llm: ScriptedLLM, flavour: Flavour) -> None:
    llm.script(Reply(text="one two three"))

    chunks = await stream_chunks(flavour)

    first = chunks[0].choices[0].delta
    assert (first.role, first.content) == ("assistant", "")
    deltas = content_deltas(chunks)
    assert len(deltas) >= 3
    assert "".join(deltas) == "one two three"
    assert finish_reasons(chunks) == ["stop"]
    assert {ch.model for ch in chunks} == {"test-model"}
    assert len({ch.id for ch in chunks}) == 1


@both_flavours
async def test_interleaved_tool_calls_reassemble_by_index(
    llm: ScriptedLLM, flavour: Flavour
) -> None:
    weather = call("get_weather", city="Paris", unit="celsius")
    search = call("search_docs", query="lambda response streaming limits")
    llm.script(Reply(tool_calls=[weather, search]))

    chunks = await stream_chunks(flavour)

    fragments = [tc for ch in chunks if ch.choices for tc in ch.choices[0].delta.tool_calls or []]
    order = [f.index for f in fragments]
    assert order[:4] == [0, 1, 0, 1], "fragments of parallel calls are interleaved"
    calls: dict[int, dict[str, str]] = {}
    for f in fragments:
        slot = calls.setdefault(f.index, {"id": "", "name": "", "arguments": ""})
        if f.id:
            assert (f.type, f.function.arguments) == ("function", "")
            slot["id"], slot["name"] = f.id, f.function.name
        else:
            assert f.function.name is None
            slot["arguments"] += f.function.arguments
    assert calls[0] == {"id": weather.id, "name": "get_weather", "arguments": weather.arguments}
    assert calls[1] == {"id": search.id, "name": "search_docs", "arguments": search.arguments}
    assert json.loads(calls[0]["arguments"]) == {"city": "Paris", "unit": "celsius"}
    assert order.count(0) >= 4, "header plus at least three argument pieces"
    assert finish_reasons(chunks) == ["tool_calls"]
    assert content_deltas(chunks) == []


async def test_sequential_tool_calls_when_not_interleaved(llm: ScriptedLLM) -> None:
    llm.script(Reply(tool_calls=[call("a", x=1), call("b", y=2)], interleave=False))

    chunks = await stream_chunks("openai")

    order = [tc.index for ch in chunks if ch.choices for tc in ch.choices[0].delta.tool_calls or []]
    assert order == sorted(order)


@both_flavours
async def test_malformed_arguments_and_missing_ids_are_sent_verbatim(
    llm: ScriptedLLM, flavour: Flavour
) -> None:
    llm.script(Reply(tool_calls=[ToolCallSpec("broken", '{"city": "Par')]))

    chunks = await stream_chunks(flavour)

    fragments = [tc for ch in chunks if ch.choices for tc in ch.choices[0].delta.tool_calls or []]
    assert fragments[0].id
    assert fragments[0].id.startswith("call_")
    assert "".join(f.function.arguments or "" for f in fragments) == '{"city": "Par'


async def test_openai_usage_arrives_in_a_final_chunk_when_asked(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="hello there", usage=Usage(120, 7, cached_tokens=100)))

    chunks = await stream_chunks("openai", stream_options={"include_usage": True})

    last = chunks[-1]
    assert last.choices == []
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (120, 7)
    assert last.usage.total_tokens == 127
    assert last.usage.prompt_tokens_details.cached_tokens == 100
    assert all(ch.usage is None for ch in chunks[:-1])
    assert finish_reasons(chunks) == ["stop"]


async def test_openai_sends_no_usage_unless_asked(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="hello there"))

    chunks = await stream_chunks("openai")

    assert all(ch.usage is None for ch in chunks)
    assert all(ch.choices for ch in chunks)


async def test_groq_usage_arrives_in_x_groq_of_the_finish_chunk(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="hello there", usage=(50, 4, 20)))

    chunks = await stream_chunks("groq")

    assert all(ch.usage is None for ch in chunks), "groq never sends top-level usage"
    finish = chunks[-1]
    assert finish.choices[0].finish_reason == "stop"
    usage = finish.x_groq.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (50, 4, 54)
    assert usage.prompt_tokens_details.cached_tokens == 20
    assert isinstance(usage.total_time, float)
    assert chunks[0].x_groq.id == finish.x_groq.id


async def test_default_usage_is_estimated_from_the_request(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="x" * 40))

    chunks = await stream_chunks("openai", stream_options={"include_usage": True})

    assert chunks[-1].usage.prompt_tokens == len(json.dumps(MESSAGES)) // 4
    assert chunks[-1].usage.completion_tokens == 10
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens == 0


@both_flavours
async def test_non_streaming_completion(llm: ScriptedLLM, flavour: Flavour) -> None:
    tool = call("lookup", key="abc")
    llm.script(Reply(text="let me check", tool_calls=[tool], usage=Usage(30, 6, 10)))

    result = await complete(flavour)

    choice = result.choices[0]
    assert result.object == "chat.completion"
    assert result.model == "test-model"
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "let me check"
    [tc] = choice.message.tool_calls
    assert (tc.id, tc.function.name, tc.function.arguments) == (tool.id, "lookup", tool.arguments)
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (30, 6)
    assert result.usage.prompt_tokens_details.cached_tokens == 10
    if flavour == "groq":
        assert result.x_groq.id.startswith("req_")


@both_flavours
async def test_empty_reply(llm: ScriptedLLM, flavour: Flavour) -> None:
    llm.script(Reply(empty=True))

    chunks = await stream_chunks(flavour)

    assert content_deltas(chunks) == []
    assert all(not (ch.choices and ch.choices[0].delta.tool_calls) for ch in chunks)
    assert finish_reasons(chunks) == ["stop"]


async def test_explicit_finish_reason(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="truncated answ", finish_reason="length"))

    chunks = await stream_chunks("groq")

    assert finish_reasons(chunks) == ["length"]


@both_flavours
async def test_rate_limit_with_retry_after(llm: ScriptedLLM, flavour: Flavour) -> None:
    llm.script(Reply(status=429, headers={"retry-after": "7", "x-ratelimit-remaining-tokens": "0"}))

    with pytest.raises(sdk(flavour).RateLimitError) as caught:
        await stream_chunks(flavour)

    err = caught.value
    assert err.status_code == 429
    assert err.response.headers["retry-after"] == "7"
    assert err.response.headers["x-ratelimit-remaining-tokens"] == "0"
    assert error_of(err)["code"] == "rate_limit_exceeded"
    assert error_of(err)["param"] is None


@both_flavours
async def test_server_error(llm: ScriptedLLM, flavour: Flavour) -> None:
    llm.script(Reply(status=500, error_message="boom"))

    with pytest.raises(sdk(flavour).InternalServerError) as caught:
        await complete(flavour)

    assert error_of(caught.value)["message"] == "boom"
    assert error_of(caught.value)["type"] == "server_error"


async def test_custom_error_fields(llm: ScriptedLLM) -> None:
    llm.script(Reply(status=400, error_code="context_length_exceeded", error_message="too long"))

    with pytest.raises(openai.BadRequestError) as caught:
        await stream_chunks("openai")

    assert caught.value.code == "context_length_exceeded"
    assert caught.value.type == "invalid_request_error"


async def test_cut_stream_raises_api_connection_error_in_openai(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="one two three four", cut_after=3))
    received: list[Any] = []

    async with client("openai") as c:
        stream = await c.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        with pytest.raises(openai.APIConnectionError) as caught:
            await drain(stream, received)

    assert len(received) == 3
    assert isinstance(caught.value.__cause__, httpx2.RemoteProtocolError)


async def test_cut_stream_raises_raw_httpx_error_in_groq(llm: ScriptedLLM) -> None:
    """The groq SDK does not wrap transport errors that happen mid-stream."""
    llm.script(Reply(text="one two three four", cut_after=3))
    received: list[Any] = []

    async with client("groq") as c:
        stream = await c.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        with pytest.raises(httpx.RemoteProtocolError):
            await drain(stream, received)

    assert len(received) == 3
    assert not finish_reasons(received)


@both_flavours
async def test_cut_non_streamed_answer_is_a_connection_error(
    llm: ScriptedLLM, flavour: Flavour
) -> None:
    llm.script(Reply(text="hello", cut_after=0))

    with pytest.raises(sdk(flavour).APIConnectionError):
        await complete(flavour)


@both_flavours
async def test_exhausted_script_fails_loudly(llm: ScriptedLLM, flavour: Flavour) -> None:
    with pytest.raises(sdk(flavour).InternalServerError) as caught:
        await stream_chunks(flavour)

    assert EXHAUSTED_MESSAGE in error_of(caught.value)["message"]
    assert EXHAUSTED_MESSAGE in str(caught.value)


async def test_script_is_fifo_then_responder(llm: ScriptedLLM) -> None:
    def route(request: RecordedRequest) -> Reply:
        return Reply(text=f"echo {request.messages[-1]['content']}")

    llm.script(Reply(text="first"))
    llm.respond_with(route)

    first = await complete("openai")
    second = await complete("groq")

    assert first.choices[0].message.content == "first"
    assert second.choices[0].message.content == "echo hi"
    assert llm.pending == 0


async def test_broken_responder_fails_loudly(llm: ScriptedLLM) -> None:
    def broken(request: RecordedRequest) -> Reply:
        raise KeyError("nope")

    llm.respond_with(broken)

    with pytest.raises(openai.InternalServerError, match="responder raised"):
        await complete("openai")


async def test_requests_are_recorded(llm: ScriptedLLM) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    llm.script(Reply(text="a"), Reply(text="b"))

    await stream_chunks("openai", tools=tools, tool_choice="auto")
    await complete("groq", tools=tools, tool_choice="required")

    first, second = llm.requests
    assert (first.flavour, first.path) == ("openai", "/v1/chat/completions")
    assert (second.flavour, second.path) == ("groq", "/openai/v1/chat/completions")
    assert first.stream
    assert not second.stream
    assert first.messages == MESSAGES
    assert first.tools == tools
    assert first.tool_names == ["get_weather"]
    assert (first.tool_choice, second.tool_choice) == ("auto", "required")
    assert first.model == "test-model"
    assert first.headers["authorization"] == "Bearer test-openai-key"
    assert second.headers["authorization"] == "Bearer test-groq-key"


async def test_first_delay_lets_client_timeouts_fire(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="late", first_delay=0.5))

    async with openai.AsyncOpenAI(max_retries=0, timeout=0.1) as c:
        with pytest.raises(openai.APITimeoutError):
            await c.chat.completions.create(model="m", messages=MESSAGES)


async def test_client_disconnect_is_recorded(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="a b c d e f g h i j", chunk_delay=0.02))

    async with client("openai") as c:
        stream = await c.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        await stream.__anext__()
        await stream.close()

    [request] = llm.requests
    assert await asyncio.to_thread(request.wait_disconnected, 1.0)
    assert request.client_disconnected


def test_reply_without_content_is_rejected() -> None:
    with pytest.raises(ValueError, match="needs text"):
        Reply()
    with pytest.raises(ValueError, match="empty"):
        Reply(text="x", empty=True)


def test_argument_splitting() -> None:
    assert split_arguments("") == []
    assert split_arguments("{}") == ["{}"]
    pieces = split_arguments('{"a": 1}')
    assert len(pieces) == 3
    assert "".join(pieces) == '{"a": 1}'
    long = json.dumps({"q": "x" * 100})
    assert "".join(split_arguments(long)) == long
    assert len(split_arguments(long)) > 3


def test_server_lifecycle() -> None:
    with ScriptedLLM() as server:
        server.script(Reply(text="hi"))
        body = {"model": "m", "messages": MESSAGES}
        answer = httpx.post(f"{server.openai_base_url}/chat/completions", json=body)
        assert answer.json()["choices"][0]["message"]["content"] == "hi"
        url = server.url
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{url}/v1/chat/completions", json=body)


def test_call_helper_treats_every_keyword_as_an_argument() -> None:
    first, second = call("get_order", id=7, name="x"), call("get_order")

    assert json.loads(first.arguments) == {"id": 7, "name": "x"}
    assert first.name == "get_order"
    assert first.id != second.id
    assert (second.id or "").startswith("call_")
