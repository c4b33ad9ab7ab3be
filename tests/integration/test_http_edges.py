"""The app at its edges: bodies parsed within bounds, a 413 clients can read, stalled bodies
timed out, and a non-streamed run cancelled when its client leaves.

Everything goes through the real app: Starlette's TestClient for the parsing bounds, uvicorn
on loopback (raw sockets, urllib, http.client) where the socket's behaviour is the point.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import math
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from starlette.testclient import TestClient

from agentloop.config import ConfigurationError
from agentloop.http_api import RequestLimits, invocation_info
from agentloop.server.service import ChatService
from chat_app import create_app
from tests.fakes.loopback import LoopbackServer
from tests.fakes.node_client import run_node
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.sample_tools import echo, sleeper
from tests.served import AUTH, LOCAL, TOKEN, ServedApp, make_service

ROUTES = ("/chat", "/v1/chat/completions")
USER = {"role": "user", "content": "hi"}


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app(make_service([echo])), base_url=LOCAL) as test_client:
        yield test_client


def request_with(field: bytes) -> bytes:
    """A valid request body with one more field whose raw JSON text is ``field``."""
    return (
        b'{"messages": [{"role": "user", "content": "hi"}], "model": "groq:m", "x": ' + field + b"}"
    )


def problems(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Log records that mean the app failed: errors and anything with a traceback."""
    return [r.getMessage() for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


# -- 1. one bounded parser for every body -----------------------------------------------------

DEEP = 50_000
BAD_BODIES = {
    "deep-array": (b"[" * DEEP, "json_too_deep", "deeper than 64 levels"),
    "deep-messages": (b'{"messages": ' + b"[" * DEEP, "json_too_deep", "deeper than 64 levels"),
    "deep-object": (b'{"a": ' * 65 + b"1" + b"}" * 65, "json_too_deep", "deeper than 64 levels"),
    "huge-int": (
        b'{"messages": [], "max_iterations": ' + b"9" * 5000 + b"}",
        "number_too_large",
        "number of 5000 characters; the limit is 100",
    ),
    "long-int": (request_with(b"1" * 101), "number_too_large", "number of 101 characters"),
    "long-float": (request_with(b"0." + b"1" * 120), "number_too_large", "number of 122"),
    "inf-float": (request_with(b"1e999"), "number_too_large", "out of a float's range: 1e999"),
    "nan": (request_with(b"NaN"), "invalid_json", "NaN is not a JSON value"),
    "infinity": (request_with(b"[-Infinity]"), "invalid_json", "-Infinity is not a JSON value"),
    "surrogate": (
        b'{"messages": [{"role": "user", "content": "\\ud800 hi"}], "model": "groq:m"}',
        "invalid_unicode",
        "messages.0.content contains an unpaired surrogate (\\ud800)",
    ),
    "low-surrogate": (request_with(b'["ok", "\\udc00"]'), "invalid_unicode", "x.1 contains"),
    "surrogate-key": (
        request_with(b'{"\\udfffkey": 1}'),
        "invalid_unicode",
        "a key in x contains an unpaired surrogate (\\udfff)",
    ),
    "encoded-surrogate": (request_with(b'"\xed\xa0\x80"'), "invalid_json", "not UTF-8"),
    "not-utf8": (request_with(b'"\xff"'), "invalid_json", "not UTF-8 (invalid byte at offset"),
}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(("body", "type_", "fragment"), BAD_BODIES.values(), ids=BAD_BODIES)
def test_bodies_past_the_bounds_are_400s_naming_the_problem(
    client: TestClient,
    llm: ScriptedLLM,
    caplog: pytest.LogCaptureFixture,
    route: str,
    body: bytes,
    type_: str,
    fragment: str,
) -> None:
    # TestClient re-raises app exceptions, so a RecursionError or ValueError fails here too.
    response = client.post(
        route, content=body, headers={**AUTH, "content-type": "application/json"}
    )

    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == type_
    assert fragment in error["message"]
    assert error["code"] == 400
    assert problems(caplog) == []
    assert llm.requests == [], "nothing past the edge"


def test_bodies_within_the_bounds_are_served(client: TestClient, llm: ScriptedLLM) -> None:
    # AG-UI's "state" takes any JSON (and is left alone), so one request can carry every
    # bound at its limit.
    llm.respond_with(lambda request: Reply(text="fine"))
    nested = b"[" * 62 + b"]" * 62  # in the body and "state": 64 levels in all
    content = b'"\\ud83d\\ude00 \\\\ud800"'
    body = (
        b'{"threadId": "t", "runId": "r", "forwardedProps": {"agentloop": {"model": "groq:m"}},'
        b' "messages": [{"id": "m1", "role": "user", "content": ' + content + b"}],"
        b' "state": {"nested": ' + nested + b', "big": ' + b"9" * 100 + b', "f": 1e308}}'
    )
    response = client.post(
        "/ag-ui", content=body, headers={**AUTH, "content-type": "application/json"}
    )

    assert response.status_code == 200, response.text
    assert '"RUN_FINISHED"' in response.text
    assert '"delta":"fine"' in response.text.replace(" ", "")
    # A surrogate *pair* is one character; an escaped backslash is not an escape.
    assert llm.requests[0].messages[-1]["content"] == "\U0001f600 \\ud800"


def test_a_deep_lambda_context_header_is_ignored(client: TestClient, llm: ScriptedLLM) -> None:
    # Locally anyone can send this header; it is parsed with the same bounds as a body.
    llm.respond_with(lambda request: Reply(text="fine"))
    headers = {**AUTH, "x-amzn-lambda-context": "[" * 10_000}
    response = client.post("/chat", json={"messages": [USER], "model": "groq:m"}, headers=headers)
    assert response.status_code == 200
    assert "event: done" in response.text


@pytest.mark.parametrize(
    "context",
    ['{"deadline": true}', '{"deadline": "soon"}', '{"deadline": -5}', '{"deadline": 1e999}', "7"],
)
def test_a_lambda_context_deadline_that_is_not_a_time_is_no_deadline(context: str) -> None:
    info = invocation_info({"x-amzn-lambda-context": context})
    assert info.deadline.remaining() == math.inf


# -- over a real socket -----------------------------------------------------------------------


def serve(service: ChatService) -> LoopbackServer:
    return LoopbackServer(create_app(service), name="edges-app")


def send_head(port: int, path: str, content_length: int, body: bytes = b"") -> socket.socket:
    """Open a connection and send a request's head and the start of its body, then stop."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {content_length}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    return sock


def read_until_closed(sock: socket.socket) -> tuple[int, dict[str, Any], bytes]:
    """Status and JSON body of the one response, read to the end of the connection.

    Returning at all shows that the server closed the connection (the socket's timeout
    would raise otherwise).
    """
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body), head


# -- 2. a 413 the client can read ---------------------------------------------------------------

BIG = 14_000_000  # over twice the 6 MB limit, past what loopback socket buffers absorb: no luck


def _post_urllib(port: int, path: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=b" " * BIG,
        headers={**AUTH, "content-type": "application/json"},
    )
    try:
        urllib.request.urlopen(request, timeout=10)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    raise AssertionError("the oversized body was accepted")


def _post_chunked(port: int, path: str) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    pieces = (b" " * 1_000_000 for _ in range(BIG // 1_000_000))
    connection.request(
        "POST",
        path,
        body=pieces,
        headers={**AUTH, "content-type": "application/json"},
        encode_chunked=True,
    )
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def _post_raw(port: int, path: str) -> tuple[int, dict[str, Any]]:
    """A client that writes its whole request before it reads a byte; the server must also
    close the connection (``read_until_closed`` returns only then)."""
    sock = send_head(port, path, content_length=BIG, body=b" " * BIG)
    with sock:
        status, body, _ = read_until_closed(sock)
    return status, body


@pytest.mark.parametrize(
    ("post", "fragment"),
    [
        (_post_urllib, f"request body is {BIG} bytes; the limit is 6000000"),
        (_post_chunked, "request body exceeds the limit of 6000000 bytes"),
        (_post_raw, f"request body is {BIG} bytes; the limit is 6000000"),
    ],
    ids=["urllib", "chunked", "raw-socket"],
)
@pytest.mark.parametrize("route", ROUTES)
def test_a_client_that_sends_everything_first_reads_the_413(
    post: Callable[[int, str], tuple[int, dict[str, Any]]], fragment: str, route: str
) -> None:
    # Before: past 4 MB the server answered and closed mid-upload; the client saw
    # ECONNRESET/EPIPE. Now the answer goes out at once and the rest is read and dropped.
    with serve(make_service([echo])) as server:
        started = time.monotonic()
        status, body = post(server.port, route)
        took = time.monotonic() - started

    assert status == 413
    assert body["error"]["type"] == "request_too_large"
    assert fragment in body["error"]["message"]
    assert took < 5, "the connection is not held for long"


def test_mcp_answers_a_declared_oversized_body_readably() -> None:
    # The MCP SDK's own 413 (sent while urllib is still sending) reached it as a reset.
    with serve(make_service([echo])) as server:
        status, body = _post_urllib(server.port, "/mcp")
    assert status == 413
    assert body["error"]["message"] == f"request body is {BIG} bytes; the limit is 6000000"


@pytest.mark.parametrize("route", ROUTES)
def test_fetch_reads_the_413_of_a_7mb_body(route: str) -> None:
    with serve(make_service([echo])) as server:
        result = run_node(
            "fetch_oversized.mjs", {"url": server.url + route, "token": TOKEN, "size": BIG}
        )

    assert "thrown" not in result, result
    assert result["status"] == 413
    assert result["body"]["error"]["message"] == (
        f"request body is {BIG} bytes; the limit is 6000000"
    )


def read_answer(sock: socket.socket) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of one response, read by its content-length (the connection
    may stay open)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536) or _closed()
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536) or _closed()
    return int(head.split()[1]), json.loads(body)


def _closed() -> bytes:
    raise AssertionError("the connection closed before the answer was complete")


def wait_closed(sock: socket.socket) -> None:
    """Return once the server has ended the connection (the socket's timeout raises else)."""
    with contextlib.suppress(ConnectionResetError):
        while sock.recv(65536):
            pass


@pytest.mark.parametrize("declared", [7_000_000, 50_000_000])
def test_a_declared_oversized_body_is_answered_at_once(declared: int) -> None:
    # Before: a declared length under the old 4 MB drain bound waited out the 10 s body
    # timeout before its 413. Now the answer comes at once, and a client that then sends
    # nothing more loses its connection after a short idle bound.
    with serve(make_service([echo])) as server:
        started = time.monotonic()
        sock = send_head(server.port, "/chat", content_length=declared)
        with sock:
            status, body = read_answer(sock)
            answered = time.monotonic() - started
            wait_closed(sock)
            closed = time.monotonic() - started

    assert status == 413
    assert f"request body is {declared} bytes; the limit is 6000000" in body["error"]["message"]
    assert answered < 3, "answered well before the 10 s body timeout"
    assert closed < 5, "the connection is not held for long"


def test_the_413_is_read_while_the_body_is_still_coming() -> None:
    # A client may read while it sends (an HTTP/2-era habit): it has the answer at once.
    with serve(make_service([echo])) as server:
        sock = send_head(server.port, "/chat", content_length=BIG, body=b" " * 7_000_000)
        with sock:
            status, body = read_answer(sock)
            sock.sendall(b" " * (BIG - 7_000_000))
            wait_closed(sock)
    assert status == 413
    assert body["error"]["type"] == "request_too_large"


def _keep_sending(sock: socket.socket, piece: bytes, pause_s: float) -> None:
    """A client that sends a chunked body that never ends, until the server cuts it off."""
    with contextlib.suppress(OSError):
        while True:
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            time.sleep(pause_s)


@pytest.mark.parametrize(
    ("limits", "piece", "pause_s"),
    [
        # fast and endless: cut by the byte bound
        (RequestLimits(max_discard_bytes=3_000_000, linger_s=30), b" " * 65536, 0),
        # a trickle: never idle for long, cut by the time bound
        (RequestLimits(linger_s=0.5, linger_idle_s=0.4), b" ", 0.05),
    ],
    ids=["bytes", "time"],
)
def test_a_body_that_never_ends_loses_its_connection(
    limits: RequestLimits, piece: bytes, pause_s: float
) -> None:
    with serve(make_service([echo], limits=replace(limits, max_body_bytes=1000))) as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        head = (
            f"POST /chat HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        sock.sendall(head.encode() + b"7d0\r\n" + b" " * 2000 + b"\r\n")  # past the limit
        sender = threading.Thread(target=_keep_sending, args=(sock, piece, pause_s))
        started = time.monotonic()
        sender.start()
        with sock:
            status, body = read_answer(sock)
            wait_closed(sock)
            closed = time.monotonic() - started
            with contextlib.suppress(OSError):  # stop the sender, if the server has not
                sock.shutdown(socket.SHUT_RDWR)
            sender.join(timeout=10)

    assert status == 413
    assert "request body exceeds the limit of 1000 bytes" in body["error"]["message"]
    assert closed < 5, "cut off by a bound, not held until the client stops"
    assert not sender.is_alive()


def test_a_client_that_waits_for_100_continue_is_answered_at_once() -> None:
    with serve(make_service([echo])) as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        head = (
            f"POST /chat HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {BIG}\r\n"
            "Expect: 100-continue\r\n\r\n"
        )
        sock.sendall(head.encode())
        with sock:
            status, body, head_bytes = read_until_closed(sock)
    assert status == 413, "no 100 Continue: the client is told at once and sends nothing"
    assert b"100 Continue" not in head_bytes
    assert body["error"]["type"] == "request_too_large"


def test_a_body_past_the_discard_bound_is_refused_without_reading() -> None:
    with serve(make_service([echo], limits=RequestLimits(body_timeout_s=5))) as server:
        started = time.monotonic()
        sock = send_head(server.port, "/chat", content_length=1_000_000_000)
        with sock:
            status, body, _ = read_until_closed(sock)

    assert status == 413
    assert "request body is 1000000000 bytes" in body["error"]["message"]
    assert time.monotonic() - started < 2, "answered and closed at once, not lingering"


# -- 3. a stalled body --------------------------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
def test_a_stalled_body_gets_408_and_loses_its_connection(route: str) -> None:
    with serve(make_service([echo], limits=RequestLimits(body_timeout_s=0.3))) as server:
        started = time.monotonic()
        sock = send_head(server.port, route, content_length=100, body=b'{"messages": ')
        with sock:
            status, body, head = read_until_closed(sock)
        waited = time.monotonic() - started

    assert status == 408
    assert body["error"] == {
        "message": "the request body did not arrive within 0.3 s",
        "type": "request_timeout",
        "param": None,
        "code": 408,
    }
    assert b"connection: close" in head.lower()
    assert 0.3 <= waited < 3


def test_a_stalled_oversized_body_gets_413() -> None:
    limits = RequestLimits(max_body_bytes=1000, body_timeout_s=0.3)
    with serve(make_service([echo], limits=limits)) as server:
        sock = send_head(server.port, "/chat", content_length=5000, body=b" " * 100)
        with sock:
            status, body, _ = read_until_closed(sock)
    assert status == 413
    assert "request body is 5000 bytes; the limit is 1000" in body["error"]["message"]


def test_the_body_timeout_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, provider_env: ScriptedLLM
) -> None:
    monkeypatch.setenv("AGENTLOOP_AUTH_MODE", "none")
    monkeypatch.setenv("AGENTLOOP_BODY_TIMEOUT_S", "0.25")
    with LoopbackServer(create_app(), name="edges-env-app", lifespan="on") as server:
        sock = send_head(server.port, "/chat", content_length=10)
        with sock:
            status, body, _ = read_until_closed(sock)
    assert status == 408
    assert "within 0.25 s" in body["error"]["message"]

    for bad in ("0", "-1", "soon", "inf", "nan"):
        with pytest.raises(ConfigurationError, match="AGENTLOOP_BODY_TIMEOUT_S"):
            RequestLimits.from_env({"AGENTLOOP_BODY_TIMEOUT_S": bad})
    assert RequestLimits.from_env({}).body_timeout_s == 10.0


# -- 4. a non-streamed client that leaves -------------------------------------------------------


def test_a_non_streamed_run_stops_when_its_client_leaves(llm: ScriptedLLM) -> None:
    # The model never stops calling a slow tool; with 20 iterations the run would take 10 s.
    log: list[tuple[str, str]] = []
    llm.respond_with(lambda request: Reply(tool_calls=[call("sleep", label="s", seconds=0.5)]))
    started = threading.Event()
    service = make_service([sleeper(log, started=started)])
    body = json.dumps(
        {
            "model": "groq:m",
            "messages": [USER],
            "agentloop": {"tools": ["sleep"], "max_iterations": 20},
        }
    ).encode()

    with ServedApp(service, name="edges-app") as served:
        sock = send_head(served.port, "/v1/chat/completions", len(body), body)
        started.wait(5)
        assert log == [("start", "s")], "the first tool call is running"
        sock.close()  # the client gives up while the tool runs
        # done is the run's last word: a model call after the client left would come before it
        [done] = served.runs(1)

    assert done.stop_reason == "cancelled"
    assert done.iterations == 1
    assert len(llm.requests) == 1, "no model call after the client left"
    assert log == [("start", "s"), ("end", "s")], "the tool round in progress was finished"
