"""The UI message stream's answer: one run's events as chunks (see the package docstring)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from agentloop.events import (
    ApprovalRequest,
    Done,
    Event,
    FileMade,
    ModelSwitched,
    Notice,
    RunStart,
    ToolCallResult,
    ToolCallStart,
    TurnStart,
    UsageReport,
)
from agentloop.faces.outcome import NO_ANSWER, Ending, Outcome
from agentloop.faces.stream import STREAM_CUT_MESSAGE as STREAM_CUT
from agentloop.faces.stream import FaceStream
from agentloop.faces.ui_stream.chunks import (
    DONE_FRAME,
    Chunk,
    file_chunk,
    frame,
    input_chunk,
    metadata,
    notice,
    source_id,
    switch_notice,
    usage_json,
)
from agentloop.faces.ui_stream.request import UIChatRequest
from agentloop.faces.ui_stream.subagents import Subagents
from agentloop.limits import CancelToken
from agentloop.models import Approval

UI_STREAM_HEADERS: dict[str, str] = {"x-vercel-ai-ui-message-stream": "v1"}
"""Besides the SSE content type and the no-cache headers every face's stream has."""


FINISH_REASONS: dict[Outcome, str] = {
    Outcome.ANSWERED: "stop",
    Outcome.CUT_SHORT: "length",
    Outcome.AWAITS_APPROVAL: "tool-calls",
}
"""Outcomes that end well: with an answer, or paused on calls that wait for a person's
approval (as the SDK's own runs stop for them); others finish with "error"."""


