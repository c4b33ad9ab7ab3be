"""The bounded agent loop: call the model, run the tools it asks for, repeat.

Whatever stops the loop (a final answer, the iteration limit, the token budget, the
deadline, cancellation or an error) the run ends with an assistant message and one
``done`` event saying why. On a limit, a last model call with ``tool_choice="none"``
writes the answer from what was gathered; if that fails too, a plain summary of the
tool results is the answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from agentloop.answer import ShownAnswer
from agentloop.context import Prompt, measured_view
from agentloop.events import (
    Done,
    ErrorCode,
    ErrorEvent,
    FileMade,
    Notice,
    ToolCallResult,
    ToolCallStart,
    TurnStart,
    _Event,
)
from agentloop.llm.base import ModelTurn, ProviderError
from agentloop.llm.untrusted import clean_text
from agentloop.model_calls import SEND_MARGIN_S, CallCancelled, CallPlan, ModelCalls
from agentloop.models import (
    AssistantMessage,
    FunctionCall,
    PendingCall,
    RunProgress,
    StopReason,
    SystemMessage,
    ToolCall,
    ToolMessage,
    to_wire,
)
from agentloop.run import RunSetup, RunState, ToolRecord
from agentloop.tools.base import NestedRuns
from agentloop.tools.executor import ToolExecutor, ToolScope
from agentloop.tools.results import ToolResult, truncate_middle

logger = logging.getLogger(__name__)

E = TypeVar("E", bound=_Event)

CUT_RETRIES = 2
"""How often a turn whose stream was cut after some text is retried (with ``text_reset``)."""
_CUT_KINDS = frozenset({"stream_cut", "server"})

Limit = Literal["max_iterations", "budget", "cost", "deadline", "empty"]
"""What ends the loop with one last, tool-less call for the answer (``empty``: a blank reply
gets the same second chance; ``cost``: the dollar budget, stop reason ``budget``)."""


@dataclass(frozen=True)
class _LimitTexts:
    stop: StopReason
    instruction: str
    """Told to the model in the forced-answer call."""
    notice: str
    """Told to the person: a ``notice`` event and the answer's last line ("": none)."""


_LIMITS: dict[Limit, _LimitTexts] = {
    "max_iterations": _LimitTexts(
        "max_iterations",
        "You have used every tool iteration this request allows.",
        "Reached the limit of {n} tool iterations; send a message to continue.",
    ),
    "budget": _LimitTexts(
        "budget",
        "This request's token budget is nearly spent.",
        "Stopped early: this request's token budget ran out; send a message to continue.",
    ),
    "cost": _LimitTexts(
        "budget",
        "This request's cost budget is nearly spent.",
        "Stopped early: this request's budget of ${usd} ran out; send a message to continue.",
    ),
    "deadline": _LimitTexts(
        "deadline",
        "This request is about to run out of time.",
        "Stopped early: this request ran out of time; send a message to continue.",
    ),
    "empty": _LimitTexts("completed", "Your last reply was empty.", ""),
}
_QUOTA = _LimitTexts(
    "quota",
    "The caller's usage allowance is nearly spent.",
    "Stopped early: your usage allowance ran out; try again when it resets.",
)
"""A token or dollar cap the caller's quota lowered (``agentloop.quota``) ran out."""


@dataclass(frozen=True)
class Answered:
    """The model answered in text, already streamed: ``completed``."""


@dataclass(frozen=True)
class Stopped:
    """Cancelled or failed: no further model call; the streamed text, else a summary."""

    stop: Literal["cancelled", "error"]
    why: str
    streamed: bool = False
    """The model was streaming: its text so far stays the answer."""


@dataclass(frozen=True)
class LimitReached:
    """A limit: one tool-less call writes the answer. ``streamed``: a turn the limit cut short
    had streamed text; that text is the answer."""

    limit: Limit
    streamed: bool = False


