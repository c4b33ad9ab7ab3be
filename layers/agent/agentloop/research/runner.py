"""Run one invocation of a research job: start it, or continue it from its checkpoint.

The same code runs in the SQS worker and in ``python -m agentloop.research``: the job
goes through :func:`agentloop.chat.handle_chat` without streaming, and its files go to
the results store under ``research/<date>/<job-id>/``. A run that ends in an error (a
provider refusing, a configuration problem, a bug) leaves ``failure.json`` with the
partial transcript; the caller decides whether that is retried.

A job may take several invocations (``checkpoint``): while its limits allow another, the run
is asked to suspend at the invocation's deadline rather than answer, its state is written
to the checkpoint, and the outcome is ``suspended`` with the segment that continues it (the
worker queues that message, the CLI runs it next). The last invocation the job's limits allow
answers at its deadline instead. Between, a checkpoint is written after every completed round.

Statuses: ``succeeded`` (the model finished), ``incomplete`` (a limit - iterations, token
budget, time - stopped the run; it answered from what it had, and the report says so at the
top), ``failed`` (no usable answer), ``suspended`` (continues in another invocation) and
``skipped`` (a stale delivery: a later invocation holds the job; nothing ran). A run that
leaves a report removes the ``failure.json`` an earlier attempt left, so the folder never
shows both for one outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from agentloop.chat import AgentSetup, ChatContext, handle_chat
from agentloop.config import AgentConfig
from agentloop.events import Done, Event, event_adapter
from agentloop.limits import Deadline, LambdaContextLike
from agentloop.llm.base import ChatModel
from agentloop.llm.registry import get_model
from agentloop.logs import PRINCIPAL_ID
from agentloop.models import ChatRequest, RunProgress
from agentloop.plan import RunPlan
from agentloop.principal import PRINCIPAL_KEY
from agentloop.research.admission import NotAdmitted, admit
from agentloop.research.checkpoint import (
    Checkpoints,
    JobState,
    RoundRecorder,
    StaleCheckpoint,
    checkpoint_key,
    tool_call_counts,
    wire_events,
)
from agentloop.research.jobs import (
    DEFAULT_MAX_INVOCATIONS,
    DEFAULT_MAX_SECONDS,
    JobMessage,
    job_request,
)
from agentloop.research.owner import DEFAULT_OWNER, owner_principal
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

if TYPE_CHECKING:
    from agentloop.quota import Quota
    from agentloop.quota.runs import Held

logger = logging.getLogger(__name__)

JobStatus = Literal["succeeded", "incomplete", "failed", "suspended", "skipped"]


@dataclass
class JobOutcome:
    """What became of one invocation of a job; small and JSON-able (the idempotency record
    stores it). A finished job's outcome counts every invocation it took."""

    job_id: str
    execution_id: str
    status: JobStatus
    stop_reason: str
    tokens: int
    seconds: float
    location: str
    """report.md (or the first report format) when there is a report, else failure.json
    (the checkpoint while the job goes on)."""
    model: str | None = None
    iterations: int = 0
    error: str | None = None
    files: list[str] = field(default_factory=list)
    invocations: int = 1
    segment: int = 0
    """The invocation of the job this outcome is of (the message's segment)."""
    next_segment: int | None = None
    """``suspended``: the invocation that continues the job."""
    cost_usd: float | None = None
    """Dollars the job spent (every invocation); None: not known (no price, or nothing ran)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobOutcome:
        return cls(**data)


class JobFailed(Exception):
    """Raised by the worker so SQS redelivers the message (failure.json is already written);
    the redelivery continues from the job's last checkpoint."""

    def __init__(self, outcome: JobOutcome) -> None:
        super().__init__(f"job {outcome.job_id!r} failed: {outcome.error}")
        self.outcome = outcome


