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
                                   usage, usage_by_depth, sources (``done.sources``)}; a run
                                   without an answer (failed, cancelled, paused): a result
                                   with ``isError`` saying why (a failure: the error event)
=================================  ==========================================================

``tools/list`` answers with ``ask`` as :func:`ask_tool` describes it for this server: its
``tools`` argument lists the tool names a call may pass (``ToolChoice``). Those texts are read
by the model that calls ``ask``, so they are written for it, and pydantic's titles and class
docstrings are kept out of the schemas.

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

import agentloop
from agentloop.config import AgentConfig
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
from agentloop.faces.options import option_params
from agentloop.faces.outcome import Outcome, outcome
from agentloop.http_api import HttpError
from agentloop.limits import CancelToken
from agentloop.models import ChatRequest
from agentloop.tools.registry import ToolRegistry, UnknownToolError

logger = logging.getLogger("agentloop.mcp_server")

TOOL_NAME = "ask"
SEAT_KEY = "agentloop.mcp_seat"
"""Where chat_app leaves the request's :class:`Seat` in the ASGI scope for the handler."""


@dataclass(frozen=True)
class ToolChoice:
    """The tool names ``ask`` accepts, and those a run uses when it names none: its schema
    lists them, since a calling model cannot guess them."""

    offered: tuple[str, ...] = ()
    default: tuple[str, ...] = ()

    @classmethod
    def of(cls, registry: ToolRegistry, config: AgentConfig) -> ToolChoice:
        """As the plan decides for a face that cannot ask a person: tools that wait for an
        approval are neither offered nor used."""
        waiting = set(config.approval_tools)
        try:
            default = registry.select(config.default_tools).names
        except UnknownToolError:  # every plan that names no tools is refused, with the reason
            default = []
        return cls(
            offered=tuple(name for name in registry.names if name not in waiting),
            default=tuple(name for name in default if name not in waiting),
        )


@dataclass
class Seat:
    """One ``/mcp`` request's way to start a run (bound to its caller), and its run's token.

    chat_app builds it after authenticating; the route cancels ``cancel`` once the HTTP
    exchange is over, so a client that left stops its run even if the SDK never tells us.
    """

    start: Callable[[ChatRequest], tuple[AsyncIterator[Event], CancelToken]]
    tools: ToolChoice = field(default_factory=ToolChoice)
    cancels: list[CancelToken] = field(default_factory=list)

    def cancel_all(self) -> None:
        for token in self.cancels:
            token.cancel()


# Everything below that a calling model reads (the tool's description, the schemas'
# descriptions) is written for that model: what to pass, what comes back, what it costs.


class AskArgs(BaseModel):
    # ``ask``'s arguments; the tool's input schema comes from this model (see _schema_for_models).
    model_config = ConfigDict(extra="forbid")

    question: str = Field(
        min_length=1,
        description="The question or task, in plain language, with all the context the agent "
        "needs: it sees only this text, not your conversation, and cannot ask you anything back.",
    )
    tools: list[str] | None = Field(
        default=None,
        description="Names of the tools the agent may use. Omit to let it use its default set; "
        "pass [] to have it answer from the model's own knowledge, without tools.",
    )
    max_iterations: int | None = Field(
        default=None,
        ge=1,
        description="The most model turns the agent may take (each turn may call tools). Omit "
        "for the server's default; 2 or 3 gives a quicker, shallower answer. A value above the "
        "server's limit is lowered to it.",
    )


PLAN_PARAMS = option_params(AskArgs, "")
"""Where a plan's refusal points, in ``ask``'s own arguments."""


