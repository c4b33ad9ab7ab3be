"""The UI message stream's chunks as the AI SDK reads them, and their SSE frame."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from agentloop.events import ApprovalRequest, ModelSwitched, ToolCallStart
from agentloop.models import Usage

if TYPE_CHECKING:
    from agentloop.files.models import FileRef

Chunk = dict[str, Any]
"""One UI message stream chunk, as its ``data:`` line holds it."""

DONE_FRAME = b"data: [DONE]\n\n"


def frame(chunk: Chunk) -> bytes:
    # ASCII escapes: a lone surrogate in a model-written argument cannot break the encoding.
    return f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n".encode()


def usage_json(usage: Usage) -> dict[str, Any]:
    """Usage named as the AI SDK names it (``LanguageModelUsage``)."""
    return {
        "inputTokens": usage.prompt_tokens,
        "outputTokens": usage.completion_tokens,
        "totalTokens": usage.total_tokens,
        "inputTokenDetails": {"cacheReadTokens": usage.cached_tokens},
    }


def tool_input(arguments: str) -> Any:
    """Arguments that are a JSON object as that object; anything else as the text itself."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    return value if isinstance(value, dict) else arguments


def input_chunk(event: ToolCallStart | ApprovalRequest) -> Chunk:
    return {
        "type": "tool-input-available",
        "toolCallId": event.call_id,
        "toolName": event.name,
        "input": tool_input(event.arguments),
    }


def file_chunk(file: FileRef) -> Chunk:
    """A kept file as the SDK's ``file`` part: its link and type; the rest of the reference
    (name, size, id, expiry, the call that made it) rides in ``providerMetadata``, the one
    place the part keeps more (``ai`` drops a chunk's other fields)."""
    kept = {
        "id": file.id,
        "filename": file.name,
        "size": file.size,
        "expiresAt": file.expires_at,
        "callId": file.call_id,
    }
    return {
        "type": "file",
        "url": file.url,
        "mediaType": file.media_type,
        "providerMetadata": {"agentloop": kept},
    }


def source_id(url: str) -> str:
    """The same id for the same page, in any answer (the SDK's parts need one)."""
    return "src-" + hashlib.sha256(url.encode()).hexdigest()[:16]


def switch_notice(event: ModelSwitched) -> tuple[str, str]:
    return "model_switched", f"switched from {event.from_model} to {event.to_model}: {event.reason}"


def metadata(**values: Any) -> Chunk:
    return {"type": "message-metadata", "messageMetadata": values}


def notice(code: str, message: str) -> Chunk:
    return {"type": "data-notice", "data": {"code": code, "message": message}}
