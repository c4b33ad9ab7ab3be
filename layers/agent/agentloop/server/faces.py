"""One route per protocol face, the same for all of them: read the request, start its run,
and answer with the face's frames (or its one JSON answer). The face (``FACE`` in the module
the route table names) is imported at the route's first request, so a function that only
serves ``/chat`` never imports the other protocols.

A face that keeps requests (``Face.kept``: Responses' stored responses) gets the same steps
and three more: the request is continued from the kept conversation before its run
starts, the run's events are watched, and the final answer is kept before it is sent (the
face's frames await ``FaceRun.keep`` before their closing ones). The store's refusals are
HTTP errors here, so a face stays free of HTTP."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentloop.events import Event
from agentloop.faces.face import Face, FaceRun, Keep, Kept
from agentloop.http_api import HttpError, validate_model
from agentloop.models import ChatRequest
from agentloop.principal import Principal
from agentloop.server.errors import Endpoint
from agentloop.server.ratelimit import refusal_headers, run_headers
from agentloop.server.runs import StartedRun, read_request_json, start_run, stream_response
from agentloop.server.service import service_of
from agentloop.server.streaming import cancel_on_disconnect
from agentloop.store import StoreError
from agentloop.store.http import store_http_error

if TYPE_CHECKING:
    from agentloop.threads import ThreadStore


def face_route(module: str) -> Endpoint:
    """The endpoint of the face in ``module``; its refusals are the face's (``refusal``)."""
    loaded: list[Face[Any]] = []

    async def endpoint(request: Request) -> Response:
        if not loaded:
            loaded.append(importlib.import_module(module).FACE)
        face = loaded[0]
        try:
            return await serve(face, request)
        except HttpError as exc:
            exc.headers.update(refusal_headers(service_of(request), exc))
            raise face.refusal(exc) from exc.__cause__

    endpoint.__name__ = endpoint.__qualname__ = module.rsplit(".", 1)[-1]
    return endpoint


async def serve(face: Face[Any], request: Request) -> Response:
    """Every face's steps: who, the bounded body (as the face's request model), the plan
    (refusals pointing where the face's protocol keeps each option), then the answer."""
    service = service_of(request)
    raw, who = await read_request_json(request, service, face.messages_key)
    body = validate_model(face.request_model, raw)
    chat_request = face.to_chat_request(body)
    if chat_request.resumable:  # 422 before anything runs
        from agentloop.streams.serving import check_resumable

        check_resumable(face.request_model, chat_request, face.streams(body))
    kept = face.kept(body, who.id, lambda: _threads(request))
    if kept is not None:
        chat_request = await _continued(kept, chat_request)
    params = face.plan_params(body)
    client_ids = face.client_thread_ids(body)
    run = await start_run(
        request,
        service,
        who,
        chat_request,
        params,
        can_ask=face.can_ask,
        client_thread_ids=client_ids,
        user_turns_seen=face.user_turns_seen(body),
    )
    if chat_request.resumable:
        return await _resumable(face, body, request, who, run, chat_request, kept)
    seen = _face_run(run, run.events, chat_request, kept)
    limits = run_headers(service, run)  # x-ratelimit-*: none without limits
    if face.streams(body):
        return stream_response(run, face.frames(body, seen), service, {**face.headers, **limits})
    answer = await cancel_on_disconnect(
        request.receive, run.context.cancel, face.collect(body, seen)
    )
    if seen.keep is not None:
        await seen.keep(answer)
    return JSONResponse(answer, headers=limits)


def _threads(request: Request) -> ThreadStore:
    from agentloop.server.threads import thread_store

    return thread_store(request)


async def _continued(kept: Kept, chat_request: ChatRequest) -> ChatRequest:
    """The request with the kept conversation it goes on from (a store's refusal: 503)."""
    try:
        return await kept.continued(chat_request)
    except StoreError as exc:
        raise store_http_error(exc) from exc


def _face_run(
    run: StartedRun, events: AsyncIterator[Event], chat_request: ChatRequest, kept: Kept | None
) -> FaceRun:
    """The run as its face frames it: its events watched and its answer kept if kept."""
    if kept is not None:
        events = kept.watch(events)
    return FaceRun(
        events,
        run.info.request_id,
        run.plan.model,
        run.context.cancel,
        chat_request.approvals,
        None if kept is None else _keeper(kept),
    )


def _keeper(kept: Kept) -> Keep:
    """``kept.keep``, a store's refusal as its HTTP error (503)."""

    async def keep(answer: dict[str, Any]) -> None:
        try:
            await kept.keep(answer)
        except StoreError as exc:
            raise store_http_error(exc) from exc

    return keep


async def _resumable(
    face: Face[Any],
    body: Any,
    request: Request,
    who: Principal,
    run: StartedRun,
    chat_request: ChatRequest,
    kept: Kept | None,
) -> Response:
    """A resumable run's answer (``streams.serving``): its frames numbered and logged on its
    thread as they are sent, and the run going on to its end if its client leaves."""
    from agentloop.streams.serving import logged_response, open_writer, thread_of

    events, thread_id = await thread_of(run, chat_request)
    seen = _face_run(run, events, chat_request, kept)
    service = service_of(request)
    headers = {**face.headers, **run_headers(service, run)}
    if thread_id is None:  # not a thread after all: streamed as any run
        return stream_response(run, face.frames(body, seen), service, headers)
    writer = await open_writer(request, who.id, thread_id, run, events)
    return logged_response(run, writer, face.frames(body, seen), service, headers)
