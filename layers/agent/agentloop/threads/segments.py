"""A run's messages as segments: items small enough for DynamoDB (400 KB an item).

An append is one JSON text (the messages in their wire form, ASCII-only) cut into slices of
at most ``SEGMENT_BYTES`` once stored (the store keeps each slice inside its own JSON, where
``"`` and ``\\`` take two bytes): a small run is one segment, a 1 MB tool result four. Each
segment names its append (``k``), its place (``i`` of ``n``) and holds its slice (``t``);
loading joins an append's slices and parses them once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from agentloop.store import StoreError
from agentloop.threads.errors import InvalidThreadInput

SEGMENT_BYTES = 300_000
"""A slice's size in the stored JSON (the store allows 350 000; DynamoDB 400 KB an item)."""
MAX_APPEND_SEGMENTS = 12
"""An append is one transaction: with its head and list entry, 12 segments (3.6 MB) stay
under DynamoDB's 4 MB a transaction and its 25 items."""
ROLES = frozenset({"system", "user", "assistant", "tool"})


def encode_messages(messages: Sequence[Mapping[str, Any]]) -> str:
    """The messages as the JSON text segments hold; InvalidThreadInput if they are not
    wire-form messages (objects with a known ``role``) or not JSON."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise InvalidThreadInput("messages must be a non-empty list of messages")
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") not in ROLES:
            raise InvalidThreadInput("each message is an object with a role")
    try:
        return json.dumps([dict(m) for m in messages], allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidThreadInput(f"messages are not JSON: {exc}") from None


def stored_size(text: str) -> int:
    """The bytes ``text`` (ASCII) takes inside the stored JSON."""
    return len(text) + text.count('"') + text.count("\\")


def slices(
    text: str, limit: int = SEGMENT_BYTES, size_of: Callable[[str], int] = stored_size
) -> list[str]:
    """``text`` cut into pieces whose stored size (``size_of``) is at most ``limit``."""
    pieces: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + limit)
        while (size := size_of(text[start:end])) > limit:
            end = start + max(1, (end - start) * limit // size)
        pieces.append(text[start:end])
        start = end
    return pieces


def segment_data(key: str, text: str) -> list[dict[str, Any]]:
    """The data of each segment of one append (InvalidThreadInput if there are too many)."""
    pieces = slices(text)
    if len(pieces) > MAX_APPEND_SEGMENTS:
        raise InvalidThreadInput(
            f"one append holds at most {MAX_APPEND_SEGMENTS * SEGMENT_BYTES} bytes of messages"
        )
    return [{"k": key, "i": i, "n": len(pieces), "t": p} for i, p in enumerate(pieces)]


def decode_segments(datas: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages of a thread's segments, in order (StoreError if they do not join up)."""
    messages: list[dict[str, Any]] = []
    parts: list[str] = []
    for data in datas:
        index, count, piece = data.get("i"), data.get("n"), data.get("t")
        if index != len(parts) or not isinstance(count, int) or not isinstance(piece, str):
            raise StoreError("a thread's segments do not join up")
        parts.append(piece)
        if index == count - 1:
            decoded = json.loads("".join(parts))
            if not isinstance(decoded, list):
                raise StoreError("a thread's segment holds no message list")
            messages += decoded
            parts = []
    if parts:
        raise StoreError("a thread's last append is incomplete")
    return messages
