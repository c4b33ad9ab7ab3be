"""Every error answer in the one error shape (``HttpError.body``), with the error's headers.

A face whose protocol has its own rules for errors (the OpenAI faces tell SDKs when not to
retry) applies them in ``Face.refusal`` (``server.faces``); nothing here knows any protocol.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentloop.http_api import HttpError
from agentloop.server.body import BodyRefused, LingeringResponse

logger = logging.getLogger("agentloop.chat_app")

Endpoint = Callable[[Request], Awaitable[Response]]
Handler = Callable[[Request, Exception], Awaitable[Response]]


def error_response(error: HttpError) -> JSONResponse:
    if isinstance(error, BodyRefused) and error.linger is not None:
        return LingeringResponse(error, error.linger)
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


async def http_error(request: Request, exc: Exception) -> Response:
    """Every route's HttpError, as it was raised (and, for some routes, its policy made it)."""
    if not isinstance(exc, HttpError):  # registered for HttpError only
        raise exc
    return error_response(exc)


async def not_found(request: Request, exc: Exception) -> Response:
    return error_response(HttpError(404, "not_found", f"no route for {request.url.path}"))


async def method_not_allowed(request: Request, exc: Exception) -> Response:
    return error_response(
        HttpError(405, "method_not_allowed", f"{request.method} is not allowed here")
    )


async def internal_error(request: Request, exc: Exception) -> Response:
    logger.exception("unhandled error", extra={"path": request.url.path})
    return error_response(HttpError(500, "internal_error", "internal error"))


EXCEPTION_HANDLERS: Mapping[Any, Handler] = {
    HttpError: http_error,
    404: not_found,
    405: method_not_allowed,
    500: internal_error,
}
