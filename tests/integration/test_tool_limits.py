"""Per-tool call limits (``AGENTLOOP_TOOL_LIMITS``, a request's ``tool_limits``): one count per
request, shared by its sub-agents, kept across a pause; a call past its limit is not run and
the model reads why.

Runs go through ``handle_chat`` and through the app on a loopback port (``/chat`` and the
openai SDK on ``/v1/chat/completions``), with the scripted model behind the real SDKs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from agentloop.ask_llm import ask_llm_tool
from agentloop.config import AgentConfig
from agentloop.events import Done, Event, RunStart, event_adapter
from agentloop.models import ChatRequest
from agentloop.plan import PlanError, plan_run
from agentloop.tools.base import Tool, ToolContext, tool
from agentloop.tools.registry import ToolRegistry
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, ToolCallSpec, call
from tests.helpers import (
    TEST_CONFIG,
    check_run_invariants,
    make_request,
    parse_sse,
    run_chat,
    tool_payload,
)
from tests.sample_tools import TextArgs, echo
from tests.served import AUTH, TOKEN, ServedApp, make_service

TOP = "Count things."
LIMITED = "not run: count may be called at most {} time(s) in this request"


def counter(ran: list[str]) -> Tool:
    """A tool that records each call it really runs (a refused call never reaches it)."""

    @tool(name="count")
    async def count(args: TextArgs, ctx: ToolContext) -> str:
        """Count one thing."""
        ran.append(args.text)
        return args.text

    return count


def limited(config: AgentConfig = TEST_CONFIG, **limits: int) -> AgentConfig:
    return config.model_copy(update={"tool_limits": limits})


def results_by_id(request: RecordedRequest) -> dict[str, dict[str, Any]]:
    """The tool results a model request carried, by call id."""
    return {
        m["tool_call_id"]: tool_payload(m["content"])
        for m in request.messages
        if m["role"] == "tool"
    }


def asked(req: RecordedRequest) -> str:
    return str(next(m["content"] for m in req.messages if m["role"] == "user"))


def one_call_per_turn(*texts: str) -> list[Reply]:
    return [Reply(tool_calls=[call("count", text=t)]) for t in texts]


# -- through handle_chat -------------------------------------------------------------------------


async def test_the_servers_limit_refuses_the_call_past_it(llm: ScriptedLLM, model: str) -> None:
    ran: list[str] = []
    turns = one_call_per_turn("1", "2", "3")
    llm.script(*turns, Reply(text="Counted two."))

    result = await run_chat(TOP, model=model, tools=[counter(ran)], config=limited(count=2))

    assert ran == ["1", "2"]
    assert result.done.stop_reason == "completed"
    third = turns[2].tool_calls[0].id
    read = results_by_id(llm.requests[-1])[str(third)]  # what the model was told
    assert read["ok"] is False
    assert read["error"].startswith(LIMITED.format(2))
    assert read["hint"] == "answer without count, or use another tool"
    refused = [e for e in result.tool_results if not e.ok]
    assert [e.call_id for e in refused] == [third]


async def test_a_request_lowers_the_servers_limit(llm: ScriptedLLM, model: str) -> None:
    ran: list[str] = []
    llm.script(*one_call_per_turn("1", "2"), Reply(text="One."))

    await run_chat(
        TOP, model=model, tools=[counter(ran)], config=limited(count=3), tool_limits={"count": 1}
    )

    assert ran == ["1"]


async def test_a_request_cannot_raise_the_servers_limit(llm: ScriptedLLM, model: str) -> None:
    ran: list[str] = []
    llm.script(*one_call_per_turn("1", "2"), Reply(text="One."))

    await run_chat(
        TOP, model=model, tools=[counter(ran)], config=limited(count=1), tool_limits={"count": 5}
    )

    assert ran == ["1"], "the request's 5 is clamped to the server's 1"


def test_the_plan_lowers_clamps_adds_and_never_lifts() -> None:
    registry = ToolRegistry([counter([]), echo])
    config = limited(count=2)

    def planned(**limits: int) -> dict[str, int]:
        request = make_request(TOP, model="groq:m", tool_limits=limits or None)
        return plan_run(request, config, registry).tool_limits

    assert planned() == {"count": 2}
    assert planned(count=1) == {"count": 1}
    assert planned(count=9) == {"count": 2}
    assert planned(echo=3) == {"count": 2, "echo": 3}, "a limit the server has not: added"
    # The server may limit a tool that is not loaded here (as with its approval tools).
    assert plan_run(make_request(TOP, model="groq:m"), limited(absent=1), registry).tool_limits == {
        "absent": 1
    }


@pytest.mark.parametrize("names", [["nope"], ["count", "nope", "zz"]])
def test_an_unknown_tool_name_is_refused_naming_tool_limits(names: list[str]) -> None:
    request = make_request(TOP, model="groq:m", tool_limits={n: 1 for n in names})
    with pytest.raises(PlanError) as caught:
        plan_run(request, TEST_CONFIG, ToolRegistry([counter([])]))
    assert caught.value.param == "tool_limits"
    assert str(sorted(set(names) - {"count"})) in caught.value.message


async def test_a_tool_limited_to_zero_is_not_offered(llm: ScriptedLLM, model: str) -> None:
    llm.script(Reply(text="No tools needed."))

    result = await run_chat(
        TOP, model=model, tools=[counter([]), echo], config=limited(echo=5), tool_limits={"echo": 0}
    )

    assert llm.requests[0].tool_names == ["count"]
    [start] = result.of(RunStart)
    assert start.tools == ["count"]


@pytest.mark.parametrize("concurrency", [1, 4])
async def test_one_rounds_calls_are_counted_in_the_order_asked(
    llm: ScriptedLLM, model: str, concurrency: int
) -> None:
    ran: list[str] = []
    malformed = ToolCallSpec("count", '{"txt": "x"}', "call_bad")  # not run, so not counted
    calls = [malformed, call("count", text="a"), call("count", text="b"), call("count", text="c")]
    llm.script(Reply(tool_calls=calls), Reply(text="Two of three."))
    config = limited(TEST_CONFIG.model_copy(update={"tool_concurrency": concurrency}), count=2)

    result = await run_chat(TOP, model=model, tools=[counter(ran)], config=config)

    assert ran == ["a", "b"]
    read = results_by_id(llm.requests[1])
    verdicts = [(read[str(c.id)]["ok"], read[str(c.id)].get("error", "")) for c in calls]
    assert [ok for ok, _ in verdicts] == [False, True, True, False]
    assert verdicts[0][1].startswith("invalid arguments: text: Field required")
    assert verdicts[3][1].startswith(LIMITED.format(2))
    assert result.done.text == "Two of three."


async def test_the_limit_holds_across_the_sub_agents(llm: ScriptedLLM, model: str) -> None:
    """The top level counts once, then two parallel sub-agents try twice each: 5 calls asked
    for, 3 run; the two refused are read by the sub-agents that made them."""
    ran: list[str] = []

    def respond(req: RecordedRequest) -> Reply:
        who, results = asked(req), results_by_id(req)
        if who == TOP:
            if not results:
                return Reply(tool_calls=[call("count", text="top")])
            if len(results) == 1:
                return Reply(tool_calls=[call("ask_llm", queries=["s1", "s2"])])
            return Reply(text="The sub-agents counted.")
        if len(results) < 2:
            return Reply(tool_calls=[call("count", text=f"{who}-{len(results)}")])
        return Reply(text=f"{who}: {[r.get('error', 'ok')[:20] for r in results.values()]}")

    llm.respond_with(respond)
    config = limited(count=3)

    result = await run_chat(TOP, model=model, tools=[ask_llm_tool(), counter(ran)], config=config)

    assert result.done.text == "The sub-agents counted."
    assert len(ran) == 3
    assert ran[0] == "top"
    counts = [e for e in result.tool_results if e.name == "count"]
    assert len(counts) == 5
    refused = [e for e in counts if not e.ok]
    assert len(refused) == 2
    assert {e.depth for e in refused} == {1}
    for event in refused:
        assert tool_payload(event.content)["error"].startswith(LIMITED.format(3))
        readers = [r for r in llm.requests if event.call_id in results_by_id(r)]
        assert readers, "a sub-agent's model read the refusal"
        assert results_by_id(readers[0])[event.call_id]["ok"] is False


async def test_the_count_is_the_requests_not_each_runs(llm: ScriptedLLM, model: str) -> None:
    """A sub-agent sees a limit its parent has used up: its call is refused at once."""
    ran: list[str] = []

    def respond(req: RecordedRequest) -> Reply:
        results = results_by_id(req)
        if asked(req) == TOP:
            steps = [call("count", text="top"), call("ask_llm", query="sub")]
            if len(results) < len(steps):
                return Reply(tool_calls=[steps[len(results)]])
            return Reply(text="done")
        if not results:
            return Reply(tool_calls=[call("count", text="sub")])
        return Reply(text=str(next(iter(results.values())).get("error")))

    llm.respond_with(respond)

    result = await run_chat(
        TOP, model=model, tools=[ask_llm_tool(), counter(ran)], tool_limits={"count": 1}
    )

    assert ran == ["top"]
    [answer] = [r for r in result.tool_results if r.name == "ask_llm"]
    assert tool_payload(answer.content)["result"]["answer"].startswith(LIMITED.format(1))


# -- through the app --------------------------------------------------------------------------


class Served(ServedApp):
    """The app on loopback, called over HTTP (``/chat``) and through the openai SDK."""

    def openai(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=TOKEN, max_retries=0)

    def chat(self, body: dict[str, Any]) -> tuple[int, list[Event] | dict[str, Any]]:
        """POST /chat: the status and the run's events (or, refused, the error)."""
        body = {"model": "groq:m", **body}
        with (
            httpx.Client(base_url=self.url, timeout=10) as client,
            client.stream("POST", "/chat", json=body, headers=AUTH) as response,
        ):
            if response.status_code != 200:
                response.read()
                error: dict[str, Any] = response.json()["error"]
                return response.status_code, error
            events = [
                event_adapter().validate_python(data)
                for _, data in parse_sse(response.iter_lines())
                if data is not None
            ]
        check_run_invariants(ChatRequest.model_validate(body), events)
        return 200, events


