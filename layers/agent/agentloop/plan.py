"""One plan per request: the model, tools and limits a run will use, decided once.

Every face (``/chat``, the OpenAI face, the CLI, research jobs, ``ask_llm``) asks for the plan
once, before anything streams, and :func:`agentloop.chat.handle_chat` runs that plan. A
request the server will not run fails here with a :class:`PlanError` naming the field at
fault, which each face turns into its own answer (a 422, an exit status, a rejected job):
validation happens once, and the HTTP layer never reaches up into the chat handler for it.

Pure: no environment, no provider keys, no I/O. Whether a provider's key is set is learned
when the model is built, as a run's ``configuration`` error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from agentloop.config import AgentConfig, ConfigurationError
from agentloop.llm.registry import model_allowed, parse_model_spec
from agentloop.models import ChatRequest, ClientTool, Sampling
from agentloop.pricing import Pricer
from agentloop.tools.registry import ToolRegistry, UnknownToolError

if TYPE_CHECKING:
    from agentloop.continuation import Resumption
    from agentloop.signing import Signer

if TYPE_CHECKING:
    from agentloop.output_format import OutputFormat

PlanParam = Literal[
    "model",
    "tools",
    "response_format",
    "approval_tools",
    "client_tools",
    "resume",
    "approvals",
    "max_cost_usd",
    "tool_limits",
]


class PlanError(ValueError):
    """A request this server will not run; ``param`` is the request field at fault."""

    def __init__(self, message: str, param: PlanParam) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@dataclass(frozen=True)
class RunPlan:
    """What a run will use. Limits are the request's, clamped to the server's caps."""

    model: str
    tools: ToolRegistry
    max_iterations: int
    token_budget: int
    sampling: Sampling | None = None
    output: OutputFormat | None = None
    """The final answer's required shape (``response_format``); None: plain text."""
    approval_tools: frozenset[str] = frozenset()
    """Tools whose calls wait for a person's approval (the server's and the request's)."""
    client_tools: tuple[ClientTool, ...] = ()
    resumption: Resumption | None = None
    """A paused run this request continues (checked: see ``continuation.py``)."""
    max_cost_usd: float | None = None
    """The request's dollar budget (None: none), shared like the token budget."""
    tool_limits: dict[str, int] = field(default_factory=dict)
    """The most calls of each limited tool (the server's, lowered by the request's), counted
    across the whole request like the token budget; tools limited to 0 are not offered."""
    quota_caps: frozenset[str] = frozenset()
    """Which of ``token_budget`` ("tokens") and ``max_cost_usd`` ("usd") the caller's quota
    lowered (``agentloop.quota``): running out of one ends the run with ``quota``."""


def check_model_allowed(spec: str, config: AgentConfig) -> None:
    """Raise :class:`ConfigurationError` unless ``spec`` is well-formed and allowed here."""
    parse_model_spec(spec)
    allowed = config.allowed_models
    if allowed is not None and not model_allowed(spec, allowed):
        raise ConfigurationError(f"model {spec!r} is not allowed here (allowed: {list(allowed)})")


def clamped_limits(request: ChatRequest, config: AgentConfig) -> tuple[int, int]:
    """``(max_iterations, token_budget)``: the request's, or the defaults, within the caps."""
    return (
        min(request.max_iterations or config.max_iterations, config.max_iterations_cap),
        min(request.token_budget or config.token_budget, config.token_budget_cap),
    )


def clamped_cost(request: ChatRequest, config: AgentConfig) -> float | None:
    """The request's dollar budget, or the server's default, within the server's cap."""
    asked = request.max_cost_usd if request.max_cost_usd is not None else config.max_cost_usd
    cap = config.max_cost_usd_cap
    if asked is None:
        return cap
    return asked if cap is None else min(asked, cap)


def plan_run(
    request: ChatRequest,
    config: AgentConfig,
    registry: ToolRegistry,
    signer: Signer | None = None,
    *,
    can_ask: bool = True,
) -> RunPlan:
    """The plan for ``request`` on a server with ``config`` and ``registry``, or PlanError.

    ``signer`` checks a paused run's continuation; without one, none is accepted. A face
    that cannot ask a person (``can_ask=False``: the OpenAI faces) is not offered the tools
    that would need one; naming one of them is a PlanError.

    The checks run in this order, which decides the refusal a request with several faults
    gets: model, tools, response_format, approval_tools, tool_limits, (unaskable tools),
    client_tools, resume/approvals, max_cost_usd."""
    spec = _planned_model(request, config)
    tools = _planned_tools(request, config, registry)
    output = _planned_output(request)
    approval_tools = _planned_approval_tools(request, config, registry)
    tool_limits = _planned_tool_limits(request, config, registry)
    tools = tools.without(*(name for name, count in tool_limits.items() if count == 0))
    if not can_ask:
        tools, approval_tools = _without_asking(request, tools, approval_tools)
    client_tools = _planned_client_tools(request, registry)
    resumption = _planned_resumption(request, signer)
    max_iterations, token_budget = clamped_limits(request, config)
    max_cost_usd = _planned_cost(request, config, spec)
    return RunPlan(
        spec,
        tools,
        max_iterations,
        token_budget,
        request.sampling,
        output,
        approval_tools,
        client_tools,
        resumption,
        max_cost_usd,
        tool_limits,
    )


