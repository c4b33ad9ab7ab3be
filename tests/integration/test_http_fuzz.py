"""Property-based: whatever body a client sends, the app answers 4xx with a JSON error or 200
with a well-formed answer, never a 5xx, and logs no traceback.

One uvicorn server for the module (real sockets, real SDK calls to the scripted model, which
answers every request with text), one keep-alive client; hypothesis writes no database.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from chat_app import create_app
from tests.fakes.loopback import LoopbackServer
from tests.fakes.scripted_llm import Reply, ScriptedLLM
from tests.helpers import _validator, parse_sse
from tests.sample_tools import echo
from tests.served import TOKEN, make_service

ROUTES = ("/chat", "/v1/chat/completions", "/api/chat", "/ag-ui", "/v1/responses")
FUZZ = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Collected(logging.Handler):
    """Every record from every logger (the app's, uvicorn's), to look for failures."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def failures(self, since: int) -> list[str]:
        """Errors and anything carrying a traceback, logged after record ``since``."""
        return [
            f"{r.name}: {r.getMessage()}"
            for r in self.records[since:]
            if r.exc_info or r.levelno >= logging.ERROR or "Traceback" in r.getMessage()
        ]


class Fuzzed:
    def __init__(self, client: httpx.Client, log: Collected) -> None:
        self.client = client
        self.log = log


@pytest.fixture(scope="module")
def fuzzed(llm_server: ScriptedLLM) -> Iterator[Fuzzed]:
    service = make_service([echo])
    log = Collected()
    root = logging.getLogger()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_BASE_URL", llm_server.openai_base_url)
        env.setenv("GROQ_BASE_URL", llm_server.groq_base_url)
        env.setenv("OPENAI_API_KEY", "test-openai-key")
        env.setenv("GROQ_API_KEY", "test-groq-key")
        env.setenv("AGENTLOOP_METRICS", "off")
        llm_server.reset()
        # JSON, so a request for a JSON answer gets one: the fuzz is after the app's faults,
        # and an answer failing its format is the model's (a designed 502 on the OpenAI faces).
        llm_server.respond_with(lambda request: Reply(text='{"answer": "An answer."}'))
        root.addHandler(log)
        try:
            with (
                LoopbackServer(create_app(service), name="fuzzed-app") as server,
                httpx.Client(base_url=server.url, timeout=30) as client,
            ):
                yield Fuzzed(client, log)
        finally:
            root.removeHandler(log)
            llm_server.reset()


def check_answer(fuzzed: Fuzzed, route: str, body: bytes, content_type: str | None) -> None:
    headers = {"authorization": f"Bearer {TOKEN}"}
    if content_type is not None:
        headers["content-type"] = content_type
    before = len(fuzzed.log.records)
    response = fuzzed.client.post(route, content=body, headers=headers)
    event(f"{route} {response.status_code}")  # --hypothesis-show-statistics: what was reached

    assert 200 <= response.status_code < 500, response.text
    assert "Traceback" not in response.text
    if response.status_code == 200:
        check_success(route, response)
    else:
        assert 400 <= response.status_code < 500
        assert response.headers["content-type"] == "application/json"
        error = response.json()["error"]
        assert isinstance(error["message"], str)
        assert error["message"]
        assert isinstance(error["type"], str)
        assert error["code"] == response.status_code
    assert fuzzed.log.failures(since=before) == []


LAST_EVENTS = {
    "/ag-ui": {"RUN_FINISHED", "RUN_ERROR"},
    "/v1/responses": {"response.completed", "response.incomplete", "response.failed"},
}
"""What a stream of these faces ends with (the others end with ``data: [DONE]``)."""


def check_success(route: str, response: httpx.Response) -> None:
    """A 200 is a whole answer: a stream ending in ``done`` / ``[DONE]`` / its protocol's
    last event, or one completion / response object."""
    if response.headers["content-type"].startswith("text/event-stream"):
        lines = response.text.splitlines()
        if route == "/chat":
            frames = parse_sse(lines)
            for _, data in frames:
                if data is not None:
                    _validator.validate(data)
            assert frames[-1][0] == "done"
            return
        chunks = [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]
        if route in LAST_EVENTS:
            assert json.loads(chunks[-1])["type"] in LAST_EVENTS[route]
        else:
            assert chunks[-1] == "[DONE]"
            chunks = chunks[:-1]
        for chunk in chunks:
            assert isinstance(json.loads(chunk), dict)
    elif route == "/v1/responses":
        answer = response.json()
        assert answer["object"] == "response"
        assert isinstance(answer["output"][0]["content"][0]["text"], str)
    else:
        assert route == "/v1/chat/completions"
        completion = response.json()
        assert completion["object"] == "chat.completion"
        assert isinstance(completion["choices"][0]["message"]["content"], str)


