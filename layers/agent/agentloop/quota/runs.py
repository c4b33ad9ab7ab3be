"""A server run under the quota: reserve before its first model call, clamp its plan to the
reservation, settle when it ends.

The reservation is per top-level request: nested ``ask_llm`` runs and parallel sub-agents share
the request's budget (``limits.TokenBudget``), so they spend out of it; a continued run
reserves again what its budget has left (what it spent before was settled by the request
that paused it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass

from agentloop.config import AgentConfig
from agentloop.events import Done, Event, UsageReport
from agentloop.http_api import HttpError
from agentloop.limits import Deadline
from agentloop.model_calls import MIN_OUTPUT_TOKENS
from agentloop.models import RunProgress
from agentloop.plan import RunPlan
from agentloop.pricing import Pricer
from agentloop.principal import Principal
from agentloop.quota.errors import QuotaExceeded, QuotaUnpriced
from agentloop.quota.ledger import Quota, Reservation, Want
from agentloop.quota.limits import MICRO
from agentloop.store import StoreError
from agentloop.store.http import store_http_error

logger = logging.getLogger("agentloop.quota")

LEASE_MARGIN_S = 60.0
"""A lease outlives its request's deadline by this much (time to settle)."""
NO_DEADLINE_LEASE_S = 900.0
"""A request without a deadline (local runs) holds its reservation this long at most."""
RATE_LIMITED = frozenset({"concurrent_runs", "requests_per_minute"})

_settling: set[asyncio.Task[None]] = set()
"""Settlements of streams closed before their ``done`` (kept referenced until they end)."""


class QuotaRefused(HttpError):
    """A 429: the request is over one of its principal's limits (``exceeded`` says which);
    the faces' ``refusal`` may put it in their protocol's shape."""

    def __init__(self, exceeded: QuotaExceeded) -> None:
        kind = "rate_limited" if exceeded.param in RATE_LIMITED else "quota_exceeded"
        super().__init__(
            429,
            kind,
            str(exceeded),
            param=exceeded.param,
            headers={"Retry-After": str(exceeded.retry_after_s)},
        )
        self.exceeded = exceeded


@dataclass(frozen=True)
class Carried:
    """What a continued run had spent before this request (its budget starts from it)."""

    tokens: int = 0
    usd: float = 0.0


@dataclass(frozen=True)
class Held:
    """A request's reservation and what its run carried in."""

    quota: Quota
    reservation: Reservation
    carried: Carried


async def reserve_run(
    quota: Quota | None,
    who: Principal,
    plan: RunPlan,
    config: AgentConfig,
    deadline: Deadline,
    progress: RunProgress | None = None,
) -> tuple[RunPlan, Held | None]:
    """The plan clamped to what ``who`` may still spend, and its reservation (None: no
    limits). HttpError: 429 over a limit, 422 for an unpriced model under a dollar limit,
    503 when the store cannot be reached (the request never runs unchecked).

    ``progress``: what the run carries in from outside its plan (a research job continued
    from its checkpoint: ``ChatContext.progress``); a continuation's own is in the plan."""
    if quota is None:
        return plan, None
    pricer = Pricer(dict(config.prices))
    carried = _carried(plan, pricer, progress)
    want = _want(plan, pricer, carried, deadline)
    try:
        reservation = await quota.admit(who, want)
    except QuotaExceeded as exc:
        raise QuotaRefused(exc) from exc
    except QuotaUnpriced as exc:
        raise HttpError(422, "invalid_model", str(exc), param="model") from exc
    except StoreError as exc:
        raise store_http_error(exc) from exc
    if reservation is None:
        return plan, None
    return _clamped(plan, reservation, carried), Held(quota, reservation, carried)


def _carried(plan: RunPlan, pricer: Pricer, progress: RunProgress | None) -> Carried:
    progress = plan.resumption.progress if plan.resumption else progress
    if progress is None:
        return Carried()
    usd = 0.0
    for spent in progress.usage_by_depth:
        usd += pricer.cost(plan.model, spent) or 0.0
    return Carried(sum(u.total_tokens for u in progress.usage_by_depth), usd)


def _want(plan: RunPlan, pricer: Pricer, carried: Carried, deadline: Deadline) -> Want:
    """The most the run may spend: its token budget, and its dollar cap or (none) the price
    of its whole token budget at the model's dearest rate; None: no known price."""
    tokens = max(0, plan.token_budget - carried.tokens)
    rates = pricer.rates(plan.model)
    micro = min_micro = None
    if rates is not None:
        dearest = max(rates.input, rates.output)
        usd = tokens * dearest
        if plan.max_cost_usd is not None:
            usd = min(usd, max(0.0, plan.max_cost_usd - carried.usd))
        micro = math.ceil(usd * MICRO)
        min_micro = max(1, math.ceil(MIN_OUTPUT_TOKENS * rates.output * MICRO))
    remaining = deadline.remaining()
    lease = remaining + LEASE_MARGIN_S if math.isfinite(remaining) else NO_DEADLINE_LEASE_S
    return Want(tokens, micro, lease, MIN_OUTPUT_TOKENS, min_micro or 1)


def _clamped(plan: RunPlan, held: Reservation, carried: Carried) -> RunPlan:
    """The plan within the reservation: the token budget lowered if the quota bound it, and
    under a dollar limit the dollar cap set to what was reserved."""
    caps: set[str] = set()
    changes: dict[str, object] = {}
    if held.tokens_bound:
        changes["token_budget"] = carried.tokens + held.tokens
        caps.add("tokens")
    if held.micro or held.usd_bound:
        changes["max_cost_usd"] = carried.usd + held.micro / MICRO
        if held.usd_bound:
            caps.add("usd")
    return dataclasses.replace(plan, quota_caps=frozenset(caps), **changes)  # type: ignore[arg-type]


async def settling(events: AsyncIterator[Event], held: Held) -> AsyncIterator[Event]:
    """Pass the run's events on, settling its reservation at its top-level ``done`` (before
    that is passed on); a stream closed before it settles with what was reported so far."""
    last: UsageReport | None = None
    settled = False
    try:
        async for event in events:
            if isinstance(event, UsageReport):
                last = event
            elif isinstance(event, Done) and event.depth == 0 and not settled:
                settled = True
                await _settle(held, event.usage.total_tokens, event.cost_usd)
            yield event
    finally:
        if not settled:
            task = asyncio.create_task(_settle_unfinished(held, last))
            _settling.add(task)
            task.add_done_callback(_settling.discard)


async def _settle_unfinished(held: Held, last: UsageReport | None) -> None:
    """No ``done`` was seen: charge what the last usage report said (none: the whole
    reservation, since a call may have been under way)."""
    if last is None:
        await _settle(held, held.carried.tokens + held.reservation.tokens, None)
    else:
        await _settle(held, last.total.total_tokens, last.total_cost_usd)


async def _settle(held: Held, total_tokens: int, total_usd: float | None) -> None:
    """Settle what this request spent (its run's totals less what it carried in)."""
    tokens = max(0, total_tokens - held.carried.tokens)
    usd = None if total_usd is None else max(0.0, total_usd - held.carried.usd)
    try:
        await held.quota.settle(held.reservation, tokens, usd)
    except StoreError as exc:  # the lease expires and the next admission reclaims it
        logger.error("quota settlement failed (the lease will be reclaimed): %s", exc)
