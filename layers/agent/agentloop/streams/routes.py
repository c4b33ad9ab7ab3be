"""The HTTP side of resumable streams: the log a request's app keeps (``stream_log``), the
replay of a caller's thread as a streamed answer (``resume_response``, shared by every face's
resume route), ``GET /chat/stream?thread_id=`` with ``Last-Event-ID``, and
``POST /chat/stream/cancel?thread_id=``, which stops the thread's run.

The caller's thread is looked up first: another principal's thread, like one that does not
exist, is the threads' 404. A thread with no run streaming on it (no log, or its last run
ended) is a 204, as the AI SDK's transport expects: nothing to resume.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentloop.http_api import HttpError, invocation_info
from agentloop.limits import CancelToken
from agentloop.principal import Principal
from agentloop.server.identity import authenticate
from agentloop.server.service import service_of
from agentloop.server.streaming import STREAM_HEADERS, EventStreamResponse
from agentloop.server.threads import thread_http_error, thread_store
from agentloop.sse import heartbeat
from agentloop.store import StoreError
from agentloop.streams.log import DAY_S, Head, StreamLog
from agentloop.streams.reader import Replay, replay
from agentloop.streams.writer import stop_here
from agentloop.threads import ThreadError, ThreadNotFound
from agentloop.threads.keys import is_thread_id

READER_MARGIN_S = 5.0
"""A replay ends this long before its own invocation's deadline (the client reconnects)."""


def stream_log(request: Request) -> StreamLog:
    """The app's stream log: on the threads' store, kept a day (the threads' TTL if less)."""
    state = request.app.state
    found: StreamLog | None = getattr(state, "streams", None)
    threads = thread_store(request)
    if found is None or found.store is not threads.store:
        found = StreamLog(threads.store, ttl_s=min(DAY_S, threads.ttl_s), clock=threads.clock)
        state.streams = found
    return found


async def resume_response(
    request: Request,
    who: Principal,
    thread_id: str | None,
    after: int = 0,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """The caller's thread's current stream after frame ``after``, then live (404 unless the
    caller has the thread, 204 when nothing is streaming on it, 503 if the store is down)."""
    live = await _live_head(request, who, thread_id)
    if live is None:
        return _nothing_runs()
    log, thread_id, head = live
    service = service_of(request)
    deadline = invocation_info(request.headers).deadline
    stop = CancelToken()
    stop_at = _stop_at(deadline.remaining())
    frames = replay(Replay(log, who.id, thread_id, head, after), stop, stop_at)
    all_headers = {**STREAM_HEADERS, "cache-control": "no-store", **(headers or {})}
    return EventStreamResponse(
        heartbeat(frames, service.heartbeat_s), stop, all_headers, drain=False
    )


async def _live_head(
    request: Request, who: Principal, thread_id: str | None
) -> tuple[StreamLog, str, Head] | None:
    """The log and head of the run streaming on the caller's thread, None when none is (404
    unless the caller has the thread, another principal's included; 503 if the store is down)."""
    if thread_id is None or not is_thread_id(thread_id):
        raise thread_http_error(ThreadNotFound())
    log = stream_log(request)
    try:
        await thread_store(request).get(who.id, thread_id)
        head = await log.head(who.id, thread_id)
    except (ThreadError, StoreError) as exc:
        raise thread_http_error(exc) from exc
    return None if head is None or not head.live(log.clock()) else (log, thread_id, head)


def _nothing_runs() -> Response:
    """The answer for a thread with no run streaming on it (nothing to resume or stop)."""
    return Response(status_code=204, headers={"cache-control": "no-store"})


def _stop_at(remaining_s: float) -> float:
    return time.monotonic() + max(1.0, min(remaining_s, 900.0) - READER_MARGIN_S)


def last_event_id(request: Request) -> int:
    """``Last-Event-ID`` as a frame number (none: 0, from the start; 400 if not a number)."""
    raw = request.headers.get("last-event-id", "").strip()
    if not raw:
        return 0
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 12):
        raise HttpError(400, "invalid_request_error", "Last-Event-ID must be a frame number")
    return int(raw)


async def cancel_stream(request: Request) -> Response:
    """``POST /chat/stream/cancel?thread_id=``: stop the thread's resumable run (its client
    leaving does not); it finishes its tool round, which the thread keeps. 202 when asked,
    204 when nothing runs, 404 unless the caller has the thread."""
    who = authenticate(service_of(request), request)
    live = await _live_head(request, who, request.query_params.get("thread_id"))
    if live is None:
        return _nothing_runs()
    log, thread_id, head = live
    try:
        if not stop_here(who.id, thread_id, head.run_key):  # another instance runs it
            await log.ask_stop(who.id, thread_id, head.run_key)
    except StoreError as exc:
        raise thread_http_error(exc) from exc
    return JSONResponse(
        {"thread_id": thread_id, "cancelling": True},
        status_code=202,
        headers={"cache-control": "no-store"},
    )


async def chat_stream(request: Request) -> Response:
    """``GET /chat/stream?thread_id=``: the rest of the thread's stream after
    ``Last-Event-ID``, then live; 204 when nothing is streaming on it."""
    who = authenticate(service_of(request), request)
    thread_id = request.query_params.get("thread_id")
    return await resume_response(request, who, thread_id, last_event_id(request))
