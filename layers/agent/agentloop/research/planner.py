"""The scheduled planner: validate the schedule's jobs and queue one SQS message per job.

Rejected jobs are reported (returned and logged) and do not stop the valid ones; a job is
rejected too when the worker's plan of it would refuse it (``plan_check``). Every
message carries the scheduler's execution id, so the worker's idempotency key (job id +
execution id) tells a redelivery or a re-sent batch from the next scheduled run.
"""

from __future__ import annotations

import json
import logging
import sys
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TextIO

from pydantic import ValidationError

from agentloop.config import AgentConfig
from agentloop.plan import PlanError, plan_run
from agentloop.research.jobs import (
    JobCheck,
    JobMessage,
    JobsInputError,
    JobSpec,
    ParsedJobs,
    Rejection,
    ScheduleInput,
    job_request,
    parse_jobs,
    parse_jobs_text,
    parse_s3_uri,
    utc_now,
)
from agentloop.tools.registry import ToolRegistry

logger = logging.getLogger(__name__)

QUEUE_URL_ENV = "AGENTLOOP_RESEARCH_QUEUE_URL"
SQS_BATCH_ENTRIES = 10
SQS_BATCH_BYTES = 200_000  # under SQS's 256 KiB per SendMessageBatch, with room for overhead
MAX_JOBS_FILE_BYTES = 10_000_000


class MessageSender(Protocol):
    def send(self, messages: Sequence[JobMessage]) -> None: ...


class SendError(RuntimeError):
    """Some messages could not be queued; the planner fails so Lambda retries it whole."""


class SqsSender:
    """``SendMessageBatch`` in chunks of at most 10 entries (and 200 KB)."""

    def __init__(self, queue_url: str, client: Any = None) -> None:
        self.queue_url = queue_url
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3  # type: ignore[import-untyped, unused-ignore]

            self._client = boto3.client("sqs")
        return self._client

    def send(self, messages: Sequence[JobMessage]) -> None:
        failed: list[str] = []
        for chunk in _chunks(messages):
            entries = [{"Id": m.job.id, "MessageBody": m.model_dump_json()} for m in chunk]
            response = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            retry = [e for e in entries if e["Id"] in {f["Id"] for f in response.get("Failed", [])}]
            if retry:  # throttling or an internal error: try those once more
                again = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=retry)
                failed += [f"{f['Id']} ({f.get('Code')})" for f in again.get("Failed", [])]
        if failed:
            raise SendError(f"could not queue {len(failed)} job(s): {', '.join(failed)}")


class PrintSender:
    """No queue configured (``make invoke``): print the messages that would have been sent."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream

    def send(self, messages: Sequence[JobMessage]) -> None:
        out = self.stream or sys.stdout
        print(
            f"# {QUEUE_URL_ENV} is not set: these {len(messages)} message(s) would be sent",
            file=out,
        )
        for message in messages:
            print(message.model_dump_json(), file=out)


def sender_from_env(environ: Mapping[str, str]) -> MessageSender:
    queue_url = environ.get(QUEUE_URL_ENV, "").strip()
    return SqsSender(queue_url) if queue_url else PrintSender()


@dataclass
class PlanSummary:
    execution_id: str
    scheduled_time: datetime
    source: str
    queued: list[str] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    dry_run: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "execution_id": self.execution_id,
            "scheduled_time": self.scheduled_time.isoformat(),
            "source": self.source,
            "queued": len(self.queued),
            "jobs": self.queued,
            "rejected": [r.as_dict() for r in self.rejected],
            "dry_run": self.dry_run,
        }


_JOB_FIELDS = {"max_cost_usd": "limits.max_cost_usd"}
"""A request field's name in a job spec, where the two differ."""


def plan_check(config: AgentConfig, tools: ToolRegistry) -> JobCheck:
    """Plan each job as the worker will plan its run (``plan_run``, nobody to ask): a model not
    allowed here, a tool that needs a person's approval, a dollar limit on a model with no
    known price is a rejection at planning time instead of a job failed (and retried) later."""

    def check(job: JobSpec) -> tuple[str, str] | None:
        try:
            plan_run(job_request(job), config, tools, can_ask=False)
        except PlanError as exc:
            return _JOB_FIELDS.get(exc.param, exc.param), exc.message.removeprefix(f"{exc.param}: ")
        return None

    return check


S3Reader = Callable[[str, str], str]
"""``(bucket, key) -> text`` of a jobs file."""


