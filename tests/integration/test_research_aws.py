"""The research functions on moto (S3, SQS, DynamoDB) with the scripted model.

The planner and the worker are called through their handlers, as Lambda calls them;
messages are read back from the moto queue and results from the moto bucket. Jobs run in
one batch, so replies are routed by the job's prompt rather than by order.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agentloop.config import AgentConfig, ConfigurationError
from agentloop.research.jobs import JobMessage
from agentloop.research.store import LocalResultStore
from agentloop.research.worker import ResearchWorker
from agentloop.tools.registry import ToolRegistry
from tests.cloudformation import load_template
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.research_aws import (
    BUCKET,
    SCHEDULED,
    TABLE,
    Aws,
    FakeContext,
    idempotency_key,
    redeliver,
)

EXECUTION = "d32c5kddcf5bb8c3"
PREFIX = "research/2025-06-02/"


def job(job_id: str, prompt: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"id": job_id, "prompt": prompt or f"Research question {job_id}?", **fields}


def schedule(*jobs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"jobs": list(jobs), "execution_id": EXECUTION, "scheduled_time": SCHEDULED, **extra}


def by_prompt(routes: dict[str, Reply], default: Callable[[str], Reply]) -> Callable[..., Reply]:
    """A responder answering each job by its prompt (the user message)."""

    def respond(request: RecordedRequest) -> Reply:
        prompt = next(m["content"] for m in request.messages if m["role"] == "user")
        return routes.get(prompt) or default(prompt)

    return respond


def answer_for(prompt: str) -> Reply:
    return Reply(text=f"Answer to: {prompt}", usage=(40, 10))


def plan_and_run(aws: Aws, event: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list]:
    from research_handlers import schedule_handler, worker_handler

    summary = schedule_handler(event, FakeContext())
    records = aws.drain()
    response = worker_handler({"Records": records}, FakeContext())
    return summary, response, records


def prompts_sent(llm: ScriptedLLM) -> list[str]:
    return [next(m["content"] for m in r.messages if m["role"] == "user") for r in llm.requests]


# -- the planner ------------------------------------------------------------------------------


def test_a_schedule_of_n_jobs_fans_out_to_n_messages(aws: Aws) -> None:
    from research_handlers import schedule_handler

    jobs = [job(f"job-{i:02d}") for i in range(23)]  # three SendMessageBatch calls

    summary = schedule_handler(schedule(*jobs), FakeContext())

    assert summary["queued"] == 23
    assert summary["rejected"] == []
    assert summary["dry_run"] is False
    messages = [JobMessage.model_validate_json(r["body"]) for r in aws.drain()]
    assert sorted(m.job.id for m in messages) == [j["id"] for j in jobs]
    assert {m.execution_id for m in messages} == {EXECUTION}
    assert {m.scheduled_time.isoformat() for m in messages} == {"2025-06-02T06:00:00+00:00"}
    assert messages[0].job.prompt.startswith("Research question job-")


def test_a_manual_invocation_uses_the_request_id_as_execution_id(aws: Aws) -> None:
    from research_handlers import schedule_handler

    context = FakeContext(aws_request_id="req-123")
    event = {"jobs": [job("one")], "execution_id": "<aws.scheduler.execution-id>"}

    summary = schedule_handler(event, context)

    assert summary["execution_id"] == "manual-req-123"
    [record] = aws.drain()
    assert JobMessage.model_validate_json(record["body"]).execution_id == "manual-req-123"


def test_an_invalid_job_is_reported_and_the_valid_ones_run(aws: Aws, llm: ScriptedLLM) -> None:
    llm.respond_with(by_prompt({}, answer_for))
    event = schedule(
        job("first"),
        {"id": "not a slug!", "prompt": "x", "limits": {"max_iterations": 0}},
        job("third", tools=["no_such_tool"]),
        job("fourth"),
    )

    summary, response, records = plan_and_run(aws, event)

    assert summary["queued"] == 2
    assert summary["jobs"] == ["first", "fourth"]
    rejected = {(r["job"], r["field"]) for r in summary["rejected"]}
    assert rejected == {("#1", "id"), ("#1", "limits.max_iterations"), ("third", "tools")}
    assert response == {"batchItemFailures": []}
    assert len(records) == 2
    assert aws.stored() == [
        f"{PREFIX}first/report.md",
        f"{PREFIX}first/transcript.json",
        f"{PREFIX}fourth/report.md",
        f"{PREFIX}fourth/transcript.json",
    ]


def test_a_dollar_limit_on_a_model_with_no_price_is_rejected_when_planned(
    aws: Aws, llm: ScriptedLLM
) -> None:
    """Refused by the planner, never queued: the worker would fail it three times over."""
    llm.respond_with(by_prompt({}, answer_for))
    event = schedule(
        job("unpriced", model="groq:no-such-price", limits={"max_cost_usd": 0.5}),
        job("priced", limits={"max_cost_usd": 0.5}),
        job("unpriced-no-limit", model="groq:no-such-price"),
    )

    summary, response, records = plan_and_run(aws, event)

    assert summary["jobs"] == ["priced", "unpriced-no-limit"]
    [rejection] = summary["rejected"]
    assert (rejection["job"], rejection["field"]) == ("unpriced", "limits.max_cost_usd")
    assert rejection["message"].startswith("no price is known for model 'groq:no-such-price'")
    assert response == {"batchItemFailures": []}
    assert len(records) == 2
    assert "Research question unpriced?" not in prompts_sent(llm)


def test_the_deployed_planner_plans_with_the_workers_settings() -> None:
    """Every agent setting the template gives the worker, the planner has too (the same
    parameter), so the planner's plan of a job is the one the worker will make."""
    template = load_template()
    resources = template["Resources"]
    worker = resources["ResearchWorkerFunction"]["Properties"]["Environment"]["Variables"]
    planner = resources["ResearchPlannerFunction"]["Properties"]["Environment"]["Variables"]
    agent = {f"AGENTLOOP_{name.upper()}" for name in AgentConfig.model_fields}
    for name in agent & set(worker):
        if name not in ("AGENTLOOP_MAX_ITERATIONS", "AGENTLOOP_TOKEN_BUDGET"):
            assert planner.get(name) == worker[name], name
    assert {"AGENTLOOP_DEFAULT_MODEL", "AGENTLOOP_ALLOWED_MODELS"} <= set(planner)


