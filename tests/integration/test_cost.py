"""Cost in dollars and the dollar budget, through full runs (sub-agents included).

Expected prices are computed here with genai-prices itself, from the usage each scripted call
reports, so the test checks our arithmetic and plumbing against the table's own figures.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import genai_prices
import pytest
from starlette.testclient import TestClient

from agentloop.ask_llm import ask_llm_tool
from agentloop.config import AgentConfig
from agentloop.events import Notice, RunStart, SubagentFinish, SubagentStart, UsageReport
from agentloop.models import Usage
from agentloop.plan import PlanError, plan_run
from agentloop.pricing import PriceOverride
from agentloop.research.cli import main
from agentloop.tools.registry import ToolRegistry
from chat_app import create_app
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG, make_request, parse_sse, run_chat
from tests.sample_tools import echo
from tests.served import AUTH, LOCAL, make_service

TOP = "Compare the two answers."


def asked(req: RecordedRequest) -> str:
    return str(next(m["content"] for m in req.messages if m["role"] == "user"))


def table_price(spec: str, usage: Usage) -> float:
    """The price genai-prices gives for one call's usage."""
    provider, _, model = spec.partition(":")
    price = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=usage.prompt_tokens,
            cache_read_tokens=usage.cached_tokens,
            output_tokens=usage.completion_tokens,
        ),
        model,
        provider_id=provider,
    )
    return float(price.total_price)


def max_tokens(req: RecordedRequest) -> int:
    return int(req.body["max_completion_tokens"])


def output_price(spec: str, tokens: int) -> float:
    return table_price(spec, Usage(completion_tokens=tokens))


async def test_costs_match_the_price_table_through_a_run_with_subagents(
    llm: ScriptedLLM, model: str
) -> None:
    # Every call reports different usage, cached tokens included, so each is priced apart.
    calls = {
        (TOP, 0): (1_200, 40, 512),
        (TOP, 1): (2_400, 300, 1_024),
        ("q1", 0): (700, 50, 0),
        ("q1", 1): (900, 120, 256),
        ("q2", 0): (650, 60, 0),
        ("q2", 1): (880, 90, 0),
    }
    priced = {
        key: table_price(model, Usage(prompt_tokens=p, completion_tokens=c, cached_tokens=k))
        for key, (p, c, k) in calls.items()
    }

    def respond(req: RecordedRequest) -> Reply:
        who = asked(req)
        answered = any(m["role"] == "tool" for m in req.messages)
        usage = calls[(who, int(answered))]
        if who == TOP:
            if not answered:
                return Reply(tool_calls=[call("ask_llm", queries=["q1", "q2"])], usage=usage)
            return Reply(text="Both answers compared.", usage=usage)
        if not answered:
            return Reply(tool_calls=[call("echo", text=who)], usage=usage)
        return Reply(text=f"answer to {who}", usage=usage)

    llm.respond_with(respond)
    result = await run_chat(TOP, model=model, tools=[ask_llm_tool(), echo])

    assert result.done.stop_reason == "completed"
    reports = result.of(UsageReport)
    assert len(reports) == len(calls)
    for report in reports:
        assert report.cost_usd == pytest.approx(table_price(model, report.usage), rel=1e-9)
        assert report.cost_usd is not None
        assert report.cost_usd > 0
    assert sorted(r.cost_usd or 0 for r in reports) == pytest.approx(sorted(priced.values()))
    # Cached input is cheaper than input where the table says so (gpt-4o-mini), never dearer.
    plain = table_price(model, Usage(prompt_tokens=1_200, completion_tokens=40))
    assert priced[(TOP, 0)] <= plain
    assert (priced[(TOP, 0)] < plain) == model.startswith("openai")

    top = sum(price for (who, _), price in priced.items() if who == TOP)
    subs = {q: sum(p for (w, _), p in priced.items() if w == q) for q in ("q1", "q2")}
    total = top + sum(subs.values())
    assert result.done.cost_usd == pytest.approx(total, rel=1e-9)
    assert result.done.cost_by_depth == [
        pytest.approx(top, rel=1e-9),
        pytest.approx(sum(subs.values()), rel=1e-9),
    ]
    assert reports[-1].total_cost_usd == pytest.approx(total, rel=1e-9)
    finishes = {f.run_id: f for f in result.of(SubagentFinish)}
    starts = {e.run_id: e for e in result.of(SubagentStart)}
    for run_id, finish in finishes.items():
        query = starts[run_id].query
        assert finish.cost_usd == pytest.approx(subs[query], rel=1e-9)
    assert not result.of(Notice)


