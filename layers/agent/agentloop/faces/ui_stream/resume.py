"""``GET /api/chat/{id}/stream``: the AI SDK's resume route (``useChat({resume: true})``,
``DefaultChatTransport.reconnectToStream``).

The chat id is the caller's thread. When a resumable run streams on it, the answer is its UI
message stream from the run's start (the transport replays it: ``resumeStreamIsReplay``) and
then live; when nothing does, a 204, which the transport reads as "nothing to resume"; another
principal's chat, like one that does not exist, is a 404.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from agentloop.faces.ui_stream.stream import UI_STREAM_HEADERS
from agentloop.server.identity import authenticate
from agentloop.server.service import service_of
from agentloop.streams.routes import resume_response


async def resume_stream(request: Request) -> Response:
    """The chat's current stream from its start, then live; 204 when nothing is streaming."""
    who = authenticate(service_of(request), request)
    chat_id = str(request.path_params["id"])
    return await resume_response(request, who, chat_id, 0, UI_STREAM_HEADERS)
