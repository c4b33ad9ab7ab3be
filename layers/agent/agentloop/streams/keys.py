"""Where a thread's stream log lives in the store, and how frames are packed into its items.

One partition per (owner, thread), ``stream#<owner>#<thread id>`` (the owner as the threads
key it, ``threads.keys.owner_key``): a principal asking for another's thread reaches a
partition that is empty. In it, ``head`` names the current run's log and its state, and that
run's frames are in items ``f#<run key>#<n>`` (n zero-padded, so a query gives them in
order). A new run on the thread replaces the head; the old run's items are no longer read and
expire with it.

An item holds consecutive frames as text (``f``), the first one's sequence number (``s``) and
whether its last text goes on in the next item (``c``): a frame larger than an item (a big
tool result) is cut across items, never two frames' pieces mixed.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from agentloop.threads.keys import owner_key
from agentloop.threads.segments import slices

HEAD = "head"
STOP = "stop"
"""Where a caller asks the thread's live run to stop (its ``run``: which run)."""
ITEM_DIGITS = 9
ITEM_BYTES = 300_000
"""An item's frames as stored JSON (the store allows 350 000; DynamoDB 400 KB an item)."""


def partition(owner: str, thread_id: str) -> str:
    return f"stream#{owner_key(owner)}#{thread_id}"


def new_run_key() -> str:
    return "sr_" + secrets.token_urlsafe(12)


def items_prefix(run_key: str) -> str:
    return f"f#{run_key}#"


def item_sort(run_key: str, number: int) -> str:
    return f"{items_prefix(run_key)}{number:0{ITEM_DIGITS}d}"


def item_number(sort: str) -> int:
    return int(sort.rsplit("#", 1)[1])


def to_text(frame: bytes) -> str:
    """A frame as JSON can hold it (bytes that are not UTF-8 survive the round trip)."""
    return frame.decode("utf-8", "surrogateescape")


def to_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def stored_size(text: str) -> int:
    """The bytes ``text`` takes in the stored JSON (ASCII, escapes included), with a comma."""
    return len(json.dumps(text)) + 1


def pieces(text: str, limit: int = ITEM_BYTES - 100) -> list[str]:
    """``text`` cut into pieces whose stored size is at most ``limit`` (one, usually; an
    empty frame is one empty piece). The threads' cutter, measured as frames are stored."""
    return slices(text, limit, stored_size) or [""]


def pack(frames: list[tuple[int, str]]) -> list[dict[str, Any]]:
    """The data of the items holding ``frames`` (sequence number, text), in order."""
    items: list[dict[str, Any]] = []
    current: list[str] = []
    first, size = 0, 0
    for seq, text in frames:
        parts = pieces(text)
        for index, part in enumerate(parts):
            cost = stored_size(part)
            if current and size + cost > ITEM_BYTES:
                items.append({"s": first, "f": current, "c": False})
                current, size = [], 0
            if not current:
                first = seq
            current.append(part)
            size += cost
            if index < len(parts) - 1:  # the frame goes on: close this item on its piece
                items.append({"s": first, "f": current, "c": True})
                current, size = [], 0
    if current:
        items.append({"s": first, "f": current, "c": False})
    return items
