"""Client-side tools through the chat-completions face, driven by the real openai SDK and
LangChain against the app on loopback, with the scripted model behind it.

The model is offered the client's tools beside the server's; a turn that calls both runs the
server's call (``echo``) and pauses on the client's (``get_weather``): the answer carries only
the client's call, with ``finish_reason: "tool_calls"``, and a resume token on the message that
the SDK sends back. The next request, with the tool's result, continues the same run: the model
then reads the server call's result too (taken from the token), and the run's iterations and
tokens go on from the pause.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from agentloop.server.service import ChatService
from agentloop.signing import Signer
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG
from tests.sample_tools import echo
from tests.served import PRINCIPAL, TOKEN, ServedApp, make_service

MODEL = "groq:llama-3.3-70b-versatile"
USER: Any = {"role": "user", "content": "Echo hi, and what is the weather in Paris?"}
WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city, as the user's app knows it.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
SERVER_TOOLS: Any = {"agentloop": {"tools": ["echo"]}}
NOT_A_SCHEMA = {"type": "object", "properties": {"city": {"type": 5}}}


class Served(ServedApp):
    """The app served, called through the openai SDK or refused over httpx."""

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=TOKEN, max_retries=0)

    def refused(self, body: dict[str, Any]) -> dict[str, Any]:
        """A raw request's 422 error object."""
        body = {"model": MODEL, **body}
        response = httpx.post(
            f"{self.url}/v1/chat/completions",
            json=body,
            headers={"authorization": f"Bearer {TOKEN}"},
            timeout=10,
        )
        assert response.status_code == 422, response.text
        error: dict[str, Any] = response.json()["error"]
        return error


def serve(service: ChatService) -> Iterator[Served]:
    with Served(service, name="openai-client-tools") as served:
        yield served


@pytest.fixture
def served(llm: ScriptedLLM) -> Iterator[Served]:
    yield from serve(make_service([echo]))


def tool_results(request: RecordedRequest) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request.messages if m["role"] == "tool"}


ECHOED_HI = json.dumps({"ok": True, "result": "hi"})
"""The server's echo result as the model reads it."""


def offered(request: RecordedRequest) -> list[str]:
    return [t["function"]["name"] for t in request.tools or []]


def ask(served: Served, messages: list[Any], *, stream: bool, **fields: Any) -> Any:
    """One SDK call as an application makes it; the assistant message to append, the
    finish reason, and (streamed) the chunks. Streamed, the SDK's stream helper accumulates
    the message (its final message is what applications append)."""
    client = served.client()
    fields = {"tools": [WEATHER], "extra_body": SERVER_TOOLS, **fields}
    if not stream:
        response = client.chat.completions.create(model=MODEL, messages=messages, **fields)
        choice = response.choices[0]
        return choice.message, choice.finish_reason, []
    with client.chat.completions.stream(model=MODEL, messages=messages, **fields) as events:
        chunks = [event.chunk for event in events if event.type == "chunk"]
        final = events.get_final_completion()
    return final.choices[0].message, final.choices[0].finish_reason, chunks


