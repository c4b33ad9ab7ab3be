"""How one tool call is run: the rules every call follows, apart from the loop.

The loop decides *when* calls run (a round, concurrently, results in the order asked
for); this module decides what running one means: look the tool up, parse and
validate its arguments, count it against its tool's call limit (``tool_limits``, shared by the
whole request), give it a context and a time limit, and turn every failure into an error
result the model can read and recover from. Nothing here raises.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ValidationError

from agentloop.limits import CancelToken, Deadline, TokenBudget
from agentloop.models import ToolCall
from agentloop.tools.base import NestedRuns, Tool, ToolContext, ToolError
from agentloop.tools.registry import ToolRegistry
from agentloop.tools.results import ToolOutput, ToolResult

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolScope:
    """What every call of one run shares: the request's limits and the server's extras."""

    depth: int
    deadline: Deadline
    budget: TokenBudget
    cancel: CancelToken
    extras: dict[str, Any] = field(default_factory=dict)
    result_max_chars: int | None = None
    runs: NestedRuns | None = None
    """For tools that declare ``needs_runs``; each call gets it with its round's size."""


@dataclass(frozen=True)
class ToolExecutor:
    """Runs single calls against ``registry``; testable without a loop or a model."""

    registry: ToolRegistry
    scope: ToolScope
    timeout_s: float
    """A call's time limit unless its tool sets its own; always capped by the deadline."""
    keep_s: float = 0.0
    """How long before the deadline every call must have ended."""

    def refuse(self, problem: str) -> ToolResult:
        """The result of a call the model wrote wrongly (bad name, id...): answered, not run."""
        return ToolResult.failure(problem, hint=f"call one of the available tools: {self._names}")

    async def execute(self, call: ToolCall, round_size: int = 1) -> ToolResult:
        """Run one call; every failure becomes an error result the model can act on."""
        item = self.registry.get(call.name)
        if item is None:
            return ToolResult.failure(
                f"unknown tool {call.name!r}", hint=f"available tools: {self._names}"
            )
        args = parse_arguments(item, call.arguments)
        if isinstance(args, ToolResult):
            return args
        # Counted before the first await: a round's calls start in the order asked, so
        # they are counted in that order too.
        refused = self._past_limit(call.name)
        if refused is not None:
            return refused
        timeout = self.scope.deadline.cap(item.timeout_s or self.timeout_s, keep=self.keep_s)
        try:
            async with asyncio.timeout(timeout):
                value = await item.fn(args, self._context(call, item, round_size))
        except TimeoutError:
            return ToolResult.failure(
                f"{call.name} timed out after {timeout:.1f} s",
                hint="try a smaller request, or answer without this tool",
            )
        except ToolError as exc:
            return ToolResult.failure(exc.message, hint=exc.hint)
        except Exception as exc:
            logger.warning("tool %s raised %s", call.name, type(exc).__name__, exc_info=True)
            return ToolResult.failure(f"{call.name} failed: {type(exc).__name__}: {exc}")
        if isinstance(value, ToolOutput):
            return ToolResult(ok=True, result=value.result, files=value.files)
        return ToolResult(ok=True, result=value)

    def _past_limit(self, name: str) -> ToolResult | None:
        """The refusal of a call past its tool's limit in this request; None: it may run."""
        calls = self.scope.budget.root.tool_calls
        limit = calls.take(name) if calls is not None else None
        if limit is None:
            return None
        return ToolResult.failure(
            f"not run: {name} may be called at most {limit} time(s) in this request, "
            "and that limit is used up",
            hint=f"answer without {name}, or use another tool",
        )

    @property
    def _names(self) -> str:
        return ", ".join(self.registry.names) or "none"

    def _context(self, call: ToolCall, item: Tool, round_size: int) -> ToolContext:
        scope = self.scope
        runs = scope.runs if item.needs_runs else None
        return ToolContext(
            call_id=call.id,
            depth=scope.depth,
            deadline=scope.deadline,
            budget=scope.budget,
            cancel=scope.cancel,
            extras=scope.extras,
            result_max_chars=scope.result_max_chars,
            runs=replace(runs, round_size=round_size) if runs is not None else None,
        )


def parse_arguments(item: Tool, arguments: str) -> BaseModel | ToolResult:
    """The validated arguments, or an error result saying what to fix (each field named)."""
    try:
        raw = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        return ToolResult.failure(
            f"arguments are not valid JSON ({exc.msg} at position {exc.pos})",
            hint="send the arguments as one JSON object matching the tool's schema",
        )
    if not isinstance(raw, dict):
        return ToolResult.failure(
            "arguments must be a JSON object", hint="wrap the arguments in {...}"
        )
    try:
        return item.args_model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
            for err in exc.errors()
        )
        return ToolResult.failure(
            f"invalid arguments: {problems}", hint="fix the fields named and call again"
        )
