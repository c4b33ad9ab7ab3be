"""``make bench``'s ``faces`` figure: from the model's first token to the client's first text,
for every protocol face of the chat app, each driven by its own real client.

One chat app under uvicorn serves every face; the clients run in two processes of their own
(pinned, as the ``/chat`` client of the streaming figure is, to the model server's CPU):

* ``python -m bench.faces``: ``/chat`` by a bare socket (``contenders.post_chat``: the first
  ``text_delta`` frame's bytes), ``/v1/chat/completions`` and ``/v1/responses`` by the openai
  SDK (``stream=True``: the first chunk or ``response.output_text.delta`` with text);
* ``node tests/node/bench_faces.mjs``: ``/api/chat`` by the ``ai`` package
  (``DefaultChatTransport`` + ``readUIMessageStream``: the first assistant message with
  text) and ``/ag-ui`` by ``@ag-ui/client``'s ``HttpAgent`` (the first
  ``TEXT_MESSAGE_CONTENT`` its subscriber sees).

Both speak one JSON line per run on stdin/stdout and stay up for the whole figure (warm, as
a container and a browser tab are). A run asks the scripted model for the ``stream`` task
(text in chunks 20 ms apart, no tools); the client notes the monotonic time of its first
text (Python's ``time.monotonic`` and Node's ``process.hrtime`` both read CLOCK_MONOTONIC)
and the model server's ``first_text`` mark of the same run is subtracted. The faces take
turns run by run, so a slow spell of a shared machine hits each alike; a run whose answer is
not the expected text fails its face.
"""

from __future__ import annotations

import asyncio
import json
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import tasks  # noqa: E402

FACES = ("/chat", "/v1/chat/completions", "/v1/responses", "/api/chat", "/ag-ui")
NODE_FACES = ("/api/chat", "/ag-ui")
CLIENTS = {
    "/chat": "bare socket, first `text_delta` frame",
    "/v1/chat/completions": "openai SDK, `chat.completions.create(stream=True)`",
    "/v1/responses": "openai SDK, `responses.create(stream=True)`",
    "/api/chat": "`ai`: `DefaultChatTransport` + `readUIMessageStream` (Node)",
    "/ag-ui": "`@ag-ui/client`: `HttpAgent.runAgent` (Node)",
}
RUNS = 30
WARMUP = 3
RUN_TIMEOUT_S = 60
NODE_SCRIPT = ROOT / "tests" / "node" / "bench_faces.mjs"
OPTIONS: dict[str, Any] = {"agentloop": {"tools": []}}
"""Every face is asked for the same tool-less run; /chat takes the fields at the top level."""

# -- the Python clients (this module run as a process) ---------------------------------------


class PythonClients:
    """``/chat`` over a bare socket and the two OpenAI faces through one warm openai client."""

    def __init__(self) -> None:
        from openai import AsyncOpenAI

        self.openai: dict[str, AsyncOpenAI] = {}
        self.make = AsyncOpenAI

    def client(self, url: str) -> Any:
        if url not in self.openai:
            self.openai[url] = self.make(base_url=f"{url}/v1", api_key="bench-key", max_retries=0)
        return self.openai[url]

    async def run(self, face: str, url: str, prompt: str) -> tuple[float | None, str]:
        """(monotonic time of the first text, the whole answer) of one run."""
        if face == "/chat":
            return await self.chat(url, prompt)
        if face == "/v1/chat/completions":
            return await self.completions(url, prompt)
        if face == "/v1/responses":
            return await self.responses(url, prompt)
        raise ValueError(f"no Python client for {face}")

    async def chat(self, url: str, prompt: str) -> tuple[float | None, str]:
        from bench.contenders import post_chat

        first: list[float] = []
        body = {"messages": [{"role": "user", "content": prompt}], "tools": []}
        parts = urlsplit(url)
        answer, _ = await post_chat(
            parts.hostname or "127.0.0.1",
            parts.port or 80,
            json.dumps(body).encode(),
            lambda _: first.append(time.monotonic()),
        )
        return (first[0] if first else None), answer

    async def completions(self, url: str, prompt: str) -> tuple[float | None, str]:
        first = None
        text = []
        stream = await self.client(url).chat.completions.create(
            model="agentloop",
            messages=[{"role": "user", "content": prompt}],
            stream=True,
            extra_body=OPTIONS,
        )
        async for chunk in stream:
            delta = chunk.choices[0].delta.content if chunk.choices else None
            if delta:
                if first is None:
                    first = time.monotonic()
                text.append(delta)
        return first, "".join(text)

    async def responses(self, url: str, prompt: str) -> tuple[float | None, str]:
        first = None
        answer = ""
        stream = await self.client(url).responses.create(
            model="agentloop", input=prompt, stream=True, extra_body=OPTIONS
        )
        async for event in stream:
            if event.type == "response.output_text.delta" and event.delta and first is None:
                first = time.monotonic()
            elif event.type == "response.completed":
                answer = event.response.output_text
            elif event.type in ("response.failed", "error"):
                raise RuntimeError(f"{event.type}: {event.model_dump_json()[:200]}")
        return first, answer


async def serve() -> None:
    """One run per line of stdin (``{face, url, prompt}``), one answer line on stdout."""
    clients = PythonClients()
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        command = json.loads(line)
        try:
            first, text = await clients.run(command["face"], command["url"], command["prompt"])
            answer = {"ok": first is not None, "why": "", "first_text": first, "text": text}
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"[:300]
            answer = {"ok": False, "why": why, "first_text": None, "text": ""}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


