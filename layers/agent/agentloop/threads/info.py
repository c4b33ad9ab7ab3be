"""What a thread is to its owner (``ThreadInfo``), and how its title is made and checked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentloop.files.models import ATTACHED_NOTE
from agentloop.threads.errors import InvalidThreadInput

TITLE_CHARS = 80
"""A title made from the first user message is cut to this many characters."""
MAX_TITLE_CHARS = 200
"""A title set by renaming may have this many."""


@dataclass(frozen=True)
class ThreadInfo:
    """A thread's metadata: ``title`` None until a user message or a rename gives one;
    times in epoch seconds."""

    id: str
    title: str | None
    created_at: float
    updated_at: float
    message_count: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "thread",
            "title": self.title,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "message_count": self.message_count,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ThreadInfo:
        """From a head's or a list entry's data (both hold these fields)."""
        return cls(
            id=str(data["id"]),
            title=data.get("title"),
            created_at=float(data["created_at"]),
            updated_at=float(data["updated_at"]),
            message_count=int(data.get("messages", 0)),
        )


def title_from(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The first user message's text, on one line, cut at ``TITLE_CHARS``."""
    for message in messages:
        if message.get("role") != "user":
            continue
        # The note on a question's attachments is not part of its title.
        text = _text_of(message.get("content")).split(ATTACHED_NOTE, 1)[0]
        line = " ".join(text.split())
        if line:
            return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"
    return None


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI's text parts
        return " ".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


def checked_title(title: object) -> str:
    """A title a client set: text of 1 to ``MAX_TITLE_CHARS`` characters once trimmed, with
    no control characters (InvalidThreadInput otherwise)."""
    if not isinstance(title, str):
        raise InvalidThreadInput("title must be a string")
    trimmed = title.strip()
    if not trimmed:
        raise InvalidThreadInput("title must not be empty")
    if len(trimmed) > MAX_TITLE_CHARS:
        raise InvalidThreadInput(f"title has {len(trimmed)} characters; at most {MAX_TITLE_CHARS}")
    if not trimmed.isprintable():  # control characters, lone surrogates
        raise InvalidThreadInput("title must be printable text")
    return trimmed
