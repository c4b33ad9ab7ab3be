"""The spans of one traced request, built from its event stream (see ``agentloop.tracing``:
imported only when tracing is on)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentloop.events import (
    ApprovalRequest,
    Done,
    ErrorEvent,
    Event,
    ModelSwitched,
    Notice,
    RunStart,
    SubagentFinish,
    SubagentStart,
    TextDelta,
    TextReset,
    ToolCallResult,
    ToolCallStart,
    TurnStart,
    UsageReport,
)
from agentloop.logs import PRINCIPAL_ID
from agentloop.models import Message, Usage

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

logger = logging.getLogger(__name__)

AGENT_NAME = "agentloop"
FLUSH_TIMEOUT_MS = 2_000
"""At most this long at the end of a request to hand its spans over (a Lambda container
freezes after the response, so spans still buffered then would be late or lost)."""


def _split(spec: str) -> tuple[str, str]:
    """``provider:model`` -> (provider, model); a bare name has no provider."""
    provider, sep, model = spec.partition(":")
    return (provider, model) if sep else ("", spec)


def _message_json(message: Message) -> dict[str, Any]:
    """One chat message in the conventions' shape: a role and its parts."""
    data = message.model_dump(exclude_none=True)
    parts: list[dict[str, Any]] = []
    content = data.get("content")
    if message.role == "tool":
        parts.append(
            {"type": "tool_call_response", "id": data.get("tool_call_id"), "response": content}
        )
    elif isinstance(content, str):
        parts.append({"type": "text", "content": content})
    elif content is not None:
        parts.append({"type": "text", "content": json.dumps(content)})
    for call in data.get("tool_calls") or ():
        function = call.get("function", {})
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": function.get("name"),
                "arguments": function.get("arguments"),
            }
        )
    return {"role": message.role, "parts": parts}


def _usage_attributes(usage: Usage) -> dict[str, int]:
    return {
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.completion_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cached_tokens,
    }


