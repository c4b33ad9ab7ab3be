"""``x-ratelimit-*`` headers: each of the caller's limits as the request's admission left it.

For every configured limit ``<name>`` (``usd_per_day`` is written ``usd-per-day``):
``x-ratelimit-limit-<name>``, ``x-ratelimit-remaining-<name>`` and, for a limit with a
window, ``x-ratelimit-reset-<name>``: the time until it starts again, in seconds written as
OpenAI writes its resets (``"42s"``). An admitted run's come from its reservation (no store
call); a refusal's name the one limit it was refused on. No limits: no headers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentloop.quota.errors import LimitUsage, QuotaExceeded
    from agentloop.server.runs import StartedRun
    from agentloop.server.service import ChatService

PREFIX = "x-ratelimit-"


def exposed_headers() -> list[str]:
    """Every header this module may send, and ``retry-after``: what CORS must expose for a
    page on another origin to read them (browsers hide other response headers)."""
    from agentloop.quota.limits import LIMIT_NAMES

    names = [name.replace("_", "-") for name in LIMIT_NAMES]
    kinds = ("limit", "remaining", "reset")
    return ["retry-after", *(f"{PREFIX}{kind}-{name}" for name in names for kind in kinds)]


def run_headers(service: ChatService, run: StartedRun) -> dict[str, str]:
    """The headers of an admitted run's answer (empty when no limits apply to it)."""
    if run.held is None or service.quota is None:
        return {}
    return usage_headers(run.held.reservation.usage.values(), service.quota.clock)


def refusal_headers(service: ChatService, error: Exception) -> dict[str, str]:
    """The headers of a 429 over a limit (``quota.runs.QuotaRefused``): that limit's."""
    exceeded: QuotaExceeded | None = getattr(error, "exceeded", None)
    if exceeded is None or service.quota is None:
        return {}
    from agentloop.quota.errors import LimitUsage

    left = max(0.0, exceeded.limit - exceeded.used)
    usage = LimitUsage(exceeded.param, exceeded.limit, exceeded.used, left, exceeded.reset_at)
    return usage_headers([usage], service.quota.clock)


def usage_headers(usage: Iterable[LimitUsage], clock: Callable[[], float]) -> dict[str, str]:
    """Three headers per limit (two for one without a window: ``concurrent_runs``)."""
    now = clock()
    headers = {}
    for limit in usage:
        name = limit.name.replace("_", "-")
        headers[f"{PREFIX}limit-{name}"] = number(limit.limit)
        headers[f"{PREFIX}remaining-{name}"] = number(limit.remaining)
        if limit.reset_at is not None:
            headers[f"{PREFIX}reset-{name}"] = f"{max(0, int(limit.reset_at - now))}s"
    return headers


def number(value: float) -> str:
    """A count as a whole number, dollars to the micro-dollar without trailing zeros."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.6f}".rstrip("0").rstrip(".")