def pause(served: Served, llm: ScriptedLLM, *, stream: bool) -> tuple[Any, str, str, list[Any]]:
    """A turn that calls the server's echo and the client's get_weather: the run pauses."""
    echoed, weather = call("echo", text="hi"), call("get_weather", city="Paris")
    llm.script(Reply(text="Let me check. ", tool_calls=[echoed, weather], usage=(100, 20)))
    message, finish, chunks = ask(served, [USER], stream=stream)
    assert finish == "tool_calls"
    assert echoed.id is not None
    assert weather.id is not None
    return message, echoed.id, weather.id, chunks


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_client_tool_round_trip_mixed_with_a_server_tool(
    served: Served, llm: ScriptedLLM, stream: bool
) -> None:
    message, echoed, weather, chunks = pause(served, llm, stream=stream)

    # Offered beside the server's tools; only the client's call comes back to the client.
    assert offered(llm.requests[0]) == ["echo", "get_weather"]
    assert [
        (c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls
    ] == [(weather, "get_weather", {"city": "Paris"})]
    token = message.model_extra["agentloop"]["resume"]
    paused = served.runs(1)[0]
    assert paused.stop_reason == "client_tools"
    assert token == paused.resume
    if stream:  # as OpenAI streams calls: indexed deltas, then the finish reason
        deltas = [c.choices[0].delta for c in chunks if c.choices and c.choices[0].delta.tool_calls]
        assert [
            (d.tool_calls[0].index, d.tool_calls[0].id, d.tool_calls[0].type) for d in deltas
        ] == [(0, weather, "function")]
        last = chunks[-1].choices[0]
        assert (last.finish_reason, last.delta.model_extra["agentloop"]["resume"]) == (
            "tool_calls",
            token,
        )
        assert message.content == "Let me check. "  # streamed before the calls
    else:
        assert message.content is None  # the text since the server tool's result: none

    # The application runs its tool and sends the result; the run goes on.
    llm.script(Reply(text="It is sunny in Paris, and echo said hi.", usage=(200, 10)))
    result = {"role": "tool", "tool_call_id": weather, "content": "sunny, 24 C"}
    message, finish, _ = ask(served, [USER, message, result], stream=stream)

    assert (message.content, finish) == ("It is sunny in Paris, and echo said hi.", "stop")
    assert message.tool_calls is None
    seen = llm.requests[-1]
    assert tool_results(seen) == {
        echoed: ECHOED_HI,
        weather: "sunny, 24 C",
    }  # echo's from the token
    calls = [m["tool_calls"] for m in seen.messages if m["role"] == "assistant"]
    assert [[c["id"] for c in turn] for turn in calls] == [[echoed, weather]]  # the whole turn
    done = served.runs(2)[1]
    assert done.stop_reason == "completed"
    assert done.iterations == 2  # carried over from the pause
    assert done.usage.total_tokens == 120 + 210
    assert done.usage_by_depth[0].total_tokens == 330


def test_a_run_pauses_again_and_the_token_may_travel_in_the_options(
    served: Served, llm: ScriptedLLM
) -> None:
    first, echoed, weather, _ = pause(served, llm, stream=False)
    token = first.model_extra["agentloop"]["resume"]
    # The application kept plain dicts, without the mark: the token goes in agentloop.resume.
    kept = {
        "role": "assistant",
        "content": None,
        "tool_calls": [c.model_dump() for c in first.tool_calls],
    }
    result = {"role": "tool", "tool_call_id": weather, "content": "rain"}
    again = call("get_weather", city="Lyon")
    llm.script(Reply(tool_calls=[again]), Reply(text="Rain in Paris, sun in Lyon."))
    second, finish, _ = ask(
        served,
        [USER, kept, result],
        stream=False,
        extra_body={"agentloop": {"tools": ["echo"], "resume": token}},
    )
    assert finish == "tool_calls"
    assert [c.id for c in second.tool_calls] == [again.id]

    later = {"role": "tool", "tool_call_id": again.id, "content": "sun"}
    final, finish, _ = ask(served, [USER, kept, result, second, later], stream=True)

    assert (final.content, finish) == ("Rain in Paris, sun in Lyon.", "stop")
    assert tool_results(llm.requests[-1]) == {echoed: ECHOED_HI, weather: "rain", again.id: "sun"}
    assert served.runs(3)[2].iterations == 3


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_langchain_bind_tools_round_trip(served: Served, llm: ScriptedLLM, stream: bool) -> None:
    """LangChain keeps no unknown field, so no token: the conversation goes on as a plain
    continuation, without the paused turn's hidden server round."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(
        model=MODEL,
        base_url=f"{served.url}/v1",
        api_key=TOKEN,
        max_retries=0,
        extra_body=SERVER_TOOLS,
    ).bind_tools([WEATHER])

    def invoke(messages: list[Any]) -> AIMessage:
        if not stream:
            answer = model.invoke(messages)
            assert isinstance(answer, AIMessage)
            return answer
        chunks = list(model.stream(messages))
        merged: Any = chunks[0]
        for chunk in chunks[1:]:
            merged = merged + chunk
        return AIMessage(content=merged.content, tool_calls=merged.tool_calls)

    echoed, weather = call("echo", text="hi"), call("get_weather", city="Paris")
    llm.script(Reply(tool_calls=[echoed, weather]), Reply(text="Sunny in Paris."))
    question = HumanMessage("What is the weather in Paris?")
    ai = invoke([question])
    assert [(c["id"], c["name"], c["args"]) for c in ai.tool_calls] == [
        (weather.id, "get_weather", {"city": "Paris"})
    ]

    answer = invoke([question, ai, ToolMessage("sunny", tool_call_id=weather.id)])

    assert answer.content == "Sunny in Paris."
    seen = llm.requests[-1]
    assert tool_results(seen) == {weather.id: "sunny"}  # no token: echo's round is not there
    assert offered(seen) == ["echo", "get_weather"]
    assert served.runs(2)[1].iterations == 1  # a new run


def test_tool_choice_and_parallel_tool_calls(served: Served, llm: ScriptedLLM) -> None:
    llm.script(Reply(text="No tools needed."), Reply(text="Still none."))
    client = served.client()
    client.chat.completions.create(
        model=MODEL, messages=[USER], tools=[WEATHER], tool_choice="none", extra_body=SERVER_TOOLS
    )
    assert offered(llm.requests[0]) == ["echo"]  # "none": the client's tools are not offered
    client.chat.completions.create(
        model=MODEL,
        messages=[USER],
        tools=[WEATHER],
        tool_choice="auto",
        parallel_tool_calls=True,
        extra_body=SERVER_TOOLS,
    )
    assert offered(llm.requests[1]) == ["echo", "get_weather"]

    named = {"type": "function", "function": {"name": "get_weather"}}
    for choice in ["required", named]:
        error = served.refused({"messages": [USER], "tools": [WEATHER], "tool_choice": choice})
        assert error["param"] == "tool_choice"
        assert "cannot be forced" in error["message"]
    error = served.refused({"messages": [USER], "tools": [WEATHER], "parallel_tool_calls": False})
    assert error["param"] == "parallel_tool_calls"
    assert len(llm.requests) == 2


def test_a_client_tool_named_like_a_server_tool_is_refused(
    served: Served, llm: ScriptedLLM
) -> None:
    clash: Any = {
        "type": "function",
        "function": {"name": "echo", "parameters": {"type": "object"}},
    }
    with pytest.raises(openai.UnprocessableEntityError) as raised:
        served.client().chat.completions.create(model=MODEL, messages=[USER], tools=[clash])
    assert raised.value.response.json()["error"]["param"] == "tools"
    assert "echo" in raised.value.message
    assert llm.requests == []


@pytest.mark.parametrize(
    "tools",
    [
        [{"type": "function"}],
        [{"type": "retrieval", "function": {"name": "f"}}],
        [{"type": "function", "function": {"name": "no spaces allowed"}}],
        [{"type": "function", "function": {"name": "f", "parameters": "an object"}}],
        [{"type": "function", "function": {"name": "f", "surprise": 1}}],
        [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        [{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}],
        [{"type": "function", "function": {"name": "f", "parameters": NOT_A_SCHEMA}}],
        [{"type": "function", "function": {"name": "f"}}] * 2,
        [{"type": "function", "function": {"name": f"f{i}"}} for i in range(65)],
        {"type": "function", "function": {"name": "f"}},
    ],
    ids=[
        "no-function",
        "not-a-function",
        "bad-name",
        "bad-parameters",
        "unknown-field",
        "empty-parameters",
        "array-parameters",
        "not-a-schema",
        "twice",
        "too-many",
        "not-a-list",
    ],
)
def test_malformed_tool_definitions_are_refused(
    served: Served, llm: ScriptedLLM, tools: Any
) -> None:
    error = served.refused({"messages": [USER], "tools": tools})
    assert error["param"].startswith("tools")
    assert llm.requests == []


def test_a_forged_or_edited_token_is_refused(served: Served, llm: ScriptedLLM) -> None:
    message, _, weather, _ = pause(served, llm, stream=False)
    token = message.model_extra["agentloop"]["resume"]
    echoed_back = message.model_dump(exclude_unset=True)  # as the SDK sends it back
    result = {"role": "tool", "tool_call_id": weather, "content": "sunny"}

    def with_token(value: str) -> list[Any]:
        return [USER, {**echoed_back, "agentloop": {"resume": value}}, result]

    ours = served.service.setup.signer.for_principal(PRINCIPAL.id)
    foreign = Signer(b"another server's key!").sign(ours.verify(token))
    for forged, fragment in [
        (foreign, "signature"),
        (token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB"), "signature"),
        ("al1.bm90.aXQ", "signature"),
        ("hello", "not a token"),
    ]:
        error = served.refused({"messages": with_token(forged), "tools": [WEATHER]})
        assert error["param"] == "messages[1].agentloop.resume"
        assert fragment in error["message"]
        error = served.refused(
            {
                "messages": [USER, echoed_back | {"agentloop": None}, result],
                "tools": [WEATHER],
                "agentloop": {"resume": forged},
            }
        )
        assert error["param"] == "agentloop.resume"

    # The conversation before the pause changed.
    changed = [{"role": "user", "content": "Weather in Rome?"}, *with_token(token)[1:]]
    error = served.refused({"messages": changed, "tools": [WEATHER]})
    assert "not the one this token was issued for" in error["message"]
    # The client tool's result is missing (the run waits for it).
    error = served.refused({"messages": with_token(token)[:2], "tools": [WEATHER]})
    assert error["param"] == "messages[1].agentloop.resume"
    # Two different tokens.
    error = served.refused(
        {"messages": with_token(token), "tools": [WEATHER], "agentloop": {"resume": foreign}}
    )
    assert error["param"] == "agentloop.resume"
    # A mark that is not this face's shape.
    error = served.refused(
        {"messages": [USER, {**echoed_back, "agentloop": {"resume": 5}}, result]}
    )
    assert error["param"].startswith("messages.1.assistant.agentloop")
    assert len(llm.requests) == 1  # only the pause's: nothing refused reached the model


def test_a_token_on_an_earlier_turn_is_left_alone(served: Served, llm: ScriptedLLM) -> None:
    message, _, weather, _ = pause(served, llm, stream=False)
    result = {"role": "tool", "tool_call_id": weather, "content": "sunny"}
    llm.script(Reply(text="Sunny."), Reply(text="You are welcome."))
    answer, _, _ = ask(served, [USER, message, result], stream=False)
    follow_up = {"role": "user", "content": "Thanks!"}

    final, finish, _ = ask(served, [USER, message, result, answer, follow_up], stream=False)

    assert (final.content, finish) == ("You are welcome.", "stop")
    assert served.runs(3)[2].iterations == 1  # a new run, not the paused one again


@pytest.fixture
def approving(llm: ScriptedLLM) -> Iterator[Served]:
    config = TEST_CONFIG.model_copy(update={"approval_tools": ("echo",)})
    yield from serve(make_service([echo], config=config))


def test_tools_that_need_approval_are_not_offered_here(approving: Served, llm: ScriptedLLM) -> None:
    """This face cannot ask a person: naming such a tool is a 422 before any model call, and
    the default set leaves it out."""
    with pytest.raises(openai.UnprocessableEntityError, match="approval") as raised:
        approving.client().chat.completions.create(
            model=MODEL, messages=[USER], extra_body=SERVER_TOOLS
        )
    body: Any = raised.value.body
    assert body["param"] == "agentloop.tools"
    assert "/chat" in body["message"]
    assert llm.requests == []

    llm.script(Reply(text="No tools for me."))
    approving.client().chat.completions.create(model=MODEL, messages=[USER])
    assert "echo" not in llm.requests[0].tool_names
