"""OpenAI's Responses API, its text-conversation part: ``POST /v1/responses``.

A thin translator over the run's one event stream, so that the openai SDK's
``client.responses.create`` and the AI SDK's default OpenAI provider talk to the agent
unchanged. ``instructions`` and ``input`` (a string, or message items with text parts;
an earlier response's ``output`` can be sent back as input) become the conversation;
``temperature``, ``top_p``, ``max_output_tokens`` and ``text.format`` become the run's
sampling and response format; agent options travel in an ``agentloop`` object, as on the
OpenAI face. Nothing is stored, so ``previous_response_id`` is refused: the client sends
the whole conversation. Other fields are refused with a 422 naming them.

The answer is one assistant ``message`` item with one ``output_text`` part. Streamed,
top-level events become (sub-agents show only in the usage, which counts them)::

    (start)             response.created, response.in_progress,
                        response.output_item.added, response.content_part.added
    text_delta          response.output_text.delta (sent text is never taken back: a
                        text_reset is honoured as the OpenAI face does, see SentText)
    tool_call_*         nothing; a line of text with "agentloop": {"show_tools": true}
    done, completed     response.output_text.done, response.content_part.done,
                        response.output_item.done, response.completed
    done, a limit       the same, ending in response.incomplete (status "incomplete",
                        incomplete_details.reason "max_output_tokens", the protocol's
                        "cut short", as the OpenAI face says "length")
    error, or a done    error (its nested "error" object makes the openai SDK raise),
    without an answer   then response.failed

Every event carries ``sequence_number``. Not streamed, a run without an answer is an
HTTP error, as on the OpenAI face.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from agentloop.events import Event, UsageReport
from agentloop.faces.openai.errors import run_error
from agentloop.faces.openai.request import DEFAULT_MODEL_ALIAS, OpenAIOptions
from agentloop.faces.openai.stream import OpenAIStream, collect_run
from agentloop.faces.options import option_params
from agentloop.faces.outcome import Ending, Outcome
from agentloop.http_api import HttpError
from agentloop.limits import CancelToken
from agentloop.models import (
    AssistantMessage,
    ChatRequest,
    JsonSchemaFormat,
    Message,
    ResponseFormat,
    Sampling,
    SystemMessage,
    Usage,
    UserMessage,
)
from agentloop.output_format import OutputFormat, OutputFormatError

ResponseStatus = Literal["completed", "incomplete", "failed", "in_progress"]

STATUSES: dict[Outcome, ResponseStatus] = {
    Outcome.ANSWERED: "completed",
    Outcome.CUT_SHORT: "incomplete",
}
"""Outcomes a response ends with: a limit cut the answer short, which Responses says as
"incomplete" (``max_output_tokens``). The others have no answer: ``response.failed``, or an
HTTP error when not streamed (``faces.openai.errors.run_error``)."""

_NO_STORE = "this server stores no responses: send the whole conversation in input"
_UNSUPPORTED: dict[str, str] = {
    "previous_response_id": _NO_STORE,
    "conversation": _NO_STORE,
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


def _only_text(value: Any) -> Any:
    """Refuse images, files and audio by name, before pydantic lists every field it missed."""
    kind = value.get("type") if isinstance(value, dict) else None
    if kind in ("input_text", "output_text"):
        return value
    raise PydanticCustomError(
        "unsupported_content",
        "only text parts (input_text, output_text) are supported, got {kind}",
        {"kind": repr(kind) if isinstance(kind, str) else "no type"},
    )


class InputMessage(BaseModel):
    """One message item of ``input``: an easy message, or an earlier response's output item."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: list[Annotated[TextPart, BeforeValidator(_only_text)]]
    id: str | None = Field(default=None, max_length=256)
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    phase: Literal["commentary", "final_answer"] | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _parts(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [{"type": "input_text", "text": value}]
        return value

    def to_message(self) -> Message:
        text = "".join(part.text for part in self.content)
        if self.role == "user":
            return UserMessage(content=text)
        if self.role == "assistant":
            return AssistantMessage(content=text)
        return SystemMessage(content=text)  # system, and developer (the same thing here)


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
    # Accepted and ignored: nothing is stored, no client tools run here.
    metadata: dict[str, str] | None = Field(default=None, max_length=16)
    store: Literal[False] | None = Field(default=None, description="Nothing is stored.")
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

    def to_chat_request(self) -> ChatRequest:
        self._refuse_unsupported()
        sampling = self._sampling()
        response_format = self._response_format()
        messages: list[Message] = (
            [SystemMessage(content=self.instructions)] if self.instructions else []
        )
        messages.extend(item.to_message() for item in self.input)
        options = self.agentloop
        try:
            return ChatRequest(
                messages=messages,
                model=None if self.model == DEFAULT_MODEL_ALIAS else self.model,
                **options.chat_fields(),
                sampling=sampling,
                response_format=response_format,
            )
        except ValidationError as exc:  # the conversation's shape, found by ChatRequest
            message = str(exc.errors(include_url=False)[0]["msg"]).removeprefix("Value error, ")
            raise HttpError(422, "invalid_request", message, param="input") from exc

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


# -- the response object ---------------------------------------------------------------------


def usage_json(usage: Usage) -> dict[str, Any]:
    """Responses' usage; the providers report no cache writes or reasoning tokens."""
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.total_tokens,
    }


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _message(item_id: str, text: str | None, status: str) -> dict[str, Any]:
    content = [] if text is None else [_text_part(text)]
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": status,
        "content": content,
    }


