"""Research jobs longer than one invocation: checkpoints, continuations, crashes, redelivery.

The worker runs as on Lambda (moto's S3, SQS and DynamoDB; continuations go through the
queue), the CLI as ``make research``; the model is the scripted server behind the real SDKs.
Every job here does the same research: three rounds of ``lookup`` (one of two calls at once),
then an answer, decided by the conversation alone, so a run that is cut into invocations can
be compared request by request with one that is not. ``lookup`` takes a short invocation's
time (it returns when 1.1 s are left, too little for another turn), so each invocation does
one round and suspends; in a long one it answers at once.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentloop.chat import AgentSetup, ChatContext, handle_chat
from agentloop.events import Done, Event
from agentloop.models import ChatRequest, UserMessage
from agentloop.research.checkpoint import (
    Checkpoints,
    JobState,
    RoundRecorder,
    StaleCheckpoint,
    checkpoint_key,
)
from agentloop.research.cli import main
from agentloop.research.jobs import JobMessage
from agentloop.research.planner import plan, sender_from_env
from agentloop.research.runner import JobRunner
from agentloop.research.store import LocalResultStore, S3ResultStore
from agentloop.research.worker import ResearchWorker
from agentloop.tools.base import Tool, ToolContext, tool
from agentloop.tools.registry import ToolRegistry
from tests.cloudformation import load_template
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, ToolCallSpec
from tests.helpers import TEST_CONFIG
from tests.research_aws import (
    BUCKET,
    SCHEDULED,
    TABLE,
    Aws,
    FakeContext,
    idempotency_key,
    redeliver,
)
from tests.sample_tools import boom

DAY = "research/2025-06-02"
SHORT_MS = 7_300
"""A Lambda context with 7.3 s left: the worker keeps 5 s back, so 2.3 s for the job."""
SHORT_S = "2.3"
"""The same for ``--invocation-timeout``."""
LONG_MS = 120_000
ROUNDS = [["k0"], ["k1a", "k1b"], ["k2"]]
ANSWER = "k0, k1a, k1b and k2 are 14, 21, 21 and 14."


class KeyArgs(BaseModel):
    key: str


def slow_lookup() -> Tool:
    @tool(name="lookup")
    async def lookup(args: KeyArgs, ctx: ToolContext) -> dict[str, Any]:
        """Look a value up (slow: in a short invocation it takes all but its last 1.1 s)."""
        left = ctx.deadline.remaining()
        if left < 10:
            await asyncio.sleep(max(0.0, left - 1.1))
        return {"key": args.key, "value": len(args.key) * 7}

    return lookup


def researcher(request: RecordedRequest) -> Reply:
    """Three rounds of lookups, then the answer; a tool-less call gets what is known."""
    if request.tool_choice == "none":
        return Reply(text="Partial: what the lookups so far found.", usage=(300, 20))
    done = sum(1 for m in request.messages if m["role"] == "tool")
    starts = [0, 1, 3, 4]
    if done >= starts[-1]:
        return Reply(text=ANSWER, usage=(400, 30))
    turn = starts.index(done)
    calls = [
        ToolCallSpec("lookup", json.dumps({"key": key}), f"call_{key}") for key in ROUNDS[turn]
    ]
    text = f"Looking up round {turn}." if turn == 1 else None
    return Reply(text=text, tool_calls=calls, usage=(200 + turn, 20))


def job(job_id: str = "steady", **fields: Any) -> dict[str, Any]:
    spec = {"id": job_id, "prompt": "What do the lookups say?", "tools": ["lookup"]}
    return {**spec, "model": "groq:llama-3.3-70b-versatile", **fields}


def bodies(llm: ScriptedLLM) -> list[dict[str, Any]]:
    return [r.body for r in llm.requests]


# -- on AWS (moto): the worker, its queue, its table, its bucket --------------------------------


@pytest.fixture
def worker(aws: Aws) -> Iterator[ResearchWorker]:
    """The worker as the template configures it (table, bucket, queue), with ``lookup``."""
    built = ResearchWorker.from_env(tools=ToolRegistry([slow_lookup()]))
    yield built
    built.close()


def queue(execution_id: str, spec: dict[str, Any]) -> None:
    event = {"jobs": [spec], "execution_id": execution_id, "scheduled_time": SCHEDULED}
    summary = plan(event, sender=sender_from_env(os.environ), known_tools=["lookup"])
    assert summary.queued == [spec["id"]]


def deliver(aws: Aws, worker: ResearchWorker, remaining_ms: int) -> list[dict[str, Any]]:
    """What SQS does: hand the worker every message on the queue until there is none."""
    responses = []
    while records := aws.drain():
        responses.append(
            worker.handle({"Records": records}, FakeContext(remaining_ms=remaining_ms))
        )
    return responses


def segments(records: list[dict[str, Any]]) -> list[int]:
    return [JobMessage.model_validate_json(r["body"]).segment for r in records]


def reference(aws: Aws, worker: ResearchWorker, llm: ScriptedLLM) -> list[dict[str, Any]]:
    """The job's requests when one invocation is enough; the server is then reset."""
    llm.respond_with(researcher)
    queue("once", job())
    assert deliver(aws, worker, LONG_MS) == [{"batchItemFailures": []}]
    report = aws.read(f"{DAY}/steady/report.md")
    assert report.startswith(f"# steady\n\n{ANSWER}\n")
    assert "| invocations | 1 |" in report
    requests = bodies(llm)
    assert len(requests) == 4
    llm.reset()
    llm.respond_with(researcher)
    return requests


