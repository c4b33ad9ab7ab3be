"""Pydantic models at the library's boundary: messages, tool calls, usage, requests.

Messages use the OpenAI chat-completions shape (a subset of it), so the messages a
run returns in its ``done`` event can be sent straight back by any client, and the
same history goes to every provider without conversion.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

from agentloop.files.models import Attachments
from agentloop.patterns import Pattern

StopReason = Literal[
    "completed",
    "max_iterations",
    "budget",
    "quota",
    "deadline",
    "cancelled",
    "error",
    "approval_required",
    "client_tools",
    "suspended",
]
"""How a run ended. The last three pause it, to be continued by another request (see
``continuation.py``) or, for ``suspended``, by the server in another invocation."""


FunctionName = Annotated[str, Pattern(r"^[A-Za-z0-9_-]{1,64}$")]
"""OpenAI's rule for a function's (and a response format's) name."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FunctionCall(_Strict):
    name: str = Field(min_length=1, max_length=128)
    arguments: str = Field(description="JSON text as the model wrote it; may be malformed.")


class ToolCall(_Strict):
    id: str = Field(min_length=1, max_length=128)
    type: Literal["function"] = "function"
    function: FunctionCall

    @property
    def name(self) -> str:
        return self.function.name

    @property
    def arguments(self) -> str:
        return self.function.arguments


def _join_text_parts(value: Any) -> Any:
    """Accept OpenAI's list-of-parts content, as long as every part is text."""
    if not isinstance(value, list):
        return value
    texts: list[str] = []
    for part in value:
        if not isinstance(part, dict) or part.get("type") != "text":
            raise ValueError("only text content parts are supported")
        texts.append(str(part.get("text", "")))
    return "".join(texts)


class SystemMessage(_Strict):
    role: Literal["system"] = "system"
    content: str

    _parts = field_validator("content", mode="before")(_join_text_parts)


class UserMessage(_Strict):
    role: Literal["user"] = "user"
    content: str

    _parts = field_validator("content", mode="before")(_join_text_parts)


class AssistantMessage(_Strict):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    # Left out when empty, so the JSON a client gets back is the plain OpenAI shape.
    tool_calls: list[ToolCall] | None = Field(default=None, exclude_if=lambda v: v is None)

    _parts = field_validator("content", mode="before")(_join_text_parts)


class ToolMessage(_Strict):
    role: Literal["tool"] = "tool"
    tool_call_id: str = Field(min_length=1, max_length=128)
    content: str

    _parts = field_validator("content", mode="before")(_join_text_parts)


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage,
    Field(discriminator="role"),
]


def to_wire(messages: list[Message]) -> list[dict[str, Any]]:
    """The provider-facing form: OpenAI chat-completions messages, nulls dropped."""
    return [m.model_dump(exclude_none=True) for m in messages]


