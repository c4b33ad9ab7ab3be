"""Per-principal limits on money and load (``AGENTLOOP_LIMITS``), held by reservations.

Before a request's run makes its first model call, :meth:`Quota.admit` reserves its maximum
(token budget and dollar cap, clamped to what is left of the caller's day and month) together
with a run slot and a request of this minute, in one store transaction; the run is clamped
to the reservation, and :meth:`Quota.settle` gives back the unspent part when it ends.
Unset, there are no limits and no store call is made. See docs/architecture.md ("Quota").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from agentloop.quota.errors import LimitUsage, QuotaExceeded, QuotaUnpriced
from agentloop.quota.ledger import Quota, Reservation, Want
from agentloop.quota.limits import ENV, LIMIT_NAMES, LimitName, LimitsConfig, limits_from_env

__all__ = [
    "ENV",
    "LIMIT_NAMES",
    "LimitName",
    "LimitUsage",
    "LimitsConfig",
    "Quota",
    "QuotaExceeded",
    "QuotaUnpriced",
    "Reservation",
    "Want",
    "limits_from_env",
    "quota_from_env",
]


def quota_from_env(
    environ: Mapping[str, str], *, clock: Callable[[], float] = time.time
) -> Quota | None:
    """The quota ``AGENTLOOP_LIMITS`` configures on ``AGENTLOOP_STORE``'s store; None when it
    is unset (then no request touches the store for limits). ConfigurationError when either
    variable is wrong. Opening the store touches nothing."""
    config = limits_from_env(environ)
    if config is None:
        return None
    from agentloop.store import store_from_env

    return Quota(config, store_from_env(environ, clock=clock), clock)
