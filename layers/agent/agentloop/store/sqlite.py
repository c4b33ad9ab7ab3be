"""The embedded backend: one SQLite file, WAL mode, a connection per worker thread.

Writes run in ``BEGIN IMMEDIATE`` transactions, so a read-check-write (a condition, a limit)
is atomic against other threads and other processes on the same file; ``busy_timeout`` lets
a writer wait for another's lock instead of failing. Expired rows are invisible to reads,
replaced by writes, and swept now and then.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentloop.store import checks
from agentloop.store.base import (
    Add,
    Conflict,
    Delete,
    LimitExceeded,
    Op,
    Page,
    Put,
    Record,
    StoreUnavailable,
)
from agentloop.store.versions import next_version

SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    pk TEXT NOT NULL,
    sk TEXT NOT NULL,
    data TEXT NOT NULL,
    counters TEXT NOT NULL,
    version INTEGER NOT NULL,
    expires_at INTEGER,
    PRIMARY KEY (pk, sk)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS items_expiry ON items (expires_at) WHERE expires_at IS NOT NULL;
"""
_LIVE = "(expires_at IS NULL OR expires_at > ?)"
_COLUMNS = "pk, sk, data, counters, version, expires_at"
SWEEP_EVERY = 500
"""Writes between two sweeps of expired rows (each deletes at most SWEEP_BATCH)."""
SWEEP_BATCH = 500


def _record(row: tuple[Any, ...]) -> Record:
    pk, sk, data, counters, version, expires_at = row
    return Record(pk, sk, json.loads(data), json.loads(counters), version, expires_at)


