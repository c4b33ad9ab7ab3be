"""ask_llm: sub-agents as nested runs sharing one budget, deadline and cancel token."""

from __future__ import annotations

import json

from agentloop.ask_llm import ask_llm_tool
from agentloop.chat import AgentSetup, ChatContext, handle_chat
from agentloop.events import (
    Done,
    SubagentFinish,
    SubagentStart,
    TextDelta,
    ToolCallResult,
    ToolCallStart,
)
from agentloop.tools.registry import ToolRegistry
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG, make_request, run_chat, tool_payload, validate_event
from tests.sample_tools import echo, sleeper

TOP = "Compare the two answers."


def asked(req: RecordedRequest) -> str:
    """The first user message: which run (top level or which sub-agent) sent this request."""
    return str(next(m["content"] for m in req.messages if m["role"] == "user"))


def results_in(req: RecordedRequest) -> list[dict[str, object]]:
    return [tool_payload(m["content"]) for m in req.messages if m["role"] == "tool"]


async def test_subagent_answers_feed_the_parent(llm: ScriptedLLM, model: str) -> None:
    def respond(req: RecordedRequest) -> Reply:
        if asked(req) == "What is A?":
            if not results_in(req):
                return Reply(text="Looking A up.", tool_calls=[call("echo", text="A=42")])
            return Reply(text=f"A is {str(results_in(req)[0]['result'])[2:]}.")
        if not results_in(req):
            return Reply(tool_calls=[call("ask_llm", query="What is A?")])
        return Reply(text=f"Final: {results_in(req)[0]['result']['answer']}")

    llm.respond_with(respond)

    result = await run_chat(TOP, model=model, tools=[ask_llm_tool(), echo])

    assert result.done.text == "Final: A is 42."
    top_requests = [r for r in llm.requests if asked(r) == TOP]
    sub_requests = [r for r in llm.requests if asked(r) == "What is A?"]
    assert top_requests[0].tool_names == ["ask_llm", "echo"]
    assert all(r.tool_names == ["echo"] for r in sub_requests), "no ask_llm below the maximum"
    assert sub_requests[0].messages[1:] == [{"role": "user", "content": "What is A?"}]

    [ask_call] = [e for e in result.tool_starts if e.depth == 0]
    [start] = result.of(SubagentStart)
    [finish] = result.of(SubagentFinish)
    assert (start.depth, start.parent_call_id, start.query) == (1, ask_call.call_id, "What is A?")
    assert (finish.stop_reason, finish.iterations) == ("completed", 2)
    nested = [e for e in result.events if e.depth == 1]
    assert {e.parent_call_id for e in nested} == {ask_call.call_id}
    assert {e.run_id for e in nested} == {start.run_id}
    assert "".join(e.text for e in nested if isinstance(e, TextDelta)) == "Looking A up.A is 42."
    assert [e.name for e in nested if isinstance(e, ToolCallStart)] == ["echo"]
    assert [e.name for e in nested if isinstance(e, ToolCallResult)] == ["echo"]
    assert not any(isinstance(e, Done) for e in nested), "a sub-agent's done becomes its finish"
    assert len(result.done.usage_by_depth) == 2
    assert result.done.usage == result.done.usage_by_depth[0] + result.done.usage_by_depth[1]
    assert finish.usage == result.done.usage_by_depth[1]


async def test_subagent_calling_ask_llm_anyway_gets_an_error(llm: ScriptedLLM, model: str) -> None:
    def respond(req: RecordedRequest) -> Reply:
        if asked(req) == "sub":
            if not results_in(req):
                return Reply(tool_calls=[call("ask_llm", query="deeper")])
            return Reply(text=f"sub saw: {results_in(req)[0]['error']}")
        if not results_in(req):
            return Reply(tool_calls=[call("ask_llm", query="sub")])
        return Reply(text="top done")

    llm.respond_with(respond)

    result = await run_chat(TOP, model=model, tools=[ask_llm_tool()])

    assert result.done.text == "top done"
    assert max(e.depth for e in result.events) == 1
    assert not any(asked(r) == "deeper" for r in llm.requests)
    [inner] = [e for e in result.tool_results if e.depth == 1]
    assert "unknown tool 'ask_llm'" in tool_payload(inner.content)["error"]


async def test_depth_two_allows_one_more_level_and_no_more(llm: ScriptedLLM, model: str) -> None:
    def respond(req: RecordedRequest) -> Reply:
        level = {TOP: 0, "level one": 1, "level two": 2}[asked(req)]
        if results_in(req):
            return Reply(text=f"answer at level {level}")
        nxt = {0: "level one", 1: "level two", 2: "level three"}[level]
        return Reply(tool_calls=[call("ask_llm", query=nxt)])

    llm.respond_with(respond)
    config = TEST_CONFIG.model_copy(update={"max_depth": 2})

    result = await run_chat(TOP, model=model, tools=[ask_llm_tool()], config=config)

    assert result.done.text == "answer at level 0"
    assert max(e.depth for e in result.events) == 2
    by_level = {asked(r): r.tool_names for r in llm.requests}
    assert by_level == {TOP: ["ask_llm"], "level one": ["ask_llm"], "level two": []}
    [deepest] = [e for e in result.tool_results if e.depth == 2]
    assert "unknown tool 'ask_llm'" in tool_payload(deepest.content)["error"]