async def test_a_model_without_a_price_reports_null_and_says_so_once(
    llm: ScriptedLLM, provider_env: ScriptedLLM
) -> None:
    unknown = "groq:no-such-model-in-any-table"
    llm.respond_with(
        lambda req: (
            Reply(text="done", usage=(100, 10))
            if any(m["role"] == "tool" for m in req.messages)
            else Reply(tool_calls=[call("echo", text="x")], usage=(100, 10))
        )
    )
    result = await run_chat("Hi", model=unknown, tools=[echo])

    assert result.done.stop_reason == "completed"
    assert [r.cost_usd for r in result.of(UsageReport)] == [None, None]
    assert [r.total_cost_usd for r in result.of(UsageReport)] == [None, None]
    assert result.done.cost_usd is None
    assert result.done.cost_by_depth == [None]
    [notice] = result.of(Notice)
    assert notice.code == "unpriced"
    assert unknown in notice.message


async def test_an_operator_price_covers_an_unknown_model_and_beats_the_table(
    llm: ScriptedLLM, model: str
) -> None:
    unknown = model.split(":")[0] + ":house-model"
    prices = {
        unknown: PriceOverride(input=2.0, cached_input=0.5, output=8.0),
        model: PriceOverride(input=1.0, output=1.0),
    }
    config = TEST_CONFIG.model_copy(update={"prices": prices})
    llm.respond_with(lambda req: Reply(text="ok", usage=(1_000, 100, 400)))

    house = await run_chat("Hi", model=unknown, config=config)
    known = await run_chat("Hi", model=model, config=config)

    assert house.done.cost_usd == pytest.approx((600 * 2.0 + 400 * 0.5 + 100 * 8.0) / 1e6)
    assert known.done.cost_usd == pytest.approx((1_000 + 100) * 1.0 / 1e6)


def test_prices_come_from_the_environment_as_json() -> None:
    config = AgentConfig.from_env(
        {
            "AGENTLOOP_PRICES": '{"groq:x": {"input": 1, "output": 2}}',
            "AGENTLOOP_MAX_COST_USD": "0.5",
        }
    )
    assert config.prices == {"groq:x": PriceOverride(input=1, output=2)}
    assert config.max_cost_usd == 0.5
    with pytest.raises(Exception, match="AGENTLOOP_PRICES"):
        AgentConfig.from_env({"AGENTLOOP_PRICES": "[1]"})


# -- the dollar budget: the token budget's tests, in dollars ---------------------------------


async def test_cost_budget_stops_the_run_within_one_call(llm: ScriptedLLM, model: str) -> None:
    per_call = (300, 40)
    llm.respond_with(
        lambda req: (
            Reply(text="Best answer so far.", usage=per_call)
            if req.tool_choice == "none"
            else Reply(tool_calls=[call("echo", text="more")], usage=per_call)
        )
    )
    one_call = table_price(model, Usage(prompt_tokens=300, completion_tokens=40))
    dollars = 10 * one_call
    config = TEST_CONFIG.model_copy(update={"final_answer_reserve": 400})

    result = await run_chat(
        "A big task.", model=model, tools=[echo], max_cost_usd=dollars, config=config
    )

    assert result.done.stop_reason == "budget"
    assert result.done.cost_usd is not None
    assert result.done.cost_usd <= dollars + one_call
    assert result.done.text.startswith("Best answer so far.")
    assert "budget of $" in result.done.text
    assert 2 <= result.done.iterations < 10
    assert llm.requests[-1].tool_choice == "none"
    [notice] = result.of(Notice)
    assert (notice.code, "$" in notice.message) == ("cost", True)
    [start] = result.of(RunStart)
    assert start.max_cost_usd == dollars
    # Each call's output cap is what the dollars left could pay for, never more.
    assert all(0 < max_tokens(r) <= 4_096 for r in llm.requests)


