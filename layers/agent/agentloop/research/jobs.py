"""Research job specs, the schedule's input, and the message one job travels in.

Jobs are checked one by one so that a typo in one job does not stop the others: parsing
returns the valid jobs and a rejection per problem, naming the job and the field. A job the
worker would refuse to run (``JobCheck``: its plan) is rejected here too, not failed later.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from agentloop.models import ChatRequest, Message, UserMessage
from agentloop.patterns import Pattern
from agentloop.research.owner import check_owner

JOB_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
S3_URI_PATTERN = r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/\S+\.jsonl?$"
MAX_PROMPT_CHARS = 20_000
MAX_JOBS = 1_000
ReportFormat = Literal["markdown", "json"]


class JobsInputError(ValueError):
    """The schedule's input as a whole is unusable (not a single job's problem)."""


class _Strict(BaseModel):
    # Unknown fields are errors: a misspelt option must not be silently ignored.
    model_config = ConfigDict(extra="forbid")


DEFAULT_MAX_SECONDS = 3_600
DEFAULT_MAX_INVOCATIONS = 12


class JobLimits(_Strict):
    """Per-job limits; left out, the deployment's defaults apply (and its caps always do).

    They hold for the whole job, however many invocations it takes: the iterations and the
    tokens spent carry over from one invocation to the next, and so does the running time.
    """

    max_iterations: int | None = Field(default=None, ge=1, le=100)
    token_budget: int | None = Field(default=None, ge=1_000, le=10_000_000)
    max_cost_usd: float | None = Field(
        default=None,
        gt=0,
        le=10_000,
        description="US dollars the job may spend over all its invocations, sub-agents "
        "included (the deployment's cap applies); needs a model with a known price (a job "
        "without one is rejected when planned).",
    )
    max_seconds: int | None = Field(
        default=None,
        ge=1,
        le=86_400,
        description=f"Running time over all invocations (default {DEFAULT_MAX_SECONDS}); the "
        "invocation that reaches it answers from what the job has gathered.",
    )
    max_invocations: int | None = Field(
        default=None,
        ge=1,
        le=100,
        description=f"Invocations the job may take (default {DEFAULT_MAX_INVOCATIONS}); the "
        "last one answers at its deadline instead of continuing.",
    )


class JobOutput(_Strict):
    """What the job leaves in the results store besides what every job writes."""

    formats: list[ReportFormat] = Field(
        default_factory=lambda: list[ReportFormat](["markdown"]),
        min_length=1,
        description="report.md (markdown) and/or report.json (the same facts, structured).",
    )
    include_transcript: bool = Field(
        default=True, description="Write transcript.json with every event of the run."
    )
    include_sources: bool = Field(
        default=True, description="List the pages and search results the tools visited."
    )

    @field_validator("formats")
    @classmethod
    def _distinct(cls, value: list[ReportFormat]) -> list[ReportFormat]:
        return list(dict.fromkeys(value))


class JobSpec(_Strict):
    """One research question, run on a schedule or locally."""

    id: Annotated[str, Pattern(JOB_ID_PATTERN)] = Field(
        description="Names the job's folder: letters, digits, '-' and '_', at most 64.",
    )
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    title: str | None = Field(default=None, max_length=200, description="The report's heading.")
    model: str | None = Field(
        default=None,
        max_length=200,
        description="'provider:model'; the deployment's default model when left out.",
    )
    tools: list[str] | None = Field(
        default=None,
        max_length=32,
        description="Tool names; the deployment's default tools when left out, none when [].",
    )
    owner: str | None = Field(
        default=None,
        description="The principal id the job is charged to under per-principal limits, e.g. "
        "'key:nightly' (see research/owner.py); the deployment's research owner when left out.",
    )
    limits: JobLimits = Field(default_factory=JobLimits)
    output: JobOutput = Field(default_factory=JobOutput)

    @field_validator("prompt")
    @classmethod
    def _prompt_has_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the prompt is blank")
        return value

    @field_validator("model")
    @classmethod
    def _known_provider(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from agentloop.config import ConfigurationError
        from agentloop.llm.registry import parse_model_spec

        try:
            parse_model_spec(value)
        except ConfigurationError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("owner")
    @classmethod
    def _principal_id(cls, value: str | None) -> str | None:
        return None if value is None else check_owner(value)

    @field_validator("tools")
    @classmethod
    def _tool_names(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        bad = [name for name in value if not re.fullmatch(TOOL_NAME_PATTERN, name)]
        if bad:
            raise ValueError(f"not a tool name: {bad}")
        return list(dict.fromkeys(value))


def job_request(job: JobSpec, history: Sequence[Message] = ()) -> ChatRequest:
    """The request a job's run makes: its prompt, then what earlier invocations did. Built in
    one place, so that the planner checks the very request the worker runs."""
    return ChatRequest(
        messages=[UserMessage(content=job.prompt), *history],
        model=job.model,
        tools=job.tools,
        max_iterations=job.limits.max_iterations,
        token_budget=job.limits.token_budget,
        max_cost_usd=job.limits.max_cost_usd,
    )


JobCheck = Callable[[JobSpec], "tuple[str, str] | None"]
"""Whether the worker would run a job: None, or the job's field at fault and why not."""


