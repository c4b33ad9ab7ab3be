"""``StreamLog``: a thread's current stream in the store (``keys`` has the layout).

The writer (``writer.py``) puts the head when its run starts (state ``live``), the items as
frames gather, and the head again when the run ends (``ended``, with the counts). A head
still ``live`` after ``until`` (the run's deadline and a margin) was left by a process that
died: it is read as ended. Every item expires ``ttl_s`` after it was written (a day).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentloop.store import Store
from agentloop.streams import keys

DAY_S = 86_400
LIVE, ENDED = "live", "ended"


@dataclass(frozen=True)
class Head:
    """Which run's log is the thread's, and how far it got."""

    run_key: str
    state: str
    frames: int
    items: int
    until: int

    def live(self, now: float) -> bool:
        return self.state == LIVE and now < self.until

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Head | None:
        """The head a record holds (None for anything this module did not write)."""
        run, state = data.get("run"), data.get("state")
        counts = [data.get(name) for name in ("frames", "items", "until")]
        if not isinstance(run, str) or state not in (LIVE, ENDED):
            return None
        if not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
            return None
        return cls(run, str(state), *(int(c) for c in counts))  # type: ignore[arg-type]

    def to_data(self) -> dict[str, Any]:
        return {
            "run": self.run_key,
            "state": self.state,
            "frames": self.frames,
            "items": self.items,
            "until": self.until,
        }


class StreamLog:
    """The stream logs of threads, owner-scoped (``owner`` is always ``Principal.id``)."""

    def __init__(
        self, store: Store, *, ttl_s: int = DAY_S, clock: Callable[[], float] = time.time
    ) -> None:
        self.store = store
        self.ttl_s = ttl_s
        self.clock = clock

    def expiry(self) -> int:
        return int(self.clock()) + self.ttl_s

    async def head(self, owner: str, thread_id: str) -> Head | None:
        """The thread's current log head (None: no run on it ever logged its stream)."""
        record = await self.store.get(keys.partition(owner, thread_id), keys.HEAD)
        return None if record is None else Head.from_data(record.data)

    async def put_head(self, owner: str, thread_id: str, head: Head) -> None:
        partition = keys.partition(owner, thread_id)
        await self.store.put(partition, keys.HEAD, head.to_data(), expires_at=self.expiry())

    async def put_item(
        self, owner: str, thread_id: str, run_key: str, number: int, data: dict[str, Any]
    ) -> None:
        partition = keys.partition(owner, thread_id)
        sort = keys.item_sort(run_key, number)
        await self.store.put(partition, sort, data, expires_at=self.expiry())

    async def ask_stop(self, owner: str, thread_id: str, run_key: str) -> None:
        """Ask the run ``run_key`` to stop, wherever it runs (its writer watches for this)."""
        partition = keys.partition(owner, thread_id)
        await self.store.put(partition, keys.STOP, {"run": run_key}, expires_at=self.expiry())

    async def stop_asked(self, owner: str, thread_id: str, run_key: str) -> bool:
        """Whether a caller asked the run ``run_key`` to stop."""
        record = await self.store.get(keys.partition(owner, thread_id), keys.STOP)
        return record is not None and record.data.get("run") == run_key

    async def item(
        self, owner: str, thread_id: str, run_key: str, number: int
    ) -> dict[str, Any] | None:
        record = await self.store.get(
            keys.partition(owner, thread_id), keys.item_sort(run_key, number)
        )
        return None if record is None else record.data

    async def items(
        self, owner: str, thread_id: str, run_key: str, cursor: str | None
    ) -> tuple[list[tuple[int, dict[str, Any]]], str | None]:
        """One page of the run's items (number, data) in order, and the next page's cursor."""
        page = await self.store.query(
            keys.partition(owner, thread_id),
            prefix=keys.items_prefix(run_key),
            limit=100,
            after=cursor,
        )
        found = [(keys.item_number(r.sort), r.data) for r in page.records]
        return found, page.cursor
