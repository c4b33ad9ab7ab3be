"""Reports from events: sources, the markdown, the failure record; the batch time share."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from agentloop.events import (
    Done,
    ErrorEvent,
    Event,
    ModelSwitched,
    Notice,
    RunStart,
    ToolCallResult,
    ToolCallStart,
)
from agentloop.models import AssistantMessage, Usage
from agentloop.research.jobs import JobMessage
from agentloop.research.report import (
    RunFacts,
    collect_sources,
    failure_json,
    render_markdown,
    report_json,
    transcript_json,
)
from agentloop.research.runner import JobTimeShare

T0 = datetime(2025, 6, 2, 6, 0, 5, tzinfo=UTC)
T1 = datetime(2025, 6, 2, 6, 0, 47, tzinfo=UTC)


def tool_events(
    call_id: str,
    name: str,
    arguments: dict[str, Any],
    result: Any,
    *,
    ok: bool = True,
    depth: int = 0,
) -> list[Event]:
    content = json.dumps({"ok": True, "result": result} if ok else {"ok": False, "error": result})
    return [
        ToolCallStart(call_id=call_id, name=name, arguments=json.dumps(arguments), depth=depth),
        ToolCallResult(
            call_id=call_id, name=name, ok=ok, duration_ms=3.0, content=content, depth=depth
        ),
    ]


def search_result(*urls: str) -> dict[str, Any]:
    return {
        "query": "q",
        "provider": "fake",
        "results": [{"title": f"T {u}", "url": u, "snippet": ""} for u in urls],
    }


def done(text: str = "The answer.", stop_reason: str = "completed") -> Done:
    return Done(
        text=text,
        stop_reason=stop_reason,  # type: ignore[arg-type]
        iterations=3,
        usage=Usage(prompt_tokens=1200, completion_tokens=80, cached_tokens=200),
        budget_remaining=1000,
        messages=[AssistantMessage(content=text)],
    )


def message(**job: Any) -> JobMessage:
    return JobMessage.model_validate(
        {
            "job": {"id": "scan", "prompt": "What moved?\nBe brief.", **job},
            "execution_id": "exec-1",
            "scheduled_time": "2025-06-02T06:00:00Z",
        }
    )


def facts(events: list[Event], **job: Any) -> RunFacts:
    return RunFacts.gather(
        message(**job), events, started_at=T0, finished_at=T1, seconds=42.0, attempt=2
    )


def test_sources_come_from_scrape_calls_and_search_results_at_every_depth() -> None:
    events = [
        *tool_events(
            "c1",
            "search_web",
            {"query": "x"},
            search_result("https://a.example/1", "https://b.example/2"),
        ),
        *tool_events(
            "c2",
            "scrape",
            {"url": "https://b.example/2"},
            {
                "url": "https://b.example/2",
                "final_url": "https://b.example/2?r=1",
                "title": "B two",
            },
        ),
        *tool_events("c3", "scrape", {"url": "https://down.example/"}, "timed out", ok=False),
        *tool_events(
            "c4",
            "search_web",
            {"query": "y"},
            search_result("https://c.example/3", "https://a.example/1"),
            depth=1,
        ),
        *tool_events(
            "c5", "execute_code", {"code": "print(1)"}, {"stdout": "https://not-a-source.example"}
        ),
        *tool_events("c6", "search_web", {"query": "z"}, "rate limited", ok=False),
    ]

    sources = collect_sources(events)

    assert [(s.url, s.kind, s.ok) for s in sources] == [
        ("https://b.example/2?r=1", "read", True),
        ("https://down.example/", "read", False),
        ("https://a.example/1", "search", True),
        ("https://b.example/2", "search", True),
        ("https://c.example/3", "search", True),
    ]
    assert sources[0].title == "B two"


def test_a_truncated_or_malformed_tool_result_does_not_break_the_sources() -> None:
    events: list[Event] = [
        ToolCallStart(call_id="c1", name="scrape", arguments="{not json"),
        ToolCallResult(
            call_id="c1",
            name="scrape",
            ok=True,
            duration_ms=1,
            content='{"ok": true, "truncated": true, "result": "abc…"}',
        ),
        ToolCallStart(call_id="c2", name="search_web", arguments="{}"),
        ToolCallResult(call_id="c2", name="search_web", ok=True, duration_ms=1, content="not json"),
    ]

    assert collect_sources(events) == []


def test_the_markdown_report_has_answer_sources_run_facts_and_prompt() -> None:
    events = [
        RunStart(
            model="groq:llama-3.3-70b-versatile",
            tools=["search_web"],
            max_iterations=5,
            token_budget=9000,
            budget_remaining=9000,
        ),
        ModelSwitched(
            from_model="groq:llama-3.3-70b-versatile",
            to_model="openai:gpt-4o-mini",
            reason="rate_limit",
        ),
        *tool_events(
            "c1",
            "search_web",
            {"query": "x"},
            {"results": [{"title": "A | [b]\nc", "url": "https://a.example/"}]},
        ),
        done("Markets rose."),
    ]

    report = render_markdown(facts(events, title="Morning scan"))

    assert report.startswith("# Morning scan\n\nMarkets rose.\n\n## Sources\n")
    assert "- A | \\[b\\] c <https://a.example/>" in report
    assert "| model | groq:llama-3.3-70b-versatile |" in report
    assert (
        "| model switch 1 | groq:llama-3.3-70b-versatile -> openai:gpt-4o-mini (rate_limit) |"
        in report
    )
    assert "| stop reason | completed |" in report
    assert "| tokens | 1,280 (1,200 prompt, 80 completion, 200 cached) |" in report
    assert "| started | 2025-06-02T06:00:05+00:00 |" in report
    assert "| duration | 42.0 s |" in report
    assert "| execution id | exec-1 |" in report
    assert "| attempt | 2 |" in report
    assert report.endswith("## Prompt\n\n> What moved?\n> Be brief.\n")


@pytest.mark.parametrize(
    ("stop_reason", "headline", "detail"),
    [
        (
            "max_iterations",
            "stopped at its iteration limit",
            "used all 5 tool iterations it was allowed (`limits.max_iterations`)",
        ),
        (
            "budget",
            "stopped at its token budget",
            "used up its token budget of 9,000 tokens (`limits.token_budget`)",
        ),
        ("deadline", "stopped at its deadline", "ran out of time after 42.0 s"),
        ("cancelled", "cancelled", "was cancelled before the model had finished"),
    ],
)
def test_a_run_stopped_by_a_limit_says_so_above_its_answer(
    stop_reason: str, headline: str, detail: str
) -> None:
    notice = f"Stopped early ({stop_reason}); send a message to continue."
    events: list[Event] = [
        RunStart(
            model="groq:m", tools=[], max_iterations=5, token_budget=9000, budget_remaining=9000
        ),
        Notice(code=stop_reason, message=notice),
        done(f"What I found so far.\n\n{notice}", stop_reason),
    ]
    gathered = facts(events, title="Scan")

    report = render_markdown(gathered)
    data = report_json(gathered)

    top, answer = report.split("\n\n")[1:3]
    assert top.startswith(f"> **Incomplete: {headline}.** ")
    assert detail in top
    assert top.endswith("may be partial.")
    assert answer == "What I found so far."
    assert "send a message" not in report  # nobody can message a batch job
    assert "| status | incomplete |" in report
    assert f"| stop reason | {stop_reason} |" in report
    assert data["status"] == "incomplete"
    assert data["incomplete_notice"] == top
    assert data["answer"] == "What I found so far."


def test_a_finished_run_has_no_incomplete_notice() -> None:
    gathered = facts([done("All done.\n\nStopped early; send a message to continue.")])

    report = render_markdown(gathered)

    assert report.startswith("# scan\n\nAll done.\n\nStopped early; send a message")
    assert "Incomplete" not in report
    assert "| status | succeeded |" in report
    assert report_json(gathered)["status"] == "succeeded"
    assert report_json(gathered)["incomplete_notice"] is None


def test_a_run_without_tools_says_so() -> None:
    report = render_markdown(facts([done()]))

    assert "No tool visited a web page in this run." in report
    assert report.startswith("# scan\n")


def test_the_failure_record_keeps_the_error_and_the_partial_transcript() -> None:
    events = [
        RunStart(
            model="groq:m", tools=[], max_iterations=5, token_budget=9000, budget_remaining=9000
        ),
        ErrorEvent(code="provider", message="401 from groq: check GROQ_API_KEY"),
        done("I could not finish.", "error"),
    ]
    gathered = facts(events)

    record = failure_json(gathered, "provider: 401 from groq: check GROQ_API_KEY")

    assert record["error"].startswith("provider: 401")
    assert record["errors"] == ["provider: 401 from groq: check GROQ_API_KEY"]
    assert record["stop_reason"] == "error"
    assert record["attempt"] == 2
    assert [e["type"] for e in record["events"]] == ["run_start", "error", "done"]
    assert transcript_json(gathered)["events"] == record["events"]
    json.dumps(record)  # all of it is JSON


class Clock:
    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def test_jobs_of_a_batch_share_the_invocations_time() -> None:
    clock = Clock(905_000)
    share = JobTimeShare(clock, 3, keep_s=5)

    first = share.next_deadline().remaining()
    assert 299 < first <= 300
    clock.remaining_ms = 805_000  # the first job finished early: the rest get more
    assert 399 < share.next_deadline().remaining() <= 400
    clock.remaining_ms = 305_000
    assert 299 < share.next_deadline().remaining() <= 300
    assert JobTimeShare(None, 2).next_deadline().at is None