def test_jobs_from_an_s3_json_lines_file(aws: Aws, llm: ScriptedLLM) -> None:
    from research_handlers import schedule_handler

    lines = [json.dumps(job("alpha")), "", "{not json", json.dumps(job("beta", model="groq:m"))]
    aws.s3.put_object(Bucket=BUCKET, Key="jobs/nightly.jsonl", Body="\n".join(lines).encode())
    event = {"jobs_s3": f"s3://{BUCKET}/jobs/nightly.jsonl", "execution_id": EXECUTION}

    summary = schedule_handler(event, FakeContext())

    assert summary["source"] == f"s3://{BUCKET}/jobs/nightly.jsonl"
    assert summary["jobs"] == ["alpha", "beta"]
    [rejection] = summary["rejected"]
    assert (rejection["job"], rejection["field"]) == ("line 3", "(json)")
    messages = [JobMessage.model_validate_json(r["body"]) for r in aws.drain()]
    assert sorted(m.job.id for m in messages) == ["alpha", "beta"]


def test_an_unusable_schedule_input_fails_the_planner(aws: Aws) -> None:
    from agentloop.research.jobs import JobsInputError
    from research_handlers import schedule_handler

    with pytest.raises(JobsInputError, match="either"):
        schedule_handler({"execution_id": EXECUTION}, FakeContext())
    assert aws.drain() == []


# -- the worker -------------------------------------------------------------------------------


def test_the_worker_writes_a_report_and_a_transcript_per_job(
    aws: Aws, llm: ScriptedLLM, model: str
) -> None:
    llm.respond_with(by_prompt({}, answer_for))
    jobs = [job(f"topic-{i}", title=f"Topic {i}", model=model) for i in range(3)]

    _, response, _ = plan_and_run(aws, schedule(*jobs))

    assert response == {"batchItemFailures": []}
    for spec in jobs:
        report = aws.read(f"{PREFIX}{spec['id']}/report.md")
        assert report.startswith(f"# {spec['title']}\n\nAnswer to: {spec['prompt']}")
        assert "| stop reason | completed |" in report
        assert f"| model | {model} |" in report
        assert "| tokens | 50 (40 prompt, 10 completion, 0 cached) |" in report
        assert f"| execution id | {EXECUTION} |" in report
        transcript = json.loads(aws.read(f"{PREFIX}{spec['id']}/transcript.json"))
        kinds = [e["type"] for e in transcript["events"]]
        assert kinds[0] == "run_start"
        assert kinds[-1] == "done"
        assert transcript["events"][-1]["text"] == f"Answer to: {spec['prompt']}"
        assert transcript["execution_id"] == EXECUTION


