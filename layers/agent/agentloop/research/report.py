"""What a finished job leaves behind: the report (markdown and/or JSON) and the transcript.

Sources are read back from the run's tool events, not from the model's answer, by the
collector that gives ``done.sources`` (:mod:`agentloop.sources`): the pages ``scrape`` read
or failed to read, and the results ``search_web`` returned, at every depth (sub-agents
included) and over every invocation. The model's own citations are in the answer itself.

A run that a limit stopped (iterations, token budget, deadline) still has an answer, written
from what it had gathered; its report says so above that answer, because a reader skimming
a folder of reports would otherwise take a partial answer for a finished one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agentloop.events import Done, ErrorEvent, Event, ModelSwitched, Notice, RunStart, SourceKind
from agentloop.research.jobs import JobMessage
from agentloop.sources import collect

REPORT_MAX_SOURCES = 500
"""A report lists more than a ``done`` carries: it is a file, read later, not a stream event."""

INCOMPLETE_STOPS = frozenset({"max_iterations", "budget", "quota", "deadline", "cancelled"})
"""Stop reasons after which the run answered, but before the model had finished its work."""


@dataclass
class ListedSource:
    url: str
    kind: SourceKind
    title: str | None = None
    ok: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {"url": self.url, "kind": self.kind, "title": self.title, "ok": self.ok}


@dataclass
class RunFacts:
    """Everything the report says about one run, gathered from its events."""

    message: JobMessage
    events: Sequence[Event]
    started_at: datetime
    finished_at: datetime
    seconds: float
    done: Done | None = None
    model: str | None = None
    switches: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    sources: list[ListedSource] = field(default_factory=list)
    attempt: int | None = None
    start: RunStart | None = None
    notices: list[Notice] = field(default_factory=list)
    invocations: int = 1
    """Invocations the job took so far (each continued the one before from its checkpoint)."""

    @classmethod
    def gather(
        cls,
        message: JobMessage,
        events: Sequence[Event],
        *,
        started_at: datetime,
        finished_at: datetime,
        seconds: float,
        attempt: int | None = None,
        invocations: int = 1,
    ) -> RunFacts:
        facts = cls(
            message,
            events,
            started_at,
            finished_at,
            seconds,
            attempt=attempt,
            invocations=invocations,
        )
        for event in events:
            if isinstance(event, RunStart) and event.depth == 0:
                facts.model = event.model
                facts.start = event
            elif isinstance(event, Notice) and event.depth == 0:
                facts.notices.append(event)
            elif isinstance(event, ModelSwitched) and event.depth == 0:
                facts.switches.append(f"{event.from_model} -> {event.to_model} ({event.reason})")
            elif isinstance(event, ErrorEvent):
                facts.errors.append(f"{event.code}: {event.message}")
            elif isinstance(event, Done) and event.depth == 0:
                facts.done = event
        facts.sources = collect_sources(events)
        return facts

    @property
    def tokens(self) -> int:
        return self.done.usage.total_tokens if self.done else 0

    @property
    def incomplete(self) -> bool:
        """The run answered, but a limit stopped it before the model had finished."""
        return self.done is not None and self.done.stop_reason in INCOMPLETE_STOPS

    @property
    def answer(self) -> str:
        """The final text, without the loop's "send a message to continue" notice at a limit:
        nobody can send a batch job a message, and the report's own notice says more."""
        text = self.done.text if self.done else ""
        if self.incomplete:
            for notice in self.notices:
                ending = "\n\n" + notice.message
                if text.rstrip().endswith(ending):
                    text = text.rstrip()[: -len(ending)]
        return text

    def incomplete_notice(self) -> str | None:
        """One paragraph for the top of the report: which limit, and that it may be partial."""
        done = self.done
        if done is None or not self.incomplete:
            return None
        start = self.start
        if done.stop_reason == "max_iterations":
            allowed = start.max_iterations if start else done.iterations
            what = (
                "stopped at its iteration limit",
                f"The run used all {allowed} tool iterations it was allowed "
                "(`limits.max_iterations`) before the model had finished.",
            )
        elif done.stop_reason == "budget" and any(n.code == "cost" for n in self.notices):
            budget = f" of {dollars(start.max_cost_usd)}" if start and start.max_cost_usd else ""
            what = (
                "stopped at its cost budget",
                f"The run used up its cost budget{budget} (`limits.max_cost_usd`) before "
                "the model had finished.",
            )
        elif done.stop_reason == "budget":
            budget = f" of {start.token_budget:,} tokens" if start else ""
            what = (
                "stopped at its token budget",
                f"The run used up its token budget{budget} (`limits.token_budget`) before "
                "the model had finished.",
            )
        elif done.stop_reason == "quota":
            owner = self.message.job.owner or "the deployment's research owner"
            what = (
                "stopped at its owner's allowance",
                f"The allowance of the principal the job is charged to ({owner}) under the "
                "deployment's per-principal limits ran out before the model had finished.",
            )
        elif done.stop_reason == "deadline":
            spent = f"{self.seconds:.1f} s"
            if self.invocations > 1:
                spent += f" over {self.invocations} invocations"
            what = (
                "stopped at its deadline",
                f"The run ran out of time after {spent} (its time limit, `limits.max_seconds`, "
                "or the time its last allowed invocation had) before the model had finished.",
            )
        else:
            what = ("cancelled", "The run was cancelled before the model had finished.")
        headline, detail = what
        return (
            f"> **Incomplete: {headline}.** {detail} The answer below was written from what "
            "had been gathered by then and may be partial."
        )


