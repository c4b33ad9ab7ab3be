"""``make invoke`` with the research sample events: no queue, no table, no AWS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentloop.research.jobs import JobMessage
from tests.fakes.scripted_llm import Reply, ScriptedLLM
from tests.helpers import ROOT


def run_invoke(event: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "functions" / "invoke.py"), str(ROOT / "events" / event)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
        check=False,
    )


@pytest.fixture
def local_env(tmp_path: Path, llm: ScriptedLLM) -> dict[str, str]:
    env = dict(os.environ, AGENTLOOP_RESULTS_DIR=str(tmp_path))
    for name in (
        "AGENTLOOP_RESEARCH_QUEUE_URL",
        "AGENTLOOP_IDEMPOTENCY_TABLE",
        "AGENTLOOP_RESULTS_BUCKET",
        "AGENTLOOP_SECRET_ID",
        "AWS_LAMBDA_FUNCTION_NAME",
    ):
        env.pop(name, None)
    return env


def test_the_schedule_event_prints_the_messages_it_would_send(local_env: dict[str, str]) -> None:
    done = run_invoke("research-schedule.json", local_env)

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "# AGENTLOOP_RESEARCH_QUEUE_URL is not set: these 2 message(s) would be sent"
    messages = [JobMessage.model_validate_json(line) for line in lines[1:3]]
    assert [m.execution_id for m in messages] == ["c0ffee11d00d4b1e"] * 2
    summary = json.loads("\n".join(lines[3:]))
    assert summary["queued"] == 2
    assert summary["dry_run"] is True
    assert summary["rejected"] == []


def test_the_sqs_event_runs_both_jobs_without_a_table(
    local_env: dict[str, str], llm: ScriptedLLM, tmp_path: Path
) -> None:
    llm.respond_with(lambda request: Reply(text="Answered locally."))

    done = run_invoke("research-sqs.json", local_env)

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"batchItemFailures": []}
    assert "AGENTLOOP_IDEMPOTENCY_TABLE is not set" in done.stderr
    reports = sorted(tmp_path.glob("research/2025-06-02/*/report.md"))
    assert [p.parent.name for p in reports] == ["savings-plan-arithmetic", "sqs-fan-out-limits"]
    assert "Answered locally." in reports[0].read_text()
    # and it says where they went
    for report in reports:
        assert f"{report.parent.name}: {report.parent}/" in done.stderr


def test_the_sqs_event_without_keys_lists_both_as_failures(
    local_env: dict[str, str], tmp_path: Path
) -> None:
    for name in ("GROQ_API_KEY", "OPENAI_API_KEY"):
        local_env.pop(name, None)

    done = run_invoke("research-sqs.json", local_env)

    assert done.returncode == 1
    failures = json.loads(done.stdout)["batchItemFailures"]
    assert len(failures) == 2
    assert len(list(tmp_path.glob("research/2025-06-02/*/failure.json"))) == 2
