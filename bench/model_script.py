"""The scripted model's side of the tasks in ``bench/tasks.py``.

The model only gives the final answer after it has *seen* the right tool results: it reads
them back from the conversation it was sent, wherever a framework put them (``tool``
messages, or user messages as smolagents does), so a run that ends with the expected text
ran the tools and fed their results back correctly. Anything else gets an answer starting
``WRONG:`` that names what was missing, and the run counts as failed.

Frameworks that end a run with a ``final_answer`` tool (smolagents' ToolCallingAgent) are
sent the answer as that tool call; everyone else gets plain text.
"""

from __future__ import annotations

import json
import re

from bench import tasks
from tests.fakes.scripted_llm import RecordedRequest, Reply, call


def _finish(request: RecordedRequest, text: str) -> Reply:
    if "final_answer" in request.tool_names:
        return Reply(tool_calls=[call("final_answer", answer=text)])
    return Reply(text=text)


def _wrong(request: RecordedRequest, why: str) -> Reply:
    return _finish(request, f"WRONG: {why}")


def respond(request: RecordedRequest) -> Reply:
    blob = json.dumps(request.messages)
    match = tasks.TASK_RE.search(blob)
    if match is None:
        return Reply(text="WRONG: no [bench task=...] in the conversation")
    task = match.group(1)
    if task == "loop":
        return _loop(request, blob)
    if task == "parallel":
        return _parallel(request, blob)
    if task == "docs":
        return _docs(request, blob)
    if task == "stream":
        text = tasks.STREAM_TEXT
        delay = tasks.STREAM_CHUNK_DELAY_S
        if "final_answer" in request.tool_names:  # the text streams first, then the tool call
            return Reply(
                text=text, tool_calls=[call("final_answer", answer=text)], chunk_delay=delay
            )
        return Reply(text=text, chunk_delay=delay)
    return _finish(request, "pong")


def _loop(request: RecordedRequest, blob: str) -> Reply:
    seen: dict[str, int] = {}
    for key, value in re.findall(r"RESULT\((k\d+)=(\d+)\)", blob):
        seen.setdefault(key, int(value))
    if list(seen) != [f"k{i}" for i in range(len(seen))]:
        return _wrong(request, f"results for {list(seen)}")
    bad = [k for k, v in seen.items() if v != tasks.lookup_value(k)]
    if bad:
        return _wrong(request, f"wrong values for {bad}")
    if len(seen) < tasks.LOOP_TURNS:
        return Reply(tool_calls=[call("lookup", key=f"k{len(seen)}")])
    return _finish(request, tasks.expected_answer("loop"))


def _parallel(request: RecordedRequest, blob: str) -> Reply:
    seen = set(re.findall(r"WAITED\((\w)\)", blob))
    if not seen:
        return Reply(tool_calls=[call("wait", label=label) for label in tasks.PARALLEL_LABELS])
    if seen != set(tasks.PARALLEL_LABELS):
        return _wrong(request, f"waited for {sorted(seen)}")
    return _finish(request, tasks.expected_answer("parallel"))


def _docs(request: RecordedRequest, blob: str) -> Reply:
    turns, _ = tasks.doc_shape()
    seen = sorted({int(n) for n in re.findall(r"DOC#(\d+):", blob)})
    if seen != list(range(len(seen))):
        return _wrong(request, f"documents {seen}")
    if seen and tasks.fetch_doc(seen[-1]) not in blob:
        return _wrong(request, f"document {seen[-1]} did not arrive whole")
    if len(seen) < turns:
        return Reply(tool_calls=[call("fetch_doc", n=len(seen))])
    return _finish(request, tasks.expected_answer("docs"))
