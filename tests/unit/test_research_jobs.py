"""Job specs and the schedule's input: what is accepted, and how rejections name the problem."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from agentloop.config import AgentConfig
from agentloop.pricing import PriceOverride
from agentloop.research.jobs import (
    JobMessage,
    JobsInputError,
    JobSpec,
    ScheduleInput,
    parse_jobs,
    parse_jobs_text,
    parse_s3_uri,
)
from agentloop.research.planner import plan_check
from agentloop.tools.registry import ToolRegistry
from tests.sample_tools import double, echo

PRICED = "groq:llama-3.3-70b-versatile"
UNPRICED = "groq:no-such-price"


def test_a_minimal_job_takes_the_deployments_defaults() -> None:
    spec = JobSpec.model_validate({"id": "market-scan_2", "prompt": "What moved?"})

    assert spec.model is None
    assert spec.tools is None
    assert spec.limits.max_iterations is None
    assert (spec.limits.max_seconds, spec.limits.max_invocations) == (None, None)
    assert spec.output.formats == ["markdown"]
    assert spec.output.include_transcript is True


@pytest.mark.parametrize(
    ("fields", "field", "fragment"),
    [
        ({"id": "has space"}, "id", "String should match pattern"),
        ({"id": "x" * 65}, "id", "String should match pattern"),
        ({"id": "../etc"}, "id", "String should match pattern"),
        ({"id": ""}, "id", "String should match pattern"),
        ({"prompt": "   "}, "prompt", "the prompt is blank"),
        ({"model": "llama"}, "model", "not of the form 'provider:model'"),
        ({"model": "anthropic:claude"}, "model", "unknown provider 'anthropic'"),
        ({"tools": ["search web"]}, "tools", "not a tool name"),
        ({"limits": {"max_iterations": 0}}, "limits.max_iterations", "greater than or equal"),
        ({"limits": {"token_budget": 10}}, "limits.token_budget", "greater than or equal"),
        ({"limits": {"max_iter": 3}}, "limits.max_iter", "Extra inputs are not permitted"),
        ({"limits": {"max_seconds": 0}}, "limits.max_seconds", "greater than or equal"),
        ({"limits": {"max_seconds": 86_401}}, "limits.max_seconds", "less than or equal"),
        ({"limits": {"max_invocations": 0}}, "limits.max_invocations", "greater than or equal"),
        ({"limits": {"max_invocations": 101}}, "limits.max_invocations", "less than or equal"),
        ({"output": {"formats": ["pdf"]}}, "output.formats.0", "Input should be"),
        ({"output": {"formats": []}}, "output.formats", "at least 1 item"),
        ({"promt": "typo"}, "promt", "Extra inputs are not permitted"),
    ],
)
def test_each_problem_names_its_field(fields: dict[str, Any], field: str, fragment: str) -> None:
    job = {"id": "job-1", "prompt": "Q?", **fields}

    parsed = parse_jobs([job])

    assert parsed.jobs == []
    [rejection] = [r for r in parsed.rejections if r.field == field]
    assert fragment in rejection.message
    assert rejection.index == 0


def test_rejections_name_the_job_by_id_or_by_position() -> None:
    parsed = parse_jobs(
        [
            {"id": "ok", "prompt": "Q?"},
            {"id": "bad-limits", "prompt": "Q?", "limits": {"max_iterations": -1}},
            {"prompt": "no id"},
            "just a string",
            {"id": "also-ok", "prompt": "Q?"},
        ]
    )

    assert [j.id for j in parsed.jobs] == ["ok", "also-ok"]
    assert [(r.job, r.field) for r in parsed.rejections] == [
        ("bad-limits", "limits.max_iterations"),
        ("#2", "id"),
        ("#3", "(job)"),
    ]
    assert parsed.rejections[2].message == "a job must be a JSON object, not a string"
    assert str(parsed.rejections[1]) == "#2: id: Field required"
    assert parsed.rejected_jobs == ["bad-limits", "#2", "#3"]


def test_every_job_sharing_an_id_is_rejected() -> None:
    parsed = parse_jobs(
        [
            {"id": "twin", "prompt": "first"},
            {"id": "solo", "prompt": "Q?"},
            {"id": "twin", "prompt": "second"},
        ]
    )

    assert [j.id for j in parsed.jobs] == ["solo"]
    assert [(r.job, r.index, r.field) for r in parsed.rejections] == [
        ("twin", 0, "id"),
        ("twin", 2, "id"),
    ]
    assert "also used by #2" in parsed.rejections[0].message


def test_unknown_tools_are_rejected_when_the_tools_are_known() -> None:
    jobs = [{"id": "a", "prompt": "Q?", "tools": ["search_web", "teleport"]}]

    assert parse_jobs(jobs).jobs  # nothing to check against
    parsed = parse_jobs(jobs, known_tools={"search_web", "scrape"})

    [rejection] = parsed.rejections
    assert rejection.field == "tools"
    assert rejection.message == "unknown tool(s) ['teleport']; available: scrape, search_web"


def test_a_job_the_worker_would_refuse_is_rejected_when_planned() -> None:
    """The worker's own plan of each job (``plan_run``, nobody to ask for approval): a dollar
    limit on a model with no known price, a model not allowed here, a tool that waits for a
    person are rejections now, naming the job's field, not jobs failed (and retried) later."""
    config = AgentConfig(allowed_models=("groq:*",), approval_tools=("echo",))
    check = plan_check(config, ToolRegistry([echo, double]))
    jobs = [
        {"id": "unpriced", "prompt": "Q?", "model": UNPRICED, "limits": {"max_cost_usd": 1}},
        {"id": "unpriced-no-limit", "prompt": "Q?", "model": UNPRICED},
        {"id": "priced", "prompt": "Q?", "model": PRICED, "limits": {"max_cost_usd": 1}},
        {"id": "not-allowed", "prompt": "Q?", "model": "openai:gpt-4o-mini"},
        {"id": "asks", "prompt": "Q?", "tools": ["echo"]},
        {"id": "fine", "prompt": "Q?", "tools": ["double"]},
    ]

    parsed = parse_jobs(jobs, check=check)

    assert [job.id for job in parsed.jobs] == ["unpriced-no-limit", "priced", "fine"]
    assert [(r.job, r.index, r.field) for r in parsed.rejections] == [
        ("unpriced", 0, "limits.max_cost_usd"),
        ("not-allowed", 3, "model"),
        ("asks", 4, "tools"),
    ]
    assert str(parsed.rejections[0]) == (
        "unpriced: limits.max_cost_usd: no price is known for model 'groq:no-such-price', so a "
        "dollar budget cannot be kept (the operator can add it to AGENTLOOP_PRICES)"
    )
    assert "is not allowed here" in parsed.rejections[1].message
    assert "need a person's approval" in parsed.rejections[2].message