# -- strategies -------------------------------------------------------------------------------

CONTENT_TYPES = st.one_of(
    st.just("application/json"),
    st.sampled_from(
        [
            "application/json; charset=utf-8",
            "Application/JSON",
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonx",
            "",
            None,
        ]
    ),
)
# Text that may hold lone surrogates: sent as \\udxxx escapes or, unescaped, as raw bytes.
TEXT = st.text(max_size=20) | st.text(
    st.characters(categories=["Cs"]) | st.sampled_from("a é\U0001f600"), min_size=1, max_size=6
)
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**60, max_value=10**120)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
JSON_VALUES = st.recursive(
    LEAVES,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(TEXT, children, max_size=4),
    max_leaves=12,
)
ROLES = st.sampled_from(["user", "assistant", "system", "tool", "robot", ""])
MESSAGE = st.fixed_dictionaries(
    {"role": ROLES | JSON_VALUES, "content": st.text(max_size=30) | JSON_VALUES},
    optional={"tool_calls": JSON_VALUES, "tool_call_id": st.text(max_size=6), "name": JSON_VALUES},
)
USER_MESSAGE = st.fixed_dictionaries({"role": st.just("user"), "content": st.text(max_size=30)})
FORMATS = st.sampled_from(
    [
        {"type": "text"},
        {"type": "json_object"},
        {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
        {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 5}}},
        {"type": "json_schema"},
    ]
)
MODELS = st.sampled_from(
    ["groq:m", "openai:gpt-4o-mini", "agentloop", "mistral:large", "gpt-4o", "groq:", ""]
)
VALID_REQUESTS = st.fixed_dictionaries(
    {"messages": st.lists(USER_MESSAGE, min_size=1, max_size=2)},
    optional={
        "model": st.sampled_from(["groq:m", "openai:gpt-4o-mini", "agentloop"]),
        "stream": st.booleans(),
        "max_iterations": st.integers(1, 3),
        "agentloop": st.fixed_dictionaries({"show_tools": st.booleans()}),
    },
)
# Mostly plausible requests (so the validation paths and real runs are reached), some not.
REQUESTS = st.fixed_dictionaries(
    {
        "messages": st.one_of(
            st.lists(USER_MESSAGE, min_size=1, max_size=2),
            st.lists(MESSAGE, max_size=3).map(lambda m: [*m, {"role": "user", "content": "q"}]),
            st.lists(MESSAGE, max_size=3),
            JSON_VALUES,
        )
    },
    optional={
        "model": MODELS | JSON_VALUES,
        "tools": st.sampled_from([[], ["echo"], ["nope"]]) | JSON_VALUES,
        "max_iterations": st.integers(-2, 30) | JSON_VALUES,
        "token_budget": st.integers(-2, 10**7) | JSON_VALUES,
        "stream": st.booleans() | JSON_VALUES,
        "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}) | JSON_VALUES,
        "agentloop": st.fixed_dictionaries(
            {},
            optional={
                "tools": st.sampled_from([[], ["echo"]]) | JSON_VALUES,
                "show_tools": st.booleans() | JSON_VALUES,
                "max_iterations": st.integers(-2, 30),
            },
        )
        | JSON_VALUES,
        "surprise": JSON_VALUES,
        "thread_id": st.sampled_from(["new", "th_missing", "", "../x"]) | TEXT | JSON_VALUES,
        "resumable": st.booleans() | JSON_VALUES,
        # the OpenAI face's sampling fields and response_format; /chat's own
        "temperature": st.floats(-1, 3) | JSON_VALUES,
        "max_tokens": st.integers(-1, 10**7) | JSON_VALUES,
        "n": st.integers(0, 3) | JSON_VALUES,
        "stop": TEXT | st.lists(TEXT, max_size=6) | JSON_VALUES,
        "response_format": FORMATS | JSON_VALUES,
        "sampling": st.fixed_dictionaries({}, optional={"temperature": JSON_VALUES}) | JSON_VALUES,
    },
)

