"""TokenBudget, Deadline and CancelToken: the limits every run of one request shares."""

from __future__ import annotations

import asyncio

import pytest

from agentloop import limits
from agentloop.limits import CancelToken, Deadline, TokenBudget
from agentloop.models import Usage


class FakeClock:
    """Stands in for the ``time`` module inside ``agentloop.limits``: time moves when told."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now


class FakeLambdaContext:
    """The one method of a Lambda context that Deadline reads."""

    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(limits, "time", fake)
    return fake


# --- TokenBudget -------------------------------------------------------------------------------


def test_budget_rejects_a_limit_below_one() -> None:
    with pytest.raises(ValueError, match="at least 1 token"):
        TokenBudget(0)


def test_available_keeps_the_final_reserve_back_from_ordinary_turns() -> None:
    budget = TokenBudget(1_000, final_reserve=100)

    assert budget.final_reserve == 100
    assert budget.available() == 900
    assert budget.available(final=True) == 1_000


def test_available_without_a_final_reserve_is_the_whole_limit() -> None:
    budget = TokenBudget(1_000)

    assert budget.available() == budget.available(final=True) == 1_000


@pytest.mark.parametrize(
    ("limit", "asked", "kept"),
    [(100, 80, 25), (100, 25, 25), (100, 10, 10), (1_000, 10_000, 250), (3, 5, 0)],
)
def test_final_reserve_is_capped_at_a_quarter_of_the_limit(
    limit: int, asked: int, kept: int
) -> None:
    budget = TokenBudget(limit, final_reserve=asked)

    assert budget.final_reserve == kept
    assert budget.available() == limit - kept


def test_allows_compares_the_estimate_with_what_is_available() -> None:
    budget = TokenBudget(1_000, final_reserve=100)

    assert budget.allows(900)
    assert not budget.allows(901)
    assert budget.allows(901, final=True)
    assert budget.allows(1_000, final=True)
    assert not budget.allows(1_001, final=True)


def test_charge_accumulates_usage_and_used_tokens() -> None:
    budget = TokenBudget(1_000)

    budget.charge(Usage(prompt_tokens=100, completion_tokens=20, cached_tokens=64))
    budget.charge(Usage(prompt_tokens=150, completion_tokens=30, cached_tokens=0))

    assert budget.used == 300
    assert budget.usage == Usage(prompt_tokens=250, completion_tokens=50, cached_tokens=64)
    assert budget.remaining == 700
    assert budget.available() == 700


def test_remaining_and_available_never_go_negative_after_an_overshoot() -> None:
    budget = TokenBudget(1_000, final_reserve=200)

    budget.charge(Usage(prompt_tokens=1_500, completion_tokens=10))

    assert budget.used == 1_510
    assert budget.remaining == 0
    assert budget.available() == 0
    assert budget.available(final=True) == 0
    assert not budget.allows(1, final=True)
    assert budget.allows(0)


def test_reserve_grants_what_is_asked_when_it_is_available() -> None:
    budget = TokenBudget(1_000, final_reserve=100)

    assert budget.reserve(300) == 300
    assert budget.reserved == 300
    assert budget.available() == 600
    assert budget.available(final=True) == 700
    assert budget.remaining == 1_000, "a reservation is not spending"


def test_reserve_never_grants_more_than_is_available() -> None:
    budget = TokenBudget(1_000, final_reserve=100)
    budget.charge(Usage(prompt_tokens=400))

    first = budget.reserve(10_000)
    second = budget.reserve(1)

    assert first == 500, "the final reserve is not up for grabs"
    assert second == 0
    assert budget.reserved == 500
    assert budget.available() == 0


def test_reserve_grants_nothing_for_a_negative_request_or_after_an_overshoot() -> None:
    budget = TokenBudget(100)

    assert budget.reserve(-5) == 0
    budget.charge(Usage(prompt_tokens=150))
    assert budget.reserve(10) == 0
    assert budget.reserved == 0


def test_release_gives_tokens_back_and_never_goes_negative() -> None:
    budget = TokenBudget(1_000)
    budget.reserve(300)

    budget.release(100)
    assert budget.reserved == 200
    assert budget.available() == 800

    budget.release(10_000)
    assert budget.reserved == 0
    assert budget.available() == 1_000


# --- Deadline ----------------------------------------------------------------------------------


def test_no_deadline_means_infinite_time() -> None:
    deadline = Deadline()

    assert deadline.at is None
    assert deadline.remaining() == float("inf")
    assert deadline.cap(30.0) == 30.0
    assert deadline.cap(30.0, keep=10.0) == 30.0


def test_after_counts_from_now(clock: FakeClock) -> None:
    deadline = Deadline.after(10.0)

    assert deadline.at == 1_010.0
    assert deadline.remaining() == 10.0
    clock.now += 4.0
    assert deadline.remaining() == 6.0
    clock.now += 100.0
    assert deadline.remaining() == 0.0


def test_cap_shortens_a_timeout_to_the_time_left(clock: FakeClock) -> None:
    deadline = Deadline.after(10.0)

    assert deadline.cap(30.0) == 10.0
    assert deadline.cap(5.0) == 5.0


def test_cap_with_keep_leaves_time_over(clock: FakeClock) -> None:
    deadline = Deadline.after(10.0)

    assert deadline.cap(30.0, keep=3.0) == 7.0
    assert deadline.cap(5.0, keep=3.0) == 5.0
    assert deadline.cap(5.0, keep=8.0) == 2.0
    assert deadline.cap(5.0, keep=20.0) == 0.0


def test_cap_is_zero_once_the_deadline_has_passed(clock: FakeClock) -> None:
    deadline = Deadline.after(1.0)
    clock.now += 5.0

    assert deadline.cap(30.0) == 0.0
    assert deadline.cap(30.0, keep=2.0) == 0.0


def test_from_lambda_context_uses_the_invocation_time_left(clock: FakeClock) -> None:
    deadline = Deadline.from_lambda_context(FakeLambdaContext(12_500))

    assert deadline.at == 1_012.5
    assert deadline.remaining() == 12.5


# --- CancelToken -------------------------------------------------------------------------------


def test_cancel_token_starts_uncancelled() -> None:
    assert not CancelToken().cancelled


async def test_cancel_then_wait_returns() -> None:
    token = CancelToken()

    token.cancel()
    await token.wait()

    assert token.cancelled


async def test_a_waiter_started_before_cancel_is_woken() -> None:
    token = CancelToken()
    waiter = asyncio.create_task(token.wait())

    token.cancel()
    await waiter

    assert waiter.done()
    assert token.cancelled


def test_cancel_is_idempotent() -> None:
    token = CancelToken()

    token.cancel()
    token.cancel()

    assert token.cancelled


def test_a_cancel_token_calls_back_once_and_at_once_when_already_cancelled() -> None:
    token = CancelToken()
    calls: list[str] = []
    token.on_cancel(lambda: calls.append("first"))
    forget = token.on_cancel(lambda: calls.append("forgotten"))
    forget()
    forget()  # forgetting twice is harmless
    token.cancel()
    token.cancel()  # a second cancel calls nothing again
    assert calls == ["first"]
    token.on_cancel(lambda: calls.append("late"))()  # already cancelled: called at once
    assert calls == ["first", "late"]
    assert token.cancelled
