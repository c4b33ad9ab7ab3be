"""``POST /v1/responses`` with its stored responses (``saved.py``): ``store`` (unset: true,
as OpenAI's API) keeps a snapshot of the conversation under the response's id, and
``previous_response_id`` continues from one.

The steps are every face's (``server.faces.serve``) with two more: before the run, the
previous response's conversation is loaded (the caller's only: another principal's is a
404 naming ``previous_response_id``) and goes before ``input``; after it, the snapshot is
saved before the last event (``response.completed``) or the one JSON answer is sent, so a
client that has the answer can continue from it at once. A snapshot that cannot be saved
makes the answer a 503 (streamed: ``error`` and ``response.failed``). A run without an
answer stores nothing. ``store: false`` touches no store.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any, cast

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentloop.events import Done, Event
from agentloop.faces.openai.errors import refusal
from agentloop.faces.responses.request import PLAN_PARAMS, ResponsesRequest
from agentloop.faces.responses.saved import (
    ResponseNotFound,
    ResponseStore,
    StoredResponse,
    new_response_id,
)
from agentloop.faces.responses.stream import ResponseStream, collect_response
from agentloop.http_api import HttpError, validate_model
from agentloop.models import messages_from_wire, to_wire
from agentloop.server.identity import authenticate
from agentloop.server.ratelimit import refusal_headers, run_headers
from agentloop.server.runs import read_request_json, start_run, stream_response
from agentloop.server.service import service_of
from agentloop.server.streaming import cancel_on_disconnect
from agentloop.server.threads import thread_store
from agentloop.store import StoreError, StoreUnavailable
from agentloop.store.http import store_http_error

PRIVATE = {"cache-control": "no-store"}


def response_store(request: Request) -> ResponseStore:
    """Stored responses on the threads' store, kept as long as threads."""
    threads = thread_store(request)
    return ResponseStore(threads.store, threads.ttl_s, threads.clock)


def not_found(param: str | None = None) -> HttpError:
    return HttpError(404, "not_found", "no such response", param=param)


async def create_response(request: Request) -> Response:
    """``POST /v1/responses``; its refusals are the OpenAI faces' (``errors.refusal``)."""
    try:
        return await _create(request)
    except HttpError as exc:
        exc.headers.update(refusal_headers(service_of(request), exc))
        raise refusal(exc) from exc.__cause__


