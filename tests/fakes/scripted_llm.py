"""A scripted OpenAI-compatible chat-completions server for tests.

Tests talk to it through the real ``openai`` and ``groq`` SDKs (pointed at it with
``OPENAI_BASE_URL`` / ``GROQ_BASE_URL``), so the wire format, streaming, error mapping and
retries of those SDKs are exercised exactly as in production; nothing is mocked.

Two flavours are served, because the providers differ in where streamed usage lives:

* ``POST /v1/chat/completions`` (OpenAI): usage arrives in a last chunk with ``choices: []``
  only when the request asked for ``stream_options: {"include_usage": true}``.
* ``POST /openai/v1/chat/completions`` (Groq): usage arrives in ``x_groq.usage`` of the
  finish chunk and never at the top level.

A test scripts the model's answers with :class:`Reply` objects (a FIFO, one per request) or
with a responder callable, and inspects what the client sent in :attr:`ScriptedLLM.requests`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tests.fakes.loopback import LoopbackServer

__all__ = [
    "RecordedRequest",
    "Reply",
    "Responder",
    "ScriptedLLM",
    "ToolCallSpec",
    "Usage",
    "call",
]

Flavour = Literal["openai", "groq"]
JSON = dict[str, Any]

EXHAUSTED_MESSAGE = "scripted LLM: script exhausted"

_call_ids = itertools.count(1)


def call(name: str, /, **arguments: Any) -> ToolCallSpec:
    """Build a well-formed tool call with a fresh ``call_<n>`` id, so tests need not invent one.

    Every keyword is a tool argument (even ``name`` or ``id``); for a chosen id or raw,
    malformed argument text build a :class:`ToolCallSpec` directly.
    """
    return ToolCallSpec(name, json.dumps(arguments), f"call_{next(_call_ids)}")


@dataclass
class ToolCallSpec:
    """One tool call the model makes.

    ``arguments`` is the raw JSON text the model emits, so a test can make it malformed.
    A missing ``id`` is filled in by the server when it answers.
    """

    name: str
    arguments: str = "{}"
    id: str | None = None


@dataclass(frozen=True)
class Usage:
    """Token counts reported for a reply."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class Reply:
    """What the scripted model answers to one request.

    Content: ``text`` and/or ``tool_calls`` (text is streamed first), or ``empty=True`` for a
    deliberately empty answer. ``usage`` is ``Usage`` or ``(prompt, completion[, cached])``;
    unset, it is estimated from the request.

    Faults, so tests can reach the library's error paths through the real SDKs:

    * ``status``: answer that HTTP status with ``{"error": {message, type, code, param}}``
      (``error_*`` override the per-status defaults); no body is streamed.
    * ``headers``: extra response headers on any answer (retry-after, x-ratelimit-*).
    * ``cut_after``: streamed, send that many chunks (the role chunk counts) and then close
      the connection with neither the rest nor ``[DONE]``; not streamed, close it halfway
      through the JSON.
    * ``first_delay``: seconds before anything is sent (errors included);
      ``chunk_delay``: seconds between streamed chunks.
    """

    text: str | None = None
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | tuple[int, int] | tuple[int, int, int] | None = None
    chunk_delay: float = 0.0
    first_delay: float = 0.0
    status: int | None = None
    error_message: str | None = None
    error_type: str | None = None
    error_code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    error_fields: dict[str, Any] = field(default_factory=dict)
    """Extra fields of the error object, e.g. Groq's ``failed_generation``."""
    cut_after: int | None = None
    empty: bool = False
    text_pieces: list[str] | None = None
    """The deltas ``text`` is streamed in (unset: token-like pieces, ``split_text``); a few
    large ones send a long answer quickly."""
    interleave: bool = True
    """Interleave fragments of several tool calls round-robin (False: one call after another,
    as OpenAI itself sends them)."""

    def __post_init__(self) -> None:
        if self.text_pieces is not None and "".join(self.text_pieces) != (self.text or ""):
            raise ValueError("Reply(text_pieces=...) must join to its text")
        has_content = self.text is not None or bool(self.tool_calls)
        if self.empty and has_content:
            raise ValueError("Reply(empty=True) cannot also have text or tool calls")
        if not (has_content or self.empty or self.status is not None or self.cut_after is not None):
            raise ValueError("Reply needs text, tool_calls, status, cut_after or empty=True")

    @property
    def resolved_finish_reason(self) -> str:
        """The finish_reason sent: explicit, else "tool_calls" when calling tools, else "stop"."""
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"

    def resolved_usage(self, messages: Any) -> Usage:
        """Explicit usage, else a rough estimate of ~4 characters per token."""
        if isinstance(self.usage, Usage):
            return self.usage
        if self.usage is not None:
            return Usage(*self.usage)
        prompt = max(1, len(json.dumps(messages)) // 4)
        produced = len(self.text or "") + sum(len(c.arguments) for c in self.tool_calls)
        return Usage(prompt_tokens=prompt, completion_tokens=max(1, produced // 4))


@dataclass
class RecordedRequest:
    """One request the server received, exactly as the SDK sent it."""

    path: str
    headers: dict[str, str]
    body: JSON
    flavour: Flavour
    client_disconnected: bool = False
    """Set when the client closed the connection before the streamed answer was complete."""
    _left: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    def mark_disconnected(self) -> None:
        self.client_disconnected = True
        self._left.set()

    def wait_disconnected(self, timeout: float = 10.0) -> bool:
        """Wait until the client has left (the server notices at its next piece); whether it did."""
        return self._left.wait(timeout)

    @property
    def messages(self) -> list[JSON]:
        return list(self.body.get("messages", []))

    @property
    def tools(self) -> list[JSON] | None:
        return self.body.get("tools")

    @property
    def tool_choice(self) -> Any:
        return self.body.get("tool_choice")

    @property
    def model(self) -> str | None:
        return self.body.get("model")

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def tool_names(self) -> list[str]:
        """Names of the offered tools, the thing tests most often check."""
        return [t["function"]["name"] for t in self.tools or [] if "function" in t]


Responder = Callable[[RecordedRequest], Reply]


# --------------------------------------------------------------------------------------------
# Wire format
# --------------------------------------------------------------------------------------------

_ERROR_DEFAULTS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("permission_denied", "permission_denied", "You do not have access to this model."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist."),
    408: ("timeout", "timeout", "Request timed out."),
    413: ("invalid_request_error", "request_too_large", "Request too large."),
    422: ("invalid_request_error", None, "Unprocessable request."),
    429: ("tokens", "rate_limit_exceeded", "Rate limit reached. Please try again in 1s."),
    500: ("server_error", None, "The server had an error while processing your request."),
    502: ("server_error", "bad_gateway", "Bad gateway."),
    503: ("server_error", "service_unavailable", "The server is overloaded, try again later."),
}


def error_body(
    status: int, message: str | None = None, type_: str | None = None, code: str | None = None
) -> JSON:
    """An OpenAI-style error body with sensible defaults for the status."""
    fallback = ("invalid_request_error", None, "Request failed.")
    if status >= 500:
        fallback = ("server_error", None, "The server had an error.")
    d_type, d_code, d_message = _ERROR_DEFAULTS.get(status, fallback)
    return {
        "error": {
            "message": message if message is not None else d_message,
            "type": type_ if type_ is not None else d_type,
            "code": code if code is not None else d_code,
            "param": None,
        }
    }


def split_text(text: str) -> list[str]:
    """Split text into token-like deltas: words with their trailing space, long ones cut up."""
    pieces: list[str] = []
    for word in re.findall(r"\S+\s*|\s+", text):
        if len(word) <= 6:
            pieces.append(word)
        else:
            pieces.extend(word[i : i + 4] for i in range(0, len(word), 4))
    return pieces


def split_arguments(arguments: str) -> list[str]:
    """Split raw argument text into at least three pieces when it is long enough."""
    if len(arguments) < 3:
        return [arguments] if arguments else []
    n = max(3, -(-len(arguments) // 12))
    bounds = [round(i * len(arguments) / n) for i in range(n + 1)]
    return [arguments[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def _usage_json(usage: Usage, flavour: Flavour) -> JSON:
    out: JSON = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }
    if flavour == "groq":
        out.update(queue_time=0.001, prompt_time=0.002, completion_time=0.003, total_time=0.005)
    return out


def _call_ids_for(reply: Reply, serial: int) -> list[str]:
    return [c.id or f"call_{serial}_{i}" for i, c in enumerate(reply.tool_calls)]


def build_chunks(reply: Reply, request: RecordedRequest, serial: int) -> list[JSON]:
    """The chat.completion.chunk objects streamed for a reply (without the final [DONE])."""
    flavour = request.flavour
    include_usage = bool((request.body.get("stream_options") or {}).get("include_usage"))
    openai_usage = flavour == "openai" and include_usage
    groq_id = f"req_{uuid.uuid4().hex[:26]}"
    base: JSON = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.model or "scripted-model",
        "system_fingerprint": "fp_scripted",
    }

    def chunk(delta: JSON, finish_reason: str | None = None, **extra: Any) -> JSON:
        out: JSON = {
            **base,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
        if openai_usage:
            out["usage"] = None
        out.update(extra)
        return out

    first_extra: JSON = {"x_groq": {"id": groq_id}} if flavour == "groq" else {}
    chunks = [chunk({"role": "assistant", "content": ""}, **first_extra)]
    pieces = split_text(reply.text or "") if reply.text_pieces is None else reply.text_pieces
    chunks += [chunk({"content": piece}) for piece in pieces]

    per_call: list[list[JSON]] = []
    for index, (spec, call_id) in enumerate(
        zip(reply.tool_calls, _call_ids_for(reply, serial), strict=True)
    ):
        header = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": spec.name, "arguments": ""},
        }
        rest = [
            {"index": index, "function": {"arguments": piece}}
            for piece in split_arguments(spec.arguments)
        ]
        per_call.append([header, *rest])
    if reply.interleave:
        ordered = [f for group in itertools.zip_longest(*per_call) for f in group if f is not None]
    else:
        ordered = [f for fragments in per_call for f in fragments]
    chunks += [chunk({"tool_calls": [fragment]}) for fragment in ordered]

    usage = reply.resolved_usage(request.body.get("messages", []))
    finish_extra: JSON = {}
    if flavour == "groq":
        finish_extra = {"x_groq": {"id": groq_id, "usage": _usage_json(usage, flavour)}}
    chunks.append(chunk({}, reply.resolved_finish_reason, **finish_extra))
    if openai_usage:
        chunks.append({**base, "choices": [], "usage": _usage_json(usage, flavour)})
    return chunks


def build_completion(reply: Reply, request: RecordedRequest, serial: int) -> JSON:
    """The non-streamed chat.completion object for a reply."""
    message: JSON = {"role": "assistant", "content": reply.text}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": spec.name, "arguments": spec.arguments},
            }
            for spec, call_id in zip(reply.tool_calls, _call_ids_for(reply, serial), strict=True)
        ]
    usage = reply.resolved_usage(request.body.get("messages", []))
    out: JSON = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model or "scripted-model",
        "system_fingerprint": "fp_scripted",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": reply.resolved_finish_reason,
            }
        ],
        "usage": _usage_json(usage, request.flavour),
    }
    if request.flavour == "groq":
        out["x_groq"] = {"id": f"req_{uuid.uuid4().hex[:26]}"}
    return out


