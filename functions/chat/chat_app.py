"""The chat function: a Starlette app that Lambda Web Adapter puts behind a Function URL.

The app's wiring and its route table. Each route names its endpoint by where it lives
(``agentloop.server.deferred``): the endpoint's module is imported at the route's first
request, so a function that only serves ``/chat`` never loads the other protocols. The HTTP
side, which knows no protocol (body, auth, host check, streaming, errors, the service), is
``agentloop.server``; each protocol face is ``agentloop.faces``. Importing this module loads
neither: the app is made at its first use (``chat_app:app``, which uvicorn looks up when it
starts), and the engine when the app starts (its lifespan builds the service). ``run.sh``
starts the app with uvicorn on Lambda; ``make dev`` starts it locally.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.routing import BaseRoute, Mount, Route

from agentloop.logs import hide_query_strings
from agentloop.server.deferred import Deferred

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from agentloop.app_settings import AppSettings
    from agentloop.server.service import ChatService

__all__ = ["create_app", "routes"]

hide_query_strings()  # uvicorn's access log (on under `make dev`): no token from a query string

STATIC_DIR = Path(__file__).resolve().parent / "static"

FACES = {
    "/chat": "agentloop.faces.native",
    "/v1/chat/completions": "agentloop.faces.openai.face",
    "/api/chat": "agentloop.faces.ui_stream.face",
    "/ag-ui": "agentloop.faces.ag_ui.face",
    "/v1/responses": "agentloop.faces.responses.face",
}
"""Each protocol's route and the module of its face (``server.faces.face_route``); the
Responses API's stored responses are read and deleted by their own routes
(``faces.responses.route``)."""
THREAD_METHODS = ["GET", "PATCH", "DELETE"]
RESUME_UI = "agentloop.faces.ui_stream.resume:resume_stream"
"""The AI SDK's resume route (``useChat({resume: true})``); /chat's is ``/chat/stream``."""
RESPONSES = "agentloop.faces.responses.route"


def routes() -> list[BaseRoute]:
    """The route table: the faces, the lists, the page (``server.routes``)."""
    face, pages = "agentloop.server.faces:face_route", "agentloop.server.routes"
    threads = "agentloop.server.threads"
    return [
        Route("/healthz", Deferred(f"{pages}:healthz"), methods=["GET"]),
        *(Route(path, Deferred(face, module), methods=["POST"]) for path, module in FACES.items()),
        Route("/chat/stream", Deferred("agentloop.streams.routes:chat_stream"), methods=["GET"]),
        Route(
            "/chat/stream/cancel",
            Deferred("agentloop.streams.routes:cancel_stream"),
            methods=["POST"],
        ),
        Route("/api/chat/{id}/stream", Deferred(RESUME_UI), methods=["GET"]),
        Route(
            "/v1/responses/{response_id}",
            Deferred(f"{RESPONSES}:response"),
            methods=["GET", "DELETE"],
        ),
        Route(
            "/v1/responses/{response_id}/input_items",
            Deferred(f"{RESPONSES}:input_items"),
            methods=["GET"],
        ),
        Route("/mcp", Deferred("agentloop.server.mcp_route:McpRoute"), methods=["POST"]),
        Route("/v1/models", Deferred(f"{pages}:list_models"), methods=["GET"]),
        Route("/v1/usage", Deferred("agentloop.server.usage:usage"), methods=["GET"]),
        Route("/threads", Deferred(f"{threads}:list_threads"), methods=["GET"]),
        Route("/threads/{thread_id}", Deferred(f"{threads}:thread"), methods=THREAD_METHODS),
        Route("/files/{file_id}", Deferred("agentloop.server.files:get_file"), methods=["GET"]),
        Route("/tools", Deferred(f"{pages}:list_tools"), methods=["GET"]),
        Route("/auth/config", Deferred("agentloop.server.signin:auth_config"), methods=["GET"]),
        Route("/", Deferred(f"{pages}:Page", STATIC_DIR / "index.html"), methods=["GET"]),
        Mount("/static", Deferred(f"{pages}:PageFiles", STATIC_DIR)),
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
    from agentloop.server.app import build_app

    return build_app(routes(), service, cors_origins, settings)


def __getattr__(name: str) -> Starlette:
    """``chat_app:app`` (uvicorn's import string): the app from the environment, made at its
    first use rather than at import, so importing this module reads no environment."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    app = globals()["app"] = create_app()
    return app