# -- the figure (in bench/run.py's process) --------------------------------------------------


class ClientProcess:
    """A client process that answers one JSON line per command line."""

    def __init__(
        self, command: list[str], cwd: Path, env: dict[str, str], pin: Callable[[], None] | None
    ) -> None:
        self.log = tempfile.TemporaryFile()  # noqa: SIM115  (closed by close())
        self.process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            preexec_fn=pin,
        )

    def ask(self, command: dict[str, str]) -> dict[str, Any]:
        process = self.process
        assert process.stdin is not None
        assert process.stdout is not None
        try:
            process.stdin.write(json.dumps(command) + "\n")
            process.stdin.flush()
        except BrokenPipeError:
            return {"ok": False, "why": f"the client exited: {self.stderr_tail()}"}
        ready, _, _ = select.select([process.stdout], [], [], RUN_TIMEOUT_S)
        line = process.stdout.readline() if ready else ""
        if not line:
            why = "timed out" if not ready else f"the client exited: {self.stderr_tail()}"
            return {"ok": False, "why": why}
        answer: dict[str, Any] = json.loads(line)
        return answer

    def stderr_tail(self) -> str:
        self.process.kill()
        self.process.wait()
        self.log.seek(0)
        lines = self.log.read().decode(errors="replace").strip().splitlines()
        return (lines or ["?"])[-1][:200]

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def node_missing() -> str | None:
    """Why the Node clients cannot run here, if they cannot."""
    if shutil.which("node") is None:
        return "Node.js is not installed (the /api/chat and /ag-ui clients run under it)"
    if not (ROOT / "tests" / "node" / "node_modules" / ".package-lock.json").exists():
        return "the JavaScript clients are not installed: run make node-clients"
    return None


def one_run(client: ClientProcess, server: str, face: str, url: str, run_id: str) -> dict[str, Any]:
    """One run of ``face``, checked, with the gap from the model's first text mark."""
    from bench.worker import fetch_marks

    answer = client.ask({"face": face, "url": url, "prompt": tasks.prompt("stream", run_id)})
    marks = fetch_marks(server, run_id)
    if not answer["ok"]:
        return {"ok": False, "why": answer["why"] or "the client saw no text"}
    if answer["text"].strip() != tasks.STREAM_TEXT:
        return {"ok": False, "why": f"answer {answer['text'][:80]!r} is not {tasks.STREAM_TEXT!r}"}
    sent = [m["first_text"] for m in marks if "first_text" in m]
    if len(marks) != 1 or not sent:
        return {"ok": False, "why": f"{len(marks)} model calls, {len(sent)} with text"}
    return {"ok": True, "ms": (answer["first_text"] - sent[0]) * 1000}


def spread(values: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "p90": statistics.quantiles(values, n=10)[8],
        "min": min(values),
        "max": max(values),
    }


def measure(
    server: str,
    app_url: str,
    env: dict[str, str],
    pin: Callable[[], None] | None,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Every face ``RUNS`` times, taking turns, after ``WARMUP`` runs each."""
    python = ClientProcess([sys.executable, "-m", "bench.faces"], ROOT, env, pin)
    node = None if node_missing() else ClientProcess(["node", str(NODE_SCRIPT)], ROOT, env, pin)
    runs: dict[str, list[dict[str, Any]]] = {face: [] for face in FACES}

    def run(face: str, run_id: str) -> dict[str, Any]:
        client = node if face in NODE_FACES else python
        if client is None:
            return {"ok": False, "why": node_missing()}
        return one_run(client, server, face, app_url, run_id)

    def tag(face: str) -> str:
        return "".join(c for c in face if c.isalnum())

    try:
        for face in FACES:
            for i in range(WARMUP):
                record = run(face, f"facesw{i}{tag(face)}")
                if not record["ok"]:
                    runs[face].append({**record, "why": f"warm-up: {record['why']}"})
                    break
        for round_ in range(RUNS):
            order = FACES[round_ % len(FACES) :] + FACES[: round_ % len(FACES)]
            for face in order:
                if runs[face] and not runs[face][-1]["ok"]:
                    continue  # failed once: the row says why
                runs[face].append(run(face, f"facesr{round_}{tag(face)}"))
    finally:
        python.close()
        if node is not None:
            node.close()
    return rows(runs, say)


def rows(runs: dict[str, list[dict[str, Any]]], say: Callable[[str], None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    base = runs["/chat"]
    for face in FACES:
        mine = runs[face]
        failed = [r for r in mine if not r["ok"]]
        if failed or not mine:
            out[face] = {"ok": False, "why": failed[0]["why"] if failed else "no runs"}
            say(f"  faces    {face:<22} FAILED: {out[face]['why']}")
            continue
        row: dict[str, Any] = {"ok": True, "runs": len(mine), "client": CLIENTS[face]}
        row["first_text_ms"] = spread([r["ms"] for r in mine])
        if all(r["ok"] for r in base) and base:
            # Round by round against /chat's run of the same round, then the median.
            pairs = zip(mine, base, strict=True)
            row["chat_ratio"] = statistics.median(a["ms"] / b["ms"] for a, b in pairs)
        out[face] = row
        shown = row["first_text_ms"]
        say(
            f"  faces    {face:<22} median {shown['median']:6.2f} ms, p90 {shown['p90']:6.2f} ms"
            + (f", {row['chat_ratio']:.2f}x /chat" if "chat_ratio" in row else "")
        )
    return out


if __name__ == "__main__":
    asyncio.run(serve())
