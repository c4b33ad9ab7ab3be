"""Research jobs under per-principal limits: each job is charged to its owner.

The runner as the worker and the CLI use it (results in a folder, the quota on SQLite), the
worker as on Lambda (moto's S3, SQS and DynamoDB) for the queue's side; the model is the
scripted server. A scripted call reports 800 prompt and 200 completion tokens of ``groq:m``,
priced here at $10 per million either way: $0.01 a call.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentloop.ask_llm import ask_llm_tool
from agentloop.cli import main as agentloop_main
from agentloop.config import ConfigurationError
from agentloop.limits import Deadline
from agentloop.pricing import PriceOverride
from agentloop.principal import Principal
from agentloop.quota import LimitsConfig, Quota, quota_from_env
from agentloop.research.checkpoint import Checkpoints
from agentloop.research.jobs import JobMessage, JobSpec
from agentloop.research.owner import default_owner, owner_principal
from agentloop.research.runner import JobOutcome, JobRunner
from agentloop.research.store import LocalResultStore
from agentloop.research.worker import ResearchWorker
from agentloop.tools.base import Tool, ToolContext, tool
from agentloop.tools.registry import ToolRegistry
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG
from tests.research_aws import SCHEDULED, Aws, FakeContext, redeliver
from tests.sample_tools import echo
from tests.store_backends import Clock, sqlite_store

CONFIG = TEST_CONFIG.model_copy(
    update={"prices": {"groq:m": PriceOverride(input=10, output=10)}, "default_model": "groq:m"}
)
CALL_USD = 0.01
SHORT_S = 2.3
"""An invocation this long does one round of ``lookup`` and suspends (see ``slow_lookup``)."""
NIGHTLY = Principal.for_key("nightly")
LIMITS = {"AGENTLOOP_LIMITS": json.dumps({"default": {"usd_per_day": 1}})}


def message(spec: dict[str, Any], segment: int = 0) -> JobMessage:
    return JobMessage.model_validate(
        {"job": spec, "execution_id": "quota-test", "scheduled_time": SCHEDULED, "segment": segment}
    )


def job(job_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": job_id, "prompt": "Find out.", "model": "groq:m", "tools": ["echo"], **fields}


def limits_env(tmp_path: Path, **limits: float) -> dict[str, str]:
    return {
        "AGENTLOOP_STORE": f"sqlite:///{tmp_path / 'store.db'}",
        "AGENTLOOP_LIMITS": json.dumps({"default": limits}),
    }


def quota_of(env: dict[str, str]) -> Quota:
    made = quota_from_env(env)
    assert made is not None
    return made


def runner(
    tmp_path: Path, quota: Quota | None, *tools: Tool, owner: str = "key:research"
) -> JobRunner:
    return JobRunner(
        store=LocalResultStore(tmp_path / "results"),
        config=CONFIG,
        tools=ToolRegistry(list(tools) or [echo]),
        quota=quota,
        owner=owner,
    )


def used(quota: Quota, who: Principal) -> dict[str, float]:
    return {name: u.used for name, u in asyncio.run(quota.usage(who)).items()}


def one_round_then_answer(request: RecordedRequest) -> Reply:
    if any(m["role"] == "tool" for m in request.messages) or request.tool_choice == "none":
        return Reply(text="What the note said.", usage=(800, 200))
    return Reply(tool_calls=[call("echo", text="note")], usage=(800, 200))


def report_of(tmp_path: Path, job_id: str) -> str:
    return (tmp_path / "results" / "research" / "2025-06-02" / job_id / "report.md").read_text()


# -- the owner ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "owner",
    [
        "key:nightly",
        "jwt:0123456789abcdef01234567",
        "iam:arn:aws:iam::123456789012:user/x",
        "local",
    ],
)
def test_an_owner_is_a_principal_id_the_server_gives(owner: str) -> None:
    assert JobSpec.model_validate(job("a", owner=owner)).owner == owner
    assert owner_principal(owner).id == owner


@pytest.mark.parametrize(
    "owner",
    ["nightly", "key:", "key:a b", "key:-x", "key:a:b", "jwt:xyz", "iam:not-an-arn", "", "key:\n"],
)
def test_an_owner_that_names_no_principal_rejects_the_job(owner: str) -> None:
    with pytest.raises(ValueError, match="an owner is a principal id"):
        JobSpec.model_validate(job("a", owner=owner))


def test_the_default_owner_comes_from_the_deployment() -> None:
    assert default_owner({}) == "key:research"
    assert default_owner({"AGENTLOOP_RESEARCH_OWNER": "key:nightly"}) == "key:nightly"
    with pytest.raises(ConfigurationError, match="AGENTLOOP_RESEARCH_OWNER"):
        default_owner({"AGENTLOOP_RESEARCH_OWNER": "nightly"})


# -- money ----------------------------------------------------------------------------------


def test_an_owner_with_a_day_cap_for_one_run_is_stopped_with_quota(
    tmp_path: Path,
    llm: ScriptedLLM,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """$0.025 a day fits one two-call job: the next job of the owner may spend what is left
    (its call costs more, and it ends there with ``quota``), the one after is stopped before
    any model call; both leave a report. Another owner's job is unaffected."""
    env = limits_env(tmp_path, usd_per_day=0.025, concurrent_runs=4)
    quota = quota_of(env)
    llm.respond_with(one_round_then_answer)
    run = runner(tmp_path, quota).run

    first = asyncio.run(run(message(job("first", owner="key:nightly"))))
    second = asyncio.run(run(message(job("second", owner="key:nightly"))))
    calls = len(llm.requests)
    third = asyncio.run(run(message(job("third", owner="key:nightly"))))
    assert len(llm.requests) == calls, "no model call once the allowance is used up"
    other = asyncio.run(run(message(job("other", owner="key:other"))))

    assert (first.status, first.stop_reason) == ("succeeded", "completed")
    assert (second.status, second.stop_reason) == ("incomplete", "quota")
    assert (third.status, third.stop_reason) == ("incomplete", "quota")
    assert (other.status, other.stop_reason) == ("succeeded", "completed")
    for stopped in ("second", "third"):
        report = report_of(tmp_path, stopped)
        assert report.startswith(
            f"# {stopped}\n\n> **Incomplete: stopped at its owner's allowance."
        )
        assert "key:nightly" in report
        assert "| stop reason | quota |" in report
    spent = sum(o.cost_usd or 0 for o in (first, second, third))
    assert spent <= 0.025 + CALL_USD + 1e-9
    assert used(quota, NIGHTLY)["usd_per_day"] == pytest.approx(spent)
    assert used(quota, NIGHTLY)["concurrent_runs"] == 0, "every reservation settled"
    assert used(quota, Principal.for_key("other"))["usd_per_day"] == pytest.approx(2 * CALL_USD)

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    assert agentloop_main(["limits", "show", "key:nightly", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["limits"]["usd_per_day"]["used"] == pytest.approx(spent)


def test_a_job_without_an_owner_is_charged_to_the_deployments(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    quota = quota_of(limits_env(tmp_path, usd_per_day=1))
    llm.respond_with(one_round_then_answer)
    outcome = asyncio.run(runner(tmp_path, quota, owner="key:nightly").run(message(job("a"))))
    assert outcome.status == "succeeded"
    assert used(quota, NIGHTLY)["usd_per_day"] == pytest.approx(2 * CALL_USD)
    assert used(quota, Principal.for_key("research"))["usd_per_day"] == 0


def test_a_jobs_ask_llm_tree_counts_against_its_owner(tmp_path: Path, llm: ScriptedLLM) -> None:
    """Two parallel sub-agents spend out of the job's reservation: the owner's day counts
    every call of the tree, and the job's cost says the same."""

    def respond(request: RecordedRequest) -> Reply:
        asked = next(m["content"] for m in request.messages if m["role"] == "user")
        answered = any(m["role"] == "tool" for m in request.messages)
        if asked == "Find out." and not answered:
            return Reply(tool_calls=[call("ask_llm", queries=["q1", "q2"])], usage=(800, 200))
        return Reply(text=f"answer to {asked}", usage=(800, 200))

    llm.respond_with(respond)
    quota = quota_of(limits_env(tmp_path, usd_per_day=1, tokens_per_day=10**6))
    tree = runner(tmp_path, quota, ask_llm_tool())
    outcome = asyncio.run(tree.run(message(job("tree", owner="key:nightly", tools=["ask_llm"]))))

    assert outcome.status == "succeeded"
    assert len(llm.requests) == 4
    assert outcome.cost_usd == pytest.approx(4 * CALL_USD)
    spent = used(quota, NIGHTLY)
    assert spent["usd_per_day"] == pytest.approx(4 * CALL_USD)
    assert spent["tokens_per_day"] == 4000


# -- a job over several invocations ---------------------------------------------------------


class KeyArgs(BaseModel):
    key: str


@tool(name="lookup")
async def slow_lookup(args: KeyArgs, ctx: ToolContext) -> str:
    """Look a value up (slow: in a short invocation it takes all but its last 1.1 s)."""
    left = ctx.deadline.remaining()
    if left < 10:
        await asyncio.sleep(max(0.0, left - 1.1))
    return f"{args.key}={len(args.key)}"


ROUNDS = [["k0"], ["k1a", "k1b"], ["k2"]]


def three_rounds(request: RecordedRequest) -> Reply:
    """A round of lookups per invocation, then the answer (from the conversation alone)."""
    if request.tool_choice == "none":
        return Reply(text="Partial.", usage=(800, 200))
    done = sum(1 for m in request.messages if m["role"] == "tool")
    starts = [0, 1, 3]
    if done >= 4:
        return Reply(text="k0, k1a, k1b and k2 looked up.", usage=(800, 200))
    keys = ROUNDS[starts.index(done)]
    return Reply(tool_calls=[call("lookup", key=k) for k in keys], usage=(800, 200))


def run_to_the_end(
    make_runner: Callable[[int], JobRunner], spec: dict[str, Any]
) -> list[JobOutcome]:
    """Every invocation of the job, each with a short deadline (``make_runner(segment)``:
    the runner that invocation gets, as a later Lambda container would build its own)."""
    outcomes = []
    segment: int | None = 0
    while segment is not None:
        runner = make_runner(segment)
        outcome = asyncio.run(runner.run(message(spec, segment), deadline=Deadline.after(SHORT_S)))
        outcomes.append(outcome)
        segment = outcome.next_segment if outcome.status == "suspended" else None
    return outcomes


def test_a_continued_job_keeps_charging_its_first_owner(tmp_path: Path, llm: ScriptedLLM) -> None:
    """Four invocations, one call each: the owner named when the job began is charged for
    each exactly once (what earlier invocations spent is carried, not charged again), even
    after the deployment's default owner changed."""
    llm.respond_with(three_rounds)
    quota = quota_of(limits_env(tmp_path, usd_per_day=1, tokens_per_day=10**6, concurrent_runs=1))
    owners = ["key:nightly", "key:research", "key:research", "key:research"]

    outcomes = run_to_the_end(
        lambda n: runner(tmp_path, quota, slow_lookup, owner=owners[n]),
        {**job("long", tools=["lookup"]), "limits": {"max_invocations": 4}},
    )

    assert [o.status for o in outcomes] == ["suspended"] * 3 + ["succeeded"]
    assert len(llm.requests) == 4
    spent = used(quota, NIGHTLY)
    # each settlement rounds what it charges up to the micro-dollar
    assert spent["usd_per_day"] == pytest.approx(4 * CALL_USD, abs=4e-6)
    assert outcomes[-1].cost_usd == pytest.approx(4 * CALL_USD)
    assert spent["tokens_per_day"] == 4000
    assert spent["concurrent_runs"] == 0
    assert used(quota, Principal.for_key("research"))["usd_per_day"] == 0
    state, _ = Checkpoints(LocalResultStore(tmp_path / "results")).load(message(job("long")))
    assert state is not None
    assert state.owner == "key:nightly"


def test_a_continued_job_stopped_by_its_owners_allowance_reports_what_it_gathered(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    """$0.025 a day: the first invocations spend it, the next one is stopped before its model
    call with ``quota``, and the report has the lookups the job had made."""
    llm.respond_with(three_rounds)
    quota = quota_of(limits_env(tmp_path, usd_per_day=0.025))
    spec = {**job("long", owner="key:nightly", tools=["lookup"]), "limits": {"max_invocations": 9}}

    outcomes = run_to_the_end(lambda _: runner(tmp_path, quota, slow_lookup), spec)

    last = outcomes[-1]
    assert (last.status, last.stop_reason) == ("incomplete", "quota")
    assert used(quota, NIGHTLY)["usd_per_day"] == pytest.approx(last.cost_usd, abs=1e-5)
    assert last.cost_usd is not None
    assert last.cost_usd <= 0.025 + CALL_USD + 1e-9
    report = report_of(tmp_path, "long")
    assert "> **Incomplete: stopped at its owner's allowance." in report
    transcript = tmp_path / "results" / "research" / "2025-06-02" / "long" / "transcript.json"
    events = json.loads(transcript.read_text())["events"]
    assert [e["name"] for e in events if e["type"] == "tool_call_start"][:1] == ["lookup"]


def test_a_tools_call_limit_holds_across_a_jobs_invocations(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    """``lookup`` limited to 2 calls: k0 in the first invocation, k1a in the second, and k1b
    is refused there (a continued invocation does not start counting again)."""
    llm.respond_with(three_rounds)
    config = CONFIG.model_copy(update={"tool_limits": {"lookup": 2}})

    def limited(_: int) -> JobRunner:
        made = runner(tmp_path, None, slow_lookup)
        made.config = config
        made.__post_init__()
        return made

    outcomes = run_to_the_end(limited, {**job("capped", tools=["lookup"])})

    assert outcomes[-1].status == "succeeded"
    results = {
        m["tool_call_id"]: m["content"] for m in llm.requests[-1].messages if m["role"] == "tool"
    }
    refused = [content for content in results.values() if "at most 2 time(s)" in content]
    assert len(refused) == 2, results  # k1b and k2


# -- the store down -------------------------------------------------------------------------


def test_a_store_that_is_down_fails_the_job_closed(tmp_path: Path, llm: ScriptedLLM) -> None:
    (tmp_path / "file").write_text("not a directory")
    down = sqlite_store(tmp_path / "file" / "store.db", Clock())
    config = LimitsConfig.parse(json.dumps({"default": {"usd_per_day": 1}}))
    llm.respond_with(one_round_then_answer)

    outcome = asyncio.run(runner(tmp_path, Quota(config, down)).run(message(job("a"))))

    assert outcome.status == "failed"
    assert "could not be checked (503)" in (outcome.error or "")
    assert llm.requests == [], "no model call without the limits checked"
    failure = tmp_path / "results" / "research" / "2025-06-02" / "a" / "failure.json"
    assert failure.exists()


def test_on_the_queue_a_job_refused_for_a_store_down_is_retried_then_runs(
    aws: Aws, llm: ScriptedLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker answers a batch item failure (SQS delivers the message again, and after
    the queue's receives moves it to the dead-letter queue); once the store is back, the
    redelivery runs the job and charges its owner."""
    blocker = tmp_path / "store"
    blocker.write_text("not a directory")
    monkeypatch.setenv("AGENTLOOP_STORE", f"sqlite:///{blocker / 'store.db'}")
    monkeypatch.setenv("AGENTLOOP_LIMITS", LIMITS["AGENTLOOP_LIMITS"])
    monkeypatch.setenv("AGENTLOOP_RESEARCH_OWNER", "key:nightly")
    monkeypatch.setenv("AGENTLOOP_PRICES", json.dumps({"groq:m": {"input": 10, "output": 10}}))
    llm.respond_with(one_round_then_answer)
    worker = ResearchWorker.from_env(tools=ToolRegistry([echo]))
    try:
        aws.sqs.send_message(
            QueueUrl=aws.queue_url, MessageBody=message(job("a")).model_dump_json()
        )
        [record] = aws.drain()
        failed = worker.handle({"Records": [record]}, FakeContext())
        assert failed == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
        assert llm.requests == []

        blocker.unlink()
        blocker.mkdir()
        again = redeliver(aws, record)
        assert worker.handle({"Records": [again]}, FakeContext()) == {"batchItemFailures": []}
    finally:
        worker.close()
    quota = quota_of({"AGENTLOOP_STORE": f"sqlite:///{blocker / 'store.db'}", **LIMITS})
    assert aws.stored() == [
        "research/2025-06-02/a/report.md",
        "research/2025-06-02/a/transcript.json",
    ]
    assert used(quota, NIGHTLY)["usd_per_day"] == pytest.approx(2 * CALL_USD)
