"""The typed stream events a run emits, and the JSON Schema of that protocol.

Every event carries ``depth`` (0 for the top-level run) and, below the top level,
``parent_call_id``: the id of the ``ask_llm`` tool call that started the sub-agent.
``done`` is always the last event of a run.
"""

from __future__ import annotations

import functools
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agentloop.files.models import FileRef
from agentloop.models import Message, PendingCall, StopReason, Usage

_Defaults = tuple[dict[str, Any], tuple[tuple[str, Any], ...]]
"""A class's fields in their order with the value each takes when left out (a required one:
None), and the fields whose default a factory makes."""
_DEFAULTS: dict[type[BaseModel], _Defaults] = {}
_set = object.__setattr__


class _Event(BaseModel):
    """One event of a run's stream.

    Events are made by the engine alone, from values its own types already hold (the model's
    output is checked where it enters, in ``llm/untrusted.py``), so making one does not
    validate it: ``TextDelta(text=...)`` fills the fields as pydantic's ``model_construct``
    would, in about the time validating took. Each class's validator and serializer are built
    the first time something dumps or validates one (a face's JSON, :func:`event_adapter`),
    so an in-process run that reads its events as objects never builds them: about 0.3 MB a
    process keeps (``make bench``'s memory figure).
    """

    # Fields with defaults are always sent, so the published schema lists them as required.
    model_config = ConfigDict(
        extra="forbid", json_schema_serialization_defaults_required=True, defer_build=True
    )

    run_id: str = Field(default="", description="Identifies one run (a sub-agent has its own).")
    depth: int = Field(default=0, ge=0)
    parent_call_id: str | None = None

    def __init__(self, /, **data: Any) -> None:
        """Fills the fields as given, the rest with their defaults; validates nothing."""
        template, factories = _DEFAULTS.get(type(self)) or _defaults(type(self))
        values = template.copy()
        values.update(data)  # keeps the fields' order: every name is already a key
        for name, factory in factories:
            if name not in data:
                values[name] = factory()
        # The instance's state, as BaseModel keeps it (its __slots__).
        _set(self, "__dict__", values)
        _set(self, "__pydantic_fields_set__", set(data))
        _set(self, "__pydantic_extra__", None)
        _set(self, "__pydantic_private__", None)

    # Validating (an adapter, ``model_validate``) still checks every field itself rather than
    # calling this ``__init__``: pydantic's own mark of an ``__init__`` it may bypass. Pydantic
    # makes its instances (validating, copying) without calling it.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]


def _defaults(cls: type[BaseModel]) -> _Defaults:
    """What ``cls``'s fields take when left out (worked out once a class)."""
    fields = cls.__pydantic_fields__.items()
    template = {name: None if info.is_required() else info.default for name, info in fields}
    factories = tuple((n, info.default_factory) for n, info in fields if info.default_factory)
    _DEFAULTS[cls] = template, factories
    return _DEFAULTS[cls]


class RunStart(_Event):
    type: Literal["run_start"] = "run_start"
    model: str
    tools: list[str]
    max_iterations: int
    token_budget: int
    budget_remaining: int
    max_cost_usd: float | None = Field(
        default=None, description="The request's dollar budget; null: none."
    )
    thread_id: str | None = Field(
        default=None,
        description="The thread the run goes on with (a new one's id when the request asked "
        "for one); null: none, the run keeps nothing.",
    )


class TurnStart(_Event):
    type: Literal["turn_start"] = "turn_start"
    iteration: int = Field(description="1-based number of this model call within the run.")
    budget_remaining: int


class TextDelta(_Event):
    type: Literal["text_delta"] = "text_delta"
    text: str


class TextReset(_Event):
    """The text this run streamed since its last ``turn_start`` or ``tool_call_result`` is void.

    Sent when a provider's stream was cut after some text and the turn is retried (the retried
    turn's text follows), or when that text cannot stand as the answer (an internal error, a
    blank reply). A client drops that text; what follows replaces it. With it, the text a
    client shows since the last ``turn_start`` or ``tool_call_result`` always equals
    ``done.text`` when ``done`` arrives.
    """

    type: Literal["text_reset"] = "text_reset"
    iteration: int = Field(description="The turn whose text so far is dropped.")
    reason: str = Field(description="Why, in plain words (for logs; not shown as an answer).")


class ToolCallStart(_Event):
    type: Literal["tool_call_start"] = "tool_call_start"
    call_id: str
    name: str
    arguments: str = Field(description="The arguments as the model wrote them (JSON text).")


class ToolCallResult(_Event):
    type: Literal["tool_call_result"] = "tool_call_result"
    call_id: str
    name: str
    ok: bool
    duration_ms: float
    content: str = Field(description="The tool result exactly as the model sees it.")


class FileMade(_Event):
    """A file a tool call made (a chart, a CSV) and kept for the caller; sent after the call's
    ``tool_call_result``. The model is told its name, type and size, never sent its bytes."""

    type: Literal["file"] = "file"
    call_id: str
    file: FileRef


