"""The UI messages ``useChat`` sends back, part by part (each part's model chosen by its
``type``, so an error names the part's own field)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, StringConstraints
from pydantic_core import PydanticCustomError

from agentloop.http_api import HttpError
from agentloop.patterns import Pattern

ShortId = Annotated[str, StringConstraints(max_length=256)]
_CallId = Annotated[str, StringConstraints(min_length=1, max_length=128)]
_ToolName = Annotated[str, StringConstraints(min_length=1, max_length=128)]

# -- the request ----------------------------------------------------------------------------


class _Part(BaseModel):
    # Fields the SDK adds for display (providerMetadata, title, ...) are dropped, as the
    # SDK's own validateUIMessages drops unknown ones.
    model_config = ConfigDict(extra="ignore")


class TextPart(_Part):
    type: Literal["text"]
    text: str


class ReasoningPart(_Part):
    type: Literal["reasoning"]
    text: str


class StepStartPart(_Part):
    type: Literal["step-start"]


class SourcePart(_Part):
    type: Literal["source-url", "source-document"]
    url: Any = None
    """Read only to leave out of a continued answer the sources its message shows already."""


class FilePart(_Part):
    """A user's: a file for the run (its ``url`` a ``data:`` URL); an assistant's: a file a
    run made (its link), display only."""

    type: Literal["file"]
    mediaType: str = Field(max_length=200)
    url: str
    filename: str | None = None


class DataPart(_Part):
    type: Annotated[str, StringConstraints(max_length=200), Pattern(r"^data-.")]
    id: ShortId | None = None
    data: Any = None


ToolState = Literal[
    "input-streaming",
    "input-available",
    "approval-requested",
    "approval-responded",
    "output-available",
    "output-error",
    "output-denied",
]


class ToolApproval(_Part):
    """A tool part's ``approval``: asked for (``id``), then answered (``approved``, ``reason``)."""

    id: ShortId
    approved: bool | None = None
    reason: str | None = Field(default=None, max_length=2_000)


class BaseToolPart(_Part):
    toolCallId: _CallId
    state: ToolState
    input: Any = None
    output: Any = None
    errorText: str | None = None
    approval: ToolApproval | None = None

    @property
    def tool_name(self) -> str:
        raise NotImplementedError


class ToolPart(BaseToolPart):
    """``tool-<name>``: how the stream shows the agent's tool calls."""

    type: Annotated[str, StringConstraints(max_length=133), Pattern(r"^tool-.")]

    @property
    def tool_name(self) -> str:
        return self.type.removeprefix("tool-")


class DynamicToolPart(BaseToolPart):
    type: Literal["dynamic-tool"]
    toolName: _ToolName

    @property
    def tool_name(self) -> str:
        return self.toolName


_PART_MODELS: dict[str, type[_Part]] = {
    "text": TextPart,
    "reasoning": ReasoningPart,
    "step-start": StepStartPart,
    "source-url": SourcePart,
    "source-document": SourcePart,
    "file": FilePart,
    "dynamic-tool": DynamicToolPart,
}


def _parse_part(value: Any) -> _Part:
    """The part's model chosen by its ``type`` (``tool-*`` and ``data-*`` by prefix), so an
    error names the part's own field (``messages.0.parts.1.state``)."""
    if isinstance(value, _Part):
        return value
    kind = value.get("type") if isinstance(value, dict) else None
    model: type[_Part] | None = None
    if isinstance(kind, str):
        model = _PART_MODELS.get(kind)
        if model is None and kind.startswith("tool-"):
            model = ToolPart
        elif model is None and kind.startswith("data-"):
            model = DataPart
    if model is None:
        raise PydanticCustomError(
            "invalid_part",
            "unknown part type: expected text, reasoning, step-start, source-url, "
            "source-document, file, data-*, tool-* or dynamic-tool",
        )
    return model.model_validate(value)


UIPart = Annotated[
    TextPart
    | ReasoningPart
    | StepStartPart
    | SourcePart
    | FilePart
    | DataPart
    | ToolPart
    | DynamicToolPart,
    PlainValidator(_parse_part),
]


class UIMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: ShortId
    role: Literal["system", "user", "assistant"]
    metadata: Any = None
    parts: list[UIPart]


def invalid(param: str, message: str) -> HttpError:
    return HttpError(422, "invalid_request", f"{param}: {message}", param=param)
