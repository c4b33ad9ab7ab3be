"""The scripted model server for the benchmark, in a process of its own.

It is ``tests.fakes.scripted_llm.ScriptedLLM`` (both flavours: ``/v1/chat/completions`` for
OpenAI-style clients, ``/openai/v1/chat/completions`` for Groq's SDK) answering with
:func:`bench.scenarios.respond`, wrapped in an ASGI layer that timestamps each request on the
machine's monotonic clock (``time.monotonic()``: CLOCK_MONOTONIC, shared by every process):

* ``received``: the request reached the server;
* ``first_text``: the first chunk carrying text content was handed to the socket;
* ``sent``: the last byte of the answer was handed to the socket;

and counts its prompt tokens the way the scripted server reports them (characters / 4 of
the messages). ``GET /bench/marks/<run>`` returns (and forgets) the records of one run.

Run as ``python bench/llm_server.py``: prints ``{"url": ...}`` on one line, serves on a free
loopback port until its standard input closes (or ``MAX_LIFETIME_S`` passes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import uvicorn  # noqa: E402
from starlette.types import ASGIApp, Message, Receive, Scope, Send  # noqa: E402

from bench.model_script import respond  # noqa: E402
from bench.tasks import TASK_RE  # noqa: E402
from tests.fakes.scripted_llm import ScriptedLLM  # noqa: E402

MAX_LIFETIME_S = 3600
_FIRST_TEXT = re.compile(rb'"delta": \{"content": "[^"]')
_MARKS_PATH = "/bench/marks/"


class Marks:
    """Timestamps model requests; serves ``/bench/marks/<run>``."""

    def __init__(self, app: ASGIApp, forget: Callable[[], None]) -> None:
        self.app = app
        self.forget = forget
        self.lock = threading.Lock()
        self.runs: dict[str, list[dict[str, Any]]] = defaultdict(list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path.startswith(_MARKS_PATH):
            await self._serve_marks(path[len(_MARKS_PATH) :], send)
            return
        record: dict[str, Any] = {"path": path, "received": time.monotonic()}
        body = bytearray()

        async def receive_and_keep() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
            return message

        async def send_and_mark(message: Message) -> None:
            if message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                if "first_text" not in record and _FIRST_TEXT.search(chunk):
                    await send(message)
                    record["first_text"] = time.monotonic()
                    return
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                record["sent"] = time.monotonic()

        try:
            await self.app(scope, receive_and_keep, send_and_mark)
        finally:
            self._keep(record, bytes(body))

    def _keep(self, record: dict[str, Any], body: bytes) -> None:
        try:
            request = json.loads(body)
        except ValueError:
            request = {}
        messages = request.get("messages", []) if isinstance(request, dict) else []
        tools = request.get("tools", []) if isinstance(request, dict) else []
        record["prompt_tokens"] = max(1, len(json.dumps(messages)) // 4)
        # What a request makes the model read, tool definitions included (compact JSON).
        record["prompt_chars"] = len(json.dumps([messages, tools], separators=(",", ":")))
        match = TASK_RE.search(json.dumps(messages))
        run = match.group(2) if match else "unknown"
        with self.lock:
            self.runs[run].append(record)

    async def _serve_marks(self, run: str, send: Send) -> None:
        with self.lock:
            records = self.runs.pop(run, [])
        self.forget()  # the scripted server's own request log would only grow
        payload = json.dumps(records).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


class BenchLLM(ScriptedLLM):
    def __init__(self) -> None:
        super().__init__()
        self.respond_with(respond)
        self.marks = Marks(self.app, self._forget_requests)
        self.app = self.marks  # LoopbackServer serves self.app

    def _forget_requests(self) -> None:
        with self._lock:
            self._requests.clear()


def main() -> int:
    """Serve until standard input closes.

    uvicorn binds the port itself here (``host``/``port``), as it does in production, rather
    than being handed a socket as ``LoopbackServer`` does: a socket made with
    ``socket(AF_INET, SOCK_STREAM)`` has protocol 0, so asyncio does not set TCP_NODELAY on
    the connections it accepts, and on a reused keep-alive connection every answer then waits
    about 40 ms for the client's delayed ACK (Nagle). A "zero-latency" model must not.
    """
    llm = BenchLLM()
    config = uvicorn.Config(
        llm.app,
        host="127.0.0.1",
        port=0,
        log_config=None,
        log_level="warning",
        access_log=False,
        lifespan="off",
        http="h11",
        loop="asyncio",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                await task
                return
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        print(json.dumps({"url": f"http://127.0.0.1:{port}"}), flush=True)
        stdin_closed = asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stdin_closed, MAX_LIFETIME_S)
        server.should_exit = True
        await task

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
