"""The store's interface: records addressed by (partition, sort), its operations and errors.

One interface over two backends (``sqlite.py`` embedded, ``dynamodb.py`` deployed) that pass
one contract suite. A record holds a JSON object (``data``, replaced by ``put``) and integer
counters (``counters``, changed only by ``add``), a ``version`` bumped by every write (for
optimistic concurrency) and an optional ``expires_at`` (epoch seconds) after which it is
invisible to every read and treated as absent by every write, before any sweeper deletes it.
Counters are integers so both backends count exactly alike: keep money in micro-dollars.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

MAX_TRANSACT_OPS = 25
"""Most operations in one ``transact`` (DynamoDB allows 100; reservations need about 4)."""
MAX_QUERY_LIMIT = 1000


class StoreError(Exception):
    """Anything the store refuses or cannot do."""


class StoreUnavailable(StoreError):
    """The store cannot be reached or used now: fail closed (the server answers 503).

    ``str(exc)`` is safe to show; ``detail`` (the backend's own error) is for logs only.
    """

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class Rejected(StoreError, ValueError):
    """A request the store will never accept: a bad key, counter name or value, a too large
    item, a transaction that is too long or touches one item twice."""


class InvalidCursor(Rejected):
    """A cursor this store did not hand out for this query (garbage, forged, another query's)."""


class Conflict(StoreError):
    """A condition failed: the item exists (``if_absent``) or is not at ``if_version``.

    ``version`` is the item's current version, None when it is absent; ``index`` is the
    failed operation's place in a ``transact``, None outside one.
    """

    def __init__(
        self, partition: str, sort: str, version: int | None, index: int | None = None
    ) -> None:
        state = "absent" if version is None else f"at version {version}"
        super().__init__(f"conflict on ({partition!r}, {sort!r}): the item is {state}")
        self.partition, self.sort, self.version, self.index = partition, sort, version, index


class LimitExceeded(StoreError):
    """An ``add`` would take ``counter`` past ``limit``; nothing was changed."""

    def __init__(
        self,
        partition: str,
        sort: str,
        counter: str,
        current: int,
        delta: int,
        limit: int,
        index: int | None = None,
    ) -> None:
        super().__init__(
            f"{counter} of ({partition!r}, {sort!r}) is {current}; adding {delta} "
            f"would pass its limit {limit}"
        )
        self.partition, self.sort, self.counter = partition, sort, counter
        self.current, self.delta, self.limit, self.index = current, delta, limit, index


@dataclass(frozen=True)
class Record:
    """One live item as stored."""

    partition: str
    sort: str
    data: dict[str, Any]
    counters: dict[str, int]
    version: int
    expires_at: int | None = None


@dataclass(frozen=True)
class Page:
    """One page of a query. ``cursor`` None: nothing follows. A cursor may lead to an empty
    page (DynamoDB cannot always tell that the last page was the last)."""

    records: list[Record]
    cursor: str | None


@dataclass(frozen=True)
class Put:
    """Replace an item's data, counters and expiry (``if_absent`` / ``if_version``: or fail)."""

    partition: str
    sort: str
    data: Mapping[str, Any]
    expires_at: int | None = None
    if_absent: bool = False
    if_version: int | None = None


@dataclass(frozen=True)
class Delete:
    """Delete an item (``if_version``: only at that version, else Conflict)."""

    partition: str
    sort: str
    if_version: int | None = None


@dataclass(frozen=True)
class Add:
    """Add ``deltas`` to counters (missing ones start at 0), only if each result stays
    within ``limits`` (else LimitExceeded); ``expires_at`` replaces the expiry when given.
    An absent (or expired) item is created with empty data."""

    partition: str
    sort: str
    deltas: Mapping[str, int]
    limits: Mapping[str, int] | None = None
    expires_at: int | None = None


Op = Put | Delete | Add


class Backend(Protocol):
    """What a backend implements, synchronously (``Store`` runs it in a worker thread)."""

    def get(self, partition: str, sort: str) -> Record | None: ...
    def put(self, op: Put) -> Record: ...
    def delete(self, op: Delete) -> bool: ...
    def query(
        self, partition: str, prefix: str, limit: int, after: str | None, newest_first: bool
    ) -> Page: ...
    def delete_partition(self, partition: str) -> int: ...
    def add(self, op: Add) -> Record: ...
    def transact(self, ops: Sequence[Op]) -> None: ...
    def check(self) -> None: ...
    def close(self) -> None: ...


@dataclass
class Store:
    """The async store the server uses: each call runs the backend in a worker thread, so a
    blocking SQLite or boto3 call never holds up the event loop."""

    backend: Backend
    url: str = field(default="")

    async def get(self, partition: str, sort: str) -> Record | None:
        """The live item, or None."""
        return await asyncio.to_thread(self.backend.get, partition, sort)

    async def put(
        self,
        partition: str,
        sort: str,
        data: Mapping[str, Any],
        *,
        expires_at: int | None = None,
        if_absent: bool = False,
        if_version: int | None = None,
    ) -> Record:
        """Write the whole item (its counters are dropped); Conflict if a condition fails."""
        op = Put(partition, sort, data, expires_at, if_absent, if_version)
        return await asyncio.to_thread(self.backend.put, op)

    async def delete(self, partition: str, sort: str, *, if_version: int | None = None) -> bool:
        """Delete the item; True if a live one was there. Conflict if not at ``if_version``."""
        return await asyncio.to_thread(self.backend.delete, Delete(partition, sort, if_version))

    async def query(
        self,
        partition: str,
        *,
        prefix: str = "",
        limit: int = 100,
        after: str | None = None,
        newest_first: bool = False,
    ) -> Page:
        """Live items of a partition whose sort key starts with ``prefix``, in sort-key order
        (descending with ``newest_first``), at most ``limit``; ``after``: a page's cursor."""
        return await asyncio.to_thread(
            self.backend.query, partition, prefix, limit, after, newest_first
        )

    async def delete_partition(self, partition: str) -> int:
        """Delete every item of a partition (not atomic on DynamoDB); how many were there."""
        return await asyncio.to_thread(self.backend.delete_partition, partition)

    async def add(
        self,
        partition: str,
        sort: str,
        deltas: Mapping[str, int],
        *,
        limits: Mapping[str, int] | None = None,
        expires_at: int | None = None,
    ) -> Record:
        """Add to counters atomically, within ``limits``; the item as it is afterwards."""
        op = Add(partition, sort, deltas, limits, expires_at)
        return await asyncio.to_thread(self.backend.add, op)

    async def add_many(self, adds: Sequence[Add]) -> None:
        """Several ``add`` at once, all or nothing (a reservation's day and month)."""
        await self.transact(adds)

    async def transact(self, ops: Sequence[Op]) -> None:
        """Puts, deletes and adds on distinct items, all or nothing: the first failed
        condition raises (Conflict or LimitExceeded, its ``index`` naming the operation)."""
        await asyncio.to_thread(self.backend.transact, list(ops))

    async def check(self) -> None:
        """Reach the store once (StoreUnavailable if it cannot be used)."""
        await asyncio.to_thread(self.backend.check)

    async def close(self) -> None:
        await asyncio.to_thread(self.backend.close)
