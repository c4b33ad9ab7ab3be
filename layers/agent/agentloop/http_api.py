"""Framework-free HTTP request handling: body limits, JSON, validation, precise errors.

Every error names what is wrong (and, for schema errors, the field) in the OpenAI
error shape ``{"error": {"message", "type", "param", "code"}}``, which both the
native ``/chat`` endpoint and the OpenAI-compatible one use, so clients need one
error parser.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, NoReturn, TypeVar

from pydantic import BaseModel, ValidationError

from agentloop.config import AgentConfig, ConfigurationError
from agentloop.limits import Deadline
from agentloop.models import ChatRequest
from agentloop.plan import PlanError, RunPlan, plan_run
from agentloop.signing import Signer
from agentloop.tools.registry import ToolRegistry

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
    """Bounds checked before anything else reads the request (see docs/architecture.md)."""

    max_body_bytes: int = 6_000_000
    """Lambda's own bound on a request; room for a few MB of attachments in base64."""
    max_messages: int = 200
    max_message_chars: int = 100_000
    max_json_depth: int = 64
    """Arrays and objects nested deeper than this are refused (400) before parsing."""
    max_number_chars: int = 100
    """Longest number literal accepted: far below Python's 4300-digit int limit."""
    body_timeout_s: float = 10.0
    """Time to receive the whole body: a stalled client gets 408 and the connection closes."""
    max_discard_bytes: int = 64_000_000
    """After a 413 the rest of the body is read and thrown away, up to this many bytes, so a
    client that sends everything before reading its answer can read it (a lingering close);
    a body declared larger is not waited for: its connection closes with the answer."""
    linger_s: float = 5.0
    """How long that reading may go on in all: a client that keeps sending is cut off."""
    linger_idle_s: float = 1.0
    """How long it waits for the next bytes: a client that has stopped sending (it declared
    more than it sends, or reads its answer first) loses the connection this soon."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RequestLimits:
        """The defaults, with ``AGENTLOOP_BODY_TIMEOUT_S`` when it is set."""
        env = os.environ if environ is None else environ
        raw = env.get("AGENTLOOP_BODY_TIMEOUT_S", "").strip()
        if not raw:
            return cls()
        try:
            timeout = float(raw)
        except ValueError:
            timeout = math.nan
        if not (math.isfinite(timeout) and timeout > 0):
            raise ConfigurationError(
                f"AGENTLOOP_BODY_TIMEOUT_S must be a positive number of seconds, got {raw!r}"
            )
        return cls(body_timeout_s=timeout)


def read_json(body: bytes, content_type: str | None, limits: RequestLimits) -> Any:
    """The body as JSON, or 415 / 413 / 400 saying why not: the one place bodies are parsed."""
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
    return parse_json(body, limits)


# A JSON string, escapes included (possessive: linear even on an unterminated string).
_JSON_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^][{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
# A \uXXXX escape in the surrogate range: the only way a lone surrogate gets past UTF-8 decoding.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Refused(Exception):
    """Raised by the parser's hooks; becomes a 400."""

    def __init__(self, type_: str, message: str) -> None:
        super().__init__(message)
        self.type = type_
        self.message = message


def parse_json(body: bytes, limits: RequestLimits) -> Any:
    """Parse untrusted JSON within bounds, or raise a 400 naming the problem.

    Python's parser alone would answer a deep body with RecursionError, a long integer with
    ValueError (its 4300-digit limit), accept NaN and Infinity, and pass lone surrogates
    (``"\\ud800"``) on to pydantic and the provider. So: strict UTF-8, nesting depth
    checked by an iterative scan before parsing, number literals checked as they are parsed,
    strings and keys checked for surrogates afterwards.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HttpError(
            400, "invalid_json", f"request body is not UTF-8 (invalid byte at offset {exc.start})"
        ) from exc
    try:
        _check_depth(text, limits.max_json_depth)
        value = json.loads(
            text,
            parse_int=lambda literal: _parse_int(literal, limits.max_number_chars),
            parse_float=lambda literal: _parse_float(literal, limits.max_number_chars),
            parse_constant=_refuse_constant,
        )
        if _SURROGATE_ESCAPE.search(text):
            _check_strings(value)
    except _Refused as exc:
        raise HttpError(400, exc.type, exc.message) from exc
    except RecursionError as exc:  # not reached when the scan works; never a 500 if it does not
        raise HttpError(400, "json_too_deep", "request body is nested too deeply") from exc
    except json.JSONDecodeError as exc:
        raise HttpError(
            400,
            "invalid_json",
            f"request body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
        ) from exc
    return value


def _check_depth(text: str, max_depth: int) -> None:
    """Refuse nesting deeper than ``max_depth``, without recursion (so ``"[" * 50000`` is fine).

    Strings are removed first so brackets inside them do not count, then the depth is the
    highest running sum of the brackets left. On malformed input the count may be off; the
    parser reports such input anyway.
    """
    brackets = _NOT_BRACKETS.sub("", _JSON_STRING.sub("", text))
    if max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0) > max_depth:
        raise _Refused(
            "json_too_deep", f"request body nests arrays or objects deeper than {max_depth} levels"
        )


def _check_number_size(literal: str, max_chars: int) -> None:
    if len(literal) > max_chars:
        raise _Refused(
            "number_too_large",
            f"request body has a number of {len(literal)} characters; the limit is {max_chars}",
        )


def _parse_int(literal: str, max_chars: int) -> int:
    _check_number_size(literal, max_chars)
    return int(literal)


def _parse_float(literal: str, max_chars: int) -> float:
    _check_number_size(literal, max_chars)
    value = float(literal)
    if not math.isfinite(value):
        raise _Refused(
            "number_too_large", f"request body has a number out of a float's range: {literal}"
        )
    return value


def _refuse_constant(name: str) -> NoReturn:
    raise _Refused("invalid_json", f"request body is not valid JSON: {name} is not a JSON value")


def _check_strings(value: Any) -> None:
    """Refuse lone surrogates in any string or key: they are not Unicode, and would fail
    later (encoding for the provider, logging, the answer) far from their cause."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            _check_string(item, f"the string at {where or 'the top level'}")
        elif isinstance(item, dict):
            for key, child in item.items():
                path = f"{where}.{key}" if where else key
                _check_string(key, f"a key in {where or 'the top-level object'}")
                stack.append((path, child))
        elif isinstance(item, list):
            stack.extend(
                (f"{where}.{index}" if where else str(index), child)
                for index, child in enumerate(item)
            )


