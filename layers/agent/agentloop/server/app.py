"""The app around the routes (:func:`build_app`): its middleware (host check first, then CORS
where configured), its error handlers and its lifespan (the service from the environment,
unless one was given; at shutdown, the MCP client's sessions ended and whatever the routes
asked to close, ``on_shutdown``)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import BaseRoute

from agentloop.app_settings import AppSettings, configure_logging
from agentloop.config import ConfigurationError
from agentloop.host_check import HostCheckMiddleware, describe_hosts
from agentloop.server.errors import EXCEPTION_HANDLERS
from agentloop.server.ratelimit import exposed_headers
from agentloop.server.service import ChatService, service_from_env

logger = logging.getLogger("agentloop.chat_app")

Lifespan = Callable[[Starlette], AbstractAsyncContextManager[None]]


def build_app(
    routes: Sequence[BaseRoute],
    service: ChatService | None = None,
    cors_origins: Sequence[str] | None = None,
    settings: AppSettings | None = None,
) -> Starlette:
    """The ASGI app of ``routes``; with no ``service``, one is built from the environment at
    start-up. The environment is read once, here (``settings``, unless given); a bad value
    raises ConfigurationError naming the variable."""
    settings = settings or AppSettings.from_env()
    app = Starlette(
        routes=list(routes),
        middleware=middleware(settings, cors_origins),
        exception_handlers=dict(EXCEPTION_HANDLERS),
        lifespan=lifespan(settings),
    )
    app.state.service = service
    return app


def middleware(
    settings: AppSettings, cors_origins: Sequence[str] | None = None
) -> list[Middleware]:
    """The host check (where on: off on Lambda unless AGENTLOOP_ALLOWED_HOSTS is set) first, so
    a refused request reaches nothing else; then CORS for ``cors_origins`` (default: the
    settings'), which on AWS the Function URL answers itself."""
    allowed_hosts = settings.host_check()
    origins = settings.cors_origins if cors_origins is None else cors_origins
    stack = []
    if allowed_hosts is not None:
        stack.append(Middleware(HostCheckMiddleware, allowed=allowed_hosts))
    if origins:
        stack.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(origins),
                allow_methods=["GET", "POST", "PATCH", "DELETE"],
                # mcp-protocol-version: browser MCP clients on another origin (POST /mcp)
                allow_headers=["authorization", "content-type", "mcp-protocol-version"],
                expose_headers=exposed_headers(),  # the caller's limits, and when to retry
            )
        )
    return stack


def lifespan(settings: AppSettings) -> Lifespan:
    """Start-up builds the service from the environment where the app was given none (a bad
    value stops the app, its variable named); shutdown ends the MCP client's sessions and
    awaits what the routes registered (:func:`on_shutdown`)."""

    @asynccontextmanager
    async def span(app: Starlette) -> AsyncIterator[None]:
        if getattr(app.state, "service", None) is None:
            configure_logging(settings)
            try:
                app.state.service = service_from_env(settings)
            except ConfigurationError as exc:
                logger.error("configuration error: %s", exc)
                raise
        logger.info(describe_hosts(settings.host_check()))
        yield
        if app.state.service.mcp_tools is not None:  # end the MCP sessions (DELETE)
            await app.state.service.mcp_tools.close()
        for close in getattr(app.state, "closers", ()):  # what routes started (on_shutdown)
            await close()

    return span


def on_shutdown(app: Starlette, close: Callable[[], Awaitable[None]]) -> None:
    """Have the app await ``close`` at shutdown: for a route that started something that
    outlives a request (the MCP face's session manager), so the app needs no knowledge of it."""
    app.state.closers = [*getattr(app.state, "closers", ()), close]
