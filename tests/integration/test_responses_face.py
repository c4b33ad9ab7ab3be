"""``POST /v1/responses`` through the real clients of OpenAI's Responses API.

The openai SDK's ``responses.create`` (streamed and not) and its ``responses.stream``
helper, which checks the events' order and identities as it assembles the response; under
Node, the AI SDK's default OpenAI provider (``createOpenAI(...)(model)``) with
``generateText`` and ``streamText``. The model is the scripted LLM; the app is served on a
loopback socket.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from agentloop.ask_llm import ask_llm_tool
from agentloop.models import Usage
from tests.fakes.node_client import run_node
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG, tool_payload
from tests.sample_tools import echo, sleeper
from tests.served import TOKEN, ServedApp, make_service

MODEL = "groq:llama-3.3-70b-versatile"
QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."


class Served(ServedApp):
    """The app served; ``runs`` waits for runs a drained stream ends after its reply."""

    def client(self, **options: Any) -> openai.OpenAI:
        """An SDK client as an application makes one: the SDK's default retries unless told."""
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=TOKEN, **options)


@pytest.fixture
def served(llm: ScriptedLLM) -> Iterator[Served]:
    service = make_service([echo, sleeper([]), ask_llm_tool()])
    with Served(service, name="responses-face") as served:
        yield served


def _types(events: list[Any]) -> list[str]:
    """Event types in order, a run of text deltas shown once."""
    types: list[str] = []
    for event in events:
        if not (types and event.type == types[-1] == "response.output_text.delta"):
            types.append(event.type)
    return types


def _one(events: list[Any], type_: str) -> Any:
    [event] = [e for e in events if e.type == type_]
    return event


def _deltas(events: list[Any]) -> str:
    return "".join(e.delta for e in events if e.type == "response.output_text.delta")


def _tool_results(request: RecordedRequest) -> list[str]:
    return [str(m["content"]) for m in request.messages if m["role"] == "tool"]


ANSWERED = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
]


# -- answers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_an_answer_after_a_server_tool(served: Served, llm: ScriptedLLM, stream: bool) -> None:
    llm.script(
        Reply(tool_calls=[call("echo", text="echoed-x")], usage=(10, 5, 2)),
        Reply(text=ANSWER, usage=(20, 4)),
    )
    request: dict[str, Any] = {
        "model": MODEL,
        "input": QUESTION,
        "extra_body": {"agentloop": {"tools": ["echo"]}},
    }
    client = served.client(max_retries=0)
    if stream:
        events = list(client.responses.create(stream=True, **request))
        assert _types(events) == [*ANSWERED, "response.completed"]
        assert [e.sequence_number for e in events] == list(range(len(events)))
        assert _deltas(events) == ANSWER
        assert _one(events, "response.output_text.done").text == ANSWER
        assert _one(events, "response.content_part.done").part.text == ANSWER
        response = events[-1].response
        item_ids = {e.item_id for e in events if hasattr(e, "item_id")}
        assert item_ids == {response.output[0].id}
        assert events[0].response.id == response.id
    else:
        response = client.responses.create(**request)

    assert response.status == "completed"
    assert response.incomplete_details is None
    assert response.output_text == ANSWER  # the tool's activity stays out of the text
    [message] = response.output
    assert (message.type, message.role, message.status) == ("message", "assistant", "completed")
    assert response.model == MODEL
    assert response.id.startswith("resp_")
    usage = response.usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (30, 9, 39)
    assert usage.input_tokens_details.cached_tokens == 2
    [result] = _tool_results(llm.requests[1])
    assert tool_payload(result)["result"] == "echoed-x", "the tool ran on the server"
    [done] = served.runs(1)
    assert done.stop_reason == "completed"


