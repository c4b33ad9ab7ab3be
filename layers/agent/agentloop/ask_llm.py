"""``ask_llm``: a tool that hands sub-questions to sub-agents, each a nested run.

A sub-agent is :func:`agentloop.chat.handle_chat` called in-process with the query
as its only user message, the parent's model, depth + 1, and the parent's deadline and
cancel token. It may never do more than its parent (:func:`subagent_request`): the
parent's tools less those that wait for approval (and ``ask_llm`` at the maximum depth),
and iteration and output caps no higher than the parent's. Its tokens come from a share
of the parent's budget reserved before it starts, so parallel sub-agents cannot
overshoot together and the top level's final-answer reserve stays untouched. Its events
stream up to the client as they happen, tagged with its depth and the ``ask_llm`` call id;
its ``done`` becomes a ``subagent_finish`` event and its answer the tool result.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, Field, StringConstraints, model_validator

from agentloop.events import Done, SubagentFinish, SubagentStart
from agentloop.limits import TokenBudget
from agentloop.models import ChatRequest, Sampling, UserMessage
from agentloop.tools.base import NestedRuns, RunInfo, Tool, ToolContext, ToolError, tool

if TYPE_CHECKING:
    from agentloop.chat import ChatContext

NAME = "ask_llm"

Query = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=8_000)]

DESCRIPTION = (
    "Hand a self-contained sub-question to a sub-agent that researches it with its own tool "
    "loop and returns its answer. Each sub-agent costs a whole agent run in tokens, so use it "
    "only for independent sub-tasks that need several tool calls of their own (for example, "
    "researching three companies separately); for a single lookup, call the tool directly. "
    "Give `query` for one sub-question, or `queries` (up to 5) to research several "
    "independent sub-questions in parallel. Write each query so it can be answered without "
    "this conversation: the sub-agent sees nothing else."
)


class AskArgs(BaseModel):
    query: Query | None = Field(default=None, description="One self-contained sub-question.")
    queries: list[Query] | None = Field(
        default=None,
        min_length=1,
        max_length=5,
        description="Several independent sub-questions to research in parallel.",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> AskArgs:
        if (self.query is None) == (self.queries is None):
            raise ValueError("give exactly one of 'query' or 'queries'")
        return self


async def _ask(args: AskArgs, ctx: ToolContext) -> Any:
    runs = ctx.runs
    if runs is None:
        raise ToolError("ask_llm can only run inside an agent run")
    run = runs.run
    depth = ctx.depth + 1
    if depth > run.config.max_depth:
        raise ToolError(
            f"sub-agents cannot start sub-agents of their own (maximum depth "
            f"{run.config.max_depth})",
            hint="answer this part yourself with the other tools",
        )
    queries = [args.query] if args.query is not None else list(args.queries or [])
    # Reserve every share before any sub-agent starts: concurrent ones cannot overshoot.
    share = ctx.budget.available() // (max(1, runs.round_size) * len(queries))
    budgets = [ctx.budget.share(share, run.config.final_answer_reserve) for _ in queries]
    gate = asyncio.Semaphore(run.config.subagent_concurrency)

    async def one(query: str, budget: TokenBudget) -> dict[str, Any]:
        try:
            async with gate:
                return await _run_subagent(query, budget, depth, ctx, runs)
        finally:
            budget.close()

    answers = await asyncio.gather(*(one(q, b) for q, b in zip(queries, budgets, strict=True)))
    return answers[0] if args.query is not None else answers


async def _run_subagent(
    query: str, budget: TokenBudget, depth: int, ctx: ToolContext, runs: NestedRuns
) -> dict[str, Any]:
    """One sub-agent run: announced, its events forwarded as they happen, its ``done``
    turned into a ``subagent_finish`` event and its answer into the tool's result."""
    from agentloop.chat import handle_chat  # outer layer: imported at use

    run_id = uuid.uuid4().hex[:16]
    runs.forward(
        SubagentStart(
            call_id=ctx.call_id,
            query=query,
            run_id=run_id,
            depth=depth,
            parent_call_id=ctx.call_id,
        )
    )
    request = subagent_request(query, runs.run, depth)
    context = _subagent_context(runs.run, ctx, budget, depth, run_id)
    done: Done | None = None
    async for event in handle_chat(request, context):
        if isinstance(event, Done) and event.run_id == run_id:
            done = event
        else:
            runs.forward(event)
    assert done is not None, "handle_chat always ends with done"
    runs.forward(_finish_event(done, budget, ctx, depth))
    return {
        "query": query,
        "answer": done.text,
        "stop_reason": done.stop_reason,
        "tokens": done.usage.total_tokens,
    }


def _subagent_context(
    run: RunInfo, ctx: ToolContext, budget: TokenBudget, depth: int, run_id: str
) -> ChatContext:
    """The sub-agent's context: the run's setup, deadline, cancel token and extras; its own
    reserved share of the budget, depth and run id; the ``ask_llm`` call as its parent."""
    from agentloop.chat import AgentSetup, ChatContext  # outer layer: imported at use

    return ChatContext(
        setup=AgentSetup(config=run.config, tools=run.registry, model_factory=run.model_factory),
        deadline=ctx.deadline,
        cancel=ctx.cancel,
        budget=budget,
        depth=depth,
        parent_call_id=ctx.call_id,
        extras=ctx.extras,
        run_id=run_id,
    )


def _finish_event(done: Done, budget: TokenBudget, ctx: ToolContext, depth: int) -> SubagentFinish:
    """What the client hears of a sub-agent's end (its ``done`` stays inside the tool)."""
    return SubagentFinish(
        call_id=ctx.call_id,
        stop_reason=done.stop_reason,
        iterations=done.iterations,
        usage=done.usage,
        budget_remaining=budget.root.remaining,
        cost_usd=done.cost_usd,
        run_id=done.run_id,
        depth=depth,
        parent_call_id=ctx.call_id,
    )


def subagent_request(query: str, run: RunInfo, depth: int) -> ChatRequest:
    """A sub-agent's request: never more than the run that asks for it may do.

    Its tools are the run's, less those that wait for a person (a sub-agent cannot ask one;
    they stay in its ``approval_tools`` so that a call to one anyway is refused with a reason
    the model reads) and less ``ask_llm`` at the maximum depth. Its iteration cap and output
    cap are at most the run's. The budget, deadline and cancel token are the run's own objects
    (the sub-agent's context). What is not a limit stays the run's alone: the answer's format,
    sampling style, client tools and a paused run's decisions."""
    held = run.approval_tools
    tools = [
        name
        for name in run.tool_names
        if name not in held and (name != NAME or depth < run.config.max_depth)
    ]
    cap = run.config.subagent_max_iterations
    output = run.max_output_tokens
    return ChatRequest(
        messages=[UserMessage(content=query)],
        model=run.model,
        tools=tools,
        approval_tools=sorted(held) or None,
        max_iterations=min(cap, run.max_iterations) if run.max_iterations else cap,
        sampling=Sampling(max_output_tokens=output) if output is not None else None,
    )


def ask_llm_tool() -> Tool:
    """The opt-in ``ask_llm`` tool (a request must name it: it multiplies token use)."""
    return tool(name=NAME, description=DESCRIPTION, timeout_s=900.0, opt_in=True, needs_runs=True)(
        _ask
    )
