"""Reservations against a principal's limits: admit before the first model call, settle after.

An admission is one query (overrides, counters and leases of the principal's partition) and
one transaction: +1 run in flight, +1 request this minute, the run's tokens and micro-dollars
reserved (clamped to what is left), a lease for them, and any expired lease reclaimed. Every
limited counter is checked in that transaction, so concurrent requests of one principal never
pass a limit together; the run then spends at most what it reserved (plus one call's
estimation error). Settling is one transaction: the unspent part comes off, the run ends.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from agentloop.principal import Principal
from agentloop.quota.errors import LimitUsage, QuotaExceeded, QuotaUnpriced
from agentloop.quota.limits import (
    MICRO,
    LimitName,
    LimitsConfig,
    from_units,
    parse_limits,
)
from agentloop.quota.state import (
    LEASE,
    LIMITS_KEY,
    LOAD_KEY,
    PREFIX,
    QuotaState,
    day_index,
    day_key,
    known_limits,
    minute_key,
    month_key,
    month_number,
    partition,
    read_state,
)
from agentloop.quota.windows import DAY_S, Windows
from agentloop.store import Add, Delete, LimitExceeded, Store

logger = logging.getLogger("agentloop.quota")

HELD_RETRY_S = 2
"""Retry-After when a limit is taken by runs in flight (they end and free it) rather than by
what was spent."""
ATTEMPTS = 4
"""Admissions tried again when a concurrent one took what the query saw as left."""
QUERY_LIMIT = 200
SKEW_S = 30
"""Clocks of two processes differ by less than this. A run settled this long before its
lease ends deletes the lease: no admission can be reclaiming it. A later one closes it
instead (``closed`` limited to 1), kept a day, so a run and an admission that reclaims its
lease never both give its amounts back."""


@dataclass(frozen=True)
class Want:
    """What a run may spend at most: its token budget and dollar cap (micro-dollars; None:
    its model has no known price), and the least worth starting a run with."""

    tokens: int
    micro: int | None
    lease_s: float
    min_tokens: int = 1
    min_micro: int = 1


@dataclass(frozen=True)
class Reservation:
    """What an admitted run holds until it settles; ``tokens_bound`` / ``usd_bound``: the
    principal's limits lowered the run's token budget / dollar cap."""

    partition: str
    lease: str
    day: str
    month: str
    tokens: int
    micro: int
    tokens_bound: bool
    usd_bound: bool
    until: int
    """When the lease ends (epoch seconds): after it, an admission may reclaim it."""
    usage: dict[LimitName, LimitUsage] = field(default_factory=dict)
    """The principal's limits as this admission left them (its reservation counted): what a
    face can report (``x-ratelimit-*``) without another store call."""


@dataclass
class Quota:
    """Per-principal limits (``AGENTLOOP_LIMITS``, the store's overrides) kept in ``store``."""

    config: LimitsConfig
    store: Store
    clock: Callable[[], float] = time.time

    def _state(self, who: Principal) -> QuotaState:
        """One query of the principal's quota items, read (blocking: in a worker thread)."""
        page = self.store.backend.query(partition(who.id), PREFIX, QUERY_LIMIT, None, False)
        return read_state(page.records, self.config.for_tier(who.tier), Windows.at(self.clock()))

    async def admit(self, who: Principal, want: Want) -> Reservation | None:
        """Reserve ``want`` (clamped to what is left) for one run; None: no limits apply to
        ``who``. QuotaExceeded when nothing is left of a limit, QuotaUnpriced when a dollar
        limit applies to a model without a price, StoreUnavailable when the store is down.

        Read, decide and write run in one worker thread (one hop, not one per store call)."""
        return await asyncio.to_thread(self._admit, who, want)

    def _admit(self, who: Principal, want: Want) -> Reservation | None:
        for attempt in range(ATTEMPTS):
            state = self._state(who)
            if not state.limits:
                return None
            _refuse_if_over(state, want)
            reservation, ops = _reservation(who, state, want)
            try:
                self.store.backend.transact(ops)
            except LimitExceeded as exc:  # another admission took it meanwhile: read again
                if attempt == ATTEMPTS - 1:
                    raise _contended(exc, state) from None
                continue
            return reservation
        raise AssertionError("unreachable")

    async def settle(self, held: Reservation, tokens: int, usd: float | None) -> None:
        """End a run that spent ``tokens`` and ``usd`` (None: unknown, the reservation is
        kept): the unspent part comes off and the run no longer counts as in flight."""
        await asyncio.to_thread(self._settle, held, tokens, usd)

    def _settle(self, held: Reservation, tokens: int, usd: float | None) -> None:
        micro = held.micro if usd is None else math.ceil(usd * MICRO)
        now = int(self.clock())
        pk = held.partition
        end: Add | Delete = Delete(pk, held.lease)
        if now >= held.until - SKEW_S:  # it may be reclaimed meanwhile: close it once
            end = Add(pk, held.lease, {"closed": 1}, {"closed": 1}, now + DAY_S)
        changes = [
            Add(pk, held.day, {"t": tokens - held.tokens, "m": micro - held.micro}),
            Add(pk, held.month, {"m": micro - held.micro}),
        ]
        try:
            self.store.backend.transact([end, *changes, Add(pk, LOAD_KEY, {"runs": -1})])
        except LimitExceeded:  # the lease was reclaimed (it outlived it): charge the spending
            self.store.backend.transact(
                [Add(pk, held.day, {"t": tokens, "m": micro}), Add(pk, held.month, {"m": micro})]
            )

    async def usage(self, who: Principal) -> dict[LimitName, LimitUsage]:
        """Each of ``who``'s limits: limit, used (runs in flight included), remaining and
        when its window starts again."""
        return _report(await asyncio.to_thread(self._state, who))

    async def set_limits(self, principal_id: str, overrides: Mapping[str, object]) -> None:
        """Store a principal's overrides (people's units; None lifts a limit); LimitValueError
        for a bad name or value. An empty mapping removes them."""
        parse_limits(overrides, "overrides")
        if overrides:
            await self.store.put(partition(principal_id), LIMITS_KEY, dict(overrides))
        else:
            await self.store.delete(partition(principal_id), LIMITS_KEY)


def _report(state: QuotaState) -> dict[LimitName, LimitUsage]:
    """Each limit of ``state`` as people read it."""
    report = {}
    for name in known_limits(state.limits):
        limit, used = state.limits[name], state.used.get(name, 0)
        report[name] = LimitUsage(
            name,
            from_units(name, limit),
            from_units(name, used),
            from_units(name, max(0, limit - used)),
            _reset_at(name, state.windows),
        )
    return report


def _reset_at(name: LimitName, windows: Windows) -> int | None:
    if name == "requests_per_minute":
        return windows.minute_ends
    if name in ("tokens_per_day", "usd_per_day"):
        return windows.day_ends
    if name == "usd_per_month":
        return windows.month_ends
    return None


def _contended(exc: LimitExceeded, state: QuotaState) -> QuotaExceeded:
    """Admissions kept taking what was left before this one could: refused as over the
    limit its last transaction failed on, to be tried again in a moment."""
    names: dict[str, LimitName] = {"t": "tokens_per_day", "r": "requests_per_minute"}
    names |= {"runs": "concurrent_runs"}
    name = names.get(exc.counter) or ("usd_per_month" if "month" in exc.sort else "usd_per_day")
    return QuotaExceeded(
        name,
        limit=from_units(name, exc.limit),
        used=from_units(name, exc.current),
        retry_after_s=1,
        reset_at=_reset_at(name, state.windows),
    )


def _needs(name: LimitName, want: Want) -> int:
    if name == "tokens_per_day":
        return want.min_tokens
    if name in ("usd_per_day", "usd_per_month"):
        return want.min_micro
    return 1


def _refuse_if_over(state: QuotaState, want: Want) -> None:
    """QuotaExceeded for the limit with nothing left (of several: the one to wait longest)."""
    refusals = []
    for name in known_limits(state.limits):
        if state.left(name) >= _needs(name, want):
            continue
        reset_at = _reset_at(name, state.windows)
        spent = state.used.get(name, 0) - state.held.get(name, 0)
        held_up = name == "concurrent_runs" or spent + _needs(name, want) <= state.limits[name]
        until = state.windows.now + HELD_RETRY_S if held_up or reset_at is None else reset_at
        if reset_at is not None:
            until = min(until, reset_at)
        refusals.append(
            QuotaExceeded(
                name,
                limit=from_units(name, state.limits[name]),
                used=from_units(name, state.used.get(name, 0)),
                retry_after_s=max(1, until - state.windows.now),
                reset_at=reset_at,
            )
        )
    if refusals:
        raise max(refusals, key=lambda r: r.retry_after_s)
    if want.micro is None and ("usd_per_day" in state.limits or "usd_per_month" in state.limits):
        raise QuotaUnpriced("no price is known for the model, so a dollar limit cannot be kept")


def _grant(state: QuotaState, want: Want) -> tuple[int, int, bool, bool]:
    """The tokens and micro-dollars reserved, and whether the limits lowered each."""
    tokens, micro = 0, 0
    tokens_bound = usd_bound = False
    if "tokens_per_day" in state.limits:
        tokens = min(want.tokens, state.left("tokens_per_day"))
        tokens_bound = tokens < want.tokens
    money = [n for n in ("usd_per_day", "usd_per_month") if n in state.limits]
    if money and want.micro is not None:
        micro = min(want.micro, *(state.left(n) for n in money))
        usd_bound = micro < want.micro
    return tokens, micro, tokens_bound, usd_bound


def _reservation(who: Principal, state: QuotaState, want: Want) -> tuple[Reservation, list[Add]]:
    """The reservation and the one transaction that makes it (reclaims included)."""
    w, pk = state.windows, partition(who.id)
    tokens, micro, tokens_bound, usd_bound = _grant(state, want)
    lease = f"{LEASE}{w.now:012d}-{uuid.uuid4().hex[:16]}"
    until = w.now + math.ceil(want.lease_s)
    counters = {"t": tokens, "m": micro, "until": until, "closed": 0}
    counters |= {"day": day_index(w), "month": month_number(w)}
    ops = [Add(pk, lease, counters), *_counter_adds(pk, state, tokens, micro)]
    for old in state.expired:
        ops.append(Add(pk, old.sort, {"closed": 1}, limits={"closed": 1}, expires_at=w.now + DAY_S))
    after: dict[LimitName, int] = {"tokens_per_day": tokens, "usd_per_day": micro}
    after |= {"usd_per_month": micro, "concurrent_runs": 1, "requests_per_minute": 1}
    counted = QuotaState(w, limits=state.limits, used=dict(state.used))
    for name, amount in after.items():
        counted.used[name] = counted.used.get(name, 0) + amount
    held = Reservation(
        pk, lease, day_key(w), month_key(w), tokens, micro, tokens_bound, usd_bound, until,
        _report(counted),
    )  # fmt: skip
    return held, ops


def _counter_adds(pk: str, state: QuotaState, tokens: int, micro: int) -> list[Add]:
    """The admission's adds to the window and load counters, each within its limit, with
    the expired leases' amounts taken off."""
    w, limits = state.windows, state.limits
    today, month = day_index(w), month_number(w)
    back_t = sum(x.tokens for x in state.expired if x.day == today)
    back_d = sum(x.micro for x in state.expired if x.day == today)
    back_m = sum(x.micro for x in state.expired if x.month == month)

    def within(*pairs: tuple[str, LimitName]) -> dict[str, int]:
        return {counter: limits[name] for counter, name in pairs if name in limits}

    day_limits = within(("t", "tokens_per_day"), ("m", "usd_per_day"))
    adds = [
        Add(
            pk,
            day_key(w),
            {"t": tokens - back_t, "m": micro - back_d},
            day_limits,
            w.day_ends + DAY_S,
        ),
        Add(
            pk,
            month_key(w),
            {"m": micro - back_m},
            within(("m", "usd_per_month")),
            w.month_ends + DAY_S,
        ),
        Add(pk, LOAD_KEY, {"runs": 1 - len(state.expired)}, within(("runs", "concurrent_runs"))),
    ]
    if "requests_per_minute" in limits:
        rpm = within(("r", "requests_per_minute"))
        adds.append(Add(pk, minute_key(w), {"r": 1}, rpm, w.minute_ends + 60))
    return adds
