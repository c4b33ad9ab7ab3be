"""Checkpoints: how a research job outlives one invocation, and survives a worker that dies.

A job's state lives in one object, ``checkpoints/<date>/<job-id>/<execution>.json`` in the
results store: the history after the prompt, the iterations and tokens (by depth) spent, every
event so far (the transcript and the report's sources span invocations), the running time,
and two counters:

* ``seq`` goes up with every write. Writes are compare-and-swap on the version read
  (:meth:`~agentloop.research.store.ResultStore.put_if`), so of two deliveries working on one
  job only the first write wins; the other gets :class:`StaleCheckpoint` and stops.
* ``segment`` is the invocation that holds the job. A job that meets its invocation's deadline
  writes ``segment + 1`` and then queues a message for that segment; a message for an earlier
  segment is stale and runs nothing (the one just before may re-send the hand-off, in case
  its sender died between the write and the send).

The worker writes one after every completed round (at the next turn's ``turn_start``, when
everything before it is in the history) and at the end of each invocation. A worker that
dies loses at most the turn it was in; the redelivered message resumes from the last write.

:class:`RoundRecorder` rebuilds the completed rounds from the run's events, exactly as the
loop appends them (``done.messages`` is the authority at the end of an invocation; the
recorder covers the rounds in between).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentloop.events import (
    Event,
    TextDelta,
    TextReset,
    ToolCallResult,
    ToolCallStart,
    TurnStart,
    UsageReport,
)
from agentloop.models import (
    MAX_TOOL_CALLS,
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolLimits,
    ToolMessage,
    Usage,
)
from agentloop.research.jobs import JobMessage
from agentloop.research.store import ResultStore, VersionConflict

CHECKPOINT_PREFIX = "checkpoints"
_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


class StaleCheckpoint(Exception):
    """Another delivery of the job wrote its checkpoint since this one read it."""


class JobState(BaseModel):
    """What a job has done so far: enough to continue it without repeating a finished step."""

    model_config = ConfigDict(extra="forbid")

    job_id: str
    execution_id: str
    seq: int = Field(default=0, ge=0, description="Bumped by every write.")
    segment: int = Field(default=0, ge=0, description="The invocation that holds the job.")
    status: Literal["running", "finished"] = "running"
    messages: list[Message] = Field(
        default_factory=list, description="The history after the job's prompt."
    )
    iterations: int = Field(default=0, ge=0)
    usage_by_depth: list[Usage] = Field(default_factory=list)
    events: list[dict[str, Any]] = Field(
        default_factory=list, description="Every event of the earlier invocations, as sent."
    )
    started_at: datetime
    seconds: float = Field(default=0.0, ge=0, description="Running time of every invocation.")
    invocations: int = Field(default=0, ge=0, description="Invocations that worked on the job.")
    outcome: dict[str, Any] | None = Field(
        default=None, description="A finished job's outcome, returned to any later delivery."
    )
    owner: str | None = Field(
        default=None,
        description="The principal id the job is charged to, fixed by its first invocation "
        "(later ones charge the same owner, whatever the deployment's default became).",
    )
    tool_calls: ToolLimits = Field(
        default_factory=dict,
        description="Calls of each limited tool started so far, every depth and invocation "
        "included (``tool_limits`` hold for the whole job).",
    )

    @classmethod
    def begin(cls, message: JobMessage, started_at: datetime) -> JobState:
        return cls(job_id=message.job.id, execution_id=message.execution_id, started_at=started_at)


def checkpoint_key(message: JobMessage) -> str:
    """One object per job and execution, beside (not in) the job's results folder."""
    execution = message.execution_id
    if not _SAFE_ID.match(execution):
        execution = "x-" + hashlib.sha256(execution.encode()).hexdigest()[:32]
    return f"{CHECKPOINT_PREFIX}/{message.date}/{message.job.id}/{execution}.json"


