"""The answer a client shows, kept by the client's own rule, so that ``done.text`` is it.

The protocol's rule (:class:`agentloop.events.TextReset`): a run's answer so far is its text
since its last ``turn_start`` or ``tool_call_result``, and a ``text_reset`` empties it. The
loop sends every event of its own that moves that text through :class:`ShownAnswer`, and a
run's ``done.text`` is what the object holds when the run ends, so the two cannot differ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from agentloop.events import TextDelta, TextReset, ToolCallResult, TurnStart, _Event

Boundary = TypeVar("Boundary", TurnStart, ToolCallResult)


class ShownAnswer:
    """The run's text since its last boundary, as every client shows it."""

    __slots__ = ("_emit", "_parts")

    def __init__(self, emit: Callable[[_Event], object]) -> None:
        self._emit = emit
        self._parts: list[str] = []

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def add(self, text: str) -> None:
        """Stream ``text``: the client appends it to the answer."""
        self._parts.append(text)
        self._emit(TextDelta(text=text))

    async def sink(self, text: str) -> None:
        """:meth:`add`, as a model call's text sink."""
        self.add(text)

    def mark(self) -> int:
        """A point to read :meth:`since` from (a model call's start)."""
        return len(self._parts)

    def since(self, mark: int) -> str:
        """The text added after ``mark``."""
        return "".join(self._parts[mark:])

    def restart(self, event: Boundary) -> Boundary:
        """Emit a ``turn_start`` or ``tool_call_result``: a client starts the answer again."""
        self._parts.clear()
        self._emit(event)
        return event

    def void(self, iteration: int, reason: str) -> None:
        """Take back the text since the boundary (``text_reset``), if there is any."""
        if self._parts:
            self._parts.clear()
            self._emit(TextReset(iteration=iteration, reason=reason))
