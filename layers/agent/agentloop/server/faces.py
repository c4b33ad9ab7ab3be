"""One route per protocol face, the same for all of them: read the request, start its run,
and answer with the face's frames (or its one JSON answer). The face (``FACE`` in the module
the route table names) is imported at the route's first request, so a function that only
serves ``/chat`` never imports the other protocols."""

from __future__ import annotations

import importlib
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentloop.faces.face import Face, FaceRun
from agentloop.http_api import HttpError, validate_model
from agentloop.server.errors import Endpoint
from agentloop.server.ratelimit import refusal_headers, run_headers
from agentloop.server.runs import read_request_json, start_run, stream_response
from agentloop.server.service import service_of
from agentloop.server.streaming import cancel_on_disconnect


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
    )
    seen = FaceRun(
        run.events, run.info.request_id, run.plan.model, run.context.cancel, chat_request.approvals
    )
    limits = run_headers(service, run)  # x-ratelimit-*: none without limits
    if face.streams(body):
        return stream_response(run, face.frames(body, seen), service, {**face.headers, **limits})
    answer = await cancel_on_disconnect(
        request.receive, run.context.cancel, face.collect(body, seen)
    )
    return JSONResponse(answer, headers=limits)