async def test_cost_budget_too_small_for_any_call_still_answers(
    llm: ScriptedLLM, model: str
) -> None:
    dollars = output_price(model, 10)

    result = await run_chat("Hello?", model=model, max_cost_usd=dollars)

    assert result.done.stop_reason == "budget"
    assert llm.requests == []
    assert "budget of $" in result.done.text
    assert result.done.cost_usd == 0


async def test_the_output_cap_is_what_the_dollars_left_can_pay_for(
    llm: ScriptedLLM, model: str
) -> None:
    llm.respond_with(lambda req: Reply(text="short", usage=(50, 5)))
    dollars = output_price(model, 500)  # prompt (~100 tokens) leaves a bit under 500

    result = await run_chat("Hello?", model=model, max_cost_usd=dollars)

    assert result.done.stop_reason == "completed"
    [request] = llm.requests
    assert 300 < max_tokens(request) < 500


async def test_parallel_subagents_share_one_dollar_budget(llm: ScriptedLLM, model: str) -> None:
    per_call = (300, 40)

    def respond(req: RecordedRequest) -> Reply:
        if asked(req) == TOP:
            if req.tool_choice == "none":
                return Reply(
                    text="Top-level answer from what the sub-agents found.", usage=per_call
                )
            if not any(m["role"] == "tool" for m in req.messages):
                return Reply(
                    tool_calls=[call("ask_llm", queries=["q1", "q2", "q3"])], usage=per_call
                )
            return Reply(text="Top-level answer.", usage=per_call)
        if req.tool_choice == "none":
            return Reply(text=f"best answer for {asked(req)}", usage=per_call)
        return Reply(tool_calls=[call("echo", text="more")], usage=per_call)

    llm.respond_with(respond)
    one_call = table_price(model, Usage(prompt_tokens=300, completion_tokens=40))
    dollars = 20 * one_call  # three endless sub-agents could spend far more
    config = TEST_CONFIG.model_copy(update={"final_answer_reserve": 600})

    result = await run_chat(
        TOP, model=model, tools=[ask_llm_tool(), echo], max_cost_usd=dollars, config=config
    )

    assert result.done.cost_usd is not None
    assert result.done.cost_usd <= dollars + one_call
    assert result.done.text.startswith("Top-level answer")
    finishes = result.of(SubagentFinish)
    assert len(finishes) == 3
    assert {f.stop_reason for f in finishes} == {"budget"}
    assert sum(f.cost_usd or 0 for f in finishes) == pytest.approx(result.done.cost_by_depth[1])
    # Equal shares: no sub-agent spent much more than another.
    spent = sorted(f.cost_usd or 0 for f in finishes)
    assert spent[-1] <= spent[0] + 2 * one_call


