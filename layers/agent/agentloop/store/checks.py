"""What both backends check before they write, and the cursors they hand out, once.

Every check raises ``Rejected`` naming what is wrong, so a caller that passed a client's
value on (a thread id, a cursor) can answer 400 instead of failing in a backend.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentloop.store.base import (
    MAX_QUERY_LIMIT,
    MAX_TRANSACT_OPS,
    Add,
    Delete,
    InvalidCursor,
    Op,
    Put,
    Rejected,
)

MAX_KEY_BYTES = 1024
"""DynamoDB's limit for a sort key (a partition key may have 2048)."""
MAX_DATA_BYTES = 350_000
"""An item's data as JSON; DynamoDB's items hold 400 KB with their keys and counters."""
MAX_COUNTER = 2**53
"""Counters, deltas and limits stay integers a JSON client reads exactly."""
MAX_EXPIRES_AT = 2**40
MAX_CURSOR_CHARS = 2048
_COUNTER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def check_key(partition: str, sort: str) -> None:
    check_text("partition", partition, empty=False)
    check_text("sort", sort, empty=False)


def check_text(what: str, value: object, *, empty: bool) -> None:
    if not isinstance(value, str):
        raise Rejected(f"{what} must be a string, not {type(value).__name__}")
    if not value and not empty:
        raise Rejected(f"{what} must not be empty")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise Rejected(f"{what} is not valid text (a lone surrogate)") from None
    if size > MAX_KEY_BYTES:
        raise Rejected(f"{what} is {size} bytes; at most {MAX_KEY_BYTES}")
    if any(ord(c) < 32 for c in value):
        raise Rejected(f"{what} must not contain control characters")


def encode_data(data: Mapping[str, Any]) -> str:
    """The data as the JSON both backends store (so both give back the same values)."""
    if not isinstance(data, Mapping) or not all(isinstance(k, str) for k in data):
        raise Rejected("data must be an object with string keys")
    try:
        text = json.dumps(dict(data), allow_nan=False, separators=(",", ":"))
        text.encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError) as exc:
        raise Rejected(f"data is not JSON: {exc}") from None
    if len(text.encode("utf-8")) > MAX_DATA_BYTES:
        raise Rejected(f"data is over {MAX_DATA_BYTES} bytes as JSON")
    return text


def check_integer(what: str, value: object, bound: int = MAX_COUNTER) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Rejected(f"{what} must be an integer, not {type(value).__name__}")
    if abs(value) > bound:
        raise Rejected(f"{what} is out of range (at most {bound} either way)")
    return value


def check_expires_at(value: int | None) -> None:
    if value is not None and check_integer("expires_at", value, MAX_EXPIRES_AT) < 0:
        raise Rejected("expires_at must not be negative")


def check_add(op: Add) -> None:
    check_key(op.partition, op.sort)
    check_expires_at(op.expires_at)
    if not isinstance(op.deltas, Mapping) or not op.deltas:
        raise Rejected("deltas must name at least one counter")
    for name, delta in op.deltas.items():
        if not isinstance(name, str) or not _COUNTER_NAME.fullmatch(name):
            raise Rejected(f"counter name {name!r}: a letter, then letters, digits or _")
        check_integer(f"delta of {name}", delta)
    for name, limit in (op.limits or {}).items():
        if name not in op.deltas:
            raise Rejected(f"limit on {name!r}, a counter this add does not change")
        check_integer(f"limit of {name}", limit)


def check_put(op: Put) -> str:
    check_key(op.partition, op.sort)
    check_expires_at(op.expires_at)
    if op.if_absent and op.if_version is not None:
        raise Rejected("if_absent and if_version exclude each other")
    if op.if_version is not None:
        check_integer("if_version", op.if_version)
    return encode_data(op.data)


def check_delete(op: Delete) -> None:
    check_key(op.partition, op.sort)
    if op.if_version is not None:
        check_integer("if_version", op.if_version)


def check_op(op: Op) -> None:
    if isinstance(op, Put):
        check_put(op)
    elif isinstance(op, Delete):
        check_delete(op)
    elif isinstance(op, Add):
        check_add(op)
    else:
        raise Rejected(f"not a store operation: {type(op).__name__}")


def check_transact(ops: Sequence[Op]) -> None:
    if not 1 <= len(ops) <= MAX_TRANSACT_OPS:
        raise Rejected(f"a transaction has 1 to {MAX_TRANSACT_OPS} operations, not {len(ops)}")
    seen: set[tuple[str, str]] = set()
    for op in ops:
        check_op(op)
        if (op.partition, op.sort) in seen:
            raise Rejected(f"a transaction touches ({op.partition!r}, {op.sort!r}) twice")
        seen.add((op.partition, op.sort))


def check_query(partition: str, prefix: str, limit: int) -> None:
    check_text("partition", partition, empty=False)
    check_text("prefix", prefix, empty=True)
    if check_integer("limit", limit) < 1 or limit > MAX_QUERY_LIMIT:
        raise Rejected(f"limit must be 1 to {MAX_QUERY_LIMIT}")


def over_limit(current: Mapping[str, int], op: Add) -> tuple[str, int] | None:
    """The first counter ``op`` would take past its limit, with its current value."""
    for name, limit in (op.limits or {}).items():
        value = current.get(name, 0)
        if value + op.deltas[name] > limit:
            return name, value
    return None


def _query_digest(partition: str, prefix: str, newest_first: bool) -> str:
    text = json.dumps([partition, prefix, newest_first])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def make_cursor(partition: str, prefix: str, newest_first: bool, last_sort: str) -> str:
    """An opaque position: the last sort key seen, bound to its query."""
    body = json.dumps([1, _query_digest(partition, prefix, newest_first), last_sort])
    return base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")


def read_cursor(cursor: object, partition: str, prefix: str, newest_first: bool) -> str:
    """The last sort key of a cursor this query handed out; InvalidCursor for anything else."""
    if not isinstance(cursor, str) or not 0 < len(cursor) <= MAX_CURSOR_CHARS:
        raise InvalidCursor("the cursor is not one this query handed out")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        version, digest, last = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise InvalidCursor("the cursor is not one this query handed out") from None
    if version != 1 or digest != _query_digest(partition, prefix, newest_first):
        raise InvalidCursor("the cursor belongs to another query")
    if not isinstance(last, str) or not last.startswith(prefix):
        raise InvalidCursor("the cursor is not one this query handed out")
    try:
        check_text("cursor", last, empty=False)
    except Rejected:
        raise InvalidCursor("the cursor is not one this query handed out") from None
    return last


def now_seconds(clock: Callable[[], float]) -> int:
    """Whole seconds (both backends compare ``expires_at`` with the same integer)."""
    return math.floor(clock())
