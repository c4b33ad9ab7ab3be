"""The chat app's settings and logging: one read of the environment, metrics only where they
are wanted, and the request id on every log line written while a request is handled."""

from __future__ import annotations

import io
import json
import logging

import httpx
import pytest
from pydantic import BaseModel
from starlette.testclient import TestClient

from agentloop.app_settings import (
    REQUEST_ID,
    AppSettings,
    configure_logging,
)
from agentloop.config import ConfigurationError
from agentloop.server.service import service_from_env
from agentloop.tools.base import ToolContext, tool
from chat_app import create_app
from tests.fakes.loopback import LoopbackServer
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.served import AUTH, LOCAL, make_service

ON_LAMBDA = {"AWS_LAMBDA_FUNCTION_NAME": "agentloop-chat"}
USER = {"role": "user", "content": "What is the capital of France?"}


class NoteArgs(BaseModel):
    note: str


@tool(name="note")
async def noisy_tool(args: NoteArgs, ctx: ToolContext) -> str:
    """Log a warning, as a tool does when something is off."""
    logging.getLogger("agentloop.tools.note").warning("note tool saw %s", args.note)
    return "noted"


def _tool_run(url: str, llm: ScriptedLLM, request_id: str | None = None) -> httpx.Response:
    llm.script(Reply(tool_calls=[call("note", note="x")]), Reply(text="Done."))
    headers = dict(AUTH)
    if request_id:
        headers["x-amzn-lambda-context"] = json.dumps({"request_id": request_id})
    response = httpx.post(
        f"{url}/chat", json={"messages": [USER], "model": "groq:m"}, headers=headers
    )
    assert response.status_code == 200
    assert "event: done" in response.text
    return response


# -- request ids on log lines ------------------------------------------------------------


def test_a_tools_log_line_carries_the_request_id(
    llm: ScriptedLLM, caplog: pytest.LogCaptureFixture, restore_logging: None
) -> None:
    configure_logging(AppSettings.from_env({}))  # as at start-up: filters the root's handlers
    with (
        caplog.at_level(logging.INFO),
        LoopbackServer(create_app(make_service([noisy_tool])), name="ids") as server,
    ):
        first = _tool_run(server.url, llm, request_id="req-from-lambda")
        second = _tool_run(server.url, llm)  # locally the app makes one up
        logging.getLogger("agentloop.loop").info("between requests")

    warnings = [r for r in caplog.records if r.name == "agentloop.tools.note"]
    assert [getattr(r, "request_id", None) for r in warnings] == [
        "req-from-lambda",
        second.headers["x-request-id"],
    ]
    assert first.headers["x-request-id"] == "req-from-lambda"
    finished = [r for r in caplog.records if r.getMessage() == "run finished"]
    assert [getattr(r, "request_id", None) for r in finished] == [
        "req-from-lambda",
        second.headers["x-request-id"],
    ]
    between = [r for r in caplog.records if r.getMessage() == "between requests"]
    assert [getattr(r, "request_id", None) for r in between] == ["-"]


def test_configuring_twice_adds_nothing(restore_logging: None) -> None:
    settings = AppSettings.from_env({})
    configure_logging(settings)
    handlers = list(logging.getLogger().handlers)
    filters = [list(h.filters) for h in handlers]
    configure_logging(settings)
    assert logging.getLogger().handlers == handlers
    assert [list(h.filters) for h in handlers] == filters


def test_on_lambda_the_json_lines_carry_the_request_id(
    capsys: pytest.CaptureFixture[str], restore_logging: None
) -> None:
    configure_logging(AppSettings.from_env(ON_LAMBDA))
    handler = logging.getLogger("agentloop").handlers[0]
    stream = io.StringIO()
    handler.setStream(stream)  # type: ignore[attr-defined]
    token = REQUEST_ID.set("req-7")
    try:
        logging.getLogger("agentloop.loop").warning("inside")
    finally:
        REQUEST_ID.reset(token)
    logging.getLogger("agentloop.loop").warning("outside")
    inside, outside = (json.loads(line) for line in stream.getvalue().splitlines())
    assert (inside["message"], inside["request_id"]) == ("inside", "req-7")
    assert outside["message"] == "outside"
    assert "request_id" not in outside


