"""What one run (the top level or one sub-agent) has open on an AG-UI client, and the frames
that open and close its steps, messages and tool calls; plus AG-UI's value shapes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agentloop.events import (
    ApprovalRequest,
    ErrorEvent,
    ModelSwitched,
    Notice,
    ToolCallResult,
    ToolCallStart,
)
from agentloop.models import Usage

JSON = dict[str, Any]


@dataclass
class RunFrames:
    """One run's open step, message and text on the client, and the frames that change them."""

    run_id: str
    """Prefixes its message ids (the top level's is learned from its first event)."""
    subagent: str | None
    """Its ``subagentRunId``; None at the top level."""
    ids: Iterator[int]
    """The stream's message count: with the run id, a message id unique in the thread."""
    step: str | None = None
    message: str | None = None
    """The turn's assistant message: its text and the parent of all its tool calls."""
    text_open: bool = False
    after_tools: bool = False
    """A tool result came this turn: text now (a limit's forced answer) is a new message."""
    error: ErrorEvent | None = None
    """A sub-agent's error event, for its SUBAGENT_ERROR."""

    def new_id(self) -> str:
        return f"{self.run_id}-{next(self.ids)}"

    def tag(self, body: JSON) -> JSON:
        if self.subagent is not None:
            body["subagentRunId"] = self.subagent
        return body

    def turn(self, iteration: int) -> list[JSON]:
        frames = self.close()
        self.message, self.after_tools = None, False
        self.step = f"turn {iteration}"
        return [*frames, self.tag({"type": "STEP_STARTED", "stepName": self.step})]

    def text(self, text: str) -> list[JSON]:
        if not text:
            return []
        frames: list[JSON] = []
        if not self.text_open:
            if self.message is None or self.after_tools:  # text after a tool round: a new one
                self.message, self.after_tools = self.new_id(), False
            self.text_open = True
            start = {"type": "TEXT_MESSAGE_START", "messageId": self.message, "role": "assistant"}
            frames.append(self.tag(start))
        content = {"type": "TEXT_MESSAGE_CONTENT", "messageId": self.message, "delta": text}
        frames.append(self.tag(content))
        return frames

    def reset(self, reason: str) -> list[JSON]:
        """A sub-agent's voided text: its messages are not history, so the voided text stays,
        marked, and the retried text (with the turn's tool calls) goes in a message of its
        own. (The top level's is honoured by :class:`FaceStream`.)"""
        if not self.text_open:
            return []
        end = {
            "type": "TEXT_MESSAGE_END",
            "messageId": self.message,
            "metadata": {"agentloop": {"voided": reason}},
        }
        self.text_open, self.message = False, None
        return [self.tag(end)]

    def tool_call(self, event: ToolCallStart | ApprovalRequest) -> list[JSON]:
        frames = self.close_text()
        if self.message is None:  # a turn's calls share its message, results or not between
            self.message = self.new_id()
        call_id = event.call_id
        start = {
            "type": "TOOL_CALL_START",
            "toolCallId": call_id,
            "toolCallName": event.name,
            "parentMessageId": self.message,
        }
        frames.append(self.tag(start))
        if event.arguments:
            args = {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": event.arguments}
            frames.append(self.tag(args))
        frames.append(self.tag({"type": "TOOL_CALL_END", "toolCallId": call_id}))
        return frames

    def tool_result(self, event: ToolCallResult) -> list[JSON]:
        frames = self.close_text()
        self.after_tools = True
        result = {
            "type": "TOOL_CALL_RESULT",
            "messageId": self.new_id(),
            "toolCallId": event.call_id,
            "content": event.content,
            "role": "tool",
            "metadata": {"agentloop": {"ok": event.ok, "duration_ms": event.duration_ms}},
        }
        frames.append(self.tag(result))
        return frames

    def custom(self, event: Notice | ModelSwitched) -> list[JSON]:
        if isinstance(event, Notice):
            name, value = "agentloop.notice", {"code": event.code, "message": event.message}
        else:
            name = "agentloop.model_switched"
            value = {
                "from_model": event.from_model,
                "to_model": event.to_model,
                "reason": event.reason,
            }
        return [self.tag({"type": "CUSTOM", "name": name, "value": value})]

    def close_text(self) -> list[JSON]:
        if not self.text_open:
            return []
        self.text_open = False
        return [self.tag({"type": "TEXT_MESSAGE_END", "messageId": self.message})]

    def close(self) -> list[JSON]:
        """End the run's open text and step (its tool calls are always closed)."""
        frames = self.close_text()
        if self.step is not None:
            frames.append(self.tag({"type": "STEP_FINISHED", "stepName": self.step}))
            self.step = None
        return frames


def frame(chunk: JSON) -> bytes:
    """One AG-UI event as its SSE message."""
    return f"data: {json.dumps(chunk)}\n\n".encode()


def usage_json(usage: Usage) -> JSON:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cached_tokens": usage.cached_tokens,
        "total_tokens": usage.total_tokens,
    }


def usage_list(by_model: dict[str, Usage]) -> list[JSON]:
    """AG-UI's TokenUsage per model: the totals, and the cached part of the input."""
    entries: list[JSON] = []
    for spec, usage in by_model.items():
        provider, _, model = spec.partition(":")
        entries.append(
            {
                "provider": provider,
                "model": model or spec,
                "inputTokens": usage.prompt_tokens,
                "outputTokens": usage.completion_tokens,
                "totalTokens": usage.total_tokens,
                "cachedInputTokens": usage.cached_tokens,
            }
        )
    return entries