def test_the_price_check_follows_the_deployments_prices_and_cap() -> None:
    unpriced = [{"id": "j", "prompt": "Q?", "model": UNPRICED, "limits": {"max_cost_usd": 1}}]
    no_limit = [{"id": "j", "prompt": "Q?", "model": UNPRICED}]
    registry = ToolRegistry([echo])
    priced_here = AgentConfig(prices={UNPRICED: PriceOverride(input=1, output=2)})
    capped = AgentConfig(max_cost_usd_cap=5)

    assert parse_jobs(unpriced, check=plan_check(priced_here, registry)).jobs
    assert parse_jobs(no_limit, check=plan_check(capped, registry)).rejections[0].field == "model"
    assert parse_jobs(no_limit, check=plan_check(priced_here, registry)).jobs
    assert parse_jobs(unpriced).jobs, "without a check, only the spec is validated"


def test_a_json_file_holds_an_array_or_an_object_with_jobs() -> None:
    jobs = [{"id": "a", "prompt": "Q?"}]

    assert parse_jobs_text(json.dumps(jobs), name="jobs.json").jobs[0].id == "a"
    assert parse_jobs_text(json.dumps({"jobs": jobs}), name="jobs.json").jobs[0].id == "a"
    with pytest.raises(JobsInputError, match="not valid JSON"):
        parse_jobs_text("[", name="jobs.json")
    with pytest.raises(JobsInputError, match="array of jobs"):
        parse_jobs_text('{"job": []}', name="jobs.json")


