"""The chat app answers only to its own Host names (a DNS-rebinding defence).

A page on another site can rebind its name to 127.0.0.1 and have the browser send
``POST /chat`` to a local server that has auth off; such requests carry ``Host: <its name>``.
Every request here goes over a real socket to the app under uvicorn (``LoopbackServer``) with
auth off, the way ``make dev`` runs it, with the Host header set by hand.
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agentloop.config import ConfigurationError
from agentloop.server.identity import allow_anyone
from agentloop.server.service import ChatService
from agentloop.tools.registry import ToolRegistry
from chat_app import create_app
from tests.fakes.loopback import LoopbackServer
from tests.fakes.scripted_llm import Reply, ScriptedLLM
from tests.helpers import TEST_CONFIG, parse_sse

USER = {"role": "user", "content": "What is the capital of France?"}
CHAT = {"messages": [USER], "model": "groq:llama-3.3-70b-versatile"}
COMPLETION = {"model": "agentloop", "messages": [USER]}
LAMBDA_URL_HOST = "abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws"

# Every kind of route: the agent's two endpoints, the page, a static file, health, a 404.
ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/chat", CHAT),
    ("POST", "/v1/chat/completions", COMPLETION),
    ("GET", "/", None),
    ("GET", "/static/app.js", None),
    ("GET", "/healthz", None),
    ("GET", "/v1/models", None),
    ("GET", "/no-such-route", None),
]


def open_service() -> ChatService:
    """Auth off, as under ``make dev``: the Host check is all that stands in the way."""
    return ChatService(
        config=TEST_CONFIG,
        tools=ToolRegistry([]),
        authenticate=allow_anyone,
        auth_mode="none",
    )


Serve = Callable[[], str]


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator[Serve]:
    """Start the app on a loopback port; it reads the environment as it is at that moment."""
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    monkeypatch.delenv("AGENTLOOP_ALLOWED_HOSTS", raising=False)
    servers: list[LoopbackServer] = []

    def start() -> str:
        server = LoopbackServer(create_app(open_service()), name="chat-app", lifespan="on")
        servers.append(server.start())
        return server.url

    yield start
    for server in servers:
        server.stop()


def send(
    url: str, method: str, path: str, body: dict[str, Any] | None, host: str
) -> httpx.Response:
    """One request to the server at ``url`` that says it is for ``host``."""
    return httpx.request(
        method, url + path, json=body, headers={"host": host}, timeout=10, trust_env=False
    )


def assert_refused(response: httpx.Response, status: int = 421) -> str:
    """The app's JSON error shape, naming the setting to change; returns the message."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == status
    assert error["type"] == ("host_not_allowed" if status == 421 else "invalid_host")
    assert error["param"] is None
    message: str = error["message"]
    return message


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "127.0.0.1", "localhost", "[::1]:{port}"])
def test_loopback_names_are_served(serve: Serve, llm: ScriptedLLM, host: str) -> None:
    llm.script(Reply(text="Paris."))
    url = serve()
    host = host.format(port=httpx.URL(url).port)

    response = send(url, "POST", "/chat", CHAT, host)

    assert response.status_code == 200, response.text
    kind, done = parse_sse(response.text.splitlines())[-1]
    assert kind == "done"
    assert done is not None
    assert done["text"] == "Paris."
    assert send(url, "GET", "/healthz", None, host).json()["status"] == "ok"


@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=[path for _, path, _ in ROUTES])
def test_a_foreign_host_is_refused_on_every_route(
    serve: Serve, llm: ScriptedLLM, method: str, path: str, body: dict[str, Any] | None
) -> None:
    llm.script(Reply(text="This must never be asked for."))
    url = serve()

    response = send(url, method, path, body, "evil.example")

    message = assert_refused(response)
    assert "'evil.example'" in message
    assert "AGENTLOOP_ALLOWED_HOSTS" in message
    assert "127.0.0.1, localhost, ::1" in message
    assert llm.requests == [], "the model was called for a refused request"


@pytest.mark.parametrize(
    "host",
    [
        "evil.example:8000",
        "127.0.0.1.evil.example",
        "localhost.evil.example",
        "[::2]",
        "[::ffff:127.0.0.1]",
    ],
)
def test_look_alikes_are_refused(serve: Serve, llm: ScriptedLLM, host: str) -> None:
    url = serve()
    assert_refused(send(url, "POST", "/chat", CHAT, host))
    assert llm.requests == []


@pytest.mark.parametrize("host", ["::1", "localhost:80x", "local host", "[::1"])
def test_a_malformed_host_is_a_400(serve: Serve, llm: ScriptedLLM, host: str) -> None:
    url = serve()
    message = assert_refused(send(url, "POST", "/chat", CHAT, host), status=400)
    assert "malformed Host header" in message
    assert llm.requests == []


def raw_request(url: str, head: str) -> tuple[int, bytes]:
    """Send a request line and headers by hand (httpx always adds one Host header)."""
    parsed = httpx.URL(url)
    with socket.create_connection((parsed.host, parsed.port), timeout=10) as sock:
        sock.sendall(head.encode("latin-1"))
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def test_a_request_without_a_host_is_refused(serve: Serve, llm: ScriptedLLM) -> None:
    # HTTP/1.1 without Host is refused by uvicorn itself; HTTP/1.0 gets through to the app.
    url = serve()
    status, body = raw_request(url, "GET /healthz HTTP/1.0\r\n\r\n")
    assert status == 400
    assert b"no Host header" in body
    assert b"AGENTLOOP_ALLOWED_HOSTS" in body