# The other faces' request shapes: the AI SDK's UI messages, AG-UI's input, Responses' input.
UI_PART = st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}) | st.fixed_dictionaries(
    {"type": st.sampled_from(["tool-echo", "dynamic-tool", "file", "data-x", "reasoning", "?"])},
    optional={
        "toolCallId": TEXT,
        "state": st.sampled_from(["output-available", "output-error", "input-available"]),
        "input": JSON_VALUES,
        "output": JSON_VALUES,
        "errorText": TEXT,
        "toolName": TEXT,
        "text": TEXT,
    },
)
UI_MESSAGE = st.fixed_dictionaries(
    {
        "id": TEXT,
        "role": st.sampled_from(["user", "assistant", "system"]) | JSON_VALUES,
        "parts": st.lists(UI_PART, max_size=3) | JSON_VALUES,
    }
)
UI_REQUESTS = st.fixed_dictionaries(
    {
        "messages": st.lists(UI_MESSAGE, max_size=3).map(
            lambda m: [*m, {"id": "u", "role": "user", "parts": [{"type": "text", "text": "q"}]}]
        )
        | st.lists(UI_MESSAGE, max_size=3)
    },
    optional={"id": TEXT, "trigger": TEXT, "messageId": TEXT, "agentloop": JSON_VALUES},
)
AG_UI_MESSAGE = st.fixed_dictionaries(
    {
        "id": TEXT,
        "role": ROLES | st.sampled_from(["developer", "reasoning"]),
        "content": TEXT | JSON_VALUES,
    },
    optional={"toolCalls": JSON_VALUES, "toolCallId": TEXT},
)
AG_UI_REQUESTS = st.fixed_dictionaries(
    {
        "threadId": TEXT,
        "runId": TEXT,
        "messages": st.lists(AG_UI_MESSAGE, max_size=3).map(
            lambda m: [*m, {"id": "u", "role": "user", "content": "q"}]
        )
        | st.lists(AG_UI_MESSAGE, max_size=3),
    },
    optional={
        "state": JSON_VALUES,
        "tools": st.just([]) | JSON_VALUES,
        "context": st.lists(st.fixed_dictionaries({"description": TEXT, "value": TEXT}))
        | JSON_VALUES,
        "forwardedProps": st.fixed_dictionaries({"agentloop": JSON_VALUES}) | JSON_VALUES,
    },
)
RESPONSES_REQUESTS = st.fixed_dictionaries(
    {"input": TEXT | st.lists(MESSAGE, max_size=3) | JSON_VALUES},
    optional={
        "model": MODELS | JSON_VALUES,
        "stream": st.booleans(),
        "instructions": TEXT | JSON_VALUES,
        "text": st.fixed_dictionaries({"format": FORMATS | JSON_VALUES}) | JSON_VALUES,
        "max_output_tokens": st.integers(-1, 100) | JSON_VALUES,
        "previous_response_id": TEXT,
        "agentloop": JSON_VALUES,
    },
)


@FUZZ
@given(
    route=st.sampled_from(ROUTES),
    value=VALID_REQUESTS | REQUESTS | JSON_VALUES,
    ascii_only=st.booleans(),
    content_type=CONTENT_TYPES,
)
def test_json_values_never_get_a_5xx(
    fuzzed: Fuzzed, route: str, value: Any, ascii_only: bool, content_type: str | None
) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    check_answer(fuzzed, route, body, content_type)


@FUZZ
@given(
    route_and_value=st.sampled_from(
        [
            ("/api/chat", UI_REQUESTS),
            ("/ag-ui", AG_UI_REQUESTS),
            ("/v1/responses", RESPONSES_REQUESTS),
        ]
    ).flatmap(lambda pair: st.tuples(st.just(pair[0]), pair[1])),
    ascii_only=st.booleans(),
)
def test_each_faces_own_shapes_never_get_a_5xx(
    fuzzed: Fuzzed, route_and_value: tuple[str, Any], ascii_only: bool
) -> None:
    route, value = route_and_value
    body = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    check_answer(fuzzed, route, body, "application/json")


def nested(depth: int, closed: bool) -> bytes:
    return b'{"messages": ' + b"[" * depth + (b"]" * depth + b"}" if closed else b"")


