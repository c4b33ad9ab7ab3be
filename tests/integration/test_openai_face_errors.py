"""The OpenAI face under failure, through the real openai SDK with its default retries.

The server already retries the provider, so one SDK call must cost the provider what one
request costs, not that times the SDK's own retries; an error has one shape whether it is
streamed or not and never ends like a complete answer; a run cut by a limit says "length";
a provider stream cut mid-answer is replayed losslessly or reported as cut.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest

from tests.fakes.pytest_plugin import TEST_GROQ_KEY
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG
from tests.sample_tools import echo
from tests.served import TOKEN, ServedApp, make_service

MODEL = "groq:llama-3.3-70b-versatile"
USER: Any = {"role": "user", "content": "What is the capital of France?"}


class Served(ServedApp):
    """The app served; ``runs`` waits for runs a drained stream ends after its reply."""

    def client(self, **options: Any) -> openai.OpenAI:
        """An SDK client as an application would make one: default retries unless told."""
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=TOKEN, **options)


@pytest.fixture
def served(llm: ScriptedLLM) -> Iterator[Served]:
    with Served(make_service([echo]), name="openai-face") as served:
        yield served


# -- one SDK call, counted upstream ------------------------------------------------------


def _unavailable(request: RecordedRequest) -> Reply:
    return Reply(status=503)


def _checks_the_key(request: RecordedRequest) -> Reply:
    if request.headers.get("authorization") != f"Bearer {TEST_GROQ_KEY}":
        return Reply(status=401)
    return Reply(text="The key was right.")


@dataclass(frozen=True)
class Fault:
    responder: Callable[[RecordedRequest], Reply]
    groq_key: str
    upstream_per_request: int
    """Provider calls the server itself makes for one request: its own retry policy."""
    fragment: str


FAULTS = {
    "provider-503": Fault(_unavailable, TEST_GROQ_KEY, TEST_CONFIG.retry_max_attempts, "HTTP 503"),
    "wrong-key": Fault(_checks_the_key, "gsk_wrong-key", 1, "HTTP 401"),
}


@pytest.fixture(params=sorted(FAULTS))
def fault(
    request: pytest.FixtureRequest, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> Fault:
    chosen = FAULTS[request.param]
    monkeypatch.setenv("GROQ_API_KEY", chosen.groq_key)
    llm.respond_with(chosen.responder)
    return chosen


def _provider_error(caught: openai.APIError, fault: Fault) -> None:
    body = caught.body
    assert isinstance(body, dict), body
    assert set(body) == {"message", "type", "param", "code"}
    assert body["type"] == "provider_error"
    assert body["code"] == 502
    assert body["param"] is None
    assert fault.fragment in body["message"]


def test_non_streamed_provider_failure_is_not_retried_by_the_sdk(
    served: Served, llm: ScriptedLLM, fault: Fault
) -> None:
    client = served.client()
    assert client.max_retries == openai.DEFAULT_MAX_RETRIES == 2  # the SDK's default

    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model=MODEL, messages=[USER])

    # (app requests the SDK made, provider calls the server made) for ONE SDK call
    measured = (len(served.runs(1)), len(llm.requests))
    assert measured == (1, fault.upstream_per_request)
    error = caught.value
    assert error.status_code == 502
    assert error.response.headers.get("x-should-retry") == "false"
    _provider_error(error, fault)


def test_streamed_provider_failure_raises_mid_stream(
    served: Served, llm: ScriptedLLM, fault: Fault
) -> None:
    client = served.client()
    stream = client.chat.completions.create(model=MODEL, messages=[USER], stream=True)
    chunks: list[Any] = []
    with pytest.raises(openai.APIError) as caught:
        chunks.extend(stream)

    measured = (len(served.runs(1)), len(llm.requests))
    assert measured == (1, fault.upstream_per_request)
    streamed = caught.value
    assert not isinstance(streamed, openai.APIStatusError), "raised mid-stream, after a 200"
    _provider_error(streamed, fault)
    assert [c.choices[0].finish_reason for c in chunks if c.choices] == [None]  # the role chunk

    # The same failure not streamed: the very same error object.
    with pytest.raises(openai.InternalServerError) as plain:
        client.chat.completions.create(model=MODEL, messages=[USER])
    assert streamed.body == plain.value.body


# -- refusals before the run ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "content", "status"),
    [
        ({"authorization": "Bearer wrong"}, b'{"messages": []}', 401),
        ({"authorization": f"Bearer {TOKEN}"}, b'{"messages": [', 400),
        ({"authorization": f"Bearer {TOKEN}", "content-type": "text/plain"}, b"{}", 415),
        ({"authorization": f"Bearer {TOKEN}"}, b'{"messages": []}', 422),
        (
            {"authorization": f"Bearer {TOKEN}"},
            b'{"messages": [{"role": "user", "content": "x"}], "model": "mistral:large"}',
            422,
        ),
    ],
    ids=["unauthorized", "bad-json", "media-type", "schema", "model"],
)
def test_refusals_tell_clients_not_to_retry(
    served: Served, llm: ScriptedLLM, headers: dict[str, str], content: bytes, status: int
) -> None:
    headers = {"content-type": "application/json", **headers}
    response = httpx.post(f"{served.url}/v1/chat/completions", content=content, headers=headers)
    assert response.status_code == status
    assert response.headers["x-should-retry"] == "false"
    assert response.json()["error"]["code"] == status
    assert llm.requests == []


def test_the_sdk_sees_the_no_retry_header_on_a_refusal(served: Served, llm: ScriptedLLM) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        served.client().chat.completions.create(
            model=MODEL,
            messages=[USER],
            n=2,  # one answer per request: refused, and a retry would be refused again
        )
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert llm.requests == []


# -- how a run ends ------------------------------------------------------------------------


def _stream_text(client: openai.OpenAI, **request: Any) -> tuple[str, list[str], Exception | None]:
    """The streamed text, the finish reasons sent, and the error the SDK raised (if any)."""
    text: list[str] = []
    finishes: list[str] = []
    try:
        for chunk in client.chat.completions.create(model=MODEL, stream=True, **request):
            for choice in chunk.choices:
                text.append(choice.delta.content or "")
                if choice.finish_reason is not None:
                    finishes.append(choice.finish_reason)
    except openai.APIError as exc:
        return "".join(text), finishes, exc
    return "".join(text), finishes, None


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_limit_is_length_not_stop(served: Served, llm: ScriptedLLM, stream: bool) -> None:
    llm.script(Reply(tool_calls=[call("echo", text="x")]), Reply(text="What I found so far."))
    request: dict[str, Any] = {
        "messages": [USER],
        "extra_body": {"agentloop": {"tools": ["echo"], "max_iterations": 1}},
    }
    client = served.client(max_retries=0)
    if stream:
        text, finishes, error = _stream_text(client, **request)
        assert error is None
        assert finishes == ["length"]
    else:
        completion = client.chat.completions.create(model=MODEL, **request)
        text = completion.choices[0].message.content or ""
        assert completion.choices[0].finish_reason == "length"
    assert text.startswith("What I found so far.")
    assert "Reached the limit of 1 tool iterations" in text
    assert served.runs(1)[0].stop_reason == "max_iterations"


ANSWER = "Paris is the capital of France."


def test_a_stream_that_keeps_breaking_ends_in_an_error(served: Served, llm: ScriptedLLM) -> None:
    llm.respond_with(lambda request: Reply(text=ANSWER, cut_after=3))

    text, finishes, error = _stream_text(served.client(), messages=[USER])

    assert isinstance(error, openai.APIError)
    assert not isinstance(error, openai.APIStatusError)
    assert error.type == "provider_error"
    assert finishes == []
    assert text, "the cut attempt's text was sent"
    assert ANSWER.startswith(text), "what was sent is the start of the answer, and only once"
    assert served.runs(1)[0].stop_reason == "error"

    llm.reset()
    llm.respond_with(lambda request: Reply(text=ANSWER, cut_after=3))
    with pytest.raises(openai.InternalServerError) as plain:
        served.client().chat.completions.create(model=MODEL, messages=[USER])
    assert plain.value.body == error.body


def _needs_turn_retry(llm: ScriptedLLM) -> None:
    assert len(llm.requests) >= 2, "the loop did not retry the cut turn"


def test_a_retried_turn_that_repeats_itself_is_streamed_losslessly(
    served: Served, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text=ANSWER, cut_after=3), Reply(text=ANSWER))

    text, finishes, error = _stream_text(served.client(max_retries=0), messages=[USER])

    _needs_turn_retry(llm)
    assert error is None
    assert text == ANSWER
    assert finishes == ["stop"]


def test_a_retried_turn_that_says_something_else_ends_the_stream(
    served: Served, llm: ScriptedLLM
) -> None:
    other = "The capital of France is Paris."
    llm.script(Reply(text=ANSWER, cut_after=3), Reply(text=other))

    text, finishes, error = _stream_text(served.client(max_retries=0), messages=[USER])

    _needs_turn_retry(llm)
    assert isinstance(error, openai.APIError)
    assert error.type == "stream_cut"
    assert isinstance(error.body, dict)
    assert "a retry, or a non-streamed request, will get the whole answer" in error.body["message"]
    assert finishes == []
    assert text == "Paris is "  # what the cut attempt sent; nothing of the other text
    assert len(served.runs(1)) == 1  # the run still ended and was recorded

    llm.reset()
    llm.script(Reply(text=ANSWER, cut_after=3), Reply(text=other))
    completion = served.client(max_retries=0).chat.completions.create(model=MODEL, messages=[USER])
    assert completion.choices[0].message.content == other
    assert completion.choices[0].finish_reason == "stop"
