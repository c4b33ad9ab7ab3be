"""The view of a run's history that is sent to the model: compacted, windowed, stable.

The run keeps every message in full (``done.messages`` returns them all); what the
model is *sent* is a view of them:

- tool results from earlier rounds are reduced to a short preview once a newer round
  exists (the model has already read and used them, and they are the bulk of a
  tool-heavy prompt);
- when the whole view is still over its character bound, the oldest exchanges are
  left out, whole: a user message, or an assistant turn together with all of its tool
  results, so a tool call is never separated from its result. A one-line note says how
  many messages were left out, and counts against the bound. The last user message and
  the latest exchange always stay, so only they can take the view over the bound;
- the system prompt stays first and byte-identical, so providers' prompt caching
  applies to the prefix, and a message's compacted form depends only on the message,
  so the prefix stays identical from one turn to the next as well.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

Wire = dict[str, Any]


@dataclass(frozen=True)
class Prompt:
    """Messages to send, and the characters they serialize to, counted once.

    Compacting a view already serializes each of its messages; a call's token estimate
    reuses those sizes instead of serializing the whole view again every turn.
    """

    messages: list[Wire]
    message_chars: int
    """The messages' serialized lengths, summed."""

    @classmethod
    def of(cls, messages: list[Wire]) -> Prompt:
        return cls(messages, sum(map(_chars, messages)))

    @property
    def chars(self) -> int:
        """``len(json.dumps(messages, ensure_ascii=False))``: the brackets, and ``", "``
        between messages."""
        return self.message_chars + 2 * max(len(self.messages), 1)

    def plus(self, more: list[Wire]) -> Prompt:
        """These messages followed by ``more``, measured."""
        return Prompt([*self.messages, *more], self.message_chars + sum(map(_chars, more)))


@dataclass(frozen=True)
class CompactionSettings:
    preview_chars: int = 400
    max_chars: int = 400_000

    def harder(self) -> CompactionSettings:
        """The settings for a retry after the provider said the context was too long."""
        return CompactionSettings(
            preview_chars=min(self.preview_chars, 120), max_chars=self.max_chars // 2
        )


def preview(content: str, chars: int) -> str:
    """A tool result reduced to its first ``chars`` characters, saying it was reduced."""
    if len(content) <= chars + 80:
        return content
    return json.dumps(
        {
            "compacted": True,
            "preview": content[:chars],
            "note": f"{len(content)} characters; reduced after use. Call the tool again for "
            "the full result if you need it.",
        },
        ensure_ascii=False,
    )


def _units(messages: list[Wire]) -> list[list[Wire]]:
    """Group messages into exchanges that must be kept or dropped together."""
    units: list[list[Wire]] = []
    for message in messages:
        if message.get("role") == "tool" and units:
            units[-1].append(message)
        else:
            units.append([message])
    return units


def _chars(message: Wire) -> int:
    return len(json.dumps(message, ensure_ascii=False))


@dataclass
class ViewCache:
    """Each message's form in the view and its size, kept for one run.

    A message never changes once the run has added it, and its compacted form depends only
    on the message, so each is previewed and serialized once rather than on every call.
    Entries are keyed by the message object itself (held here, so its id is never reused).
    """

    _entries: dict[tuple[int, bool, int], tuple[Wire, Wire, int]] = field(default_factory=dict)

    def shown(self, message: Wire, reduced: bool, preview_chars: int) -> tuple[Wire, int]:
        """``message`` as sent (its content previewed when ``reduced``) and its size."""
        key = (id(message), reduced, preview_chars if reduced else 0)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is message:
            return entry[1], entry[2]
        shown = message
        if reduced:
            content = preview(message["content"], preview_chars)
            if content is not message["content"]:  # a short result is sent as it is
                shown = {**message, "content": content}
        size = _chars(shown)
        self._entries[key] = (message, shown, size)
        return shown, size


def compact_view(wire: list[Wire], settings: CompactionSettings) -> list[Wire]:
    """The messages to send: ``wire[0]`` is the system prompt, the rest the history."""
    return measured_view(wire, settings).messages


def measured_view(
    wire: list[Wire], settings: CompactionSettings, cache: ViewCache | None = None
) -> Prompt:
    """:func:`compact_view`, measured: each message is serialized once (once per run, with
    the run's ``cache``)."""
    cache = ViewCache() if cache is None else cache
    system, history = wire[:1], wire[1:]
    last_round = max(
        (i for i, m in enumerate(history) if m.get("role") == "assistant" and m.get("tool_calls")),
        default=len(history),
    )
    view: list[Wire] = []
    sizes: list[int] = []
    for index, message in enumerate(history):
        reduced = message.get("role") == "tool" and index < last_round
        shown, size = cache.shown(message, reduced, settings.preview_chars)
        view.append(shown)
        sizes.append(size)
    system_chars = sum(cache.shown(m, False, 0)[1] for m in system)
    if system_chars + sum(sizes) <= settings.max_chars:
        return Prompt(system + view, system_chars + sum(sizes))
    kept = _window(view, sizes, settings.max_chars - system_chars)
    return Prompt(system + kept.messages, system_chars + kept.message_chars)


def _window(view: list[Wire], sizes: list[int], budget: int) -> Prompt:
    """Leave out the oldest whole exchanges until the rest, and the note saying so, fit.

    Never left out: the last user message (the question being answered) and the latest
    exchange (the model is about to read its results). A long run on one question drops its
    own early rounds too, not just what came before the question. When those two alone are
    over ``budget`` they are sent anyway: the provider's own limit then decides.
    ``sizes``: each message's serialized length.
    """
    units = _units(view)
    unit_sizes: list[int] = []
    start = 0
    for unit in units:
        unit_sizes.append(sum(sizes[start : start + len(unit)]))
        start += len(unit)
    users = [i for i, unit in enumerate(units) if unit[0].get("role") == "user"]
    protected = {len(units) - 1, *users[-1:]}
    total, count = sum(unit_sizes), 0
    left_out: set[int] = set()
    for index, unit in enumerate(units):
        if total + (_chars(_note(count)) if left_out else 0) <= budget:
            break
        if index in protected:
            continue
        left_out.add(index)
        total -= unit_sizes[index]
        count += len(unit)
    if not left_out:
        return Prompt(view, total)
    kept = [m for index, unit in enumerate(units) if index not in left_out for m in unit]
    note = _note(count)
    return Prompt([note, *kept], _chars(note) + total)


def _note(count: int) -> Wire:
    return {
        "role": "system",
        "content": f"[{count} earlier messages of this conversation were left out to fit the "
        "context window.]",
    }