def read_s3_text(bucket: str, key: str, client: Any = None) -> str:
    """A jobs file from S3, as UTF-8 text (at most 10 MB)."""
    if client is None:
        import boto3

        client = boto3.client("s3")
    response = client.get_object(Bucket=bucket, Key=key)
    if int(response.get("ContentLength", 0)) > MAX_JOBS_FILE_BYTES:
        raise JobsInputError(f"s3://{bucket}/{key} is over {MAX_JOBS_FILE_BYTES:,} bytes")
    body: bytes = response["Body"].read()
    try:
        return body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise JobsInputError(f"s3://{bucket}/{key} is not UTF-8 text") from None


def load_jobs(
    schedule: ScheduleInput,
    *,
    known_tools: Collection[str] | None = None,
    check: JobCheck | None = None,
    read_s3: S3Reader = read_s3_text,
) -> tuple[ParsedJobs, str]:
    """The schedule's jobs, validated, and where they came from."""
    if schedule.jobs is not None:
        return parse_jobs(schedule.jobs, known_tools=known_tools, check=check), "inline"
    assert schedule.jobs_s3 is not None
    bucket, key = parse_s3_uri(schedule.jobs_s3)
    text = read_s3(bucket, key)
    parsed = parse_jobs_text(text, name=key, known_tools=known_tools, check=check)
    return parsed, schedule.jobs_s3


def plan(
    event: Mapping[str, Any],
    *,
    sender: MessageSender,
    known_tools: Collection[str] | None = None,
    check: JobCheck | None = None,
    read_s3: S3Reader = read_s3_text,
    fallback_execution_id: str | None = None,
    now: Callable[[], datetime] = utc_now,
) -> PlanSummary:
    """Validate the schedule's input and queue its valid jobs; return what was done.

    Without an execution id (an input that did not come through the scheduler), the
    fallback is used - on Lambda the request id, which Lambda's own retries keep.
    """
    schedule = _schedule_input(event)
    execution_id = schedule.execution_id or fallback_execution_id or f"manual-{uuid.uuid4()}"
    scheduled_time = schedule.scheduled_time or now()
    parsed, source = load_jobs(schedule, known_tools=known_tools, check=check, read_s3=read_s3)
    messages = _job_messages(parsed.jobs, schedule, execution_id, scheduled_time)
    for rejection in parsed.rejections:
        logger.warning("research job rejected: %s", rejection)
    if messages:
        sender.send(messages)
    summary = PlanSummary(
        execution_id=execution_id,
        scheduled_time=scheduled_time,
        source=source,
        queued=[m.job.id for m in messages],
        rejected=parsed.rejections,
        dry_run=isinstance(sender, PrintSender),
    )
    _log_queued(summary, parsed)
    return summary


def _log_queued(summary: PlanSummary, parsed: ParsedJobs) -> None:
    """One structured line per planning: how many jobs were queued and how many rejected
    (each rejection has its own warning already)."""
    logger.info(
        "research jobs queued",
        extra={
            "execution_id": summary.execution_id,
            "queued": len(summary.queued),
            "rejected": len(parsed.rejected_jobs),
        },
    )


def _schedule_input(event: Mapping[str, Any]) -> ScheduleInput:
    """The schedule's input, or one error naming every field at fault: nothing is queued
    from an input that is wrong as a whole."""
    try:
        return ScheduleInput.model_validate(event)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '(input)'}: {e['msg']}" for e in exc.errors()
        )
        raise JobsInputError(f"the schedule's input is not usable: {problems}") from None


def _job_messages(
    jobs: Sequence[JobSpec],
    schedule: ScheduleInput,
    execution_id: str,
    scheduled_time: datetime,
) -> list[JobMessage]:
    """One message per job, each carrying the execution it belongs to: the worker's
    idempotency key and results folder come from it."""
    return [
        JobMessage(
            job=job,
            execution_id=execution_id,
            scheduled_time=scheduled_time,
            schedule_arn=schedule.schedule_arn,
        )
        for job in jobs
    ]


def _chunks(messages: Sequence[JobMessage]) -> list[list[JobMessage]]:
    chunks: list[list[JobMessage]] = []
    current: list[JobMessage] = []
    size = 0
    for message in messages:
        body = len(json.dumps(message.model_dump(mode="json")).encode())
        if current and (len(current) == SQS_BATCH_ENTRIES or size + body > SQS_BATCH_BYTES):
            chunks.append(current)
            current, size = [], 0
        current.append(message)
        size += body
    if current:
        chunks.append(current)
    return chunks