class ScheduleInput(_Strict):
    """The schedule's input: the jobs (inline or an S3 file) plus the scheduler's context.

    The template's ``Input`` puts the scheduler's context attributes into the JSON; the
    target receives nothing else.
    """

    jobs: list[Any] | None = Field(default=None, max_length=MAX_JOBS)
    jobs_s3: Annotated[str, Pattern(S3_URI_PATTERN)] | None = None
    execution_id: str | None = Field(default=None, max_length=128)
    scheduled_time: AwareDatetime | None = None
    schedule_arn: str | None = Field(default=None, max_length=2048)
    attempt_number: int | None = None

    @field_validator("execution_id", "schedule_arn", mode="before")
    @classmethod
    def _unsubstituted_is_missing(cls, value: Any) -> Any:
        # "<aws.scheduler.…>" left as is: the input did not come through the scheduler.
        if isinstance(value, str) and (value.startswith("<aws.scheduler.") or not value.strip()):
            return None
        return value

    @field_validator("scheduled_time", mode="before")
    @classmethod
    def _unsubstituted_time(cls, value: Any) -> Any:
        if isinstance(value, str) and (value.startswith("<aws.scheduler.") or not value.strip()):
            return None
        return value

    @field_validator("attempt_number", mode="before")
    @classmethod
    def _unsubstituted_attempt(cls, value: Any) -> Any:
        if isinstance(value, str) and value.startswith("<aws.scheduler."):
            return None
        return value

    @model_validator(mode="after")
    def _one_source(self) -> ScheduleInput:
        if (self.jobs is None) == (self.jobs_s3 is None):
            raise ValueError('give either "jobs" (a list of jobs) or "jobs_s3" (s3://bucket/key)')
        return self


class JobMessage(_Strict):
    """One SQS message: a job, the schedule execution it belongs to, and which invocation of
    the job it starts (``segment``: 0 for the planner's, then one more per continuation)."""

    job: JobSpec
    execution_id: str = Field(min_length=1, max_length=128)
    scheduled_time: AwareDatetime
    schedule_arn: str | None = None
    segment: int = Field(default=0, ge=0, le=1_000)

    def continued(self, segment: int) -> JobMessage:
        """The message that continues this job in the invocation ``segment``."""
        return self.model_copy(update={"segment": segment})

    @property
    def date(self) -> str:
        """The results folder's date: the scheduled day (UTC), so retries land beside it."""
        return self.scheduled_time.astimezone(UTC).strftime("%Y-%m-%d")

    @property
    def prefix(self) -> str:
        return f"research/{self.date}/{self.job.id}/"


@dataclass(frozen=True)
class Rejection:
    """One problem with one job: which job (its id, or its position), which field, what."""

    job: str
    index: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.job}: {self.field}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {"job": self.job, "index": self.index, "field": self.field, "message": self.message}


@dataclass
class ParsedJobs:
    jobs: list[JobSpec] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)

    @property
    def rejected_jobs(self) -> list[str]:
        return list(dict.fromkeys(r.job for r in self.rejections))


def parse_jobs(
    items: Sequence[Any],
    *,
    known_tools: Collection[str] | None = None,
    labels: Sequence[str] | None = None,
    check: JobCheck | None = None,
) -> ParsedJobs:
    """Validate each job on its own; duplicates of an id are all rejected (which one was meant?).

    ``known_tools``, when given, turns an unknown tool name into a rejection now rather
    than a failed run (and three retries) later; ``check``, when given, does the same for
    anything else the worker's plan of the job refuses. ``labels`` name jobs that have no
    usable id (default ``#<index>``; JSON Lines use ``line <n>``).
    """
    result = ParsedJobs()
    valid: list[tuple[int, JobSpec]] = []
    for index, item in enumerate(items):
        label = _label(item, index, labels)
        checked = _check_job(item, label, index, known_tools=known_tools, check=check)
        if isinstance(checked, JobSpec):
            valid.append((index, checked))
        else:
            result.rejections.extend(checked)
    unique, duplicates = _split_duplicate_ids(valid, labels)
    result.jobs.extend(unique)
    result.rejections.extend(duplicates)
    result.rejections.sort(key=lambda r: r.index)
    return result


