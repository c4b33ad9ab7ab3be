"""Measurements in processes of their own: ``python -m bench.worker '<json spec>'``.

Modes:

* ``serve``: build one contender, then run the task named on each line of standard input
  in the same event loop (a warm container), timing and checking each run; the model
  server's records of the run add its model calls, the prompt tokens sent, the gap between
  the answer asking for tools and the next request (the tool phase) and when the first text
  left the server. ``bench/run.py`` keeps one such process per contender and takes turns
  among them run by run, so a slow spell of a shared machine hits every contender alike.
* ``memory``: import, build and one run of the loop task, then the process's peak RSS
  (see :func:`peak_rss`); nothing else is imported first, so the figure is the contender's.
* ``compaction-check``: bench/compaction.py's own task, compaction off and on, once each.
* ``profile``: warm runs of the loop task under pyinstrument's sampling profiler; the
  functions of agentloop's own code with the most time of their own, per model call, so a
  regression of the loop figure shows where it came from.

One-shot modes write their result to the file named ``out`` in the spec (stdout is left to
the frameworks, some of which print).
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import tasks  # noqa: E402
from bench.contenders import CONTENDERS  # noqa: E402


def fetch_marks(server: str, run_id: str) -> list[dict[str, Any]]:
    import urllib.request

    with urllib.request.urlopen(f"{server}/bench/marks/{run_id}", timeout=10) as response:
        marks: list[dict[str, Any]] = json.loads(response.read())
    return sorted(marks, key=lambda m: m["received"])


def verdict(task: str, answer: str, error: str | None) -> tuple[bool, str]:
    if error is not None:
        return False, error
    expected = tasks.expected_answer(task)
    if answer.strip() == expected:
        return True, ""
    if answer.startswith("WRONG:"):
        return False, f"the model was sent wrong tool results ({answer[7:]})"
    return False, f"answer {answer[:80]!r} is not {expected!r}"


async def run_once(contender: Any, server: str, task: str, run_id: str) -> dict[str, Any]:
    """One run of ``task``, timed and checked, with the model server's records of it."""
    tasks.SPANS.clear()
    first_text: list[float] = []

    def on_text(_: str) -> None:
        if not first_text:
            first_text.append(time.monotonic())

    error = None
    started = time.perf_counter()
    try:
        answer = await contender.run(task, run_id, on_text)
    except Exception as exc:
        answer, error = "", f"{type(exc).__name__}: {exc}"[:300]
    ms = (time.perf_counter() - started) * 1000
    ok, why = verdict(task, answer, error)
    marks = fetch_marks(server, run_id)
    record: dict[str, Any] = {
        "ok": ok,
        "why": why,
        "ms": ms,
        "calls": len(marks),
        "prompt_tokens": sum(m["prompt_tokens"] for m in marks),
        "prompt_chars": sum(m.get("prompt_chars", 0) for m in marks),
    }
    if task == "parallel" and len(marks) >= 2 and "sent" in marks[0]:
        record["tool_phase_ms"] = (marks[1]["received"] - marks[0]["sent"]) * 1000
        if tasks.SPANS:
            spans = tasks.SPANS
            span = max(e for _, e in spans) - min(s for s, _ in spans)
            record["tool_span_ms"] = span * 1000
    if task == "stream":
        sent = [m["first_text"] for m in marks if "first_text" in m]
        if sent and first_text:
            record["first_text_ms"] = (first_text[0] - sent[0]) * 1000
        elif ok:
            record.update(ok=False, why="no text was streamed")
    if task == "docs" and hasattr(contender, "prompt_tokens"):
        record["reported_prompt_tokens"] = contender.prompt_tokens
    return record


async def serve(spec: dict[str, Any]) -> None:
    """Build the contender once, then run one task per line of standard input.

    Each command is ``{"task": ..., "run": ...}``; each answer one JSON line on the
    original standard output (which the frameworks never see: their prints go to stderr).
    The event loop and the contender live as long as the process, like a warm container.
    """
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # "<key>+<variant>": the same contender in a differently set-up process (e.g. tracing on).
    contender = CONTENDERS[spec["contender"].split("+")[0]]()
    try:
        await contender.start(spec["server"])
    except Exception as exc:
        channel.write(
            json.dumps({"ready": False, "why": f"{type(exc).__name__}: {exc}"[:300]}) + "\n"
        )
        return
    channel.write(json.dumps({"ready": True}) + "\n")
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        command = json.loads(line)
        record = await run_once(contender, spec["server"], command["task"], command["run"])
        channel.write(json.dumps(record) + "\n")
    await contender.stop()


async def memory(spec: dict[str, Any]) -> dict[str, Any]:
    """Import, build, one run of the loop task: the peak RSS of all of it."""
    contender = CONTENDERS[spec["contender"]]()
    await contender.start(spec["server"])
    run_id = f"memory{os.getpid()}"
    try:
        answer, error = await contender.run("loop", run_id), None
    except Exception as exc:
        answer, error = "", f"{type(exc).__name__}: {exc}"[:300]
    ok, why = verdict("loop", answer, error)
    await contender.stop()
    return {"runs": [{"ok": ok, "why": why}], **peak_rss()}


