"""The chat function's app: SSE over HTTP, validation, auth, the OpenAI face, disconnects."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from starlette.testclient import TestClient

from agentloop.auth import hash_token
from agentloop.config import ConfigurationError
from agentloop.server.service import ChatService
from chat_app import create_app
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG, _validator, iter_sse, parse_sse
from tests.sample_tools import echo, gate_tool, sleeper, until_deadline
from tests.served import AUTH, LOCAL, TOKEN, ServedApp, make_service

USER = {"role": "user", "content": "What is the capital of France?"}


@pytest.fixture
def service() -> ChatService:
    return make_service([echo])


@pytest.fixture
def client(service: ChatService) -> Iterator[TestClient]:
    with TestClient(create_app(service), base_url=LOCAL) as test_client:
        yield test_client


def stream_frames(client: TestClient, body: dict[str, Any], **headers: str) -> list[Any]:
    with client.stream("POST", "/chat", json=body, headers={**AUTH, **headers}) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return parse_sse(response.iter_lines())


def test_events_arrive_while_the_run_is_still_going(llm: ScriptedLLM, model: str) -> None:
    # The tool only returns once the client has *received* tool_call_start: if the app
    # buffered the stream, the tool would time out and its result would not be ok.
    gate = threading.Event()
    llm.script(Reply(text="Checking.", tool_calls=[call("gate", name="g1")]), Reply(text="Paris."))
    app = create_app(make_service([gate_tool(gate)]))
    seen: list[str] = []
    with (
        TestClient(app, base_url=LOCAL) as client,
        client.stream(
            "POST",
            "/chat",
            json={"messages": [USER], "model": model, "tools": ["gate"]},
            headers=AUTH,
        ) as response,
    ):
        for kind, data in iter_sse(response.iter_lines()):
            seen.append(kind)
            if data is not None:
                _validator.validate(data)
            if kind == "tool_call_start":
                gate.set()
            if kind == "tool_call_result":
                assert data is not None
                assert data["ok"] is True, data["content"]
    assert seen[0] == "run_start"
    assert seen[-1] == "done"
    assert seen.index("text_delta") < seen.index("tool_call_start") < seen.index("tool_call_result")


def test_heartbeats_keep_a_quiet_stream_alive(llm: ScriptedLLM) -> None:
    llm.script(Reply(tool_calls=[call("sleep", label="s", seconds=0.5)]), Reply(text="done"))
    app = create_app(make_service([sleeper([])], heartbeat_s=0.05))
    with TestClient(app, base_url=LOCAL) as client:
        frames = stream_frames(client, {"messages": [USER], "model": "groq:m", "tools": ["sleep"]})
    kinds = [kind for kind, _ in frames]
    start, end = kinds.index("tool_call_start"), kinds.index("tool_call_result")
    assert "ping" in kinds[start:end]
    assert kinds[-1] == "done"


def test_plain_chat_stream_in_protocol_order(client: TestClient, llm: ScriptedLLM) -> None:
    llm.script(Reply(text="Paris is the capital."))

    frames = stream_frames(client, {"messages": [USER], "model": "openai:gpt-4o-mini"})

    kinds = [k for k, _ in frames]
    assert kinds[:2] == ["run_start", "turn_start"]
    assert kinds[-1] == "done"
    assert kinds.count("done") == 1
    done = frames[-1][1]
    assert done["text"] == "Paris is the capital."
    assert done["messages"] == [{"role": "assistant", "content": "Paris is the capital."}]


LIMITS_BODY = {"messages": [USER] * 201}


@pytest.mark.parametrize(
    ("content_type", "body", "status", "fragment", "param"),
    [
        ("application/json", b'{"messages": [', 400, "not valid JSON", None),
        ("text/plain", b'{"messages": []}', 415, "must be application/json", None),
        (None, b'{"messages": []}', 415, "got 'none'", None),
        ("application/json", b"{}", 422, "messages: Field required", "messages"),
        ("application/json", b'{"messages": []}', 422, "at least 1 item", "messages"),
        (
            "application/json",
            b'{"messages": [{"role": "robot", "content": "x"}]}',
            422,
            "does not match any of the expected tags",
            "messages.0",
        ),
        (
            "application/json",
            b'{"messages": [{"role": "user", "content": 5}]}',
            422,
            "messages.0.user.content: Input should be a valid string",
            "messages.0.user.content",
        ),
        (
            "application/json",
            json.dumps({"messages": [USER], "surprise": 1}).encode(),
            422,
            "surprise: Extra inputs are not permitted",
            "surprise",
        ),
        (
            "application/json",
            json.dumps({"messages": [USER, {"role": "assistant", "content": "x"}]}).encode(),
            422,
            "the last message must be the user's",
            None,
        ),
        (
            "application/json",
            json.dumps({"messages": [USER], "max_iterations": 0}).encode(),
            422,
            "max_iterations: Input should be greater than or equal to 1",
            "max_iterations",
        ),
        ("application/json", json.dumps(LIMITS_BODY).encode(), 413, "201 messages", "messages"),
        (
            "application/json",
            json.dumps({"messages": [{"role": "user", "content": "x" * 100_001}]}).encode(),
            413,
            "messages[0] has 100001 characters",
            "messages.0.content",
        ),
        ("application/json", b" " * 6_000_001, 413, "the limit is 6000000", None),
        (
            "application/json",
            json.dumps({"messages": [USER], "model": "mistral:large"}).encode(),
            422,
            "unknown provider 'mistral'",
            "model",
        ),
        (
            "application/json",
            json.dumps({"messages": [USER], "model": "gpt-4o"}).encode(),
            422,
            "not of the form 'provider:model'",
            "model",
        ),
        (
            "application/json",
            json.dumps({"messages": [USER], "tools": ["no_such_tool"]}).encode(),
            422,
            "unknown tool(s) ['no_such_tool']",
            "tools",
        ),
    ],
    ids=[
        "malformed-json",
        "text-plain",
        "no-content-type",
        "missing-messages",
        "empty-messages",
        "bad-role",
        "bad-content",
        "extra-field",
        "ends-with-assistant",
        "zero-iterations",
        "too-many-messages",
        "message-too-large",
        "body-too-large",
        "unknown-provider",
        "model-without-provider",
        "unknown-tool",
    ],
)
def test_bad_requests_get_precise_errors(
    client: TestClient,
    llm: ScriptedLLM,
    content_type: str | None,
    body: bytes,
    status: int,
    fragment: str,
    param: str | None,
) -> None:
    headers = {**AUTH}
    if content_type is not None:
        headers["content-type"] = content_type
    response = client.post("/chat", content=body, headers=headers)

    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert fragment in error["message"]
    assert error["param"] == param
    assert error["code"] == status
    assert "Traceback" not in response.text
    assert llm.requests == []


def test_model_not_on_the_allowlist_is_refused(llm: ScriptedLLM) -> None:
    config = TEST_CONFIG.model_copy(update={"allowed_models": ("groq:*",)})
    with TestClient(create_app(make_service(config=config)), base_url=LOCAL) as client:
        response = client.post(
            "/chat", json={"messages": [USER], "model": "openai:gpt-4o"}, headers=AUTH
        )
    assert response.status_code == 422
    assert "model 'openai:gpt-4o' is not allowed here" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("headers", "fragment"),
    [
        ({}, "missing bearer token"),
        ({"authorization": "Basic dXNlcjpwdw=="}, "Bearer"),
        ({"authorization": "Bearer wrong-token"}, "invalid token"),
    ],
    ids=["missing", "wrong-scheme", "wrong-token"],
)
def test_requests_without_a_valid_token_are_refused(
    client: TestClient, llm: ScriptedLLM, headers: dict[str, str], fragment: str
) -> None:
    for path in ("/chat", "/v1/chat/completions"):
        response = client.post(path, json={"messages": [USER]}, headers=headers)
        assert response.status_code == 401
        assert fragment.lower() in response.json()["error"]["message"].lower()
        assert "wrong-token" not in response.text
    assert llm.requests == []


def test_health_models_and_unknown_routes(client: TestClient) -> None:
    health = client.get("/healthz").json()
    assert health["status"] == "ok"
    assert health["execute_code"] == "not configured"  # a service made by hand names no sandbox
    models = client.get("/v1/models", headers=AUTH).json()
    assert models["data"][0]["id"] == TEST_CONFIG.default_model
    missing = client.get("/nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "no route for /nope"
    wrong_method = client.get("/chat", headers=AUTH)
    assert wrong_method.status_code == 405


@pytest.mark.parametrize("path", ["/static/app.js", "/static/markdown.js", "/static/style.css"])
def test_the_pages_files_are_checked_again_on_every_use(client: TestClient, path: str) -> None:
    """The page is ES modules: after a deploy a browser must not run a cached old module next
    to a new one, so each is revalidated (no-cache), which its ETag keeps to a 304."""
    first = client.get(path)
    assert first.status_code == 200
    assert first.headers["cache-control"] == "no-cache"
    again = client.get(path, headers={"if-none-match": first.headers["etag"]})
    assert again.status_code == 304
    assert again.headers["cache-control"] == "no-cache"
    assert again.content == b""
    page = client.get("/")
    assert page.headers["cache-control"] == "no-cache"
    assert "script-src 'self'" in page.headers["content-security-policy"]


@pytest.mark.parametrize(
    "path",
    [
        "/static/..%2fchat_app.py",
        "/static/%2e%2e/run.sh",
        "/static/..%2f..%2f..%2fpyproject.toml",
        "/static/%2fetc%2fpasswd",
    ],
)
def test_the_pages_files_route_serves_nothing_outside_static(client: TestClient, path: str) -> None:
    """A path that climbs out of static/ (encoded, so no client normalises it away) is a 404,
    never the function's code or a file of the host."""
    response = client.get(path)
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found"


