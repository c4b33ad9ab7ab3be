"""``GET /v1/usage``: the caller's limits, what is used of each and when each starts again.

Authenticated like every route (a caller sees only its own). ``used`` counts what runs in
flight have reserved, as an admission does. Without limits (``AGENTLOOP_LIMITS`` unset, or
none for the caller's tier) the answer is ``{"limited": false, "limits": {}}``, never a 404:
a client need not know how the server is configured. One store query; a store that cannot
be reached is a 503.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentloop.server.identity import authenticate
from agentloop.server.service import service_of

if TYPE_CHECKING:
    from agentloop.quota.errors import LimitUsage


async def usage(request: Request) -> Response:
    """The caller's usage of each of its limits (``Quota.usage``)."""
    service = service_of(request)
    who = authenticate(service, request)
    if service.quota is None:
        return JSONResponse({"limited": False, "limits": {}})
    from agentloop.store import StoreError
    from agentloop.store.http import store_http_error

    try:
        limits = await service.quota.usage(who)
    except StoreError as exc:
        raise store_http_error(exc) from exc
    now = service.quota.clock()
    body = {name: _limit(limit, now) for name, limit in limits.items()}
    return JSONResponse({"limited": bool(body), "limits": body})


def _limit(limit: LimitUsage, now: float) -> dict[str, Any]:
    """One limit: ``reset_at`` in epoch seconds and ``reset_in_s`` from now (both null for
    ``concurrent_runs``, which frees as runs end)."""
    reset_in = None if limit.reset_at is None else max(0, int(limit.reset_at - now))
    return {
        "limit": limit.limit,
        "used": limit.used,
        "remaining": limit.remaining,
        "reset_at": limit.reset_at,
        "reset_in_s": reset_in,
    }
