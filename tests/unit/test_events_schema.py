"""The stream events: the committed JSON Schema, JSON round trips, and what the schema rejects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, get_args

import pytest
from jsonschema import Draft202012Validator
from pydantic import Field, ValidationError

from agentloop.events import (
    ApprovalRequest,
    Done,
    ErrorEvent,
    Event,
    FileMade,
    ModelSwitched,
    Notice,
    RunStart,
    SubagentFinish,
    SubagentStart,
    TextDelta,
    TextReset,
    ToolCallResult,
    ToolCallStart,
    TurnStart,
    UsageReport,
    _Event,
    event_adapter,
    event_json_schema,
    event_schema_text,
)
from agentloop.files.models import FileRef
from agentloop.models import (
    AssistantMessage,
    FunctionCall,
    ToolCall,
    ToolMessage,
    Usage,
)

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = ROOT / "docs" / "events.schema.json"

USAGE = Usage(prompt_tokens=120, completion_tokens=30, cached_tokens=64)
NESTED = {"run_id": "run_sub", "depth": 1, "parent_call_id": "call_ask"}

SAMPLES: list[_Event] = [
    RunStart(
        run_id="run_1",
        model="groq:llama-3.3-70b-versatile",
        tools=["search", "ask_llm"],
        max_iterations=10,
        token_budget=200_000,
        budget_remaining=200_000,
    ),
    TurnStart(iteration=1, budget_remaining=195_904, **NESTED),
    TextDelta(text='héllo "world"\n漢字 😀'),
    ToolCallStart(call_id="call_1", name="search", arguments='{"query": "x"'),
    ToolCallResult(
        call_id="call_1", name="search", ok=False, duration_ms=12.5, content='{"ok": false}'
    ),
    SubagentStart(call_id="call_ask", query="find the docs"),
    SubagentFinish(
        call_id="call_ask",
        stop_reason="budget",
        iterations=3,
        usage=USAGE,
        budget_remaining=1_000,
    ),
    UsageReport(model="openai:gpt-4o-mini", usage=USAGE, total=USAGE + USAGE, budget_remaining=9),
    Notice(code="retry", message="rate limited, retrying in 2 s", **NESTED),
    ModelSwitched(from_model="groq:a", to_model="openai:b", reason="HTTP 503"),
    ErrorEvent(code="provider", message="groq answered HTTP 500"),
    TextReset(iteration=2, reason="the provider's stream was cut; retrying the turn"),
    ApprovalRequest(call_id="call_2", name="send_email", arguments='{"to": "a@example.com"}'),
    FileMade(
        call_id="call_1",
        file=FileRef(
            id="a" * 32,
            name="chart (2).png",
            media_type="image/png",
            size=1234,
            url="/files/" + "a" * 32 + "?expires=1&signature=" + "0" * 64,
            expires_at=1,
            call_id="call_1",
        ),
    ),
    Done(
        text="The answer.",
        stop_reason="completed",
        iterations=2,
        usage=USAGE,
        budget_remaining=100,
        messages=[
            AssistantMessage(
                tool_calls=[
                    ToolCall(id="call_1", function=FunctionCall(name="search", arguments="{}"))
                ]
            ),
            ToolMessage(tool_call_id="call_1", content='{"ok": true, "result": []}'),
            AssistantMessage(content="The answer."),
        ],
    ),
]


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = event_json_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def test_committed_schema_is_up_to_date() -> None:
    committed = SCHEMA_PATH.read_text(encoding="utf-8")

    assert committed == event_schema_text(), (
        "docs/events.schema.json is out of date with the event models: run `make schema` "
        "and commit the result"
    )


def test_schema_text_is_stable_json() -> None:
    text = event_schema_text()

    assert text.endswith("}\n")
    assert json.loads(text) == event_json_schema()
    assert event_schema_text() == text


def test_samples_cover_every_event_type() -> None:
    union = get_args(Event)[0]

    assert {type(e) for e in SAMPLES} == set(get_args(union))


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: type(e).__name__)
def test_event_round_trips_through_json(event: _Event) -> None:
    again = event_adapter().validate_json(event.model_dump_json())

    assert type(again) is type(event)
    assert again == event


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: type(e).__name__)
def test_an_event_is_made_as_validating_would_make_it(event: _Event) -> None:
    given = {name: getattr(event, name) for name in event.model_fields_set}
    validated = type(event).model_validate(given)

    assert list(vars(event)) == list(vars(validated))  # every field, in the same order
    assert vars(event) == vars(validated)
    assert event.model_fields_set == validated.model_fields_set


def test_making_an_event_builds_no_validator_until_one_is_dumped() -> None:
    class Probe(_Event):
        type: Literal["probe"] = "probe"
        items: list[int] = Field(default_factory=list)

    made, other = Probe(run_id="r"), Probe()
    assert not Probe.__pydantic_complete__
    assert made.items == []
    assert made.items is not other.items
    assert made.model_fields_set == {"run_id"}

    assert made.model_dump() == {
        "run_id": "r",
        "depth": 0,
        "parent_call_id": None,
        "type": "probe",
        "items": [],
    }
    assert Probe.__pydantic_complete__
    with pytest.raises(ValidationError):
        Probe.model_validate({"depth": -1})


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: type(e).__name__)
def test_event_validates_against_the_schema(event: _Event, validator: Draft202012Validator) -> None:
    validator.validate(json.loads(event.model_dump_json()))


def wire(event: _Event) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(event.model_dump_json())
    return data


def test_schema_rejects_an_unknown_type(validator: Draft202012Validator) -> None:
    data = wire(TextDelta(text="hi"))
    data["type"] = "text_deltas"

    assert not validator.is_valid(data)


@pytest.mark.parametrize(
    ("event", "missing"),
    [
        (TextDelta(text="hi"), "text"),
        (SAMPLES[-1], "messages"),
        (SAMPLES[4], "duration_ms"),
        (SAMPLES[7], "total"),
    ],
    ids=["text_delta.text", "done.messages", "tool_call_result.duration_ms", "usage.total"],
)
def test_schema_rejects_an_event_missing_a_required_field(
    event: _Event, missing: str, validator: Draft202012Validator
) -> None:
    data = wire(event)
    del data[missing]

    assert not validator.is_valid(data)


def test_schema_rejects_an_unexpected_field(validator: Draft202012Validator) -> None:
    data = wire(TextDelta(text="hi"))
    data["colour"] = "red"

    assert not validator.is_valid(data)


def test_schema_rejects_a_negative_depth(validator: Draft202012Validator) -> None:
    data = wire(TextDelta(text="hi"))
    data["depth"] = -1

    assert not validator.is_valid(data)


def test_schema_requires_the_type_discriminator(validator: Draft202012Validator) -> None:
    data = wire(TextDelta(text="hi"))
    del data["type"]

    with pytest.raises(ValueError, match="type"):
        event_adapter().validate_python(data)
    assert not validator.is_valid(data)
