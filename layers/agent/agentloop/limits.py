"""What bounds a run: the token (and dollar) budget, the calls of limited tools, the deadline
and cancellation.

One of each is created per top-level request and shared, as the same objects, by
every nested run (``ask_llm``), so a sub-agent can never spend, call or wait past what
the whole request was given.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from agentloop.models import Usage


class TokenBudget:
    """Tokens one request may spend, across every model call at every depth.

    Calls are checked *before* they are made, with an estimate, and charged after
    with the provider's figures; so a run can overshoot by at most one call's
    estimation error. ``final_reserve`` tokens are kept back for the final answer:
    ordinary turns cannot spend them.

    A sub-agent gets a *share* (:meth:`share`): a child budget whose limit is tokens
    reserved from this one before it starts, so concurrent sub-agents cannot
    overshoot together and never touch the parent's final-answer reserve. A child's
    charges flow up to the root, which also keeps usage per depth and the
    characters-per-token ratio learned from the provider's figures.

    Dollars are a second dimension of the same budget: every charge carries its cost (None
    when the model has no known price, which makes the total unknown too), and with a
    ``cost_limit`` (``max_cost_usd``) calls are checked, reserved for sub-agents and kept
    back for the final answer in dollars exactly as in tokens.

    The root also holds the request's :class:`ToolCallLimits` (``tool_calls``): every run
    under it, at any depth, counts its calls there, as it charges its tokens.
    """

    def __init__(
        self,
        limit: int,
        final_reserve: int = 0,
        *,
        parent: TokenBudget | None = None,
        cost_limit: float | None = None,
        cost_final_reserve: float = 0.0,
    ) -> None:
        if limit < 0 or (limit == 0 and parent is None):
            raise ValueError("a token budget must be at least 1 token")
        self.limit = limit
        self.final_reserve = min(final_reserve, limit // 4)
        self.parent = parent
        self.used = 0
        self.reserved = 0
        self.usage = Usage()
        self.usage_by_depth: list[Usage] = []
        self.tokens_per_char = 0.25
        self.cost_limit = cost_limit
        self.cost_final_reserve_asked = cost_final_reserve
        self.cost_final_reserve = (
            0.0 if cost_limit is None else min(cost_final_reserve, cost_limit / 4)
        )
        self.cost_used = 0.0
        self.cost_reserved = 0.0
        self.cost_known = True
        """False once a call without a known price was charged: the total is then unknown."""
        self.cost_by_depth: list[float | None] = []
        self.unpriced_noticed = False
        """At the root: whether the run has said that a model has no known price."""
        self.tool_calls: ToolCallLimits | None = None
        """At the root: the request's per-tool call limits and counts (read ``root.tool_calls``)."""
        self.quota_caps: frozenset[str] = frozenset()
        """At the root: the caps the caller's quota lowered ("tokens", "usd"); running out of
        one of them ends the run with ``quota``, not ``budget``."""

    @property
    def root(self) -> TokenBudget:
        return self if self.parent is None else self.parent.root

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)

    def available(self, *, final: bool = False) -> int:
        """Tokens a new call may plan to spend now."""
        held = self.reserved + (0 if final else self.final_reserve)
        return max(0, self.limit - self.used - held)

    def allows(self, estimate: int, *, final: bool = False) -> bool:
        return estimate <= self.available(final=final)

    def charge(self, usage: Usage, depth: int = 0, cost: float | None = 0.0) -> None:
        """Count a call's ``usage`` and its ``cost`` in dollars (None: its price is unknown)."""
        tokens = usage.total_tokens
        if self.parent is not None:
            # The part of this charge that falls inside the share was already reserved there.
            self.parent.reserved = max(0, self.parent.reserved - min(tokens, self.remaining))
            if cost is not None and self.cost_limit is not None:
                spent = min(cost, self.cost_remaining or 0.0)
                self.parent.cost_reserved = max(0.0, self.parent.cost_reserved - spent)
            self.parent.charge(usage, depth, cost)
        else:
            while len(self.usage_by_depth) <= depth:
                self.usage_by_depth.append(Usage())
                self.cost_by_depth.append(0.0)
            self.usage_by_depth[depth] = self.usage_by_depth[depth] + usage
            spent_here = self.cost_by_depth[depth]
            self.cost_by_depth[depth] = (
                None if cost is None or spent_here is None else spent_here + cost
            )
        self.used += tokens
        self.usage = self.usage + usage
        if cost is None:
            self.cost_known = False
        else:
            self.cost_used += cost

    @property
    def cost_usd(self) -> float | None:
        """Dollars spent through this budget (sub-agents included); None if any is unknown."""
        return self.cost_used if self.cost_known else None

    @property
    def cost_remaining(self) -> float | None:
        if self.cost_limit is None:
            return None
        return max(0.0, self.cost_limit - self.cost_used)

    def cost_available(self, *, final: bool = False) -> float | None:
        """Dollars a new call may plan to spend now; None without a dollar limit."""
        if self.cost_limit is None:
            return None
        held = self.cost_reserved + (0.0 if final else self.cost_final_reserve)
        return max(0.0, self.cost_limit - self.cost_used - held)

    def reserve(self, tokens: int) -> int:
        """Hold back up to ``tokens`` for a caller that will spend them later; returns the grant."""
        granted = max(0, min(tokens, self.available()))
        self.reserved += granted
        return granted

    def release(self, tokens: int) -> None:
        self.reserved = max(0, self.reserved - tokens)

    def share(
        self,
        tokens: int,
        final_reserve: int = 0,
        *,
        dollars: float | None = None,
    ) -> TokenBudget:
        """A child budget of up to ``tokens``, reserved here now; :meth:`close` it when done.

        With a dollar limit, the child also gets ``dollars`` reserved - by default the same
        fraction of the dollars available as ``tokens`` is of the tokens available, so
        ``ask_llm``'s equal token shares are equal dollar shares - and the same dollar
        final-answer reserve as the top level (as ``final_reserve`` is in tokens)."""
        fraction = min(1.0, tokens / max(1, self.available()))
        granted = self.reserve(tokens)
        cost_granted = None
        available = self.cost_available()
        if available is not None:
            asked = available * fraction if dollars is None else dollars
            cost_granted = max(0.0, min(asked, available))
            self.cost_reserved += cost_granted
        return TokenBudget(
            granted,
            final_reserve,
            parent=self,
            cost_limit=cost_granted,
            cost_final_reserve=self.root.cost_final_reserve_asked,
        )

    def close(self) -> None:
        """Give the unspent part of this share back to the parent."""
        if self.parent is not None:
            self.parent.release(self.remaining)
            self.limit = self.used
            if self.cost_limit is not None:
                left = self.cost_remaining or 0.0
                self.parent.cost_reserved = max(0.0, self.parent.cost_reserved - left)
                self.cost_limit = self.cost_used

    def estimate_tokens(self, chars: int) -> int:
        """Tokens in ``chars`` characters of text, by the request's learned ratio (rounded up;
        no text, no tokens): the one estimate of prompts and of outputs not reported."""
        return int(chars * self.root.tokens_per_char) + 1 if chars > 0 else 0

    def calibrate(self, chars: int, prompt_tokens: int) -> None:
        """Learn the request's characters-per-token ratio from a provider-reported prompt."""
        if chars > 0 and prompt_tokens > 0:
            self.root.tokens_per_char = min(1.0, max(0.05, prompt_tokens / chars))


