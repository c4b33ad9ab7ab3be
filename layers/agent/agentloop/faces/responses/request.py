"""The Responses API's request as the agent honours it: the body of ``POST /v1/responses``
mapped to a :class:`ChatRequest`, and every field it cannot honour refused by name."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    ValidationError,
    field_validator,
)
from pydantic_core import PydanticCustomError

from agentloop.faces.attachments import attachment, check_count, invalid
from agentloop.faces.openai.request import DEFAULT_MODEL_ALIAS, OpenAIOptions
from agentloop.faces.options import option_params
from agentloop.files.models import Attachment
from agentloop.http_api import HttpError, first_problem
from agentloop.models import (
    AssistantMessage,
    ChatRequest,
    JsonSchemaFormat,
    Message,
    ResponseFormat,
    Sampling,
    SystemMessage,
    UserMessage,
)
from agentloop.output_format import OutputFormat, OutputFormatError

_UNSUPPORTED: dict[str, str] = {
    "conversation": "conversations are not supported: continue with previous_response_id",
    "prompt": "stored prompts are not supported; send instructions and input",
    "background": "responses are not run in the background: stream instead",
    "include": "no additional output data is available",
    "reasoning": "reasoning options are not supported",
    "max_tool_calls": 'the agent\'s limits are set with "agentloop": {"max_iterations": n}',
    "top_logprobs": "log probabilities are not supported",
    "truncation": "a conversation too long for the model is shortened by the agent itself",
}
"""Responses fields the agent cannot honour, and why (``null`` is taken as absent)."""


def _unsupported(field: str) -> HttpError:
    reason = _UNSUPPORTED.get(field, "is not supported by this server")
    shown = field if len(field) <= 100 else field[:100] + "..."  # the name is the client's
    return HttpError(422, "unsupported_parameter", f"{shown}: {reason}", param=shown)


class TextPart(BaseModel):
    """A text content part; an ``output_text`` part sent back may carry its annotations."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["input_text", "output_text"]
    text: str
    annotations: list[Any] | None = None
    logprobs: list[Any] | None = None