def test_a_job_over_several_invocations_makes_the_model_calls_of_one(
    aws: Aws,
    worker: ResearchWorker,
    llm: ScriptedLLM,
) -> None:
    expected = reference(aws, worker, llm)
    queue("split", job())

    responses = deliver(aws, worker, SHORT_MS)

    assert responses == [{"batchItemFailures": []}] * 4
    assert bodies(llm) == expected, "the same requests, none repeated, none missing"
    report = aws.read(f"{DAY}/steady/report.md")
    assert report.startswith(f"# steady\n\n{ANSWER}\n")
    assert "| status | succeeded |" in report
    assert "| invocations | 4 |" in report
    assert "| iterations | 4 |" in report
    assert "| tokens | 1,093 (1,003 prompt, 90 completion, 0 cached) |" in report  # all four calls
    events = json.loads(aws.read(f"{DAY}/steady/transcript.json"))["events"]
    ends = [e["stop_reason"] for e in events if e["type"] == "done" and e["depth"] == 0]
    assert ends == ["suspended", "suspended", "suspended", "completed"]
    assert [e["key"] for e in _lookups(events)] == ["k0", "k1a", "k1b", "k2"]
    records = {i["id"]["S"]: i["status"]["S"] for i in _items(aws)}
    assert records == {idempotency_key("steady", "once", 0): "COMPLETED"} | {
        idempotency_key("steady", "split", n): "COMPLETED" for n in range(4)
    }
    state = _state(aws, "split")
    assert (state.status, state.segment, state.invocations, state.messages) == (
        "finished",
        3,
        4,
        [],
    )


def _lookups(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        json.loads(e["arguments"])
        for e in events
        if e["type"] == "tool_call_start" and e["name"] == "lookup"
    ]


def _items(aws: Aws) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = aws.dynamodb.scan(TableName=TABLE)["Items"]
    return items


def _forget_idempotency(aws: Aws) -> None:
    """As if the records had expired: only the checkpoint stands between a delivery and a rerun."""
    for item in _items(aws):
        aws.dynamodb.delete_item(TableName=TABLE, Key={"id": item["id"]})


def _state(aws: Aws, execution_id: str) -> JobState:
    message = JobMessage.model_validate(
        {"job": job(), "execution_id": execution_id, "scheduled_time": SCHEDULED}
    )
    return JobState.model_validate_json(aws.read(checkpoint_key(message)))