@pytest.fixture
def ran() -> list[str]:
    return []


@pytest.fixture
def served(llm: ScriptedLLM, ran: list[str]) -> Iterator[Served]:
    config = limited(TEST_CONFIG.model_copy(update={"approval_tools": ("echo",)}), count=2)
    with Served(make_service([counter(ran), echo], config=config), name="tool-limits") as served:
        yield served


def finished(events: list[Event] | dict[str, Any]) -> tuple[list[Event], Done]:
    assert isinstance(events, list), events
    done = events[-1]
    assert isinstance(done, Done)
    return events, done


def test_chat_counts_across_a_pause(served: Served, llm: ScriptedLLM, ran: list[str]) -> None:
    """One call before the run pauses for approval, one after: the third is past the server's
    limit of 2, because the count went with the run's resume token."""
    user = {"role": "user", "content": TOP}
    ask = call("echo", text="approve me")
    llm.script(Reply(tool_calls=[call("count", text="1"), ask]))
    status, events = served.chat({"messages": [user], "tools": ["count", "echo"]})
    _, paused = finished(events)
    assert (status, paused.stop_reason, ran) == (200, "approval_required", ["1"])

    last = call("count", text="3")
    llm.script(*one_call_per_turn("2"), Reply(tool_calls=[last]), Reply(text="Two."))
    history = [user, *[m.model_dump() for m in paused.messages]]
    _, events = served.chat(
        {
            "messages": history,
            "tools": ["count", "echo"],
            "resume": paused.resume,
            "approvals": [{"call_id": ask.id, "approved": True}],
        }
    )
    _, done = finished(events)

    assert done.stop_reason == "completed"
    assert ran == ["1", "2"]
    assert results_by_id(llm.requests[-1])[str(last.id)]["error"].startswith(LIMITED.format(2))


