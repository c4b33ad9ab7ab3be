"""``ThreadStore``: a principal's conversations over the store (``keys`` has the layout).

Every change of a thread is one ``transact`` conditioned on its head's version, so two
writers never both succeed on the same state: the loser reads the head again and retries.
Appends carry a key (a run's id and round, say) remembered in the head, so an append retried
after an answer that was lost is not written twice.

Retention: every item of a thread expires. A new segment expires ``ttl`` after its append;
the segments already there are renewed to that too when theirs is within ``renew_slack_s``
of it (so at most once a day by default, not on every append), and the head and the list
entry expire with the earliest segment: a thread disappears whole, ``ttl`` (less at most the
slack) after its last append, never with a message missing.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentloop.store import Add, Conflict, Delete, Op, Put, Record, Store, StoreUnavailable
from agentloop.store.base import MAX_QUERY_LIMIT, MAX_TRANSACT_OPS
from agentloop.threads import keys, lock
from agentloop.threads.errors import InvalidThreadInput, ThreadExists, ThreadNotFound
from agentloop.threads.info import ThreadInfo, checked_title, title_from
from agentloop.threads.segments import decode_segments, encode_messages, segment_data

DAY_S = 86_400
DEFAULT_TTL_DAYS = 30
RECENT_KEYS = 32
"""Append keys a head remembers (a retried append is recognised among the last 32)."""
ATTEMPTS = 40
"""Tries of one change that keeps meeting concurrent ones, before a 503."""
MAX_LIST_LIMIT = 100


@dataclass(frozen=True)
class Thread:
    """A thread with its messages, in the agent's wire form (``models.to_wire``)."""

    info: ThreadInfo
    messages: list[dict[str, Any]]


@dataclass(frozen=True)
class ThreadPage:
    """One page of an owner's threads, newest first; ``cursor`` None when none follow."""

    threads: list[ThreadInfo]
    cursor: str | None