def test_json_lines_name_bad_lines_by_number() -> None:
    text = "\n".join(
        [
            json.dumps({"id": "one", "prompt": "Q?"}),
            "",
            "{broken",
            json.dumps({"id": "four", "prompt": ""}),
            json.dumps({"id": "five", "prompt": "Q?"}),
            "",
        ]
    )

    parsed = parse_jobs_text(text, name="nightly.jsonl")

    assert [j.id for j in parsed.jobs] == ["one", "five"]
    assert [(r.job, r.field) for r in parsed.rejections] == [
        ("line 3", "(json)"),
        ("four", "prompt"),
    ]
    assert parsed.rejections[0].message.startswith("not valid JSON")


def test_the_schedule_input_holds_jobs_or_an_s3_location() -> None:
    assert ScheduleInput.model_validate({"jobs": []}).jobs == []
    assert ScheduleInput.model_validate({"jobs_s3": "s3://my-bucket/jobs/a.jsonl"}).jobs_s3
    for bad in ({}, {"jobs": [], "jobs_s3": "s3://my-bucket/a.json"}):
        with pytest.raises(ValidationError, match="either"):
            ScheduleInput.model_validate(bad)
    with pytest.raises(ValidationError, match="jobs_s3"):
        ScheduleInput.model_validate({"jobs_s3": "s3://my-bucket/jobs.csv"})
    with pytest.raises(ValidationError, match="job"):
        ScheduleInput.model_validate({"job": []})


def test_unsubstituted_scheduler_attributes_count_as_missing() -> None:
    schedule = ScheduleInput.model_validate(
        {
            "jobs": [],
            "execution_id": "<aws.scheduler.execution-id>",
            "scheduled_time": "<aws.scheduler.scheduled-time>",
            "schedule_arn": "<aws.scheduler.schedule-arn>",
            "attempt_number": "<aws.scheduler.attempt-number>",
        }
    )

    assert schedule.execution_id is None
    assert schedule.scheduled_time is None
    assert schedule.schedule_arn is None
    assert schedule.attempt_number is None


def test_substituted_attributes_are_kept() -> None:
    schedule = ScheduleInput.model_validate(
        {
            "jobs": [],
            "execution_id": "d32c5kddcf5bb8c3",
            "scheduled_time": "2022-03-22T18:59:43Z",
            "attempt_number": "2",
        }
    )

    assert schedule.execution_id == "d32c5kddcf5bb8c3"
    assert schedule.scheduled_time is not None
    assert schedule.scheduled_time.isoformat() == "2022-03-22T18:59:43+00:00"
    assert schedule.attempt_number == 2


def test_a_message_files_its_results_under_the_scheduled_day_in_utc() -> None:
    message = JobMessage.model_validate(
        {
            "job": {"id": "scan", "prompt": "Q?"},
            "execution_id": "e1",
            "scheduled_time": "2025-06-02T23:30:00-05:00",
        }
    )

    assert message.prefix == "research/2025-06-03/scan/"
    with pytest.raises(ValidationError, match="timezone"):
        JobMessage.model_validate(
            {
                "job": {"id": "s", "prompt": "Q?"},
                "execution_id": "e",
                "scheduled_time": "2025-06-02T06:00:00",
            }
        )


def test_s3_uris() -> None:
    assert parse_s3_uri("s3://my-bucket/jobs/nightly.json") == ("my-bucket", "jobs/nightly.json")
    with pytest.raises(JobsInputError):
        parse_s3_uri("https://my-bucket/jobs.json")


def test_a_continuation_is_the_same_job_and_execution_in_a_later_segment() -> None:
    first = JobMessage.model_validate(
        {
            "job": {"id": "long", "prompt": "Q?", "limits": {"max_invocations": 4}},
            "execution_id": "e1",
            "scheduled_time": "2025-06-02T06:00:00Z",
        }
    )

    later = first.continued(2)

    assert first.segment == 0
    assert later.segment == 2
    assert (later.job, later.execution_id, later.prefix) == (first.job, "e1", first.prefix)
    assert JobMessage.model_validate_json(later.model_dump_json()) == later
