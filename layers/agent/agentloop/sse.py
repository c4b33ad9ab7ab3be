"""Server-Sent Events framing of the event stream, with heartbeats.

``event: <type>`` + ``data: <json>`` per event and a ``: ping`` comment whenever
nothing was sent for a while, so proxies and browsers keep the connection open
while a slow tool runs. Every face's stream (``/chat``, the OpenAI, AI SDK, AG-UI and
Responses faces) goes through :func:`heartbeat`; SSE parsers skip comment lines.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from agentloop.events import Event

PING = b": ping\n\n"


def encode_event(event: Event) -> bytes:
    """One SSE message; the JSON is on one line, so no ``data:`` continuation is needed."""
    return f"event: {event.type}\ndata: {event.model_dump_json()}\n\n".encode()


async def event_frames(events: AsyncIterator[Event]) -> AsyncIterator[bytes]:
    """``/chat``'s frames: every event as an SSE message; closing this closes ``events``."""
    try:
        async for event in events:
            yield encode_event(event)
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


async def heartbeat(
    frames: AsyncIterator[bytes], heartbeat_s: float = 10.0
) -> AsyncIterator[bytes]:
    """Pass ``frames`` through, inserting a ping after ``heartbeat_s`` of silence.

    The source is read by a separate task so that waiting for the next frame can time
    out without cancelling the source. Closing this generator closes the source, which
    (when it closes its events) cancels the run (see :func:`agentloop.chat.handle_chat`).
    """
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=256)
    failure: list[BaseException] = []

    async def pump() -> None:
        try:
            async for frame in frames:
                await queue.put(frame)
        except Exception as exc:  # handed to the consumer, which re-raises it
            failure.append(exc)
        finally:
            await queue.put(None)

    reader = asyncio.create_task(pump())
    try:
        while True:
            try:
                frame = await asyncio.wait_for(queue.get(), heartbeat_s)
            except TimeoutError:
                yield PING
                continue
            if frame is None:
                break
            yield frame
        if failure:
            raise failure[0]
    finally:
        if not reader.done():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        aclose = getattr(frames, "aclose", None)
        if aclose is not None:
            await aclose()
