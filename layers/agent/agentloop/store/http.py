"""The store's errors as HTTP answers, for the server's routes (imported by them only).

An unreachable store is a 503: the request is refused, never let through without the checks
the store was to make. What the backend said stays in the logs (``StoreUnavailable.detail``).
"""

from __future__ import annotations

import logging

from agentloop.http_api import HttpError
from agentloop.store.base import (
    Conflict,
    InvalidCursor,
    LimitExceeded,
    Rejected,
    StoreError,
    StoreUnavailable,
)

logger = logging.getLogger("agentloop.store")
RETRY_AFTER_S = 5


def store_http_error(exc: StoreError, *, cursor_param: str = "after") -> HttpError:
    """The answer for a store error a route did not handle itself."""
    if isinstance(exc, StoreUnavailable):
        logger.error("store unavailable: %s", exc.detail or exc)
        return HttpError(
            503,
            "store_unavailable",
            "the service's store is unavailable; try again later",
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    if isinstance(exc, InvalidCursor):
        return HttpError(400, "invalid_request_error", str(exc), param=cursor_param)
    if isinstance(exc, Rejected):
        return HttpError(400, "invalid_request_error", str(exc))
    if isinstance(exc, Conflict):
        return HttpError(409, "conflict", "the object was changed meanwhile; try again")
    if isinstance(exc, LimitExceeded):
        return HttpError(
            429, "rate_limit_exceeded", f"over the limit on {exc.counter}", param=exc.counter
        )
    logger.error("store error: %s", exc)
    return HttpError(500, "internal_error", "internal error")
