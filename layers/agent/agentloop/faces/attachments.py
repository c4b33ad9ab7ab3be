"""A protocol's file parts as the run's attachments (``ChatRequest.attachments``).

The faces whose protocols carry a person's files inline (the AI SDK's ``file`` parts, the
Responses API's ``input_file``) hand each one here with the place it was in the request, so
a refusal names that place: a link is never fetched (only ``data:`` URLs, the bytes
themselves, are taken), a file over the attachment bound or too many files are a 413, bytes
that are not base64 a 422. The name is the client's (made safe when it is placed); without
one, the media type gives the extension.
"""

from __future__ import annotations

import mimetypes

from agentloop.files.limits import MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS
from agentloop.files.models import Attachment
from agentloop.http_api import HttpError

MAX_NAME_CHARS = 255
DEFAULT_NAME = "attachment"


def invalid(param: str, message: str) -> HttpError:
    return HttpError(422, "invalid_request", f"{param}: {message}", param=param)


def attachment(data_url: str, name: str | None, media_type: str | None, at: str) -> Attachment:
    """The file of a ``data:`` URL found at ``at``, called ``name`` (422/413 if it cannot be)."""
    if not data_url.startswith("data:"):
        scheme = data_url.partition(":")[0][:20] if ":" in data_url else "no scheme"
        raise invalid(
            at,
            f"a file must be sent as a data: URL holding its bytes (base64), got {scheme!r}; "
            "this server fetches no links",
        )
    head, comma, payload = data_url.partition(",")
    if not comma or not head.endswith(";base64"):
        raise invalid(at, "a data: URL of a file must be base64 (data:<type>;base64,<data>)")
    if len(payload) * 3 // 4 > MAX_ATTACHMENT_BYTES + 2:
        raise HttpError(
            413,
            "file_too_large",
            f"{at}: a file is about {len(payload) * 3 // 4:,} bytes; the limit is "
            f"{MAX_ATTACHMENT_BYTES:,}",
            param=at,
        )
    try:
        return Attachment(name=_name(name, media_type or head[5:].split(";")[0]), data=data_url)
    except ValueError as exc:  # pydantic's ValidationError is one
        raise invalid(at, "the data: URL's bytes are not valid base64") from exc


def check_count(count: int, param: str) -> None:
    """413 for more files than a request may attach."""
    if count > MAX_ATTACHMENTS:
        raise HttpError(
            413,
            "too_many_files",
            f"{count} files attached; the limit is {MAX_ATTACHMENTS} a request",
            param=param,
        )


def _name(name: str | None, media_type: str) -> str:
    """The client's name (its last 255 characters: the extension stays), or one made from the
    media type (``attachment.csv``)."""
    if name and name.strip():
        return name[-MAX_NAME_CHARS:]
    extension = mimetypes.guess_extension(media_type.strip().lower()) if media_type else None
    return DEFAULT_NAME + (extension or "")
