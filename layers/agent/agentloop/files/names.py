"""File names from hostile sources (uploads, programs' output) made safe to keep and to show.

A name is one path segment: whatever came before a ``/`` or ``\\`` is dropped, so
``../../etc/passwd`` is ``passwd`` and can only ever name a file inside the place it is put.
Control and format characters go, anything but letters, digits and ``._-+()`` and spaces
becomes ``_``, a leading dot is replaced (no hidden files, no ``..``), and the result is
bounded with its extension kept. Standard library only.
"""

from __future__ import annotations

import unicodedata

MAX_NAME_CHARS = 100
_ALLOWED_PUNCTUATION = frozenset("._-+() ")
RESERVED = frozenset({"main.py"})
"""Names the sandbox uses itself in the working directory."""


def safe_name(raw: str, fallback: str = "file") -> str:
    """``raw`` as a safe single file name (never empty, never ``.``/``..``, at most 100 chars)."""
    text = unicodedata.normalize("NFC", raw.replace("\\", "/")).rsplit("/", 1)[-1]
    kept = "".join(_safe_char(c) for c in text if unicodedata.category(c)[0] != "C").strip()
    if kept.startswith("."):
        kept = "_" + kept[1:]
    if not kept.strip("._ "):
        kept = fallback
    if kept in RESERVED:
        kept = "_" + kept
    return _bounded(kept)


def safe_path(raw: str, depth: int = 3) -> str | None:
    """A relative path of up to ``depth`` safe segments (``output/chart.png``), or None.

    For names a program gave its own files: a segment that is empty, ``.`` or ``..`` makes
    the whole path unusable rather than quietly something else.
    """
    parts = raw.split("/")
    if not 0 < len(parts) <= depth or any(p in ("", ".", "..") for p in parts):
        return None
    if any(safe_name(p) != p for p in parts):
        return None
    return raw


def unique_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name (2).ext`` and so on when it is taken; adds the result to ``taken``."""
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        stem, ext = name, ""
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        candidate = _bounded(f"{stem} ({number})" + (f".{ext}" if ext else ""))
    taken.add(candidate)
    return candidate


def _safe_char(char: str) -> str:
    return char if char.isalnum() or char in _ALLOWED_PUNCTUATION else "_"


def _bounded(name: str) -> str:
    if len(name) <= MAX_NAME_CHARS:
        return name
    stem, dot, ext = name.rpartition(".")
    if dot and stem and len(ext) <= 10:
        return stem[: MAX_NAME_CHARS - len(ext) - 1] + "." + ext
    return name[:MAX_NAME_CHARS]
