"""Sub-agents on the UI message stream: one ``data-subagent`` part per ``ask_llm`` call.

The client replaces a data part with the same id in place, so each update carries the whole
state of every sub-agent that call started (``queries`` starts several).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentloop.events import (
    ErrorEvent,
    Event,
    ModelSwitched,
    Notice,
    SubagentFinish,
    SubagentStart,
    TextDelta,
    TextReset,
    ToolCallResult,
    ToolCallStart,
    TurnStart,
)
from agentloop.faces.ui_stream.chunks import Chunk, switch_notice, tool_input, usage_json
from agentloop.tools.results import truncate_middle

SUBAGENT_OUTPUT_PREVIEW = 1_000
"""Characters of a sub-agent's tool result shown in its data part, which is resent whole on
every update (the result itself goes to the sub-agent, and the answer to the tool part)."""


@dataclass
class Subagent:
    """One sub-agent's state as its ``data-subagent`` part shows it."""

    run_id: str
    query: str
    depth: int
    text: str = ""
    shown_text: int = 0
    """Length of the text in the last update sent (text updates are sent in growing steps)."""
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    notices: list[dict[str, str]] = field(default_factory=list)
    error: dict[str, str] | None = None
    outcome: dict[str, Any] = field(default_factory=dict)

    def view(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "query": self.query,
            "status": "finished" if self.outcome else "running",
            "text": self.text,
            "tools": list(self.tools.values()),
            "notices": self.notices,
            "error": self.error,
            **self.outcome,
        }

    def add_text(self, text: str) -> bool:
        """Whether the text has grown enough to be worth an update (linear in total)."""
        self.text += text
        return len(self.text) - self.shown_text >= max(200, self.shown_text // 2)

    def clear_text(self) -> bool:
        """A new turn, or voided text: whether there was text to clear."""
        had_text = bool(self.text)
        self.text = ""
        return had_text

    def tool_started(self, event: ToolCallStart) -> None:
        self.tools[event.call_id] = {
            "toolCallId": event.call_id,
            "toolName": event.name,
            "input": tool_input(event.arguments),
            "state": "input-available",
        }

    def tool_finished(self, event: ToolCallResult) -> None:
        self.text = ""
        entry = self.tools.setdefault(
            event.call_id, {"toolCallId": event.call_id, "toolName": event.name}
        )
        preview = truncate_middle(event.content, SUBAGENT_OUTPUT_PREVIEW)
        entry["state"] = "output-available" if event.ok else "output-error"
        entry["output" if event.ok else "errorText"] = preview
        entry["durationMs"] = event.duration_ms

    def finished(self, event: SubagentFinish) -> None:
        self.outcome = {
            "stopReason": event.stop_reason,
            "iterations": event.iterations,
            "usage": usage_json(event.usage),
            "budgetRemaining": event.budget_remaining,
        }

    def update(self, event: Event) -> bool:
        """Apply one of its events; whether its part is worth sending again."""
        if isinstance(event, TextDelta):
            return self.add_text(event.text)
        if isinstance(event, TurnStart | TextReset):
            return self.clear_text()
        if isinstance(event, ToolCallStart):
            self.tool_started(event)
        elif isinstance(event, ToolCallResult):
            self.tool_finished(event)
        elif isinstance(event, Notice):
            self.notices.append({"code": event.code, "message": event.message})
        elif isinstance(event, ModelSwitched):
            code, message = switch_notice(event)
            self.notices.append({"code": code, "message": message})
        elif isinstance(event, ErrorEvent):
            self.error = {"code": event.code, "message": event.message}
        elif isinstance(event, SubagentFinish):
            self.finished(event)
        else:
            return False
        return True


@dataclass
class SubagentCall:
    """The sub-agents one ``ask_llm`` call started: one data part."""

    call_id: str
    depth: int
    agents: list[Subagent] = field(default_factory=list)

    def chunk(self) -> Chunk:
        return {
            "type": "data-subagent",
            "id": self.call_id,
            "data": {
                "callId": self.call_id,
                "depth": self.depth,
                "agents": [agent.view() for agent in self.agents],
            },
        }


class Subagents:
    """Every sub-agent of a run, by the ``ask_llm`` call that started it."""

    def __init__(self) -> None:
        self._calls: dict[str, SubagentCall] = {}
        self._agents: dict[str, tuple[SubagentCall, Subagent]] = {}

    def update(self, event: Event) -> list[Chunk]:
        """Update the sub-agent's data part; returns it when something worth showing changed."""
        if isinstance(event, SubagentStart):
            call = self._calls.get(event.call_id)
            if call is None:
                call = self._calls[event.call_id] = SubagentCall(event.call_id, event.depth)
            agent = Subagent(event.run_id, event.query, event.depth)
            call.agents.append(agent)
            self._agents[event.run_id] = (call, agent)
            return [call.chunk()]
        found = self._agents.get(event.run_id)
        if found is None:
            return []
        call, agent = found
        if not agent.update(event):
            return []
        agent.shown_text = len(agent.text)
        return [call.chunk()]