SURROGATE_PIECES = st.sampled_from(
    [r"\ud800", r"\udfff", r"\ud83d\ude00", r"\ud83d", r"\\ud800", r"\u0000", "x", " ", "\\n"]
)
FRAGMENTS = st.one_of(
    st.integers(1, 3000).flatmap(lambda n: st.booleans().map(lambda c: nested(n, c))),
    st.integers(1, 6000).map(lambda n: b"9" * n),
    st.integers(1, 400).map(lambda n: b"-0." + b"1" * n + b"e-5"),
    st.sampled_from([b"1e999", b"-1e999", b"1e-999", b"NaN", b"Infinity", b"-Infinity", b"1E400"]),
    st.lists(SURROGATE_PIECES, max_size=6).map(lambda p: ('"' + "".join(p) + '"').encode()),
    st.sampled_from([b'"\xed\xa0\x80"', b'"\xff"', b"\xef\xbb\xbf", b'"\xc3"', b"\x00"]),
    st.binary(max_size=40),
)


@st.composite
def raw_bodies(draw: st.DrawFn) -> bytes:
    """A request's JSON text with a raw fragment spliced in, or random bytes."""
    kind = draw(st.sampled_from(["in-content", "in-field", "spliced", "alone", "random"]))
    fragment: bytes = draw(FRAGMENTS)
    if kind == "random":
        noise: bytes = draw(st.binary(max_size=300))
        return noise
    if kind == "alone":
        return fragment
    if kind == "in-content":
        return b'{"messages": [{"role": "user", "content": ' + fragment + b"}]}"
    if kind == "in-field":
        field: bytes = draw(
            st.sampled_from([b"max_iterations", b"model", b"tools", b"stream", b"x"])
        )
        return (
            b'{"messages": [{"role": "user", "content": "q"}], "' + field + b'": ' + fragment + b"}"
        )
    base = json.dumps({"messages": [{"role": "user", "content": "q"}], "model": "groq:m"}).encode()
    at = draw(st.integers(0, len(base)))
    return base[:at] + fragment + base[at:]


@FUZZ
@given(route=st.sampled_from(ROUTES), body=raw_bodies(), content_type=CONTENT_TYPES)
def test_raw_bodies_never_get_a_5xx(
    fuzzed: Fuzzed, route: str, body: bytes, content_type: str | None
) -> None:
    check_answer(fuzzed, route, body, content_type)


# -- the routes that take an id from the client: threads, streams, stored responses ---------

IDS = st.sampled_from(["new", "th_missing", "resp_missing", "x" * 129, "..", "%00"]) | TEXT
ID_ROUTES = st.sampled_from(
    [
        ("GET", "/threads/{id}"),
        ("PATCH", "/threads/{id}"),
        ("DELETE", "/threads/{id}"),
        ("GET", "/threads?limit={id}&cursor={id}"),
        ("GET", "/chat/stream?thread_id={id}"),
        ("POST", "/chat/stream/cancel?thread_id={id}"),
        ("GET", "/api/chat/{id}/stream"),
        ("GET", "/v1/responses/{id}"),
        ("DELETE", "/v1/responses/{id}"),
        ("GET", "/v1/responses/{id}/input_items?order={id}&limit={id}&after={id}"),
        ("GET", "/files/{id}"),
        ("GET", "/files/{id}?expires={id}&signature={id}"),
    ]
)


@FUZZ
@given(
    route=ID_ROUTES,
    ident=IDS,
    last_event_id=st.none() | TEXT,
    body=JSON_VALUES | st.fixed_dictionaries({"title": TEXT | JSON_VALUES}),
)
def test_ids_queries_and_headers_of_the_kept_routes_never_get_a_5xx(
    fuzzed: Fuzzed, route: tuple[str, str], ident: str, last_event_id: str | None, body: Any
) -> None:
    """An id the caller has no object of is a 404, never another's object and never a 5xx;
    a bad query, header or body a precise 4xx; nothing running on a thread a 204."""
    method, template = route
    path = template.replace("{id}", quote(ident.encode("utf-8", "surrogatepass"), safe=""))
    headers = {"authorization": f"Bearer {TOKEN}"}
    if last_event_id is not None and last_event_id.isprintable() and last_event_id.isascii():
        headers["last-event-id"] = last_event_id
    before = len(fuzzed.log.records)
    content = json.dumps(body).encode() if method == "PATCH" else None
    if content is not None:
        headers["content-type"] = "application/json"
    response = fuzzed.client.request(method, path, content=content, headers=headers)
    event(f"{method} {template} {response.status_code}")
    assert response.status_code < 500, response.text  # 2xx, a 307 for "/threads/", or a 4xx
    if response.status_code >= 400:
        error = response.json()["error"]
        assert error["code"] == response.status_code
        assert isinstance(error["message"], str)
        assert error["message"]
    assert fuzzed.log.failures(since=before) == []
