"""The chat handler: a validated request and its context in, a stream of events out.

Every entry point (Function URL, local server, CLI, batch worker, ``ask_llm``) goes
through :func:`handle_chat`. The loop runs as a producer task that pushes events
into a queue; this generator yields them, so events of nested runs and of tools
running concurrently reach the client as they happen.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from agentloop.config import AgentConfig, ConfigurationError
from agentloop.events import (
    Done,
    ErrorEvent,
    Event,
    ModelSwitched,
    RunStart,
    TextDelta,
    _Event,
)
from agentloop.limits import CancelToken, Deadline, LambdaContextLike, TokenBudget
from agentloop.llm.base import ChatModel
from agentloop.llm.registry import get_model, parse_model_spec
from agentloop.llm.resilient import ResilientModel, RetryPolicy
from agentloop.loop import AgentLoop, Emitter, RunLimits
from agentloop.models import AssistantMessage, ChatRequest, Usage
from agentloop.tools.base import RunInfo
from agentloop.tools.registry import ToolRegistry, UnknownToolError

logger = logging.getLogger(__name__)


@dataclass
class ChatContext:
    """Everything a run needs besides the request: settings, tools and shared limits.

    A nested run (``ask_llm``) gets a copy with ``depth + 1`` and the *same* budget,
    deadline and cancel token objects as its parent.
    """

    config: AgentConfig = field(default_factory=AgentConfig.from_env)
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    deadline: Deadline = field(default_factory=Deadline)
    cancel: CancelToken = field(default_factory=CancelToken)
    budget: TokenBudget | None = None
    depth: int = 0
    parent_call_id: str | None = None
    request_id: str | None = None
    model_factory: Callable[[str], ChatModel] = get_model
    extras: dict[str, Any] = field(default_factory=dict)
    run_id: str | None = None

    @classmethod
    def for_lambda(cls, lambda_context: LambdaContextLike, **kwargs: Any) -> ChatContext:
        """A context whose deadline is the invocation's remaining time."""
        return cls(deadline=Deadline.from_lambda_context(lambda_context), **kwargs)


def check_model_allowed(spec: str, config: AgentConfig) -> None:
    """Raise :class:`ConfigurationError` unless ``spec`` is well-formed and allowed."""
    provider, _ = parse_model_spec(spec)
    allowed = config.allowed_models
    if allowed is not None and spec not in allowed and f"{provider.name}:*" not in allowed:
        raise ConfigurationError(f"model {spec!r} is not allowed here (allowed: {list(allowed)})")


async def handle_chat(request: ChatRequest, context: ChatContext) -> AsyncIterator[Event]:
    """Run the agent on ``request``, yielding its events; ``done`` is always the last one.

    Closing the iterator early (a client that went away) cancels the run: it stops
    after the tool round in progress and this generator waits for it to wind down.
    """
    queue: asyncio.Queue[_Event | None] = asyncio.Queue()
    emit = Emitter(
        queue.put_nowait,
        run_id=context.run_id,
        depth=context.depth,
        parent_call_id=context.parent_call_id,
    )
    producer = asyncio.create_task(_produce(request, context, emit))
    producer.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        while (event := await queue.get()) is not None:
            yield event  # type: ignore[misc]  # every queued item is one of the Event types
    finally:
        if not producer.done():
            context.cancel.cancel()
            with contextlib.suppress(Exception):
                await producer


async def _produce(request: ChatRequest, context: ChatContext, emit: Emitter) -> None:
    try:
        loop = _prepare(request, context, emit)
    except (ConfigurationError, UnknownToolError) as exc:
        logger.warning("chat request refused: %s", exc)
        code = "configuration" if isinstance(exc, ConfigurationError) else "invalid_request"
        emit(ErrorEvent(code=code, message=str(exc)))
        text = f"I can't answer this request: {exc}"
        emit(TextDelta(text=text))  # what a client shows is always done.text
        budget = context.budget
        emit(
            Done(
                text=text,
                stop_reason="error",
                iterations=0,
                usage=Usage(),
                budget_remaining=budget.root.remaining if budget else 0,
                messages=[AssistantMessage(content=text)],
            )
        )
        return
    await loop.run()


def _prepare(request: ChatRequest, context: ChatContext, emit: Emitter) -> AgentLoop:
    """Resolve model, tools and limits; raise a clear error for anything misconfigured."""
    config = context.config
    spec = request.model or config.default_model
    check_model_allowed(spec, config)
    tools = context.tools.select(
        request.tools if request.tools is not None else config.default_tools
    )
    model = _model_chain(spec, context, emit)
    budget = context.budget
    if budget is None:  # a top-level run: its own budget, shared by any nested runs
        limit = min(request.token_budget or config.token_budget, config.token_budget_cap)
        budget = TokenBudget(limit, final_reserve=config.final_answer_reserve)
    max_iterations = min(request.max_iterations or config.max_iterations, config.max_iterations_cap)
    emit(
        RunStart(
            model=spec,
            tools=tools.names,
            max_iterations=max_iterations,
            token_budget=budget.limit,
            budget_remaining=budget.root.remaining,
        )
    )
    return AgentLoop(
        model=model,
        tools=tools,
        config=config,
        limits=RunLimits(
            max_iterations=max_iterations,
            budget=budget,
            deadline=context.deadline,
            cancel=context.cancel,
        ),
        emit=emit,
        conversation=list(request.messages),
        tool_extras=context.extras,
        run_info=RunInfo(
            config=config,
            model=spec,
            tool_names=tuple(tools.names),
            registry=context.tools,
            model_factory=context.model_factory,
        ),
    )


def _model_chain(spec: str, context: ChatContext, emit: Emitter) -> ChatModel:
    """The requested model, then the configured fallbacks that are usable here."""
    config = context.config
    chain = [context.model_factory(spec)]
    for fallback in config.fallback_models:
        if fallback == spec:
            continue
        try:
            check_model_allowed(fallback, config)
            chain.append(context.model_factory(fallback))
        except ConfigurationError as exc:  # e.g. no key for it: the chain is shorter
            logger.info("fallback %s unavailable: %s", fallback, exc)

    def switched(from_model: str, to_model: str, reason: str) -> None:
        emit(ModelSwitched(from_model=from_model, to_model=to_model, reason=reason))

    return ResilientModel(
        chain=chain,
        deadline=context.deadline,
        policy=RetryPolicy(
            max_attempts=config.retry_max_attempts,
            base_delay_s=config.retry_base_delay_s,
            max_delay_s=config.retry_max_delay_s,
        ),
        on_switch=switched,
        keep_s=config.deadline_reserve_s,
    )


async def collect(request: ChatRequest, context: ChatContext) -> tuple[list[Event], Done]:
    """Run to the end without streaming (batch jobs, tests): every event and the ``done``."""
    events = [event async for event in handle_chat(request, context)]
    last = events[-1]
    assert isinstance(last, Done), "handle_chat always ends with done"
    return events, last