async def test_cost_budget_running_out_in_a_subagent_ends_the_request(
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
    one_call = table_price(model, Usage(prompt_tokens=300, completion_tokens=40))
    dollars = 20 * one_call
    # The sub-agent may go on until the dollars, not its iteration limit (which is never above
    # its run's), stop it.
    config = TEST_CONFIG.model_copy(
        update={"final_answer_reserve": 2_000, "subagent_max_iterations": 20, "max_iterations": 20}
    )

    result = await run_chat(
        TOP, model=model, tools=[ask_llm_tool(), echo], max_cost_usd=dollars, config=config
    )

    assert result.done.stop_reason == "budget"
    assert result.done.text.startswith(f"forced answer ({TOP})")
    finishes = result.of(SubagentFinish)
    assert finishes  # what the first one left unspent may pay for another turn, and one more
    assert {f.stop_reason for f in finishes} == {"budget"}
    assert result.done.cost_usd is not None
    assert result.done.cost_usd <= dollars + one_call


def test_the_dollar_budget_is_clamped_and_needs_a_price() -> None:
    config = TEST_CONFIG.model_copy(update={"max_cost_usd": 0.5, "max_cost_usd_cap": 2.0})
    registry = ToolRegistry()
    model = "openai:gpt-4o-mini"

    assert plan_run(make_request("x", model=model), config, registry).max_cost_usd == 0.5
    asked_more = make_request("x", model=model, max_cost_usd=10.0)
    assert plan_run(asked_more, config, registry).max_cost_usd == 2.0
    assert plan_run(make_request("x", model=model), TEST_CONFIG, registry).max_cost_usd is None
    with pytest.raises(PlanError) as refused:
        plan_run(make_request("x", model="groq:unpriced", max_cost_usd=1.0), config, registry)
    assert refused.value.param == "max_cost_usd"
    with pytest.raises(PlanError) as by_default:
        plan_run(make_request("x", model="groq:unpriced"), config, registry)
    assert by_default.value.param == "model"


def test_research_jobs_take_a_dollar_limit_and_the_table_shows_each_jobs_cost(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    llm.respond_with(lambda req: Reply(text="An answer.", usage=(900, 100)))
    spec = AgentConfig().default_model
    jobs = tmp_path / "jobs.json"
    jobs.write_text(
        json.dumps(
            {
                "jobs": [
                    {"id": "free", "prompt": "Question?", "tools": []},
                    {
                        "id": "tight",
                        "prompt": "Question?",
                        "tools": [],
                        "limits": {"max_cost_usd": output_price(spec, 10)},
                    },
                ]
            }
        )
    )
    out, err = io.StringIO(), io.StringIO()

    code = main([str(jobs), "--output", str(tmp_path / "out")], out=out, err=err)

    assert code == 0
    lines = out.getvalue().strip().splitlines()
    assert lines[0].split()[7] == "cost"  # "stop reason" is two words
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    expected = table_price(spec, Usage(prompt_tokens=900, completion_tokens=100))
    assert rows["free"][:4] == ["free", "succeeded", "completed", "1,000"]
    assert rows["free"][6] == f"${expected:.6f}"
    assert rows["tight"][:4] == ["tight", "incomplete", "budget", "0"]
    assert rows["tight"][6] == "$0.000000"
    report = Path(rows["tight"][-1]).read_text()
    assert "stopped at its cost budget" in report
    assert "`limits.max_cost_usd`" in report
    assert "| cost | $0.000000 |" in report


def test_the_chat_route_takes_max_cost_usd_and_refuses_what_it_cannot_keep(
    llm: ScriptedLLM, model: str
) -> None:
    llm.respond_with(lambda req: Reply(text="Paris.", usage=(500, 20, 128)))
    user = {"role": "user", "content": "Capital of France?"}
    with TestClient(create_app(make_service()), base_url=LOCAL) as client:
        unpriced = client.post(
            "/chat",
            json={"messages": [user], "model": "groq:unpriced-model", "max_cost_usd": 0.01},
            headers=AUTH,
        )
        zero = client.post(
            "/chat", json={"messages": [user], "model": model, "max_cost_usd": 0}, headers=AUTH
        )
        with client.stream(
            "POST",
            "/chat",
            json={"messages": [user], "model": model, "max_cost_usd": 0.01},
            headers=AUTH,
        ) as response:
            events = parse_sse(response.iter_lines())

    assert unpriced.status_code == 422
    assert unpriced.json()["error"]["param"] == "max_cost_usd"
    assert "no price is known" in unpriced.json()["error"]["message"]
    assert zero.status_code == 422
    data = {kind: body for kind, body in events if body is not None}
    assert data["run_start"]["max_cost_usd"] == 0.01
    expected = table_price(model, Usage(prompt_tokens=500, completion_tokens=20, cached_tokens=128))
    assert data["usage"]["cost_usd"] == pytest.approx(expected)
    assert data["done"]["cost_usd"] == pytest.approx(expected)
    assert data["done"]["cost_by_depth"] == [pytest.approx(expected)]
