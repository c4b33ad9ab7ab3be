"""Research jobs run locally: the runner's files, the sources it lists, the CLI and its table."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentloop.limits import Deadline
from agentloop.research.cli import main, run_jobs
from agentloop.research.jobs import JobMessage, JobSpec
from agentloop.research.runner import JobRunner
from agentloop.research.store import LocalResultStore
from agentloop.tools.base import ToolContext, tool
from agentloop.tools.registry import ToolRegistry
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import ROOT, TEST_CONFIG
from tests.sample_tools import sleeper


class QueryArgs(BaseModel):
    query: str


class UrlArgs(BaseModel):
    url: str


@tool(name="search_web")
async def fake_search(args: QueryArgs, ctx: ToolContext) -> dict[str, Any]:
    """Search the web (canned results)."""
    return {
        "query": args.query,
        "provider": "fake",
        "results": [
            {"title": "Lambda quotas", "url": "https://docs.example/quotas", "snippet": "..."},
            {"title": "SQS [and] Lambda", "url": "https://docs.example/sqs", "snippet": "..."},
        ],
    }


@tool(name="scrape")
async def fake_scrape(args: UrlArgs, ctx: ToolContext) -> dict[str, Any]:
    """Read a page (canned text)."""
    return {"url": args.url, "final_url": args.url, "title": "Quotas page", "content": "..."}


def message(spec: dict[str, Any]) -> JobMessage:
    return JobMessage.model_validate(
        {"job": spec, "execution_id": "local-test", "scheduled_time": "2025-06-02T06:00:00Z"}
    )


def test_the_report_lists_pages_read_and_search_results(
    tmp_path: Path, llm: ScriptedLLM, model: str
) -> None:
    llm.script(
        Reply(tool_calls=[call("search_web", query="lambda sqs limits")]),
        Reply(tool_calls=[call("scrape", url="https://docs.example/quotas")]),
        Reply(text="Batch size is at most 10,000 [1].", usage=(300, 20)),
    )
    runner = JobRunner(
        store=LocalResultStore(tmp_path),
        config=TEST_CONFIG,
        tools=ToolRegistry([fake_search, fake_scrape]),
    )
    spec = {
        "id": "limits",
        "prompt": "What are the limits?",
        "model": model,
        "tools": ["search_web", "scrape"],
        "output": {"formats": ["markdown", "json"]},
    }

    outcome = asyncio.run(runner.run(message(spec)))

    folder = tmp_path / "research" / "2025-06-02" / "limits"
    assert outcome.status == "succeeded"
    assert outcome.location == str(folder / "report.md")
    assert sorted(p.name for p in folder.iterdir()) == [
        "report.json",
        "report.md",
        "transcript.json",
    ]
    report = (folder / "report.md").read_text()
    assert report.startswith("# limits\n\nBatch size is at most 10,000 [1].\n")
    read_section = report.split("Pages read:")[1].split("Search results seen:")[0]
    assert "- Quotas page <https://docs.example/quotas>" in read_section
    seen = report.split("Search results seen:")[1].split("## Run")[0]
    assert "- SQS \\[and\\] Lambda <https://docs.example/sqs>" in seen
    assert "docs.example/quotas" not in seen  # read pages are not listed twice
    assert "| iterations | 3 |" in report
    data = json.loads((folder / "report.json").read_text())
    assert [s["url"] for s in data["sources"]] == [
        "https://docs.example/quotas",
        "https://docs.example/sqs",
    ]
    assert data["stop_reason"] == "completed"
    assert data["usage"]["completion_tokens"] >= 20


def test_a_job_without_tools_or_transcript_writes_only_its_report(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text="Short answer."))
    runner = JobRunner(store=LocalResultStore(tmp_path), config=TEST_CONFIG)
    spec = {
        "id": "quiet",
        "prompt": "Q?",
        "model": "groq:m",
        "tools": [],
        "output": {"include_transcript": False, "include_sources": False},
    }

    outcome = asyncio.run(runner.run(message(spec)))

    folder = tmp_path / "research" / "2025-06-02" / "quiet"
    assert [p.name for p in folder.iterdir()] == ["report.md"]
    assert "## Sources" not in (folder / "report.md").read_text()
    assert llm.requests[0].tools is None
    assert outcome.tokens > 0


def test_jobs_run_concurrently_but_no_more_than_the_limit(tmp_path: Path, llm: ScriptedLLM) -> None:
    log: list[tuple[str, str]] = []

    def respond(request: RecordedRequest) -> Reply:
        prompt = request.messages[-1]
        if prompt["role"] == "user":
            return Reply(tool_calls=[call("sleep", label=prompt["content"], seconds=0.2)])
        return Reply(text="done")

    llm.respond_with(respond)
    runner = JobRunner(
        store=LocalResultStore(tmp_path), config=TEST_CONFIG, tools=ToolRegistry([sleeper(log)])
    )
    messages = [
        message({"id": f"j{i}", "prompt": f"job {i}", "model": "groq:m", "tools": ["sleep"]})
        for i in range(6)
    ]

    outcomes = asyncio.run(run_jobs(messages, runner, concurrency=2))

    assert [o.job_id for o in outcomes] == [f"j{i}" for i in range(6)]
    assert {o.status for o in outcomes} == {"succeeded"}
    running, most = 0, 0
    for kind, _ in log:
        running += 1 if kind == "start" else -1
        most = max(most, running)
    assert most == 2


def write_jobs(path: Path, jobs: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"jobs": jobs}))
    return path


def test_the_cli_runs_the_jobs_and_prints_the_table(tmp_path: Path, llm: ScriptedLLM) -> None:
    llm.respond_with(lambda req: Reply(text="An answer.", usage=(90, 10)))
    jobs = write_jobs(
        tmp_path / "jobs.json",
        [{"id": f"q{i}", "prompt": f"Question {i}?", "tools": []} for i in range(3)],
    )
    out, err = io.StringIO(), io.StringIO()

    code = main(
        [str(jobs), "--output", str(tmp_path / "out"), "--concurrency", "2"], out=out, err=err
    )

    assert code == 0
    lines = out.getvalue().strip().splitlines()
    header = [
        "job",
        "status",
        "stop",
        "reason",
        "tokens",
        "seconds",
        "invocations",
        "cost",
        "report",
    ]
    assert lines[0].split() == header
    for i, row in enumerate(lines[2:]):
        cells = row.split()
        assert cells[:4] == [f"q{i}", "succeeded", "completed", "100"]
        assert cells[5] == "1"
        assert cells[6].startswith("$")
        assert Path(cells[-1]).read_text().startswith(f"# q{i}\n\nAn answer.")
    assert "3/3 jobs" in err.getvalue()


def test_the_cli_without_keys_reports_each_jobs_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out, err = io.StringIO(), io.StringIO()

    code = main([str(ROOT / "examples" / "jobs.json"), "--output", str(tmp_path)], out=out, err=err)

    assert code == 1
    table = out.getvalue()
    spec_ids = [j["id"] for j in json.loads((ROOT / "examples" / "jobs.json").read_text())["jobs"]]
    for job_id in spec_ids:
        row = next(line for line in table.splitlines() if line.startswith(job_id))
        assert " failed " in row
        assert " error " in row
        assert "GROQ_API_KEY is not set" in row
        assert list(tmp_path.glob(f"research/*/{job_id}/failure.json"))


def test_the_cli_lists_rejected_jobs_and_runs_the_others(tmp_path: Path, llm: ScriptedLLM) -> None:
    llm.respond_with(lambda req: Reply(text="ok"))
    jobs = write_jobs(
        tmp_path / "jobs.json",
        [{"id": "fine", "prompt": "Q?", "tools": []}, {"id": "typo", "promt": "Q?"}],
    )
    out, err = io.StringIO(), io.StringIO()

    code = main([str(jobs), "--output", str(tmp_path / "out")], out=out, err=err)

    assert code == 1
    rows = {line.split()[0]: line for line in out.getvalue().splitlines()[2:]}
    assert " completed " in rows["fine"]
    assert "rejected" in rows["typo"]
    assert "prompt: Field required" in rows["typo"]
    assert "promt: Extra inputs are not permitted" in rows["typo"]
    assert "rejected: typo: prompt: Field required" in err.getvalue()


def test_the_cli_rejects_a_dollar_limit_on_a_model_with_no_price_before_running(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    llm.respond_with(lambda req: Reply(text="ok"))
    limits = {"max_cost_usd": 0.5}
    jobs = write_jobs(
        tmp_path / "jobs.json",
        [
            {"id": "unpriced", "prompt": "Unpriced?", "model": "groq:no-price", "limits": limits},
            {"id": "fine", "prompt": "Fine?", "tools": [], "limits": limits},
        ],
    )
    out, err = io.StringIO(), io.StringIO()

    code = main([str(jobs), "--output", str(tmp_path / "out")], out=out, err=err)

    assert code == 1
    rows = {line.split()[0]: line for line in out.getvalue().splitlines()[2:]}
    assert " completed " in rows["fine"]
    assert "rejected" in rows["unpriced"]
    assert "rejected: unpriced: limits.max_cost_usd: no price is known" in err.getvalue()
    assert [r.messages[-1]["content"] for r in llm.requests] == ["Fine?"]


def test_the_cli_exits_2_for_an_unusable_jobs_file(tmp_path: Path) -> None:
    bad = tmp_path / "jobs.json"
    bad.write_text("{not json")
    err = io.StringIO()

    assert main([str(bad)], out=io.StringIO(), err=err) == 2
    assert "not valid JSON" in err.getvalue()
    assert main([str(tmp_path / "missing.json")], out=io.StringIO(), err=err) == 2


def test_python_m_agentloop_research_runs_as_a_module(tmp_path: Path, llm: ScriptedLLM) -> None:
    llm.respond_with(lambda req: Reply(text="From the module."))
    jobs = write_jobs(tmp_path / "jobs.json", [{"id": "mod", "prompt": "Q?", "tools": []}])
    env = {**os.environ, "AGENTLOOP_RESULTS_DIR": str(tmp_path / "out")}

    done = subprocess.run(
        [sys.executable, "-m", "agentloop.research", str(jobs)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert "mod" in done.stdout
    assert list(tmp_path.glob("out/research/*/mod/report.md"))


def test_job_specs_and_messages_round_trip() -> None:
    spec = JobSpec.model_validate({"id": "a", "prompt": "Q?"})
    assert message(spec.model_dump()).job == spec


def tool_then_answer(request: RecordedRequest) -> Reply:
    """Calls a tool until it has a result, then answers: a run its limits can cut short."""
    if any(m["role"] == "tool" for m in request.messages):
        return Reply(text="What one search found: partial.", usage=(40, 10))
    return Reply(tool_calls=[call("search_web", query="lambda limits")], usage=(900, 100))


@pytest.mark.parametrize(
    ("limits", "deadline_s", "stop_reason", "headline"),
    [
        ({"max_iterations": 1}, None, "max_iterations", "stopped at its iteration limit"),
        ({"token_budget": 1_000}, None, "budget", "stopped at its token budget"),
        # the job's only invocation, too short for a model turn: it answers at its deadline
        ({"max_invocations": 1}, 0.5, "deadline", "stopped at its deadline"),
    ],
)
def test_a_run_stopped_by_a_limit_is_incomplete_and_says_so(
    tmp_path: Path,
    llm: ScriptedLLM,
    limits: dict[str, int],
    deadline_s: float | None,
    stop_reason: str,
    headline: str,
) -> None:
    runner = JobRunner(
        store=LocalResultStore(tmp_path), config=TEST_CONFIG, tools=ToolRegistry([fake_search])
    )
    spec = {
        "id": "cut",
        "prompt": "What are the limits?",
        "model": "groq:m",
        "tools": ["search_web"],
        "limits": limits,
        "output": {"formats": ["markdown", "json"]},
    }
    folder = tmp_path / "research" / "2025-06-02" / "cut"
    llm.script(Reply(status=401))  # an earlier attempt failed and left its record
    assert asyncio.run(runner.run(message(spec))).status == "failed"
    assert (folder / "failure.json").exists()
    llm.respond_with(tool_then_answer)

    deadline = Deadline.after(deadline_s) if deadline_s else None
    outcome = asyncio.run(runner.run(message(spec), deadline=deadline))

    assert (outcome.status, outcome.stop_reason) == ("incomplete", stop_reason)
    assert outcome.location == str(folder / "report.md")
    report = (folder / "report.md").read_text()
    assert report.startswith(f"# cut\n\n> **Incomplete: {headline}.** ")
    assert "may be partial." in report.split("\n\n")[1]
    assert "send a message" not in report
    assert f"| stop reason | {stop_reason} |" in report
    assert json.loads((folder / "report.json").read_text())["status"] == "incomplete"
    assert sorted(p.name for p in folder.iterdir()) == [
        "report.json",
        "report.md",
        "transcript.json",
    ], "the earlier failure.json is gone"


def test_a_successful_run_removes_an_earlier_failure_record(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    runner = JobRunner(store=LocalResultStore(tmp_path), config=TEST_CONFIG)
    spec = {"id": "flaky", "prompt": "Q?", "model": "groq:m", "tools": []}
    folder = tmp_path / "research" / "2025-06-02" / "flaky"
    llm.script(Reply(status=401), Reply(text="Answered on the retry."))

    first = asyncio.run(runner.run(message(spec), attempt=1))
    second = asyncio.run(runner.run(message(spec), attempt=2))

    assert (first.status, second.status) == ("failed", "succeeded")
    assert sorted(p.name for p in folder.iterdir()) == ["report.md", "transcript.json"]
    assert "| attempt | 2 |" in (folder / "report.md").read_text()


def test_the_cli_table_shows_an_incomplete_job(tmp_path: Path, llm: ScriptedLLM) -> None:
    def respond(request: RecordedRequest) -> Reply:
        prompt = next(m["content"] for m in request.messages if m["role"] == "user")
        return Reply(text="Done.") if prompt == "Easy?" else tool_then_answer(request)

    llm.respond_with(respond)
    jobs = write_jobs(
        tmp_path / "jobs.json",
        [
            # No tools offered: the model's call gets an "unknown tool" result, a turn spent.
            {"id": "cut", "prompt": "Hard?", "tools": [], "limits": {"max_iterations": 1}},
            {"id": "easy", "prompt": "Easy?", "tools": []},
        ],
    )
    out, err = io.StringIO(), io.StringIO()

    code = main([str(jobs), "--output", str(tmp_path / "out")], out=out, err=err)

    assert code == 0, "an incomplete job left a report: not a failure"
    rows = {line.split()[0]: line.split() for line in out.getvalue().splitlines()[3:]}
    assert rows["cut"][1:3] == ["incomplete", "max_iterations"]
    assert rows["easy"][1:3] == ["succeeded", "completed"]
    assert "1 incomplete" in err.getvalue()
