"""What a request limits for its run holds for every ``ask_llm`` sub-agent of that run.

The hole this closes: a request's ``approval_tools`` ("ask me before running code") did not
reach its sub-agents, so the model could have a sub-agent run the code unasked. Here the
scripted model always tries exactly that: the top level asks a sub-agent, and the sub-agent
calls ``run_code``, which the request (or the server) says needs approval. Through every face
that takes the option, with that face's real client: no program runs, the sub-agent is not
offered the tool, and the model reads why. Also: the sub-agent's iteration and output caps
are never above the request's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openai import OpenAI
from pydantic import BaseModel

from agentloop.ask_llm import ask_llm_tool
from agentloop.config import AgentConfig
from agentloop.events import ApprovalRequest, Done, Event, event_adapter
from agentloop.tools.base import Tool, ToolContext, tool
from chat_app import create_app
from tests.fakes.loopback import LoopbackServer
from tests.fakes.node_client import run_node
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG, parse_sse, tool_payload
from tests.mcp_session import open_mcp_session
from tests.sample_tools import echo
from tests.served import AUTH, TOKEN, make_service

TOP = "Work out 6 * 7 by running a program."
SUB = "Run print(6 * 7) and report what it printed."
REFUSAL = "needs a person's approval"
JSON = dict[str, Any]


class CodeArgs(BaseModel):
    code: str


def code_tool(ran: list[str]) -> Tool:
    """A stand-in for ``execute_code`` that records every program it was asked to run."""

    @tool(name="run_code")
    async def run_code(args: CodeArgs, ctx: ToolContext) -> str:
        """Run a Python program."""
        ran.append(args.code)
        return "42"

    return run_code


def asked(request: RecordedRequest) -> str:
    return str(next(m["content"] for m in request.messages if m["role"] == "user"))


def results(request: RecordedRequest) -> list[JSON]:
    return [tool_payload(m["content"]) for m in request.messages if m["role"] == "tool"]


def tool_names(request: RecordedRequest) -> list[str]:
    return [t["function"]["name"] for t in request.tools or []]


def respond(request: RecordedRequest) -> Reply:
    """The top level hands the work to a sub-agent, which tries to run the code itself."""
    if asked(request) == SUB:
        if not results(request):
            return Reply(tool_calls=[call("run_code", code="print(6 * 7)")])
        return Reply(text=f"I could not run it: {results(request)[0]['error']}")
    if not results(request):
        return Reply(tool_calls=[call("ask_llm", query=SUB)])
    return Reply(text=f"Sub-agent said: {results(request)[0]['result']['answer']}")


def assert_held(llm: ScriptedLLM, ran: list[str], *, reason: str = REFUSAL) -> None:
    """No program ran; the sub-agent was not offered the tool and read why its call failed."""
    assert ran == [], "a sub-agent ran a tool that needs approval"
    subs = [r for r in llm.requests if asked(r) == SUB]
    assert len(subs) == 2, [asked(r) for r in llm.requests]
    assert all("run_code" not in tool_names(r) for r in subs)
    [refused] = results(subs[1])
    assert refused["ok"] is False
    assert reason in refused["error"], refused
    final = [r for r in llm.requests if asked(r) == TOP][-1]
    assert reason in results(final)[0]["result"]["answer"]


@pytest.fixture
def ran() -> list[str]:
    return []


def serve(ran: list[str], config: AgentConfig = TEST_CONFIG) -> LoopbackServer:
    service = make_service([ask_llm_tool(), code_tool(ran), echo], config)
    return LoopbackServer(create_app(service), name="subagent-limits")


def chat(url: str, body: JSON) -> list[Event]:
    """One ``POST /chat`` to its end, over loopback."""
    with httpx.stream("POST", f"{url}/chat", json=body, headers=AUTH, timeout=30) as response:
        assert response.status_code == 200, response.read()
        return [
            event_adapter().validate_python(data)
            for _, data in parse_sse(response.iter_lines())
            if data is not None
        ]


@pytest.fixture
def served(ran: list[str], llm: ScriptedLLM) -> Iterator[str]:
    llm.respond_with(respond)
    with serve(ran) as server:
        yield server.url


# -- approval: the hole -----------------------------------------------------------------------


def test_chat_request_approval_tools_hold_in_subagents(
    served: str, llm: ScriptedLLM, ran: list[str]
) -> None:
    events = chat(
        served,
        {
            "model": "groq:m",
            "messages": [{"role": "user", "content": TOP}],
            "tools": ["ask_llm", "run_code"],
            "approval_tools": ["run_code"],
        },
    )
    assert_held(llm, ran)
    done = events[-1]
    assert isinstance(done, Done)
    assert done.stop_reason == "completed"
    assert not any(isinstance(e, ApprovalRequest) for e in events)
    top = [r for r in llm.requests if asked(r) == TOP]
    assert tool_names(top[0]) == ["ask_llm", "run_code"], "the top level may still ask"


def test_server_approval_tools_hold_in_subagents(llm: ScriptedLLM, ran: list[str]) -> None:
    llm.respond_with(respond)
    config = TEST_CONFIG.model_copy(update={"approval_tools": ("run_code",)})
    with serve(ran, config) as server:
        events = chat(
            server.url,
            {
                "model": "groq:m",
                "messages": [{"role": "user", "content": TOP}],
                "tools": ["ask_llm", "run_code"],
            },
        )
    assert_held(llm, ran)
    assert isinstance(events[-1], Done)
    assert events[-1].stop_reason == "completed"


def test_ui_message_stream_options_hold_in_subagents(
    served: str, llm: ScriptedLLM, ran: list[str]
) -> None:
    options = {"tools": ["ask_llm", "run_code"], "approval_tools": ["run_code"]}
    out = run_node(
        "ui_stream_client.mjs",
        {
            "url": served,
            "token": TOKEN,
            "cases": [{"body": {"model": "groq:m", "agentloop": options}, "turns": [TOP]}],
        },
    )
    [[turn]] = [case["turns"] for case in out["cases"]]
    assert turn["thrown"] is None, turn
    assert turn["errors"] == [], turn
    text = "".join(p["text"] for p in turn["message"]["parts"] if p["type"] == "text")
    assert REFUSAL in text
    assert_held(llm, ran)


def test_ag_ui_forwarded_options_hold_in_subagents(
    served: str, llm: ScriptedLLM, ran: list[str]
) -> None:
    options = {"tools": ["ask_llm", "run_code"], "approval_tools": ["run_code"]}
    out = run_node(
        "ag_ui_client.mjs",
        {
            "url": served,
            "token": TOKEN,
            "cases": [
                {
                    "name": "held",
                    "turns": [{"user": TOP, "params": {"forwardedProps": {"agentloop": options}}}],
                }
            ],
        },
    )
    [turn] = out["cases"]["held"]
    assert turn["failed"] is None, turn
    assert turn["thrown"] is None, turn
    types = [e["type"] for e in turn["events"]]
    assert "RUN_FINISHED" in types
    assert "RUN_ERROR" not in types
    assert not any(e.get("outcome") == "interrupt" for e in turn["events"]), "no pause"
    assert_held(llm, ran)


@pytest.fixture
def defaults_served(ran: list[str], llm: ScriptedLLM) -> Iterator[str]:
    """A server whose default tools include ``run_code``, which needs approval here: the
    OpenAI faces take no ``approval_tools`` of their own (they cannot ask a person)."""
    llm.respond_with(respond)
    config = TEST_CONFIG.model_copy(
        update={"default_tools": ("ask_llm", "run_code"), "approval_tools": ("run_code",)}
    )
    with serve(ran, config) as server:
        yield server.url


def test_openai_chat_completions_approval_tools_hold_in_subagents(
    defaults_served: str, llm: ScriptedLLM, ran: list[str]
) -> None:
    """This face cannot ask a person: the approval tool is offered to no run at all."""
    client = OpenAI(base_url=f"{defaults_served}/v1", api_key=TOKEN, max_retries=0)
    completion = client.chat.completions.create(
        model="groq:m",
        messages=[{"role": "user", "content": TOP}],
    )
    assert completion.choices[0].finish_reason == "stop"
    top = [r for r in llm.requests if asked(r) == TOP]
    assert tool_names(top[0]) == ["ask_llm"]
    assert_held(llm, ran)


def test_responses_approval_tools_hold_in_subagents(
    defaults_served: str, llm: ScriptedLLM, ran: list[str]
) -> None:
    client = OpenAI(base_url=f"{defaults_served}/v1", api_key=TOKEN, max_retries=0)
    response = client.responses.create(
        model="groq:m",
        input=TOP,
    )
    assert response.status == "completed"
    assert "run_code" in response.output_text
    assert_held(llm, ran)


async def test_mcp_ask_approval_tools_hold_in_subagents(llm: ScriptedLLM, ran: list[str]) -> None:
    """The MCP face cannot ask a person either: ``ask`` is offered no approval tool, and a
    sub-agent of its run that calls one anyway runs nothing."""
    llm.respond_with(respond)
    config = TEST_CONFIG.model_copy(
        update={"default_tools": ("ask_llm", "run_code"), "approval_tools": ("run_code",)}
    )
    service = make_service([ask_llm_tool(), code_tool(ran), echo], config)
    with LoopbackServer(create_app(service), name="subagent-limits-mcp", lifespan="on") as server:
        async with open_mcp_session(server.url) as session:
            result = await session.call_tool("ask", {"question": TOP})
    assert not result.is_error, result
    top = [r for r in llm.requests if asked(r) == TOP]
    assert tool_names(top[0]) == ["ask_llm"]
    assert_held(llm, ran)


# -- the other limits: a sub-agent never gets more than its run ------------------------------


def test_subagents_keep_the_requests_iteration_and_output_caps(
    served: str, llm: ScriptedLLM, ran: list[str]
) -> None:
    """A request capped at 2 iterations and 50 output tokens: its sub-agent (whose own cap is
    5 here) stops at 2, and every one of its model calls asks for at most 50 tokens."""

    def busy(request: RecordedRequest) -> Reply:
        if asked(request) == SUB:
            if request.tool_choice == "none":
                return Reply(text="sub out of turns")
            return Reply(tool_calls=[call("echo", text=f"step {len(results(request))}")])
        if not results(request):
            return Reply(tool_calls=[call("ask_llm", query=SUB)])
        return Reply(text="done")

    llm.respond_with(busy)
    events = chat(
        served,
        {
            "model": "groq:m",
            "messages": [{"role": "user", "content": TOP}],
            "tools": ["ask_llm", "echo"],
            "max_iterations": 2,
            "sampling": {"max_output_tokens": 50},
        },
    )
    finish = next(e for e in events if e.type == "subagent_finish")
    assert (finish.stop_reason, finish.iterations) == ("max_iterations", 2)
    subs = [r for r in llm.requests if asked(r) == SUB]
    assert len([r for r in subs if r.tool_choice != "none"]) == 2
    caps = [r.body.get("max_completion_tokens", r.body.get("max_tokens")) for r in subs]
    assert caps
    assert all(cap is not None and cap <= 50 for cap in caps), caps
    assert isinstance(events[-1], Done)
    assert events[-1].text == "done"