def _check_job(
    item: Any,
    label: str,
    index: int,
    *,
    known_tools: Collection[str] | None,
    check: JobCheck | None,
) -> JobSpec | list[Rejection]:
    """One job on its own: its spec, or the problems of the first step it fails (JSON, shape,
    fields, tools, the worker's check), so a later step never reports on a broken job."""
    if isinstance(item, _BadLine):
        return [Rejection(label, index, "(json)", f"not valid JSON: {item.msg}")]
    if not isinstance(item, dict):
        kind = _json_type(item)
        return [Rejection(label, index, "(job)", f"a job must be a JSON object, not {kind}")]
    try:
        spec = JobSpec.model_validate(item)
    except ValidationError as exc:
        return [Rejection(label, index, _loc(err["loc"]), err["msg"]) for err in exc.errors()]
    refused = _unknown_tools(spec, known_tools)
    if refused is None and check is not None:
        refused = check(spec)
    if refused is not None:
        return [Rejection(label, index, *refused)]
    return spec


def _unknown_tools(spec: JobSpec, known_tools: Collection[str] | None) -> tuple[str, str] | None:
    """The job's tools that the deployment lacks, named with what it has (None: all known,
    or no list of tools to check against)."""
    if known_tools is None:
        return None
    unknown = [tool for tool in spec.tools or [] if tool not in known_tools]
    if not unknown:
        return None
    available = ", ".join(sorted(known_tools)) or "none"
    return "tools", f"unknown tool(s) {unknown}; available: {available}"


def _split_duplicate_ids(
    valid: Sequence[tuple[int, JobSpec]], labels: Sequence[str] | None
) -> tuple[list[JobSpec], list[Rejection]]:
    """The jobs whose id is unique, and a rejection for every job sharing its id with another:
    none of them runs, since which one was meant cannot be told."""
    positions: dict[str, list[int]] = {}
    for index, spec in valid:
        positions.setdefault(spec.id, []).append(index)
    unique: list[JobSpec] = []
    duplicates: list[Rejection] = []
    for index, spec in valid:
        where = positions[spec.id]
        if len(where) == 1:
            unique.append(spec)
            continue
        others = ", ".join(_position(i, labels) for i in where if i != index)
        message = f"duplicate id {spec.id!r}: also used by {others}"
        duplicates.append(Rejection(spec.id, index, "id", message))
    return unique, duplicates


def parse_jobs_text(
    text: str,
    *,
    name: str,
    known_tools: Collection[str] | None = None,
    check: JobCheck | None = None,
) -> ParsedJobs:
    """A jobs file: ``.jsonl`` has one job per line; ``.json`` an array or ``{"jobs": [...]}``."""
    if name.endswith(".jsonl"):
        items: list[Any] = []
        labels: list[str] = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                items.append(_BadLine(exc.msg))  # keeps the later jobs' positions
            labels.append(f"line {number}")
        if len(items) > MAX_JOBS:
            raise JobsInputError(f"{name} holds {len(items)} jobs; at most {MAX_JOBS} per schedule")
        return parse_jobs(items, known_tools=known_tools, labels=labels, check=check)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JobsInputError(f"{name} is not valid JSON: {exc}") from None
    if isinstance(document, dict) and isinstance(document.get("jobs"), list):
        document = document["jobs"]
    if not isinstance(document, list):
        raise JobsInputError(f'{name} must hold a JSON array of jobs or {{"jobs": [...]}}')
    if len(document) > MAX_JOBS:
        raise JobsInputError(f"{name} holds {len(document)} jobs; at most {MAX_JOBS} per schedule")
    return parse_jobs(document, known_tools=known_tools, check=check)


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> ``(bucket, key)``."""
    if not re.fullmatch(S3_URI_PATTERN, uri):
        raise JobsInputError(f"not an s3://bucket/key.json|.jsonl location: {uri!r}")
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class _BadLine:
    msg: str


def _label(item: Any, index: int, labels: Sequence[str] | None) -> str:
    if isinstance(item, dict):
        job_id = item.get("id")
        if isinstance(job_id, str) and re.fullmatch(JOB_ID_PATTERN, job_id):
            return job_id
    return _position(index, labels)


def _position(index: int, labels: Sequence[str] | None) -> str:
    return labels[index] if labels is not None else f"#{index}"


def _loc(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(job)"


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "null" if value is None else type(value).__name__