def collect_sources(events: Sequence[Event]) -> list[ListedSource]:
    """Pages read first (those that could not be read among them), then search results."""
    collector = collect(events, REPORT_MAX_SOURCES)
    unread = collector.unread()
    found = collector.sources()
    return [
        *(ListedSource(s.url, "read", s.title) for s in found if s.kind == "read"),
        *(ListedSource(url, "read", None, ok=False) for url in unread),
        *(
            ListedSource(s.url, "search", s.title)
            for s in found
            if s.kind == "search" and s.url not in unread
        ),
    ]


def render_markdown(facts: RunFacts) -> str:
    """report.md: the answer first, then the sources and how the run went."""
    job = facts.message.job
    lines = [f"# {_one_line(job.title or job.id)}", ""]
    notice = facts.incomplete_notice()
    if notice is not None:
        lines += [notice, ""]
    lines += [facts.answer.strip() or "_(no answer)_", ""]
    if job.output.include_sources:
        lines += ["## Sources", ""]
        read = [s for s in facts.sources if s.kind == "read"]
        found = [s for s in facts.sources if s.kind == "search"]
        if not facts.sources:
            lines += ["No tool visited a web page in this run.", ""]
        if read:
            lines += ["Pages read:", ""]
            lines += [_source_line(s) for s in read] + [""]
        if found:
            lines += ["Search results seen:", ""]
            lines += [_source_line(s) for s in found] + [""]
    lines += ["## Run", "", "| | |", "| --- | --- |"]
    for name, value in _run_rows(facts):
        lines.append(f"| {name} | {_cell(value)} |")
    lines += ["", "## Prompt", ""]
    lines += [f"> {line}" if line else ">" for line in job.prompt.strip().splitlines()]
    return "\n".join(lines) + "\n"


def report_json(facts: RunFacts) -> dict[str, Any]:
    """report.json: the same facts for programs."""
    done = facts.done
    return {
        "job": facts.message.job.model_dump(mode="json"),
        "execution_id": facts.message.execution_id,
        "scheduled_time": facts.message.scheduled_time.isoformat(),
        "status": "incomplete" if facts.incomplete else "succeeded",
        "incomplete_notice": facts.incomplete_notice(),
        "answer": facts.answer if done else None,
        "stop_reason": done.stop_reason if done else None,
        "iterations": done.iterations if done else 0,
        "usage": done.usage.model_dump() if done else None,
        "cost_usd": done.cost_usd if done else None,
        "model": facts.model,
        "model_switches": facts.switches,
        "errors": facts.errors,
        "sources": [s.as_dict() for s in facts.sources]
        if facts.message.job.output.include_sources
        else None,
        "started_at": facts.started_at.isoformat(),
        "finished_at": facts.finished_at.isoformat(),
        "seconds": round(facts.seconds, 3),
        "invocations": facts.invocations,
        "attempt": facts.attempt,
    }


