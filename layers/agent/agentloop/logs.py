"""Logging settings that every deployed function shares (chat, research), and the request id.

HTTP clients log each request's URL at INFO, and a search URL carries the user's words (a
prompt, in a research job): those loggers are kept at WARNING wherever logs are shipped.
Kept in the layer so the functions cannot drift apart.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar

REQUEST_ID: ContextVar[str | None] = ContextVar("agentloop_request_id", default=None)
"""The id of the request being handled, for log lines: set by the chat app per request and
by every run from its ``ChatContext.request_id`` (its tasks and tools inherit it)."""

QUIET_LOGGERS = ("httpx", "httpcore", "openai", "groq")
"""Loggers that write request URLs at INFO."""


def quiet_request_loggers() -> None:
    """Raise :data:`QUIET_LOGGERS` to WARNING, so no request URL reaches the logs."""
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
