"""``POST /v1/responses`` as a route sees it (:class:`agentloop.faces.face.Face`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from agentloop.faces.face import Face, FaceRun
from agentloop.faces.openai.errors import refusal
from agentloop.faces.responses.request import ResponsesRequest
from agentloop.faces.responses.stream import ResponseStream, collect_response
from agentloop.http_api import HttpError
from agentloop.models import ChatRequest


class ResponsesFace(Face[ResponsesRequest]):
    request_model = ResponsesRequest
    messages_key = "input"
    can_ask = False

    def to_chat_request(self, request: ResponsesRequest) -> ChatRequest:
        return request.to_chat_request()

    def plan_params(self, request: ResponsesRequest) -> Mapping[str, str]:
        return request.plan_params()

    def streams(self, request: ResponsesRequest) -> bool:
        return request.stream

    def frames(self, request: ResponsesRequest, run: FaceRun) -> AsyncIterator[bytes]:
        stream = ResponseStream(request, _id(run), run.model, run.cancel)
        return stream.frames(run.events)

    async def collect(self, request: ResponsesRequest, run: FaceRun) -> dict[str, Any]:
        return await collect_response(request, run.events, _id(run), run.model)

    def refusal(self, error: HttpError) -> HttpError:
        return refusal(error)


def _id(run: FaceRun) -> str:
    return f"resp_{run.request_id}"


FACE = ResponsesFace()