# -- settings ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "metrics"),
    [
        ({}, False),  # make dev, make invoke: no EMF lines on stdout
        ({"AGENTLOOP_METRICS": "on"}, True),
        (ON_LAMBDA, True),  # deployed: CloudWatch reads them
        ({**ON_LAMBDA, "AGENTLOOP_METRICS": "off"}, False),
        ({**ON_LAMBDA, "AGENTLOOP_METRICS": " OFF "}, False),
    ],
)
def test_metrics_default_by_where_the_app_runs(environ: dict[str, str], metrics: bool) -> None:
    assert AppSettings.from_env(environ).metrics is metrics


def test_settings_are_read_and_checked_in_one_place() -> None:
    settings = AppSettings.from_env(
        {
            "AGENTLOOP_SECRET_ID": " arn:secret ",
            "AGENTLOOP_AUTH_MODE": "IAM",
            "AGENTLOOP_CORS_ORIGINS": "http://a.example, ,http://b.example",
            "AGENTLOOP_ALLOWED_HOSTS": "Agent.Example.",
            "AGENTLOOP_BODY_TIMEOUT_S": "2.5",
            "POWERTOOLS_METRICS_NAMESPACE": "ns",
        }
    )
    assert settings.secret_id == "arn:secret"
    assert settings.auth_mode == "iam"
    assert settings.cors_origins == ("http://a.example", "http://b.example")
    assert settings.allowed_hosts == ("agent.example",)
    assert settings.limits.body_timeout_s == 2.5
    assert settings.metrics_namespace == "ns"
    hosts = settings.host_check()
    assert hosts is not None
    assert hosts.names == ("127.0.0.1", "localhost", "::1", "agent.example")
    assert AppSettings.from_env(ON_LAMBDA).host_check() is None

    for name, value in [
        ("AGENTLOOP_METRICS", "yes"),
        ("AGENTLOOP_AUTH_MODE", "open"),
        ("AGENTLOOP_BODY_TIMEOUT_S", "0"),
        ("AGENTLOOP_ALLOWED_HOSTS", "http://x.example"),
    ]:
        with pytest.raises(ConfigurationError, match=name):
            AppSettings.from_env({name: value})


# -- metrics -------------------------------------------------------------------------------


def _emf_lines(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]


@pytest.mark.parametrize(("environ", "blobs"), [({}, 0), (ON_LAMBDA, 1)])
def test_a_run_writes_an_emf_blob_only_where_metrics_are_on(
    llm: ScriptedLLM, capfd: pytest.CaptureFixture[str], environ: dict[str, str], blobs: int
) -> None:
    settings = AppSettings.from_env({**environ, "AGENTLOOP_AUTH_MODE": "none"})
    built = service_from_env(settings)
    assert built.metrics_namespace == ("agentloop" if blobs else None)
    service = make_service([noisy_tool])
    service.metrics_namespace = built.metrics_namespace
    with LoopbackServer(create_app(service), name="metrics") as server:
        _tool_run(server.url, llm)
    emf = _emf_lines(capfd.readouterr().out)
    assert len(emf) == blobs
    if emf:
        assert emf[0]["stop_reason"] == "completed"
        assert emf[0]["ToolCalls"] == [1.0]


def test_a_page_on_an_allowed_origin_may_read_the_limit_headers() -> None:
    """Browsers hide response headers CORS does not expose: the x-ratelimit-* headers (each
    limit's) and Retry-After are exposed to the allowed origins."""
    origin = "http://page.example"
    app = create_app(make_service(), cors_origins=[origin])
    with TestClient(app, base_url=LOCAL) as client:
        answer = client.get("/v1/models", headers={**AUTH, "origin": origin})
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == origin
    exposed = {h.strip() for h in answer.headers["access-control-expose-headers"].split(",")}
    assert {
        "retry-after",
        "x-ratelimit-remaining-usd-per-day",
        "x-ratelimit-reset-tokens-per-day",
    } <= exposed
    assert "x-ratelimit-limit-concurrent-runs" in exposed
