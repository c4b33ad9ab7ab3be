"""The agent as an MCP server: one tool, ``ask``, behind ``POST /mcp`` (Streamable HTTP).

``chat_app`` authenticates the request (401 like every route), then hands it to the SDK's
``StreamableHTTPSessionManager`` in stateless mode (no sessions to keep: each POST stands
alone, which suits Lambda) with SSE answers, so a call's progress can stream. The ``ask``
handler builds a ``ChatRequest`` and starts the run through the same seam as every face
(``start_run``: a plan's 422 refusal becomes a tool error naming the argument), then
translates the run's events:

=================================  ==========================================================
agentloop event                    MCP message
=================================  ==========================================================
tool_call_start / tool_call_result ``notifications/progress`` (when the call carries a
subagent_start / subagent_finish   progressToken): a human-readable ``message``, and the
notice / model_switched            event itself in ``_meta["agentloop/event"]``; ``depth`` and
                                   ``parent_call_id`` tell sub-agents' activity apart
text_delta, usage, turn_start ...  nothing (the answer comes whole, in the result)
done (depth 0)                     the ``tools/call`` result: text content = the answer,
                                   ``structuredContent`` = {answer, stop_reason, iterations,
                                   usage, usage_by_depth, sources (``done.sources``)}; stop
                                   reason ``error``: a result
                                   with ``isError`` and the error event's message
=================================  ==========================================================

Bad arguments and refusals are tool errors (``isError``), which the calling model can read;
an unknown tool name is a JSON-RPC error. A client that leaves cancels the run (its token),
and the run is drained on its own task so it still ends with ``done``, logged and measured.
The SDK is imported with this module, which ``chat_app`` imports only when ``/mcp`` is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.types import Receive, Scope, Send

from agentloop.events import (
    Done,
    ErrorEvent,
    Event,
    ModelSwitched,
    Notice,
    Source,
    SubagentFinish,
    SubagentStart,
    ToolCallResult,
    ToolCallStart,
)
from agentloop.http_api import HttpError
from agentloop.limits import CancelToken
from agentloop.models import ChatRequest

logger = logging.getLogger("agentloop.mcp_server")

TOOL_NAME = "ask"
SEAT_KEY = "agentloop.mcp_seat"
"""Where chat_app leaves the request's :class:`Seat` in the ASGI scope for the handler."""

PLAN_PARAMS = {"tools": "tools"}
"""Where a plan's refusal points, in ``ask``'s own arguments."""


@dataclass
class Seat:
    """One ``/mcp`` request's way to start a run (bound to its caller), and its run's token.

    chat_app builds it after authenticating; the route cancels ``cancel`` once the HTTP
    exchange is over, so a client that left stops its run even if the SDK never tells us.
    """

    start: Callable[[ChatRequest], tuple[AsyncIterator[Event], CancelToken]]
    cancels: list[CancelToken] = field(default_factory=list)

    def cancel_all(self) -> None:
        for token in self.cancels:
            token.cancel()


class AskArgs(BaseModel):
    """``ask``'s arguments; its input schema is generated from this model."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, description="What to ask the agent.")
    tools: list[str] | None = Field(
        default=None,
        description="Server tool names the agent may use; the server's default set if omitted.",
    )
    max_iterations: int | None = Field(
        default=None, ge=1, description="At most this many model turns (clamped to the server cap)."
    )


_USAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prompt_tokens": {"type": "integer"},
        "completion_tokens": {"type": "integer"},
        "cached_tokens": {"type": "integer"},
    },
    "required": ["prompt_tokens", "completion_tokens"],
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "stop_reason": {"type": "string"},
        "iterations": {"type": "integer"},
        "usage": _USAGE_SCHEMA,
        "usage_by_depth": {"type": "array", "items": _USAGE_SCHEMA},
        "sources": {"type": "array", "items": Source.model_json_schema()},
    },
    "required": ["answer", "stop_reason", "iterations", "usage"],
}

ASK_TOOL = types.Tool(
    name=TOOL_NAME,
    title="Ask the agent",
    description=(
        "Ask the agent a question. It may use its tools (and sub-agents) to answer; progress "
        "notifications report that activity. The result is the answer with token usage."
    ),
    input_schema=AskArgs.model_json_schema(),
    output_schema=OUTPUT_SCHEMA,
)


def _tool_error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _argument_error(exc: ValidationError) -> types.CallToolResult:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "arguments"
    return _tool_error(f"invalid argument {where}: {first['msg']}")


def progress_message(event: Event) -> str | None:
    """A human-readable line for the events that are the run's activity; None for the rest."""
    prefix = "sub-agent: " if event.depth > 0 else ""
    if isinstance(event, ToolCallStart):
        text = f"calling {event.name}"
    elif isinstance(event, ToolCallResult):
        text = f"{event.name} {'returned' if event.ok else 'failed'}"
    elif isinstance(event, SubagentStart):
        return f"sub-agent started: {event.query[:200]}"
    elif isinstance(event, SubagentFinish):
        return f"sub-agent finished ({event.stop_reason})"
    elif isinstance(event, Notice):
        text = event.message
    elif isinstance(event, ModelSwitched):
        text = f"switched model to {event.to_model} ({event.reason})"
    else:
        return None
    return prefix + text


