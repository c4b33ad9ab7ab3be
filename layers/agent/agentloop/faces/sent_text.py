"""What an append-only face has sent of a run's text, and how it honours ``text_reset``.

The native ``/chat`` stream can tell a client to drop text (``text_reset``); the OpenAI, AI
SDK, AG-UI and Responses protocols cannot take text back once it is sent. Each of those faces
keeps one :class:`SentText` for the run's top-level text.
"""

from __future__ import annotations


class SentText:
    """The top-level text a stream has sent, and how a ``text_reset`` is honoured.

    Sent text cannot be taken back. After a reset the voided text stays on the client's
    screen, so the retried text is held back while it repeats what was sent and only
    what goes beyond it is sent: the client ends with exactly the retried text. Text
    that departs from what was sent cannot be shown correctly: :meth:`add` says so.
    Nothing is buffered except while the retried text is still a prefix of the sent text.
    """

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self._length = 0
        self._window = 0
        """Where the text a reset voids begins (the last turn_start or tool_call_result)."""
        self._replay: str | None = None
        """All text sent, while a retried text has yet to reproduce it."""
        self._matched = 0

    @property
    def replaying(self) -> bool:
        """True while the client shows text the run has not (yet) said again."""
        return self._replay is not None

    def mark(self) -> None:
        """A new window: a reset from now on voids only text sent after this point."""
        self._window = self._length

    def reset(self) -> None:
        """The text since the window began is void; what follows replaces it."""
        if self._replay is None:
            sent = "".join(self._pieces)
            self._pieces = [sent]
            if not sent[self._window :].strip():
                # Blank text shows as nothing: leave it, and compare only what comes next.
                self._window = self._length
                return
            self._replay = sent
        self._matched = self._window

    def add(self, text: str) -> str | None:
        """What to send of the run's next ``text``: all of it, the part beyond the sent
        text being repeated ("" while it only repeats), or None when it departs from it."""
        if self._replay is None:
            self._pieces.append(text)
            self._length += len(text)
            return text
        replay, at = self._replay, self._matched
        overlap = min(len(text), len(replay) - at)
        if not replay.startswith(text[:overlap], at):
            return None
        self._matched = at + overlap
        rest = text[overlap:]
        if self._matched == len(replay):
            self._replay = None
            self._pieces.append(rest)
            self._length += len(rest)
        return rest
