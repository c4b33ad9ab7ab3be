"""``subagent_max_iterations``: a sub-agent that never stops calling tools stops at the cap.

Full runs against the scripted model server through both SDKs: the top-level model asks
``ask_llm``, each sub-agent's model calls a tool on every turn it is allowed to, and the
sub-agent is made to answer (``tool_choice: none``) once its turns reach the deployment's cap,
whatever the request asked for its own run. The parent gets that answer and finishes.
"""

from __future__ import annotations

from agentloop.ask_llm import ask_llm_tool
from agentloop.events import SubagentFinish, SubagentStart
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG, run_chat, tool_payload
from tests.sample_tools import echo

TOP = "Ask the sub-agents, then answer."
CAP = 3


def asked(req: RecordedRequest) -> str:
    """The first user message: which run (top level or which sub-agent) sent this request."""
    return str(next(m["content"] for m in req.messages if m["role"] == "user"))


def respond(req: RecordedRequest) -> Reply:
    """Sub-agents call ``echo`` whenever they may; the top level asks two of them once."""
    query = asked(req)
    if query != TOP:
        if req.tool_choice == "none":
            return Reply(text=f"what {query} found")
        return Reply(tool_calls=[call("echo", text=f"{query} digs on")])
    results = [tool_payload(m["content"]) for m in req.messages if m["role"] == "tool"]
    if not results:
        return Reply(tool_calls=[call("ask_llm", queries=["sub one", "sub two"])])
    answers = [a["answer"] for a in results[0]["result"]]
    return Reply(text="Top: " + "; ".join(answers))


async def test_a_subagent_that_keeps_calling_tools_stops_at_the_cap(
    llm: ScriptedLLM, model: str
) -> None:
    llm.respond_with(respond)
    config = TEST_CONFIG.model_copy(update={"subagent_max_iterations": CAP})

    result = await run_chat(TOP, model=model, tools=[ask_llm_tool(), echo], config=config)

    assert result.done.stop_reason == "completed"
    assert result.done.text == "Top: what sub one found; what sub two found"
    finishes = {
        s.query: f
        for s in result.of(SubagentStart)
        for f in result.of(SubagentFinish)
        if f.run_id == s.run_id
    }
    assert set(finishes) == {"sub one", "sub two"}
    for query, finish in finishes.items():
        assert (finish.stop_reason, finish.iterations) == ("max_iterations", CAP), query
        turns = [r.tool_choice for r in llm.requests if asked(r) == query]
        assert turns == ["auto"] * CAP + ["none"], "CAP turns with tools, then its answer"
        echoes = [e for e in result.tool_results if e.run_id == finish.run_id]
        assert len(echoes) == CAP
    [ask_result] = [r for r in result.tool_results if r.depth == 0]
    answers = tool_payload(ask_result.content)["result"]
    assert [(a["stop_reason"], a["answer"]) for a in answers] == [
        ("max_iterations", "what sub one found"),
        ("max_iterations", "what sub two found"),
    ], "a sub-agent's answer carries no notice meant for a person"


async def test_a_request_cannot_lift_the_subagent_cap(llm: ScriptedLLM, model: str) -> None:
    """The request asks for the most turns the server allows; its sub-agents still get CAP."""
    llm.respond_with(respond)
    config = TEST_CONFIG.model_copy(update={"subagent_max_iterations": CAP})

    result = await run_chat(
        TOP,
        model=model,
        tools=[ask_llm_tool(), echo],
        config=config,
        max_iterations=config.max_iterations_cap,
    )

    assert result.done.stop_reason == "completed"
    assert [f.iterations for f in result.of(SubagentFinish)] == [CAP, CAP]
    assert {f.stop_reason for f in result.of(SubagentFinish)} == {"max_iterations"}
    sub_turns = [r for r in llm.requests if asked(r) != TOP]
    assert len(sub_turns) == 2 * (CAP + 1)
