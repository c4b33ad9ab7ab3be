"""A run's model calls: what the next one may spend, the call itself, what it is charged.

The loop decides *when* to call (a turn, a retry, the forced answer); this module decides how
much a call may spend in tokens, dollars and time, streams it into the run's answer, abandons
it at once on cancellation or its time limit, and charges the budget with the provider's
figures or, without them, one estimate: the budget's calibrated characters-per-token ratio.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from agentloop.answer import ShownAnswer
from agentloop.context import Prompt
from agentloop.events import Notice, UsageReport, _Event
from agentloop.llm.base import ModelCall, ModelTurn, ProviderError
from agentloop.models import Usage
from agentloop.run import RunSetup

MIN_OUTPUT_TOKENS = 32
"""A call that cannot afford this many output tokens is not worth making."""

MIN_TURN_S = 1.0
"""A turn with less time than this before the deadline's reserve is not started."""
MIN_FINAL_CALL_S = 0.5
SEND_MARGIN_S = 0.25
"""Every model call and tool call ends at least this long before the deadline, whatever the
configured reserve: time to abandon the call, write the answer and send ``done`` (measured:
the worst case from abandoning a call to ``done`` reaching a client is in docs/architecture.md,
"Deadlines")."""

CallLimit = Literal["budget", "cost", "deadline"]
"""Why a call cannot be made: tokens, dollars or time."""


@dataclass(frozen=True)
class CallPlan:
    """What the next model call may spend (an output-token cap and a time limit), and the
    size of its prompt, measured once: characters and the estimate of their tokens."""

    max_tokens: int
    timeout: float
    prompt_chars: int
    prompt_tokens: int


class CallCancelled(Exception):
    """The cancel token fired while a model call was streaming; the text streamed so far."""


@dataclass(frozen=True)
class CallShape:
    """What every model call of a run sends alike, built once per run."""

    tools: list[dict[str, Any]] | None
    """The server's tool definitions and the client's (None: no tools)."""
    tool_chars: int
    """Their size, part of every prompt's estimate."""
    fields: dict[str, Any]
    """The request's sampling and response format, in the provider's form."""

    @classmethod
    def of(cls, setup: RunSetup) -> CallShape:
        tools = [*setup.tools.definitions(), *setup.pausing.client_definitions()] or None
        fields: dict[str, Any] = setup.sampling.wire() if setup.sampling else {}
        if setup.output is not None:
            fields["response_format"] = setup.output.wire()
        return cls(tools, len(json.dumps(tools)) if tools else 0, fields)