class FilePart(BaseModel):
    """A person's file: ``file_data`` (a ``data:`` URL) with its ``filename`` becomes the run's
    attachment. ``file_id`` and ``file_url`` are refused by name: no uploaded files are kept
    here, and no link is fetched."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["input_file"]
    file_data: str | None = None
    filename: str | None = Field(default=None, max_length=1_000)
    file_id: str | None = None
    file_url: str | None = None
    detail: Literal["auto", "low", "high"] | None = Field(
        default=None, description="Accepted: the file is read by the agent's programs."
    )

    def to_attachment(self, at: str) -> Attachment:
        for field, why in _FILE_REFERENCES.items():
            if getattr(self, field) is not None:
                raise HttpError(
                    422, "unsupported_parameter", f"{at}.{field}: {why}", param=f"{at}.{field}"
                )
        if self.file_data is None:
            raise invalid(f"{at}.file_data", "a file's bytes are needed (a data: URL, base64)")
        return attachment(self.file_data, self.filename, None, f"{at}.file_data")


_FILE_REFERENCES = {
    "file_id": "uploaded files are not kept by this server: send the bytes in file_data "
    "(data:<type>;base64,...) with filename",
    "file_url": "this server fetches no links: send the bytes in file_data "
    "(data:<type>;base64,...) with filename",
}

ContentPart = TextPart | FilePart
_PART_TYPES = ("input_text", "output_text", "input_file")


def _supported_part(value: Any) -> Any:
    """Refuse images and audio by name, before pydantic lists every field it missed."""
    kind = value.get("type") if isinstance(value, dict) else None
    if kind in _PART_TYPES:
        return value
    raise PydanticCustomError(
        "unsupported_content",
        "only text parts (input_text, output_text) and file parts (input_file) are "
        "supported, got {kind}",
        {"kind": repr(kind) if isinstance(kind, str) else "no type"},
    )


class InputMessage(BaseModel):
    """One message item of ``input``: an easy message, or an earlier response's output item."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: list[Annotated[ContentPart, BeforeValidator(_supported_part), Discriminator("type")]]
    id: str | None = Field(default=None, max_length=256)
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    phase: Literal["commentary", "final_answer"] | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _parts(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [{"type": "input_text", "text": value}]
        return value

    def to_item(self, item_id: str) -> dict[str, Any]:
        """The item as ``input_items`` lists it (its own id if it came with one)."""
        parts = [_item_part(part) for part in self.content]
        return {
            "type": "message",
            "id": self.id or item_id,
            "role": self.role,
            "content": parts,
            "status": self.status or "completed",
        }

    def to_message(self) -> Message:
        text = "".join(part.text for part in self.content if isinstance(part, TextPart))
        if self.role == "user":
            return UserMessage(content=text)
        if self.role == "assistant":
            return AssistantMessage(content=text)
        return SystemMessage(content=text)  # system, and developer (the same thing here)


def _item_part(part: ContentPart) -> dict[str, Any]:
    """A part as ``input_items`` lists it: a file by its name, its bytes not kept."""
    if isinstance(part, TextPart):
        return {"type": part.type, "text": part.text}
    return {"type": part.type, "filename": part.filename}


def _invalid(exc: ValidationError, prefix: str = "") -> HttpError:
    """A 422 naming the first failing field of a model validated inside this face."""
    first = exc.errors(include_url=False)[0]
    field = prefix + ".".join(str(part) for part in first["loc"])
    return HttpError(422, "invalid_request", f"{field}: {first['msg']}", param=field)


def _message_item(item: Any) -> Any:
    """Refuse items other than messages (tool calls, references, reasoning, ...) by type."""
    kind = item.get("type", "message") if isinstance(item, dict) else None
    if kind == "message":
        return item
    raise PydanticCustomError(
        "unsupported_item",
        "only message items are supported (a text conversation), got {kind}",
        {"kind": f"type {kind!r}" if isinstance(kind, str) else "something else"},
    )


class TextConfig(BaseModel):
    """``text``: the answer's format (``verbosity`` and the rest are refused)."""

    model_config = ConfigDict(extra="forbid")

    format: dict[str, Any] | None = Field(
        default=None, description='{"type": "text" | "json_object" | "json_schema", ...}'
    )


class ResponsesStreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    include_obfuscation: bool | None = Field(
        default=None, description="Accepted; no obfuscation padding is ever sent."
    )


class ResponsesRequest(BaseModel):
    """The part of Responses' request the agent honours. Other fields are refused (422,
    naming the field) by :meth:`to_chat_request`, with the reason when one is known."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(default=DEFAULT_MODEL_ALIAS, max_length=200)
    input: list[Annotated[InputMessage, BeforeValidator(_message_item)]] = Field(min_length=1)
    instructions: str | None = None
    stream: bool = False
    stream_options: ResponsesStreamOptions | None = None
    agentloop: OpenAIOptions = Field(default_factory=OpenAIOptions)
    tools: list[Any] | None = Field(default=None, description="Client tools: only [] accepted.")
    tool_choice: Literal["auto"] | None = None
    text: TextConfig | None = None
    # Reach every model call of the run:
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    store: bool | None = Field(default=None, description="Unset: true, as OpenAI's API.")
    previous_response_id: str | None = Field(default=None, max_length=256)
    # Accepted and ignored: no client tools run here.
    metadata: dict[str, str] | None = Field(default=None, max_length=16)
    user: str | None = Field(default=None, max_length=256)
    parallel_tool_calls: bool | None = Field(
        default=None, description="Only about client tools, which are refused."
    )

    @field_validator("input", mode="before")
    @classmethod
    def _string_input(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [{"role": "user", "content": value}]
        if isinstance(value, list):
            return value
        raise PydanticCustomError(
            "input_type", "input must be a string or a list of message items", {}
        )

    @field_validator("metadata")
    @classmethod
    def _metadata_bounds(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        """OpenAI's bounds, so what is echoed back stays small."""
        for key, item in (value or {}).items():
            if len(key) > 64 or len(item) > 512:
                raise PydanticCustomError(
                    "metadata_bounds", "keys are at most 64 characters, values at most 512", {}
                )
        return value

    def plan_params(self) -> dict[str, str]:
        """Where Responses carries what a plan may refuse: its own ``tools`` are the client's."""
        return PLAN_PARAMS

    @property
    def stored(self) -> bool:
        """Whether the response is kept (``store``: unset is true, as OpenAI's default)."""
        return self.store is not False

    def input_messages(self) -> list[Message]:
        """``input`` as the conversation's new messages (the instructions are not among
        them: they are this response's alone, never carried to the next one)."""
        return [item.to_message() for item in self.input]

    def to_chat_request(self, history: Sequence[Message] = ()) -> ChatRequest:
        """The run's request: the instructions, ``history`` (a previous response's
        conversation) and ``input``."""
        self._refuse_unsupported()
        sampling = self._sampling()
        response_format = self._response_format()
        messages: list[Message] = (
            [SystemMessage(content=self.instructions)] if self.instructions else []
        )
        messages.extend(history)
        messages.extend(self.input_messages())
        options = self.agentloop
        files = self.attachments()
        try:
            return ChatRequest(
                messages=messages,
                model=None if self.model == DEFAULT_MODEL_ALIAS else self.model,
                **options.chat_fields(),
                sampling=sampling,
                response_format=response_format,
                attachments=files or None,
            )
        except ValidationError as exc:  # the conversation's shape, found by ChatRequest
            message = first_problem(exc)
            raise HttpError(422, "invalid_request", message, param="input") from exc

    def attachments(self) -> list[Attachment]:
        """The ``input_file`` parts of the user's messages, as the run's attachments (a file
        in another role's message is a 422; more than the bound, a 413)."""
        found: list[tuple[FilePart, str]] = []
        for index, item in enumerate(self.input):
            for number, part in enumerate(item.content):
                if not isinstance(part, FilePart):
                    continue
                at = f"input.{index}.content.{number}"
                if item.role != "user":
                    raise invalid(f"{at}.type", "files come in the user's messages only")
                found.append((part, at))
        if found:
            check_count(len(found), found[-1][1])
        return [part.to_attachment(at) for part, at in found]

    def _refuse_unsupported(self) -> None:
        if self.tools:
            raise HttpError(
                422,
                "unsupported_parameter",
                "tools: client-side tools are not supported: the agent runs its own tools; "
                'choose them with "agentloop": {"tools": [...]}',
                param="tools",
            )
        for field, value in (self.model_extra or {}).items():
            if value is not None and value != []:
                raise _unsupported(field)

    def _sampling(self) -> Sampling | None:
        fields = ("temperature", "top_p", "max_output_tokens")
        values = {name: getattr(self, name) for name in fields if getattr(self, name) is not None}
        try:
            return Sampling.model_validate(values) if values else None
        except ValidationError as exc:  # out of range: the field names are the same
            raise _invalid(exc) from exc

    def _response_format(self) -> ResponseFormat | None:
        """``text.format`` (Responses puts a schema's fields beside its type) as the agent's
        response format, its schema checked now so that a bad one is named as this face's."""
        spec = dict(self.text.format or {}) if self.text is not None else {}
        if not spec:
            return None
        kind = spec.pop("type", None)
        try:
            if kind == "json_schema":
                schema = JsonSchemaFormat.model_validate(spec)
                response_format = ResponseFormat(type="json_schema", json_schema=schema)
            elif kind in ("text", "json_object") and not spec:
                response_format = ResponseFormat(type=kind)
            else:
                raise HttpError(
                    422,
                    "invalid_request",
                    'text.format: type "text" or "json_object" alone, or "json_schema" with '
                    "name and schema",
                    param="text.format",
                )
        except ValidationError as exc:
            raise _invalid(exc, "text.format.") from exc
        try:
            OutputFormat.of(response_format)
        except OutputFormatError as exc:
            raise HttpError(
                422, "invalid_request", f"text.format.schema: {exc}", param="text.format.schema"
            ) from exc
        return response_format


PLAN_PARAMS = {**option_params(OpenAIOptions, "agentloop"), "response_format": "text.format"}
