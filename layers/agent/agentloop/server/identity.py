"""Who is calling: the Authorization header checked (401, or 503 when the token store cannot
be read), and the caller as a short non-secret id."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from starlette.requests import Request

from agentloop.auth import AuthError
from agentloop.config import ConfigurationError
from agentloop.http_api import HttpError, RequestLimits, parse_json

if TYPE_CHECKING:
    from agentloop.server.service import ChatService

logger = logging.getLogger("agentloop.chat_app")

Authenticate = Callable[[str | None], str | None]
"""Checks an Authorization header; returns who it is (or None) or raises AuthError."""


def allow_anyone(_: str | None) -> None:
    """The check in ``iam`` mode (the Function URL has checked the signature) and in ``none``
    mode (no one checks)."""
    return None


def authenticate(service: ChatService, request: Request) -> str | None:
    """Who the request's token belongs to (None where the mode has no tokens)."""
    try:
        return service.authenticate(request.headers.get("authorization"))
    except AuthError as exc:
        raise HttpError(exc.status, "unauthorized", exc.message, headers=exc.headers) from exc
    except ConfigurationError as exc:  # the token store itself could not be read
        logger.error("authentication unavailable: %s", exc)
        raise HttpError(503, "configuration_error", "authentication is unavailable") from exc


def caller_id(service: ChatService, who: str | None, request: Request) -> str:
    """The authenticated caller as a short non-secret id: execute_code's sandbox tenant.

    bearer: the matching token's id; iam: the signer's ARN from the Function URL's request
    context; none: one shared "anonymous" (docs/deploy.md, "Tenant isolation").
    """
    if service.auth_mode == "bearer" and who:
        return f"bearer:{who}"
    if service.auth_mode == "iam":
        return f"iam:{_iam_caller(request) or 'unknown'}"
    return "anonymous"


def _iam_caller(request: Request) -> str | None:
    """``requestContext.authorizer.iam.userArn`` as Lambda Web Adapter forwards it.

    The adapter's value is the last ``x-amzn-request-context`` (older adapters append theirs
    after one a caller may have sent; newer ones replace it), so the last one is read.
    """
    values = request.headers.getlist("x-amzn-request-context")
    try:  # bounded like a body: locally a client can send this header
        context = (
            parse_json(values[-1].encode("latin-1", "replace"), RequestLimits()) if values else None
        )
    except HttpError:
        return None
    authorizer = context.get("authorizer") if isinstance(context, dict) else None
    iam = authorizer.get("iam") if isinstance(authorizer, dict) else None
    arn = iam.get("userArn") if isinstance(iam, dict) else None
    return arn if isinstance(arn, str) and arn else None