def test_redelivered_and_stale_messages_never_run_a_step_twice(
    aws: Aws,
    worker: ResearchWorker,
    llm: ScriptedLLM,
) -> None:
    expected = reference(aws, worker, llm)
    queue("redo", job())
    [first] = aws.drain()
    assert worker.handle({"Records": [first]}, FakeContext(remaining_ms=SHORT_MS)) == {
        "batchItemFailures": []
    }
    assert len(llm.requests) == 1
    # The hand-off to invocation 1 is lost (say the worker died right after the checkpoint).
    assert segments(aws.drain()) == [1]

    # SQS delivers invocation 0 again: the table remembers it, so nothing runs or is sent.
    again = worker.handle({"Records": [first]}, FakeContext(remaining_ms=SHORT_MS))
    assert again == {"batchItemFailures": []}
    assert len(llm.requests) == 1
    assert aws.drain() == []

    # Once the table has forgotten it, the checkpoint says the job was handed to invocation 1
    # and the delivery sends that message again, still without a model call.
    _forget_idempotency(aws)
    worker.handle({"Records": [first]}, FakeContext(remaining_ms=SHORT_MS))
    assert len(llm.requests) == 1
    [second] = aws.drain()
    assert segments([second]) == [1]
    worker.handle({"Records": [second]}, FakeContext(remaining_ms=SHORT_MS))
    assert len(llm.requests) == 2
    [third] = aws.drain()

    # Invocation 0 once more, now two invocations behind the job: stale, dropped.
    _forget_idempotency(aws)
    assert worker.handle({"Records": [first]}, FakeContext(remaining_ms=SHORT_MS)) == {
        "batchItemFailures": []
    }
    assert len(llm.requests) == 2
    assert aws.drain() == []

    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=third["body"])
    deliver(aws, worker, SHORT_MS)
    assert bodies(llm) == expected
    finished = aws.read(f"{DAY}/steady/report.md")
    assert "| invocations | 4 |" in finished

    # After the end, any delivery of any invocation gets the finished job's outcome.
    _forget_idempotency(aws)
    for record in (first, second):
        assert worker.handle({"Records": [record]}, FakeContext()) == {"batchItemFailures": []}
    assert len(llm.requests) == 4
    assert aws.drain() == []
    assert aws.read(f"{DAY}/steady/report.md") == finished


class DiesAfterCheckpoint(S3ResultStore):
    """The worker's bucket, through which the worker dies once: right after the checkpoint
    of the rounds before turn ``turn``, while that turn's model call is out."""

    def __init__(self, llm: ScriptedLLM, turn: int) -> None:
        super().__init__(BUCKET)
        self.llm = llm
        self.turn = turn
        self.died = False

    def put_if(self, key: str, body: bytes, content_type: str, *, version: str | None) -> str:
        written = super().put_if(key, body, content_type, version=version)
        state = json.loads(body)
        if not self.died and state["iterations"] == self.turn - 1:
            self.died = True
            until = time.monotonic() + 10
            while len(self.llm.requests) < self.turn and time.monotonic() < until:
                time.sleep(0.005)
            raise RuntimeError("the worker died")
        return written


def test_a_worker_that_dies_resumes_from_its_last_checkpoint(
    aws: Aws,
    worker: ResearchWorker,
    llm: ScriptedLLM,
) -> None:
    expected = reference(aws, worker, llm)
    delayed: list[RecordedRequest] = []

    def third_turn_in_flight(request: RecordedRequest) -> Reply:
        """Turn 3's first answer takes its time: the worker dies while it is out."""
        reply = researcher(request)
        if request.body == expected[2] and not delayed:
            delayed.append(request)
            reply.first_delay = 5.0
        return reply

    llm.respond_with(third_turn_in_flight)
    dying = ResearchWorker.from_env(
        tools=ToolRegistry([slow_lookup()]), store=DiesAfterCheckpoint(llm, turn=3)
    )
    try:
        queue("dies", job())
        [record] = aws.drain()

        first = dying.handle({"Records": [record]}, FakeContext(remaining_ms=LONG_MS))

        assert first == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
        failure = json.loads(aws.read(f"{DAY}/steady/failure.json"))
        assert "the worker died" in failure["error"]
        assert _state(aws, "dies").iterations == 2
        again = dying.handle(
            {"Records": [redeliver(aws, record)]}, FakeContext(remaining_ms=LONG_MS)
        )
    finally:
        dying.close()

    assert again == {"batchItemFailures": []}
    # Turns 1 and 2 ran once; turn 3, in flight when the worker died, was asked again.
    assert bodies(llm) == [*expected[:3], *expected[2:]]
    report = aws.read(f"{DAY}/steady/report.md")
    assert report.startswith(f"# steady\n\n{ANSWER}\n")
    assert "| invocations | 2 |" in report
    assert "| attempt | 2 |" in report
    assert f"{DAY}/steady/failure.json" not in aws.stored()


