"""``python -m agentloop.research JOBS``: run research jobs locally, the worker's way.

Jobs run concurrently (at most ``--concurrency`` at once) through the same
:class:`~agentloop.research.runner.JobRunner` as the SQS worker, writing to
``AGENTLOOP_RESULTS_DIR`` (default ``./research-output``) or to S3 when
``AGENTLOOP_RESULTS_BUCKET`` is set. A progress bar goes to stderr, the summary table to
stdout. ``--invocation-timeout SECONDS`` gives each invocation that long, as Lambda's timeout
does: a job that needs longer suspends there, and its next invocation continues it from the
checkpoint (here at once, where the worker would queue a message). Running the same jobs with
the same ``--execution-id`` again continues unfinished ones from their checkpoints (after a
killed run) and reports finished ones as they ended.

Exit status: 0 when every job ran and left a report (``succeeded``, or ``incomplete``: a
limit stopped it and its report says so at the top); 1 when a job was rejected or failed
(a missing provider key, say - the table says which and why); 2 when the jobs file
cannot be used at all. Locally nothing is retried.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agentloop.config import AgentConfig, ConfigurationError
from agentloop.limits import Deadline
from agentloop.model_calls import MIN_TURN_S
from agentloop.research.admission import charging_from_env
from agentloop.research.jobs import (
    JobMessage,
    JobsInputError,
    JobSpec,
    ParsedJobs,
    Rejection,
    parse_jobs_text,
)
from agentloop.research.planner import plan_check, read_s3_text
from agentloop.research.report import dollars
from agentloop.research.runner import JobOutcome, JobRunner
from agentloop.research.store import LocalResultStore, ResultStore, store_from_env
from agentloop.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from agentloop.quota import Quota

Charging = tuple[str, "Quota | None"]
"""The owner of jobs that name none, and the per-principal limits (None: none)."""

DEFAULT_CONCURRENCY = 4


async def run_job(
    message: JobMessage, runner: JobRunner, *, invocation_timeout: float | None = None
) -> JobOutcome:
    """One job to its end: invocation after invocation while it suspends, each given
    ``invocation_timeout`` seconds (none: one invocation, bounded by the job's time limit)."""
    while True:
        deadline = Deadline.after(invocation_timeout) if invocation_timeout else None
        outcome = await runner.run(message, deadline=deadline)
        if outcome.status != "suspended" or outcome.next_segment is None:
            return outcome
        message = message.continued(outcome.next_segment)


async def run_jobs(
    messages: Sequence[JobMessage],
    runner: JobRunner,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    on_done: Callable[[JobOutcome], None] | None = None,
    invocation_timeout: float | None = None,
) -> list[JobOutcome]:
    """Run every job, at most ``concurrency`` at once; outcomes in the jobs' order."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(message: JobMessage) -> JobOutcome:
        async with gate:
            outcome = await run_job(message, runner, invocation_timeout=invocation_timeout)
        if on_done is not None:
            on_done(outcome)
        return outcome

    return list(await asyncio.gather(*(one(m) for m in messages)))


class ProgressBar:
    """A one-line bar redrawn in place on a terminal; one line per finished job otherwise."""

    def __init__(
        self,
        total: int,
        stream: TextIO,
        *,
        width: int = 24,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.stream = stream
        self.width = width
        self.clock = clock
        self.done = 0
        self.failed = 0
        self.incomplete = 0
        self.started = clock()
        self.live = bool(getattr(stream, "isatty", lambda: False)())

    def render(self) -> str:
        filled = self.width * self.done // self.total if self.total else self.width
        bar = "#" * filled + "." * (self.width - filled)
        failed = f", {self.failed} failed" if self.failed else ""
        incomplete = f", {self.incomplete} incomplete" if self.incomplete else ""
        elapsed = self.clock() - self.started
        return f"[{bar}] {self.done}/{self.total} jobs{failed}{incomplete}  {elapsed:.1f}s"

    def advance(self, outcome: JobOutcome) -> None:
        self.done += 1
        self.failed += outcome.status == "failed"
        self.incomplete += outcome.status == "incomplete"
        if self.live:
            self.refresh()
        else:
            self.stream.write(f"{self.render()}  {outcome.job_id}: {outcome.stop_reason}\n")
            self.stream.flush()

    def refresh(self) -> None:
        if self.live:
            self.stream.write("\r" + self.render() + "\033[K")
            self.stream.flush()

    def close(self) -> None:
        if self.live:
            self.refresh()
            self.stream.write("\n")
            self.stream.flush()


def summary_table(outcomes: Sequence[JobOutcome], rejections: Sequence[Rejection] = ()) -> str:
    """job, status, stop reason, tokens, seconds, invocations, cost, report (and the error,
    when there is one). The cost is ``-`` when it is not known (a model without a price).

    The status column tells an ``incomplete`` job (a limit stopped it; its report may be
    partial) from one that ``succeeded``, which the stop reason alone leaves to the reader;
    seconds and invocations count every invocation the job took.
    """
    rows = [*(_outcome_row(o) for o in outcomes), *_rejection_rows(rejections)]
    header = list(_COLUMNS)
    if any(row[-1] for row in rows):
        header.append("error")
    else:
        rows = [row[:-1] for row in rows]
    return _aligned(header, rows)


_COLUMNS = ("job", "status", "stop reason", "tokens", "seconds", "invocations", "cost", "report")
_NUMERIC_COLUMNS = {3, 4, 5, 6}


def _outcome_row(outcome: JobOutcome) -> list[str]:
    """A job that ran: its figures, and its error last (blank when it has none)."""
    return [
        outcome.job_id,
        outcome.status,
        outcome.stop_reason,
        f"{outcome.tokens:,}",
        f"{outcome.seconds:.1f}",
        str(outcome.invocations),
        dollars(outcome.cost_usd),
        outcome.location,
        outcome.error or "",
    ]


def _rejection_rows(rejections: Sequence[Rejection]) -> list[list[str]]:
    """One row per rejected job, all its problems in its error cell: it never ran, so it has
    no figures."""
    by_job: dict[str, list[Rejection]] = {}
    for rejection in rejections:
        by_job.setdefault(rejection.job, []).append(rejection)
    rows = []
    for job, problems in by_job.items():
        why = "; ".join(f"{r.field}: {r.message}" for r in problems)
        rows.append([job, "rejected", "-", "-", "-", "-", "-", "-", why])
    return rows


def _aligned(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Plain-text columns, each as wide as its widest cell, numbers right-aligned so their
    digits line up."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=False)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(width) if i in _NUMERIC_COLUMNS else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=False))
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(row) for row in rows)]) + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m agentloop.research",
        description="Run research jobs locally, concurrently, the way the SQS worker runs them.",
    )
    parser.add_argument("jobs", help="a jobs file: .json (array or {'jobs': [...]}), .jsonl, s3://")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"jobs run at once (default {DEFAULT_CONCURRENCY})",
    )
    parser.add_argument(
        "--output", type=Path, help="results folder (default: AGENTLOOP_RESULTS_DIR or S3)"
    )
    parser.add_argument(
        "--execution-id",
        help="recorded with each job (default: local-<time>); the same id again continues "
        "unfinished jobs from their checkpoints",
    )
    parser.add_argument(
        "--invocation-timeout",
        type=float,
        metavar="SECONDS",
        help="each invocation's time, as Lambda's timeout (default: none); a job that needs "
        "longer continues in further invocations from its checkpoint",
    )
    return parser


def main(
    argv: list[str] | None = None,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    tools: ToolRegistry | None = None,
) -> int:
    """The command; ``tools`` replaces the default registry (as the worker's ``from_env``)."""
    out = out or sys.stdout
    err = err or sys.stderr
    args = _parser().parse_args(argv)
    # The table reports each job's failure; log lines would only repeat it between bars.
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "ERROR"), stream=err)
    try:
        config, tools, parsed, charging = _prepare(args, tools)
    except _UsageError as exc:
        print(f"error: {exc}", file=err)
        return 2
    for rejection in parsed.rejections:
        print(f"rejected: {rejection}", file=err)
    outcomes = _run_locally(
        parsed.jobs, args, config=config, tools=tools, charging=charging, err=err
    )
    out.write("\n" + summary_table(outcomes, parsed.rejections))
    ok = all(o.status != "failed" for o in outcomes) and not parsed.rejections
    return 0 if ok else 1


