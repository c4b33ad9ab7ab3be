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

from agentloop import tracing
from agentloop.config import AgentConfig, ConfigurationError
from agentloop.events import (
    Done,
    ErrorCode,
    Event,
    ModelSwitched,
    RunStart,
    _Event,
)
from agentloop.limits import (
    CancelToken,
    Deadline,
    LambdaContextLike,
    TokenBudget,
    ToolCallLimits,
)
from agentloop.llm.base import ChatModel, ModelCall, ModelTurn, TextSink
from agentloop.llm.registry import get_model
from agentloop.llm.resilient import ResilientModel, RetryPolicy
from agentloop.logs import REQUEST_ID
from agentloop.loop import AgentLoop, Emitter
from agentloop.models import ChatRequest, RunProgress
from agentloop.pausing import Pausing
from agentloop.plan import PlanError, RunPlan, check_model_allowed, clamped_limits, plan_run
from agentloop.pricing import Pricer
from agentloop.principal import PRINCIPAL_KEY, Principal
from agentloop.run import RoundSink, RunLimits, RunSetup
from agentloop.signing import Signer
from agentloop.tools.base import RunInfo
from agentloop.tools.registry import ToolRegistry

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentSetup:
    """What every request of a process shares: settings, the tool registry, the models.

    Built once per process (per Lambda container) and pointed at by each request's context.
    """

    config: AgentConfig = field(default_factory=AgentConfig.from_env)
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    model_factory: Callable[[str], ChatModel] = get_model
    signer: Signer = field(default_factory=Signer.from_env)
    """Signs and checks the tokens of paused runs (``continuation.py``)."""


@dataclass
class ChatContext:
    """One request's run: the process's setup, and the limits and identity of this request.

    A nested run (``ask_llm``) gets a context with ``depth + 1`` and the *same* budget,
    deadline and cancel token objects as its parent. ``request_id`` tags every log line of the
    run (:data:`agentloop.logs.REQUEST_ID`).
    """

    setup: AgentSetup = field(default_factory=AgentSetup)
    deadline: Deadline = field(default_factory=Deadline)
    cancel: CancelToken = field(default_factory=CancelToken)
    budget: TokenBudget | None = None
    depth: int = 0
    parent_call_id: str | None = None
    request_id: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    run_id: str | None = None
    progress: RunProgress | None = None
    """Server-side continuation (research jobs): what the run had done in earlier invocations."""
    suspend_at_deadline: bool = False
    """At the deadline, end at once with ``suspended`` (no final answer): the caller goes on
    in another invocation from ``done.messages`` and the progress."""
    can_ask: bool = True
    """False where no person can approve a call (batch jobs): tools that need approval are
    not offered (see :func:`agentloop.plan.plan_run`)."""
    on_round: RoundSink | None = None
    """A top-level run's messages so far, after each finished tool round (``RunSetup``)."""

    @property
    def config(self) -> AgentConfig:
        return self.setup.config

    @property
    def tools(self) -> ToolRegistry:
        return self.setup.tools

    @property
    def model_factory(self) -> Callable[[str], ChatModel]:
        return self.setup.model_factory

    @property
    def signer(self) -> Signer:
        """What signs and checks this run's continuation tokens: bound to who the run is for
        (``extras[PRINCIPAL_KEY]``), so a paused run goes on only for the caller it paused for."""
        who = self.extras.get(PRINCIPAL_KEY)
        signer = self.setup.signer
        return signer.for_principal(who.id) if isinstance(who, Principal) else signer

    @classmethod
    def for_lambda(cls, lambda_context: LambdaContextLike, **kwargs: Any) -> ChatContext:
        """A context whose deadline is the invocation's remaining time."""
        return cls(deadline=Deadline.from_lambda_context(lambda_context), **kwargs)


async def handle_chat(
    request: ChatRequest, context: ChatContext, plan: RunPlan | None = None
) -> AsyncIterator[Event]:
    """Run the agent on ``request``, yielding its events; ``done`` is always the last one.

    ``plan`` is the face's :func:`plan_run` of this request (made once, before its answer
    started); without one it is made here, and a request it refuses ends as a run whose
    error event says why.

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
    producer = asyncio.create_task(_produce(request, context, emit, plan))
    producer.add_done_callback(lambda _: queue.put_nowait(None))
    # Traces: the top-level stream carries every nested run's events (None when off).
    spans = (
        tracing.observer(request.messages, context.request_id, request.model or "")
        if context.depth == 0
        else None
    )
    try:
        while (event := await queue.get()) is not None:
            if spans is not None:
                spans.see(event)  # type: ignore[arg-type]
            yield event  # type: ignore[misc]  # every queued item is one of the Event types
    finally:
        if not producer.done():
            context.cancel.cancel()
            with contextlib.suppress(Exception):
                await producer
        if spans is not None:
            await spans.finish()


async def _produce(
    request: ChatRequest, context: ChatContext, emit: Emitter, plan: RunPlan | None
) -> None:
    if context.request_id is not None:  # this task's context: the run's tasks inherit it
        REQUEST_ID.set(context.request_id)
    try:
        plan = plan or plan_run(
            request, context.config, context.tools, context.signer, can_ask=context.can_ask
        )
        loop = _prepare(plan, request, context, emit)
    except (ConfigurationError, PlanError) as exc:
        logger.warning("chat request refused: %s", exc)
        code: ErrorCode = (
            "configuration" if isinstance(exc, ConfigurationError) else "invalid_request"
        )
        _refusing_loop(request, context, emit).refuse(code, str(exc))
        return
    await loop.run()


class _NoModel:
    """The model of a run that is refused before it starts: never called."""

    spec = "none"

    async def complete(self, call: ModelCall, on_text: TextSink) -> ModelTurn:
        raise AssertionError("a refused run makes no model call")


def _refusing_loop(request: ChatRequest, context: ChatContext, emit: Emitter) -> AgentLoop:
    """A loop that only ends the run, so a refusal's ``done`` is built like every other."""
    config = context.config
    budget = context.budget or TokenBudget(
        clamped_limits(request, config)[1], final_reserve=config.final_answer_reserve
    )
    limits = RunLimits(0, budget, context.deadline, context.cancel)
    setup = RunSetup(_NoModel(), ToolRegistry(), config, limits, list(request.messages))
    return AgentLoop(setup, emit)