class ThreadStore:
    """Threads owned by principals (``owner`` is always ``Principal.id``)."""

    def __init__(
        self,
        store: Store,
        *,
        ttl_days: int = DEFAULT_TTL_DAYS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.ttl_s = ttl_days * DAY_S
        self.renew_slack_s = min(DAY_S, self.ttl_s // 10)
        self.clock = clock

    # -- reading ------------------------------------------------------------------------------

    async def get(self, owner: str, thread_id: str) -> ThreadInfo:
        """The thread's metadata; ThreadNotFound unless ``owner`` has it."""
        return ThreadInfo.from_data((await self._head(owner, thread_id)).data)

    async def list_threads(
        self, owner: str, *, limit: int = 20, cursor: str | None = None
    ) -> ThreadPage:
        """The owner's threads, last changed first (InvalidCursor for a cursor this query
        did not hand out)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_LIST_LIMIT:
            raise InvalidThreadInput(f"limit must be 1 to {MAX_LIST_LIMIT}")
        page = await self.store.query(
            keys.list_partition(owner), limit=limit, after=cursor, newest_first=True
        )
        return ThreadPage([ThreadInfo.from_data(r.data) for r in page.records], page.cursor)

    async def load(self, owner: str, thread_id: str) -> Thread:
        """The thread's metadata and every message appended to it, in order."""
        head = await self._head(owner, thread_id)
        count = int(head.data["segments"])
        partition = keys.thread_partition(owner, thread_id)
        found: list[Record] = []
        after: str | None = None
        while len(found) < count:
            page = await self.store.query(
                partition, prefix=keys.SEGMENT_PREFIX, limit=MAX_QUERY_LIMIT, after=after
            )
            found += [r for r in page.records if keys.segment_number(r.sort) < count]
            after = page.cursor
            if after is None:
                break
        if len(found) != count:  # deleted meanwhile (or the store lost an item)
            await self._head(owner, thread_id)
            raise StoreUnavailable("the thread could not be read whole", partition)
        info = ThreadInfo.from_data(head.data)
        return Thread(info, decode_segments(r.data for r in found))

    # -- changing -----------------------------------------------------------------------------

    async def create(
        self, owner: str, *, thread_id: str | None = None, title: str | None = None
    ) -> ThreadInfo:
        """A new empty thread of ``owner``: its id made here (192 random bits) unless
        ``thread_id`` is chosen (ThreadExists if the owner has it already)."""
        chosen = thread_id is not None
        thread_id = keys.new_thread_id() if thread_id is None else thread_id
        if not keys.is_thread_id(thread_id):
            raise InvalidThreadInput("a thread id is 1 to 128 letters, digits, _ or -")
        now = self.clock()
        expires = self._expiry(now)
        sort = keys.list_sort(_micros(now), thread_id)
        data: dict[str, Any] = {
            "id": thread_id,
            "owner": owner,
            "title": None if title is None else checked_title(title),
            "created_at": now,
            "updated_at": now,
            "messages": 0,
            "segments": 0,
            "list_sort": sort,
            "segments_expire": None,
            "recent": [],
        }
        partition = keys.thread_partition(owner, thread_id)
        try:
            await self.store.transact(
                [
                    Put(partition, keys.META, data, expires, if_absent=True),
                    Put(keys.list_partition(owner), sort, _entry(data), expires),
                ]
            )
        except Conflict:
            if chosen:
                raise ThreadExists(f"thread {thread_id!r} exists") from None
            raise
        return ThreadInfo.from_data(data)

    async def rename(self, owner: str, thread_id: str, title: str) -> ThreadInfo:
        """Set the thread's title (InvalidThreadInput for an empty or too long one)."""
        title = checked_title(title)
        for attempt in range(ATTEMPTS):
            head = await self._head(owner, thread_id)
            data = {**head.data, "title": title}
            entry = Put(
                keys.list_partition(owner), data["list_sort"], _entry(data), head.expires_at
            )
            meta = Put(head.partition, keys.META, data, head.expires_at, if_version=head.version)
            try:
                await self.store.transact([meta, entry])
                return ThreadInfo.from_data(data)
            except Conflict:
                await _backoff(attempt)
        raise _busy(thread_id)

    async def delete(self, owner: str, thread_id: str) -> None:
        """Delete the thread, its messages and its claim. It is gone for every reader at
        once (its head and list entry go in one transaction); the rest follows."""
        for attempt in range(ATTEMPTS):
            head = await self._head(owner, thread_id)
            try:
                await self.store.transact(
                    [
                        Delete(head.partition, keys.META, if_version=head.version),
                        Delete(keys.list_partition(owner), head.data["list_sort"]),
                    ]
                )
                break
            except Conflict:
                await _backoff(attempt)
        else:
            raise _busy(thread_id)
        await self.store.delete_partition(head.partition)

    async def append(
        self, owner: str, thread_id: str, messages: Sequence[Mapping[str, Any]], *, key: str
    ) -> ThreadInfo:
        """Add a run's new messages (wire form) at the thread's end, all or none.

        ``key`` names this append (1 to 128 printable ASCII characters): an append whose key
        is among the thread's last 32 is not written again. Concurrent appends each land
        once, in some order. InvalidThreadInput for messages that are not wire-form messages
        or hold more than ``segments.MAX_APPEND_SEGMENTS`` segments."""
        if not keys.is_append_key(key):
            raise InvalidThreadInput("key: 1 to 128 printable ASCII characters, no space")
        segments = segment_data(key, encode_messages(messages))
        title = title_from(messages)
        for attempt in range(ATTEMPTS):
            head = await self._head(owner, thread_id)
            if key in head.data["recent"]:
                return ThreadInfo.from_data(head.data)
            now = self.clock()
            renewed = await self._renew_if_due(head, now)
            data, ops = self._append_ops(head, segments, len(messages), title, now, renewed)
            try:
                await self.store.transact(ops)
                return ThreadInfo.from_data(data)
            except Conflict:
                await _backoff(attempt)
        raise _busy(thread_id)

    # -- one run at a time --------------------------------------------------------------------

    async def claim(self, owner: str, thread_id: str, run_id: str, lease_s: float) -> int:
        """Claim the thread for ``run_id`` for ``lease_s`` seconds (renewed if it holds the
        claim already); when the lease ends, epoch seconds. ThreadNotFound unless ``owner``
        has the thread; ThreadBusy while another run's lease lasts."""
        until = lock.lease_end(self.clock, lease_s)
        head = await self._head(owner, thread_id)
        return await lock.take(self.store, head.partition, run_id, until)

    async def release(self, owner: str, thread_id: str, run_id: str) -> bool:
        """Give back ``run_id``'s claim; False if it held none any more."""
        if not keys.is_thread_id(thread_id):
            return False
        return await lock.give_back(self.store, keys.thread_partition(owner, thread_id), run_id)

    # -- the parts ----------------------------------------------------------------------------

    async def _head(self, owner: str, thread_id: str) -> Record:
        if not keys.is_thread_id(thread_id):
            raise ThreadNotFound
        head = await self.store.get(keys.thread_partition(owner, thread_id), keys.META)
        if head is None or head.data.get("owner") != owner:
            raise ThreadNotFound
        return head

    def _expiry(self, now: float) -> int:
        return int(now) + self.ttl_s

    async def _renew_if_due(self, head: Record, now: float) -> int | None:
        """Renew every segment's expiry when the earliest is within the slack of a new one's;
        the segments' expiry after this (None: it was not due)."""
        current, fresh = head.data["segments_expire"], self._expiry(now)
        if current is None or current >= fresh - self.renew_slack_s:
            return None
        count = int(head.data["segments"])
        adds = [
            Add(head.partition, keys.segment_sort(n), {"renewed": 1}, expires_at=fresh)
            for n in range(count)
        ]
        for start in range(0, len(adds), MAX_TRANSACT_OPS):
            await self.store.add_many(adds[start : start + MAX_TRANSACT_OPS])
        return fresh

    def _append_ops(
        self,
        head: Record,
        segments: list[dict[str, Any]],
        count: int,
        title: str | None,
        now: float,
        renewed: int | None,
    ) -> tuple[dict[str, Any], list[Op]]:
        """The head as it will be after the append, and the one transaction that writes it."""
        old, fresh = head.data, self._expiry(now)
        expires = renewed or old["segments_expire"] or fresh
        first = int(old["segments"])
        data = {
            **old,
            "title": old["title"] or title,
            "updated_at": now,
            "messages": int(old["messages"]) + count,
            "segments": first + len(segments),
            "list_sort": keys.list_sort(_micros(now), str(old["id"])),
            "segments_expire": expires,
            "recent": [*old["recent"], segments[0]["k"]][-RECENT_KEYS:],
        }
        owner_list = keys.list_partition(str(old["owner"]))
        ops: list[Op] = [Put(head.partition, keys.META, data, expires, if_version=head.version)]
        ops += [
            Put(head.partition, keys.segment_sort(first + i), segment, fresh)
            for i, segment in enumerate(segments)
        ]
        if old["list_sort"] != data["list_sort"]:
            ops.append(Delete(owner_list, old["list_sort"]))
        ops.append(Put(owner_list, data["list_sort"], _entry(data), expires))
        return data, ops


def _entry(head: Mapping[str, Any]) -> dict[str, Any]:
    """A thread's entry in its owner's list: what the list shows."""
    return {k: head[k] for k in ("id", "title", "created_at", "updated_at", "messages")}


def _micros(now: float) -> int:
    return max(0, int(now * 1_000_000))


async def _backoff(attempt: int) -> None:
    """A short random pause before another try, growing with the tries (to 50 ms)."""
    await asyncio.sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))


def _busy(thread_id: str) -> StoreUnavailable:
    return StoreUnavailable("the store is busy", f"thread {thread_id!r} kept changing")
