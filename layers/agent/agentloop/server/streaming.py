"""One streamed answer, and one watcher that notices the client leaving and cancels its run.

A streamed client and a client waiting for one JSON answer leave the same way: ``receive()``
says ``http.disconnect``. Both are watched by :class:`ClientWatch`; the run is told to stop
(it finishes the tool round in progress) and still ends with ``done``, so it is logged and
measured like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from types import TracebackType
from typing import Self, TypeVar

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from agentloop.limits import CancelToken

STREAM_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}

T = TypeVar("T")


class ClientWatch:
    """While entered, watches for the client leaving; ``gone`` once it has, and the run's
    ``cancel`` is then set. A send that fails (:meth:`left`) counts as leaving too."""

    def __init__(self, receive: Receive, cancel: CancelToken) -> None:
        self.receive = receive
        self.cancel = cancel
        self.gone = False
        self._task: asyncio.Task[None] | None = None

    def left(self) -> None:
        self.gone = True
        self.cancel.cancel()

    async def _watch(self) -> None:
        while (await self.receive())["type"] != "http.disconnect":
            pass
        self.left()

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._watch())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class EventStreamResponse(Response):
    """Streams frames while the client is there. Once it has left, the remaining frames are
    drained unsent (``drain``: the run, cancelled, winds down to its ``done``; a resumable
    run, whose ``cancel`` is no run's, goes on to its end and logs them), or, without
    ``drain`` (a replay, which ``cancel`` stops), no more are read."""

    media_type = "text/event-stream"

    def __init__(
        self,
        frames: AsyncIterator[bytes],
        cancel: CancelToken,
        headers: dict[str, str],
        *,
        drain: bool = True,
    ) -> None:
        # Like StreamingResponse: no body, hence no content-length; uvicorn sends it chunked.
        self.status_code = 200
        self.background = None
        self.init_headers(headers)
        self.frames = frames
        self.cancel = cancel
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with ClientWatch(receive, self.cancel) as client:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            try:
                await self._send_frames(client, send)
            finally:
                aclose = getattr(self.frames, "aclose", None)
                if not self.drain and aclose is not None:
                    await aclose()
            if not client.gone:
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _send_frames(self, client: ClientWatch, send: Send) -> None:
        async for frame in self.frames:
            if client.gone:
                if self.drain:
                    continue
                return
            try:
                await send({"type": "http.response.body", "body": frame, "more_body": True})
            except OSError:
                client.left()


async def cancel_on_disconnect(receive: Receive, cancel: CancelToken, work: Awaitable[T]) -> T:
    """Await ``work`` (a non-streamed answer); a client that leaves meanwhile cancels the run.

    Such a client sends nothing until its answer, so only ``http.disconnect`` can tell that
    it left; without this the run would go on to its limits for no one.
    """
    async with ClientWatch(receive, cancel):
        return await work
