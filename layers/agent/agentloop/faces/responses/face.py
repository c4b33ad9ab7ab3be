"""``POST /v1/responses`` as a route sees it (:class:`agentloop.faces.face.Face`): a request
that stores its response or continues one is kept (``kept.py``)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, cast

from agentloop.events import Event
from agentloop.faces.face import Face, FaceRun, Keep, Kept
from agentloop.faces.openai.errors import refusal
from agentloop.faces.responses.kept import Snapshot
from agentloop.faces.responses.request import ResponsesRequest
from agentloop.faces.responses.saved import new_response_id
from agentloop.faces.responses.stream import ResponseStream, collect_response
from agentloop.http_api import HttpError
from agentloop.models import ChatRequest

if TYPE_CHECKING:
    from agentloop.threads import ThreadStore


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

    def kept(
        self, request: ResponsesRequest, owner: str, threads: Callable[[], ThreadStore]
    ) -> Kept | None:
        """``store: false`` without ``previous_response_id`` touches no store."""
        if not request.stored and request.previous_response_id is None:
            return None
        return Snapshot(request, owner, threads)

    def frames(self, request: ResponsesRequest, run: FaceRun) -> AsyncIterator[bytes]:
        stream = ResponseStream(request, new_response_id(), run.model, run.cancel)
        if run.keep is None:
            return stream.frames(run.events)
        return _kept_frames(stream, run.events, run.keep)

    async def collect(self, request: ResponsesRequest, run: FaceRun) -> dict[str, Any]:
        return await collect_response(request, run.events, new_response_id(), run.model)

    def refusal(self, error: HttpError) -> HttpError:
        return refusal(error)


async def _kept_frames(
    stream: ResponseStream, events: AsyncIterator[Event], keep: Keep
) -> AsyncIterator[bytes]:
    """The stream's frames, its answer kept before the closing ones are sent; if it cannot
    be, they are replaced by the face's failure (the rest of the run still drains)."""
    pending, failed = True, False
    generator = cast(AsyncGenerator[bytes, None], stream.frames(events))  # an async def
    async with aclosing(generator) as frames:
        async for frame in frames:
            if pending and stream.final is not None:
                pending = False
                try:
                    await keep(stream.final)
                except HttpError as error:
                    failed = True
                    for failure in stream.fail(error):
                        yield failure
            if not failed:
                yield frame


FACE = ResponsesFace()
