"""A tool: a name, a description, a pydantic model for its arguments and an async function.

The arguments model is the single source of truth: its JSON Schema is what the
model is shown, and it validates what the model sends back.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, get_type_hints

from pydantic import BaseModel

from agentloop.config import AgentConfig
from agentloop.limits import CancelToken, Deadline, TokenBudget

if TYPE_CHECKING:  # the registry holds tools, the events and models sit beside them: no cycle
    from agentloop.events import _Event
    from agentloop.llm.base import ChatModel
    from agentloop.tools.registry import ToolRegistry


class ToolError(Exception):
    """Raised by a tool for a failure the model should read: ``hint`` says what to try."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass(frozen=True)
class RunInfo:
    """The run a nested run starts from: its settings, model, tools and how models are made."""

    config: AgentConfig
    model: str
    tool_names: tuple[str, ...]
    registry: ToolRegistry = field(repr=False)
    """The server's whole registry, which a nested run selects its tools from."""
    model_factory: Callable[[str], ChatModel] = field(repr=False)
    approval_tools: frozenset[str] = frozenset()
    """Tools whose calls wait for a person in this run: a nested run, which cannot ask one,
    is not offered them, and its calls to them anyway are refused."""
    max_iterations: int | None = None
    """This run's iteration cap: a nested run's is never above it."""
    max_output_tokens: int | None = None
    """This run's cap on each model call's output (``sampling``), which nested runs keep."""


@dataclass(frozen=True)
class NestedRuns:
    """The seam for tools that start runs of their own (``ask_llm``).

    Only tools declared with ``needs_runs=True`` get it, so an ordinary tool never sees
    the run's plumbing, and the tools layer never imports the chat handler.
    """

    run: RunInfo
    forward: Callable[[_Event], None] = field(repr=False)
    """Puts an event of a nested run into this run's stream as it is."""
    round_size: int = 1
    """How many calls of this same tool the current turn made (they run concurrently)."""


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may know about the request that called it."""

    call_id: str
    depth: int
    deadline: Deadline
    budget: TokenBudget
    cancel: CancelToken
    extras: dict[str, Any] = field(default_factory=dict)
    result_max_chars: int | None = None
    """The loop's bound on a rendered result, for tools that fit their result to it rather
    than have its middle cut out."""
    runs: NestedRuns | None = None
    """Set only for tools declared with ``needs_runs=True``."""


ToolFn = Callable[[Any, ToolContext], Awaitable[Any]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args_model: type[BaseModel]
    fn: ToolFn
    timeout_s: float | None = None
    opt_in: bool = False  # offered only when a request (or the server default) names it
    needs_runs: bool = False  # gets ToolContext.runs: it starts nested runs

    @cached_property
    def definition(self) -> dict[str, Any]:
        """The chat-completions tool definition (computed once, so it is byte-stable).

        Without pydantic's titles (``"title": "Query"`` for a field named ``query``): they tell
        the model nothing its name does not, and the definition is sent with every call."""
        from agentloop.tools.schema import UntitledJsonSchema

        schema = self.args_model.model_json_schema(schema_generator=UntitledJsonSchema)
        schema.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": schema},
        }


def tool(
    name: str | None = None,
    *,
    description: str | None = None,
    timeout_s: float | None = None,
    opt_in: bool = False,
    needs_runs: bool = False,
) -> Callable[[ToolFn], Tool]:
    """Make a :class:`Tool` of ``async def f(args: SomeModel, ctx: ToolContext)``.

    The arguments model comes from the first parameter's annotation and the
    description from the docstring unless given.
    """

    def wrap(fn: ToolFn) -> Tool:
        params = list(inspect.signature(fn).parameters)
        hints = get_type_hints(fn)
        args_model = hints.get(params[0]) if params else None
        if not (isinstance(args_model, type) and issubclass(args_model, BaseModel)):
            raise TypeError(f"{fn.__name__}: first parameter must be annotated with a BaseModel")
        text = description or inspect.getdoc(fn)
        if not text:
            raise TypeError(f"{fn.__name__}: a tool needs a description or a docstring")
        return Tool(
            name=name or fn.__name__,
            description=text,
            args_model=args_model,
            fn=fn,
            timeout_s=timeout_s,
            opt_in=opt_in,
            needs_runs=needs_runs,
        )

    return wrap
