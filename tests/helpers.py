"""Shared test helpers: run a chat to the end and check every event against the schema."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from jsonschema import Draft202012Validator

from agentloop.chat import AgentSetup, ChatContext, handle_chat
from agentloop.config import AgentConfig
from agentloop.events import (
    Done,
    Event,
    TextDelta,
    TextReset,
    ToolCallResult,
    ToolCallStart,
    TurnStart,
)
from agentloop.models import ChatRequest, Message, UserMessage
from agentloop.sources import collect
from agentloop.tools.base import Tool
from agentloop.tools.registry import ToolRegistry

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT / "docs" / "events.schema.json"
_validator = Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))

T = TypeVar("T")

# Small, fast defaults for tests: no deadline reserve to wait out, no big reserve to spend.
TEST_CONFIG = AgentConfig(deadline_reserve_s=0.0, final_answer_reserve=0, retry_base_delay_s=0.01)


def validate_event(event: Event) -> None:
    """Fail unless the event, as sent on the wire, validates against the committed schema."""
    _validator.validate(json.loads(event.model_dump_json()))


@dataclass
class RunResult:
    events: list[Event]
    done: Done
    context: ChatContext = field(repr=False)

    def of(self, kind: type[T]) -> list[T]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def text_deltas(self) -> list[str]:
        return [e.text for e in self.of(TextDelta)]

    @property
    def tool_results(self) -> list[ToolCallResult]:
        return self.of(ToolCallResult)

    @property
    def tool_starts(self) -> list[ToolCallStart]:
        return self.of(ToolCallStart)


def client_answer(events: Iterable[Event], run_id: str | None = None) -> str:
    """The answer a client shows for one run, by the protocol's rule (events.TextReset):
    the run's text since its last ``turn_start`` or ``tool_call_result``, a ``text_reset``
    dropping it. ``run_id`` None: the top-level run."""
    answer: list[str] = []
    for event in events:
        mine = event.run_id == run_id if run_id is not None else event.depth == 0
        if not mine:
            continue
        if isinstance(event, TurnStart | ToolCallResult | TextReset):
            answer.clear()
        elif isinstance(event, TextDelta):
            answer.append(event.text)
    return "".join(answer)


def check_run_invariants(request: ChatRequest, events: Sequence[Event]) -> None:
    """What every run guarantees a client: each run's shown answer is its ``done.text``, the
    top-level ``done.sources`` are those of the stream's tool events (sub-agents' included),
    and the top-level ``done.messages`` continue the conversation as a history we accept."""
    for done in (e for e in events if isinstance(e, Done)):
        shown = client_answer(events, done.run_id)
        assert shown == done.text, f"run {done.run_id}: shown {shown!r} != done {done.text!r}"
    top = [e for e in events if isinstance(e, Done) and e.depth == 0][-1]
    assert top.sources == collect(events).sources(), "sources: those of every depth's tools"
    if top.resume is not None:  # paused: continued with the token, calls still waiting
        assert top.pending, "a resume token goes with the calls that wait"
        ChatRequest(
            messages=[*request.messages, *top.messages], model=request.model, resume=top.resume
        )
        return
    ChatRequest(
        messages=[*request.messages, *top.messages, UserMessage(content="And then?")],
        model=request.model,
    )


def make_request(prompt: str | Sequence[Message], *, model: str, **fields: Any) -> ChatRequest:
    messages = [UserMessage(content=prompt)] if isinstance(prompt, str) else list(prompt)
    return ChatRequest(messages=messages, model=model, **fields)


async def run_chat(
    prompt: str | Sequence[Message],
    *,
    model: str,
    tools: Iterable[Tool] = (),
    config: AgentConfig = TEST_CONFIG,
    context: ChatContext | None = None,
    **fields: Any,
) -> RunResult:
    """Run ``handle_chat`` to its end, validating each event and the stream's shape."""
    tool_list = list(tools)
    if "tools" not in fields:
        fields["tools"] = [t.name for t in tool_list]
    request = make_request(prompt, model=model, **fields)
    ctx = context or ChatContext(setup=AgentSetup(config=config, tools=ToolRegistry(tool_list)))
    events: list[Event] = []
    async for event in handle_chat(request, ctx):
        validate_event(event)
        events.append(event)
    assert events, "a run emits events"
    done = events[-1]
    assert isinstance(done, Done), f"last event must be done, got {done.type}"
    assert sum(isinstance(e, Done) and e.depth == 0 for e in events) == 1
    check_run_invariants(request, events)
    return RunResult(events=events, done=done, context=ctx)


def tool_payload(content: str) -> dict[str, Any]:
    """The parsed ``{"ok": ...}`` envelope of a tool message."""
    value = json.loads(content)
    assert isinstance(value, dict)
    return value


def iter_sse(lines: Iterable[str]) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """SSE lines to ``(event type, data)`` as they arrive; a ``: ping`` is ``("ping", None)``."""
    kind = ""
    for line in lines:
        if line.startswith(":"):
            yield ("ping", None)
        elif line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield (kind, json.loads(line.removeprefix("data: ")))
            kind = ""


def parse_sse(lines: Iterable[str]) -> list[tuple[str, dict[str, Any] | None]]:
    return list(iter_sse(lines))


def make_command(*args: str) -> list[str]:
    """``make`` with the virtualenv this test runs in (``make test`` runs in .venv); the test
    is skipped in a virtualenv the Makefile did not make."""
    venv = Path(sys.prefix)
    if not (venv / ".installed").exists():
        pytest.skip(f"{venv} was not made by the Makefile")
    return ["make", "-s", f"VENV={venv}", *args]
