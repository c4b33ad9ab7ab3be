"""Item versions: unique per write, never reused when an item is deleted or expires.

A new item's version is the wall clock in microseconds (real time, not a store's injected
clock), and each write after that adds one at least. A client holding a version from an
item's earlier life therefore never matches the item that replaced it. Compare versions
for equality only.
"""

from __future__ import annotations

import time


def fresh_version() -> int:
    return time.time_ns() // 1000


def next_version(previous: int | None) -> int:
    """After ``previous`` (None: a new item): one more, or the clock if that is later."""
    fresh = fresh_version()
    return fresh if previous is None else max(previous + 1, fresh)
