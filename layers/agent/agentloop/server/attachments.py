"""A request's attachments: into the run's workspace, and named in its last user message.

The note is added to the message the thread keeps too, so a later turn of the thread still
knows which files are there. Every face's file parts arrive here as ``ChatRequest.attachments``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentloop.files.blobs import FilesUnavailable
from agentloop.files.workspace import Workspace, WorkspaceFull, attachment_note
from agentloop.http_api import HttpError
from agentloop.models import ChatRequest, UserMessage

if TYPE_CHECKING:
    from agentloop.threads.runs import ThreadRun


async def attach(
    workspace: Workspace, chat_request: ChatRequest, on_thread: ThreadRun | None
) -> ChatRequest:
    """``chat_request`` with its attachments placed and noted (400, 413 or 503 if not)."""
    last = chat_request.messages[-1]
    if not isinstance(last, UserMessage):
        raise HttpError(
            400,
            "invalid_request_error",
            "attachments go with a user message: the last message must be the user's",
            param="attachments",
        )
    try:
        placed = await workspace.attach(chat_request.attachments or [])
    except WorkspaceFull as exc:
        raise HttpError(413, "invalid_request_error", str(exc), param="attachments") from exc
    except FilesUnavailable as exc:
        from agentloop.server.files import files_http_error

        raise files_http_error(exc) from exc
    note = attachment_note(placed)
    if on_thread is not None:
        on_thread.note_on_question(note)
    noted = UserMessage(content=last.content + note)
    return chat_request.model_copy(
        update={"messages": [*chat_request.messages[:-1], noted], "attachments": None}
    )
