"""An OpenAI-compatible face of the agent: ``POST /v1/chat/completions``.

Existing OpenAI clients and chat UIs can talk to the agent unchanged: the request's
messages become a :class:`ChatRequest`, the run's top-level text becomes the
completion. Tool activity stays out of the text unless the request asks for it
with ``"agentloop": {"show_tools": true}``; agent options (tools, limits) travel in
that same ``agentloop`` object, since OpenAI's own fields have no place for them.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentloop.events import Done, ErrorEvent, Event, TextDelta, ToolCallResult, ToolCallStart
from agentloop.http_api import HttpError
from agentloop.models import ChatRequest, Message, Usage

DEFAULT_MODEL_ALIAS = "agentloop"
"""Model name meaning "the server's default", for clients that insist on sending one."""

_FINISH: dict[str, str] = {"completed": "stop", "error": "stop", "cancelled": "stop"}


class AgentOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tools: list[str] | None = None
    max_iterations: int | None = Field(default=None, ge=1)
    token_budget: int | None = Field(default=None, ge=1)
    show_tools: bool = False


class StreamOptions(BaseModel):
    include_usage: bool = False


class CompletionRequest(BaseModel):
    """The subset of OpenAI's request the agent honours; sampling knobs are accepted, unused."""

    model_config = ConfigDict(extra="ignore")

    model: str = DEFAULT_MODEL_ALIAS
    messages: list[Message] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[dict[str, Any]] | None = Field(
        default=None, description="Client-side tools are not supported (rejected)."
    )
    agentloop: AgentOptions = Field(default_factory=AgentOptions)

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
            )
        except ValueError as exc:  # conversation-shape problems found by ChatRequest
            raise HttpError(422, "invalid_request", str(exc), param="messages") from exc


def _usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }


def _tool_line(event: ToolCallStart | ToolCallResult) -> str:
    if isinstance(event, ToolCallStart):
        return f"\n\n> calling `{event.name}` {event.arguments}\n\n"
    status = "ok" if event.ok else "failed"
    return f"> `{event.name}` {status} in {event.duration_ms:.0f} ms\n\n"


class CompletionStream:
    """Turns agent events into ``chat.completion.chunk`` SSE lines."""

    def __init__(self, request: CompletionRequest, completion_id: str, model: str) -> None:
        self.request = request
        self.id = completion_id
        self.created = int(time.time())
        self.model = model

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(body)}\n\n".encode()

    async def frames(self, events: AsyncIterator[Event]) -> AsyncIterator[bytes]:
        yield self._chunk({"role": "assistant", "content": ""})
        show_tools = self.request.agentloop.show_tools
        async for event in events:
            if event.depth != 0:
                continue
            if isinstance(event, TextDelta):
                yield self._chunk({"content": event.text})
            elif show_tools and isinstance(event, ToolCallStart | ToolCallResult):
                yield self._chunk({"content": _tool_line(event)})
            elif isinstance(event, ErrorEvent):
                error = {"error": {"message": event.message, "type": event.code, "param": None}}
                yield f"data: {json.dumps(error)}\n\n".encode()
            elif isinstance(event, Done):
                yield self._chunk({}, _FINISH.get(event.stop_reason, "length"))
                options = self.request.stream_options
                if options is not None and options.include_usage:
                    usage = {
                        "id": self.id,
                        "object": "chat.completion.chunk",
                        "created": self.created,
                        "model": self.model,
                        "choices": [],
                        "usage": _usage_json(event.usage),
                    }
                    yield f"data: {json.dumps(usage)}\n\n".encode()
        yield b"data: [DONE]\n\n"


def completion_body(
    done: Done, completion_id: str, model: str, tool_lines: list[str]
) -> dict[str, Any]:
    """The non-streamed ``chat.completion`` for a finished run."""
    finish: Literal["stop", "length"] = "stop" if done.stop_reason in _FINISH else "length"
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(tool_lines) + done.text},
                "finish_reason": finish,
            }
        ],
        "usage": _usage_json(done.usage),
    }


_ERROR_STATUS = {"configuration": 503, "provider": 502, "invalid_request": 422}


async def collect_completion(
    request: CompletionRequest, events: AsyncIterator[Event], completion_id: str, model: str
) -> dict[str, Any]:
    """Run to the end and answer with one ``chat.completion`` object.

    A run that failed outright (no model, provider down) is an HTTP error here, since
    a non-streamed client has no other way to tell it from an answer.
    """
    tool_lines: list[str] = []
    error: ErrorEvent | None = None
    done: Done | None = None
    async for event in events:
        if event.depth != 0:
            continue
        if request.agentloop.show_tools and isinstance(event, ToolCallStart | ToolCallResult):
            tool_lines.append(_tool_line(event))
        elif isinstance(event, ErrorEvent):
            error = error or event
        elif isinstance(event, Done):
            done = event
    assert done is not None, "handle_chat always ends with done"
    if error is not None and done.stop_reason == "error" and done.iterations <= 1:
        status = _ERROR_STATUS.get(error.code, 500)
        raise HttpError(status, f"{error.code}_error", error.message)
    return completion_body(done, completion_id, model, tool_lines)