class SqliteBackend:
    """The store in a SQLite file (created with its folder at the first call)."""

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout_s: float = 10.0,
    ) -> None:
        self.path = path
        self.clock = clock
        self.busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._closed = False
        self._set_up = False
        self._writes = 0

    # -- connections and errors ------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        with self._lock:  # one thread at a time opens, and the first sets the file up
            if self._closed:
                raise StoreUnavailable("the store is closed")
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
            )
            self._connections.append(conn)
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            conn.execute("PRAGMA synchronous = NORMAL")
            if not self._set_up:
                # Switching to WAL needs the file to itself: done once, before any other
                # connection of this process uses it (the mode stays with the file).
                conn.execute("PRAGMA journal_mode = WAL")
                conn.executescript(SCHEMA)
                self._set_up = True
        self._local.conn = conn
        return conn

    @contextmanager
    def _guard(self) -> Iterator[sqlite3.Connection]:
        """The connection; SQLite's and the file system's failures as StoreUnavailable."""
        try:
            yield self._connection()
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(
                "the store is unavailable", f"sqlite {self.path}: {type(exc).__name__}: {exc}"
            ) from exc

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that holds the file's write lock from its first statement."""
        with self._guard() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        self._writes += 1
        if self._writes % SWEEP_EVERY == 0:
            self.sweep()

    def sweep(self) -> int:
        """Delete up to SWEEP_BATCH expired rows (reads never see them anyway)."""
        with self._guard() as conn:
            cursor = conn.execute(
                "DELETE FROM items WHERE (pk, sk) IN (SELECT pk, sk FROM items"
                " WHERE expires_at <= ? LIMIT ?)",
                (checks.now_seconds(self.clock), SWEEP_BATCH),
            )
            return cursor.rowcount

    def _live(self, conn: sqlite3.Connection, pk: str, sk: str) -> Record | None:
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM items WHERE pk = ? AND sk = ? AND {_LIVE}",
            (pk, sk, checks.now_seconds(self.clock)),
        ).fetchone()
        return None if row is None else _record(row)

    def _old_version(self, conn: sqlite3.Connection, pk: str, sk: str) -> int | None:
        row = conn.execute("SELECT version FROM items WHERE pk = ? AND sk = ?", (pk, sk)).fetchone()
        return None if row is None else int(row[0])

    # -- operations ---------------------------------------------------------------------------

    def get(self, partition: str, sort: str) -> Record | None:
        checks.check_key(partition, sort)
        with self._guard() as conn:
            return self._live(conn, partition, sort)

    def put(self, op: Put) -> Record:
        text = checks.check_put(op)
        with self._writing() as conn:
            return self._put(conn, op, text, None)

    def _put(self, conn: sqlite3.Connection, op: Put, text: str, index: int | None) -> Record:
        current = self._live(conn, op.partition, op.sort)
        version = None if current is None else current.version
        if (op.if_absent and current is not None) or (
            op.if_version is not None and op.if_version != version
        ):
            raise Conflict(op.partition, op.sort, version, index)
        new = next_version(self._old_version(conn, op.partition, op.sort))
        record = Record(op.partition, op.sort, json.loads(text), {}, new, op.expires_at)
        self._write(conn, record)
        return record

    def _write(self, conn: sqlite3.Connection, record: Record) -> None:
        conn.execute(
            f"INSERT OR REPLACE INTO items ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
            (
                record.partition,
                record.sort,
                json.dumps(record.data, separators=(",", ":")),
                json.dumps(record.counters, separators=(",", ":")),
                record.version,
                record.expires_at,
            ),
        )

    def delete(self, op: Delete) -> bool:
        checks.check_delete(op)
        with self._writing() as conn:
            return self._delete(conn, op, None)

    def _delete(self, conn: sqlite3.Connection, op: Delete, index: int | None) -> bool:
        current = self._live(conn, op.partition, op.sort)
        if op.if_version is not None and (current is None or current.version != op.if_version):
            raise Conflict(
                op.partition, op.sort, None if current is None else current.version, index
            )
        conn.execute("DELETE FROM items WHERE pk = ? AND sk = ?", (op.partition, op.sort))
        return current is not None

    def add(self, op: Add) -> Record:
        checks.check_add(op)
        with self._writing() as conn:
            return self._add(conn, op, None)

    def _add(self, conn: sqlite3.Connection, op: Add, index: int | None) -> Record:
        current = self._live(conn, op.partition, op.sort)
        counters = {} if current is None else dict(current.counters)
        over = checks.over_limit(counters, op)
        if over is not None:
            name, value = over
            limit = (op.limits or {})[name]
            raise LimitExceeded(op.partition, op.sort, name, value, op.deltas[name], limit, index)
        for name, delta in op.deltas.items():
            counters[name] = counters.get(name, 0) + delta
        expires_at = op.expires_at
        if expires_at is None and current is not None:
            expires_at = current.expires_at
        version = next_version(self._old_version(conn, op.partition, op.sort))
        data = {} if current is None else current.data
        record = Record(op.partition, op.sort, data, counters, version, expires_at)
        self._write(conn, record)
        return record

    def transact(self, ops: Sequence[Op]) -> None:
        checks.check_transact(ops)
        with self._writing() as conn:
            for index, op in enumerate(ops):
                if isinstance(op, Put):
                    self._put(conn, op, checks.encode_data(op.data), index)
                elif isinstance(op, Delete):
                    self._delete(conn, op, index)
                else:
                    self._add(conn, op, index)

    def query(
        self, partition: str, prefix: str, limit: int, after: str | None, newest_first: bool
    ) -> Page:
        checks.check_query(partition, prefix, limit)
        sql = f"SELECT {_COLUMNS} FROM items WHERE pk = ? AND {_LIVE} AND sk >= ?"
        args: list[Any] = [partition, checks.now_seconds(self.clock), prefix]
        if prefix:
            sql += " AND substr(sk, 1, ?) = ?"
            args += [len(prefix), prefix]
        if after is not None:
            last = checks.read_cursor(after, partition, prefix, newest_first)
            sql += " AND sk < ?" if newest_first else " AND sk > ?"
            args.append(last)
        sql += f" ORDER BY sk {'DESC' if newest_first else 'ASC'} LIMIT ?"
        args.append(limit + 1)
        with self._guard() as conn:
            rows = conn.execute(sql, args).fetchall()
        records = [_record(row) for row in rows[:limit]]
        cursor = None
        if len(rows) > limit:
            cursor = checks.make_cursor(partition, prefix, newest_first, records[-1].sort)
        return Page(records, cursor)

    def delete_partition(self, partition: str) -> int:
        checks.check_text("partition", partition, empty=False)
        with self._writing() as conn:
            live = conn.execute(
                f"SELECT count(*) FROM items WHERE pk = ? AND {_LIVE}",
                (partition, checks.now_seconds(self.clock)),
            ).fetchone()[0]
            conn.execute("DELETE FROM items WHERE pk = ?", (partition,))
            return int(live)

    def check(self) -> None:
        with self._guard() as conn:
            conn.execute("SELECT 1 FROM items LIMIT 1").fetchall()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
