"""Events for the faces' unit tests, and a source that counts how many a face read."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from agentloop.events import Done, Event, TextReset, TurnStart
from agentloop.models import AssistantMessage, StopReason, Usage

ANSWER = "Paris is the capital of France."


def done(text: str = ANSWER, stop: StopReason = "completed", **fields: Any) -> Done:
    return Done(
        text=text,
        stop_reason=stop,
        iterations=1,
        usage=Usage(prompt_tokens=10, completion_tokens=5),
        budget_remaining=100,
        messages=[AssistantMessage(content=text)],
        **fields,
    )


def turn(iteration: int = 1) -> TurnStart:
    return TurnStart(iteration=iteration, budget_remaining=100)


def reset(iteration: int = 1, depth: int = 0) -> TextReset:
    return TextReset(iteration=iteration, reason="stream cut; the turn is retried", depth=depth)


class Counted:
    """A run's events for a face to read; ``consumed`` says how many it read (a face that
    has sent its last frame still drains the rest)."""

    def __init__(self, events: Sequence[Event]) -> None:
        self.events = events
        self.consumed = 0

    async def stream(self) -> AsyncIterator[Event]:
        for event in self.events:
            self.consumed += 1
            yield event