class Checkpoints:
    """Reads and compare-and-swap writes of job states in a results store."""

    def __init__(self, store: ResultStore) -> None:
        self.store = store

    def load(self, message: JobMessage) -> tuple[JobState | None, str | None]:
        """The job's state and its version, or ``(None, None)`` before its first write."""
        stored = self.store.get(checkpoint_key(message))
        if stored is None:
            return None, None
        return JobState.model_validate_json(stored.body), stored.version

    def save(self, message: JobMessage, state: JobState, version: str | None) -> str:
        """Write ``state`` with ``seq + 1`` over ``version``; the new version.

        :class:`StaleCheckpoint` when another delivery wrote first.
        """
        state.seq += 1
        body = state.model_dump_json(exclude_none=True).encode()
        try:
            return self.store.put_if(
                checkpoint_key(message), body, "application/json", version=version
            )
        except VersionConflict as exc:
            state.seq -= 1
            raise StaleCheckpoint(str(exc)) from exc


class RoundRecorder:
    """The rounds a run completed, rebuilt from its top-level events as the loop records them:
    the turn's text (the text since ``turn_start``, less what a ``text_reset`` voided) and
    tool calls as one assistant message, then each call's result in the order called.

    A turn whose model call failed has no ``usage`` event; the loop keeps such a turn's
    recorded call (a provider that could not parse a tool call) without its text, and so does
    this. Usage by depth is summed from ``usage`` events: calls abandoned mid-stream, charged
    by estimate, are missing until ``done`` brings the exact figures.
    """

    def __init__(self, iterations: int = 0, usage_by_depth: list[Usage] | None = None) -> None:
        self.messages: list[Message] = []
        self.usage_by_depth: list[Usage] = list(usage_by_depth or [])
        self.iterations = iterations
        """Iterations whose rounds are complete (the run's earlier ones included)."""
        self._turn = iterations
        self._text: list[str] = []
        self._settled = False
        self._calls: list[ToolCall] = []
        self._results: dict[str, str] = {}

    def feed(self, event: Event) -> bool:
        """Take one event; True when it closes a round (the history just grew)."""
        if isinstance(event, UsageReport):
            while len(self.usage_by_depth) <= event.depth:
                self.usage_by_depth.append(Usage())
            self.usage_by_depth[event.depth] = self.usage_by_depth[event.depth] + event.usage
            if event.depth == 0:
                self._settled = True
            return False
        if event.depth != 0:
            return False
        if isinstance(event, TurnStart):
            grew = self.flush()
            self._turn = event.iteration
            return grew
        if isinstance(event, TextDelta):
            self._text.append(event.text)
        elif isinstance(event, TextReset):
            self._text.clear()
        elif isinstance(event, ToolCallStart):
            function = FunctionCall(name=event.name, arguments=event.arguments)
            self._calls.append(ToolCall(id=event.call_id, function=function))
        elif isinstance(event, ToolCallResult):
            self._results[event.call_id] = event.content
        return False

    def flush(self) -> bool:
        """Close the round in progress if every call of it has its result."""
        calls, text, settled = self._calls, "".join(self._text), self._settled
        complete = bool(calls) and all(call.id in self._results for call in calls)
        if complete:
            self.iterations = self._turn
            content = (text or None) if settled else None
            self.messages.append(AssistantMessage(content=content, tool_calls=calls))
            self.messages += [
                ToolMessage(tool_call_id=call.id, content=self._results[call.id]) for call in calls
            ]
        self._text, self._settled, self._calls, self._results = [], False, [], {}
        return complete


def wire_events(events: list[Event]) -> list[dict[str, Any]]:
    """Events as sent on the wire (what ``transcript.json`` holds)."""
    return [json.loads(event.model_dump_json()) for event in events]


def tool_call_counts(
    events: list[Event], limited: Collection[str], before: Mapping[str, int]
) -> dict[str, int]:
    """``before`` plus the calls of each ``limited`` tool the events started, every depth
    included: what the next invocation's ``tool_limits`` go on from. A call started but
    refused (bad arguments, or past its limit) counts too: a job never gets more calls than
    its limits allow, at worst one fewer per refused call."""
    counts = {name: count for name, count in before.items() if name in limited}
    for event in events:
        if isinstance(event, ToolCallStart) and event.name in limited:
            counts[event.name] = min(MAX_TOOL_CALLS, counts.get(event.name, 0) + 1)
    return counts