class UIMessageStream(FaceStream[Chunk]):
    """Turns one run's events into UI message stream chunks (SSE ``data:`` lines).

    Sent text is never contradicted (:class:`FaceStream`): a cut ends the stream with an
    ``error`` chunk and cancels the run (``cancel``), whose remaining events are drained
    unsent. ``approvals`` are the decisions the request carries (``ChatRequest.approvals``).
    """

    def __init__(
        self,
        ui_request: UIChatRequest,
        message_id_seed: str,
        cancel: CancelToken,
        approvals: Sequence[Approval] | None = None,
    ) -> None:
        super().__init__(cancel, approvals)
        self.request = ui_request
        self.message_id = ui_request.continued_message_id or f"msg-{message_id_seed}"
        self._shown_sources = ui_request.shown_sources()
        self._step_open = False
        self._step_has_results = False
        self._text_id: str | None = None
        self._text_parts = 0
        self._subagents = Subagents()

    async def frames(self, events: AsyncIterator[Event]) -> AsyncIterator[bytes]:
        async for sent in super().frames(events):
            yield sent
        yield DONE_FRAME

    encode = staticmethod(frame)  # no method call of its own per frame

    def on_open(self) -> list[Chunk]:
        return [{"type": "start", "messageId": self.message_id}]

    def on_close(self) -> list[Chunk]:
        # handle_chat always ends with done; never leave a client waiting
        return [] if self.ended else self._fail(NO_ANSWER)

    # -- top level ------------------------------------------------------------------------

    def on_turn(self, event: TurnStart) -> list[Chunk]:
        return [*self._close_step(), *self._open_step()]

    def on_tool_start(self, event: ToolCallStart) -> list[Chunk]:
        if event.call_id in self.decided:  # its part is in the message already
            return self._close_text()
        return [*self._close_text(), *self._ensure_step(), input_chunk(event)]

    def on_approval(self, event: ApprovalRequest) -> list[Chunk]:
        request = {"type": "tool-approval-request", "approvalId": event.call_id}
        request["toolCallId"] = event.call_id
        return [*self._close_text(), *self._ensure_step(), input_chunk(event), request]

    def on_tool_result(self, event: ToolCallResult) -> list[Chunk]:
        self._step_has_results = True
        chunks = self._close_text()
        call_id = event.call_id
        if self.decided.get(call_id) is False:
            chunks.append({"type": "tool-output-denied", "toolCallId": call_id})
        elif event.ok:
            chunks.append(
                {"type": "tool-output-available", "toolCallId": call_id, "output": event.content}
            )
        else:
            chunks.append(
                {"type": "tool-output-error", "toolCallId": call_id, "errorText": event.content}
            )
        return chunks

    def on_file(self, event: FileMade) -> list[Chunk]:
        return [*self._close_text(), *self._ensure_step(), file_chunk(event.file)]

    def on_other(self, event: Event) -> list[Chunk]:
        if isinstance(event, RunStart):
            return [
                metadata(
                    model=event.model,
                    maxIterations=event.max_iterations,
                    tokenBudget=event.token_budget,
                    budgetRemaining=event.budget_remaining,
                )
            ]
        if isinstance(event, ModelSwitched):
            return [metadata(model=event.to_model), notice(*switch_notice(event))]
        if isinstance(event, Notice):
            return [notice(event.code, event.message)]
        return []

    def on_text(self, text: str) -> list[Chunk]:
        chunks: list[Chunk] = []
        if self._text_id is None:
            if self._step_has_results:  # an answer after the results, with no turn_start
                chunks += self._close_step()
            chunks += self._ensure_step()
            self._text_parts += 1
            self._text_id = f"text-{self._text_parts}"
            chunks.append({"type": "text-start", "id": self._text_id})
        chunks.append({"type": "text-delta", "id": self._text_id, "delta": text})
        return chunks

    def _close_text(self) -> list[Chunk]:
        if self._text_id is None:
            return []
        text_id, self._text_id = self._text_id, None
        return [{"type": "text-end", "id": text_id}]

    def _open_step(self) -> list[Chunk]:
        self._step_open = True
        self._step_has_results = False
        return [{"type": "start-step"}]

    def _ensure_step(self) -> list[Chunk]:
        return [] if self._step_open else self._open_step()

    def _close_step(self) -> list[Chunk]:
        chunks = self._close_text()
        if self._step_open:
            self._step_open = False
            chunks.append({"type": "finish-step"})
        return chunks

    def on_usage(self, event: UsageReport) -> list[Chunk]:
        return [metadata(usage=usage_json(event.total), budgetRemaining=event.budget_remaining)]

    def on_finish(self, ending: Ending) -> list[Chunk]:
        done = ending.done
        chunks = [*self._close_text(), *self._sources(done), *self._close_step()]
        meta: Chunk = {
            "usage": usage_json(done.usage),
            "budgetRemaining": done.budget_remaining,
            "stopReason": done.stop_reason,
            "iterations": done.iterations,
        }
        if done.resume is not None or self.decided:  # a continuation clears the spent token
            meta["resume"] = done.resume
        finish_reason = FINISH_REASONS.get(ending.outcome)
        if finish_reason is None:
            error = ending.error
            code = error.code if error is not None else done.stop_reason
            meta["error"] = {"code": code, "message": ending.failure}
            chunks.append({"type": "error", "errorText": ending.failure})
        self.ended = True
        finish = {"type": "finish", "finishReason": finish_reason or "error"}
        chunks.append({**finish, "messageMetadata": meta})
        return chunks

    def _sources(self, done: Done) -> list[Chunk]:
        """A ``source-url`` part per source of the run, after its answer (a continued answer:
        those its message does not show yet)."""
        chunks: list[Chunk] = []
        for source in done.sources:
            if source.url in self._shown_sources:
                continue
            chunk = {"type": "source-url", "sourceId": source_id(source.url), "url": source.url}
            if source.title is not None:
                chunk["title"] = source.title
            chunks.append(chunk)
        return chunks

    def _fail(self, message: str) -> list[Chunk]:
        self.ended = True
        return [
            *self._close_step(),
            {"type": "error", "errorText": message},
            {"type": "finish", "finishReason": "error"},
        ]

    def on_cut(self, message: str) -> list[Chunk]:
        return self._fail(message)

    # -- sub-agents -----------------------------------------------------------------------

    def on_subagent(self, event: Event) -> list[Chunk]:
        return self._subagents.update(event)


STREAM_CUT_MESSAGE = STREAM_CUT.format(advice=UIMessageStream.retry_advice)
"""The ``errorText`` of a cut stream."""
