"""``POST /mcp``: the agent as an MCP server's ``ask`` tool (``agentloop.faces.mcp``).

An ASGI endpoint, since the MCP SDK writes the response itself. The route table names it
(``server.deferred``), so this module loads at the first request, and the SDK once a request
has passed the checks: a refused request imports nothing of it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from agentloop.events import Event
from agentloop.files.blobs import Blob
from agentloop.limits import CancelToken
from agentloop.models import ChatRequest
from agentloop.server.app import on_shutdown
from agentloop.server.body import refuse_declared_oversize
from agentloop.server.files import files_store
from agentloop.server.identity import authenticate
from agentloop.server.runs import prepare_tools, start_run
from agentloop.server.service import service_of


class McpRoute:
    """Authenticates (a 401 like every route), bounds the body, then hands the request to the
    SDK's session manager with a :class:`Seat` that starts this request's runs."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        service = service_of(request)
        who = authenticate(service, request)
        refuse_declared_oversize(request, service.limits)  # the SDK's 413 would reset urllib
        await prepare_tools(service)  # `ask` may name the MCP servers' tools too
        from agentloop.faces.mcp import PLAN_PARAMS, McpEndpoint, Seat, ToolChoice

        async def start(chat_request: ChatRequest) -> tuple[AsyncIterator[Event], CancelToken]:
            run = await start_run(request, service, who, chat_request, PLAN_PARAMS, can_ask=False)
            return run.events, run.context.cancel

        state = request.app.state
        if getattr(state, "mcp", None) is None:
            state.mcp = McpEndpoint(service.limits.max_body_bytes)
            on_shutdown(request.app, state.mcp.close)

        async def open_file(file_id: str) -> Blob | None:  # the caller's own files only
            return await files_store(request).open(who.id, file_id)

        tools = ToolChoice.of(service.tools, service.config)  # `ask`'s schema lists them
        seat = Seat(start, tools, open_file=open_file, base_url=str(request.base_url))
        await state.mcp.handle(scope, receive, send, seat)
