"""Who is calling: every face's request checked the same way into a
:class:`~agentloop.principal.Principal` (401, or 503 when the means of checking cannot be had).

One :data:`Authenticate` per auth mode, chosen at start-up (``service_from_env``): bearer
(a named API key), jwt (an OpenID Connect issuer's token), iam (the Function URL checked the
SigV4 signature; the caller is its ARN) and none (the one ``local`` caller). The principal's
id, never a token, is what logs, traces and the sandbox tenant see.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from starlette.requests import Request

from agentloop.auth import AuthError, BearerAuth, bearer_token
from agentloop.config import ConfigurationError
from agentloop.http_api import HttpError, RequestLimits, parse_json
from agentloop.logs import PRINCIPAL_ID
from agentloop.principal import Principal

if TYPE_CHECKING:
    from agentloop.oidc import JwtVerifier
    from agentloop.server.service import ChatService

logger = logging.getLogger("agentloop.chat_app")

Authenticate = Callable[[Request], Principal]
"""Checks a request; returns who sent it or raises AuthError (401) or ConfigurationError (503)."""

UNKNOWN_IAM_CALLER = "unknown"
MAX_ARN_CHARS = 2048
"""Longer than any IAM ARN; what is longer (or holds a line break) is no ARN to log."""


def allow_anyone(_: Request) -> Principal:
    """The check in ``none`` mode: no one checks, and every caller is the one ``local``."""
    return Principal.local()


def iam_caller(request: Request) -> Principal:
    """The check in ``iam`` mode: the Function URL has checked the SigV4 signature before the
    function ran; the caller is the signer's ARN (``iam:unknown`` when it is not forwarded)."""
    return Principal.for_iam(_iam_caller(request) or UNKNOWN_IAM_CALLER)


def api_keys(auth: BearerAuth) -> Authenticate:
    """The check in ``bearer`` mode: the key presented, by its name."""

    def check(request: Request) -> Principal:
        return auth.principal(request.headers.get("authorization"))

    return check


def jwt_bearer(verifier: JwtVerifier) -> Authenticate:
    """The check in ``jwt`` mode: the bearer token verified against the issuer's keys."""

    def check(request: Request) -> Principal:
        return verifier.verify(bearer_token(request.headers.get("authorization")))

    return check


def authenticate(service: ChatService, request: Request) -> Principal:
    """Who sent the request (every face's first step), or the HTTP error that refuses it.

    The principal's id goes on the request's log lines (:data:`agentloop.logs.PRINCIPAL_ID`).
    """
    try:
        principal = service.authenticate(request)
    except AuthError as exc:
        raise HttpError(exc.status, "unauthorized", exc.message, headers=exc.headers) from exc
    except ConfigurationError as exc:  # the token store or the issuer's keys cannot be had
        logger.error("authentication unavailable: %s", exc)
        raise HttpError(503, "configuration_error", "authentication is unavailable") from exc
    PRINCIPAL_ID.set(principal.id)
    return principal


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
    usable = isinstance(arn, str) and 0 < len(arn) <= MAX_ARN_CHARS and arn.isprintable()
    return arn if usable else None
