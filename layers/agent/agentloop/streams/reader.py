"""Replaying a thread's stream: what was logged (all of it, or after a sequence number), then
the frames as they are logged, until the run's log ends.

The items written so far are read a page at a time; then the next item is polled every
``POLL_S`` (a ``get``; when it is not there yet, a ``get`` of the head says whether more will
come). The replay stops when the log has ended and every item is read, when the thread's
head names another run, when an item the head counts is missing (a log that broke), when the
reader's client has left (``stop``), or when ``stop_at`` (the reader's own deadline) comes:
the client then reconnects with the last id it got.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agentloop.limits import CancelToken
from agentloop.streams import keys
from agentloop.streams.log import Head, StreamLog

POLL_S = 0.15


@dataclass
class Replay:
    """One reader's place in a run's log."""

    log: StreamLog
    owner: str
    thread_id: str
    head: Head
    after: int = 0
    """Frames up to this sequence number are not sent (the client has them)."""
    number: int = 0
    """The next item to read."""
    partial: str | None = field(default=None, repr=False)

    def frames_of(self, data: dict[str, Any]) -> Iterator[bytes]:
        """The whole frames an item completes, after ``after``."""
        texts, first = data.get("f"), data.get("s")
        if not isinstance(texts, list) or not isinstance(first, int):
            return
        self.number += 1
        last = len(texts) - 1
        for index, text in enumerate(texts):
            if self.partial is not None and index == 0:
                text, self.partial = self.partial + str(text), None
            if index == last and data.get("c") is True:
                self.partial = str(text)
                return
            if first + index > self.after:
                yield keys.to_bytes(str(text))


async def replay(
    replay: Replay,
    stop: CancelToken,
    stop_at: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    poll_s: float = POLL_S,
) -> AsyncIterator[bytes]:
    """The run's frames from ``replay``'s place on, live until its log ends (module doc)."""
    frames: list[bytes] = []
    whole = await _logged(replay, frames)
    for frame in frames:
        yield frame
    if not whole:
        return
    while not stop.cancelled and clock() < stop_at:
        item = await _next_item(replay)
        if item is None:
            return
        if item is _WAIT:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), poll_s)
            continue
        for frame in replay.frames_of(item):
            yield frame


_WAIT: dict[str, Any] = {}
"""What ``_next_item`` gives while the next item is not written yet."""


async def _logged(replay: Replay, frames: list[bytes]) -> bool:
    """The frames logged so far (into ``frames``), read a page at a time; False if the log
    has a gap (it broke there: nothing after it is read)."""
    log, cursor = replay.log, None
    while True:
        found, cursor = await log.items(replay.owner, replay.thread_id, replay.head.run_key, cursor)
        for number, data in found:
            if number != replay.number:
                return False
            frames.extend(replay.frames_of(data))
        if cursor is None:
            return True


async def _next_item(replay: Replay) -> dict[str, Any] | None:
    """The next item; ``_WAIT`` while the run goes on without it; None when the replay is
    over (the log ended and all of it was read, broke, or was replaced or expired)."""
    log, run_key = replay.log, replay.head.run_key
    item = await log.item(replay.owner, replay.thread_id, run_key, replay.number)
    if item is not None:
        return item
    head = await log.head(replay.owner, replay.thread_id)
    if head is None or head.run_key != run_key:
        return None
    if head.live(log.clock()):
        return _WAIT
    if replay.number >= head.items:  # ended, and all of it read
        return None
    # the last items may have been written after the first get: counted, they are there
    return await log.item(replay.owner, replay.thread_id, run_key, replay.number)