@dataclass
class JobRunner:
    """Runs jobs with one deployment's settings, tools and results store."""

    store: ResultStore
    config: AgentConfig = field(default_factory=AgentConfig.from_env)
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    model_factory: Callable[[str], ChatModel] = get_model
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    quota: Quota | None = None
    """Per-principal limits (``AGENTLOOP_LIMITS``): each invocation reserves against its job's
    owner's allowance and settles when its run ends; None: no limits."""
    owner: str = DEFAULT_OWNER
    """The owner of jobs whose spec names none (``AGENTLOOP_RESEARCH_OWNER``)."""

    def __post_init__(self) -> None:
        self.checkpoints = Checkpoints(self.store)
        self._setup = AgentSetup(
            config=self.config, tools=self.tools, model_factory=self.model_factory
        )

    async def run(
        self,
        message: JobMessage,
        *,
        deadline: Deadline | None = None,
        attempt: int | None = None,
    ) -> JobOutcome:
        """Run the message's invocation of the job; never raises for the job's own failures
        (see ``JobOutcome.status``)."""
        started_at, start = self.clock(), time.monotonic()
        try:
            state, version = await asyncio.to_thread(self.checkpoints.load, message)
        except Exception as exc:  # a store that cannot be read: nothing can run safely
            logger.exception("research job %s: reading its checkpoint failed", message.job.id)
            facts = RunFacts.gather(
                message, [], started_at=started_at, finished_at=self.clock(), seconds=0.0
            )
            return self._fail(facts, f"reading the checkpoint failed: {type(exc).__name__}: {exc}")
        ruled = self._ruling(message, state)
        if ruled is not None:
            return ruled
        if state is None:
            state = JobState.begin(message, started_at)
        if state.owner is None:  # fixed by the job's first invocation: later ones keep it
            state.owner = message.job.owner or self.owner
        invocation = _Invocation(self, message, state, version, attempt, start)
        return await invocation.run(deadline)

    def _ruling(self, message: JobMessage, state: JobState | None) -> JobOutcome | None:
        """What a delivery that must not run gets: a finished job's outcome, the hand-off to
        re-send, a stale delivery skipped, or a continuation whose checkpoint is gone."""
        job = message.job
        if state is None:
            if message.segment == 0:
                return None
            return self._lost(message)
        if state.status == "finished" and state.outcome is not None:
            logger.info("research job %s: already finished; delivery dropped", job.id)
            return JobOutcome.from_dict(state.outcome)
        if state.segment == message.segment:
            return None
        if state.segment == message.segment + 1:
            # This invocation suspended the job; its message for the next one may not have
            # been sent (a sender that died in between): the caller sends it (again).
            logger.info("research job %s: re-sending its hand-off to %d", job.id, state.segment)
            return self._state_outcome(message, state, "suspended", next_segment=state.segment)
        logger.warning(
            "research job %s: a stale delivery (segment %d; the job is at %d) is dropped",
            job.id,
            message.segment,
            state.segment,
        )
        return self._state_outcome(message, state, "skipped")

    def _lost(self, message: JobMessage) -> JobOutcome:
        facts = RunFacts.gather(
            message, [], started_at=self.clock(), finished_at=self.clock(), seconds=0.0
        )
        return self._fail(
            facts,
            f"the checkpoint of this job is gone, so invocation {message.segment} cannot "
            "continue it (expired or deleted)",
        )

    def _state_outcome(
        self,
        message: JobMessage,
        state: JobState,
        status: JobStatus,
        *,
        next_segment: int | None = None,
    ) -> JobOutcome:
        """An outcome told from the checkpoint alone (nothing ran in this invocation)."""
        return JobOutcome(
            job_id=message.job.id,
            execution_id=message.execution_id,
            status=status,
            stop_reason="suspended" if status == "suspended" else "-",
            tokens=sum(u.total_tokens for u in state.usage_by_depth),
            seconds=round(state.seconds, 3),
            location=self.store.location(checkpoint_key(message)),
            iterations=state.iterations,
            invocations=state.invocations,
            segment=message.segment,
            next_segment=next_segment,
        )

    def finish(self, facts: RunFacts) -> JobOutcome:
        """Write the reports of a run that answered; its outcome."""
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
        next_segment: int | None = None,
    ) -> JobOutcome:
        done = facts.done
        return JobOutcome(
            job_id=facts.message.job.id,
            execution_id=facts.message.execution_id,
            status=status,
            stop_reason=done.stop_reason if done else "error",
            tokens=facts.tokens,
            cost_usd=facts.done.cost_usd if facts.done else None,
            seconds=round(facts.seconds, 3),
            location=location,
            model=facts.model or facts.message.job.model,
            iterations=done.iterations if done else 0,
            error=error,
            files=files,
            invocations=facts.invocations,
            segment=facts.message.segment,
            next_segment=next_segment,
        )