def test_concurrent_deliveries_cannot_both_extend_a_checkpoint(aws: Aws) -> None:
    checkpoints = Checkpoints(S3ResultStore(BUCKET))
    message = JobMessage.model_validate(
        {"job": job(), "execution_id": "race", "scheduled_time": SCHEDULED}
    )
    version = checkpoints.save(message, JobState.begin(message, message.scheduled_time), None)
    with pytest.raises(StaleCheckpoint):  # created already
        checkpoints.save(message, JobState.begin(message, message.scheduled_time), None)

    mine, _ = checkpoints.load(message)
    theirs, _ = checkpoints.load(message)
    assert mine is not None
    assert theirs is not None
    mine.iterations = 1
    checkpoints.save(message, mine, version)
    theirs.iterations = 5
    with pytest.raises(StaleCheckpoint):
        checkpoints.save(message, theirs, version)

    stored, _ = checkpoints.load(message)
    assert stored is not None
    assert (stored.seq, stored.iterations) == (2, 1)


# -- locally: make research -------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _small_reserves(monkeypatch: pytest.MonkeyPatch) -> None:
    """No deadline reserve to wait out and no final-answer reserve (the CLI reads these)."""
    monkeypatch.setenv("AGENTLOOP_DEADLINE_RESERVE_S", "0")
    monkeypatch.setenv("AGENTLOOP_FINAL_ANSWER_RESERVE", "0")


def run_cli(
    tmp_path: Path, *args: str, jobs: list[dict[str, Any]] | None = None
) -> tuple[int, dict[str, list[str]], str]:
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps({"jobs": jobs or [job()]}))
    out, err = io.StringIO(), io.StringIO()
    code = main([str(path), *args], out=out, err=err, tools=ToolRegistry([slow_lookup()]))
    rows = {line.split()[0]: line.split() for line in out.getvalue().splitlines()[3:]}
    return code, rows, err.getvalue()


