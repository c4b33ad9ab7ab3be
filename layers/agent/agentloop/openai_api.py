"""An OpenAI-compatible face of the agent: ``POST /v1/chat/completions``.

Existing OpenAI clients and chat UIs can talk to the agent unchanged: the request's
messages become a :class:`ChatRequest`, the run's top-level text becomes the
completion. Tool activity stays out of the text unless the request asks for it
with ``"agentloop": {"show_tools": true}``; agent options (tools, limits) travel in
that same ``agentloop`` object, since OpenAI's own fields have no place for them.

Under failure the face speaks OpenAI's language too (docs/architecture.md, "The OpenAI
face under failure"): a run without an answer is an error object, never a ``"stop"``; a
run cut by a limit finishes with ``"length"``; errors tell SDKs not to retry what the
server has already retried; and sent text, which cannot be taken back, is only ever
continued, never contradicted.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentloop.events import (
    Done,
    ErrorCode,
    ErrorEvent,
    Event,
    TextDelta,
    TextReset,
    ToolCallResult,
    ToolCallStart,
    TurnStart,
)
from agentloop.http_api import HttpError
from agentloop.limits import CancelToken
from agentloop.models import ChatRequest, Message, ResponseFormat, Sampling, StopReason, Usage
from agentloop.sent_text import SentText

DEFAULT_MODEL_ALIAS = "agentloop"
"""Model name meaning "the server's default", for clients that insist on sending one."""

FinishReason = Literal["stop", "length"]

FINISH_REASONS: dict[StopReason, FinishReason] = {
    "completed": "stop",
    "max_iterations": "length",
    "budget": "length",
    "deadline": "length",
}
"""Stop reasons that end with an answer. A limit cut the answer short, which is what
OpenAI's "length" says; "error" and "cancelled" have no answer and end in an error object."""

_RUN_ERROR_STATUS: dict[ErrorCode, int] = {
    "configuration": 503,
    "provider": 502,
    "invalid_request": 422,
    "invalid_output": 502,
    "internal": 500,
}

NO_CLIENT_RETRY = {"x-should-retry": "false"}
"""Honoured by the openai SDK (and other Stainless-generated SDKs) before its own retry rules."""

_DONE_FRAME = b"data: [DONE]\n\n"


def no_client_retry(error: HttpError) -> HttpError:
    """Mark ``error`` as not worth a client retry; returns it for chaining."""
    error.headers.update(NO_CLIENT_RETRY)
    return error


def refusal(error: HttpError) -> HttpError:
    """A request refused before its run started, with the face's retry policy applied.

    Client errors (4xx) would be refused again, so clients are told not to retry, except
    408 (the body came too slowly), which a retry can cure. A 5xx here (the token store
    could not be read) made no model call, so the SDK's retries multiply nothing and may
    outlast a passing failure: they are left alone.
    """
    if error.status == 408 or error.status >= 500:
        return error
    return no_client_retry(error)


def event_error(event: ErrorEvent) -> HttpError:
    """The error object for a run's ``error`` event; never retried by clients, because
    the server already retried the provider (or a retry cannot help)."""
    status = _RUN_ERROR_STATUS.get(event.code, 500)
    return no_client_retry(HttpError(status, f"{event.code}_error", event.message))


def run_error(done: Done, error: ErrorEvent | None) -> HttpError:
    """The error answer for a run that ended without an answer (see :data:`FINISH_REASONS`)."""
    if done.stop_reason == "cancelled":  # only a client that left cancels: no one reads this
        return no_client_retry(
            HttpError(499, "cancelled", "the run was cancelled before it finished")
        )
    if error is not None:
        return event_error(error)
    return no_client_retry(HttpError(500, "internal_error", "the run ended without an answer"))


def stream_cut_error() -> HttpError:
    """For a stream that already sent text the retried answer does not continue."""
    return no_client_retry(
        HttpError(
            502,
            "stream_cut",
            "the provider's stream was cut after part of the answer had been sent, and the "
            "retried answer does not continue it; a retry, or a non-streamed request, will "
            "get the whole answer",
        )
    )


class AgentOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tools: list[str] | None = None
    max_iterations: int | None = Field(default=None, ge=1)
    token_budget: int | None = Field(default=None, ge=1)
    show_tools: bool = False


class StreamOptions(BaseModel):
    include_usage: bool = False


class CompletionRequest(BaseModel):
    """OpenAI's request as the agent honours it: every field either reaches the model, is
    harmless and accepted (``user``, ``metadata``, ``store``, defaults such as ``n: 1``), or
    is refused with a 422 naming it. Unknown fields are refused too, as OpenAI does."""

    model_config = ConfigDict(extra="forbid")

    model: str = DEFAULT_MODEL_ALIAS
    messages: list[Message] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[dict[str, Any]] | None = Field(
        default=None, description="Client-side tools are not supported (rejected)."
    )
    agentloop: AgentOptions = Field(default_factory=AgentOptions)
    # Reach every model call of the run:
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    response_format: ResponseFormat | None = None
    # Accepted: one answer per request, no client tools, nothing stored.
    n: Literal[1] | None = Field(
        default=None, description="One choice per request: the agent's answer."
    )
    user: str | None = Field(default=None, max_length=256)
    metadata: dict[str, str] | None = None
    store: Literal[False] | None = Field(default=None, description="Nothing is stored.")
    parallel_tool_calls: bool | None = Field(
        default=None, description="Only about client tools, which are refused."
    )
    presence_penalty: Literal[0] | None = Field(default=None, description="Not supported.")
    frequency_penalty: Literal[0] | None = Field(default=None, description="Not supported.")
    logprobs: Literal[False] | None = Field(default=None, description="Not supported.")

    def to_chat_request(self) -> ChatRequest:
        if self.tools:
            raise HttpError(
                422,
                "unsupported_parameter",
                "client-side tools are not supported: the agent runs its own tools; choose "
                'them with "agentloop": {"tools": [...]}',
                param="tools",
            )
        options = self.agentloop
        try:
            return ChatRequest(
                messages=self.messages,
                model=None if self.model == DEFAULT_MODEL_ALIAS else self.model,
                tools=options.tools,
                max_iterations=options.max_iterations,
                token_budget=options.token_budget,
                sampling=self._sampling(),
                response_format=self.response_format,
            )
        except ValidationError as exc:  # a sampling value out of range
            first = exc.errors(include_url=False)[0]
            field = self._sampling_field(str(first["loc"][0]) if first["loc"] else "")
            raise HttpError(
                422, "invalid_request", f"{field}: {first['msg']}", param=field
            ) from exc
        except ValueError as exc:  # conversation-shape problems found by ChatRequest
            raise HttpError(422, "invalid_request", str(exc), param="messages") from exc

    def _sampling(self) -> Sampling | None:
        if (
            self.max_tokens is not None
            and self.max_completion_tokens is not None
            and self.max_tokens != self.max_completion_tokens
        ):
            raise HttpError(
                422,
                "invalid_request",
                "max_tokens and max_completion_tokens disagree; send one of them",
                param="max_tokens",
            )
        values = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_output_tokens": self.max_completion_tokens or self.max_tokens,
            "stop": [self.stop] if isinstance(self.stop, str) else self.stop,
            "seed": self.seed,
        }
        set_values = {name: value for name, value in values.items() if value is not None}
        return Sampling.model_validate(set_values) if set_values else None

    def _sampling_field(self, name: str) -> str:
        """The request field a ``Sampling`` field came from (for the 422's ``param``)."""
        if name != "max_output_tokens":
            return name or "sampling"
        return "max_completion_tokens" if self.max_completion_tokens is not None else "max_tokens"


def _usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }


def tool_line(event: ToolCallStart | ToolCallResult) -> str:
    if isinstance(event, ToolCallStart):
        return f"\n\n> calling `{event.name}` {event.arguments}\n\n"
    status = "ok" if event.ok else "failed"
    return f"> `{event.name}` {status} in {event.duration_ms:.0f} ms\n\n"