def test_deadline_header_is_honoured(llm: ScriptedLLM) -> None:
    config = TEST_CONFIG.model_copy(update={"deadline_reserve_s": 1.5})
    llm.script(Reply(tool_calls=[call("until_deadline", margin_s=1.4)]))
    llm.respond_with(lambda req: Reply(text="Answer before the deadline."))
    lambda_context = {"request_id": "req-123", "deadline": int((time.time() + 3.0) * 1000)}
    with TestClient(
        create_app(make_service([until_deadline], config=config)), base_url=LOCAL
    ) as client:
        frames = stream_frames(
            client,
            {"messages": [USER], "model": "groq:m", "tools": ["until_deadline"]},
            **{"x-amzn-lambda-context": json.dumps(lambda_context)},
        )
    done = frames[-1][1]
    assert done is not None
    assert done["stop_reason"] == "deadline"
    assert done["text"].startswith("Answer before the deadline.")


def test_missing_provider_key_is_an_error_event(
    client: TestClient, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GROQ_API_KEY")

    frames = stream_frames(client, {"messages": [USER], "model": "groq:llama-3.3-70b-versatile"})

    assert [k for k, _ in frames] == ["error", "text_delta", "done"]
    error = frames[0][1]
    assert error is not None
    assert "GROQ_API_KEY is not set" in error["message"]
    assert error["code"] == "configuration"


def test_logs_carry_no_secrets_or_message_content(
    client: TestClient, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture
) -> None:
    llm.script(Reply(text="The secret answer is 1234."))
    with caplog.at_level(logging.INFO):
        stream_frames(client, {"messages": [USER], "model": "groq:m"})
    text = caplog.text + " ".join(str(r.__dict__) for r in caplog.records)
    assert "run finished" in caplog.text
    for secret in (TOKEN, "test-groq-key", "capital of France", "secret answer"):
        assert secret not in text


# -- over a real socket ------------------------------------------------------------------


@pytest.fixture
def served(llm: ScriptedLLM) -> Iterator[ServedApp]:
    with ServedApp(make_service([echo, sleeper([])]), name="chat-app") as served:
        yield served


def test_openai_sdk_non_streamed(served: ServedApp, llm: ScriptedLLM) -> None:
    url = served.url
    llm.script(Reply(tool_calls=[call("echo", text="x")]), Reply(text="Hello from the agent."))
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0)

    completion = client.chat.completions.create(
        model="groq:llama-3.3-70b-versatile",
        messages=[{"role": "user", "content": "Say hello"}],
        extra_body={"agentloop": {"tools": ["echo"]}},
    )

    assert completion.choices[0].message.content == "Hello from the agent."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.total_tokens > 0


