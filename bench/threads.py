"""The threads figure: what a run on a thread adds to a request, on the embedded store.

One chat app under uvicorn on SQLite (a temporary directory). Each round makes two one-call
``POST /chat`` requests, taking turns: *on a thread*, one of 50 messages (seeded beforehand,
a fresh thread per round so each is loaded at the same size) with only the new question sent;
*stateless*, the same 50 messages and the question sent by the client. The model is sent the
same conversation both ways, so the difference is the thread's work: claiming it, loading its
messages, appending the run's and giving it back. *Added* is the median of the round-by-round
differences.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench import tasks
from bench.paired import paired_rows

WARMUP = 10
ROUNDS = 120
HISTORY = 50
OWNER = "local"
"""Who a request is for when the app's auth is off (the bench's apps)."""

Post = Callable[[str, int, bytes], Awaitable[tuple[str, bytes]]]


def history(round_: int) -> list[dict[str, Any]]:
    """A conversation of ``HISTORY`` messages, user and assistant in turn."""
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"round {round_} turn {i} " * 8}
        for i in range(HISTORY)
    ]


async def _seed(store_url: str, rounds: int) -> list[str]:
    """One thread of ``HISTORY`` messages per round, made as a run would make it."""
    from agentloop.store import open_store
    from agentloop.threads import ThreadStore

    threads = ThreadStore(open_store(store_url))
    ids = []
    for round_ in range(rounds):
        made = await threads.create(OWNER)
        await threads.append(OWNER, made.id, history(round_), key="seed")
        ids.append(made.id)
    return ids


def measure(
    start_app: Callable[[dict[str, str]], Any], post: Post, say: Callable[[str], None]
) -> dict[str, Any]:
    """The figure's rows; ``start_app(env)`` starts a chat app (``.port``, ``.stop()``)."""
    expected = tasks.expected_answer("ping")
    samples: dict[str, list[float]] = {"on a thread": [], "stateless": []}
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/s.db"
        ids = asyncio.run(_seed(url, WARMUP + ROUNDS))
        app = start_app({"AGENTLOOP_STORE": url})
        try:
            for round_, thread_id in enumerate(ids):
                question = {"role": "user", "content": tasks.prompt("ping", f"threads{round_}")}
                bodies = {
                    "on a thread": {"messages": [question], "thread_id": thread_id},
                    "stateless": {"messages": [*history(round_), question]},
                }
                for name, body in bodies.items():
                    started = time.perf_counter()
                    answer, _ = asyncio.run(post("127.0.0.1", app.port, json.dumps(body).encode()))
                    seconds = time.perf_counter() - started
                    if answer != expected:
                        raise RuntimeError(f"{name}: the answer was {answer[:80]!r}")
                    if round_ >= WARMUP:
                        samples[name].append(seconds * 1000)
        finally:
            app.stop()
    rows = paired_rows(samples, "on a thread", "stateless")
    say(
        f"  threads  added {rows['on a thread']['added_ms']:.3f} ms per /chat request "
        f"(a {HISTORY}-message thread loaded and a run saved, SQLite)"
    )
    return rows
