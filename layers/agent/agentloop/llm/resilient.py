"""Retries, a fallback chain and rate-limit memory around the provider adapters.

A chat backend is judged on its worst minute. Transient failures (429, 5xx,
timeouts, dropped connections, a stream cut before any text reached the client) are
retried with jittered backoff that honours ``retry-after`` and never sleeps past
the deadline; a model that stays down or rate-limited is swapped for the next one
in the configured chain. What is known about a model's rate limits (from its
``x-ratelimit-*`` headers or a 429) is remembered for the life of the process, so a
warm Lambda does not try a model it knows is exhausted. Errors that retrying cannot
fix (bad key, unknown model, a bad request) are raised at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from agentloop.limits import Deadline
from agentloop.llm.base import ChatModel, ModelCall, ModelTurn, ProviderError, TextSink

logger = logging.getLogger(__name__)

MIN_CALL_S = 1.0
"""A retry is only worth it if at least this much time is left for the call itself."""
_NOT_RETRIED = {"auth", "not_found", "bad_request", "context_length", "tool_use_failed"}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_reset(value: str) -> float | None:
    """Seconds in a reset header: ``2m59.56s``, ``7.66s``, ``120ms``, ``1h2m`` or ``3``."""
    value = value.strip()
    try:
        return float(value)
    except ValueError:
        pass
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(number) * scale[unit] for number, unit in parts)


class RateLimitMemory:
    """Until when each model (``provider:model``) is known to be rate-limited."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._until: dict[str, float] = {}

    def exhausted_for(self, spec: str) -> float:
        """Seconds until ``spec`` may be used again (0 when it may be used now)."""
        return max(0.0, self._until.get(spec, 0.0) - self._clock())

    def note_headers(self, spec: str, headers: dict[str, str]) -> None:
        """Remember an exhausted request or token allowance until its reset."""
        for kind in ("requests", "tokens"):
            remaining = headers.get(f"x-ratelimit-remaining-{kind}")
            reset = parse_reset(headers.get(f"x-ratelimit-reset-{kind}", ""))
            if remaining is not None and remaining.strip() == "0" and reset:
                self._block(spec, reset)

    def note_rate_limited(self, spec: str, retry_after: float | None) -> None:
        self._block(spec, retry_after if retry_after is not None else 1.0)

    def _block(self, spec: str, seconds: float) -> None:
        self._until[spec] = max(self._until.get(spec, 0.0), self._clock() + seconds)

    def clear(self) -> None:
        self._until.clear()


RATE_LIMITS = RateLimitMemory()
"""Process-wide: a warm Lambda container keeps what it learned between requests."""


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    """Calls to one model before the chain moves on (the first call included)."""
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0

    def backoff(self, attempt: int) -> float:
        """Full jitter: uniform in [0, base * 2**(attempt-1)], capped."""
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        return random.uniform(0, ceiling)


SwitchHook = Callable[[str, str, str], None]
"""Called with (from_model, to_model, reason) when the chain moves on."""


@dataclass
class ResilientModel:
    """A :class:`ChatModel` over an ordered chain of models; sticks to the one that works."""

    chain: Sequence[ChatModel]
    deadline: Deadline = field(default_factory=Deadline)
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    memory: RateLimitMemory = field(default_factory=lambda: RATE_LIMITS)
    on_switch: SwitchHook | None = None
    keep_s: float = 0.0
    """Time the caller keeps back before the deadline (for its final answer)."""
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    _current: int = 0

    def __post_init__(self) -> None:
        if not self.chain:
            raise ValueError("a model chain needs at least one model")

    @property
    def spec(self) -> str:
        return self.chain[self._current].spec

    async def complete(self, call: ModelCall, on_text: TextSink) -> ModelTurn:
        last: ProviderError | None = None
        for index in range(self._current, len(self.chain)):
            model = self.chain[index]
            is_last = index == len(self.chain) - 1
            wait = self.memory.exhausted_for(model.spec)
            if wait > 0 and not is_last:
                self._switch(index, f"{model.spec} is rate-limited for another {wait:.0f} s")
                continue
            try:
                return await self._attempts(model, call, on_text)
            except ProviderError as exc:
                if exc.kind in _NOT_RETRIED or exc.partial_text or is_last:
                    raise
                last = exc
                self._switch(index, exc.message)
        assert last is not None
        raise last

    def _switch(self, index: int, reason: str) -> None:
        self._current = index + 1
        logger.warning("switching model: %s", reason)
        if self.on_switch is not None:
            self.on_switch(self.chain[index].spec, self.chain[index + 1].spec, reason)

    async def _attempts(self, model: ChatModel, call: ModelCall, on_text: TextSink) -> ModelTurn:
        """Call one model, retrying what is transient while time allows."""
        attempt = 0
        while True:
            attempt += 1
            sent_text = False

            async def tracked(text: str) -> None:
                nonlocal sent_text
                sent_text = True
                await on_text(text)

            try:
                turn = await model.complete(call, tracked)
            except ProviderError as exc:
                if exc.kind == "rate_limit":
                    self.memory.note_rate_limited(model.spec, exc.retry_after)
                self.memory.note_headers(model.spec, exc.headers)
                if exc.kind in _NOT_RETRIED or sent_text or not exc.retryable:
                    raise
                delay = exc.retry_after if exc.retry_after is not None else None
                if delay is None:
                    delay = self.policy.backoff(attempt)
                if attempt >= self.policy.max_attempts or delay > self.policy.max_delay_s:
                    raise
                if delay + MIN_CALL_S > self.deadline.remaining() - self.keep_s:
                    raise ProviderError(
                        exc.kind,
                        f"{exc.message} (not retried: waiting {delay:.1f} s would pass the "
                        "deadline)",
                        status=exc.status,
                        retry_after=exc.retry_after,
                        headers=exc.headers,
                    ) from exc
                logger.info(
                    "retrying %s in %.2f s after %s (attempt %d)",
                    model.spec,
                    delay,
                    exc.kind,
                    attempt + 1,
                )
                await self.sleep(delay)
                time_left = self.deadline.cap(call.timeout, keep=self.keep_s)
                call = dataclasses.replace(call, timeout=max(MIN_CALL_S, time_left))
                continue
            self.memory.note_headers(model.spec, turn.headers)
            return turn