class _Snapshot:
    """What one response will store: the conversation before it, and its run's ``done``."""

    def __init__(
        self, store: ResponseStore, owner: str, response_id: str, history: list[dict[str, Any]]
    ) -> None:
        self.store, self.owner, self.id, self.history = store, owner, response_id, history
        self.done: Done | None = None

    async def watch(self, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        async for event in events:
            if isinstance(event, Done) and event.depth == 0:
                self.done = event
            yield event

    async def save(self, body: ResponsesRequest, answer: dict[str, Any]) -> None:
        """Store the response (StoreError if the store refuses)."""
        assert self.done is not None, "an answer comes after its run's done"
        new = to_wire(body.input_messages())
        messages = [*self.history, *new, *to_wire(self.done.messages)]
        items = [item.to_item(f"msg_{self.id}_{n}") for n, item in enumerate(body.input)]
        await self.store.save(self.owner, self.id, StoredResponse(answer, items, messages))


async def _create(request: Request) -> Response:
    service = service_of(request)
    raw, who = await read_request_json(request, service, "input")
    body = validate_model(ResponsesRequest, raw)
    store = response_store(request) if body.stored or body.previous_response_id else None
    history = await _history(store, who.id, body.previous_response_id)
    try:
        earlier = messages_from_wire(history)
    except ValidationError as exc:  # written by us: the store gave back something else
        raise store_http_error(StoreUnavailable("a stored response is unreadable")) from exc
    chat_request = body.to_chat_request(earlier)
    run = await start_run(request, service, who, chat_request, PLAN_PARAMS, can_ask=False)
    response_id = new_response_id()
    snapshot = None
    events = run.events
    if body.stored and store is not None:
        snapshot = _Snapshot(store, who.id, response_id, history)
        events = snapshot.watch(events)
    headers = run_headers(service, run)
    model = run.plan.model
    if body.stream:
        stream = ResponseStream(body, response_id, model, run.context.cancel)
        frames = _frames(stream, events, body, snapshot)
        return stream_response(run, frames, service, headers)
    collected = collect_response(body, events, response_id, model)
    answer = await cancel_on_disconnect(request.receive, run.context.cancel, collected)
    if snapshot is not None:
        try:
            await snapshot.save(body, answer)
        except StoreError as exc:
            raise store_http_error(exc) from exc
    return JSONResponse(answer, headers=headers)


async def _history(
    store: ResponseStore | None, owner: str, previous: str | None
) -> list[dict[str, Any]]:
    """The previous response's conversation (wire form), or none."""
    if previous is None or store is None:
        return []
    try:
        return (await store.load(owner, previous)).messages
    except ResponseNotFound as exc:
        raise not_found("previous_response_id") from exc
    except StoreError as exc:
        raise store_http_error(exc) from exc


async def _frames(
    stream: ResponseStream,
    events: AsyncIterator[Event],
    body: ResponsesRequest,
    snapshot: _Snapshot | None,
) -> AsyncIterator[bytes]:
    """The stream's frames, the response stored before its closing ones are sent; if it
    cannot be, they are replaced by the face's failure (the rest of the run still drains)."""
    pending, failed = snapshot is not None, False
    generator = cast(AsyncGenerator[bytes, None], stream.frames(events))  # an async def
    async with aclosing(generator) as frames:
        async for frame in frames:
            if pending and snapshot is not None and stream.final is not None:
                pending = False
                try:
                    await snapshot.save(body, stream.final)
                except StoreError as exc:
                    failed = True
                    for failure in stream.fail(store_http_error(exc)):
                        yield failure
            if not failed:
                yield frame


# -- the stored responses ------------------------------------------------------------------


async def response(request: Request) -> Response:
    """``GET`` (the response object) or ``DELETE /v1/responses/{response_id}``."""
    store, owner, response_id = _caller(request)
    try:
        if request.method == "DELETE":
            await store.delete(owner, response_id)
            body: dict[str, Any] = {"id": response_id, "object": "response", "deleted": True}
        else:
            body = (await store.load(owner, response_id)).response
    except ResponseNotFound as exc:
        raise not_found() from exc
    except StoreError as exc:
        raise store_http_error(exc) from exc
    return JSONResponse(body, headers=PRIVATE)


async def input_items(request: Request) -> Response:
    """``GET /v1/responses/{response_id}/input_items?order=&limit=&after=``: the request's
    input items (``order`` desc unless asked, as OpenAI's; ``after`` an item id)."""
    store, owner, response_id = _caller(request)
    order, limit, after = _list_params(request)
    try:
        items = (await store.load(owner, response_id)).input_items
    except ResponseNotFound as exc:
        raise not_found() from exc
    except StoreError as exc:
        raise store_http_error(exc) from exc
    if order == "desc":
        items = items[::-1]
    if after is not None:
        ids = [item.get("id") for item in items]
        if after not in ids:
            raise HttpError(400, "invalid_request_error", "after: no such item", param="after")
        items = items[ids.index(after) + 1 :]
    page = items[:limit]
    body = {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(items) > limit,
    }
    return JSONResponse(body, headers=PRIVATE)


def _caller(request: Request) -> tuple[ResponseStore, str, str]:
    who = authenticate(service_of(request), request)
    return response_store(request), who.id, str(request.path_params["response_id"])


def _list_params(request: Request) -> tuple[str, int, str | None]:
    query = request.query_params
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise HttpError(400, "invalid_request_error", "order: asc or desc", param="order")
    raw = query.get("limit", "20")
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 3 and 1 <= int(raw) <= 100):
        raise HttpError(400, "invalid_request_error", "limit must be 1 to 100", param="limit")
    return order, int(raw), query.get("after") or None