def messages_from_wire(data: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Messages from their wire form as the server kept it (a thread, a continuation's tail);
    pydantic's ValidationError if they are not."""
    return _message_list().validate_python(data)


@functools.cache
def _message_list() -> TypeAdapter[list[Message]]:
    """Built at first use: a run that reads no kept messages never builds it."""
    return TypeAdapter(list[Message])


class Usage(_Strict):
    """Tokens as the provider reported them (``cached_tokens`` is part of ``prompt_tokens``)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
        )


class Sampling(_Strict):
    """How the model samples, for every model call of the run. Sub-agents keep only its
    ``max_output_tokens`` (a limit); the rest shapes this run's answer alone.

    Left out, the provider's defaults apply. ``max_output_tokens`` caps each call's output
    (the token budget may cap it lower); ``stop`` ends a call at any of its strings.
    """

    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_output_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    stop: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        default=None, min_length=1, max_length=4
    )
    seed: int | None = Field(default=None, ge=-(2**63), lt=2**63)

    def wire(self) -> dict[str, Any]:
        """The chat-completions fields, the ones set only (``max_output_tokens`` apart)."""
        return self.model_dump(exclude_none=True, exclude={"max_output_tokens"})


class JsonSchemaFormat(_Strict):
    """OpenAI's ``json_schema`` response format: a named JSON Schema the answer must match."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: FunctionName
    description: str | None = Field(default=None, max_length=10_000)
    schema_: dict[str, Any] = Field(default_factory=dict, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Strict):
    """The shape of the final answer: plain ``text``, a ``json_object``, or JSON matching
    ``json_schema`` (checked by the loop before the run ends; see ``output_format.py``)."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_goes_with_its_type(self) -> ResponseFormat:
        if (self.type == "json_schema") != (self.json_schema is not None):
            raise ValueError('json_schema is required with, and only with, type "json_schema"')
        return self


class Approval(_Strict):
    """A person's decision on a call that waited for approval."""

    call_id: str = Field(min_length=1, max_length=128)
    approved: bool
    reason: str | None = Field(default=None, max_length=2_000)


class FunctionSpec(_Strict):
    name: FunctionName
    description: str | None = Field(default=None, max_length=10_000)
    parameters: dict[str, Any] | None = None
    strict: bool | None = None

    @field_validator("parameters")
    @classmethod
    def _an_object_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        """What providers would refuse mid-run, refused before it: parameters that are not a
        JSON Schema of an object (``jsonschema`` is imported for client tools only)."""
        if schema is None:
            return None
        if schema.get("type") != "object":
            raise ValueError(
                'client-side tools take a JSON Schema of "type": "object" (as every provider '
                "requires); leave parameters out for none"
            )
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise ValueError(f"not a JSON Schema: {exc.message}") from exc
        return schema


class ClientTool(_Strict):
    """A tool the client declares and runs itself (OpenAI's function tool shape)."""

    type: Literal["function"] = "function"
    function: FunctionSpec


class PendingCall(_Strict):
    """A call of a paused run that waits for the client: a person's approval, or (``client``)
    the result of a tool the client runs itself."""

    call_id: str
    name: str
    arguments: str
    kind: Literal["approval", "client"]


# The agent options' types, bounds included, written once: ChatRequest's fields and every
# face's options (faces/options.py) are declared with these.
MAX_TOOL_NAMES = 100
"""Names in ``tools``, ``approval_tools`` or ``tool_limits``: more than any server offers."""
MAX_TOOL_NAME_CHARS = 128
"""As OpenAI bounds a function's name (the longest an MCP tool's prefixed name may be)."""
MAX_COST_USD = 1_000_000
"""The highest ``max_cost_usd`` a request may ask for (the server's cap clamps it lower)."""
MAX_TOOL_CALLS = 10_000
"""The highest call count a request's ``tool_limits`` may give a tool."""

ToolName = Annotated[str, Field(min_length=1, max_length=MAX_TOOL_NAME_CHARS)]
ToolNames = Annotated[list[ToolName], Field(max_length=MAX_TOOL_NAMES)]
Iterations = Annotated[int, Field(ge=1)]
Tokens = Annotated[int, Field(ge=1)]
Dollars = Annotated[float, Field(gt=0, le=MAX_COST_USD)]
ToolLimits = Annotated[
    dict[ToolName, Annotated[int, Field(ge=0, le=MAX_TOOL_CALLS)]],
    Field(max_length=MAX_TOOL_NAMES),
]
"""Tool name -> the most calls of it a request may run (0: the tool is not offered)."""


class RunProgress(_Strict):
    """What a run had done when it paused: it goes on from here, never from the start."""

    iterations: int = Field(default=0, ge=0)
    usage_by_depth: list[Usage] = Field(default_factory=list, max_length=16)
    tool_calls: ToolLimits = Field(default_factory=dict)
    """Calls of each limited tool run so far, every depth included (``tool_limits``)."""


NEW_THREAD = "new"
"""The ``thread_id`` that asks for a new thread."""
ThreadId = Annotated[
    str,
    Pattern(r"^[A-Za-z0-9_-]{1,128}$"),
    Field(description=f"A thread's id, or {NEW_THREAD!r} for a new thread."),
]

RUN_OPTIONS = (
    "tools",
    "approval_tools",
    "max_iterations",
    "token_budget",
    "max_cost_usd",
    "tool_limits",
    "thread_id",
    "resumable",
)
"""The agent's own options, which every face carries in its protocol's extension slot."""


def run_options(options: BaseModel) -> dict[str, Any]:
    """A face's options object as :class:`ChatRequest` fields: the ones it has of
    :data:`RUN_OPTIONS`, so a new option is mapped in one place."""
    return {name: getattr(options, name) for name in RUN_OPTIONS if hasattr(options, name)}


class ChatRequest(_Strict):
    """What a client sends: the conversation so far plus optional per-request limits.

    Limits left out take the server's defaults; limits above the server's caps are
    clamped to them by the chat handler rather than rejected.
    """

    messages: list[Message] = Field(min_length=1)
    model: str | None = Field(
        default=None,
        description="'provider:model', e.g. 'groq:llama-3.3-70b-versatile'.",
        max_length=200,
    )
    tools: ToolNames | None = Field(
        default=None, description="Tool names to offer; the server's default set when left out."
    )
    max_iterations: Iterations | None = None
    token_budget: Tokens | None = None
    max_cost_usd: Dollars | None = Field(
        default=None,
        description="Dollars this request may spend, every sub-agent included (clamped to the "
        "server's cap).",
    )
    tool_limits: ToolLimits | None = Field(
        default=None,
        description="The most calls of each named tool this request may run, every sub-agent "
        "included; a call past it is refused with an error the model reads. Lowers the "
        "server's AGENTLOOP_TOOL_LIMITS, never raises them (clamped); 0: the tool is not "
        "offered.",
    )
    sampling: Sampling | None = None
    response_format: ResponseFormat | None = None
    approval_tools: ToolNames | None = Field(
        default=None,
        description="More tools whose calls wait for a person's approval in this request "
        "(added to the server's AGENTLOOP_APPROVAL_TOOLS, never removing any).",
    )
    client_tools: list[ClientTool] | None = Field(
        default=None,
        max_length=64,
        description="Tools the client runs itself: offered to the model; a call to one pauses "
        "the run (stop reason client_tools) until the client sends its result.",
    )

    @field_validator("client_tools")
    @classmethod
    def _each_name_once(cls, tools: list[ClientTool] | None) -> list[ClientTool] | None:
        names = [tool.function.name for tool in tools or ()]
        if len(set(names)) != len(names):
            raise ValueError(f"a name is declared twice: {names}")
        return tools

    approvals: list[Approval] | None = Field(default=None, max_length=64)
    thread_id: ThreadId | None = Field(
        default=None,
        description="A thread of the caller's to go on with: its messages come before these "
        "(send only the new ones) and the run's are added to it when the run ends, even if "
        f"the client left. {NEW_THREAD!r} starts a thread; run_start names it.",
    )
    resumable: bool = Field(
        default=False,
        description="Keep the streamed answer in the store as it is sent, so a client that "
        "lost it can reconnect (GET /chat/stream with Last-Event-ID) and get the rest. Needs "
        "thread_id. The run then goes on to its end when its client leaves, spending as it "
        "would have: that is why it is asked for.",
    )
    attachments: Attachments | None = Field(
        default=None,
        description="A person's files for this turn (at most 10, 4 MiB each, base64): put in "
        "execute_code's working directory (in a thread, kept with it) and named to the model.",
    )
    resume: str | None = Field(
        default=None,
        max_length=500_000,
        description="The token a paused run's done carried, to continue that run.",
    )

    @model_validator(mode="after")
    def _conversation_is_well_formed(self) -> ChatRequest:
        # Continuing a paused run (checked against its token when planned), the last turn's
        # calls may still wait.
        check_conversation(self.messages, resuming=self.resume is not None or bool(self.approvals))
        return self


def check_conversation(messages: list[Message], *, resuming: bool = False) -> None:
    """Reject histories every provider would reject, with a message naming the problem.

    Tool results must answer a tool call made earlier in the conversation, every tool
    call must have its result before the next non-tool message, and the conversation
    must end with the user's turn or with tool results (a continuation: the results of
    the client's own tools). ``resuming`` a paused run, the last turn's calls may still wait
    for results: the resume token says which (checked when the run is planned).
    """
    pending: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in pending:
                raise ValueError(
                    f"messages[{index}]: tool result for unknown or already answered "
                    f"tool call id {message.tool_call_id!r}"
                )
            pending.discard(message.tool_call_id)
            continue
        if pending:
            raise ValueError(
                f"messages[{index}]: tool call(s) {sorted(pending)} have no tool result before "
                "this message"
            )
        if isinstance(message, AssistantMessage) and message.tool_calls:
            pending = {call.id for call in message.tool_calls}
    if resuming:
        return
    if pending:
        raise ValueError(f"tool call(s) {sorted(pending)} have no tool result")
    if not isinstance(messages[-1], UserMessage | ToolMessage):
        raise ValueError("the last message must be the user's (role 'user') or a tool result")