def test_two_host_headers_are_refused(serve: Serve) -> None:
    url = serve()
    status, _ = raw_request(
        url, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n"
    )
    assert status == 400  # by uvicorn (h11) here; by the app if a server lets both through


def test_configured_names_are_served(
    serve: Serve, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTLOOP_ALLOWED_HOSTS", " agent.example , *.dev.example")
    url = serve()

    for host in ("agent.example", "Agent.Example:8443", "box.dev.example", "a.b.dev.example"):
        assert send(url, "GET", "/healthz", None, host).status_code == 200, host
    llm.script(Reply(text="Paris."))
    assert send(url, "POST", "/chat", CHAT, "agent.example").status_code == 200
    assert send(url, "GET", "/healthz", None, "localhost").status_code == 200

    # *.dev.example is for subdomains only, as in Starlette's TrustedHostMiddleware.
    for host in ("dev.example", "evil.example", "agent.example.evil.example"):
        message = assert_refused(send(url, "GET", "/healthz", None, host))
        assert "agent.example, *.dev.example" in message


def test_on_lambda_any_host_is_served(
    serve: Serve, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "agentloop-chat")
    url = serve()

    for host in (LAMBDA_URL_HOST, "chat.example.com", "evil.example"):
        assert send(url, "GET", "/healthz", None, host).status_code == 200, host
    llm.script(Reply(text="Paris."))
    assert send(url, "POST", "/chat", CHAT, LAMBDA_URL_HOST).status_code == 200


def test_on_lambda_the_setting_applies(
    serve: Serve, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "agentloop-chat")
    monkeypatch.setenv("AGENTLOOP_ALLOWED_HOSTS", "chat.example.com")
    url = serve()

    llm.script(Reply(text="Paris."))
    assert send(url, "POST", "/chat", CHAT, "chat.example.com").status_code == 200
    # Lambda Web Adapter's readiness check asks http://127.0.0.1:PORT/healthz.
    port = httpx.URL(url).port
    assert send(url, "GET", "/healthz", None, f"127.0.0.1:{port}").status_code == 200
    assert_refused(send(url, "POST", "/chat", CHAT, LAMBDA_URL_HOST))
    assert len(llm.requests) == 1


def test_start_up_logs_the_accepted_names(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentloop")
    monkeypatch.setenv("AGENTLOOP_ALLOWED_HOSTS", "agent.example")
    serve()
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "agentloop-chat")
    monkeypatch.delenv("AGENTLOOP_ALLOWED_HOSTS")
    serve()

    lines = [r.getMessage() for r in caplog.records if "Host" in r.getMessage()]
    assert lines == [
        "accepting Host names: 127.0.0.1, localhost, ::1, agent.example "
        "(add more with AGENTLOOP_ALLOWED_HOSTS)",
        "Host check off (on Lambda with no AGENTLOOP_ALLOWED_HOSTS): any Host name is served",
    ]


@pytest.mark.parametrize("value", ["*", "http://agent.example", "agent.example:8000", "a*.b"])
def test_a_bad_setting_stops_the_app_from_starting(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    monkeypatch.setenv("AGENTLOOP_ALLOWED_HOSTS", f"agent.example,{value}")
    with pytest.raises(ConfigurationError, match=r"AGENTLOOP_ALLOWED_HOSTS: .* is not a host name"):
        create_app(open_service())


async def call_app(kind: str, headers: list[tuple[bytes, bytes]]) -> list[dict[str, Any]]:
    """The app called directly with one ASGI scope; what it sent back."""
    app = create_app(open_service())
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"} if kind == "websocket" else {"type": "http.request"}

    async def record(message: Any) -> None:
        sent.append(dict(message))

    scope = {
        "type": kind,
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "path": "/healthz",
        "raw_path": b"/healthz",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "scheme": "ws" if kind == "websocket" else "http",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "subprotocols": [],
        "state": {},
    }
    await app(scope, receive, record)
    return sent


# The uvicorn used here (h11, no WebSocket library) never hands the app these requests, so
# the scopes go to the app directly: the check does not depend on what the server filters.


async def test_a_websocket_for_a_foreign_host_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    monkeypatch.delenv("AGENTLOOP_ALLOWED_HOSTS", raising=False)
    sent = await call_app("websocket", [(b"host", b"evil.example")])
    # Closed before it is accepted: the server answers the handshake with 403.
    assert sent == [{"type": "websocket.close", "code": 1008, "reason": "host not allowed"}]


async def test_the_app_itself_refuses_two_host_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    monkeypatch.delenv("AGENTLOOP_ALLOWED_HOSTS", raising=False)
    sent = await call_app("http", [(b"host", b"127.0.0.1"), (b"host", b"evil.example")])
    assert sent[0]["status"] == 400
    assert json.loads(sent[1]["body"])["error"]["message"] == (
        "the request has more than one Host header"
    )
