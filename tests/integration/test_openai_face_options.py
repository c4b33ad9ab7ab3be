"""The OpenAI face keeps its promises: every request field reaches the model or is refused,
and a run with a sub-agent or a client that leaves is answered as OpenAI clients expect.

Through the real openai SDK (and LangChain's ``with_structured_output``) against the app on
loopback, with the scripted model behind it: sampling fields arrive on every model call of
the run, ``response_format`` shapes and checks the answer, and what the agent cannot honour
(``n: 2``, penalties, unknown fields) is a 422 naming the field, never silently dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from agentloop.ask_llm import ask_llm_tool
from agentloop.models import Usage
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.sample_tools import echo, sleeper
from tests.served import TOKEN, ServedApp, make_service

USER: Any = {"role": "user", "content": "Where is the Eiffel Tower?"}
GROQ = "groq:llama-3.3-70b-versatile"
OPENAI = "openai:gpt-4o-mini"

CITY_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
    "required": ["city", "country"],
    "additionalProperties": False,
}
CITY_FORMAT: Any = {
    "type": "json_schema",
    "json_schema": {"name": "place", "schema": CITY_SCHEMA, "strict": True},
}


class Served(ServedApp):
    """The app served, called through the openai SDK."""

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=TOKEN, max_retries=0)


@pytest.fixture
def served(llm: ScriptedLLM) -> Iterator[Served]:
    service = make_service([echo, sleeper([]), ask_llm_tool()])
    with Served(service, name="openai-options") as served:
        yield served


# -- sampling ----------------------------------------------------------------------------


@pytest.mark.parametrize("model", [GROQ, OPENAI])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_sampling_fields_reach_every_model_call(
    served: Served, llm: ScriptedLLM, model: str, stream: bool
) -> None:
    llm.script(Reply(tool_calls=[call("echo", text="tower")]), Reply(text="In Paris."))
    response: Any = served.client().chat.completions.create(
        model=model,
        messages=[USER],
        temperature=0.25,
        top_p=0.5,
        max_tokens=64,
        stop=["END"],
        seed=7,
        stream=stream,
        extra_body={"agentloop": {"tools": ["echo"]}},
    )
    if stream:
        text = "".join(c.choices[0].delta.content or "" for c in response if c.choices)
    else:
        text = response.choices[0].message.content
    assert text == "In Paris."
    assert len(llm.requests) == 2  # the tool turn and the answer: both sampled as asked
    for request in llm.requests:
        body = request.body
        assert (body["temperature"], body["top_p"], body["stop"], body["seed"]) == (
            0.25,
            0.5,
            ["END"],
            7,
        )
        assert body["max_completion_tokens"] == 64
        assert "response_format" not in body


def test_sampling_is_left_to_the_provider_when_not_asked(served: Served, llm: ScriptedLLM) -> None:
    llm.script(Reply(text="In Paris."))
    served.client().chat.completions.create(model=GROQ, messages=[USER])
    body = llm.requests[0].body
    assert not {"temperature", "top_p", "stop", "seed", "response_format"} & set(body)


def test_max_tokens_caps_but_never_raises_the_budget_cap(served: Served, llm: ScriptedLLM) -> None:
    llm.script(Reply(text="In Paris."))
    served.client().chat.completions.create(
        model=GROQ,
        messages=[USER],
        max_completion_tokens=10**6,
        extra_body={"agentloop": {"token_budget": 3000}},
    )
    assert llm.requests[0].body["max_completion_tokens"] < 3000


REFUSED = {
    "n": ({"n": 2}, "n"),
    "penalty": ({"presence_penalty": 0.5}, "presence_penalty"),
    "logprobs": ({"logprobs": True}, "logprobs"),
    "unknown-field": ({"logit_bias": {"50256": -100}}, "logit_bias"),
    "temperature-range": ({"temperature": 3}, "temperature"),
    "top-p-range": ({"top_p": 1.5}, "top_p"),
    "zero-max-tokens": ({"max_tokens": 0}, "max_tokens"),
    "disagreeing-max": ({"max_tokens": 5, "max_completion_tokens": 6}, "max_tokens"),
    "five-stops": ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    "empty-stop": ({"stop": ""}, "stop"),
    "store": ({"store": True}, "store"),
    "schema-without-schema": ({"response_format": {"type": "json_schema"}}, "response_format"),
    "not-a-json-schema": (
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": 5}},
            }
        },
        "response_format",
    ),
    "bad-format-type": ({"response_format": {"type": "yaml"}}, "response_format.type"),
    # the server's tools are chosen in "agentloop" ("tools" would be the client's own)
    "unknown-server-tool": ({"agentloop": {"tools": ["no_such_tool"]}}, "agentloop.tools"),
}


@pytest.mark.parametrize("fields", REFUSED.values(), ids=list(REFUSED))
def test_what_the_agent_cannot_honour_is_a_422_naming_it(
    served: Served, llm: ScriptedLLM, fields: tuple[dict[str, Any], str]
) -> None:
    extra, param = fields
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        served.client().chat.completions.create(model=GROQ, messages=[USER], extra_body=extra)
    body: Any = caught.value.body
    assert body["param"] == param, body
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert llm.requests == []


def test_harmless_fields_with_their_default_values_are_accepted(
    served: Served, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text="In Paris."))
    response = served.client().chat.completions.create(
        model=GROQ,
        messages=[USER],
        n=1,
        user="someone",
        metadata={"team": "web"},
        presence_penalty=0,
        frequency_penalty=0,
        logprobs=False,
        response_format={"type": "text"},
    )
    assert response.choices[0].message.content == "In Paris."
    assert "response_format" not in llm.requests[0].body  # text is what is sent anyway


# -- response_format -----------------------------------------------------------------------


def test_json_schema_answer_is_checked_and_returned(served: Served, llm: ScriptedLLM) -> None:
    answer = json.dumps({"city": "Paris", "country": "France"})
    llm.script(Reply(tool_calls=[call("echo", text="tower")]), Reply(text=answer))
    response = served.client().chat.completions.create(
        model=OPENAI,
        messages=[USER],
        response_format=CITY_FORMAT,
        extra_body={"agentloop": {"tools": ["echo"]}},
    )
    assert json.loads(response.choices[0].message.content or "") == {
        "city": "Paris",
        "country": "France",
    }
    for request in llm.requests:  # the provider's own format, and the schema in the prompt
        assert request.body["response_format"] == CITY_FORMAT
        assert '"required": ["city", "country"]' in request.messages[0]["content"]


def test_an_answer_off_the_schema_gets_one_chance_to_mend(served: Served, llm: ScriptedLLM) -> None:
    wrong = json.dumps({"city": "Paris"})
    right = json.dumps({"city": "Paris", "country": "France"})
    llm.script(Reply(text=wrong), Reply(text=right))
    response = served.client().chat.completions.create(
        model=GROQ, messages=[USER], response_format=CITY_FORMAT
    )
    assert response.choices[0].message.content == right
    second = llm.requests[1].messages
    assert second[-2] == {"role": "assistant", "content": wrong}
    assert "'country' is a required property" in second[-1]["content"]
    # The rejected answer was shown to that call only: the history returned has the answer.
    assert [m.content for m in served.last_run().messages] == [right]


def test_a_streamed_answer_off_the_schema_cannot_be_mended(
    served: Served, llm: ScriptedLLM
) -> None:
    """Streamed, the rejected answer has reached the client already: the stream ends with
    ``stream_cut`` (the SDK raises) rather than glue a second JSON onto the first."""
    llm.script(Reply(text=json.dumps({"city": "Paris"})), Reply(text="{}"))
    stream = served.client().chat.completions.create(
        model=GROQ, messages=[USER], response_format=CITY_FORMAT, stream=True
    )
    with pytest.raises(openai.APIError) as caught:
        list(stream)
    assert caught.value.body["type"] == "stream_cut"  # type: ignore[index]
    assert len(llm.requests) == 1  # the run stopped: no one could read its mended answer
    assert served.last_run().stop_reason == "cancelled"


def test_two_answers_off_the_schema_end_in_an_error_not_a_completion(
    served: Served, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text="Paris, France."), Reply(text='{"city": 3, "country": "France"}'))
    with pytest.raises(openai.APIStatusError) as caught:
        served.client().chat.completions.create(
            model=GROQ, messages=[USER], response_format=CITY_FORMAT
        )
    assert caught.value.status_code == 502
    body: Any = caught.value.body
    assert body["type"] == "invalid_output_error"
    assert "city" in body["message"]
    assert "not of type 'string'" in body["message"]
    assert len(llm.requests) == 2
    assert served.last_run().stop_reason == "error"


def test_json_object_wants_an_object(served: Served, llm: ScriptedLLM) -> None:
    llm.script(Reply(text="[1, 2]"), Reply(text='{"answer": "Paris"}'))
    response = served.client().chat.completions.create(
        model=GROQ, messages=[USER], response_format={"type": "json_object"}
    )
    assert json.loads(response.choices[0].message.content or "") == {"answer": "Paris"}
    assert llm.requests[0].body["response_format"] == {"type": "json_object"}
    assert "JSON object" in llm.requests[0].messages[0]["content"]
    assert "not a JSON object" in llm.requests[1].messages[-1]["content"]


def test_a_limit_answer_in_json_carries_no_notice_text(served: Served, llm: ScriptedLLM) -> None:
    answer = json.dumps({"city": "Paris", "country": "France"})
    llm.script(Reply(tool_calls=[call("echo", text="tower")]), Reply(text=answer))
    response = served.client().chat.completions.create(
        model=GROQ,
        messages=[USER],
        response_format=CITY_FORMAT,
        extra_body={"agentloop": {"tools": ["echo"], "max_iterations": 1}},
    )
    choice = response.choices[0]
    assert choice.finish_reason == "length"  # cut by a limit, as OpenAI says it
    assert json.loads(choice.message.content or "") == json.loads(answer)


def test_chat_accepts_the_same_fields(served: Served, llm: ScriptedLLM) -> None:
    """``/chat`` takes them natively: ``sampling`` and ``response_format``."""
    import httpx

    llm.script(Reply(text='{"city": "Paris", "country": "France"}'))
    body = {
        "messages": [USER],
        "sampling": {"temperature": 0.1, "max_output_tokens": 40},
        "response_format": CITY_FORMAT,
    }
    with httpx.stream(
        "POST", f"{served.url}/chat", json=body, headers={"authorization": f"Bearer {TOKEN}"}
    ) as response:
        assert response.status_code == 200
        response.read()
    sent = llm.requests[0].body
    assert (sent["temperature"], sent["max_completion_tokens"]) == (0.1, 40)
    assert served.last_run().stop_reason == "completed"


# -- runs: a sub-agent, a client that leaves ------------------------------------------------


def test_a_subagent_counts_in_usage_and_stays_out_of_the_text(
    served: Served, llm: ScriptedLLM
) -> None:
    def respond(request: RecordedRequest) -> Reply:
        asked = next(m["content"] for m in request.messages if m["role"] == "user")
        if asked == "What is A?":
            return Reply(text="Sub-agent: A is one.", usage=(7, 3))
        if not any(m["role"] == "tool" for m in request.messages):
            return Reply(tool_calls=[call("ask_llm", query="What is A?")], usage=(10, 5))
        return Reply(text="A is 1, says my helper.", usage=(20, 4))

    llm.respond_with(respond)
    chunks = list(
        served.client().chat.completions.create(
            model=GROQ,
            messages=[{"role": "user", "content": "What is A? Ask a helper."}],
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"agentloop": {"tools": ["ask_llm"]}},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "A is 1, says my helper."  # the sub-agent's text is not the answer
    usage = chunks[-1].usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (37, 12)  # every depth
    assert served.last_run().usage_by_depth == [
        Usage(prompt_tokens=30, completion_tokens=9),
        Usage(prompt_tokens=7, completion_tokens=3),
    ]


def test_closing_the_stream_cancels_the_run(served: Served, llm: ScriptedLLM) -> None:
    llm.respond_with(lambda request: Reply(tool_calls=[call("sleep", label="s", seconds=0.3)]))
    stream = served.client().chat.completions.create(
        model=GROQ,
        messages=[USER],
        stream=True,
        extra_body={"agentloop": {"tools": ["sleep"], "max_iterations": 20, "show_tools": True}},
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            break  # "calling `sleep`": the tool is running
    stream.close()

    done = served.last_run()
    assert done.stop_reason == "cancelled"
    assert done.iterations == 1, "no model call after the client left"
    assert len(llm.requests) == 1


# -- LangChain ------------------------------------------------------------------------------


class Place(BaseModel):
    city: str
    country: str


def test_langchain_with_structured_output(served: Served, llm: ScriptedLLM) -> None:
    from langchain_openai import ChatOpenAI

    llm.script(Reply(text='{"city": "Paris", "country": "France"}'))
    model = ChatOpenAI(
        model="agentloop",
        base_url=f"{served.url}/v1",
        api_key=TOKEN,
        max_retries=0,  # type: ignore[arg-type]
    )
    place = model.with_structured_output(Place).invoke("Where is the Eiffel Tower?")
    assert place == Place(city="Paris", country="France")
    sent = llm.requests[0].body["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] == "Place"


def test_a_dollar_budget_travels_in_the_agentloop_options(served: Served, llm: ScriptedLLM) -> None:
    """``agentloop.max_cost_usd`` reaches the run: a budget too small for any call ends the
    run before the first one, cut short by a limit as OpenAI says it."""
    response = served.client().chat.completions.create(
        model=OPENAI, messages=[USER], extra_body={"agentloop": {"max_cost_usd": 1e-9}}
    )
    assert response.choices[0].finish_reason == "length"
    assert llm.requests == []
    done = served.last_run()
    assert done.stop_reason == "budget"


def test_a_refused_dollar_limit_points_at_the_agentloop_option(
    served: Served, llm: ScriptedLLM
) -> None:
    """A plan's refusal names the field where this protocol carries the option."""
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        served.client().chat.completions.create(
            model="groq:unpriced-model",
            messages=[USER],
            extra_body={"agentloop": {"max_cost_usd": 0.5}},
        )
    body: Any = caught.value.body
    assert body["param"] == "agentloop.max_cost_usd", body
    assert "no price is known" in body["message"]
    assert llm.requests == []
