"""The provider protocol the loop talks to, and the provider-neutral error type."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agentloop.models import ToolCall, Usage

TextSink = Callable[[str], Awaitable[None]]

ErrorKind = Literal[
    "rate_limit",
    "server",
    "timeout",
    "connection",
    "auth",
    "not_found",
    "bad_request",
    "context_length",
    "tool_use_failed",
    "stream_cut",
]


@dataclass(frozen=True)
class ModelCall:
    """One chat-completions request, already in wire form."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: Literal["auto", "none"] | None = None
    max_tokens: int | None = None
    timeout: float = 60.0
    fields: Mapping[str, Any] = field(default_factory=dict)
    """More request fields as the client asked for them: sampling, ``response_format``."""


@dataclass(frozen=True)
class ModelTurn:
    """What one model call produced, assembled from the stream."""

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    headers: dict[str, str] = field(default_factory=dict)
    """The response's rate-limit headers (``x-ratelimit-*``), lower-cased."""
    call_problems: dict[str, str] = field(default_factory=dict)
    """Tool calls (by id) that must not run, and why: the model wrote them wrongly."""


class ProviderError(Exception):
    """A failed model call, classified so the loop never needs to import an SDK."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        partial_text: str = "",
        headers: dict[str, str] | None = None,
        failed_generation: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.partial_text = partial_text
        self.headers = headers or {}
        self.failed_generation = failed_generation

    @property
    def retryable(self) -> bool:
        return self.kind in {"rate_limit", "server", "timeout", "connection", "stream_cut"}


class ChatModel(Protocol):
    """A streaming chat-completions model. ``spec`` is its ``provider:model`` string."""

    @property
    def spec(self) -> str: ...

    async def complete(self, call: ModelCall, on_text: TextSink) -> ModelTurn:
        """Stream one completion, passing text deltas to ``on_text`` as they arrive."""
        ...
