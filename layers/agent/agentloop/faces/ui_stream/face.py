"""``POST /api/chat`` as a route sees it (:class:`agentloop.faces.face.Face`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from agentloop.faces.face import Face, FaceRun
from agentloop.faces.ui_stream.request import UIChatRequest
from agentloop.faces.ui_stream.stream import UI_STREAM_HEADERS, UIMessageStream
from agentloop.models import ChatRequest


class UIStreamFace(Face[UIChatRequest]):
    request_model = UIChatRequest
    headers = UI_STREAM_HEADERS

    def to_chat_request(self, request: UIChatRequest) -> ChatRequest:
        return request.to_chat_request()

    def client_thread_ids(self, request: UIChatRequest) -> bool:
        return request.on_thread

    def plan_params(self, request: UIChatRequest) -> Mapping[str, str]:
        return request.plan_params()

    def frames(self, request: UIChatRequest, run: FaceRun) -> AsyncIterator[bytes]:
        stream = UIMessageStream(request, run.request_id, run.cancel, run.approvals)
        return stream.frames(run.events)


FACE = UIStreamFace()