async def test_parallel_subagents_share_one_budget(llm: ScriptedLLM, model: str) -> None:
    per_call = (300, 40)

    def respond(req: RecordedRequest) -> Reply:
        if asked(req) == TOP:
            if req.tool_choice == "none":
                return Reply(
                    text="Top-level answer from what the sub-agents found.", usage=per_call
                )
            if not results_in(req):
                return Reply(
                    tool_calls=[call("ask_llm", queries=["q1", "q2", "q3"])], usage=per_call
                )
            return Reply(text="Top-level answer.", usage=per_call)
        if req.tool_choice == "none":
            return Reply(text=f"best answer for {asked(req)}", usage=per_call)
        return Reply(tool_calls=[call("echo", text="more")], usage=per_call)

    llm.respond_with(respond)
    budget = 4_000
    config = TEST_CONFIG.model_copy(update={"final_answer_reserve": 600})

    result = await run_chat(
        TOP, model=model, tools=[ask_llm_tool(), echo], token_budget=budget, config=config
    )

    assert result.done.usage.total_tokens <= budget + sum(per_call)
    assert result.done.text.startswith("Top-level answer")
    finishes = result.of(SubagentFinish)
    assert len(finishes) == 3
    assert {f.stop_reason for f in finishes} == {"budget"}
    [ask_result] = [r for r in result.tool_results if r.depth == 0]
    answers = tool_payload(ask_result.content)["result"]
    assert [a["query"] for a in answers] == ["q1", "q2", "q3"]
    # Each ends with an answer: its forced final answer, or, when even that cannot be
    # afforded from its share, the summary of what its tools returned.
    for index, answer in enumerate(answers, start=1):
        assert answer["stop_reason"] == "budget"
        text = answer["answer"]
        assert text == f"best answer for q{index}" or "token budget" in text


async def test_budget_running_out_in_a_subagent_ends_the_request(
    llm: ScriptedLLM, model: str
) -> None:
    per_call = (300, 40)

    def respond(req: RecordedRequest) -> Reply:
        if req.tool_choice == "none":
            return Reply(text=f"forced answer ({asked(req)})", usage=per_call)
        if asked(req) == TOP:
            return Reply(tool_calls=[call("ask_llm", query="endless")], usage=per_call)
        return Reply(tool_calls=[call("echo", text="again")], usage=per_call)

    llm.respond_with(respond)
    config = TEST_CONFIG.model_copy(update={"final_answer_reserve": 600})

    result = await run_chat(
        TOP, model=model, tools=[ask_llm_tool(), echo], token_budget=3_000, config=config
    )

    assert result.done.stop_reason == "budget"
    assert result.done.text.startswith(f"forced answer ({TOP})")
    [finish] = result.of(SubagentFinish)
    assert finish.stop_reason == "budget"
    assert result.done.usage.total_tokens <= 3_000 + sum(per_call)


async def test_cancelling_the_top_level_stops_subagents(llm: ScriptedLLM, model: str) -> None:
    def respond(req: RecordedRequest) -> Reply:
        if asked(req) == TOP:
            return Reply(tool_calls=[call("ask_llm", queries=["s1", "s2"])])
        return Reply(tool_calls=[call("sleep", label=asked(req), seconds=0.2)])

    llm.respond_with(respond)
    tools = ToolRegistry([ask_llm_tool(), sleeper([])])
    context = ChatContext(setup=AgentSetup(config=TEST_CONFIG, tools=tools))
    request = make_request(TOP, model=model, tools=["ask_llm", "sleep"])

    events = []
    async for event in handle_chat(request, context):
        validate_event(event)
        events.append(event)
        if isinstance(event, ToolCallStart) and event.depth == 1:
            context.cancel.cancel()

    done = events[-1]
    assert isinstance(done, Done)
    assert done.stop_reason == "cancelled"
    finishes = [e for e in events if isinstance(e, SubagentFinish)]
    assert sorted(f.stop_reason for f in finishes) == ["cancelled", "cancelled"]
    # Each sub-agent stopped at its first call: that call may have been cut before it reached
    # the model (the token cancels calls in flight at once), but none made a second.
    sub_calls = sorted(asked(r) for r in llm.requests if asked(r) != TOP)
    assert sub_calls in (["s1"], ["s2"], ["s1", "s2"]), sub_calls
    assert json.loads(done.model_dump_json())["stop_reason"] == "cancelled"