def test_make_research_with_an_invocation_timeout_continues_each_job(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    llm.respond_with(researcher)
    code, rows, _ = run_cli(tmp_path, "--output", str(tmp_path / "once"))
    assert code == 0
    assert rows["steady"][1:4] == ["succeeded", "completed", "1,093"]
    assert rows["steady"][5] == "1"
    expected = bodies(llm)
    llm.reset()
    llm.respond_with(researcher)

    code, rows, err = run_cli(
        tmp_path, "--output", str(tmp_path / "split"), "--invocation-timeout", SHORT_S
    )

    assert code == 0, err
    assert bodies(llm) == expected
    assert rows["steady"][1:4] == ["succeeded", "completed", "1,093"]
    assert rows["steady"][5] == "4", "the invocations column"
    assert float(rows["steady"][4]) >= 2.5, "the seconds of every invocation (about 1 s each)"
    report = next((tmp_path / "split").glob("research/*/steady/report.md")).read_text()
    assert report.startswith(f"# steady\n\n{ANSWER}\n")


@pytest.mark.parametrize(
    ("limits", "stop_reason", "headline"),
    [
        ({"max_invocations": 2}, "deadline", "stopped at its deadline"),
        ({"max_seconds": 3}, "deadline", "stopped at its deadline"),
        ({"token_budget": 1_000}, "budget", "stopped at its token budget"),
    ],
    ids=["invocations", "seconds", "tokens"],
)
def test_the_jobs_limits_hold_across_its_invocations(
    tmp_path: Path, llm: ScriptedLLM, limits: dict[str, int], stop_reason: str, headline: str
) -> None:
    def costly(request: RecordedRequest) -> Reply:
        reply = researcher(request)
        reply.usage = (100, 400)  # two turns spend a 1,000-token budget
        return reply

    llm.respond_with(costly if "token_budget" in limits else researcher)

    args = ["--invocation-timeout", SHORT_S, "--output", str(tmp_path)]
    code, rows, err = run_cli(tmp_path, *args, jobs=[job(limits=limits)])

    assert code == 0, err
    assert rows["steady"][1:3] == ["incomplete", stop_reason]
    invocations = int(rows["steady"][5])
    report = next(tmp_path.glob("research/*/steady/report.md")).read_text()
    assert f"> **Incomplete: {headline}.**" in report
    turns = len([r for r in llm.requests if r.tool_choice != "none"])
    if "max_seconds" in limits:
        # about 1.2 s an invocation: the second or third is the last, cut at the job's 3 s
        assert 2 <= invocations <= 3
        assert float(rows["steady"][4]) <= 3 + 0.3
        assert f"over {invocations} invocations" in report
        return
    assert (invocations, turns) == (2, 2), "one round an invocation, nothing asked twice"
    if stop_reason == "deadline":
        assert "over 2 invocations" in report
    else:
        assert rows["steady"][3] == "1,000", "the budget is the job's, not each invocation's"


def test_an_unusable_invocation_timeout_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run_cli(tmp_path, "--invocation-timeout", "0")
    assert code == 2
    assert "--invocation-timeout must be a positive number of seconds" in err

    monkeypatch.setenv("AGENTLOOP_DEADLINE_RESERVE_S", "10")
    code, _, err = run_cli(tmp_path, "--invocation-timeout", "11")
    assert code == 2
    assert "more than 11 s: no turn would start" in err


KILLED_RUN = """
import asyncio, json, os, signal, sys
from pathlib import Path
from pydantic import BaseModel
from agentloop.config import AgentConfig
from agentloop.research.cli import run_jobs
from agentloop.research.jobs import JobMessage
from agentloop.research.runner import JobRunner
from agentloop.research.store import LocalResultStore
from agentloop.tools.base import ToolContext, tool
from agentloop.tools.registry import ToolRegistry

out = Path(sys.argv[1])


class KeyArgs(BaseModel):
    key: str


@tool(name="lookup")
async def lookup(args: KeyArgs, ctx: ToolContext) -> dict:
    \"\"\"Look a value up (slow: in a short invocation it takes all but its last 1.1 s).\"\"\"
    # the first time k2 is asked for, the process is killed
    if args.key == "k2" and not (out / "killed").exists():
        # once the checkpoint of the two rounds before is on disk, as it is in a real crash
        while not any(
            json.loads(p.read_text())["iterations"] == 2
            for p in out.glob("checkpoints/*/*/*.json")
        ):
            await asyncio.sleep(0.01)
        (out / "killed").write_text("")
        os.kill(os.getpid(), signal.SIGKILL)
    return {"key": args.key, "value": len(args.key) * 7}


message = JobMessage.model_validate(json.loads(sys.argv[2]))
runner = JobRunner(
    store=LocalResultStore(out), config=AgentConfig.from_env(), tools=ToolRegistry([lookup])
)
[outcome] = asyncio.run(run_jobs([message], runner))
print(json.dumps(outcome.as_dict()))
"""


def test_a_killed_local_run_continues_from_its_checkpoint(tmp_path: Path, llm: ScriptedLLM) -> None:
    llm.respond_with(researcher)
    code, _, _ = run_cli(tmp_path, "--output", str(tmp_path / "reference"))
    assert code == 0
    expected = bodies(llm)
    llm.reset()
    llm.respond_with(researcher)
    script = tmp_path / "killed_run.py"
    script.write_text(KILLED_RUN)
    message = {"job": job(), "execution_id": "local-killed", "scheduled_time": SCHEDULED}
    command = [sys.executable, str(script), str(tmp_path / "out"), json.dumps(message)]

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)

    killed = run()
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert len(llm.requests) == 3
    resumed = run()

    assert resumed.returncode == 0, resumed.stderr
    outcome = json.loads(resumed.stdout.splitlines()[-1])
    assert (outcome["status"], outcome["invocations"]) == ("succeeded", 2)
    # Rounds 1 and 2 were in the checkpoint; round 3's tool died with the process, so its
    # turn is asked again.
    assert bodies(llm) == [*expected[:3], *expected[2:]]
    report = (tmp_path / "out" / DAY / "steady" / "report.md").read_text()
    assert report.startswith(f"# steady\n\n{ANSWER}\n")
    again = run()  # the same execution once more: the finished job's outcome, no model call
    assert json.loads(again.stdout.splitlines()[-1]) == outcome
    assert len(llm.requests) == 5