class _UsageError(ValueError):
    """What stops the command before any job runs (an option, the configuration, the jobs
    file): exit status 2."""


def _prepare(
    args: argparse.Namespace, tools: ToolRegistry | None
) -> tuple[AgentConfig, ToolRegistry, ParsedJobs, Charging]:
    """The configuration, the tools and the jobs read and checked, each job against the
    worker's plan, so that a job the worker would refuse is rejected before any runs; and
    whom jobs are charged to under which limits (the worker's ``charging_from_env``)."""
    _check_options(args)
    if tools is None:
        tools = _default_tools()
    try:
        config = AgentConfig.from_env()
        charging = charging_from_env(os.environ)
        text = _read(args.jobs)
        parsed = parse_jobs_text(
            text, name=args.jobs, known_tools=tools.names, check=plan_check(config, tools)
        )
    except (OSError, JobsInputError, ConfigurationError) as exc:
        raise _UsageError(str(exc)) from None
    _check_invocation_timeout(args.invocation_timeout, config)
    return config, tools, parsed, charging


def _check_options(args: argparse.Namespace) -> None:
    """The options that need no configuration, checked before anything is loaded."""
    if args.concurrency < 1:
        raise _UsageError("--concurrency must be at least 1")
    if args.invocation_timeout is not None and not args.invocation_timeout > 0:
        raise _UsageError("--invocation-timeout must be a positive number of seconds")


