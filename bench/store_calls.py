"""Store calls per request on DynamoDB, counted: the acceptance's "at most 2 store calls before
the first model call and 1 after the last".

moto's server (run by the project's dev virtualenv, where moto is installed: ``make dev``)
holds a table keyed as ``template.yaml``'s ``AgentStoreTable``; the chat app (under uvicorn,
as the timed figure starts it) reaches it through a loopback proxy that logs each DynamoDB
operation (its ``X-Amz-Target``), and its model is a scripted server in this process that logs
each request in the same log. A request's store calls before its first model request and after
its last are then read from one ordered log, not inferred.
"""

from __future__ import annotations

import http.client
import json
import socket
import statistics
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEV_PYTHON = ROOT / ".venv" / "bin" / "python"
WARMUP = 2
REQUESTS = 20
ANSWER = "pong"
READY_S = 30.0


class Log:
    """What happened, in order, from every thread: (kind, name)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: list[tuple[str, str]] = []

    def add(self, kind: str, name: str) -> None:
        with self.lock:
            self.entries.append((kind, name))

    def mark(self) -> int:
        with self.lock:
            return len(self.entries)

    def since(self, start: int) -> list[tuple[str, str]]:
        with self.lock:
            return list(self.entries[start:])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class _Forward(BaseHTTPRequestHandler):
    """One DynamoDB call: logged by its operation, then passed to moto as it came."""

    protocol_version = "HTTP/1.1"
    server: _Proxy

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        operation = (self.headers.get("x-amz-target") or "?").rpartition(".")[2]
        self.server.log.add("store", operation)
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream_port, timeout=30)
        try:
            skip = {"host", "connection", "content-length"}
            headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
            upstream.request("POST", self.path, body, headers)
            answer = upstream.getresponse()
            data = answer.read()
        finally:
            upstream.close()
        self.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the log that counts is :class:`Log`."""


class _Proxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, log: Log, upstream_port: int) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        self.log = log
        self.upstream_port = upstream_port


@contextmanager
def _moto() -> Iterator[int]:
    """moto's server on a loopback port, ready; its port."""
    if not DEV_PYTHON.exists():
        raise RuntimeError(f"{DEV_PYTHON} is missing (make dev): moto runs there")
    port = _free_port()
    command = [str(DEV_PYTHON), "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + READY_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto's server did not start") from None
                time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


def _table(port: int) -> str:
    """A table keyed as template.yaml's AgentStoreTable (pk, sk; on demand)."""
    import boto3  # type: ignore[import-untyped, unused-ignore]

    client = boto3.session.Session().client(
        "dynamodb",
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
    )
    name = f"bench-{uuid.uuid4().hex[:8]}"
    client.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def count(
    start_app: Callable[[dict[str, str]], Any],
    chat: Callable[[int, str, str], tuple[str, float]],
    limits: dict[str, Any],
) -> dict[str, Any]:
    """The row: store calls per request before the first model call, between and after the
    last (max and median over the requests), and the operations of one request."""
    from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM

    log = Log()

    def respond(_: RecordedRequest) -> Reply:
        log.add("model", "call")
        return Reply(text=ANSWER, usage=(20, 2))

    with _moto() as moto_port:
        proxy = _Proxy(log, moto_port)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        llm = ScriptedLLM().start()
        llm.respond_with(respond)
        env = {
            "AGENTLOOP_LIMITS": json.dumps(limits),
            "AGENTLOOP_STORE": f"dynamodb://{_table(moto_port)}",
            "AWS_ENDPOINT_URL_DYNAMODB": f"http://127.0.0.1:{proxy.server_address[1]}",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AGENTLOOP_DEFAULT_MODEL": "openai:gpt-4o-mini",
            "OPENAI_BASE_URL": llm.openai_base_url,
            "OPENAI_API_KEY": "bench-key",
        }
        app = start_app(env)
        try:
            requests = [_one(app.port, chat, log, n) for n in range(WARMUP + REQUESTS)]
        finally:
            app.stop()
            llm.stop()
            proxy.shutdown()
    return _row(requests[WARMUP:])


def _one(
    port: int, chat: Callable[[int, str, str], tuple[str, float]], log: Log, n: int
) -> list[tuple[str, str]]:
    """One request's entries of the log."""
    start = log.mark()
    answer, _ = chat(port, "ping", f"storecalls{n}")
    if answer != ANSWER:
        raise RuntimeError(f"the answer was {answer[:80]!r}")
    return log.since(start)


def _row(requests: list[list[tuple[str, str]]]) -> dict[str, Any]:
    parts: dict[str, list[int]] = {"before": [], "between": [], "after": []}
    operations: dict[str, Counter[str]] = {"before": Counter(), "after": Counter()}
    for entries in requests:
        models = [i for i, (kind, _) in enumerate(entries) if kind == "model"]
        if not models:
            raise RuntimeError("a request made no model call")
        first, last = models[0], models[-1]
        split = {
            "before": entries[:first],
            "between": entries[first:last],
            "after": entries[last + 1 :],
        }
        for part, seen in split.items():
            calls = [name for kind, name in seen if kind == "store"]
            parts[part].append(len(calls))
            if part in operations:
                operations[part].update(calls)
    row: dict[str, Any] = {"ok": True, "requests": len(requests)}
    for part, counts in parts.items():
        row[part] = {"max": max(counts), "median": statistics.median(counts)}
    for part, seen in operations.items():
        row[part]["operations"] = {k: v / len(requests) for k, v in sorted(seen.items())}
    return row