def test_one_failing_job_is_a_batch_item_failure_and_the_others_succeed(
    aws: Aws, llm: ScriptedLLM
) -> None:
    bad_prompt = "This one has a revoked key."
    llm.respond_with(by_prompt({bad_prompt: Reply(status=401)}, answer_for))
    jobs = [job("good-1"), job("bad", bad_prompt), job("good-2")]

    _, response, records = plan_and_run(aws, schedule(*jobs))

    bad_record = next(r for r in records if json.loads(r["body"])["job"]["id"] == "bad")
    assert response == {"batchItemFailures": [{"itemIdentifier": bad_record["messageId"]}]}
    assert prompts_sent(llm).count(bad_prompt) == 1  # a 401 is not retried
    failure = json.loads(aws.read(f"{PREFIX}bad/failure.json"))
    assert failure["job_id"] == "bad"
    assert failure["execution_id"] == EXECUTION
    assert "GROQ_API_KEY" in failure["error"]
    assert failure["attempt"] == 1
    assert failure["events"][0]["type"] == "run_start"
    assert failure["events"][-1]["stop_reason"] == "error"
    assert f"{PREFIX}bad/report.md" not in aws.stored()
    for good in ("good-1", "good-2"):
        assert "| stop reason | completed |" in aws.read(f"{PREFIX}{good}/report.md")


def test_a_redelivered_finished_job_does_not_call_the_model_again(
    aws: Aws, llm: ScriptedLLM
) -> None:
    from research_handlers import worker_handler

    bad_prompt = "Fails every time."
    llm.respond_with(by_prompt({bad_prompt: Reply(status=401)}, answer_for))
    _, first, records = plan_and_run(aws, schedule(job("done-once"), job("retry-me", bad_prompt)))
    assert len(first["batchItemFailures"]) == 1
    calls = len(llm.requests)

    # SQS delivers both again (say the batch's visibility timeout ran out).
    again = worker_handler({"Records": records}, FakeContext())

    assert len(llm.requests) == calls + 1  # only the failed job ran again
    assert prompts_sent(llm)[calls:] == [bad_prompt]
    assert again == first
    item = aws.dynamodb.scan(TableName=TABLE)["Items"]
    statuses = {i["id"]["S"]: i["status"]["S"] for i in item}
    assert statuses == {idempotency_key("done-once", EXECUTION): "COMPLETED"}


def test_the_idempotency_key_is_exactly_job_id_execution_id_and_segment(
    aws: Aws, llm: ScriptedLLM
) -> None:
    from research_handlers import schedule_handler, worker_handler

    llm.respond_with(by_prompt({}, answer_for))
    plan_and_run(aws, schedule(job("nightly")))
    assert len(llm.requests) == 1

    # Same job, same execution, different wording: still the same run.
    schedule_handler(schedule(job("nightly", "Reworded question?")), FakeContext())
    worker_handler({"Records": aws.drain()}, FakeContext())
    assert len(llm.requests) == 1

    # The next scheduled run (a new execution id) runs it again.
    schedule_handler(schedule(job("nightly"), execution_id="e2e2e2e2"), FakeContext())
    worker_handler({"Records": aws.drain()}, FakeContext())
    assert len(llm.requests) == 2
    keys = {i["id"]["S"] for i in aws.dynamodb.scan(TableName=TABLE)["Items"]}
    assert keys == {idempotency_key("nightly", EXECUTION), idempotency_key("nightly", "e2e2e2e2")}


def test_a_malformed_message_is_a_batch_item_failure(aws: Aws, llm: ScriptedLLM) -> None:
    from research_handlers import worker_handler

    llm.respond_with(by_prompt({}, answer_for))
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody='{"job": {"id": "x"}}')
    [record] = aws.drain()

    response = worker_handler({"Records": [record]}, FakeContext())

    assert response == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    assert llm.requests == []


def test_on_lambda_the_worker_refuses_to_run_without_the_table(tmp_path: Any) -> None:
    env = {"AWS_LAMBDA_FUNCTION_NAME": "agentloop-research-worker"}
    with pytest.raises(ConfigurationError, match="AGENTLOOP_IDEMPOTENCY_TABLE"):
        ResearchWorker.from_env(env, tools=ToolRegistry(), store=LocalResultStore(tmp_path))