def transcript_json(facts: RunFacts) -> dict[str, Any]:
    """transcript.json: every event of the run, as sent on the wire, with what ran."""
    return {
        "job_id": facts.message.job.id,
        "execution_id": facts.message.execution_id,
        "scheduled_time": facts.message.scheduled_time.isoformat(),
        "started_at": facts.started_at.isoformat(),
        "finished_at": facts.finished_at.isoformat(),
        "events": [json.loads(event.model_dump_json()) for event in facts.events],
    }


def failure_json(facts: RunFacts, error: str) -> dict[str, Any]:
    """failure.json: why the attempt failed and the partial transcript, before it is retried."""
    done = facts.done
    return {
        "job_id": facts.message.job.id,
        "execution_id": facts.message.execution_id,
        "scheduled_time": facts.message.scheduled_time.isoformat(),
        "attempt": facts.attempt,
        "invocations": facts.invocations,
        "error": error,
        "errors": facts.errors,
        "stop_reason": done.stop_reason if done else None,
        "model": facts.model,
        "started_at": facts.started_at.isoformat(),
        "failed_at": facts.finished_at.isoformat(),
        "seconds": round(facts.seconds, 3),
        "job": facts.message.job.model_dump(mode="json"),
        "events": [json.loads(event.model_dump_json()) for event in facts.events],
    }


def _run_rows(facts: RunFacts) -> list[tuple[str, str]]:
    done = facts.done
    usage = done.usage if done else None
    rows = [
        ("model", facts.model or facts.message.job.model or "(default)"),
        ("status", "incomplete" if facts.incomplete else "succeeded"),
        ("stop reason", done.stop_reason if done else "(none)"),
        ("iterations", str(done.iterations if done else 0)),
    ]
    if usage is not None:
        rows.append(
            (
                "tokens",
                f"{usage.total_tokens:,} ({usage.prompt_tokens:,} prompt, "
                f"{usage.completion_tokens:,} completion, {usage.cached_tokens:,} cached)",
            )
        )
    if done is not None:
        known = done.cost_usd is not None
        rows.append(
            ("cost", dollars(done.cost_usd) if known else "unknown (no price for the model)")
        )
    rows += [(f"model switch {i + 1}", s) for i, s in enumerate(facts.switches)]
    rows += [("error", e) for e in facts.errors]
    rows += [
        ("started", facts.started_at.isoformat(timespec="seconds")),
        ("finished", facts.finished_at.isoformat(timespec="seconds")),
        ("duration", f"{facts.seconds:.1f} s"),
        ("invocations", str(facts.invocations)),
        ("scheduled", facts.message.scheduled_time.isoformat(timespec="seconds")),
        ("execution id", facts.message.execution_id),
    ]
    if facts.attempt is not None:
        rows.append(("attempt", str(facts.attempt)))
    return rows


def dollars(cost: float | None) -> str:
    """A cost as people read it: cents for large sums, more digits for small ones."""
    if cost is None:
        return "-"
    return f"${cost:,.2f}" if cost >= 1 else f"${cost:.6f}"


def _source_line(source: ListedSource) -> str:
    title = _one_line(source.title) if source.title else ""
    label = f"{title} " if title else ""
    failed = " (could not be read)" if not source.ok else ""
    return f"- {label}<{source.url}>{failed}"


def _one_line(text: str) -> str:
    return " ".join(text.split()).replace("[", "\\[").replace("]", "\\]")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