class _Invocation:
    """One invocation's work on a job: the run, a checkpoint per round, the ending."""

    def __init__(
        self,
        runner: JobRunner,
        message: JobMessage,
        state: JobState,
        version: str | None,
        attempt: int | None,
        start: float,
    ) -> None:
        self.runner = runner
        self.message = message
        self.state = state
        self.version = version
        self.attempt = attempt
        self.start = start
        self.earlier_wire = list(state.events)
        self.earlier: list[Event] = [event_adapter().validate_python(e) for e in state.events]
        self.events: list[Event] = []
        self.base_seconds = state.seconds
        self.base_messages = list(state.messages)
        self.base_tool_calls = dict(state.tool_calls)
        self.plan: RunPlan | None = None
        state.invocations += 1  # this one, counted in every write it makes

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    async def run(self, deadline: Deadline | None) -> JobOutcome:
        """The job from where its checkpoint left it to this invocation's outcome; a delivery
        that takes the job over meanwhile makes this one ``skipped``."""
        job = self.message.job
        run_deadline, last = self._plan(deadline)
        request = job_request(job, self.state.messages)
        context = self._context(run_deadline, last)
        recorder = RoundRecorder(self.state.iterations, self.state.usage_by_depth)
        try:
            self.plan, held = await admit(self.runner, self._owner, request, context)
        except NotAdmitted as exc:
            return self.runner._fail(self._facts(), str(exc))
        crash: str | None = None
        try:
            await self._stream(request, context, recorder, held)
        except StaleCheckpoint as exc:
            logger.warning("research job %s: another delivery took it over: %s", job.id, exc)
            return self.runner._state_outcome(self.message, self.state, "skipped")
        except Exception as exc:  # a bug below: keep what was gathered, say what broke
            logger.exception("research job %s crashed", job.id)
            crash = f"internal error: {type(exc).__name__}: {exc}"
        return await self._end(recorder, crash)

    @property
    def _owner(self) -> str:
        return self.state.owner or self.message.job.owner or self.runner.owner

    def _context(self, deadline: Deadline, last: bool) -> ChatContext:
        """The run's context: the progress of earlier invocations carried over (tool call
        counts too), its owner, and told to suspend at the deadline unless this invocation is
        the job's last."""
        job, state = self.message.job, self.state
        progress = None
        if state.iterations or state.usage_by_depth or state.tool_calls:
            progress = RunProgress(
                iterations=state.iterations,
                usage_by_depth=list(state.usage_by_depth),
                tool_calls=dict(state.tool_calls),
            )
        who = owner_principal(self._owner)
        PRINCIPAL_ID.set(who.id)  # on the job's log lines, as on a chat request's
        return ChatContext(
            setup=self.runner._setup,
            deadline=deadline,
            request_id=f"{job.id}:{self.message.execution_id}",
            # execute_code's sandbox tenant: each job its own (job ids fit Lambda's TenantId),
            # so code run for one job never shares an execution environment with another's.
            extras={SANDBOX_TENANT_KEY: f"research:{job.id}", PRINCIPAL_KEY: who},
            progress=progress,
            suspend_at_deadline=not last,
            can_ask=False,  # nobody can approve a batch job's call: such tools are not offered
        )

    async def _stream(
        self,
        request: ChatRequest,
        context: ChatContext,
        recorder: RoundRecorder,
        held: Held | None,
    ) -> None:
        """Run the chat, keeping its events and writing a checkpoint after each round; under
        limits the owner's reservation is settled at the run's ``done`` (``quota.runs``)."""
        stream = handle_chat(request, context, self.plan)
        if held is not None:
            from agentloop.quota.runs import settling

            stream = settling(stream, held)
        try:
            async for event in stream:
                self.events.append(event)
                if recorder.feed(event):
                    await self._save_round(recorder)
        finally:  # leaving early (a stale checkpoint) cancels the run and waits for it
            with contextlib.suppress(Exception):
                await stream.aclose()  # type: ignore[attr-defined]

    async def _end(self, recorder: RoundRecorder, crash: str | None) -> JobOutcome:
        """Record how the run ended: a failure keeps its progress for the retry, a suspension
        hands the job on, an answer writes the reports and marks the job finished."""
        facts = self._facts()
        error = crash or _run_error(facts)
        if error is not None:
            await self._save_progress(recorder)
            return self.runner._fail(facts, error)
        done = facts.done
        assert done is not None
        if done.stop_reason == "suspended":
            return await self._suspend(facts, done)
        try:
            outcome = self.runner.finish(facts)
        except Exception as exc:  # the store refused: record it if it still can
            logger.exception("research job %s: storing the results failed", self.message.job.id)
            return self.runner._fail(
                facts, f"storing the results failed: {type(exc).__name__}: {exc}"
            )
        await self._save_finished(outcome)
        return outcome

    def _plan(self, deadline: Deadline | None) -> tuple[Deadline, bool]:
        """This invocation's deadline, and whether it is the job's last: the last answers at
        its deadline (the job's time limit, or its own end), the others suspend there."""
        limits = self.message.job.limits
        max_seconds = limits.max_seconds or DEFAULT_MAX_SECONDS
        max_invocations = limits.max_invocations or DEFAULT_MAX_INVOCATIONS
        job_left = max(0.0, max_seconds - self.state.seconds)
        here = deadline.remaining() if deadline is not None else math.inf
        last = self.state.invocations >= max_invocations or job_left <= here
        if not last:
            assert deadline is not None
            return deadline, False
        return Deadline.after(min(job_left, here)), True

    def _facts(self) -> RunFacts:
        return RunFacts.gather(
            self.message,
            [*self.earlier, *self.events],
            started_at=self.state.started_at,
            finished_at=self.runner.clock(),
            seconds=self.base_seconds + self.elapsed,
            attempt=self.attempt,
            invocations=self.state.invocations,
        )

    async def _write(self) -> None:
        self.version = await asyncio.to_thread(
            self.runner.checkpoints.save, self.message, self.state, self.version
        )

    async def _save_round(self, recorder: RoundRecorder) -> None:
        """After a completed round: the history so far, before the turn that just started."""
        state = self.state
        state.messages = [*self.base_messages, *recorder.messages]
        state.iterations = recorder.iterations
        state.usage_by_depth = list(recorder.usage_by_depth)
        state.events = [*self.earlier_wire, *wire_events(self.events[:-1])]
        state.tool_calls = self._tool_calls()
        state.seconds = self.base_seconds + self.elapsed
        await self._write()

    async def _save_progress(self, recorder: RoundRecorder) -> None:
        """A failed invocation keeps its completed rounds and time (best effort): the retry
        continues from there."""
        try:
            recorder.flush()
            state = self.state
            state.messages = [*self.base_messages, *recorder.messages]
            state.iterations = recorder.iterations
            state.usage_by_depth = list(recorder.usage_by_depth)
            state.events = [*self.earlier_wire, *wire_events(self.events)]
            state.tool_calls = self._tool_calls()
            state.seconds = self.base_seconds + self.elapsed
            await self._write()
        except Exception:
            logger.warning(
                "research job %s: could not record its progress", self.message.job.id, exc_info=True
            )

    async def _suspend(self, facts: RunFacts, done: Done) -> JobOutcome:
        """Hand the job to its next invocation: the checkpoint first, then the caller's message
        (a hand-off written but not sent is re-sent by this segment's redelivery)."""
        state = self.state
        state.messages = [*self.base_messages, *done.messages]
        state.iterations = done.iterations
        state.usage_by_depth = list(done.usage_by_depth)
        state.events = [*self.earlier_wire, *wire_events(self.events)]
        state.tool_calls = self._tool_calls()
        state.seconds = self.base_seconds + self.elapsed
        state.segment = self.message.segment + 1
        try:
            await self._write()
        except StaleCheckpoint as exc:
            logger.warning("research job %s: another delivery took it over: %s", state.job_id, exc)
            return self.runner._state_outcome(self.message, state, "skipped")
        location = self.runner.store.location(checkpoint_key(self.message))
        return self.runner._outcome(
            facts, "suspended", location, files=[], next_segment=state.segment
        )

    def _tool_calls(self) -> dict[str, int]:
        """The limited tools' calls so far, for the next invocation to go on from."""
        limited = self.plan.tool_limits if self.plan is not None else {}
        return tool_call_counts(self.events, limited, self.base_tool_calls)

    async def _save_finished(self, outcome: JobOutcome) -> None:
        """A finished job's checkpoint keeps only its outcome: later deliveries get that."""
        finished = JobState(
            job_id=self.state.job_id,
            execution_id=self.state.execution_id,
            seq=self.state.seq,
            segment=self.state.segment,
            status="finished",
            iterations=outcome.iterations,
            usage_by_depth=self.state.usage_by_depth,
            started_at=self.state.started_at,
            seconds=outcome.seconds,
            invocations=self.state.invocations,
            outcome=outcome.as_dict(),
            owner=self.state.owner,
        )
        try:
            self.version = await asyncio.to_thread(
                self.runner.checkpoints.save, self.message, finished, self.version
            )
        except Exception:  # the reports are written; a redelivery would only redo the end
            logger.warning(
                "research job %s: could not mark its checkpoint finished",
                self.message.job.id,
                exc_info=True,
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