def _planned_model(request: ChatRequest, config: AgentConfig) -> str:
    """The model spec to run: the request's or the default, well-formed and allowed here."""
    spec = request.model or config.default_model
    try:
        check_model_allowed(spec, config)
    except ConfigurationError as exc:
        raise PlanError(str(exc), "model") from exc
    return spec


def _planned_tools(
    request: ChatRequest, config: AgentConfig, registry: ToolRegistry
) -> ToolRegistry:
    """The server tools offered: the request's list, or the defaults; all must exist."""
    try:
        return registry.select(request.tools if request.tools is not None else config.default_tools)
    except UnknownToolError as exc:
        raise PlanError(str(exc), "tools") from exc


def _planned_output(request: ChatRequest) -> OutputFormat | None:
    """The final answer's required shape, from ``response_format`` (its module is loaded only
    for a run that asks for one)."""
    if request.response_format is None or request.response_format.type == "text":
        return None
    from agentloop.output_format import OutputFormat, OutputFormatError

    try:
        return OutputFormat.of(request.response_format)
    except OutputFormatError as exc:
        raise PlanError(str(exc), "response_format") from exc


def _planned_approval_tools(
    request: ChatRequest, config: AgentConfig, registry: ToolRegistry
) -> frozenset[str]:
    """The server's approval tools plus the request's; the request may name only real tools.

    The server's own list is trusted as is (it may name tools that are not loaded)."""
    approval_tools = frozenset(config.approval_tools) | frozenset(request.approval_tools or ())
    unknown = sorted(approval_tools - set(registry.names) - set(config.approval_tools))
    if unknown:
        raise PlanError(f"approval_tools: no such tool(s) here: {unknown}", "approval_tools")
    return approval_tools


def _planned_tool_limits(
    request: ChatRequest, config: AgentConfig, registry: ToolRegistry
) -> dict[str, int]:
    """The server's call limits, lowered by the request's: a request never raises one (a
    count above the server's is clamped to it, as the other limits are) nor lifts one, and
    may name only real tools. The server's own are trusted as they are (as its approval
    tools are: it may name tools that are not loaded)."""
    asked = request.tool_limits or {}
    unknown = sorted(set(asked) - set(registry.names) - set(config.tool_limits))
    if unknown:
        raise PlanError(f"tool_limits: no such tool(s) here: {unknown}", "tool_limits")
    limits = dict(config.tool_limits)
    for name, count in asked.items():
        limits[name] = min(count, limits.get(name, count))
    return limits


def _without_asking(
    request: ChatRequest, tools: ToolRegistry, approval_tools: frozenset[str]
) -> tuple[ToolRegistry, frozenset[str]]:
    """For a face that cannot ask a person: drop the tools that would need one.

    Dropping a default quietly is fine; a request that named one asked for the impossible."""
    waiting = sorted(approval_tools & set(tools.names))
    if waiting and request.tools is not None:
        raise PlanError(
            f"tools: {waiting} need a person's approval, which cannot be asked for here "
            "(/chat, /api/chat and /ag-ui can ask)",
            "tools",
        )
    return tools.without(*waiting), frozenset()


def _planned_client_tools(request: ChatRequest, registry: ToolRegistry) -> tuple[ClientTool, ...]:
    """The caller's own tools; none may share a server tool's name (whose call would it be?)."""
    client_tools = tuple(request.client_tools or ())
    clashes = sorted({t.function.name for t in client_tools} & set(registry.names))
    if clashes:
        raise PlanError(f"client_tools: named like a server tool: {clashes}", "client_tools")
    return client_tools


def _planned_resumption(request: ChatRequest, signer: Signer | None) -> Resumption | None:
    """The paused run this request continues, checked against ``signer``; None: a new run."""
    if request.resume is None and not request.approvals:
        return None
    if signer is None:
        raise PlanError("resume: this server does not continue paused runs", "resume")
    from agentloop.continuation import resume  # loaded by the runs that continue
    from agentloop.signing import ContinuationError

    try:
        return resume(request, signer)
    except ContinuationError as exc:
        raise PlanError(exc.message, exc.param) from exc


def _planned_cost(request: ChatRequest, config: AgentConfig, spec: str) -> float | None:
    """The dollar budget, which can only be kept for a model whose price is known.

    The fault is the request's ``max_cost_usd`` if it set one, else its ``model`` (the
    budget is then the server's own)."""
    max_cost_usd = clamped_cost(request, config)
    if max_cost_usd is not None and not Pricer(config.prices).knows(spec):
        raise PlanError(
            f"max_cost_usd: no price is known for model {spec!r}, so a dollar budget cannot be "
            "kept (the operator can add it to AGENTLOOP_PRICES)",
            "max_cost_usd" if request.max_cost_usd is not None else "model",
        )
    return max_cost_usd
