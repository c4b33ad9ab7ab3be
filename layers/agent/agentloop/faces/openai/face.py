"""``POST /v1/chat/completions`` as a route sees it (:class:`agentloop.faces.face.Face`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from agentloop.faces.face import Face, FaceRun
from agentloop.faces.openai.errors import refusal
from agentloop.faces.openai.request import CompletionRequest
from agentloop.faces.openai.stream import CompletionStream, collect_completion
from agentloop.http_api import HttpError
from agentloop.models import ChatRequest


class CompletionsFace(Face[CompletionRequest]):
    request_model = CompletionRequest
    can_ask = False

    def to_chat_request(self, request: CompletionRequest) -> ChatRequest:
        return request.to_chat_request()

    def plan_params(self, request: CompletionRequest) -> Mapping[str, str]:
        return request.plan_params()

    def streams(self, request: CompletionRequest) -> bool:
        return request.stream

    def frames(self, request: CompletionRequest, run: FaceRun) -> AsyncIterator[bytes]:
        stream = CompletionStream(request, _id(run), run.model, run.cancel)
        return stream.frames(run.events)

    async def collect(self, request: CompletionRequest, run: FaceRun) -> dict[str, Any]:
        return await collect_completion(request, run.events, _id(run), run.model)

    def refusal(self, error: HttpError) -> HttpError:
        return refusal(error)


def _id(run: FaceRun) -> str:
    return f"chatcmpl-{run.request_id}"


FACE = CompletionsFace()
