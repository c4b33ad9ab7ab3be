"""``make invoke``: Function URL events replayed against the chat app as the adapter would."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentloop.auth import hash_token
from tests.fakes.scripted_llm import Reply, ScriptedLLM
from tests.helpers import ROOT, make_command, parse_sse

sys.path.insert(0, str(ROOT / "functions"))
from invoke import adapter_request

DEV_TOKEN = "local-dev-token"


def function_url_event(body: str, *, base64_body: bool = False, **headers: str) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/chat",
        "rawQueryString": "trace=1",
        "cookies": ["a=1", "b=2"],
        "headers": {"content-type": "application/json", **headers},
        "requestContext": {
            "http": {"method": "POST", "path": "/chat", "sourceIp": "203.0.113.9"},
            "requestId": "req-42",
        },
        "body": base64.b64encode(body.encode()).decode() if base64_body else body,
        "isBase64Encoded": base64_body,
    }


def test_adapter_request_mirrors_the_web_adapter() -> None:
    event = function_url_event('{"x": 1}', base64_body=True, Authorization="Bearer t")

    method, target, headers, body = adapter_request(event, timeout_s=30)

    assert (method, target, body) == ("POST", "/chat?trace=1", b'{"x": 1}')
    assert headers["authorization"] == "Bearer t"
    assert headers["cookie"] == "a=1; b=2"
    assert json.loads(headers["x-amzn-request-context"])["requestId"] == "req-42"
    lambda_context = json.loads(headers["x-amzn-lambda-context"])
    assert lambda_context["request_id"] == "req-42"
    assert lambda_context["deadline"] > 0


def run_invoke(event_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "functions" / "invoke.py"), str(event_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
        check=False,
    )


@pytest.fixture
def invoke_env(llm: ScriptedLLM) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        AGENTLOOP_AUTH_MODE="bearer",
        AGENTLOOP_AUTH_TOKEN_SHA256=hash_token(DEV_TOKEN),
        AGENTLOOP_METRICS="off",
    )
    env.pop("AGENTLOOP_SECRET_ID", None)
    return env


def test_invoke_streams_an_answer(
    llm: ScriptedLLM, invoke_env: dict[str, str], tmp_path: Path
) -> None:
    llm.script(Reply(text="Paris is the capital of France."))
    body = json.dumps({"messages": [{"role": "user", "content": "Capital of France?"}]})
    event = function_url_event(body, base64_body=True, authorization=f"Bearer {DEV_TOKEN}")
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))

    proc = run_invoke(path, invoke_env)

    assert proc.returncode == 0, proc.stderr
    assert "HTTP 200" in proc.stderr
    frames = parse_sse(proc.stdout.splitlines())
    assert frames[-1][0] == "done"
    assert frames[-1][1] is not None
    assert frames[-1][1]["text"] == "Paris is the capital of France."


def test_invoke_shows_a_refused_request(
    llm: ScriptedLLM, invoke_env: dict[str, str], tmp_path: Path
) -> None:
    event = function_url_event("{not json", authorization=f"Bearer {DEV_TOKEN}")
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))

    proc = run_invoke(path, invoke_env)

    assert "HTTP 400" in proc.stderr
    assert "not valid JSON" in json.loads(proc.stdout)["error"]["message"]


def test_make_invoke_streams_an_answer_from_the_scripted_model(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="Paris."))

    proc = subprocess.run(
        make_command("invoke", "EVENT=events/chat.json"),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )

    assert proc.returncode == 0, proc.stderr
    frames = parse_sse(proc.stdout.splitlines())
    assert [kind for kind, _ in frames][-1] == "done"
    assert frames[-1][1] is not None
    assert frames[-1][1]["text"] == "Paris."
    assert llm.requests[0].messages[-1]["content"] == "What is the capital of France?"


def test_make_dev_starts_and_explains_a_missing_key(llm: ScriptedLLM) -> None:
    import socket
    import time

    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("GROQ_API_KEY", "OPENAI_API_KEY")}
    server = subprocess.Popen(
        make_command("dev", f"PORT={port}"),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "make dev did not start"
            time.sleep(0.1)
        response = httpx.post(
            f"{url}/chat", json={"messages": [{"role": "user", "content": "hi"}]}, timeout=30
        )
        frames = parse_sse(response.text.splitlines())
        assert [kind for kind, _ in frames] == ["error", "text_delta", "done"]
        assert frames[0][1] is not None
        assert "GROQ_API_KEY is not set" in frames[0][1]["message"]
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=10)