def test_the_sdk_stream_helper_assembles_the_response(served: Served, llm: ScriptedLLM) -> None:
    llm.script(Reply(text=ANSWER, usage=(12, 6)))

    with served.client(max_retries=0).responses.stream(model=MODEL, input=QUESTION) as stream:
        snapshots = [e.snapshot for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()

    assert snapshots[-1] == ANSWER
    assert final.output_text == ANSWER
    assert final.usage is not None
    assert final.usage.total_tokens == 18


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_show_tools_puts_tool_lines_before_the_answer(
    served: Served, llm: ScriptedLLM, stream: bool
) -> None:
    llm.script(Reply(tool_calls=[call("echo", text="x")]), Reply(text=ANSWER))
    request: dict[str, Any] = {
        "model": MODEL,
        "input": QUESTION,
        "extra_body": {"agentloop": {"tools": ["echo"], "show_tools": True}},
    }
    client = served.client(max_retries=0)
    if stream:
        events = list(client.responses.create(stream=True, **request))
        text = _deltas(events)
        assert text == events[-1].response.output_text
    else:
        text = client.responses.create(**request).output_text

    assert text.startswith("\n\n> calling `echo` ")
    assert "> `echo` ok in " in text
    assert text.endswith(ANSWER)


def test_a_subagent_is_counted_in_usage_not_shown_in_text(served: Served, llm: ScriptedLLM) -> None:
    sub_answer = "Sub-agent finding: A is one."

    def respond(request: RecordedRequest) -> Reply:
        asked = next(m["content"] for m in request.messages if m["role"] == "user")
        if asked == "What is A?":
            return Reply(text=sub_answer, usage=(7, 3))
        if not _tool_results(request):
            return Reply(tool_calls=[call("ask_llm", query="What is A?")], usage=(10, 5))
        return Reply(text="A is 1, says my helper.", usage=(20, 4))

    llm.respond_with(respond)
    events = list(
        served.client(max_retries=0).responses.create(
            model=MODEL,
            input="What is A? Ask a helper.",
            stream=True,
            extra_body={"agentloop": {"tools": ["ask_llm"]}},
        )
    )

    assert _deltas(events) == "A is 1, says my helper."
    response = events[-1].response
    assert response.status == "completed"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (37, 12)
    [done] = served.runs(1)
    assert done.usage_by_depth == [
        Usage(prompt_tokens=30, completion_tokens=9),
        Usage(prompt_tokens=7, completion_tokens=3),
    ]
    assert any(sub_answer in result for result in _tool_results(llm.requests[-1]))


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_limit_ends_incomplete_with_the_stop_reason(
    served: Served, llm: ScriptedLLM, stream: bool
) -> None:
    llm.script(Reply(tool_calls=[call("echo", text="x")]), Reply(text="What I found so far."))
    request: dict[str, Any] = {
        "model": MODEL,
        "input": QUESTION,
        "extra_body": {"agentloop": {"tools": ["echo"], "max_iterations": 1}},
    }
    client = served.client(max_retries=0)
    if stream:
        events = list(client.responses.create(stream=True, **request))
        assert _types(events) == [*ANSWERED, "response.incomplete"]
        assert _one(events, "response.output_item.done").item.status == "incomplete"
        response = events[-1].response
        assert _deltas(events) == response.output_text
    else:
        response = client.responses.create(**request)

    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"  # the protocol's "cut"
    assert response.output_text.startswith("What I found so far.")
    assert "Reached the limit of 1 tool iterations" in response.output_text
    assert served.runs(1)[0].stop_reason == "max_iterations"


def test_input_items_instructions_and_an_earlier_output_reach_the_model(
    served: Served, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text=ANSWER), Reply(text="Rome."))
    client = served.client(max_retries=0)
    first = client.responses.create(
        model=MODEL,
        input=[{"role": "user", "content": QUESTION}],
        metadata={"ticket": "T-1"},
        user="someone",
        store=False,
        parallel_tool_calls=True,
        tools=[],
        extra_body={"agentloop": {"tools": []}},
    )
    assert first.metadata == {"ticket": "T-1"}

    second = client.responses.create(
        model="agentloop",  # the server's default model
        instructions="You are a geographer.",
        input=[
            {"role": "user", "content": QUESTION},
            *[item.model_dump(exclude_none=True) for item in first.output],
            {"role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Italy?"}],
            },
        ],
        extra_body={"agentloop": {"tools": []}},
    )

    assert second.output_text == "Rome."
    sent = [(m["role"], m["content"]) for m in llm.requests[-1].messages]
    assert sent[-5:] == [
        ("system", "You are a geographer."),
        ("user", QUESTION),
        ("assistant", ANSWER),
        ("system", "Be brief."),
        ("user", "Italy?"),
    ]
    assert second.model == TEST_CONFIG.default_model


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_sampling_fields_reach_every_model_call(
    served: Served, llm: ScriptedLLM, stream: bool
) -> None:
    llm.script(Reply(tool_calls=[call("echo", text="x")]), Reply(text=ANSWER))
    request: dict[str, Any] = {
        "model": MODEL,
        "input": QUESTION,
        "temperature": 0.25,
        "top_p": 0.5,
        "max_output_tokens": 64,
        "extra_body": {"agentloop": {"tools": ["echo"]}},
    }
    client = served.client(max_retries=0)
    if stream:
        response = list(client.responses.create(stream=True, **request))[-1].response
    else:
        response = client.responses.create(**request)

    assert response.output_text == ANSWER
    assert (response.temperature, response.top_p, response.max_output_tokens) == (0.25, 0.5, 64)
    assert len(llm.requests) == 2
    for sent in llm.requests:
        body = sent.body
        assert (body["temperature"], body["top_p"], body["max_completion_tokens"]) == (
            0.25,
            0.5,
            64,
        )


