"""Tool results as the model reads them: ``{"ok": ...}`` JSON, bounded in size.

Truncation keeps the head and the tail (the end of a log or a page often matters
as much as its start) and says how much was cut, so the model knows to ask for
less instead of trusting a partial answer as whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentloop.files.models import FileRef


def truncate_middle(text: str, limit: int) -> str:
    """``text`` cut to at most about ``limit`` characters, head and tail kept."""
    if len(text) <= limit:
        return text
    marker = ""
    for _ in range(2):  # the marker's length depends on the number it states
        keep = max(0, limit - len(marker))
        marker = f"\n[... {len(text) - keep} of {len(text)} characters cut ...]\n"
    keep = max(0, limit - len(marker))
    head = keep * 2 // 3
    tail = keep - head
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")


@dataclass(frozen=True)
class ToolOutput:
    """What a tool returns when it made files besides its result: the loop sends a ``file``
    event for each after the call's result."""

    result: Any
    files: tuple[FileRef, ...] = ()


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    result: Any = None
    error: str | None = None
    hint: str | None = None
    files: tuple[FileRef, ...] = ()

    @classmethod
    def denied(cls, reason: str | None) -> ToolResult:
        """A call a person did not approve: the model reads why, and that it should go on."""
        return cls.failure(
            "a person denied this call" + (f": {reason}" if reason else ""),
            hint="do not make it again unless the person asks for it; go on without it",
        )

    @classmethod
    def failure(cls, error: str, hint: str | None = None) -> ToolResult:
        return cls(ok=False, error=error, hint=hint)

    def render(self, max_chars: int) -> str:
        """The JSON text sent to the model; always valid JSON, whatever the size."""
        if not self.ok:
            body: dict[str, Any] = {"ok": False, "error": truncate_middle(self.error or "", 2_000)}
            if self.hint:
                body["hint"] = self.hint
            return json.dumps(body, ensure_ascii=False)
        full = json.dumps({"ok": True, "result": self.result}, ensure_ascii=False, default=str)
        if len(full) <= max_chars:
            return full
        # Too long: carry the result as (truncated) text so the envelope stays valid JSON.
        inner = self.result if isinstance(self.result, str) else _compact(self.result)
        budget = max_chars - 60
        while True:
            rendered = json.dumps(
                {"ok": True, "truncated": True, "result": truncate_middle(inner, budget)},
                ensure_ascii=False,
            )
            # Escaping can lengthen the text; shrink until the whole envelope fits.
            if len(rendered) <= max_chars or budget == 0:
                return rendered
            budget = max(0, budget - (len(rendered) - max_chars))


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
