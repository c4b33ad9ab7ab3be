"""One stream for every face: the rules all of them follow, with a hook per event kind.

A face subclasses :class:`FaceStream` and frames its protocol in the hooks (``on_text``,
``on_tool_start``, ``on_finish``...); the base owns what must not differ between faces:

- the top-level text sent so far and how a ``text_reset`` is honoured (:class:`SentText`),
  with one set of events that end a retried turn (:data:`BOUNDARIES`);
- one cut: text that departs from what was sent, or a turn that ends before repeating it,
  cancels the run (its answer can no longer reach the client) and ends the stream with
  :data:`STREAM_CUT_MESSAGE`;
- the run's first top-level error, and its ending classified once (:func:`outcome`);
- draining: once the face has sent its last frame (``ended``), the rest of the run is read
  unsent, so the run still ends with ``done`` and is logged and measured; a run that ends
  without ``done`` (never, from ``handle_chat``) still gets the face's failure.

The per-event path is a short chain of ``isinstance`` tests and one method call: no
validation, no copies.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import ClassVar, Generic, TypeVar

from agentloop.events import (
    ApprovalRequest,
    Done,
    ErrorEvent,
    Event,
    FileMade,
    TextDelta,
    TextReset,
    ToolCallResult,
    ToolCallStart,
    TurnStart,
    UsageReport,
)
from agentloop.faces.outcome import Ending, outcome
from agentloop.faces.sent_text import SentText
from agentloop.limits import CancelToken
from agentloop.models import Approval

C = TypeVar("C")
"""What a face's hooks return: its wire chunks (a dict, or frames already encoded)."""

BOUNDARIES = (TurnStart, ToolCallStart, ToolCallResult, ApprovalRequest, Done)
"""Top-level events that end a turn: a retried text that has not yet repeated all that was
sent when one comes can never match what the client shows."""

STREAM_CUT_MESSAGE = (
    "the provider's stream was cut after part of the answer had been sent, and the retried "
    "answer does not continue it; {advice}"
)
"""The one message for a cut stream; ``advice`` is the face's :attr:`FaceStream.retry_advice`."""


class FaceStream(Generic[C]):
    """A run's events as one protocol's frames. Subclasses implement the ``on_*`` hooks and
    :meth:`encode`; each hook returns the chunks to send (often none)."""

    retry_advice: ClassVar[str] = "ask again to get the whole answer"
    """What a client whose stream was cut can do: the end of :data:`STREAM_CUT_MESSAGE`."""

    def __init__(
        self, cancel: CancelToken | None = None, approvals: Sequence[Approval] | None = None
    ) -> None:
        self.cancel = cancel
        self.decided: dict[str, bool] = {a.call_id: a.approved for a in approvals or ()}
        """The calls whose approval this request answers (``ChatRequest.approvals``): call
        id -> approved. Their calls are on the client already, so faces do not show them
        starting again."""
        self.sent = SentText()
        self.ended = False
        """True once the face sent its last frame: the rest of the run is drained unsent."""
        self.error: ErrorEvent | None = None
        """The run's first top-level error event."""

    # -- what every face shares ------------------------------------------------------------

    async def frames(self, events: AsyncIterator[Event]) -> AsyncIterator[bytes]:
        """The whole answer: the opening, a frame per event until the face ends, the close."""
        encode = self.encode
        for chunk in self.on_open():
            yield encode(chunk)
        async for event in events:
            if self.ended:
                continue  # drained unsent, so the run still ends with done
            for chunk in self.translate(event):
                yield encode(chunk)
        for chunk in self.on_close():
            yield encode(chunk)

    def translate(self, event: Event) -> list[C]:
        """The chunks for one event (the per-event path: keep it cheap)."""
        if isinstance(event, TextDelta) and not event.depth:  # most events: first
            text = self.sent.add(event.text)
            if text is None:
                return self.cut()
            return self.on_text(text) if text else []
        if isinstance(event, UsageReport):
            return self.on_usage(event)
        if isinstance(event, FileMade):  # the person's file, whichever agent's tool made it
            return self.on_file(event)
        if event.depth:
            return self.on_subagent(event)
        if isinstance(event, TextReset):
            self.sent.reset()
            return []
        if isinstance(event, ErrorEvent):
            self.error = self.error or event
            return self.on_error(event)
        if self.sent.replaying and isinstance(event, BOUNDARIES):
            return self.cut()  # the retried turn ended short of what the client shows
        return self._top_level(event)

    def _top_level(self, event: Event) -> list[C]:
        if isinstance(event, TurnStart):
            self.sent.mark()
            return self.on_turn(event)
        if isinstance(event, ToolCallStart):
            return self.on_tool_start(event)
        if isinstance(event, ToolCallResult):
            self.sent.mark()
            return self.on_tool_result(event)
        if isinstance(event, ApprovalRequest):
            return self.on_approval(event)
        if isinstance(event, Done):
            return self.on_finish(outcome(event, self.error))
        return self.on_other(event)

    def cut(self) -> list[C]:
        """End a stream whose client can no longer be shown the run's answer correctly."""
        if self.cancel is not None:
            self.cancel.cancel()
        return self.on_cut(STREAM_CUT_MESSAGE.format(advice=self.retry_advice))

    # -- the face's hooks ------------------------------------------------------------------

    def encode(self, chunk: C) -> bytes:
        """One chunk as the bytes of its wire frame."""
        raise NotImplementedError

    def on_open(self) -> list[C]:
        """The frames that open the stream, before any event."""
        return []

    def on_text(self, text: str) -> list[C]:
        """Top-level text to send: what :class:`SentText` lets through of a ``text_delta``
        (never empty; after a ``text_reset``, only what goes beyond the sent text)."""
        raise NotImplementedError

    def on_error(self, event: ErrorEvent) -> list[C]:
        """A top-level error event (already kept in :attr:`error`)."""
        return []

    def on_turn(self, event: TurnStart) -> list[C]:
        return []

    def on_tool_start(self, event: ToolCallStart) -> list[C]:
        return []

    def on_tool_result(self, event: ToolCallResult) -> list[C]:
        return []

    def on_approval(self, event: ApprovalRequest) -> list[C]:
        return []

    def on_usage(self, event: UsageReport) -> list[C]:
        """A usage report, at any depth (``event.total`` is the request's so far)."""
        return []

    def on_file(self, event: FileMade) -> list[C]:
        """A file a tool call made and kept for the caller, at any depth (after that call's
        ``tool_call_result``); ``event.file.url`` is where the client fetches it."""
        return []

    def on_subagent(self, event: Event) -> list[C]:
        """Any event of a sub-agent (``depth`` > 0) other than a usage report."""
        return []

    def on_other(self, event: Event) -> list[C]:
        """Top-level events with no hook of their own (run_start, notice, model_switched)."""
        return []

    def on_finish(self, ending: Ending) -> list[C]:
        """The top-level ``done``, classified; a face that sends its last frame here sets
        :attr:`ended`."""
        raise NotImplementedError

    def on_cut(self, message: str) -> list[C]:
        """End the stream with the cut's error (:attr:`cancel` is cancelled already)."""
        raise NotImplementedError

    def on_close(self) -> list[C]:
        """After the run's last event: nothing if the face ended, else its failure."""
        return []
