"""Where a thread's items live in the store, and which ids and keys are acceptable.

Every item of one thread is in one partition, ``thread#<owner>#<thread id>``: its head
(``meta``), its message segments (``seg#<n>``, n zero-padded, so sort order is append
order) and its run claim (``lock``). A thread is therefore addressed through its owner: a
principal asking for an id it does not own reaches a partition that is empty. The owner's
list is one more partition, ``threads#<owner>``, with one entry per thread sorted by the
time it was last changed (``<microseconds, zero-padded>#<thread id>``), so DynamoDB's
per-partition Query gives it newest first, a page at a time.
"""

from __future__ import annotations

import hashlib
import re
import secrets

META, LOCK, SEGMENT_PREFIX = "meta", "lock", "seg#"
SEGMENT_DIGITS = 9
ID_PREFIX = "th_"
ID_RANDOM_BYTES = 24
"""192 random bits in every id this layer makes (the issue asks for at least 128)."""
_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_APPEND_KEY = re.compile(r"[\x21-\x7e]{1,128}")
MAX_OWNER_KEY_BYTES = 256
"""An owner id longer than this (an IAM ARN may have 2048 characters) is keyed by its digest,
so a key stays under DynamoDB's 1024 bytes."""


def new_thread_id() -> str:
    return ID_PREFIX + secrets.token_urlsafe(ID_RANDOM_BYTES)


def is_thread_id(value: object) -> bool:
    """Whether ``value`` could name a thread (letters, digits, ``_`` and ``-``, 1 to 128):
    anything else is answered as a thread that does not exist."""
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def is_append_key(value: object) -> bool:
    """An append's idempotency key: 1 to 128 printable ASCII characters, no space."""
    return isinstance(value, str) and _APPEND_KEY.fullmatch(value) is not None


def owner_key(owner: str) -> str:
    """The owner's id as it appears in keys (a digest when it is long)."""
    if len(owner.encode("utf-8")) <= MAX_OWNER_KEY_BYTES:
        return owner
    return "sha256:" + hashlib.sha256(owner.encode("utf-8")).hexdigest()


def thread_partition(owner: str, thread_id: str) -> str:
    return f"thread#{owner_key(owner)}#{thread_id}"


def list_partition(owner: str) -> str:
    return f"threads#{owner_key(owner)}"


def list_sort(updated_us: int, thread_id: str) -> str:
    return f"{updated_us:017d}#{thread_id}"


def segment_sort(number: int) -> str:
    return f"{SEGMENT_PREFIX}{number:0{SEGMENT_DIGITS}d}"


def segment_number(sort: str) -> int:
    return int(sort.removeprefix(SEGMENT_PREFIX))
