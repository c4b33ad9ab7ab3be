"""The agent's own options, as every face carries them in its protocol's extension slot.

Their types and bounds are ``agentloop.models``' (the very types of ``ChatRequest``'s fields):
a face adds only what its protocol needs besides (the OpenAI faces' ``show_tools``, AG-UI's
``model``) by subclassing. A face that cannot ask a person (the OpenAI faces, MCP) uses
:class:`AgentOptions`, which has no ``approval_tools``; one that can uses
:class:`AskingAgentOptions`. :func:`agentloop.models.run_options` is the one mapping to
``ChatRequest``, so an option added here and to ``RUN_OPTIONS`` reaches every face.
"""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel, ConfigDict

from agentloop.models import (
    Dollars,
    Iterations,
    ThreadId,
    Tokens,
    ToolLimits,
    ToolNames,
    run_options,
)
from agentloop.plan import PlanParam


class AgentOptions(BaseModel):
    """The options of a run that no one can be asked about: its tools and its limits.
    Strict, so a misspelt option is a 422 naming it rather than ignored in silence."""

    model_config = ConfigDict(extra="forbid")

    tools: ToolNames | None = None
    max_iterations: Iterations | None = None
    token_budget: Tokens | None = None
    max_cost_usd: Dollars | None = None
    tool_limits: ToolLimits | None = None
    """The most calls of each named tool the run may make, sub-agents included (lowers the
    server's ``AGENTLOOP_TOOL_LIMITS``, never raises them; 0: the tool is not offered)."""
    thread_id: ThreadId | None = None
    """A thread of the caller's to go on with (``"new"``: start one); see ``ChatRequest``."""
    resumable: bool = False
    """Keep the stream in the store so a client can reconnect to it; needs a thread (see
    ``ChatRequest``): the run then outlives a client that leaves."""

    def chat_fields(self) -> dict[str, Any]:
        """These options as ``ChatRequest`` fields (``models.run_options``)."""
        return run_options(self)


class AskingAgentOptions(AgentOptions):
    """The options of a face that can ask a person to approve a call."""

    approval_tools: ToolNames | None = None
    """More tools whose calls wait for a person's approval (added to the server's)."""


_PLAN_PARAMS = frozenset(get_args(PlanParam))


def option_params(options: type[BaseModel], at: str) -> dict[str, str]:
    """Where a plan's refusal of one of ``options``' fields points in a face's request, for
    a face that carries its options at ``at`` (``"agentloop"``; ``""``: at the top level).
    A face's ``plan_params()`` starts from these and adds its protocol's own places (the
    client's tools, the paused run's token and decisions)."""
    prefix = f"{at}." if at else ""
    return {name: prefix + name for name in options.model_fields if name in _PLAN_PARAMS}
