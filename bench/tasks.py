"""The scripted tasks every contender runs: prompts, tools, expected answers.

Pure standard library, so a contender's process imports nothing here that it would not
import anyway (cold start and memory are measured in such processes). The scripted model's
side of each task is ``bench/model_script.py``.

A task is named in the first user message (``[bench task=loop run=<id>]``), so one model
server serves every contender and every figure, and its records are kept per run.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time

SYSTEM_PROMPT = (
    "You are a helpful research assistant. Use the tools when they help you answer "
    "accurately; cite the sources you used. When you have enough information, answer "
    "directly and concisely."
)
"""agentloop's default system prompt; every contender is given the same instructions."""

LOOP_TURNS = 10
"""Tool turns of the loop-overhead task (then one answer turn)."""
WAIT_S = 0.3
"""Each of the three tool calls of the parallel task sleeps this long."""
PARALLEL_LABELS = ("a", "b", "c")
STREAM_TEXT = "Paris is the capital of France."
STREAM_CHUNK_DELAY_S = 0.02
"""Between streamed chunks of the streaming task, so the first text chunk is its own write."""

TASK_RE = re.compile(r"\[bench task=(\w+) run=(\w+)\]")
TASKS = ("loop", "parallel", "docs", "stream", "ping")


def doc_shape() -> tuple[int, int]:
    """Turns and characters per tool result of the long task: bench/compaction.py's."""
    from bench import compaction  # imports agentloop: only where the docs task runs

    return compaction.TURNS, compaction.RESULT_CHARS


def prompt(task: str, run: str) -> str:
    what = {
        "loop": f"Look up k0 to k{LOOP_TURNS - 1} one at a time with lookup and add them up.",
        "parallel": "Wait for a, b and c with the wait tool, all at once.",
        "docs": "Read the documents one by one with fetch_doc, starting at 0, and count them.",
        "stream": "What is the capital of France?",
        "ping": "Say pong.",
    }[task]
    return f"[bench task={task} run={run}] {what}"


def expected_answer(task: str) -> str:
    if task == "loop":
        return f"TOTAL={sum(lookup_value(f'k{i}') for i in range(LOOP_TURNS))}"
    if task == "parallel":
        return "WAITED " + " ".join(PARALLEL_LABELS)
    if task == "docs":
        return f"Read {doc_shape()[0]} documents."
    if task == "stream":
        return STREAM_TEXT
    return "pong"


# -- the tools, as plain functions that every contender wraps in its own way ----------------

TOOL_NAMES = {"loop": ("lookup",), "parallel": ("wait",), "docs": ("fetch_doc",)}
DESCRIPTIONS = {
    "lookup": "Look up the number stored under a key.",
    "wait": "Wait for the named thing (takes a while) and report it.",
    "fetch_doc": "Fetch one document by number.",
}
ARGUMENT_DESCRIPTIONS = {
    "key": "Which value to look up.",
    "label": "What to wait for.",
    "n": "The document's number.",
}

SPANS: list[tuple[float, float]] = []
"""(start, end) of every ``wait`` call, on the monotonic clock, for the parallel figure."""


def lookup_value(key: str) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:6], 16) % 10_000


def lookup(key: str) -> str:
    return f"RESULT({key}={lookup_value(key)})"


async def wait(label: str) -> str:
    start = time.monotonic()
    await asyncio.sleep(WAIT_S)
    SPANS.append((start, time.monotonic()))
    return f"WAITED({label})"


def wait_sync(label: str) -> str:
    """For frameworks whose tools are synchronous (smolagents runs them in threads)."""
    start = time.monotonic()
    time.sleep(WAIT_S)
    SPANS.append((start, time.monotonic()))
    return f"WAITED({label})"


def fetch_doc(n: int) -> str:
    head = f"DOC#{n}: "
    chars = doc_shape()[1]
    return head + "".join(chr(ord("a") + (i * 7 + n) % 26) for i in range(chars - len(head)))


def openai_tool_definitions(task: str) -> list[dict[str, object]]:
    """The task's tools as Chat Completions ``tools`` (for the hand-written floors)."""
    types = {"key": "string", "label": "string", "n": "integer"}
    params = {"lookup": "key", "wait": "label", "fetch_doc": "n"}
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": DESCRIPTIONS[name],
                "parameters": {
                    "type": "object",
                    "properties": {
                        params[name]: {
                            "type": types[params[name]],
                            "description": ARGUMENT_DESCRIPTIONS[params[name]],
                        }
                    },
                    "required": [params[name]],
                },
            },
        }
        for name in TOOL_NAMES.get(task, ())
    ]


async def _lookup_async(key: str) -> str:
    return lookup(key)


async def _fetch_doc_async(n: int) -> str:
    return fetch_doc(n)


ASYNC_TOOLS = {"lookup": _lookup_async, "wait": wait, "fetch_doc": _fetch_doc_async}
