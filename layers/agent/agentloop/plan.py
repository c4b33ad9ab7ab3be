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

from dataclasses import dataclass
from typing import Literal

from agentloop.config import AgentConfig, ConfigurationError
from agentloop.llm.registry import parse_model_spec
from agentloop.models import ChatRequest, Sampling
from agentloop.output_format import OutputFormat, OutputFormatError
from agentloop.tools.registry import ToolRegistry, UnknownToolError


class PlanError(ValueError):
    """A request this server will not run; ``param`` is the request field at fault."""

    def __init__(self, message: str, param: Literal["model", "tools", "response_format"]) -> None:
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


def check_model_allowed(spec: str, config: AgentConfig) -> None:
    """Raise :class:`ConfigurationError` unless ``spec`` is well-formed and allowed here."""
    provider, _ = parse_model_spec(spec)
    allowed = config.allowed_models
    if allowed is not None and spec not in allowed and f"{provider.name}:*" not in allowed:
        raise ConfigurationError(f"model {spec!r} is not allowed here (allowed: {list(allowed)})")


def clamped_limits(request: ChatRequest, config: AgentConfig) -> tuple[int, int]:
    """``(max_iterations, token_budget)``: the request's, or the defaults, within the caps."""
    return (
        min(request.max_iterations or config.max_iterations, config.max_iterations_cap),
        min(request.token_budget or config.token_budget, config.token_budget_cap),
    )


def plan_run(request: ChatRequest, config: AgentConfig, registry: ToolRegistry) -> RunPlan:
    """The plan for ``request`` on a server with ``config`` and ``registry``, or PlanError."""
    spec = request.model or config.default_model
    try:
        check_model_allowed(spec, config)
    except ConfigurationError as exc:
        raise PlanError(str(exc), "model") from exc
    try:
        tools = registry.select(
            request.tools if request.tools is not None else config.default_tools
        )
    except UnknownToolError as exc:
        raise PlanError(str(exc), "tools") from exc
    try:
        output = OutputFormat.of(request.response_format)
    except OutputFormatError as exc:
        raise PlanError(str(exc), "response_format") from exc
    max_iterations, token_budget = clamped_limits(request, config)
    return RunPlan(spec, tools, max_iterations, token_budget, request.sampling, output)