class ModelCalls:
    """Plans, makes and charges one run's model calls."""

    def __init__(
        self,
        setup: RunSetup,
        emit: Callable[[_Event], object],
        depth: int,
        answer: ShownAnswer,
    ) -> None:
        self._setup = setup
        self._emit = emit
        self._depth = depth
        self._answer = answer
        self._shape = CallShape.of(setup)

    def plan(self, prompt: Prompt, *, final: bool) -> CallPlan | CallLimit:
        """Output-token cap and timeout for the next call, or the limit that forbids it.

        An ordinary turn must leave the final answer its token reserve and its
        ``deadline_reserve_s`` of time; the final answer may use both.
        """
        setup, config = self._setup, self._setup.config
        chars = self._prompt_chars(prompt)
        tokens = setup.limits.budget.estimate_tokens(chars)
        available = setup.limits.budget.available(final=final)
        max_tokens = min(config.max_output_tokens, available - tokens)
        if max_tokens < MIN_OUTPUT_TOKENS:
            return "budget"
        affordable = self._affordable_output(tokens, final=final)
        if affordable is not None:
            if affordable < MIN_OUTPUT_TOKENS:
                return "cost"
            max_tokens = min(max_tokens, affordable)
        if setup.sampling is not None and setup.sampling.max_output_tokens is not None:
            max_tokens = min(max_tokens, setup.sampling.max_output_tokens)  # the client's cap
        keep = SEND_MARGIN_S if final else max(config.deadline_reserve_s, SEND_MARGIN_S)
        timeout = setup.limits.deadline.cap(config.model_timeout_s, keep=keep)
        if timeout < (MIN_FINAL_CALL_S if final else MIN_TURN_S):
            return "deadline"
        return CallPlan(max_tokens, timeout, chars, tokens)

    def remeasured(self, plan: CallPlan, prompt: Prompt) -> CallPlan:
        """``plan`` for another prompt (a harder-compacted one): its size measured again."""
        chars = self._prompt_chars(prompt)
        tokens = self._setup.limits.budget.estimate_tokens(chars)
        return dataclasses.replace(plan, prompt_chars=chars, prompt_tokens=tokens)

    def _prompt_chars(self, prompt: Prompt) -> int:
        """The prompt's size as sent: the messages and the tool definitions."""
        return prompt.chars + self._shape.tool_chars

    def _affordable_output(self, prompt: int, *, final: bool) -> int | None:
        """Output tokens the dollar budget leaves once the prompt estimate is priced; None
        without a dollar budget (or a price to keep it with)."""
        limits = self._setup.limits
        dollars = limits.budget.cost_available(final=final)
        rates = limits.pricer.rates(self._setup.model.spec) if dollars is not None else None
        if dollars is None or rates is None:
            return None
        left = dollars - prompt * rates.input
        if left < 0:
            return 0
        if rates.output <= 0:
            return self._setup.config.max_output_tokens
        return int(left / rates.output)

    async def call(
        self, prompt: Prompt, tool_choice: Literal["auto", "none"], plan: CallPlan
    ) -> ModelTurn:
        """One streamed call, its text added to the answer as it comes, abandoned early on
        cancellation (:class:`CallCancelled`) or its time limit; its usage charged."""
        shape = self._shape
        call = ModelCall(
            messages=prompt.messages,
            tools=shape.tools,
            tool_choice=tool_choice if shape.tools else None,
            max_tokens=plan.max_tokens,
            timeout=plan.timeout,
            fields=shape.fields,
        )
        mark = self._answer.mark()
        task = asyncio.ensure_future(self._setup.model.complete(call, self._answer.sink))
        await self._race(task, plan.timeout)
        if task.cancelled() or not task.done():
            # Abandoned mid-stream: the provider bills what it did, so charge an estimate.
            partial = self._answer.since(mark)
            self._charge(self._estimated_usage(plan, len(partial)))
            if self._setup.limits.cancel.cancelled:
                raise CallCancelled(partial)
            raise ProviderError("timeout", "the model did not finish in time", partial_text=partial)
        try:
            turn = task.result()
        except ProviderError as exc:
            if exc.partial_text:
                self._charge(self._estimated_usage(plan, len(self._answer.since(mark))))
            raise
        self._settle(turn, plan)
        return turn

    async def _race(self, task: asyncio.Future[ModelTurn], seconds: float) -> None:
        """Wait for the call until the cancel token or the time limit stops it (the call is
        then cancelled and awaited). The whole call - connecting, every retry, the last byte -
        ends by ``seconds``: the SDK's own timeout bounds each read, not the call. How the call
        ended (its turn, its error, cancelled) stays in ``task`` for the caller to read."""
        timer = asyncio.get_running_loop().call_later(seconds, task.cancel)
        forget = self._setup.limits.cancel.on_cancel(task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():  # this run itself is cancelled
                raise
        except Exception:  # the call's own failure: the caller reads it from the task
            pass
        finally:
            timer.cancel()
            forget()

    def _estimated_usage(self, plan: CallPlan, output_chars: int) -> Usage:
        """A call without the provider's figures (abandoned, cut, unreported): the prompt's
        estimate and its output's, by the same calibrated ratio."""
        output = self._setup.limits.budget.estimate_tokens(output_chars)
        return Usage(prompt_tokens=plan.prompt_tokens, completion_tokens=output)

    def _settle(self, turn: ModelTurn, plan: CallPlan) -> None:
        """Charge a finished call (the provider's figures, else an estimate) and report it."""
        usage = turn.usage
        if usage is None:
            output = len(turn.text) + sum(len(c.arguments) for c in turn.tool_calls)
            usage = self._estimated_usage(plan, output)
        else:
            self._setup.limits.budget.calibrate(plan.prompt_chars, usage.prompt_tokens)
        cost = self._charge(usage)
        root = self._setup.limits.budget.root
        self._emit(
            UsageReport(
                model=self._setup.model.spec,
                usage=usage,
                total=root.usage,
                budget_remaining=root.remaining,
                finish_reason=turn.finish_reason,
                cost_usd=cost,
                total_cost_usd=root.cost_usd,
            )
        )

    def _charge(self, usage: Usage) -> float | None:
        """Charge a call's usage and its price to the budget; the price (None: unknown)."""
        spec = self._setup.model.spec
        limits = self._setup.limits
        cost = limits.pricer.cost(spec, usage)
        root = limits.budget.root
        if cost is None and not root.unpriced_noticed:
            root.unpriced_noticed = True
            message = f"No price is known for {spec}: this request's cost is unknown."
            self._emit(Notice(code="unpriced", message=message))
        limits.budget.charge(usage, depth=self._depth, cost=cost)
        return cost
