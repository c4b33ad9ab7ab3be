"""What ``server.faces.serve`` does for a resumable request: refuse one that cannot be
(before its run starts), and log a started run's frames (``logged_response``).

A resumable run's client leaving does not cancel it: its answer's ``cancel`` is a token no
run reads, so the response drains the frames unsent and the run goes on to its end (its
deadline included), the writer logging every frame.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from agentloop.events import Event, RunStart
from agentloop.http_api import HttpError
from agentloop.limits import CancelToken
from agentloop.models import NEW_THREAD, ChatRequest
from agentloop.server.streaming import EventStreamResponse
from agentloop.sse import heartbeat
from agentloop.store import StoreError
from agentloop.store.http import store_http_error
from agentloop.streams.routes import stream_log
from agentloop.streams.writer import StreamWriter

if TYPE_CHECKING:
    from agentloop.server.runs import StartedRun
    from agentloop.server.service import ChatService

LONGEST_RUN_S = 900
"""A run without a deadline (locally) is taken to end within this (Lambda's limit)."""
LIVE_MARGIN_S = 60
"""A log still ``live`` this long after its run's deadline was left by a process that died."""


def check_resumable(request_model: type[Any], chat_request: ChatRequest, streams: bool) -> None:
    """422 for ``resumable`` without a thread or without a streamed answer."""
    if not chat_request.resumable:
        return
    fields = getattr(request_model, "model_fields", {})
    param = "resumable"
    if "agentloop" in fields:
        param = "agentloop.resumable"
    elif "forwardedProps" in fields:
        param = "forwardedProps.agentloop.resumable"
    if chat_request.thread_id is None:
        raise HttpError(
            422,
            "invalid_request",
            "resumable needs a thread (thread_id): the stream is kept on it",
            param=param,
        )
    if not streams:
        raise HttpError(422, "invalid_request", "resumable needs a streamed answer", param=param)


async def thread_of(
    run: StartedRun, chat_request: ChatRequest
) -> tuple[AsyncIterator[Event], str | None]:
    """The run's events and its thread's id, named by its ``run_start`` (a new thread's too).
    The first event is read here, so the run has started: closing its events then ends it
    and gives its thread and reservation back (an unstarted generator's cleanup never runs)."""
    first = await anext(run.events, None)
    thread_id = first.thread_id if isinstance(first, RunStart) else None
    if thread_id is None and chat_request.thread_id != NEW_THREAD:
        thread_id = chat_request.thread_id
    return _chain(first, run.events), thread_id


async def _chain(first: Event | None, rest: AsyncIterator[Event]) -> AsyncIterator[Event]:
    try:
        if first is not None:
            yield first
        async for event in rest:
            yield event
    finally:
        aclose = getattr(rest, "aclose", None)
        if aclose is not None:
            await aclose()


async def open_writer(
    request: Request, owner: str, thread_id: str, run: StartedRun, events: AsyncIterator[Event]
) -> StreamWriter:
    """The run's log, opened (its head says ``live``); a store that refuses ends the run
    before anything is sent (503)."""
    log = stream_log(request)
    run_for = min(run.info.deadline.remaining(), LONGEST_RUN_S)
    until = int(log.clock() + run_for) + LIVE_MARGIN_S
    writer = StreamWriter(log, owner, thread_id, until, run.context.cancel)
    try:
        await writer.open()
    except StoreError as exc:
        aclose: Callable[[], Any] | None = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
        raise store_http_error(exc) from exc
    return writer


def logged_response(
    run: StartedRun,
    writer: StreamWriter,
    frames: AsyncIterator[bytes],
    service: ChatService,
    headers: dict[str, str],
) -> EventStreamResponse:
    """The face's frames, numbered and logged, streamed; the client leaving cancels nothing."""
    logged = heartbeat(writer.frames(frames), service.heartbeat_s)
    return EventStreamResponse(logged, CancelToken(), run.stream_headers(headers))


__all__ = ["check_resumable", "logged_response", "open_writer", "thread_of"]
