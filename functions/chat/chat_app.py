"""The chat function: a Starlette app that Lambda Web Adapter puts behind a Function URL.

The app's wiring and its route table. The HTTP side, which knows no protocol (body, auth,
host check, streaming, errors, the service), is ``agentloop.server``; each protocol face is
``agentloop.faces``, imported by its route at its first request. ``run.sh`` starts the app
with uvicorn on Lambda; ``make dev`` starts it locally.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import Receive, Scope, Send

from agentloop.app_settings import AppSettings
from agentloop.events import Event
from agentloop.limits import CancelToken
from agentloop.logs import hide_query_strings
from agentloop.models import ChatRequest
from agentloop.server.app import lifespan, middleware, on_shutdown
from agentloop.server.body import refuse_declared_oversize
from agentloop.server.errors import EXCEPTION_HANDLERS
from agentloop.server.faces import face_route
from agentloop.server.identity import authenticate
from agentloop.server.routes import Page, PageFiles, healthz, list_models, list_tools
from agentloop.server.runs import prepare_tools, start_run
from agentloop.server.service import ChatService, service_from_env, service_of

__all__ = ["ChatService", "create_app", "service_from_env"]

hide_query_strings()  # uvicorn's access log (on under `make dev`): no token from a query string

STATIC_DIR = Path(__file__).resolve().parent / "static"

FACES = {
    "/chat": "agentloop.faces.native",
    "/v1/chat/completions": "agentloop.faces.openai.face",
    "/v1/responses": "agentloop.faces.responses.face",
    "/api/chat": "agentloop.faces.ui_stream.face",
    "/ag-ui": "agentloop.faces.ag_ui.face",
}
"""Each protocol's route and the module of its face, imported at the route's first request."""


class McpRoute:
    """``POST /mcp``: the agent as an MCP server's ``ask`` tool (``agentloop.faces.mcp``).

    An ASGI endpoint, since the MCP SDK writes the response itself; the SDK is imported at
    the first request, so start-up does not pay for it.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        service = service_of(request)
        who = authenticate(service, request)
        refuse_declared_oversize(request, service.limits)  # the SDK's 413 would reset urllib
        await prepare_tools(service)  # `ask` may name the MCP servers' tools too
        from agentloop.faces.mcp import PLAN_PARAMS, McpEndpoint, Seat, ToolChoice

        def start(chat_request: ChatRequest) -> tuple[AsyncIterator[Event], CancelToken]:
            run = start_run(request, service, who, chat_request, PLAN_PARAMS, can_ask=False)
            return run.events, run.context.cancel

        state = request.app.state
        if getattr(state, "mcp", None) is None:
            state.mcp = McpEndpoint(service.limits.max_body_bytes)
            on_shutdown(request.app, state.mcp.close)
        tools = ToolChoice.of(service.tools, service.config)  # `ask`'s schema lists them
        await state.mcp.handle(scope, receive, send, Seat(start, tools))


def routes() -> list[BaseRoute]:
    """The route table: the faces, the lists, the page."""
    return [
        Route("/healthz", healthz, methods=["GET"]),
        *(Route(path, face_route(module), methods=["POST"]) for path, module in FACES.items()),
        Route("/mcp", McpRoute(), methods=["POST"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/tools", list_tools, methods=["GET"]),
        Route("/", Page(STATIC_DIR / "index.html"), methods=["GET"]),
        Mount("/static", PageFiles(directory=STATIC_DIR), name="static"),
    ]


def create_app(
    service: ChatService | None = None,
    *,
    cors_origins: Sequence[str] | None = None,
    settings: AppSettings | None = None,
) -> Starlette:
    """The ASGI app; with no ``service``, one is built from the environment at start-up.

    The environment is read once, here (``settings``, unless given); a bad value raises
    ConfigurationError naming the variable.
    """
    settings = settings or AppSettings.from_env()
    app = Starlette(
        routes=routes(),
        middleware=middleware(settings, cors_origins),
        exception_handlers=dict(EXCEPTION_HANDLERS),
        lifespan=lifespan(settings),
    )
    app.state.service = service
    return app


def __getattr__(name: str) -> Starlette:
    """``chat_app:app`` (uvicorn's import string): the app from the environment, made at its
    first use rather than at import, so importing this module reads no environment."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    app = globals()["app"] = create_app()
    return app
