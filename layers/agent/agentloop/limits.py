"""What bounds a run: the token budget, the deadline and cancellation.

One of each is created per top-level request and shared, as the same objects, by
every nested run (``ask_llm``), so a sub-agent can never spend or wait past what
the whole request was given.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Protocol

from agentloop.models import Usage


class TokenBudget:
    """Tokens one request may spend, across every model call at every depth.

    Calls are checked *before* they are made, with an estimate, and charged after
    with the provider's figures; so a run can overshoot by at most one call's
    estimation error. ``final_reserve`` tokens are kept back for the final answer:
    ordinary turns cannot spend them. ``reserve()`` lets concurrent sub-agents
    claim their share before they start.
    """

    def __init__(self, limit: int, final_reserve: int = 0) -> None:
        if limit < 1:
            raise ValueError("a token budget must be at least 1 token")
        self.limit = limit
        self.final_reserve = min(final_reserve, limit // 4)
        self.used = 0
        self.reserved = 0
        self.usage = Usage()

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)

    def available(self, *, final: bool = False) -> int:
        """Tokens a new call may plan to spend now."""
        held = self.reserved + (0 if final else self.final_reserve)
        return max(0, self.limit - self.used - held)

    def allows(self, estimate: int, *, final: bool = False) -> bool:
        return estimate <= self.available(final=final)

    def charge(self, usage: Usage) -> None:
        self.used += usage.total_tokens
        self.usage = self.usage + usage

    def reserve(self, tokens: int) -> int:
        """Hold back up to ``tokens`` for a caller that will spend them later; returns the grant."""
        granted = max(0, min(tokens, self.available()))
        self.reserved += granted
        return granted

    def release(self, tokens: int) -> None:
        self.reserved = max(0, self.reserved - tokens)


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

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()