PROFILE_RUNS = 40
PROFILE_TOP = 12


async def profile(spec: dict[str, Any]) -> dict[str, Any]:
    """The loop task ``PROFILE_RUNS`` times after warm-up, sampled every 0.1 ms; agentloop's
    own functions by self time (ms per model call), with the total of its own code."""
    from pyinstrument import Profiler

    contender = CONTENDERS[spec["contender"]]()
    await contender.start(spec["server"])
    for i in range(3):
        await contender.run("loop", f"profilew{i}{os.getpid()}")
    profiler = Profiler(interval=0.0001, async_mode="disabled")
    profiler.start()
    for i in range(PROFILE_RUNS):
        await contender.run("loop", f"profile{i}{os.getpid()}")
    session = profiler.stop()
    await contender.stop()
    own: dict[str, float] = {}
    frames = [session.root_frame()]
    while frames:
        frame = frames.pop()
        if frame is None:
            continue
        frames.extend(frame.children)
        owner = frame.parent if frame.function == "[self]" and frame.parent else frame
        where = owner.file_path_short or ""
        if "agentloop/" in where and frame.total_self_time > 0:
            name = f"{owner.function} ({where.split('agentloop/', 1)[1]}:{owner.line_no})"
            own[name] = own.get(name, 0.0) + frame.total_self_time
    calls = PROFILE_RUNS * (tasks.LOOP_TURNS + 1)
    top = sorted(own.items(), key=lambda item: -item[1])[:PROFILE_TOP]
    return {
        "runs": PROFILE_RUNS,
        "own_ms_per_call": sum(own.values()) * 1000 / calls,
        "top": [[name, seconds * 1000 / calls] for name, seconds in top],
    }


def peak_rss() -> dict[str, float]:
    """This process's peak RSS, MB: ``VmHWM`` (its own memory image's high-water mark) and
    ``ru_maxrss``. On Linux ``ru_maxrss`` also keeps the high-water mark of the image this
    process replaced at exec, i.e. of the parent that spawned it, so it is only this
    process's own figure when the parent was smaller; ``VmHWM`` always is. With it, where the
    memory is now (the peak is at the end of a run): see :func:`memory_parts`."""
    status = Path("/proc/self/status").read_text()
    hwm = next(int(x.split()[1]) for x in status.splitlines() if x.startswith("VmHWM:"))
    return {
        "max_rss_mb": hwm / 1024,
        "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        **memory_parts(status),
    }


_MALLINFO2_FIELDS = (
    *("arena", "ordblks", "smblks", "hblks", "hblkhd"),
    *("usmblks", "fsmblks", "uordblks", "fordblks", "keepcost"),
)
"""glibc's ``struct mallinfo2``, every field a ``size_t``."""


def memory_parts(status: str) -> dict[str, float]:
    """MB of Python's small objects (pymalloc's allocated blocks: code, functions, classes,
    dicts, strings), of the C heap in use (glibc's ``mallinfo2``: larger objects, and what
    extensions such as pydantic-core allocate), and of file-backed pages (``RssFile``)."""
    import ctypes
    import tempfile

    parts: dict[str, float] = {}
    kb = {line.split(":")[0]: int(line.split()[1]) for line in status.splitlines() if "kB" in line}
    parts["file_mb"] = kb.get("RssFile", 0) / 1024
    with tempfile.TemporaryFile() as out:  # _debugmallocstats writes to the C stderr
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        for line in out.read().decode(errors="replace").splitlines():
            if line.startswith("# bytes in allocated blocks"):
                parts["python_mb"] = int(line.split("=")[1].replace(",", "")) / 1024 / 1024
    try:
        info = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):  # not glibc
        return parts

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in _MALLINFO2_FIELDS]

    info.restype = MallInfo2
    got = info()
    parts["malloc_mb"] = (got.uordblks + got.hblkhd) / 1024 / 1024
    return parts


def compaction_check() -> dict[str, Any]:
    """bench/compaction.py's task through its own code: off and on, once each."""
    from bench import compaction
    from tests.fakes.scripted_llm import ScriptedLLM

    with ScriptedLLM() as llm:
        os.environ.update(GROQ_BASE_URL=llm.groq_base_url, GROQ_API_KEY="bench-key")
        llm.respond_with(compaction.respond)
        off = asyncio.run(compaction.run_once(False))
        on = asyncio.run(compaction.run_once(True))
    return {
        "off": {"prompt_tokens": off.prompt_tokens, "answer": off.answer},
        "on": {"prompt_tokens": on.prompt_tokens, "answer": on.answer},
    }


def main() -> int:
    spec = json.loads(sys.argv[1])
    if spec["mode"] == "memory" and spec["contender"] == "none":
        result: dict[str, Any] = {"runs": [{"ok": True, "why": ""}], **peak_rss()}
    elif spec["mode"] == "serve":
        asyncio.run(serve(spec))
        return 0
    elif spec["mode"] == "compaction-check":
        result = compaction_check()
    elif spec["mode"] == "profile":
        result = asyncio.run(profile(spec))
    else:
        result = asyncio.run(memory(spec))
    Path(spec["out"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