def test_openai_sdk_streamed(served: ServedApp, llm: ScriptedLLM) -> None:
    url = served.url
    llm.script(Reply(tool_calls=[call("echo", text="x")]), Reply(text="Streaming hello to you."))
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0)

    stream = client.chat.completions.create(
        model="agentloop",
        messages=[{"role": "user", "content": "Say hello"}],
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"agentloop": {"tools": ["echo"], "show_tools": True}},
    )
    chunks = list(stream)

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.endswith("Streaming hello to you.")
    assert "calling `echo`" in text
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) >= 4
    assert chunks[-1].usage is not None
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


def test_openai_sdk_errors_are_sdk_errors(served: ServedApp) -> None:
    url = served.url
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError, match="invalid token"):
        client.chat.completions.create(model="agentloop", messages=[USER])  # type: ignore[list-item]
    good = openai.OpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0)
    with pytest.raises(openai.UnprocessableEntityError, match="named like a server tool"):
        good.chat.completions.create(
            model="agentloop",
            messages=[USER],  # type: ignore[list-item]
            tools=[{"type": "function", "function": {"name": "echo"}}],
        )


def test_client_disconnect_cancels_the_run(served: ServedApp, llm: ScriptedLLM) -> None:
    url = served.url
    llm.respond_with(lambda req: Reply(tool_calls=[call("sleep", label="s", seconds=0.3)]))
    body = {"messages": [USER], "model": "groq:m", "tools": ["sleep"], "max_iterations": 20}

    with (
        httpx.Client(timeout=10) as http,
        http.stream("POST", f"{url}/chat", json=body, headers=AUTH) as response,
    ):
        for line in response.iter_lines():
            if line == "event: tool_call_start":
                break  # the tab is closed mid-run

    [done] = served.runs(1)
    assert done.stop_reason == "cancelled"
    assert done.iterations == 1, "no model call after the client left"
    assert len(llm.requests) == 1


