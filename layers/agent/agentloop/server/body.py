"""A request body read within bounds: refused early when too large (413), given up on when
too slow (408), and the rest of a refused body read and dropped after the answer is out."""

from __future__ import annotations

import asyncio
import contextlib

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from agentloop.http_api import HttpError, RequestLimits

CLOSE = {"connection": "close"}
"""On an answer given before the body was all read: uvicorn would otherwise keep the
connection open (for a stalled client, until its keep-alive timeout after every byte)."""


class BodyRefused(HttpError):
    """A 413 given before the body was all read; ``linger``: the bounds within which the
    rest of it is read after the answer, None when none is coming or too much would be."""

    def __init__(self, message: str, linger: RequestLimits | None) -> None:
        super().__init__(413, "request_too_large", message, headers=CLOSE)
        self.linger = linger


async def read_body(request: Request, limits: RequestLimits) -> bytes:
    """The body, refusing to buffer more than the limit (413) or to wait for it forever (408).

    A body over the limit is refused as soon as that is known, from its declared length or
    the bytes so far; the rest of it is read and thrown away after the answer is out
    (:class:`LingeringResponse`), so a client that sends everything before it reads still
    reads the 413. Read with ``receive`` itself, as only it says whether more is coming.
    """
    refuse_declared_oversize(request, limits)
    try:
        async with asyncio.timeout(limits.body_timeout_s):
            return await _receive_body(request.receive, limits)
    except TimeoutError as exc:
        raise HttpError(
            408,
            "request_timeout",
            f"the request body did not arrive within {limits.body_timeout_s:g} s",
            headers=CLOSE,
        ) from exc


async def _receive_body(receive: Receive, limits: RequestLimits) -> bytes:
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            raise HttpError(400, "client_disconnected", "the client went away")
        chunk: bytes = message.get("body", b"")
        more = message.get("more_body", False)
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise BodyRefused(_too_large_message(limits, None), limits if more else None)
        chunks.append(chunk)
    return b"".join(chunks)


def refuse_declared_oversize(request: Request, limits: RequestLimits) -> None:
    """413 at once for a body whose ``Content-Length`` is over the limit."""
    declared = _declared_length(request.headers.get("content-length"))
    if declared is not None and declared > limits.max_body_bytes:
        # A client that waits for "100 Continue" sends nothing more: nothing to linger for.
        waits = request.headers.get("expect", "").lower() == "100-continue"
        coming = not waits and declared <= limits.max_discard_bytes
        raise BodyRefused(_too_large_message(limits, declared), limits if coming else None)


def _declared_length(value: str | None) -> int | None:
    """Content-Length as a number, if it is one (ASCII digits; absurd lengths stay absurd)."""
    if not value or not value.isascii() or not value.isdigit():
        return None
    return int(value) if len(value) <= 18 else 10**18


def _too_large_message(limits: RequestLimits, declared: int | None) -> str:
    if declared is not None:
        return f"request body is {declared} bytes; the limit is {limits.max_body_bytes}"
    return f"request body exceeds the limit of {limits.max_body_bytes} bytes"


class LingeringResponse(JSONResponse):
    """An error answer sent while the client is still sending its body (a lingering close).

    The whole answer goes out at once; the rest of the body is then read and thrown away
    (:func:`discard_body`) before the response ends and uvicorn closes the connection.
    Closing on a client that is still sending resets the connection, and a client that
    sends everything before it reads (urllib, fetch) never sees the answer. The answer's
    last, empty piece is held back meanwhile: once a response is complete uvicorn stops
    reading the request (``receive()`` says ``http.disconnect``).
    """

    def __init__(self, error: HttpError, limits: RequestLimits) -> None:
        super().__init__(error.body(), status_code=error.status, headers=error.headers)
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        await send({"type": "http.response.body", "body": self.body, "more_body": True})
        await discard_body(receive, self.limits)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def discard_body(receive: Receive, limits: RequestLimits) -> None:
    """Read and drop the rest of a request body until it ends or the client leaves, within
    ``limits.linger_s`` in all, ``linger_idle_s`` between pieces and ``max_discard_bytes``."""
    size = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(limits.linger_s):
            while size <= limits.max_discard_bytes:
                async with asyncio.timeout(limits.linger_idle_s):
                    message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    return
                size += len(message.get("body", b""))
