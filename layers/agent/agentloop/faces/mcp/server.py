"""The MCP server behind ``POST /mcp``: the SDK's session manager (stateless), and each
``ask`` call run through the request's :class:`Seat`."""

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
from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

import agentloop
from agentloop.events import Done, ErrorEvent, Event, FileMade
from agentloop.faces.mcp.files import OpenFile, file_contents
from agentloop.faces.mcp.tool import (
    TOOL_NAME,
    AskArgs,
    ToolChoice,
    answer,
    argument_error,
    ask_tool,
    progress_message,
    tool_error,
)
from agentloop.files.models import FileRef
from agentloop.http_api import HttpError
from agentloop.limits import CancelToken
from agentloop.models import ChatRequest, run_options

logger = logging.getLogger(__name__)

SEAT_KEY = "agentloop.mcp_seat"
"""Where chat_app leaves the request's :class:`Seat` in the ASGI scope for the handler."""


@dataclass
class Seat:
    """One ``/mcp`` request's way to start a run (bound to its caller), and its run's token.

    chat_app builds it after authenticating; the route cancels ``cancel`` once the HTTP
    exchange is over, so a client that left stops its run even if the SDK never tells us.
    """

    start: Callable[[ChatRequest], Awaitable[tuple[AsyncIterator[Event], CancelToken]]]
    tools: ToolChoice = field(default_factory=ToolChoice)
    cancels: list[CancelToken] = field(default_factory=list)
    open_file: OpenFile | None = None
    """The caller's kept file by id (its images come back inline); None: links only."""
    base_url: str = ""
    """What a relative file link is resolved against (the request's own URL)."""

    def cancel_all(self) -> None:
        for token in self.cancels:
            token.cancel()


# Everything below that a calling model reads (the tool's description, the schemas'
# descriptions) is written for that model: what to pass, what comes back, what it costs.


Notify = Callable[[str, Event], Awaitable[None]]


async def translate(
    events: AsyncIterator[Event],
    cancel: CancelToken,
    notify: Notify | None,
    seat: Seat | None = None,
) -> types.CallToolResult:
    """Drain the run, notifying its activity, and answer with its top-level ``done`` and the
    files the run made (``seat`` reads the caller's images; without one, all are links).

    Notifications stop once the run is cancelled (no one is listening); the run is still read
    to its end so that it finishes as every run does.
    """
    error: ErrorEvent | None = None
    made: list[FileRef] = []
    async for event in events:
        if isinstance(event, ErrorEvent) and event.depth == 0:
            error = event
        elif isinstance(event, FileMade):
            made.append(event.file)
        elif isinstance(event, Done) and event.depth == 0:
            return await _with_files(answer(event, error, made), made, seat)
        message = progress_message(event)
        if message is None or notify is None or cancel.cancelled:
            continue
        try:
            await notify(message, event)
        except Exception:  # the client's stream is gone; the run goes on to its end
            logger.info("progress could not be sent; cancelling the run", exc_info=True)
            cancel.cancel()
    return tool_error("the run ended without an answer")


async def _with_files(
    result: types.CallToolResult, made: list[FileRef], seat: Seat | None
) -> types.CallToolResult:
    if result.is_error or not made:
        return result
    open_file, base_url = (seat.open_file, seat.base_url) if seat else (None, "")
    result.content.extend(await file_contents(made, open_file, base_url))
    return result


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
        return argument_error(exc)
    try:
        chat_request = ChatRequest(
            messages=[{"role": "user", "content": args.question}], **run_options(args)
        )
        events, cancel = await seat.start(chat_request)
    except ValidationError as exc:
        return argument_error(exc)
    except HttpError as exc:
        where = f" ({exc.param})" if exc.param else ""
        return tool_error(f"refused{where}: {exc.message}")
    seat.cancels.append(cancel)
    notify = _notifier(ctx)
    task = asyncio.create_task(translate(events, cancel, notify, seat))
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
    seat = getattr(ctx.request, "scope", {}).get(SEAT_KEY)
    choice = seat.tools if isinstance(seat, Seat) else ToolChoice()
    return types.ListToolsResult(tools=[ask_tool(choice)])


def build_server() -> Server[Any]:
    return Server(
        "agentloop",
        # The package's own version: the Lambda layer ships the package without its dist-info.
        version=agentloop.__version__,
        instructions="One tool, `ask`: give it a self-contained question and a research agent "
        "answers it, using its own tools (such as web search) as it sees fit.",
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