def test_request_id_comes_from_the_lambda_context(served: ServedApp, llm: ScriptedLLM) -> None:
    url = served.url
    llm.script(Reply(text="ok"))
    response = httpx.post(
        f"{url}/chat",
        json={"messages": [USER], "model": "groq:m"},
        headers={**AUTH, "x-amzn-lambda-context": json.dumps({"request_id": "abc-1"})},
    )
    assert response.headers["x-request-id"] == "abc-1"
    assert served.last_run().stop_reason == "completed"


# -- configured from the environment, the secret in (moto's) Secrets Manager ---------------


@pytest.fixture
def aws_secret(mocked_aws: None, monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLM) -> str:
    """A project secret holding the Groq key and one token hash, as deployed."""
    import boto3

    monkeypatch.delenv("GROQ_API_KEY")  # it must come from the secret
    monkeypatch.setenv("AGENTLOOP_AUTH_MODE", "bearer")
    secret = boto3.client("secretsmanager").create_secret(
        Name="agentloop-test",
        SecretString=json.dumps(
            {"GROQ_API_KEY": "key-from-secret", "auth_token_sha256": [hash_token(TOKEN)]}
        ),
    )
    monkeypatch.setenv("AGENTLOOP_SECRET_ID", secret["ARN"])
    return str(secret["ARN"])