class ToolCallLimits:
    """How many calls of each limited tool one request may run, and how many it has run.

    One per top-level request, held by its budget's root, so a sub-agent's calls count against
    the same numbers as its parent's. A call is counted as it is about to run; past its tool's
    limit it is refused and not run (:meth:`take`). Only limited tools are counted.
    """

    def __init__(self, limits: Mapping[str, int], used: Mapping[str, int] | None = None) -> None:
        self.limits = dict(limits)
        self.used = {name: count for name, count in (used or {}).items() if name in self.limits}
        """Calls run so far (a continued run's include those before its pause)."""

    def take(self, name: str) -> int | None:
        """Count one call of ``name``: None if it may run, else its limit (it must not run)."""
        limit = self.limits.get(name)
        if limit is None:
            return None
        used = self.used.get(name, 0)
        if used >= limit:
            return limit
        self.used[name] = used + 1
        return None


class LambdaContextLike(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


class Deadline:
    """A point in (monotonic) time after which the request's answer is worthless.

    On Lambda it comes from the invocation's remaining time; locally there is none.
    """

    def __init__(self, at: float | None = None) -> None:
        self.at = at

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds)

    @classmethod
    def from_lambda_context(cls, context: LambdaContextLike) -> Deadline:
        return cls.after(context.get_remaining_time_in_millis() / 1000)

    def remaining(self) -> float:
        if self.at is None:
            return math.inf
        return max(0.0, self.at - time.monotonic())

    def cap(self, timeout: float, *, keep: float = 0.0) -> float:
        """``timeout`` shortened so that ``keep`` seconds are left when it runs out."""
        return max(0.0, min(timeout, self.remaining() - keep))


class CancelToken:
    """Cooperative cancellation: set by a client disconnect or a caller, read by the loop.

    The loop stops at its next safe point (it lets a tool round finish so that the
    results are kept), rather than being torn down mid-way like ``Task.cancel``.
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._callbacks: list[Callable[[], object]] = []

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self) -> None:
        if self._event.is_set():
            return
        self._event.set()
        for callback in list(self._callbacks):
            callback()

    def on_cancel(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback`` when this token is cancelled (at once if it is already); returns
        what forgets it. Cheaper than a task waiting on :meth:`wait` for each model call."""
        if self.cancelled:
            callback()
            return _nothing
        self._callbacks.append(callback)

        def forget() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return forget

    async def wait(self) -> None:
        await self._event.wait()


def _nothing() -> None:
    return None
