"""ToolExecutor: what running one tool call means, without a loop or a model."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest

from agentloop.config import AgentConfig
from agentloop.limits import CancelToken, Deadline, TokenBudget
from agentloop.models import FunctionCall, ToolCall
from agentloop.tools.base import NestedRuns, RunInfo, Tool, ToolContext
from agentloop.tools.executor import ToolExecutor, ToolScope
from agentloop.tools.registry import ToolRegistry
from agentloop.tools.results import ToolResult
from tests.sample_tools import boom, double, echo, lookup_tool, sleeper


def executor(
    *tools: Tool, timeout_s: float = 5.0, deadline: Deadline | None = None
) -> ToolExecutor:
    scope = ToolScope(
        depth=0, deadline=deadline or Deadline(), budget=TokenBudget(10_000), cancel=CancelToken()
    )
    return ToolExecutor(registry=ToolRegistry(tools), scope=scope, timeout_s=timeout_s)


def call(name: str, arguments: str) -> ToolCall:
    return ToolCall(id="call_1", function=FunctionCall(name=name, arguments=arguments))


def failed(result: ToolResult) -> tuple[str, str | None]:
    assert not result.ok
    assert result.error is not None
    return result.error, result.hint


async def test_a_valid_call_returns_the_tools_value() -> None:
    result = await executor(double).execute(call("double", '{"n": 21}'))
    assert result == ToolResult(ok=True, result=42)


async def test_an_unknown_tool_names_the_available_ones() -> None:
    error, hint = failed(await executor(double, echo).execute(call("triple", "{}")))
    assert error == "unknown tool 'triple'"
    assert hint == "available tools: double, echo"


async def test_an_empty_registry_says_none_are_available() -> None:
    _, hint = failed(await executor().execute(call("double", "{}")))
    assert hint == "available tools: none"


async def test_malformed_json_says_where() -> None:
    error, hint = failed(await executor(double).execute(call("double", '{"n": ')))
    assert error.startswith("arguments are not valid JSON (")
    assert "at position 6" in error
    assert "one JSON object" in (hint or "")


async def test_empty_arguments_count_as_an_empty_object() -> None:
    error, _ = failed(await executor(double).execute(call("double", "")))
    assert error.startswith("invalid arguments: n:")


async def test_arguments_that_are_not_an_object_are_refused() -> None:
    error, hint = failed(await executor(double).execute(call("double", "[1, 2]")))
    assert error == "arguments must be a JSON object"
    assert hint == "wrap the arguments in {...}"


async def test_validation_errors_list_every_field() -> None:
    sleep = sleeper([])
    result = await executor(sleep).execute(call("sleep", json.dumps({"seconds": 99})))
    error, hint = failed(result)
    assert error.startswith("invalid arguments: ")
    assert "label: Field required" in error
    assert "seconds: Input should be less than or equal to 5" in error
    assert hint == "fix the fields named and call again"


async def test_a_tool_error_keeps_its_message_and_hint() -> None:
    result = await executor(lookup_tool({"a": 1})).execute(call("lookup", '{"key": "b"}'))
    assert failed(result) == ("no value for 'b'", "known keys: ['a']")


async def test_any_other_exception_becomes_a_result_naming_it() -> None:
    result = await executor(boom).execute(call("boom", '{"text": "x"}'))
    assert failed(result) == ("boom failed: RuntimeError: kaboom: x", None)


async def test_a_slow_tool_times_out_at_the_configured_limit() -> None:
    log: list[tuple[str, str]] = []
    started = time.perf_counter()
    result = await executor(sleeper(log), timeout_s=0.1).execute(
        call("sleep", '{"label": "a", "seconds": 2}')
    )
    assert time.perf_counter() - started < 1.5
    error, hint = failed(result)
    assert error == "sleep timed out after 0.1 s"
    assert "smaller request" in (hint or "")
    assert log == [("start", "a")]


async def test_a_tools_own_timeout_wins_and_the_deadline_caps_it() -> None:
    own = sleeper([], timeout_s=0.2)
    error, _ = failed(
        await executor(own, timeout_s=30).execute(call("sleep", '{"label": "a", "seconds": 2}'))
    )
    assert error == "sleep timed out after 0.2 s"
    near = executor(sleeper([]), timeout_s=30, deadline=Deadline.after(0.3))
    error, _ = failed(await near.execute(call("sleep", '{"label": "a", "seconds": 2}')))
    assert error.startswith("sleep timed out after 0.")


async def test_refused_calls_name_the_tools_to_call_instead() -> None:
    result = executor(double, echo).refuse("the tool name 'a b' is not valid")
    assert failed(result) == (
        "the tool name 'a b' is not valid",
        "call one of the available tools: double, echo",
    )


def spy_tool(seen: list[ToolContext], *, needs_runs: bool) -> Tool:
    async def spy(args: object, ctx: ToolContext) -> str:
        seen.append(ctx)
        return "ok"

    return Tool(
        name="probe", description="d", args_model=double.args_model, fn=spy, needs_runs=needs_runs
    )


def with_runs(*tools: Tool) -> ToolExecutor:
    """An executor whose run can start nested runs, bounding results at 5,000 characters."""
    info = RunInfo(
        config=AgentConfig(),
        model="groq:m",
        tool_names=tuple(t.name for t in tools),
        registry=ToolRegistry(tools),
        model_factory=lambda spec: pytest.fail(f"no model is made here ({spec})"),
    )
    plain = executor(*tools)
    scope = replace(
        plain.scope, result_max_chars=5_000, runs=NestedRuns(info, forward=lambda _: None)
    )
    return replace(plain, scope=scope)


async def test_the_context_carries_the_call_and_the_runs_limits() -> None:
    seen: list[ToolContext] = []
    run = with_runs(spy_tool(seen, needs_runs=False))
    await run.execute(call("probe", '{"n": 1}'), round_size=3)
    (ctx,) = seen
    assert ctx.call_id == "call_1"
    assert ctx.deadline is run.scope.deadline
    assert ctx.budget is run.scope.budget
    assert ctx.result_max_chars == 5_000
    assert ctx.runs is None  # an ordinary tool does not see the nested-run seam


async def test_only_a_tool_that_needs_runs_gets_them_with_its_rounds_size() -> None:
    seen: list[ToolContext] = []
    run = with_runs(spy_tool(seen, needs_runs=True))
    await run.execute(call("probe", '{"n": 1}'), round_size=3)
    (ctx,) = seen
    assert ctx.runs is not None
    assert ctx.runs.round_size == 3
    assert run.scope.runs is not None
    assert ctx.runs.run is run.scope.runs.run