@pytest.mark.parametrize(
    ("limits", "param"),
    [
        ({"nope": 1}, "tool_limits"),
        ({"count": -1}, "tool_limits.count"),
        ({"count": 10_001}, "tool_limits.count"),
    ],
)
def test_chat_refuses_a_bad_limit_before_any_model_call(
    served: Served, llm: ScriptedLLM, limits: dict[str, int], param: str
) -> None:
    body = {"messages": [{"role": "user", "content": TOP}], "tool_limits": limits}
    status, error = served.chat(body)
    assert status == 422
    assert isinstance(error, dict)
    assert error["param"] == param, error
    assert llm.requests == []


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_openai_sdk_carries_tool_limits_in_agentloop(
    served: Served, llm: ScriptedLLM, ran: list[str], stream: bool
) -> None:
    """The request asks for 5 (the server allows 2) and lowers nothing else: of three calls
    in one round, the first two run and the third is refused; the model reads why."""
    calls = [call("count", text=t) for t in ("a", "b", "c")]
    llm.script(Reply(tool_calls=calls), Reply(text="Counted."))

    response: Any = served.openai().chat.completions.create(
        model="groq:m",
        messages=[{"role": "user", "content": TOP}],
        stream=stream,
        extra_body={"agentloop": {"tools": ["count"], "tool_limits": {"count": 5}}},
    )
    if stream:
        text = "".join(c.choices[0].delta.content or "" for c in response if c.choices)
    else:
        text = response.choices[0].message.content
    assert text == "Counted."
    assert ran == ["a", "b"]
    read = results_by_id(llm.requests[1])
    assert read[str(calls[2].id)]["error"].startswith(LIMITED.format(2))


def test_openai_sdk_unknown_limited_tool_is_a_422(served: Served, llm: ScriptedLLM) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        served.openai().chat.completions.create(
            model="groq:m",
            messages=[{"role": "user", "content": TOP}],
            extra_body={"agentloop": {"tool_limits": {"nope": 1}}},
        )
    body: Any = caught.value.body
    assert body["param"] == "agentloop.tool_limits", body
    assert "nope" in body["message"]
    assert llm.requests == []


def test_openai_sdk_request_lowers_the_limit(
    served: Served, llm: ScriptedLLM, ran: list[str]
) -> None:
    llm.script(*one_call_per_turn("a", "b"), Reply(text="One."))
    served.openai().chat.completions.create(
        model="groq:m",
        messages=[{"role": "user", "content": TOP}],
        extra_body={"agentloop": {"tools": ["count"], "tool_limits": {"count": 1}}},
    )
    assert ran == ["a"]