def _check_string(text: str, where: str) -> None:
    found = _SURROGATE.search(text)
    if found is not None:
        # Name the code point as an escape: the character itself cannot be encoded.
        raise _Refused(
            "invalid_unicode",
            f"{_printable(where)} contains an unpaired surrogate "
            f"(\\u{ord(found.group()):04x}); strings must be valid Unicode",
        )


def _printable(text: str, limit: int = 200) -> str:
    """``text`` cut short and with surrogates escaped, so a message naming a key can be sent."""
    if len(text) > limit:
        text = text[:limit] + "..."
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


FILE_KEYS = frozenset({"url", "file_data"})
"""Where a face's parts carry a file's bytes (the AI SDK's ``url``, Responses' ``file_data``)."""


def _measured(content: Any) -> int:
    """The characters of a message sent as parts or items, its files (``data:`` URLs under
    :data:`FILE_KEYS`, bounded as attachments and never sent to the model) left out."""

    def text(node: Any) -> Any:
        if isinstance(node, list):
            return [text(item) for item in node]
        if isinstance(node, dict):
            return {
                key: "" if key in FILE_KEYS and _is_data_url(value) else text(value)
                for key, value in node.items()
            }
        return node

    return len(json.dumps(text(content or "")))


def _is_data_url(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("data:")


def check_message_limits(raw: Any, limits: RequestLimits, key: str = "messages") -> None:
    """413 for too many or too large messages in ``raw[key]``, before pydantic spends time
    on them. A message without string ``content`` (parts, input items) is measured whole."""
    if not isinstance(raw, dict) or not isinstance(raw.get(key), list | str):
        return  # schema validation reports the shape problem with its field name
    messages: list[Any] = raw[key] if isinstance(raw[key], list) else [{"content": raw[key]}]
    if len(messages) > limits.max_messages:
        raise HttpError(
            413,
            "too_many_messages",
            f"{len(messages)} messages; the limit is {limits.max_messages}",
            param="messages",
        )
    for index, message in enumerate(messages):
        has_content = isinstance(message, dict) and "content" in message
        content = message["content"] if has_content else message
        size = len(content) if isinstance(content, str) else _measured(content)
        if size > limits.max_message_chars:
            raise HttpError(
                413,
                "message_too_large",
                f"{key}[{index}] has {size} characters; the limit is {limits.max_message_chars}",
                param=f"{key}.{index}.content" if has_content else f"{key}.{index}",
            )


def first_problem(exc: ValidationError) -> str:
    """The first error's message, as a validator of ours wrote it (pydantic puts "Value
    error, " before it)."""
    return str(exc.errors(include_url=False)[0]["msg"]).removeprefix("Value error, ")


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


def plan_request(
    request: ChatRequest,
    config: AgentConfig,
    tools: ToolRegistry,
    signer: Signer | None = None,
    *,
    can_ask: bool = True,
) -> RunPlan:
    """The run's plan, or a 422 naming the model or tools the server will not run."""
    try:
        return plan_run(request, config, tools, signer, can_ask=can_ask)
    except PlanError as exc:
        kind = {"model": "invalid_model", "tools": "invalid_tools"}.get(
            exc.param, "invalid_request"
        )
        raise HttpError(422, kind, exc.message, param=exc.param) from exc


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
        try:  # bounded like a body: locally a client can send this header (16 KB of "[")
            parsed = parse_json(raw.encode("latin-1", "replace"), RequestLimits())
            context = parsed if isinstance(parsed, dict) else {}
        except HttpError:
            context = {}
    request_id = str(context.get("request_id") or context.get("aws_request_id") or "")
    deadline_ms = context.get("deadline") or context.get("deadline_ms")
    deadline = Deadline()
    if (
        isinstance(deadline_ms, int | float)
        and not isinstance(deadline_ms, bool)
        and deadline_ms > 0
    ):
        deadline = Deadline.after(deadline_ms / 1000 - time.time())
    return InvocationInfo(request_id=request_id or uuid.uuid4().hex, deadline=deadline)
