"""The quota's reservations on both store backends (SQLite on a file, DynamoDB on moto's
server): admitting clamps to what is left and refuses when nothing is; concurrent admissions
never pass a limit together; settling gives the unspent part back; a dead process's lease is
reclaimed; windows roll over on the injected clock; and the store calls each step makes."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentloop.config import ConfigurationError
from agentloop.principal import Principal
from agentloop.quota import LimitsConfig, Quota, QuotaExceeded, QuotaUnpriced, Want
from agentloop.quota.limits import LimitValueError
from agentloop.store import Store
from tests.serial_moto import serial_moto  # noqa: F401 (a fixture)
from tests.store_backends import (
    START,
    CallCounter,
    Clock,
    Moto,
    aws_env,
    dynamodb_store,
    store_fixtures,
)

ALICE = Principal.for_key("alice")
BOB = Principal.for_key("bob")
PRO = Principal.for_key("carol", tier="pro")
MICRO = 1_000_000


def want(tokens: int = 1000, usd: float | None = 0.01, lease_s: float = 100) -> Want:
    return Want(tokens, None if usd is None else round(usd * MICRO), lease_s)


clock, store = store_fixtures()


def quota(store: Store, clock: Clock, **default: float) -> Quota:
    tiers = {"pro": {"usd_per_day": 5, "concurrent_runs": None}}
    return Quota(LimitsConfig.parse(json.dumps({"default": default, "tiers": tiers})), store, clock)


# -- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "not JSON"),
        ("[]", "expected"),
        ('{"defaults": {}}', "unknown key"),
        ('{"default": {"usd_per_week": 1}}', "unknown limit 'usd_per_week'"),
        ('{"default": {"usd_per_day": -1}}', "must not be negative"),
        ('{"default": {"usd_per_day": "1"}}', "must be a number"),
        ('{"default": {"concurrent_runs": 1.5}}', "whole number"),
        ('{"default": {"concurrent_runs": true}}', "must be a number"),
        ('{"default": {"tokens_per_day": 1e300}}', "too large"),
        ('{"tiers": {"pro": 3}}', "tiers.pro must be an object"),
    ],
)
def test_bad_limits_name_the_variable(text: str, says: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        LimitsConfig.parse(text)
    assert str(caught.value).startswith("AGENTLOOP_LIMITS")
    assert says in str(caught.value)


def test_tiers_go_over_the_default_and_null_lifts_a_limit() -> None:
    config = LimitsConfig.parse(
        '{"default": {"usd_per_day": 1.5, "concurrent_runs": 2}, '
        '"tiers": {"pro": {"usd_per_day": 10, "concurrent_runs": null}}}'
    )
    assert config.for_tier(None) == {"usd_per_day": 1_500_000, "concurrent_runs": 2}
    assert config.for_tier("unknown") == config.for_tier(None)
    assert config.for_tier("pro") == {"usd_per_day": 10_000_000}


# -- admitting and settling ------------------------------------------------------------------


async def test_a_reservation_is_clamped_to_what_is_left(store: Store, clock: Clock) -> None:
    q = quota(store, clock, usd_per_day=0.025, tokens_per_day=2500)
    first = await q.admit(ALICE, want())
    second = await q.admit(ALICE, want())
    third = await q.admit(ALICE, want())
    assert first is not None
    assert second is not None
    assert third is not None
    assert (first.tokens, first.micro, first.tokens_bound, first.usd_bound) == (
        1000,
        10_000,
        False,
        False,
    )
    assert (third.tokens, third.micro, third.tokens_bound, third.usd_bound) == (
        500,
        5_000,
        True,
        True,
    )
    after = third.usage["usd_per_day"]  # as the third admission left it
    assert (after.limit, after.used, after.remaining) == (0.025, 0.025, 0)
    assert third.usage["tokens_per_day"].used == 2500
    with pytest.raises(QuotaExceeded) as caught:
        await q.admit(ALICE, want())
    refused = caught.value
    assert refused.param in ("usd_per_day", "tokens_per_day")
    # Held by runs in flight, not spent: try again soon, not tomorrow.
    assert refused.retry_after_s == 2
    assert await q.admit(BOB, want()), "another principal is unaffected"


async def test_settling_gives_back_the_unspent_part(store: Store, clock: Clock) -> None:
    q = quota(store, clock, usd_per_day=0.02, tokens_per_day=2000)
    held = await q.admit(ALICE, want())
    assert held is not None
    await q.settle(held, 300, 0.003)
    leases = await store.query(f"principal#{ALICE.id}", prefix="quota#run#")
    assert leases.records == [], "a run settled within its lease leaves no lease behind"
    usage = await q.usage(ALICE)
    assert usage["tokens_per_day"].used == 300
    assert usage["usd_per_day"].used == pytest.approx(0.003)
    assert usage["usd_per_day"].remaining == pytest.approx(0.017)
    assert usage["usd_per_day"].reset_at == int(START) - int(START) % 86400 + 86400
    # Spent to the limit: refused until the day rolls over.
    for _ in range(2):
        held = await q.admit(ALICE, want())
        assert held is not None
        await q.settle(held, held.tokens, held.micro / MICRO)
    with pytest.raises(QuotaExceeded) as caught:
        await q.admit(ALICE, want())
    midnight = int(START) - int(START) % 86400 + 86400
    assert caught.value.reset_at == midnight
    assert caught.value.retry_after_s == midnight - int(START)
    clock.now = midnight + 1
    assert await q.admit(ALICE, want()), "a new day"


async def test_the_month_holds_across_days(store: Store, clock: Clock) -> None:
    q = quota(store, clock, usd_per_month=0.03)
    for day in range(3):
        clock.now = START + day * 86400
        held = await q.admit(ALICE, want())
        assert held is not None
        await q.settle(held, 10, 0.01)
    with pytest.raises(QuotaExceeded) as caught:
        await q.admit(ALICE, want())
    assert caught.value.param == "usd_per_month"
    assert caught.value.used == pytest.approx(0.03)


async def test_concurrent_admissions_never_pass_a_limit(store: Store, clock: Clock) -> None:
    q = quota(store, clock, concurrent_runs=3, usd_per_day=1)
    results = await asyncio.gather(
        *(q.admit(ALICE, want()) for _ in range(12)), return_exceptions=True
    )
    admitted = [r for r in results if r is not None and not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, QuotaExceeded)]
    assert len(admitted) == 3
    assert len(refused) == 9
    assert {r.param for r in refused} == {"concurrent_runs"}
    assert (await q.usage(ALICE))["concurrent_runs"].used == 3
    await q.settle(admitted[0], 0, 0.0)
    assert await q.admit(ALICE, want()), "a run ended: its slot is free"


async def test_requests_per_minute(store: Store, clock: Clock) -> None:
    q = quota(store, clock, requests_per_minute=2)
    for _ in range(2):
        held = await q.admit(ALICE, want())
        assert held is not None
        await q.settle(held, 0, 0.0)
    with pytest.raises(QuotaExceeded) as caught:
        await q.admit(ALICE, want())
    assert caught.value.param == "requests_per_minute"
    minute_end = (int(START) // 60 + 1) * 60
    assert caught.value.retry_after_s == minute_end - int(START)
    clock.now = minute_end
    assert await q.admit(ALICE, want())


async def test_a_dead_processs_lease_expires(store: Store, clock: Clock) -> None:
    """Reserved and never settled (the process died): refused while its lease runs, then
    the next admission reclaims its amounts and its run slot."""
    q = quota(store, clock, concurrent_runs=1, usd_per_day=0.01)
    assert await q.admit(ALICE, want(lease_s=120))
    with pytest.raises(QuotaExceeded):
        await q.admit(ALICE, want())
    clock.now = START + 121
    held = await q.admit(ALICE, want())
    assert held is not None
    assert held.micro == 10_000, "all of the day is back"
    usage = await q.usage(ALICE)
    assert usage["concurrent_runs"].used == 1
    assert usage["usd_per_day"].used == pytest.approx(0.01)
    await q.settle(held, 5, 0.002)
    assert (await q.usage(ALICE))["usd_per_day"].used == pytest.approx(0.002)


async def test_a_run_that_outlived_its_lease_still_pays(store: Store, clock: Clock) -> None:
    q = quota(store, clock, usd_per_day=0.01)
    late = await q.admit(ALICE, want(lease_s=10))
    assert late is not None
    clock.now = START + 11
    other = await q.admit(ALICE, want(usd=0.001))  # reclaims the late run's lease
    assert other is not None
    await q.settle(late, 100, 0.004)
    await q.settle(other, 0, 0.0)
    usage = await q.usage(ALICE)
    assert usage["usd_per_day"].used == pytest.approx(0.004), "charged once, not reserved"


async def test_overrides_and_tiers(store: Store, clock: Clock) -> None:
    q = quota(store, clock, usd_per_day=0.01, concurrent_runs=1)
    await q.set_limits(ALICE.id, {"usd_per_day": 0.5, "concurrent_runs": None})
    usage = await q.usage(ALICE)
    assert set(usage) == {"usd_per_day"}
    assert usage["usd_per_day"].limit == 0.5
    assert set(await q.usage(PRO)) == {"usd_per_day"}
    assert (await q.usage(PRO))["usd_per_day"].limit == 5
    with pytest.raises(LimitValueError):
        await q.set_limits(ALICE.id, {"usd_per_week": 1})
    await q.set_limits(ALICE.id, {})
    assert set(await q.usage(ALICE)) == {"usd_per_day", "concurrent_runs"}


async def test_no_limits_for_the_principal_no_reservation(store: Store, clock: Clock) -> None:
    q = quota(store, clock)
    assert await q.admit(ALICE, want()) is None


async def test_a_dollar_limit_needs_a_price(store: Store, clock: Clock) -> None:
    q = quota(store, clock, usd_per_day=1)
    with pytest.raises(QuotaUnpriced):
        await q.admit(ALICE, want(usd=None))
    assert await quota(store, clock, tokens_per_day=100).admit(ALICE, want(usd=None))


async def test_dynamodb_calls_per_request(
    request: pytest.FixtureRequest, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two calls before the first model call (a query, a transaction) and one after."""
    aws_env(monkeypatch)
    moto: Moto = request.getfixturevalue("serial_moto")
    store = dynamodb_store(moto, moto.create_table(), clock)
    q = quota(store, clock, usd_per_day=1, concurrent_runs=2, requests_per_minute=5)
    counter = CallCounter(store)
    held = await q.admit(ALICE, want())
    assert counter.take() == {"Query": 1, "TransactWriteItems": 1}
    assert held is not None
    await q.settle(held, 10, 0.0001)
    assert counter.take() == {"TransactWriteItems": 1}
    await store.close()