def _error_json(error: HttpError) -> dict[str, Any]:
    """An error as Responses streams it: ``code`` is a string there, so the HTTP status
    the same failure gets when not streamed is sent as one."""
    return {
        "type": error.type,
        "code": str(error.status),
        "message": error.message,
        "param": error.param,
    }


class _Response:
    """What every ``response`` object of one request shares."""

    def __init__(self, request: ResponsesRequest, response_id: str, model: str) -> None:
        self.request = request
        self.id = response_id
        self.model = model
        self.created_at = int(time.time())
        self.item_id = "msg_" + response_id.removeprefix("resp_")

    def body(
        self,
        status: ResponseStatus,
        output: list[dict[str, Any]],
        usage: Usage | None = None,
        error: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        # A limit cut the answer short: the protocol's one reason for that (its clients map
        # it to "length", as the OpenAI face reports a limit); done.stop_reason says which.
        incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
        request = self.request
        text_format = request.text.format if request.text is not None else None
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "completed_at": int(time.time()) if status == "completed" else None,
            "error": error,
            "incomplete_details": incomplete,
            "instructions": request.instructions,
            "metadata": request.metadata or {},
            "model": self.model,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "text": {"format": text_format or {"type": "text"}},
            "temperature": request.temperature,
            "top_p": request.top_p,
            "max_output_tokens": request.max_output_tokens,
            "previous_response_id": None,
            "store": False,
            "usage": None if usage is None else usage_json(usage),
        }

    def answered(self, ending: Ending, text: str) -> dict[str, Any]:
        """The final object of a run that ended with an answer (cut short by a limit or not);
        an :class:`HttpError` for a run without one."""
        status = STATUSES.get(ending.outcome)
        if status is None:
            raise run_error(ending)
        output = [_message(self.item_id, text, status)]
        return self.body(status, output, ending.done.usage)


# -- streamed ----------------------------------------------------------------------------------


class ResponseStream(OpenAIStream):
    """Turns agent events into Responses' streaming events.

    The message item is opened at once, so a failure is always reported after output has
    begun (the AI SDK then reports it in the stream instead of retrying the request).
    A run without an answer ends the stream with ``error`` and ``response.failed``.
    ``cancel`` stops a run whose answer can no longer reach the client correctly.
    """

    def __init__(
        self,
        request: ResponsesRequest,
        response_id: str,
        model: str,
        cancel: CancelToken | None = None,
    ) -> None:
        super().__init__(cancel, request.agentloop.show_tools)
        self.request = request
        self.response = _Response(request, response_id, model)
        self._streamed: list[str] = []
        """The text sent so far (what a failure's incomplete message holds)."""
        self._usage: Usage | None = None
        self._sequence = 0

    def _event(self, type_: str, **fields: Any) -> bytes:
        body = {"type": type_, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return f"event: {type_}\ndata: {json.dumps(body)}\n\n".encode()

    def _where(self) -> dict[str, Any]:
        return {"item_id": self.response.item_id, "output_index": 0, "content_index": 0}

    def send_text(self, text: str) -> list[bytes]:
        self._streamed.append(text)
        return [self._event("response.output_text.delta", **self._where(), delta=text, logprobs=[])]

    def on_usage(self, event: UsageReport) -> list[bytes]:
        self._usage = event.total  # the request's usage so far, for a failure
        return []

    def on_open(self) -> list[bytes]:
        response = self.response
        in_progress = response.body("in_progress", [])
        return [
            self._event("response.created", response=in_progress),
            self._event("response.in_progress", response=in_progress),
            self._event(
                "response.output_item.added",
                output_index=0,
                item=_message(response.item_id, None, "in_progress"),
            ),
            self._event(
                "response.content_part.added",
                **self._where(),
                part=_text_part(""),
            ),
        ]

    def fail(self, error: HttpError) -> list[bytes]:
        self.ended = True
        detail = _error_json(error)
        output = [_message(self.response.item_id, "".join(self._streamed), "incomplete")]
        failed = self.response.body("failed", output, self._usage, error=detail)
        return [
            self._event(
                "error",
                code=detail["code"],
                message=detail["message"],
                param=detail["param"],
                error=detail,
            ),
            self._event("response.failed", response=failed),
        ]

    def on_finish(self, ending: Ending) -> list[bytes]:
        self._usage = ending.done.usage
        if not ending.outcome.has_answer:
            return self.fail(run_error(ending))
        self.ended = True
        text = "".join(self._streamed)
        final = self.response.answered(ending, text)
        item = final["output"][0]
        ending_type = (
            "response.completed" if final["status"] == "completed" else "response.incomplete"
        )
        return [
            self._event("response.output_text.done", **self._where(), text=text, logprobs=[]),
            self._event("response.content_part.done", **self._where(), part=_text_part(text)),
            self._event("response.output_item.done", output_index=0, item=item),
            self._event(ending_type, response=final),
        ]


# -- not streamed ------------------------------------------------------------------------------


async def collect_response(
    request: ResponsesRequest, events: AsyncIterator[Event], response_id: str, model: str
) -> dict[str, Any]:
    """Run to the end and answer with one ``response`` object.

    Its text is ``done.text``, which already leaves out text a ``text_reset`` voided. A run
    without an answer (``error``, ``cancelled``) raises :class:`HttpError`, as
    ``faces.openai.collect_completion`` does.
    """
    ending, tool_lines = await collect_run(events, request.agentloop.show_tools)
    text = "".join(tool_lines) + ending.done.text
    return _Response(request, response_id, model).answered(ending, text)