class CompletionStream:
    """Turns agent events into ``chat.completion.chunk`` SSE lines.

    A run that ends without an answer ends the stream with one error object, the same
    one the non-streamed face answers with (the openai SDK raises ``APIError`` on it),
    and no ``finish_reason``. Whatever the run sends after that is drained unsent, so it
    still ends with ``done`` and is recorded. ``cancel`` stops a run whose answer can no
    longer reach the client correctly (a cut stream that was not repeated).
    """

    def __init__(
        self,
        request: CompletionRequest,
        completion_id: str,
        model: str,
        cancel: CancelToken | None = None,
    ) -> None:
        self.request = request
        self.id = completion_id
        self.created = int(time.time())
        self.model = model
        self.cancel = cancel
        self._sent = SentText()
        self._ended = False

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(body)}\n\n".encode()

    def _fail(self, error: HttpError) -> list[bytes]:
        self._ended = True
        return [f"data: {json.dumps(error.body())}\n\n".encode(), _DONE_FRAME]

    def _cut(self) -> list[bytes]:
        if self.cancel is not None:  # its answer can no longer reach the client correctly
            self.cancel.cancel()
        return self._fail(stream_cut_error())

    def _translate(self, event: Event) -> list[bytes]:
        """The frames for one top-level event."""
        if isinstance(event, TextDelta):
            text = self._sent.add(event.text)
            if text is None:
                return self._cut()
            return [self._chunk({"content": text})] if text else []
        if isinstance(event, TextReset):
            self._sent.reset()
            return []
        if isinstance(event, ErrorEvent):
            return self._fail(event_error(event))
        if self._sent.replaying and isinstance(
            event, TurnStart | ToolCallStart | ToolCallResult | Done
        ):
            return self._cut()  # the retried turn ended short of what the client shows
        if isinstance(event, TurnStart):
            self._sent.mark()
        elif isinstance(event, ToolCallStart | ToolCallResult):
            if isinstance(event, ToolCallResult):
                self._sent.mark()
            if self.request.agentloop.show_tools:
                return [self._chunk({"content": tool_line(event)})]
        elif isinstance(event, Done):
            return self._finish(event)
        return []

    def _finish(self, done: Done) -> list[bytes]:
        finish = FINISH_REASONS.get(done.stop_reason)
        if finish is None:  # "error" after no error event, or "cancelled"
            return self._fail(run_error(done, None))
        frames = [self._chunk({}, finish)]
        options = self.request.stream_options
        if options is not None and options.include_usage:
            usage = {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": _usage_json(done.usage),
            }
            frames.append(f"data: {json.dumps(usage)}\n\n".encode())
        return frames

    async def frames(self, events: AsyncIterator[Event]) -> AsyncIterator[bytes]:
        yield self._chunk({"role": "assistant", "content": ""})
        async for event in events:
            if self._ended or event.depth != 0:
                continue
            for frame in self._translate(event):
                yield frame
        if not self._ended:
            yield _DONE_FRAME


def completion_body(
    done: Done, completion_id: str, model: str, tool_lines: list[str]
) -> dict[str, Any]:
    """The non-streamed ``chat.completion`` for a run that ended with an answer."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(tool_lines) + done.text},
                "finish_reason": FINISH_REASONS[done.stop_reason],
            }
        ],
        "usage": _usage_json(done.usage),
    }


async def collect_completion(
    request: CompletionRequest, events: AsyncIterator[Event], completion_id: str, model: str
) -> dict[str, Any]:
    """Run to the end and answer with one ``chat.completion`` object.

    The answer is ``done.text``, which already leaves out text a ``text_reset`` voided.
    A run without an answer (``error``, ``cancelled``) raises :class:`HttpError`: a
    non-streamed client has no other way to tell an apology from an answer.
    """
    tool_lines: list[str] = []
    error: ErrorEvent | None = None
    done: Done | None = None
    async for event in events:
        if event.depth != 0:
            continue
        if request.agentloop.show_tools and isinstance(event, ToolCallStart | ToolCallResult):
            tool_lines.append(tool_line(event))
        elif isinstance(event, ErrorEvent):
            error = error or event
        elif isinstance(event, Done):
            done = event
    assert done is not None, "handle_chat always ends with done"
    if done.stop_reason not in FINISH_REASONS:
        raise run_error(done, error)
    return completion_body(done, completion_id, model, tool_lines)
