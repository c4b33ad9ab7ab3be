"""A principal's quota as one query read it: overrides, counters, leases; and what is left.

Items of the principal's partition (``principal#<id>``), all under ``quota#``:

- ``quota#limits``: the operator's overrides (data: limit name to value, null lifts it);
- ``quota#day#YYYY-MM-DD``: counters ``t`` (tokens) and ``m`` (micro-dollars);
- ``quota#month#YYYY-MM``: counter ``m``;
- ``quota#minute#<epoch minute>``: counter ``r`` (requests);
- ``quota#load``: counter ``runs`` (runs in flight);
- ``quota#run#<start>-<id>``: a run's lease, counters ``t``, ``m`` (what it reserved),
  ``until`` (when its lease ends), ``day`` (its day, days since the epoch), ``month``
  (YYYYMM) and ``closed`` (1 once reclaimed, or settled late, with a limit of 1 making
  either happen once; kept a day). A run settled well within its lease deletes it.

Counters include what runs in flight reserved; an open lease past ``until`` belonged to a
process that died and is reclaimed (its amounts taken off) by the next admission.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from agentloop.quota.limits import LIMIT_NAMES, LimitName, Limits, LimitValueError, merged
from agentloop.quota.limits import parse_limits as parse_overrides
from agentloop.quota.windows import DAY_S, Windows
from agentloop.store import Record

logger = logging.getLogger("agentloop.quota")

PREFIX = "quota#"
LIMITS_KEY = "quota#limits"
LOAD_KEY = "quota#load"
LEASE = "quota#run#"
"""Leases sort after every other quota item, so a query's first page has those whatever
the number of leases."""
MAX_RECLAIM = 8
"""Expired leases one admission reclaims (the rest wait for the next)."""


def partition(principal_id: str) -> str:
    return f"principal#{principal_id}"


def day_key(windows: Windows) -> str:
    return f"quota#day#{windows.day}"


def month_key(windows: Windows) -> str:
    return f"quota#month#{windows.month}"


def minute_key(windows: Windows) -> str:
    return f"quota#minute#{windows.minute}"


def day_index(windows: Windows) -> int:
    return (windows.day_ends - DAY_S) // DAY_S


def month_number(windows: Windows) -> int:
    return int(windows.month.replace("-", ""))


@dataclass(frozen=True)
class Lease:
    sort: str
    tokens: int
    micro: int
    until: int
    day: int
    month: int


@dataclass
class QuotaState:
    """What one query read, seen at ``windows``: used values after reclaiming expired leases."""

    windows: Windows
    limits: Limits
    used: dict[LimitName, int] = field(default_factory=dict)
    held: dict[LimitName, int] = field(default_factory=dict)
    """What open (live) leases hold of each money/token limit in the current windows."""
    expired: list[Lease] = field(default_factory=list)

    def left(self, name: LimitName) -> int:
        return self.limits[name] - self.used.get(name, 0)


def read_state(records: Sequence[Record], base: Limits, windows: Windows) -> QuotaState:
    """The state of ``records`` (a query of the partition's ``quota#`` items)."""
    by_sort = {r.sort: r for r in records}
    state = QuotaState(windows, merged(base, _overrides(by_sort.get(LIMITS_KEY))))
    day = _counters(by_sort.get(day_key(windows)))
    month = _counters(by_sort.get(month_key(windows)))
    used = state.used
    used["tokens_per_day"] = day.get("t", 0)
    used["usd_per_day"] = day.get("m", 0)
    used["usd_per_month"] = month.get("m", 0)
    used["requests_per_minute"] = _counters(by_sort.get(minute_key(windows))).get("r", 0)
    used["concurrent_runs"] = max(0, _counters(by_sort.get(LOAD_KEY)).get("runs", 0))
    for lease in _open_leases(records):
        _count_lease(state, lease)
    return state


def _count_lease(state: QuotaState, lease: Lease) -> None:
    """An expired lease's amounts come off the used values (its reclaim is in the same
    transaction as the admission); a live one's are counted as held."""
    today = lease.day == day_index(state.windows)
    this_month = lease.month == month_number(state.windows)
    amounts: list[tuple[LimitName, int, bool]] = [
        ("tokens_per_day", lease.tokens, today),
        ("usd_per_day", lease.micro, today),
        ("usd_per_month", lease.micro, this_month),
    ]
    if lease.until < state.windows.now and len(state.expired) < MAX_RECLAIM:
        state.expired.append(lease)
        state.used["concurrent_runs"] = max(0, state.used["concurrent_runs"] - 1)
        for name, amount, current in amounts:
            if current:
                state.used[name] -= amount
        return
    for name, amount, current in amounts:
        if current:
            state.held[name] = state.held.get(name, 0) + amount


def _open_leases(records: Sequence[Record]) -> list[Lease]:
    leases = []
    for record in records:
        c = record.counters
        if record.sort.startswith(LEASE) and not c.get("closed", 0):
            leases.append(
                Lease(
                    record.sort,
                    c.get("t", 0),
                    c.get("m", 0),
                    c.get("until", 0),
                    c.get("day", 0),
                    c.get("month", 0),
                )
            )
    return leases


def _counters(record: Record | None) -> dict[str, int]:
    return {} if record is None else record.counters


def _overrides(record: Record | None) -> dict[LimitName, int | None]:
    """The operator's overrides; a bad item is logged and ignored (the tier's limits hold)."""
    if record is None:
        return {}
    try:
        return parse_overrides(record.data, "overrides")
    except LimitValueError as exc:
        logger.error("ignoring %s of %s: %s", LIMITS_KEY, record.partition, exc)
        return {}


def known_limits(limits: Limits) -> list[LimitName]:
    """The limits set, in the documented order."""
    return [name for name in LIMIT_NAMES if name in limits]