def _default_tools() -> ToolRegistry:
    """The deployment's tools, imported only when the caller passes none (tests pass their own)."""
    from agentloop.defaults import default_registry

    return default_registry()


def _check_invocation_timeout(timeout: float | None, config: AgentConfig) -> None:
    """An invocation so short that no turn could start would suspend forever."""
    least = config.deadline_reserve_s + MIN_TURN_S
    if timeout is not None and timeout <= least:
        raise _UsageError(
            f"--invocation-timeout must be more than {least:g} s: no turn would start "
            f"(each needs {MIN_TURN_S:g} s beyond AGENTLOOP_DEADLINE_RESERVE_S, "
            f"{config.deadline_reserve_s:g} s)"
        )


def _run_locally(
    jobs: Sequence[JobSpec],
    args: argparse.Namespace,
    *,
    config: AgentConfig,
    tools: ToolRegistry,
    charging: Charging,
    err: TextIO,
) -> list[JobOutcome]:
    """The jobs as one local execution (one id, one scheduled time), through the worker's
    runner, with the progress bar on ``err``."""
    now = datetime.now(UTC)
    execution_id = args.execution_id or f"local-{now.strftime('%Y%m%dT%H%M%SZ')}"
    messages = [JobMessage(job=job, execution_id=execution_id, scheduled_time=now) for job in jobs]
    store: ResultStore = LocalResultStore(args.output) if args.output else store_from_env()
    owner, quota = charging
    runner = JobRunner(store=store, config=config, tools=tools, quota=quota, owner=owner)
    bar = ProgressBar(len(messages), err)
    try:
        return asyncio.run(
            _run_with_bar(messages, runner, args.concurrency, bar, args.invocation_timeout)
        )
    finally:
        if quota is not None:
            asyncio.run(quota.store.close())


async def _run_with_bar(
    messages: Sequence[JobMessage],
    runner: JobRunner,
    concurrency: int,
    bar: ProgressBar,
    invocation_timeout: float | None,
) -> list[JobOutcome]:
    async def tick() -> None:
        while True:
            bar.refresh()
            await asyncio.sleep(0.5)

    ticker = asyncio.create_task(tick()) if bar.live else None
    try:
        return await run_jobs(
            messages,
            runner,
            concurrency=concurrency,
            on_done=bar.advance,
            invocation_timeout=invocation_timeout,
        )
    finally:
        if ticker is not None:
            ticker.cancel()
        bar.close()


def _read(source: str) -> str:
    if source.startswith("s3://"):
        from agentloop.research.jobs import parse_s3_uri

        return read_s3_text(*parse_s3_uri(source))
    return Path(source).read_text(encoding="utf-8-sig")
