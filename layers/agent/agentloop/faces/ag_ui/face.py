"""``POST /ag-ui`` as a route sees it (:class:`agentloop.faces.face.Face`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from agentloop.faces.ag_ui.request import RunAgentInput
from agentloop.faces.ag_ui.stream import AgUiStream
from agentloop.faces.face import Face, FaceRun
from agentloop.models import ChatRequest


class AgUiFace(Face[RunAgentInput]):
    request_model = RunAgentInput

    def to_chat_request(self, request: RunAgentInput) -> ChatRequest:
        return request.to_chat_request()

    def client_thread_ids(self, request: RunAgentInput) -> bool:
        return request.on_thread

    def user_turns_seen(self, request: RunAgentInput) -> int | None:
        return request.user_turns_seen() if request.on_thread else None

    def plan_params(self, request: RunAgentInput) -> Mapping[str, str]:
        return request.plan_params()

    def frames(self, request: RunAgentInput, run: FaceRun) -> AsyncIterator[bytes]:
        return AgUiStream(request, run.cancel, run.approvals).frames(run.events)


FACE = AgUiFace()