def answer(done: Done, error: ErrorEvent | None) -> types.CallToolResult:
    """The top-level ``done`` as the call's result."""
    if done.stop_reason == "error":
        detail = f"{error.code}: {error.message}" if error else "the run failed"
        return _tool_error(detail)
    structured = {
        "answer": done.text,
        "stop_reason": done.stop_reason,
        "iterations": done.iterations,
        "usage": done.usage.model_dump(),
        "usage_by_depth": [usage.model_dump() for usage in done.usage_by_depth],
        "sources": [source.model_dump() for source in done.sources],
    }
    return types.CallToolResult(
        content=[types.TextContent(text=done.text)], structured_content=structured
    )


Notify = Callable[[str, Event], Awaitable[None]]


async def translate(
    events: AsyncIterator[Event], cancel: CancelToken, notify: Notify | None
) -> types.CallToolResult:
    """Drain the run, notifying its activity, and answer with its top-level ``done``.

    Notifications stop once the run is cancelled (no one is listening); the run is still read
    to its end so that it finishes as every run does.
    """
    error: ErrorEvent | None = None
    async for event in events:
        if isinstance(event, ErrorEvent) and event.depth == 0:
            error = event
        elif isinstance(event, Done) and event.depth == 0:
            return answer(event, error)
        message = progress_message(event)
        if message is None or notify is None or cancel.cancelled:
            continue
        try:
            await notify(message, event)
        except Exception:  # the client's stream is gone; the run goes on to its end
            logger.info("progress could not be sent; cancelling the run", exc_info=True)
            cancel.cancel()
    return _tool_error("the run ended without an answer")


_draining: set[asyncio.Task[types.CallToolResult]] = set()
"""Runs whose caller left: kept referenced until they end (drained to their done)."""


async def _call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    if params.name != TOOL_NAME:
        raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {params.name!r}")
    seat = getattr(ctx.request, "scope", {}).get(SEAT_KEY)
    if not isinstance(seat, Seat):  # only reachable if the route is wired without a seat
        raise MCPError(code=types.INTERNAL_ERROR, message="internal error")
    try:
        args = AskArgs.model_validate(params.arguments or {})
    except ValidationError as exc:
        return _argument_error(exc)
    try:
        chat_request = ChatRequest(
            messages=[{"role": "user", "content": args.question}],
            tools=args.tools,
            max_iterations=args.max_iterations,
        )
        events, cancel = seat.start(chat_request)
    except ValidationError as exc:
        return _argument_error(exc)
    except HttpError as exc:
        where = f" ({exc.param})" if exc.param else ""
        return _tool_error(f"refused{where}: {exc.message}")
    seat.cancels.append(cancel)
    notify = _notifier(ctx)
    task = asyncio.create_task(translate(events, cancel, notify))
    _draining.add(task)
    task.add_done_callback(_draining.discard)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:  # the client left or sent notifications/cancelled
        cancel.cancel()
        raise


def _notifier(ctx: ServerRequestContext[Any, Any]) -> Notify | None:
    """Progress on this request's own stream, if the caller asked for it (a progressToken)."""
    token = ctx.meta.get("progress_token") if ctx.meta else None
    if token is None:
        return None
    count = 0

    async def notify(message: str, event: Event) -> None:
        nonlocal count
        count += 1
        notification = types.ProgressNotification(
            params=types.ProgressNotificationParams(
                progress_token=token,
                progress=count,
                message=message,
                _meta={"agentloop/event": json.loads(event.model_dump_json())},
            )
        )
        await ctx.session.send_notification(notification, related_request_id=ctx.request_id)

    return notify


async def _list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[ASK_TOOL])


def build_server() -> Server[Any]:
    return Server(
        "agentloop",
        instructions="Call `ask` with a question; the agent answers, using its tools.",
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
    )


class McpEndpoint:
    """The SDK's session manager, started at the first ``/mcp`` request and stopped with the
    app (its ``run()`` must be entered and left in one long-lived task)."""

    def __init__(self, max_body_bytes: int) -> None:
        self.manager = StreamableHTTPSessionManager(
            build_server(),
            stateless=True,
            json_response=False,
            # The app's own HostCheckMiddleware guards against DNS rebinding.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=max_body_bytes,
        )
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def _run(self, started: asyncio.Future[None]) -> None:
        try:
            async with self.manager.run():
                started.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
            raise

    async def _ensure_running(self) -> None:
        async with self._lock:
            if self._task is None:
                started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                # A fresh context: the manager's tasks must not inherit this request's ids.
                self._task = asyncio.create_task(
                    self._run(started), name="mcp-session-manager", context=contextvars.Context()
                )
                await started

    async def handle(self, scope: Scope, receive: Receive, send: Send, seat: Seat) -> None:
        """Serve one ``/mcp`` request; whatever runs it started is cancelled once it is over."""
        await self._ensure_running()
        scope[SEAT_KEY] = seat
        try:
            await self.manager.handle_request(scope, receive, send)
        finally:
            seat.cancel_all()

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