class City(BaseModel):
    name: str
    population: int


def test_the_sdk_parse_helper_gets_its_structured_answer(served: Served, llm: ScriptedLLM) -> None:
    llm.script(Reply(text='{"name": "Paris", "population": 2100000}'))

    response = served.client(max_retries=0).responses.parse(
        model=MODEL, input="Which city is the capital of France?", text_format=City
    )

    assert response.output_parsed == City(name="Paris", population=2_100_000)
    sent = llm.requests[0].body["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] == "City"
    assert sent["json_schema"]["schema"]["required"] == ["name", "population"]
    assert response.text is not None
    assert response.text.format.type == "json_schema"


# -- failures --------------------------------------------------------------------------------


def _unavailable(request: RecordedRequest) -> Reply:
    return Reply(status=503)


def test_a_provider_failure_is_not_retried_by_the_sdk(served: Served, llm: ScriptedLLM) -> None:
    llm.respond_with(_unavailable)
    client = served.client()
    assert client.max_retries == 2  # the SDK's default

    with pytest.raises(openai.InternalServerError) as caught:
        client.responses.create(model=MODEL, input=QUESTION)

    # (app requests the SDK made, provider calls the server made) for ONE SDK call
    assert (len(served.runs(1)), len(llm.requests)) == (1, TEST_CONFIG.retry_max_attempts)
    error = caught.value
    assert error.status_code == 502
    assert error.response.headers["x-should-retry"] == "false"
    assert isinstance(error.body, dict)
    assert error.body["type"] == "provider_error"
    assert "HTTP 503" in error.body["message"]


def test_a_streamed_provider_failure_raises_mid_stream(served: Served, llm: ScriptedLLM) -> None:
    llm.respond_with(_unavailable)
    events: list[Any] = []

    with pytest.raises(openai.APIError) as caught:
        events.extend(served.client().responses.create(model=MODEL, input=QUESTION, stream=True))

    assert (len(served.runs(1)), len(llm.requests)) == (1, TEST_CONFIG.retry_max_attempts)
    error = caught.value
    assert not isinstance(error, openai.APIStatusError), "raised mid-stream, after a 200"
    assert isinstance(error.body, dict)
    assert (error.body["type"], error.body["code"]) == ("provider_error", "502")
    assert "HTTP 503" in error.body["message"]
    assert _types(events) == ANSWERED[:4]  # opened, nothing answered


def test_a_stream_cut_and_retried_differently_ends_in_an_error(
    served: Served, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text=ANSWER, cut_after=3), Reply(text="The capital of France is Paris."))
    events: list[Any] = []

    with pytest.raises(openai.APIError) as caught:
        events.extend(
            served.client(max_retries=0).responses.create(model=MODEL, input=QUESTION, stream=True)
        )

    assert len(llm.requests) == 2, "the turn was retried"
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["type"] == "stream_cut"
    assert _deltas(events) == "Paris is ", "what the cut attempt sent, and nothing else"
    assert len(served.runs(1)) == 1, "the run still ended and was recorded"


def test_closing_the_stream_cancels_the_run(served: Served, llm: ScriptedLLM) -> None:
    llm.respond_with(lambda request: Reply(tool_calls=[call("sleep", label="s", seconds=0.3)]))

    stream = served.client(max_retries=0).responses.create(
        model=MODEL,
        input=QUESTION,
        stream=True,
        extra_body={"agentloop": {"tools": ["sleep"], "max_iterations": 20, "show_tools": True}},
    )
    for event in stream:
        if event.type == "response.output_text.delta":
            break  # "calling `sleep`": the tool is running
    stream.close()

    [done] = served.runs(1)
    assert done.stop_reason == "cancelled"
    assert done.iterations == 1, "no model call after the client left"
    assert len(llm.requests) == 1


# -- refusals --------------------------------------------------------------------------------

FUNCTION_TOOL = {"type": "function", "name": "f", "parameters": {}, "strict": False}

