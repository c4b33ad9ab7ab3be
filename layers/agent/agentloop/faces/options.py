"""The agent's own options, as every face carries them in its protocol's extension slot.

Defined once, with their bounds: a face adds only what its protocol needs besides (the OpenAI
faces' ``show_tools``, AG-UI's ``model``) by subclassing. A face that cannot ask a person
(the OpenAI faces, MCP) uses :class:`AgentOptions`, which has no ``approval_tools``; one that
can uses :class:`AskingAgentOptions`. :func:`agentloop.models.run_options` is the one mapping
to ``ChatRequest``, so an option added here and to ``RUN_OPTIONS`` reaches every face.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from agentloop.models import MAX_TOOL_CALLS, MAX_TOOL_LIMITS, run_options
from agentloop.plan import PlanParam

MAX_TOOL_NAMES = 100
"""Names in ``tools`` or ``approval_tools``: more than any server offers."""
MAX_TOOL_NAME_CHARS = 128
"""As OpenAI bounds a function's name (the longest an MCP tool's prefixed name may be)."""
MAX_COST_USD = 1_000_000
"""The highest ``max_cost_usd`` a request may ask for (the server's cap clamps it lower)."""

ToolName = Annotated[str, StringConstraints(max_length=MAX_TOOL_NAME_CHARS)]
ToolNames = Annotated[list[ToolName] | None, Field(max_length=MAX_TOOL_NAMES)]
CallCount = Annotated[int, Field(ge=0, le=MAX_TOOL_CALLS)]
ToolCallLimits = Annotated[
    dict[Annotated[ToolName, StringConstraints(min_length=1)], CallCount] | None,
    Field(max_length=MAX_TOOL_LIMITS),
]


class AgentOptions(BaseModel):
    """The options of a run that no one can be asked about: its tools and its limits.
    Strict, so a misspelt option is a 422 naming it rather than ignored in silence."""

    model_config = ConfigDict(extra="forbid")

    tools: ToolNames = None
    max_iterations: int | None = Field(default=None, ge=1)
    token_budget: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0, le=MAX_COST_USD)
    tool_limits: ToolCallLimits = None
    """The most calls of each named tool the run may make, sub-agents included (lowers the
    server's ``AGENTLOOP_TOOL_LIMITS``, never raises them; 0: the tool is not offered)."""

    def chat_fields(self) -> dict[str, Any]:
        """These options as ``ChatRequest`` fields (``models.run_options``)."""
        return run_options(self)


class AskingAgentOptions(AgentOptions):
    """The options of a face that can ask a person to approve a call."""

    approval_tools: ToolNames = None
    """More tools whose calls wait for a person's approval (added to the server's)."""


_PLAN_PARAMS = frozenset(get_args(PlanParam))


def option_params(options: type[BaseModel], at: str) -> dict[str, str]:
    """Where a plan's refusal of one of ``options``' fields points in a face's request, for
    a face that carries its options at ``at`` (``"agentloop"``; ``""``: at the top level).
    A face's ``plan_params()`` starts from these and adds its protocol's own places (the
    client's tools, the paused run's token and decisions)."""
    prefix = f"{at}." if at else ""
    return {name: prefix + name for name in options.model_fields if name in _PLAN_PARAMS}
