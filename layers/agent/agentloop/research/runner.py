"""Run one research job to the end and store what it produced.

The same code runs in the SQS worker and in ``python -m agentloop.research``: the job
goes through :func:`agentloop.chat.handle_chat` without streaming, and its files go to
the results store under ``research/<date>/<job-id>/``. A run that ends in an error (a
provider refusing, a configuration problem, a bug) leaves ``failure.json`` with the
partial transcript; the caller decides whether that is retried.

Statuses: ``succeeded`` (the model finished), ``incomplete`` (a limit - iterations, token
budget, deadline - stopped the run; it answered from what it had, and the report says so at
the top), ``failed`` (no usable answer). A run that leaves a report removes the
``failure.json`` an earlier attempt left, so the folder never shows both for one outcome.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from agentloop.chat import AgentSetup, ChatContext, handle_chat
from agentloop.config import AgentConfig
from agentloop.events import Event
from agentloop.limits import Deadline, LambdaContextLike
from agentloop.llm.base import ChatModel
from agentloop.llm.registry import get_model
from agentloop.models import ChatRequest, UserMessage
from agentloop.research.jobs import JobMessage
from agentloop.research.report import (
    RunFacts,
    failure_json,
    render_markdown,
    report_json,
    transcript_json,
)
from agentloop.research.store import ResultStore
from agentloop.sandbox.backends import SANDBOX_TENANT_KEY
from agentloop.tools.registry import ToolRegistry

logger = logging.getLogger(__name__)

JobStatus = Literal["succeeded", "incomplete", "failed"]


@dataclass
class JobOutcome:
    """What became of one job; small and JSON-able (the idempotency record stores it)."""

    job_id: str
    execution_id: str
    status: JobStatus
    stop_reason: str
    tokens: int
    seconds: float
    location: str
    """report.md (or the first report format) when there is a report, else failure.json."""
    model: str | None = None
    iterations: int = 0
    error: str | None = None
    files: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobOutcome:
        return cls(**data)


class JobFailed(Exception):
    """Raised by the worker so SQS redelivers the message (failure.json is already written)."""

    def __init__(self, outcome: JobOutcome) -> None:
        super().__init__(f"job {outcome.job_id!r} failed: {outcome.error}")
        self.outcome = outcome


class JobIncomplete(Exception):
    """Raised by the worker so SQS delivers a limit-stopped job once more (its partial
    report is already written and stays if the retry does no better)."""

    def __init__(self, outcome: JobOutcome) -> None:
        super().__init__(
            f"job {outcome.job_id!r} stopped at its {outcome.stop_reason} limit; retrying"
        )
        self.outcome = outcome


@dataclass
class JobRunner:
    """Runs jobs with one deployment's settings, tools and results store."""

    store: ResultStore
    config: AgentConfig = field(default_factory=AgentConfig.from_env)
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    model_factory: Callable[[str], ChatModel] = get_model
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))

    async def run(
        self,
        message: JobMessage,
        *,
        deadline: Deadline | None = None,
        attempt: int | None = None,
    ) -> JobOutcome:
        """Run the job; never raises for the job's own failures (see ``JobOutcome.status``)."""
        job = message.job
        request = ChatRequest(
            messages=[UserMessage(content=job.prompt)],
            model=job.model,
            tools=job.tools,
            max_iterations=job.limits.max_iterations,
            token_budget=job.limits.token_budget,
        )
        context = ChatContext(
            setup=AgentSetup(
                config=self.config, tools=self.tools, model_factory=self.model_factory
            ),
            deadline=deadline or Deadline(),
            request_id=f"{job.id}:{message.execution_id}",
            # execute_code's sandbox tenant: each job its own (job ids fit Lambda's TenantId),
            # so code run for one job never shares an execution environment with another's.
            extras={SANDBOX_TENANT_KEY: f"research:{job.id}"},
        )
        events: list[Event] = []
        started_at, start = self.clock(), time.monotonic()
        crash: str | None = None
        try:
            async for event in handle_chat(request, context):
                events.append(event)
        except Exception as exc:  # a bug below: keep what was gathered, say what broke
            logger.exception("research job %s crashed", job.id)
            crash = f"internal error: {type(exc).__name__}: {exc}"
        facts = RunFacts.gather(
            message,
            events,
            started_at=started_at,
            finished_at=self.clock(),
            seconds=time.monotonic() - start,
            attempt=attempt,
        )
        error = crash or _run_error(facts)
        if error is not None:
            return self._fail(facts, error)
        try:
            return self._succeed(facts)
        except Exception as exc:  # the store refused: record it if it still can
            logger.exception("research job %s: storing the results failed", job.id)
            return self._fail(facts, f"storing the results failed: {type(exc).__name__}: {exc}")

    def _succeed(self, facts: RunFacts) -> JobOutcome:
        message, done = facts.message, facts.done
        assert done is not None
        output = message.job.output
        files: list[str] = []
        for fmt in output.formats:
            if fmt == "markdown":
                body = render_markdown(facts).encode()
                files.append(self._put(message, "report.md", body, "text/markdown; charset=utf-8"))
            else:
                files.append(self._put(message, "report.json", _json(report_json(facts)), _JSON))
        if output.include_transcript:
            files.append(
                self._put(message, "transcript.json", _json(transcript_json(facts)), _JSON)
            )
        self._remove_stale_failure(message)
        status: JobStatus = "incomplete" if facts.incomplete else "succeeded"
        return self._outcome(facts, status, files[0], files=files)

    def _remove_stale_failure(self, message: JobMessage) -> None:
        """An earlier attempt's failure.json would contradict the report just written."""
        try:
            self.store.delete(message.prefix + "failure.json")
        except Exception:  # the report is written: a stale record is not worth failing over
            logger.warning(
                "research job %s: could not remove an earlier failure.json",
                message.job.id,
                exc_info=True,
            )

    def _fail(self, facts: RunFacts, error: str) -> JobOutcome:
        location = self.store.location(facts.message.prefix + "failure.json")
        try:
            location = self._put(
                facts.message, "failure.json", _json(failure_json(facts, error)), _JSON
            )
        except Exception:
            logger.exception(
                "research job %s: the failure record could not be written", facts.message.job.id
            )
        return self._outcome(facts, "failed", location, error=error, files=[location])

    def _put(self, message: JobMessage, name: str, body: bytes, content_type: str) -> str:
        return self.store.put(message.prefix + name, body, content_type)

    @staticmethod
    def _outcome(
        facts: RunFacts,
        status: JobStatus,
        location: str,
        *,
        error: str | None = None,
        files: list[str],
    ) -> JobOutcome:
        done = facts.done
        return JobOutcome(
            job_id=facts.message.job.id,
            execution_id=facts.message.execution_id,
            status=status,
            stop_reason=done.stop_reason if done else "error",
            tokens=facts.tokens,
            seconds=round(facts.seconds, 3),
            location=location,
            model=facts.model or facts.message.job.model,
            iterations=done.iterations if done else 0,
            error=error,
            files=files,
        )


class JobTimeShare:
    """Splits one invocation's time between the jobs of a batch, which run one after another.

    Each job may use the time left divided by the jobs left, so a job that finishes early
    leaves its time to the next, and the last one never starts with nothing.
    """

    def __init__(
        self, context: LambdaContextLike | None, jobs: int, *, keep_s: float = 5.0
    ) -> None:
        self._context = context
        self._left = max(1, jobs)
        self._keep_s = keep_s

    def next_deadline(self) -> Deadline:
        if self._context is None:
            return Deadline()
        remaining = self._context.get_remaining_time_in_millis() / 1000 - self._keep_s
        share = max(0.0, remaining) / self._left
        self._left = max(1, self._left - 1)
        return Deadline.after(share)


def _run_error(facts: RunFacts) -> str | None:
    done = facts.done
    if done is None:
        return "the run ended without a done event"
    if done.stop_reason != "error":
        return None
    return "; ".join(facts.errors) or done.text or "the run stopped with an error"


_JSON = "application/json"


def _json(value: Any) -> bytes:
    return json.dumps(value, indent=2, ensure_ascii=False).encode() + b"\n"