@dataclass(frozen=True)
class Paused:
    """The run stops here, to be continued: calls wait for the client (``approval_required``,
    ``client_tools``), or the invocation's deadline came (``suspended``)."""

    stop: Literal["approval_required", "client_tools", "suspended"]
    pending: list[PendingCall] = field(default_factory=list)


Ending = Answered | Stopped | LimitReached | Paused
"""One typed outcome per way a run ends; :meth:`AgentLoop._end` turns it into ``done``."""


class Emitter:
    """Stamps events with the run's identity and hands them to the stream."""

    def __init__(
        self,
        sink: Callable[[_Event], None],
        *,
        run_id: str | None = None,
        depth: int = 0,
        parent_call_id: str | None = None,
    ) -> None:
        self._sink = sink
        self.run_id = run_id or uuid.uuid4().hex[:16]
        self.depth = depth
        self.parent_call_id = parent_call_id

    def __call__(self, event: E) -> E:
        event.run_id = self.run_id
        event.depth = self.depth
        event.parent_call_id = self.parent_call_id
        self._sink(event)
        return event

    def forward(self, event: _Event) -> None:
        """Pass on an event of a nested run, keeping its own identity and depth."""
        self._sink(event)


class AgentLoop:
    """One run of the loop over a conversation. Create, then ``await run()`` once."""

    def __init__(self, setup: RunSetup, emit: Emitter) -> None:
        self.setup = setup
        self.emit = emit
        self.state = RunState.start(setup)
        self.answer = ShownAnswer(emit)
        """What a client shows as the answer so far: ``done.text`` if the run ends now."""
        self._calls = ModelCalls(setup, emit, emit.depth, self.answer)
        self._executor = self._tool_executor()

    def _tool_executor(self) -> ToolExecutor:
        setup, config = self.setup, self.setup.config
        runs = NestedRuns(setup.run_info, self._forward) if setup.run_info is not None else None
        return ToolExecutor(
            registry=setup.tools,
            scope=ToolScope(
                depth=self.emit.depth,
                deadline=setup.limits.deadline,
                budget=setup.limits.budget,
                cancel=setup.limits.cancel,
                extras=setup.tool_extras,
                result_max_chars=config.tool_result_max_chars,
                runs=runs,
            ),
            timeout_s=config.tool_timeout_s,
            keep_s=max(config.deadline_reserve_s / 2, SEND_MARGIN_S),
        )

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> Done:
        """Run to a stop and emit ``done``; never raises (but ``CancelledError``)."""
        try:
            if self.setup.pausing.resumption is not None:
                await self._resume_round()
            return await self._end(await self._iterate())
        except Exception as exc:  # the last line of defence: the stream must still end well
            logger.exception("agent loop failed")
            self.emit(ErrorEvent(code="internal", message=f"internal error: {type(exc).__name__}"))
            self._answer_open_calls("not run: an internal error stopped the run")
            self.answer.void(self.state.iterations, "an internal error stopped the run")
            return await self._end(Stopped("error", "an internal error stopped the run"))

    def refuse(self, code: ErrorCode, why: str) -> Done:
        """End a run that cannot start (no key for its model, a request it will not run):
        an error event, the reason as the answer, and ``done`` - built where every run's is."""
        self.emit(ErrorEvent(code=code, message=why))
        return self._close("error", unsent=f"I can't answer this request: {why}")

    async def _iterate(self) -> Ending:
        """Turns until one ends the run: a text answer, a stop, a limit or a pause."""
        while True:
            stop = self._should_stop()
            if stop is not None:
                return stop
            view = self._view()  # built once per turn: it is compacted and measured
            if self.state.mend:
                view, self.state.mend = view.plus(self.state.mend), []
            plan = self._plan_call(view, final=False)
            if isinstance(plan, LimitReached):
                return plan
            ending = await self._turn(view, plan)
            if ending is not None:
                return ending

    async def _turn(self, view: Prompt, plan: CallPlan) -> Ending | None:
        """One turn: the model's call, then its tool round or its answer. How the run ends,
        or None when the model gets another turn."""
        self.state.iterations += 1
        remaining = self.setup.limits.budget.root.remaining
        self.answer.restart(TurnStart(iteration=self.state.iterations, budget_remaining=remaining))
        try:
            turn = await self._turn_call(view, plan)
        except CallCancelled as cancelled:
            return Stopped("cancelled", "the run was cancelled", streamed=bool(str(cancelled)))
        except ProviderError as exc:
            return self._after_model_failure(exc)
        if turn.tool_calls:
            return await self._tool_round(turn)
        if turn.text.strip():
            return self._answered(turn.text)
        self.answer.void(self.state.iterations, "the reply was empty")  # whitespace: no answer
        return LimitReached("empty")

    def _answered(self, text: str) -> Ending | None:
        """The run's answer, unless it fails the response format: then one more turn sees
        the rejected answer and why (None), and a second failure ends the run."""
        problem = self.setup.output.problem(text) if self.setup.output is not None else None
        if problem is None:
            return Answered()
        if self.state.mend is None:
            why = f"the answer did not match the response format: {problem}"
            self.answer.void(self.state.iterations, why)
            self.state.mend = to_wire(
                [
                    AssistantMessage(content=text),
                    SystemMessage(
                        content=f"That answer cannot be used: {problem}. Reply again with "
                        "only the corrected JSON."
                    ),
                ]
            )
            return None
        return self._invalid_output(problem)

    def _invalid_output(self, problem: str) -> Stopped:
        """The streamed answer fails the response format for good: it stays, with an error."""
        self.emit(ErrorEvent(code="invalid_output", message=problem))
        return Stopped("error", problem, streamed=True)

    def _after_model_failure(self, exc: ProviderError) -> Ending | None:
        """How a failed turn ends the run, or None when the model gets another turn."""
        if exc.kind == "timeout" and self._deadline_is_near():
            # What was streamed stays the answer; the notice says it was cut short.
            return LimitReached("deadline", streamed=bool(exc.partial_text))
        if exc.kind == "tool_use_failed":
            self._record_failed_tool_call(exc)
            return None
        self.emit(ErrorEvent(code="provider", message=exc.message))
        why = f"the model failed: {exc.message}"
        return Stopped("error", why, streamed=bool(exc.partial_text))

    def _should_stop(self) -> Stopped | LimitReached | None:
        limits = self.setup.limits
        if limits.cancel.cancelled:
            return Stopped("cancelled", "the run was cancelled")
        if self.state.iterations >= limits.max_iterations:
            return LimitReached("max_iterations")
        if limits.deadline.remaining() < self.setup.config.deadline_reserve_s:
            return LimitReached("deadline")
        return None

    def _deadline_is_near(self) -> bool:
        return self.setup.limits.deadline.remaining() < self.setup.config.deadline_reserve_s + 1

    # -- model calls ----------------------------------------------------------------------

    def _plan_call(self, prompt: Prompt, *, final: bool) -> CallPlan | LimitReached:
        """What the next call may spend, or the limit that forbids it."""
        plan = self._calls.plan(prompt, final=final)
        return plan if isinstance(plan, CallPlan) else LimitReached(plan)

    async def _turn_call(self, view: Prompt, plan: CallPlan) -> ModelTurn:
        """A turn's call. A stream cut after some text was streamed is retried (at most
        ``CUT_RETRIES`` times, while time and budget allow): ``text_reset`` tells the client
        to drop the turn's text so far, and the retried turn's text follows."""
        retries = 0
        while True:
            try:
                return await self._call_with_compaction(view, "auto", plan)
            except ProviderError as exc:
                if not exc.partial_text or exc.kind not in _CUT_KINDS or retries >= CUT_RETRIES:
                    raise
                again = self._plan_call(view, final=False)
                if isinstance(again, LimitReached):
                    raise
                retries += 1
                logger.warning("retrying a turn cut after %d chars: %s", len(exc.partial_text), exc)
                self.answer.void(self.state.iterations, f"{exc.message}; the turn is retried")
                plan = again

    def _view(self) -> Prompt:
        """What the model is sent: the compacted view of the history, or all of it."""
        if not self.setup.config.compaction:
            return Prompt.of(self.state.wire)
        return measured_view(self.state.wire, self.state.compaction, self.state.view_cache)

    async def _call_with_compaction(
        self, view: Prompt, tool_choice: Literal["auto", "none"], plan: CallPlan
    ) -> ModelTurn:
        """A turn's call; if the provider says the context is too long, compact harder and
        try once more."""
        try:
            return await self._calls.call(view, tool_choice, plan)
        except ProviderError as exc:
            if exc.kind != "context_length" or exc.partial_text:
                raise
            harder = self.state.compaction.harder()
            logger.warning("context too long; retrying with %s", harder)
            self.emit(
                Notice(code="context_compacted", message="The conversation was shortened to fit.")
            )
            self.state.compaction = harder
            shorter = measured_view(self.state.wire, harder, self.state.view_cache)
            plan = self._calls.remeasured(plan, shorter)
            return await self._calls.call(shorter, tool_choice, plan)

    def _record_failed_tool_call(self, exc: ProviderError) -> None:
        """Groq's ``tool_use_failed``: the model wrote a tool call the provider could not parse.

        Record it as a call with an error result, so the model sees what went wrong on its
        next turn and can correct it, instead of the run ending.
        """
        generation = exc.failed_generation or ""
        call = ToolCall(
            id=f"call_invalid_{self.state.iterations}",
            function=FunctionCall(name="invalid_tool_call", arguments=json.dumps(generation)),
        )
        self.state.append(AssistantMessage(content=None, tool_calls=[call]))
        result = ToolResult.failure(
            f"your last tool call could not be parsed by the provider: {exc.message}",
            hint="call the tool again with arguments that are one valid JSON object matching "
            "its schema",
        )
        content = result.render(self.setup.config.tool_result_max_chars)
        self.emit(ToolCallStart(call_id=call.id, name=call.name, arguments=call.arguments))
        self.answer.restart(
            ToolCallResult(
                call_id=call.id, name=call.name, ok=False, duration_ms=0.0, content=content
            )
        )
        self.state.records.append(ToolRecord(call, False, content))
        self.state.append(ToolMessage(tool_call_id=call.id, content=content))

    # -- tools ----------------------------------------------------------------------------

    def _forward(self, event: _Event) -> None:
        """Pass on a sub-agent's event; its sources are this run's too."""
        self.state.sources.see(event)
        self.emit.forward(event)

    async def _tool_round(self, turn: ModelTurn) -> Paused | None:
        """Run one turn's calls concurrently (bounded); results go in the order asked for.

        Calls that wait for the client (approval, the client's own tools) do not run: the
        others do, and the run pauses after the round."""
        self.state.append(AssistantMessage(content=turn.text or None, tool_calls=turn.tool_calls))
        calls = turn.tool_calls
        round_ = self.setup.pausing.sort(calls, turn.call_problems, self.emit.depth)
        refusals = {call_id: self._executor.refuse(why) for call_id, why in round_.refused.items()}
        await self._run_calls(round_.runnable, refusals, [c.name for c in calls])
        if not round_.waiting:
            if self.setup.on_round is not None:
                await self.setup.on_round(list(self.state.added))
            return None
        for request in round_.approval_requests():
            self.emit(request)
        return Paused(round_.stop, round_.waiting)

    async def _run_calls(
        self, calls: list[ToolCall], answered: dict[str, ToolResult], names: list[str]
    ) -> None:
        """Run ``calls`` concurrently (bounded), with their events; their results are kept in
        the order asked for, whatever order they finish in. A call in ``answered`` is not
        run: that is its result (a refusal, a denial)."""
        gate = asyncio.Semaphore(self.setup.config.tool_concurrency)

        async def run_one(call: ToolCall) -> str:
            async with gate:
                start = ToolCallStart(call_id=call.id, name=call.name, arguments=call.arguments)
                self.state.sources.see(self.emit(start))
                started = time.perf_counter()
                result = answered.get(call.id)
                if result is None:
                    result = await self._executor.execute(call, names.count(call.name))
                content = clean_text(result.render(self.setup.config.tool_result_max_chars))
                finished = self.answer.restart(
                    ToolCallResult(
                        call_id=call.id,
                        name=call.name,
                        ok=result.ok,
                        duration_ms=round((time.perf_counter() - started) * 1000, 2),
                        content=content,
                    )
                )
                self.state.sources.see(finished)
                for file in result.files:
                    self.emit(FileMade(call_id=call.id, file=file))
                self.state.records.append(ToolRecord(call, result.ok, content))
                return content

        if len(calls) == 1:  # the usual round: no task to make
            contents = [await run_one(calls[0])]
        else:
            contents = await asyncio.gather(*(run_one(call) for call in calls))
        for call, content in zip(calls, contents, strict=True):
            self.state.append(ToolMessage(tool_call_id=call.id, content=content))

    async def _resume_round(self) -> None:
        """A continued run's first step: the approved calls run, the denied ones are answered
        with the reason."""
        calls, denials = self.setup.pausing.resumed_calls()
        await self._run_calls(calls, denials, [c.name for c in calls])

    # -- ending ---------------------------------------------------------------------------

    async def _end(self, ending: Ending) -> Done:
        """The answer for how the run ended, then ``done``: the one way every run ends."""
        if (
            isinstance(ending, LimitReached)
            and ending.limit == "deadline"
            and self.setup.pausing.suspend_at_deadline
        ):
            why = "the run is suspended until its next invocation"
            self.answer.void(self.state.iterations, why)
            ending = Paused("suspended")
        if isinstance(ending, Paused):
            return self._pause(ending)
        if isinstance(ending, Answered):
            return self._close("completed")
        if isinstance(ending, Stopped):
            if ending.streamed:  # what was streamed stays the answer
                return self._close(ending.stop)
            return self._close(ending.stop, unsent=self._summary(ending.why))
        await self._limit_answer(ending)
        output = self.setup.output
        problem = output.problem(self.answer.text) if output is not None else None
        if problem is not None:
            return await self._end(self._invalid_output(problem))
        return self._close(self._texts(ending.limit).stop)

    def _texts(self, limit: Limit) -> _LimitTexts:
        """The limit's texts: the quota's when the top level's cap that ran out is one the
        caller's quota lowered (a sub-agent's share running out is its own ``budget``)."""
        budget = self.setup.limits.budget
        cap = {"budget": "tokens", "cost": "usd"}.get(limit)
        if budget.parent is None and cap in budget.quota_caps:
            return _QUOTA
        return _LIMITS[limit]

    async def _limit_answer(self, ending: LimitReached) -> None:
        """Stream the answer for a limit: the text already streamed, else one tool-less
        call's answer, else a plain summary; then the limit's notice."""
        texts = self._texts(ending.limit)
        if not (ending.streamed or await self._forced_answer(texts.instruction)):
            self.answer.add(self._summary(texts.instruction.lower().rstrip(".")))
        limits = self.setup.limits
        notice = texts.notice.format(
            n=limits.max_iterations, usd=f"{limits.budget.root.cost_limit or 0:.4g}"
        )
        if notice:
            self.emit(Notice(code="quota" if texts is _QUOTA else ending.limit, message=notice))
            # "send a message" speaks to a person, not to a parent agent or a JSON parser
            if self.emit.depth == 0 and self.setup.output is None:
                self.answer.add(f"\n\n{notice}")

    async def _forced_answer(self, instruction: str) -> bool:
        """One tool-less call for the answer; whether it streamed one."""
        if self.setup.limits.cancel.cancelled:
            return False
        message = SystemMessage(
            content=f"{instruction} Do not call tools. Answer the user now from "
            "what you have gathered so far, and say briefly what is still missing."
        )
        prompt = self._view().plus(to_wire([message]))
        plan = self._plan_call(prompt, final=True)
        if isinstance(plan, LimitReached):
            return False
        try:
            turn = await self._calls.call(prompt, "none", plan)
        except CallCancelled as cancelled:
            return bool(str(cancelled))  # what was streamed stays the answer
        except ProviderError as exc:
            logger.warning("final answer call failed: %s", exc)
            return bool(exc.partial_text)
        if turn.text.strip():
            return True
        self.answer.void(self.state.iterations, "the final answer was empty")
        return False

    def _summary(self, why: str) -> str:
        lines = [f"I could not finish the answer: {why}."]
        if not self.state.records:
            lines.append("No tool results were gathered.")
        else:
            lines.append("What the tools returned:")
            for record in self.state.records:
                status = "ok" if record.ok else "failed"
                args = truncate_middle(record.call.arguments, 120)
                lines.append(
                    f"- {record.call.name}({args}) {status}: {truncate_middle(record.preview, 300)}"
                )
        return "\n".join(lines)

    def _answer_open_calls(self, error: str) -> None:
        """Give every tool call still without a result an error result, so the history the
        run returns stays valid for a follow-up request."""
        added = self.state.added
        answered = {m.tool_call_id for m in added if isinstance(m, ToolMessage)}
        content = ToolResult.failure(error).render(self.setup.config.tool_result_max_chars)
        for message in added:  # what is appended here is no assistant message
            if isinstance(message, AssistantMessage):
                for call in message.tool_calls or ():
                    if call.id not in answered:
                        self.state.append(ToolMessage(tool_call_id=call.id, content=content))

    def _pause(self, paused: Paused) -> Done:
        """End a run that will be continued: no answer, and (for calls that wait for the
        client) the signed token the client sends back with its decisions or results."""
        resume = None
        if paused.pending:
            root = self.setup.limits.budget.root
            spent = list(root.usage_by_depth)
            calls = dict(root.tool_calls.used) if root.tool_calls is not None else {}
            progress = RunProgress(
                iterations=self.state.iterations, usage_by_depth=spent, tool_calls=calls
            )
            resume = self.setup.pausing.token(
                self.setup.conversation, self.state.added, paused.pending, progress
            )
        return self._done(paused.stop, pending=paused.pending, resume=resume)

    def _close(self, stop: StopReason, *, unsent: str = "") -> Done:
        """Stream ``unsent`` (a summary, a refusal); the answer is then what the client shows.
        Record it and emit ``done``, so every run's last message and event agree."""
        if unsent:
            self.answer.add(unsent)
        self.state.append(AssistantMessage(content=self.answer.text))
        return self._done(stop)

    def _done(self, stop: StopReason, **pause: Any) -> Done:
        """The only place a ``Done`` is built: every run's last event reports its budget and
        messages the same way, and its text is what the client shows (``pause``: a paused
        run's ``pending`` and ``resume``)."""
        budget = self.setup.limits.budget
        top = budget.parent is None
        return self.emit(
            Done(
                text=self.answer.text,
                stop_reason=stop,
                iterations=self.state.iterations,
                usage=budget.usage,
                usage_by_depth=list(budget.usage_by_depth) if top else [],
                budget_remaining=budget.root.remaining,
                cost_usd=budget.cost_usd,
                cost_by_depth=list(budget.cost_by_depth) if top else [],
                messages=list(self.state.added),
                sources=self.state.sources.sources(),
                **pause,
            )
        )