class RunObserver:
    """Turns one request's events (every depth) into a tree of spans."""

    def __init__(
        self,
        provider: TracerProvider,
        messages: Sequence[Message],
        request_id: str | None,
        model: str,
        *,
        content: bool,
    ) -> None:
        from opentelemetry import trace

        self._trace = trace
        self._provider = provider
        self._tracer: Tracer = provider.get_tracer("agentloop")
        self._content = content
        self._request_id = request_id or ""
        self._principal = PRINCIPAL_ID.get()  # who the request is for, as the app set it
        self._runs: dict[str, Span] = {}
        self._models: dict[str, str] = {}
        self._turns: dict[str, Span] = {}
        self._texts: dict[str, list[str]] = {}
        self._tools: dict[tuple[int, str], Span] = {}
        self._failed: set[int] = set()
        self._model = model
        self._root = self._run_span(None, run_id=None, depth=0, model=model)
        if content:
            self._root.set_attribute(
                "gen_ai.input.messages", json.dumps([_message_json(m) for m in messages])
            )

    def _common(self, run_id: str | None, depth: int) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "agentloop.request_id": self._request_id,
            "agentloop.depth": depth,
        }
        if self._principal is not None:
            attributes["agentloop.principal"] = self._principal
        if run_id:
            attributes["agentloop.run_id"] = run_id
        return attributes

    def _start(self, name: str, parent: Span | None, kind: Any, attributes: dict[str, Any]) -> Span:
        context = None if parent is None else self._trace.set_span_in_context(parent)
        return self._tracer.start_span(name, context=context, kind=kind, attributes=attributes)

    def _run_span(self, parent: Span | None, run_id: str | None, depth: int, model: str) -> Span:
        provider, name = _split(model)
        attributes = self._common(run_id, depth) | {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": AGENT_NAME,
            "gen_ai.request.model": name,
        }
        if run_id:
            attributes["gen_ai.agent.id"] = run_id
        if provider:
            attributes["gen_ai.provider.name"] = provider
        kind = self._trace.SpanKind.INTERNAL
        return self._start(f"invoke_agent {AGENT_NAME}", parent, kind, attributes)

    def _run_of(self, event: Event) -> Span:
        """The span of the run that emitted ``event`` (the top level's until it is known)."""
        span = self._runs.get(event.run_id)
        if span is None and event.depth == 0:
            self._runs[event.run_id] = span = self._root
            self._root.set_attribute("agentloop.run_id", event.run_id)
            self._root.set_attribute("gen_ai.agent.id", event.run_id)
        return span or self._root

    def _fail(self, span: Span, error_type: str, message: str) -> None:
        self._failed.add(id(span))
        span.set_attribute("error.type", error_type)
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, message))

    def see(self, event: Event) -> None:
        """Record one event of the stream (called for each, in order); a failure here is
        logged and never reaches the run."""
        try:
            self._see(event)
        except Exception:
            logger.exception("tracing: could not record a %s event", event.type)

    def _see(self, event: Event) -> None:
        """Dispatch one event to what it starts, ends or marks. Text deltas, the most
        frequent events, are handled inline: this runs once per event of the stream."""
        run = self._run_of(event)
        if isinstance(event, RunStart):
            self._run_start(event, run)
        elif isinstance(event, TurnStart):
            self._turn_start(event, run)
        elif isinstance(event, TextDelta):
            if event.run_id in self._texts:
                self._texts[event.run_id].append(event.text)
        elif isinstance(event, TextReset):
            if event.run_id in self._texts:
                self._texts[event.run_id].clear()
        elif isinstance(event, UsageReport):
            self._turn_end(event)
        elif isinstance(event, ModelSwitched):
            self._model_switched(event, run)
        elif isinstance(event, ToolCallStart):
            self._tool_start(event, run)
        elif isinstance(event, ToolCallResult):
            self._tool_end(event)
        elif isinstance(event, ApprovalRequest):
            run.add_event("agentloop.approval_request", {"gen_ai.tool.name": event.name})
        elif isinstance(event, SubagentStart):
            self._subagent_start(event, run)
        elif isinstance(event, SubagentFinish):
            self._subagent_end(event)
        elif isinstance(event, Notice):
            run.add_event("agentloop.notice", {"code": event.code, "message": event.message})
        elif isinstance(event, ErrorEvent):
            self._error(event, run)
        elif isinstance(event, Done) and run is self._root:
            self._done(event, run)

    def _run_start(self, event: RunStart, run: Span) -> None:
        """A run's requested model (its turns' default) and tools."""
        self._models[event.run_id] = event.model
        if event.depth == 0:
            self._model = event.model
        run.set_attribute("gen_ai.request.model", _split(event.model)[1])
        run.set_attribute("agentloop.tools", event.tools)

    def _model_switched(self, event: ModelSwitched, run: Span) -> None:
        """A fallback model from now on: later turns name it; the switch is marked on the
        turn it happened in (or the run, between turns)."""
        self._models[event.run_id] = event.to_model
        (self._turns.get(event.run_id) or run).add_event(
            "agentloop.model_switched",
            {"from": event.from_model, "to": event.to_model, "reason": event.reason},
        )

    def _subagent_start(self, event: SubagentStart, run: Span) -> None:
        """A sub-agent's run span, under the ``ask_llm`` call that started it."""
        parent = self._tools.get((event.depth - 1, event.call_id), run)
        self._runs[event.run_id] = self._run_span(parent, event.run_id, event.depth, self._model)
        self._runs[event.run_id].set_attribute(
            "agentloop.parent_call_id", event.parent_call_id or ""
        )

    def _subagent_end(self, event: SubagentFinish) -> None:
        """End a sub-agent's run span with how it stopped and what it used."""
        span = self._runs.pop(event.run_id, None)
        if span is not None:
            self._end_run(span, event.stop_reason, event.usage, event.iterations)

    def _error(self, event: ErrorEvent, run: Span) -> None:
        """An error fails the open turn (ending it: it will not report usage) and its run."""
        turn = self._turns.pop(event.run_id, None)
        self._texts.pop(event.run_id, None)
        if turn is not None:
            self._fail(turn, event.code, event.message)
            turn.end()
        self._fail(run, event.code, event.message)

    def _done(self, event: Done, run: Span) -> None:
        """The request's end: the top-level span gets the answer (if content is on) and ends."""
        if self._content:
            output = [{"role": "assistant", "parts": [{"type": "text", "content": event.text}]}]
            run.set_attribute("gen_ai.output.messages", json.dumps(output))
        self._end_run(run, event.stop_reason, event.usage, event.iterations)
        self._runs.clear()

    def _turn_start(self, event: TurnStart, run: Span) -> None:
        model = self._models.get(event.run_id) or self._model
        provider, name = _split(model)
        attributes = self._common(event.run_id, event.depth) | {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": name,
            "agentloop.iteration": event.iteration,
        }
        if provider:
            attributes["gen_ai.provider.name"] = provider
        old = self._turns.pop(event.run_id, None)
        if old is not None:  # a turn that never reported (should not happen): close it
            old.end()
        kind = self._trace.SpanKind.CLIENT
        self._turns[event.run_id] = self._start(f"chat {name}", run, kind, attributes)
        if self._content:
            self._texts[event.run_id] = []

    def _turn_end(self, event: UsageReport) -> None:
        span = self._turns.pop(event.run_id, None)
        if span is None:
            return
        provider, name = _split(event.model)
        span.set_attribute("gen_ai.response.model", name)
        if provider:
            span.set_attribute("gen_ai.provider.name", provider)
        span.set_attributes(_usage_attributes(event.usage))
        if event.finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [event.finish_reason])
        text = self._texts.pop(event.run_id, None)
        if text is not None:
            message: dict[str, Any] = {
                "role": "assistant",
                "parts": [{"type": "text", "content": "".join(text)}],
            }
            if event.finish_reason:
                message["finish_reason"] = event.finish_reason
            span.set_attribute("gen_ai.output.messages", json.dumps([message]))
        span.end()

    def _tool_start(self, event: ToolCallStart, run: Span) -> None:
        attributes = self._common(event.run_id, event.depth) | {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.name,
            "gen_ai.tool.call.id": event.call_id,
            "gen_ai.tool.type": "function",
        }
        if self._content:
            attributes["gen_ai.tool.call.arguments"] = event.arguments
        kind = self._trace.SpanKind.INTERNAL
        span = self._start(f"execute_tool {event.name}", run, kind, attributes)
        self._tools[(event.depth, event.call_id)] = span

    def _tool_end(self, event: ToolCallResult) -> None:
        span = self._tools.pop((event.depth, event.call_id), None)
        if span is None:
            return
        if self._content:
            span.set_attribute("gen_ai.tool.call.result", event.content)
        if not event.ok:
            self._fail(span, "tool_error", "the tool call failed")
        span.end()

    def _end_run(self, span: Span, stop_reason: str, usage: Usage, iterations: int) -> None:
        span.set_attribute("agentloop.stop_reason", stop_reason)
        span.set_attribute("agentloop.iterations", iterations)
        span.set_attributes(_usage_attributes(usage))
        if stop_reason == "error" and id(span) not in self._failed:
            self._fail(span, "error", "the run ended with an error")
        span.end()

    async def finish(self) -> None:
        """End what is still open (a stream closed early) and hand the spans to the exporter."""
        import asyncio

        for span in [*self._turns.values(), *self._tools.values(), *self._runs.values()]:
            span.end()
        if self._root.is_recording():
            self._root.set_attribute("agentloop.stop_reason", "cancelled")
            self._root.end()
        self._turns.clear()
        self._tools.clear()
        self._runs.clear()
        flush = getattr(self._provider, "force_flush", None)
        if flush is not None:
            try:
                await asyncio.to_thread(flush, FLUSH_TIMEOUT_MS)
            except Exception:
                logger.exception("tracing: could not flush the spans")
