"""The OpenAI faces' errors: the error object for each way a run fails, and when SDKs are told
not to retry (docs/architecture.md, "The OpenAI face under failure")."""

from __future__ import annotations

from typing import Any

from agentloop.events import ErrorCode, ErrorEvent
from agentloop.faces.outcome import Ending, Outcome
from agentloop.http_api import HttpError
from agentloop.models import PendingCall

_RUN_ERROR_STATUS: dict[ErrorCode, int] = {
    "configuration": 503,
    "provider": 502,
    "invalid_request": 422,
    "invalid_output": 502,
    "internal": 500,
}

NO_CLIENT_RETRY = {"x-should-retry": "false"}
"""Honoured by the openai SDK (and other Stainless-generated SDKs) before its own retry rules."""


QUOTA_TYPES = {
    "rate_limited": ("requests", "rate_limit_exceeded"),
    "quota_exceeded": ("insufficient_quota", "insufficient_quota"),
}
"""Our 429s (``quota.runs.QuotaRefused``) as OpenAI types and codes them: the openai SDK
raises ``RateLimitError`` for both, and applications tell them apart by ``code``."""


class OpenAIError(HttpError):
    """An error whose ``code`` is OpenAI's string (``HttpError.body`` puts the status there)."""

    def __init__(self, error: HttpError, type_: str, code: str) -> None:
        super().__init__(error.status, type_, error.message, error.param, error.headers)
        self.code = code

    def body(self) -> dict[str, Any]:
        body = super().body()
        body["error"]["code"] = self.code
        return body


def no_client_retry(error: HttpError) -> HttpError:
    """Mark ``error`` as not worth a client retry; returns it for chaining."""
    error.headers.update(NO_CLIENT_RETRY)
    return error


def refusal(error: HttpError) -> HttpError:
    """A request refused before its run started, with the face's retry policy applied.

    Client errors (4xx) would be refused again, so clients are told not to retry, except
    408 (the body came too slowly), which a retry can cure. A 5xx here (the token store
    could not be read) made no model call, so the SDK's retries multiply nothing and may
    outlast a passing failure: they are left alone.

    Over a limit (429) the answer is OpenAI's: a rate limit (``requests_per_minute``,
    ``concurrent_runs``) frees within its Retry-After, so the SDK may retry it; a spent
    allowance (``insufficient_quota``) cannot pass before its window resets: no retry.
    """
    quota = QUOTA_TYPES.get(error.type) if error.status == 429 else None
    if quota is not None:
        shaped = OpenAIError(error, *quota)
        return shaped if error.type == "rate_limited" else no_client_retry(shaped)
    if error.status == 408 or error.status >= 500:
        return error
    return no_client_retry(error)


def event_error(event: ErrorEvent) -> HttpError:
    """The error object for a run's ``error`` event; never retried by clients, because
    the server already retried the provider (or a retry cannot help)."""
    status = _RUN_ERROR_STATUS.get(event.code, 500)
    return no_client_retry(HttpError(status, f"{event.code}_error", event.message))


def run_error(ending: Ending) -> HttpError:
    """The error answer for a run that ended without an answer (see :data:`FINISH_REASONS`)."""
    if ending.outcome is Outcome.AWAITS_APPROVAL:
        return approval_error(ending.done.pending)
    if ending.outcome is Outcome.CANCELLED:  # only a client that left cancels: no one reads this
        return no_client_retry(HttpError(499, "cancelled", ending.failure))
    if ending.error is not None:
        return event_error(ending.error)
    return no_client_retry(HttpError(500, "internal_error", ending.failure))


def approval_error(pending: list[PendingCall]) -> HttpError:
    """For a run that paused for a person's approval: this protocol cannot ask for one."""
    names = sorted({p.name for p in pending if p.kind == "approval"})
    return no_client_retry(
        HttpError(
            422,
            "approval_required",
            f"the model called {names}, which need a person's approval here, and OpenAI's "
            "protocols have no way to ask for it: use POST /chat, /api/chat or /ag-ui, or "
            'leave these tools out with "agentloop": {"tools": [...]}',
            param="agentloop.tools",
        )
    )


def stream_cut_error(message: str) -> HttpError:
    """For a stream that already sent text the retried answer does not continue."""
    return no_client_retry(HttpError(502, "stream_cut", message))