# -- limits and retries -----------------------------------------------------------------------


def tool_then_answer(request: RecordedRequest) -> Reply:
    """Calls a tool until it has a result, then answers: a run its iteration limit can cut."""
    if any(m["role"] == "tool" for m in request.messages):
        return Reply(text="From the one lookup I made: partial.", usage=(40, 10))
    return Reply(tool_calls=[call("lookup", key="x")], usage=(900, 100))


@pytest.mark.parametrize("next_ms", [5_500, 120_000], ids=["stopped-again", "finished"])
def test_a_job_that_meets_its_deadline_continues_in_a_queued_invocation(
    aws: Aws, llm: ScriptedLLM, next_ms: int
) -> None:
    from research_handlers import schedule_handler, worker_handler

    llm.respond_with(by_prompt({}, answer_for))
    spec = job("slow", title="Slow topic", limits={"max_invocations": 2})
    schedule_handler(schedule(spec), FakeContext())
    [first] = aws.drain()

    # 5.5 s left, 5 s kept back: half a second is too short for a model turn.
    response = worker_handler({"Records": [first]}, FakeContext(remaining_ms=5_500))

    assert response == {"batchItemFailures": []}
    assert llm.requests == []
    assert aws.stored() == [], "no report yet: the job goes on"
    [second] = aws.drain()
    assert second["messageId"] != first["messageId"]
    assert JobMessage.model_validate_json(second["body"]).segment == 1

    again = worker_handler({"Records": [second]}, FakeContext(remaining_ms=next_ms))

    assert again == {"batchItemFailures": []}
    assert aws.drain() == [], "the job's last allowed invocation answers rather than suspends"
    report = aws.read(f"{PREFIX}slow/report.md")
    assert "| invocations | 2 |" in report
    if next_ms == 5_500:
        assert report.startswith("# Slow topic\n\n> **Incomplete: stopped at its deadline.** ")
        assert "over 2 invocations" in report
        assert "| status | incomplete |" in report
    else:
        assert report.startswith(f"# Slow topic\n\nAnswer to: {prompts_sent(llm)[0]}")
        assert "| status | succeeded |" in report
    items = aws.dynamodb.scan(TableName=TABLE)["Items"]
    assert {i["id"]["S"]: i["status"]["S"] for i in items} == {
        idempotency_key("slow", EXECUTION, 0): "COMPLETED",
        idempotency_key("slow", EXECUTION, 1): "COMPLETED",
    }


def test_iteration_and_budget_stops_are_kept_without_a_retry(aws: Aws, llm: ScriptedLLM) -> None:
    llm.respond_with(tool_then_answer)
    jobs = [
        job("few-turns", tools=[], limits={"max_iterations": 1}),
        job("few-tokens", tools=[], limits={"token_budget": 1_000}),
    ]

    _, response, _ = plan_and_run(aws, schedule(*jobs))

    assert response == {"batchItemFailures": []}
    turns = aws.read(f"{PREFIX}few-turns/report.md")
    assert "> **Incomplete: stopped at its iteration limit.** The run used all 1 tool" in turns
    assert "From the one lookup I made: partial." in turns
    assert "send a message" not in turns
    tokens = aws.read(f"{PREFIX}few-tokens/report.md")
    assert "> **Incomplete: stopped at its token budget.**" in tokens
    assert "of 1,000 tokens" in tokens
    assert "| stop reason | budget |" in tokens
    assert not [key for key in aws.stored() if key.endswith("failure.json")]


def test_a_successful_retry_removes_the_failure_record(aws: Aws, llm: ScriptedLLM) -> None:
    from research_handlers import worker_handler

    flaky = "Fails until the key is fixed."
    routes = {flaky: Reply(status=401)}
    llm.respond_with(by_prompt(routes, answer_for))
    _, first, [record] = plan_and_run(aws, schedule(job("flaky", flaky)))
    assert len(first["batchItemFailures"]) == 1
    assert aws.stored() == [f"{PREFIX}flaky/failure.json"]

    routes.clear()  # the key was fixed before SQS delivered the message again
    again = worker_handler({"Records": [redeliver(aws, record)]}, FakeContext())

    assert again == {"batchItemFailures": []}
    assert aws.stored() == [f"{PREFIX}flaky/report.md", f"{PREFIX}flaky/transcript.json"]
    assert "| attempt | 2 |" in aws.read(f"{PREFIX}flaky/report.md")