@pytest.mark.parametrize(
    ("headers", "status"),
    [({}, 401), ({"authorization": "Bearer not-the-token"}, 401), (AUTH, 200)],
    ids=["missing", "wrong", "right"],
)
def test_tokens_checked_against_the_secret(
    aws_secret: str, llm: ScriptedLLM, headers: dict[str, str], status: int
) -> None:
    llm.script(Reply(text="Authorised answer."))
    with TestClient(create_app(), base_url=LOCAL) as client:
        response = client.post(
            "/chat", json={"messages": [USER], "model": "groq:m"}, headers=headers
        )
    assert response.status_code == status
    if status == 401:
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert llm.requests == []
    else:
        assert "Authorised answer." in response.text
        assert llm.requests[0].headers["authorization"] == "Bearer key-from-secret"


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """A machine without bubblewrap: PATH without bwrap, and the cached probe forgotten."""
    from agentloop.sandbox.isolation import namespaces

    monkeypatch.setenv("PATH", str(tmp_path))
    namespaces.cache_clear()
    yield
    namespaces.cache_clear()


def test_without_isolation_execute_code_is_not_offered(
    aws_secret: str,
    llm: ScriptedLLM,
    monkeypatch: pytest.MonkeyPatch,
    no_bwrap: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("AGENTLOOP_AUTH_MODE", "none")
    with caplog.at_level(logging.INFO), TestClient(create_app(), base_url=LOCAL) as client:
        health = client.get("/healthz").json()
        response = client.post(
            "/chat", json={"messages": [USER], "model": "groq:m", "tools": ["execute_code"]}
        )
    assert health["execute_code"] == "off"
    assert response.status_code == 422
    assert "execute_code" in response.json()["error"]["message"]
    assert llm.requests == []
    logged = caplog.text
    assert "execute_code is off" in logged
    assert "bubblewrap is not installed" in logged
    assert "AGENTLOOP_SANDBOX_ISOLATION=unisolated" in logged


def test_unisolated_mode_only_when_named_and_said_so(
    aws_secret: str,
    monkeypatch: pytest.MonkeyPatch,
    no_bwrap: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("AGENTLOOP_AUTH_MODE", "none")
    monkeypatch.setenv("AGENTLOOP_SANDBOX_ISOLATION", "unisolated")
    with caplog.at_level(logging.INFO), TestClient(create_app(), base_url=LOCAL) as client:
        health = client.get("/healthz").json()
    assert health["execute_code"].startswith("local, unisolated (the program can read")
    assert "execute_code: local, unisolated" in caplog.text


def test_explicit_namespaces_without_bwrap_stops_the_server(
    aws_secret: str, monkeypatch: pytest.MonkeyPatch, no_bwrap: None
) -> None:
    monkeypatch.setenv("AGENTLOOP_AUTH_MODE", "none")
    monkeypatch.setenv("AGENTLOOP_SANDBOX_ISOLATION", "namespaces")
    app = create_app()
    with (
        pytest.raises(ConfigurationError, match="AGENTLOOP_SANDBOX_ISOLATION=namespaces"),
        TestClient(app, base_url=LOCAL),
    ):
        pass


def test_health_says_namespaces_where_bwrap_works(
    aws_secret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentloop.sandbox.isolation import IsolationUnavailable, namespaces

    try:
        namespaces()
    except IsolationUnavailable as exc:
        pytest.skip(f"no namespace isolation here: {exc}")
    monkeypatch.setenv("AGENTLOOP_AUTH_MODE", "none")
    with TestClient(create_app(), base_url=LOCAL) as client:
        health = client.get("/healthz").json()
    assert health["execute_code"].startswith("local, namespaces (bubblewrap: no network")


def test_anonymous_access_only_when_configured(
    aws_secret: str, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTLOOP_AUTH_MODE", "none")
    llm.script(Reply(text="Open answer."))
    with TestClient(create_app(), base_url=LOCAL) as client:
        response = client.post("/chat", json={"messages": [USER], "model": "groq:m"})
    assert response.status_code == 200
    assert "Open answer." in response.text