# --------------------------------------------------------------------------------------------
# ASGI side
# --------------------------------------------------------------------------------------------


class _ConnectionCut(Exception):
    """Raised mid-response so uvicorn closes the socket without finishing the body."""


class _HideConnectionCuts(logging.Filter):
    """Keep uvicorn's "Exception in ASGI application" quiet for deliberate cuts."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _ConnectionCut)


_CUT_FILTER = _HideConnectionCuts()


class _ScriptedBody(Response):
    """Sends body pieces with delays, stops if the client goes away, and can cut the line."""

    def __init__(
        self,
        pieces: list[bytes],
        *,
        status_code: int,
        headers: dict[str, str],
        media_type: str,
        chunk_delay: float,
        cut: bool,
        record: RecordedRequest,
    ) -> None:
        # Like StreamingResponse: no body attribute, so no content-length; uvicorn chunks it.
        self.status_code = status_code
        self.media_type = media_type
        self.background = None
        self.init_headers(headers)
        self.pieces = pieces
        self.chunk_delay = chunk_delay
        self.cut = cut
        self.record = record

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.create_task(watch())
        try:
            start = {"type": "http.response.start", "status": self.status_code}
            await send({**start, "headers": self.raw_headers})
            for i, piece in enumerate(self.pieces):
                if i and self.chunk_delay:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(gone.wait(), self.chunk_delay)
                if gone.is_set():
                    self.record.mark_disconnected()
                    return
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            if self.cut:
                await asyncio.sleep(0.01)  # let the pieces reach the client before the cut
                raise _ConnectionCut("scripted cut_after")
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watcher.cancel()


class ScriptedLLM(LoopbackServer):
    """The server: a Starlette app run by uvicorn on a daemon thread with its own loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._script: deque[Reply] = deque()
        self._responder: Responder | None = None
        self._requests: list[RecordedRequest] = []
        self._serial = itertools.count(1)
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/openai/v1/chat/completions", self._groq, methods=["POST"]),
            ]
        )
        super().__init__(self.app, name="scripted-llm", log_filter=_CUT_FILTER)

    # -- scripting -------------------------------------------------------------------------

    def script(self, *replies: Reply) -> None:
        """Queue replies, consumed one per request in order."""
        with self._lock:
            self._script.extend(replies)

    def respond_with(self, responder: Responder | None) -> None:
        """Answer with ``responder(request)`` whenever the queued script is empty."""
        with self._lock:
            self._responder = responder

    def reset(self) -> None:
        """Forget the script, the responder and the recorded requests."""
        with self._lock:
            self._script.clear()
            self._responder = None
            self._requests.clear()

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the requests received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def pending(self) -> int:
        """How many queued replies have not been used yet."""
        with self._lock:
            return len(self._script)

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def groq_base_url(self) -> str:
        """Groq's SDK adds /openai/v1 itself."""
        return self.url

    # -- handlers --------------------------------------------------------------------------

    async def _openai(self, request: Request) -> Response:
        return await self._handle(request, "openai")

    async def _groq(self, request: Request) -> Response:
        return await self._handle(request, "groq")

    def _next_reply(self, record: RecordedRequest) -> Reply | None:
        with self._lock:
            if self._script:
                return self._script.popleft()
            responder = self._responder
        return responder(record) if responder is not None else None

    async def _handle(self, request: Request, flavour: Flavour) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        record = RecordedRequest(
            path=request.url.path, headers=dict(request.headers), body=body, flavour=flavour
        )
        with self._lock:
            self._requests.append(record)
            serial = next(self._serial)
        if "_raw" in body or not isinstance(body, dict):
            return JSONResponse(error_body(400, "scripted LLM: body is not JSON"), 400)

        try:
            reply = self._next_reply(record)
        except Exception as exc:  # a broken responder must fail the test, not hang it
            message = f"scripted LLM: responder raised {exc!r}"
            return JSONResponse(error_body(500, message, "scripted_llm_error"), 500)
        if reply is None:
            message = f"{EXHAUSTED_MESSAGE} (request #{serial} to {record.path})"
            return JSONResponse(
                error_body(500, message, "scripted_llm_error", "script_exhausted"), 500
            )

        if reply.first_delay:
            await asyncio.sleep(reply.first_delay)
        headers = {"x-request-id": f"req_{uuid.uuid4().hex[:16]}", **reply.headers}

        if reply.status is not None:
            payload = error_body(
                reply.status, reply.error_message, reply.error_type, reply.error_code
            )
            payload["error"].update(reply.error_fields)
            return JSONResponse(payload, reply.status, headers=headers)

        if record.stream:
            events = [json.dumps(c) for c in build_chunks(reply, record, serial)]
            if reply.cut_after is not None:
                events = events[: reply.cut_after]
            else:
                events.append("[DONE]")
            return _ScriptedBody(
                [f"data: {e}\n\n".encode() for e in events],
                status_code=200,
                headers={"cache-control": "no-cache", **headers},
                media_type="text/event-stream",
                chunk_delay=reply.chunk_delay,
                cut=reply.cut_after is not None,
                record=record,
            )

        data = json.dumps(build_completion(reply, record, serial)).encode()
        if reply.cut_after is not None:  # non-streamed: drop the line halfway through the JSON
            return _ScriptedBody(
                [data[: len(data) // 2]],
                status_code=200,
                headers=headers,
                media_type="application/json",
                chunk_delay=0.0,
                cut=True,
                record=record,
            )
        return Response(data, 200, headers=headers, media_type="application/json")