REFUSALS: dict[str, tuple[dict[str, Any], str, str]] = {
    "client-tools": ({"tools": [FUNCTION_TOOL]}, "tools", "client-side tools"),
    "image": (
        {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
        "input.0.content.0",
        "only text parts",
    ),
    "tool-output-item": (
        {"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]},
        "input.0",
        "only message items",
    ),
    "assistant-last": (
        {"input": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]},
        "input",
        "the last message must be the user's",
    ),
    "empty-input": ({"input": []}, "input", "at least 1 item"),
    "tool-role": ({"input": [{"role": "tool", "content": "x"}]}, "input.0.role", "'user'"),
    "background": ({"background": True}, "background", "not run in the background"),
    "reasoning": ({"reasoning": {"effort": "low"}}, "reasoning", "not supported"),
    "temperature": ({"temperature": 3}, "temperature", "less than or equal to 2"),
    "max-output-tokens": ({"max_output_tokens": 0}, "max_output_tokens", "greater than"),
    "verbosity": ({"text": {"verbosity": "low"}}, "text.verbosity", "not permitted"),
    "format-type": ({"text": {"format": {"type": "xml"}}}, "text.format", '"json_schema"'),
    "schema-name": (
        {"text": {"format": {"type": "json_schema", "schema": {"type": "object"}}}},
        "text.format.name",
        "Field required",
    ),
    "bad-schema": (
        {"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": 5}}}},
        "text.format.schema",
        "not a valid JSON Schema",
    ),
    "store": ({"store": "maybe"}, "store", "valid boolean"),
    "unknown-field": ({"extra_body": {"frobnicate": 1}}, "frobnicate", "not supported"),
    "agent-options": (
        {"extra_body": {"agentloop": {"max_iterations": 0}}},
        "agentloop.max_iterations",
        "greater than or equal to 1",
    ),
    "model": ({"model": "mistral:large"}, "model", "mistral"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals_name_the_field(served: Served, llm: ScriptedLLM, case: str) -> None:
    fields, param, fragment = REFUSALS[case]
    request: dict[str, Any] = {"model": MODEL, "input": QUESTION, **fields}

    with pytest.raises(openai.UnprocessableEntityError) as caught:
        served.client().responses.create(**request)

    error = caught.value
    assert isinstance(error.body, dict)
    assert error.body["param"] == param
    assert fragment in error.body["message"]
    assert error.response.headers["x-should-retry"] == "false"
    assert llm.requests == []
    assert served.finished == []


# -- the AI SDK ------------------------------------------------------------------------------


def test_the_ai_sdk_default_openai_provider(served: Served, llm: ScriptedLLM) -> None:
    def respond(request: RecordedRequest) -> Reply:
        last = str(request.messages[-1]["content"])
        if last == "Say one thing.":
            return Reply(text="One generated thing.", usage=(11, 3))
        if last == "Now stream.":
            return Reply(text="A streamed answer, in pieces.", usage=(12, 5))
        return Reply(status=503)

    llm.respond_with(respond)
    user = {"role": "user", "content": "Say one thing."}
    cases = [
        {"name": "generate", "mode": "generate", "system": "Be brief.", "messages": [user]},
        {
            "name": "stream",
            "mode": "stream",
            "messages": [
                user,
                {"role": "assistant", "content": "One generated thing."},
                {"role": "user", "content": "Now stream."},
            ],
        },
        {"name": "failure", "mode": "stream", "messages": [{"role": "user", "content": "Fail."}]},
    ]
    payload = {
        "baseURL": f"{served.url}/v1",
        "token": TOKEN,
        "cases": [{"model": MODEL, **case} for case in cases],
    }

    out = run_node("ai_sdk_openai_client.mjs", payload)

    generated = out["generate"]
    assert generated["text"] == "One generated thing."
    assert generated["finishReason"] == "stop"
    assert generated["modelId"] == MODEL
    assert generated["responseId"].startswith("resp_")
    usage = generated["usage"]
    assert (usage["inputTokens"], usage["outputTokens"], usage["totalTokens"]) == (11, 3, 14)
    first = llm.requests[0].messages
    assert [(m["role"], m["content"]) for m in first[-2:]] == [
        ("system", "Be brief."),
        ("user", "Say one thing."),
    ]

    streamed = out["stream"]
    assert streamed["text"] == "".join(streamed["deltas"]) == "A streamed answer, in pieces."
    assert streamed["finishReason"] == "stop"
    assert streamed["errors"] == []
    assert (streamed["usage"]["inputTokens"], streamed["usage"]["outputTokens"]) == (12, 5)
    assert [m["role"] for m in llm.requests[1].messages][-3:] == ["user", "assistant", "user"]

    failed = out["failure"]
    assert failed["finishReason"] == "error"
    assert failed["text"] == ""
    [error] = failed["errors"]
    assert error["statusCode"] == 502
    assert "HTTP 503" in error["message"]
    runs = served.runs(3)
    assert [done.stop_reason for done in runs] == ["completed", "completed", "error"]
    assert len(llm.requests) == 2 + TEST_CONFIG.retry_max_attempts, "no client retry"