def test_a_continuation_without_its_checkpoint_fails_and_approval_tools_are_refused(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    llm.respond_with(researcher)
    config = TEST_CONFIG.model_copy(update={"approval_tools": ("lookup",)})
    runner = JobRunner(
        store=LocalResultStore(tmp_path), config=config, tools=ToolRegistry([slow_lookup()])
    )
    message = JobMessage.model_validate(
        {"job": job(), "execution_id": "gone", "scheduled_time": SCHEDULED}
    )

    lost = asyncio.run(runner.run(message.continued(3)))

    assert lost.status == "failed"
    assert "the checkpoint of this job is gone" in (lost.error or "")
    assert llm.requests == []

    refused = asyncio.run(runner.run(message))  # nobody could approve its lookup calls

    assert refused.status == "failed"
    assert "need a person's approval, which cannot be asked for here" in (refused.error or "")
    assert llm.requests == []


# -- the history rebuilt between rounds is the loop's own ---------------------------------------


async def test_the_rounds_rebuilt_from_events_are_the_history_the_loop_keeps(
    llm: ScriptedLLM,
) -> None:
    llm.script(
        Reply(text="Two at once.", tool_calls=[_call("lookup", "a"), _call("lookup", "bb")]),
        Reply(text="A cut ", cut_after=2),  # cut after some text: retried with text_reset
        Reply(tool_calls=[_call("boom", text="x")]),
        Reply(text="Then one more.", tool_calls=[_call("lookup", "ccc")]),
        Reply(text="Done."),
    )
    setup = AgentSetup(config=TEST_CONFIG, tools=ToolRegistry([slow_lookup(), boom]))
    request = ChatRequest(messages=[UserMessage(content="Go.")], model="groq:m")
    recorder = RoundRecorder()
    boundaries = []
    events: list[Event] = []
    async for event in handle_chat(request, ChatContext(setup=setup)):
        events.append(event)
        if recorder.feed(event):
            boundaries.append(len(recorder.messages))
    done = events[-1]
    assert isinstance(done, Done)
    assert done.stop_reason == "completed"
    assert any(e.type == "text_reset" for e in events)

    recorder.flush()

    assert recorder.messages == done.messages[:-1]
    assert boundaries == [3, 5, 7]
    assert recorder.iterations == 3


def _call(name: str, key: str | None = None, **arguments: Any) -> ToolCallSpec:
    args = {"key": key} if key is not None else arguments
    return ToolCallSpec(name, json.dumps(args), f"call_{name}_{key or 'x'}")


def test_the_template_lets_the_worker_continue_jobs() -> None:
    template = load_template()
    resources = template["Resources"]
    worker = resources["ResearchWorkerFunction"]["Properties"]

    assert worker["Environment"]["Variables"]["AGENTLOOP_RESEARCH_QUEUE_URL"] == {
        "Ref": "ResearchQueue"
    }
    queue_name = {"QueueName": {"Fn::GetAtt": ["ResearchQueue", "QueueName"]}}
    assert {"SQSSendMessagePolicy": queue_name} in worker["Policies"]
    statements = [s for p in worker["Policies"] if "Statement" in p for s in p["Statement"]]
    by_resource = {json.dumps(s["Resource"]): s["Action"] for s in statements}
    checkpoints = {"Fn::Sub": "${ResearchResultsBucket.Arn}/checkpoints/*"}
    assert sorted(by_resource[json.dumps(checkpoints)]) == ["s3:GetObject", "s3:PutObject"]
    bucket = {"Fn::GetAtt": ["ResearchResultsBucket", "Arn"]}
    assert by_resource[json.dumps(bucket)] == "s3:ListBucket"  # a missing key is a 404
    rules = resources["ResearchResultsBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    [expiry] = [r for r in rules if r.get("Prefix") == "checkpoints/"]
    assert (expiry["Status"], expiry["ExpirationInDays"]) == ("Enabled", 14)
