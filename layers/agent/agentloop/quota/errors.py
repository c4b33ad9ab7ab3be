"""What the quota tells its callers: a refusal over a limit, and a limit's usage.

Values are in the units people read (dollars for ``usd_*``, counts otherwise), so a face can
put them in its answer as they are (an error's ``param``, ``x-ratelimit-*`` headers,
``GET /v1/usage``).
"""

from __future__ import annotations

from dataclasses import dataclass

from agentloop.quota.limits import LimitName


class QuotaExceeded(Exception):
    """A request refused before its run started: ``param`` is over its limit.

    ``retry_after_s``: when trying again may pass (whole seconds, at least 1); ``reset_at``:
    when the limit's window starts again (epoch seconds; None for ``concurrent_runs``, which
    frees as runs end); ``used`` counts what runs in flight have reserved.
    """

    def __init__(
        self,
        param: LimitName,
        *,
        limit: float,
        used: float,
        retry_after_s: int,
        reset_at: int | None,
    ) -> None:
        super().__init__(f"over the {param} limit ({_show(param, used)} of {_show(param, limit)})")
        self.param = param
        self.limit = limit
        self.used = used
        self.retry_after_s = retry_after_s
        self.reset_at = reset_at


class QuotaUnpriced(Exception):
    """A dollar limit applies but the run's model has no known price: it cannot be kept."""


def _show(param: LimitName, value: float) -> str:
    return f"${value:.6g}" if param.startswith("usd_") else f"{value:g}"


@dataclass(frozen=True)
class LimitUsage:
    """One limit of a principal as it stands: ``used`` includes runs in flight."""

    name: LimitName
    limit: float
    used: float
    remaining: float
    reset_at: int | None