class ApprovalRequest(_Event):
    """A call that does not run until a person approves it; the run pauses after its turn
    (``done.stop_reason == "approval_required"``)."""

    type: Literal["approval_request"] = "approval_request"
    call_id: str
    name: str
    arguments: str = Field(description="The arguments as the model wrote them (JSON text).")


class SubagentStart(_Event):
    type: Literal["subagent_start"] = "subagent_start"
    call_id: str
    query: str


class SubagentFinish(_Event):
    type: Literal["subagent_finish"] = "subagent_finish"
    call_id: str
    stop_reason: StopReason
    iterations: int
    usage: Usage
    budget_remaining: int
    cost_usd: float | None = Field(
        default=None,
        description="The sub-agent's cost in US dollars; null: some model's price is unknown.",
    )


class UsageReport(_Event):
    type: Literal["usage"] = "usage"
    model: str
    usage: Usage = Field(description="This model call's usage.")
    total: Usage = Field(description="Usage of the whole request so far, every depth included.")
    budget_remaining: int
    cost_usd: float | None = Field(
        default=None,
        description="This call's price in US dollars (input, cached input and output priced "
        "separately); null: no price is known for the model.",
    )
    total_cost_usd: float | None = Field(
        default=None,
        description="The whole request's cost so far; null once any call's price is unknown.",
    )
    finish_reason: str | None = Field(
        default=None, description="Why the model stopped, as the provider said (e.g. stop)."
    )


class ModelSwitched(_Event):
    type: Literal["model_switched"] = "model_switched"
    from_model: str
    to_model: str
    reason: str


class Notice(_Event):
    type: Literal["notice"] = "notice"
    code: str
    message: str


ErrorCode = Literal["configuration", "invalid_request", "provider", "invalid_output", "internal"]
"""``invalid_output``: the answer failed the request's ``response_format`` twice."""


class ErrorEvent(_Event):
    type: Literal["error"] = "error"
    code: ErrorCode
    message: str


SourceKind = Literal["read", "search"]


class Source(BaseModel):
    """A web page a run used: one it read (``scrape``) or one a search gave it (``search_web``).

    Its URL and title come from the web (a page, a search API's answer): show them as text,
    and open the link in a new tab without an opener.
    """

    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)

    url: str = Field(description="An absolute http(s) URL; a read page's after redirects.")
    title: str | None = Field(
        default=None, description="The page's or the search result's title; null: none."
    )
    kind: SourceKind = Field(
        description="read: the run read the page; search: a search result it got back."
    )


class Done(_Event):
    type: Literal["done"] = "done"
    text: str = Field(description="The final assistant message of this run.")
    stop_reason: StopReason
    iterations: int
    usage: Usage = Field(description="Usage of this run, its sub-agents included.")
    usage_by_depth: list[Usage] = Field(
        default_factory=list,
        description="At the top level: the request's usage per depth (index 0 = top level).",
    )
    budget_remaining: int = Field(description="Tokens left in the whole request's budget.")
    cost_usd: float | None = Field(
        default=None,
        description="This run's cost in US dollars, its sub-agents included; null: some "
        "model's price is unknown.",
    )
    cost_by_depth: list[float | None] = Field(
        default_factory=list,
        description="At the top level: the request's cost per depth (index 0 = top level).",
    )
    messages: list[Message] = Field(
        description="Messages to append to the conversation to continue it: assistant tool "
        "calls, tool results and the final answer."
    )
    pending: list[PendingCall] = Field(
        default_factory=list,
        description="A paused run's calls that wait for the client (approval or a result).",
    )
    resume: str | None = Field(
        default=None,
        description="A paused run's token: send it back with the conversation (and approvals, "
        "or the client tools' results) to continue the run.",
    )
    sources: list[Source] = Field(
        default_factory=list,
        description="The web pages this run used, its sub-agents' included, in order of first "
        "use, each URL once (at most 50): pages it read and search results it got back. A "
        "failed tool call adds none.",
    )


Event = Annotated[
    RunStart
    | TurnStart
    | TextDelta
    | TextReset
    | ToolCallStart
    | ToolCallResult
    | FileMade
    | ApprovalRequest
    | SubagentStart
    | SubagentFinish
    | UsageReport
    | ModelSwitched
    | Notice
    | ErrorEvent
    | Done,
    Field(discriminator="type"),
]


@functools.cache
def event_adapter() -> TypeAdapter[Event]:
    """Validates an event from its JSON form (a stored research job's events, a client's
    tests); built at first use, as the event classes' own validators are."""
    return TypeAdapter(Event)


def event_json_schema() -> dict[str, Any]:
    """JSON Schema of one stream event (the ``data`` of each SSE message)."""
    schema = event_adapter().json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "agentloop stream event"
    return schema


def event_schema_text() -> str:
    """The schema as committed in ``docs/events.schema.json`` (stable formatting)."""
    return json.dumps(event_json_schema(), indent=2, sort_keys=True) + "\n"
