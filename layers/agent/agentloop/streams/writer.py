"""``StreamWriter``: a resumable run's frames, numbered and logged while they are sent.

Each frame gets an SSE id (``id: <seq>``, 1 up), so a client that lost the stream can say
where it was (``Last-Event-ID``). Frames are written in batches by a task beside the stream,
so the client never waits for the store: a batch is written once 16 frames have gathered or
its first frame is 50 ms old, one write at a time and at least 50 ms apart (at most 20 batch
writes a second), and everything left at the end, followed by the head saying ``ended``. A
store that fails while the run streams costs the log, never the live answer: the log stops
there (a reader stops at its last item) and the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from agentloop.store import StoreError
from agentloop.streams import keys
from agentloop.streams.log import ENDED, LIVE, Head, StreamLog

logger = logging.getLogger(__name__)

BATCH_FRAMES = 16
BATCH_S = 0.05


class StreamWriter:
    """Logs one run's frames on its thread (``open`` first: the head says ``live``)."""

    def __init__(self, log: StreamLog, owner: str, thread_id: str, until: int) -> None:
        self.log, self.owner, self.thread_id, self.until = log, owner, thread_id, until
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
        try:
            async for frame in source:
                if frame:
                    self.seq += 1
                    frame = b"id: %d\n" % self.seq + frame
                    self._add(frame)
                yield frame
        finally:
            self.closing = True
            self.wake.set()
            await flusher
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                await aclose()

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
