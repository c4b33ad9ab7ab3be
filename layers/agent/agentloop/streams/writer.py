"""``StreamWriter``: a resumable run's frames, numbered and logged while they are sent.

Each frame gets an SSE id (``id: <seq>``, 1 up), so a client that lost the stream can say
where it was (``Last-Event-ID``). Frames are written in batches by a task beside the stream,
so the client never waits for the store: a batch is written once 16 frames have gathered or
its first frame is 50 ms old, one write at a time and at least 50 ms apart (at most 20 batch
writes a second), and everything left at the end, followed by the head saying ``ended``. A
store that fails while the run streams costs the log, never the live answer: the log stops
there (a reader stops at its last item) and the run goes on.

Its client leaving does not stop a resumable run; a caller asking does
(``POST /chat/stream/cancel``): at once when the run is in this process (``stop_here``), and
from any other instance through the log's ``stop`` item, which the writer reads once a second
while the run streams (``STOP_POLL_S``). The run then stops as a run whose client left always
did: it finishes its tool round, which its thread keeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from agentloop.limits import CancelToken
from agentloop.store import StoreError
from agentloop.streams import keys
from agentloop.streams.log import ENDED, LIVE, Head, StreamLog

logger = logging.getLogger(__name__)

BATCH_FRAMES = 16
BATCH_S = 0.05
STOP_POLL_S = 1.0
"""How often a streaming run's writer reads whether a caller asked it to stop."""

_HERE: dict[tuple[str, str], tuple[str, CancelToken]] = {}
"""The runs this process is logging, by (owner, thread): their run key and cancel token."""


def stop_here(owner: str, thread_id: str, run_key: str) -> bool:
    """Stop the run ``run_key`` if this process runs it (True if it did)."""
    found = _HERE.get((owner, thread_id))
    if found is None or found[0] != run_key:
        return False
    found[1].cancel()
    return True


class StreamWriter:
    """Logs one run's frames on its thread (``open`` first: the head says ``live``)."""

    def __init__(
        self,
        log: StreamLog,
        owner: str,
        thread_id: str,
        until: int,
        cancel: CancelToken | None = None,
    ) -> None:
        self.log, self.owner, self.thread_id, self.until = log, owner, thread_id, until
        self.cancel = cancel
        """The run's own token: set when a caller asks the run to stop."""
        self.run_key = keys.new_run_key()
        self.seq = 0
        self.written = 0
        """Items written so far."""
        self.pending: list[tuple[int, str]] = []
        self.first_at = 0.0
        self.last_write = float("-inf")
        self.closing = False
        self.broken = False
        self.wake = asyncio.Event()

    async def open(self) -> None:
        """Name this run's log in the thread's head (StoreError if the store refuses)."""
        await self.log.put_head(self.owner, self.thread_id, self._head(LIVE))

    def _head(self, state: str) -> Head:
        return Head(self.run_key, state, self.seq, self.written, self.until)

    async def frames(self, source: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """``source``'s frames with their ids, each logged; the log ends when they do."""
        flusher = asyncio.create_task(self._flush_loop())
        watcher = None
        if self.cancel is not None:
            _HERE[(self.owner, self.thread_id)] = (self.run_key, self.cancel)
            watcher = asyncio.create_task(self._watch_for_stop(self.cancel))
        try:
            async for frame in source:
                if frame:
                    self.seq += 1
                    frame = b"id: %d\n" % self.seq + frame
                    self._add(frame)
                yield frame
        finally:
            if watcher is not None:
                watcher.cancel()
                if _HERE.get((self.owner, self.thread_id), ("",))[0] == self.run_key:
                    del _HERE[(self.owner, self.thread_id)]
            self.closing = True
            self.wake.set()
            await flusher
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                await aclose()

    async def _watch_for_stop(self, cancel: CancelToken) -> None:
        """Cancel the run once a caller asked it to stop (read every ``STOP_POLL_S``)."""
        while not cancel.cancelled:
            await asyncio.sleep(STOP_POLL_S)
            try:
                asked = await self.log.stop_asked(self.owner, self.thread_id, self.run_key)
            except StoreError as exc:  # the next read tries again
                logger.warning("could not read whether a run was asked to stop: %s", exc)
                continue
            if asked:
                cancel.cancel()

    def _add(self, frame: bytes) -> None:
        if not self.pending:
            self.first_at = asyncio.get_running_loop().time()
            self.wake.set()
        self.pending.append((self.seq, keys.to_text(frame)))
        if len(self.pending) == BATCH_FRAMES:
            self.wake.set()

    def _due_in(self) -> float:
        """Seconds until the pending frames are to be written (0 or less: now)."""
        if self.closing:
            return 0.0
        earliest = self.last_write + BATCH_S
        if len(self.pending) < BATCH_FRAMES:
            earliest = max(earliest, self.first_at + BATCH_S)
        return earliest - asyncio.get_running_loop().time()

    async def _flush_loop(self) -> None:
        """Write batches as they fall due, until the stream has ended and all is written."""
        while self.pending or not self.closing:
            delay = self._due_in() if self.pending else None
            if delay is None or delay > 0:
                self.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), delay)
                continue
            batch, self.pending = self.pending, []
            self.last_write = asyncio.get_running_loop().time()
            await self._write(batch)
        await self._end()

    async def _write(self, batch: list[tuple[int, str]]) -> None:
        if self.broken:
            return
        try:
            for data in keys.pack(batch):
                await self.log.put_item(
                    self.owner, self.thread_id, self.run_key, self.written, data
                )
                self.written += 1
        except StoreError as exc:
            self.broken = True
            logger.warning("a resumable stream's log stopped (the run goes on): %s", exc)

    async def _end(self) -> None:
        try:
            await self.log.put_head(self.owner, self.thread_id, self._head(ENDED))
        except StoreError as exc:  # a reader stops at the head's until
            logger.warning("a resumable stream's log could not be ended: %s", exc)
