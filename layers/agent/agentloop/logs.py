"""Logging settings that every deployed function shares (chat, research), and the request id.

HTTP clients log each request's URL at INFO, and a search URL carries the user's words (a
prompt, in a research job): those loggers are kept at WARNING wherever logs are shipped. The
server's own request lines (uvicorn's access log, on under ``make dev``) lose their query strings.
Kept in the layer so the functions cannot drift apart.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar

REQUEST_ID: ContextVar[str | None] = ContextVar("agentloop_request_id", default=None)
"""The id of the request being handled, for log lines: set by the chat app per request and
by every run from its ``ChatContext.request_id`` (its tasks and tools inherit it)."""

PRINCIPAL_ID: ContextVar[str | None] = ContextVar("agentloop_principal_id", default=None)
"""The id of the caller being served (``Principal.id``: never a token), for log lines and
traces: set by the chat app when a request is authenticated and when its run starts."""

QUIET_LOGGERS = ("httpx", "httpcore", "openai", "groq")
"""Loggers that write request URLs at INFO."""


def quiet_request_loggers() -> None:
    """Raise :data:`QUIET_LOGGERS` to WARNING, so no request URL reaches the logs."""
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


SERVER_LOGGERS = ("uvicorn.access", "uvicorn.error")
"""Where uvicorn writes request lines: the access log, and WebSocket attempts on its error log."""


class NoQueryStrings(logging.Filter):
    """Cuts the query string off every request target among a record's arguments.

    A client may send its token in the query string (``?access_token=...``), and tokens never
    belong in a log; uvicorn's request lines pass the target as an argument, and headers not at
    all. The path stays: the line still says what was asked for. Any argument is cut at its
    first "?": a target need not start with "/" (the absolute form, ``http://host/path?...``,
    reaches the log as uvicorn quotes it), and the line's other arguments (the client's
    address, the method, the HTTP version, the status) never hold one.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_without_query(arg) for arg in record.args)
        return True


def _without_query(arg: object) -> object:
    return arg.partition("?")[0] if isinstance(arg, str) else arg


def hide_query_strings() -> None:
    """Install :class:`NoQueryStrings` on uvicorn's request loggers (once, however often called).

    On the loggers, not their handlers: uvicorn's log set-up replaces handlers but keeps
    filters, and it runs before the app is imported.
    """
    for name in SERVER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, NoQueryStrings) for f in logger.filters):
            logger.addFilter(NoQueryStrings())