def _schema_for_models(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic JSON Schema without what pydantic adds for developers: ``title`` (class and
    field names) and an object's ``description`` (a class docstring). The descriptions given
    to fields stay. A property named ``title`` is a property, not the keyword, and stays."""

    def clean(node: Any) -> Any:
        if isinstance(node, list):
            return [clean(item) for item in node]
        if not isinstance(node, dict):
            return node
        drop = {"title", "description"} if "properties" in node else {"title"}
        cleaned = {key: clean(value) for key, value in node.items() if key not in drop}
        if isinstance(node.get("properties"), dict):
            cleaned["properties"] = {
                name: clean(value) for name, value in node["properties"].items()
            }
        return cleaned

    result: dict[str, Any] = clean(schema)
    return result


_USAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prompt_tokens": {"type": "integer"},
        "completion_tokens": {"type": "integer"},
        "cached_tokens": {"type": "integer", "description": "Prompt tokens served from cache."},
    },
    "required": ["prompt_tokens", "completion_tokens"],
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "description": "The agent's answer, as in the text content."},
        "stop_reason": {
            "type": "string",
            "description": "Why the run ended: completed, or the limit that cut it short "
            "(max_iterations, budget, deadline), in which case the answer may be partial. A "
            "run that failed or was cancelled is an error result instead.",
        },
        "iterations": {"type": "integer", "description": "The model turns the run took."},
        "usage": {**_USAGE_SCHEMA, "description": "Tokens used, the sub-agents' included."},
        "usage_by_depth": {
            "type": "array",
            "items": _USAGE_SCHEMA,
            "description": "Tokens used at each depth: the agent first, then its sub-agents.",
        },
        "sources": {
            "type": "array",
            "items": _schema_for_models(Source.model_json_schema()),
            "description": "The web pages the agent used, in the order it first used them.",
        },
    },
    "required": ["answer", "stop_reason", "iterations", "usage"],
}

ASK_DESCRIPTION = (
    "Ask a research agent a question, or give it a task. The agent works on its own: it "
    "decides which of its tools to call (such as web search, reading pages or running code, "
    "as `tools` allows), over several rounds if needed, then answers in text. A call can take "
    "from seconds to a few minutes and spends model tokens. It does not see your conversation "
    "and remembers nothing between calls, so put everything it needs in `question`. The "
    "result's text is the answer; its structured content adds why the run stopped, the tokens "
    "used and the web pages the agent used."
)
_ASK_INPUT_SCHEMA = _schema_for_models(AskArgs.model_json_schema())


def ask_tool(choice: ToolChoice) -> types.Tool:
    """The ``ask`` tool as this server offers it: its ``tools`` argument lists the names."""
    schema = json.loads(json.dumps(_ASK_INPUT_SCHEMA))  # a copy to fill in
    tools = schema["properties"]["tools"]
    if choice.offered:
        default = ", ".join(choice.default) or "none"
        tools["description"] = (
            f"Names of the tools the agent may use, among: {', '.join(choice.offered)}. Omit "
            f"to let it use its default set ({default}); pass [] to have it answer from the "
            "model's own knowledge, without tools."
        )
        tools["anyOf"][0]["items"]["enum"] = list(choice.offered)
    else:
        tools["description"] = "This server gives the agent no tools: leave this out."
    return types.Tool(
        name=TOOL_NAME,
        title="Ask a research agent",
        description=ASK_DESCRIPTION,
        input_schema=schema,
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


_FAILURES: dict[Outcome, str] = {
    Outcome.AWAITS_APPROVAL: "the run paused for a person's approval, which MCP cannot ask for",
    Outcome.AWAITS_CLIENT_TOOLS: "the run paused for tools the caller would run",
    Outcome.SUSPENDED: "the run was suspended before it finished",
}
"""Pauses ``ask`` cannot continue (its plan offers no tool that would cause one): errors."""


def answer(done: Done, error: ErrorEvent | None) -> types.CallToolResult:
    """The top-level ``done`` as the call's result: an answer (cut short by a limit or not,
    ``stop_reason`` says), or a tool error for a run without one (failed, cancelled, paused)."""
    ending = outcome(done, error)
    if ending.outcome is Outcome.FAILED:
        return _tool_error(f"{error.code}: {error.message}" if error else "the run failed")
    if not ending.outcome.has_answer:
        return _tool_error(_FAILURES.get(ending.outcome) or ending.failure)
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
