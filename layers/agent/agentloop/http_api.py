"""Framework-free HTTP request handling: body limits, JSON, validation, precise errors.

Every error names what is wrong (and, for schema errors, the field) in the OpenAI
error shape ``{"error": {"message", "type", "param", "code"}}``, which both the
native ``/chat`` endpoint and the OpenAI-compatible one use, so clients need one
error parser.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from agentloop.chat import check_model_allowed
from agentloop.config import AgentConfig, ConfigurationError
from agentloop.limits import Deadline
from agentloop.models import ChatRequest
from agentloop.tools.registry import ToolRegistry, UnknownToolError

M = TypeVar("M", bound=BaseModel)


class HttpError(Exception):
    """An error answer: HTTP status, a machine-readable type, a message for people."""

    def __init__(
        self,
        status: int,
        type_: str,
        message: str,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type_
        self.message = message
        self.param = param
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.status,
            }
        }


@dataclass(frozen=True)
class RequestLimits:
    """Size limits checked before anything else reads the request."""

    max_body_bytes: int = 1_000_000
    max_messages: int = 200
    max_message_chars: int = 100_000


def read_json(body: bytes, content_type: str | None, limits: RequestLimits) -> Any:
    """The body as JSON, or 415 / 413 / 400 saying why not."""
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise HttpError(
            415,
            "unsupported_media_type",
            f"Content-Type must be application/json, got {media_type or 'none'!r}",
        )
    if len(body) > limits.max_body_bytes:
        raise HttpError(
            413,
            "request_too_large",
            f"request body is {len(body)} bytes; the limit is {limits.max_body_bytes}",
        )
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        detail = (
            f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            if isinstance(exc, json.JSONDecodeError)
            else "body is not UTF-8"
        )
        raise HttpError(400, "invalid_json", f"request body is not valid JSON: {detail}") from exc


def check_message_limits(raw: Any, limits: RequestLimits) -> None:
    """413 for too many or too large messages, before pydantic spends time on them."""
    if not isinstance(raw, dict) or not isinstance(raw.get("messages"), list):
        return  # schema validation reports the shape problem with its field name
    messages: list[Any] = raw["messages"]
    if len(messages) > limits.max_messages:
        raise HttpError(
            413,
            "too_many_messages",
            f"{len(messages)} messages; the limit is {limits.max_messages}",
            param="messages",
        )
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        size = len(content) if isinstance(content, str) else len(json.dumps(content or ""))
        if size > limits.max_message_chars:
            raise HttpError(
                413,
                "message_too_large",
                f"messages[{index}] has {size} characters; the limit is {limits.max_message_chars}",
                param=f"messages.{index}.content",
            )


def validate_model(model: type[M], raw: Any) -> M:
    """``model.model_validate(raw)`` with a 422 naming the first failing field."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = errors[0]
        field = ".".join(str(part) for part in first["loc"])
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        where = f"{field}: " if field else ""
        raise HttpError(
            422, "invalid_request", f"{where}{first['msg']}{more}", param=field or None
        ) from exc


def check_model_and_tools(request: ChatRequest, config: AgentConfig, tools: ToolRegistry) -> None:
    """422 for a model or tool the server will not run, before any streaming starts."""
    try:
        check_model_allowed(request.model or config.default_model, config)
    except ConfigurationError as exc:
        raise HttpError(422, "invalid_model", str(exc), param="model") from exc
    try:
        tools.select(request.tools if request.tools is not None else config.default_tools)
    except UnknownToolError as exc:
        raise HttpError(422, "invalid_tools", str(exc), param="tools") from exc


def parse_chat_request(
    body: bytes,
    content_type: str | None,
    *,
    config: AgentConfig,
    tools: ToolRegistry,
    limits: RequestLimits,
) -> ChatRequest:
    """A ``POST /chat`` body to a validated :class:`ChatRequest`, or an :class:`HttpError`."""
    raw = read_json(body, content_type, limits)
    check_message_limits(raw, limits)
    request = validate_model(ChatRequest, raw)
    check_model_and_tools(request, config, tools)
    return request


@dataclass(frozen=True)
class InvocationInfo:
    """What Lambda Web Adapter tells the app about the invocation (absent locally)."""

    request_id: str
    deadline: Deadline


def invocation_info(headers: Mapping[str, str]) -> InvocationInfo:
    """Read ``x-amzn-lambda-context`` (request id, deadline in epoch ms) when present.

    Lambda Web Adapter forwards the invocation's context as that JSON header; its
    ``deadline`` is when Lambda stops the function. Without it (local runs) there is
    no deadline and the request id is made up.
    """
    raw = headers.get("x-amzn-lambda-context")
    context: dict[str, Any] = {}
    if raw:
        try:
            parsed = json.loads(raw)
            context = parsed if isinstance(parsed, dict) else {}
        except json.JSONDecodeError:
            context = {}
    request_id = str(context.get("request_id") or context.get("aws_request_id") or "")
    deadline_ms = context.get("deadline") or context.get("deadline_ms")
    deadline = Deadline()
    if isinstance(deadline_ms, int | float) and deadline_ms > 0:
        deadline = Deadline.after(deadline_ms / 1000 - time.time())
    return InvocationInfo(request_id=request_id or uuid.uuid4().hex, deadline=deadline)
