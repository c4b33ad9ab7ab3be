"""``POST /chat``: the native protocol, the run's events as SSE (``sse.event_frames``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentloop.faces.face import Face, FaceRun
from agentloop.models import ChatRequest
from agentloop.sse import event_frames


class NativeFace(Face[ChatRequest]):
    request_model = ChatRequest

    def to_chat_request(self, request: ChatRequest) -> ChatRequest:
        return request

    def frames(self, request: ChatRequest, run: FaceRun) -> AsyncIterator[bytes]:
        return event_frames(run.events)


FACE = NativeFace()
