"""Throughput of local research runs: 50 jobs, 200 ms of model latency per call.

The jobs go through the same code as ``make research`` (``agentloop.research.cli.run_jobs``
and ``JobRunner``, results written to a temporary folder) at the default concurrency,
against the scripted model server, which waits 200 ms before each answer. Two shapes of
job: one model call that answers at once, and a tool call (a local ``echo``) followed by
the answer, so two model calls. A warm-up run first imports the SDK. What is measured is
the runner's overhead and its concurrency, not a provider: real models take seconds per call.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentloop.config import AgentConfig  # noqa: E402
from agentloop.research.cli import DEFAULT_CONCURRENCY, run_jobs  # noqa: E402
from agentloop.research.jobs import JobMessage, JobSpec, utc_now  # noqa: E402
from agentloop.research.runner import JobRunner  # noqa: E402
from agentloop.research.store import LocalResultStore  # noqa: E402
from agentloop.tools.registry import ToolRegistry  # noqa: E402
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call  # noqa: E402
from tests.sample_tools import echo  # noqa: E402

JOBS = 50
LATENCY_S = 0.2


@dataclass
class Result:
    shape: str
    calls: int
    wall_s: float
    job_seconds: list[float]
    failed: int


def respond(request: RecordedRequest) -> Reply:
    """Answer at once, or call ``echo`` first when the prompt asks for a tool."""
    last = request.messages[-1]
    if last["role"] == "user" and "with a tool" in last["content"]:
        return Reply(tool_calls=[call("echo", text="checked")], first_delay=LATENCY_S)
    return Reply(text="The answer, with its sources.", first_delay=LATENCY_S)


async def run(shape: str, prompt: str, calls: int, folder: Path, jobs: int = JOBS) -> Result:
    runner = JobRunner(
        store=LocalResultStore(folder),
        config=AgentConfig(deadline_reserve_s=0),
        tools=ToolRegistry([echo]),
    )
    now = utc_now()
    tools = ["echo"] if calls > 1 else []
    messages = [
        JobMessage(
            job=JobSpec(id=f"job-{i:02d}", prompt=prompt, model="groq:bench", tools=tools),
            execution_id=f"bench-{shape}",
            scheduled_time=now,
        )
        for i in range(jobs)
    ]
    start = time.perf_counter()
    outcomes = await run_jobs(messages, runner, concurrency=DEFAULT_CONCURRENCY)
    wall = time.perf_counter() - start
    failed = sum(o.status != "succeeded" for o in outcomes)
    return Result(shape, calls, wall, [o.seconds for o in outcomes], failed)


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def main() -> int:
    with ScriptedLLM() as llm, tempfile.TemporaryDirectory() as tmp:
        os.environ.update(GROQ_BASE_URL=llm.groq_base_url, GROQ_API_KEY="bench-key")
        llm.respond_with(respond)
        # Warm-up, not measured: the first run imports the provider SDK (about half a second).
        asyncio.run(run("warm-up", "Answer directly.", 1, Path(tmp) / "w", DEFAULT_CONCURRENCY))
        results = [
            asyncio.run(run("answer", "Answer directly.", 1, Path(tmp) / "a")),
            asyncio.run(run("tool", "Answer with a tool.", 2, Path(tmp) / "b")),
        ]
    print(f"\nResearch jobs run locally: {JOBS} jobs, {LATENCY_S * 1000:.0f} ms per model call")
    print(f"(make research's runner at its default concurrency, {DEFAULT_CONCURRENCY})\n")
    header = ["job shape", "jobs", "concurrency", "wall s", "jobs/s", "median job s", "p95 job s"]
    print(f"{header[0]:<24}" + "".join(f"{h:>14}" for h in header[1:]))
    for r in results:
        label = "1 call: answer" if r.calls == 1 else "2 calls: tool + answer"
        cells = [
            f"{JOBS}",
            f"{DEFAULT_CONCURRENCY}",
            f"{r.wall_s:.2f}",
            f"{JOBS / r.wall_s:.1f}",
            f"{statistics.median(r.job_seconds):.3f}",
            f"{p95(r.job_seconds):.3f}",
        ]
        print(f"{label:<24}" + "".join(f"{c:>14}" for c in cells))
    floors = ", ".join(
        f"{-(-JOBS // DEFAULT_CONCURRENCY) * LATENCY_S * r.calls:.2f} s" for r in results
    )
    print(f"\nlower bound (ceil(jobs / concurrency) x calls x latency): {floors}")
    return 0 if not any(r.failed for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