def _prepare(plan: RunPlan, request: ChatRequest, context: ChatContext, emit: Emitter) -> AgentLoop:
    """Build the plan's loop; ConfigurationError when the model cannot be had (no key)."""
    config = context.config
    pricer = Pricer(dict(config.prices))
    # Under a dollar budget, a fallback without a price could not be kept to it: left out.
    dollars = plan.max_cost_usd if context.budget is None else context.budget.root.cost_limit
    model = _model_chain(plan.model, context, emit, pricer if dollars is not None else None)
    progress = plan.resumption.progress if plan.resumption else context.progress
    budget = context.budget  # a nested run's: its share of the request's
    if budget is None:  # a top-level run: its own budget, shared by any nested runs
        budget = _top_budget(plan, config, pricer, progress)
    if budget.root.tool_calls is None:  # the request's call counts, shared like its budget
        carried = progress.tool_calls if progress else None
        budget.root.tool_calls = ToolCallLimits(plan.tool_limits, carried)
    emit(
        RunStart(
            model=plan.model,
            tools=plan.tools.names,
            max_iterations=plan.max_iterations,
            token_budget=budget.limit,
            budget_remaining=budget.root.remaining,
            max_cost_usd=budget.cost_limit,
            thread_id=request.thread_id if context.depth == 0 else None,
        )
    )
    setup = RunSetup(
        model=model,
        tools=plan.tools,
        config=config,
        limits=RunLimits(plan.max_iterations, budget, context.deadline, context.cancel, pricer),
        conversation=list(plan.resumption.conversation if plan.resumption else request.messages),
        tool_extras=context.extras,
        run_info=_run_info(plan, context),
        sampling=plan.sampling,
        output=plan.output,
        pausing=Pausing(
            approval_tools=plan.approval_tools,
            client_tools=plan.client_tools,
            resumption=plan.resumption,
            signer=context.signer,
            suspend_at_deadline=context.suspend_at_deadline,
        ),
        on_round=context.on_round if context.depth == 0 else None,
        iterations_before=progress.iterations if progress else 0,
    )
    return AgentLoop(setup, emit)


def _top_budget(
    plan: RunPlan, config: AgentConfig, pricer: Pricer, progress: RunProgress | None
) -> TokenBudget:
    """A top-level run's budget; a continued run goes on with what it had spent (priced at
    this run's model)."""
    rates = pricer.rates(plan.model) if plan.max_cost_usd is not None else None
    budget = TokenBudget(
        plan.token_budget,
        final_reserve=config.final_answer_reserve,
        cost_limit=plan.max_cost_usd,
        cost_final_reserve=rates.output * config.final_answer_reserve if rates else 0.0,
    )
    budget.quota_caps = plan.quota_caps
    for depth, spent in enumerate(progress.usage_by_depth if progress else ()):
        budget.charge(spent, depth, pricer.cost(plan.model, spent))
    return budget


def _run_info(plan: RunPlan, context: ChatContext) -> RunInfo:
    """What ``ask_llm`` reads about the run it is called from."""
    return RunInfo(
        config=context.config,
        model=plan.model,
        tool_names=tuple(plan.tools.names),
        registry=context.tools,
        model_factory=context.model_factory,
        approval_tools=plan.approval_tools,
        max_iterations=plan.max_iterations,
        max_output_tokens=plan.sampling.max_output_tokens if plan.sampling else None,
    )


def _model_chain(
    spec: str, context: ChatContext, emit: Emitter, priced: Pricer | None = None
) -> ChatModel:
    """The requested model, then the configured fallbacks that are usable here (with
    ``priced``, under a dollar budget: only those with a known price)."""
    config = context.config
    chain = [context.model_factory(spec)]
    for fallback in config.fallback_models:
        if fallback == spec or (priced is not None and not priced.knows(fallback)):
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
