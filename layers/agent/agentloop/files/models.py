"""What crosses the API about files: a kept file's reference out, an attachment in."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from agentloop.files.limits import MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS

ATTACHED_NOTE = "\n\n[Attached files, in execute_code's working directory: "
"""How the note naming a question's attachments starts (``workspace.attachment_note``)."""


class FileRef(BaseModel):
    """A file a run made and kept for its caller: what a client shows, and where to get it.

    ``url`` is unguessable and expires (``expires_at``); fetch it again through the thread
    (``GET /threads/{id}``) or ``GET /files/{id}`` with the caller's credentials.
    """

    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)

    id: str = Field(description="The file's id (192 random bits).")
    name: str = Field(description="A safe file name (one segment, no path).")
    media_type: str = Field(description="By the name's extension; image/png for a chart.")
    size: int = Field(ge=0, description="Bytes.")
    url: str = Field(
        description="Where to fetch it until expires_at: relative to this API, or "
        "absolute (a presigned S3 URL, deployed)."
    )
    expires_at: int = Field(description="When url stops working (Unix seconds).")
    call_id: str | None = Field(default=None, description="The tool call that made it.")


Base64 = Annotated[str, StringConstraints(max_length=MAX_ATTACHMENT_BYTES * 4 // 3 + 8)]


class Attachment(BaseModel):
    """A person's file for the run: put in execute_code's working directory and named to the
    model. ``data`` is standard base64; a ``data:`` URL is taken too."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=255)
    data: Base64
    media_type: str | None = Field(
        default=None, max_length=200, description="Ignored: the type comes from the name."
    )

    @field_validator("data")
    @classmethod
    def _base64(cls, value: str) -> str:
        decoded_length(value)
        return value

    def content(self) -> bytes:
        """The decoded bytes (validated already)."""
        return base64.b64decode(_payload(self.data), validate=True)


Attachments = Annotated[list[Attachment], Field(max_length=MAX_ATTACHMENTS)]


def _payload(value: str) -> str:
    """The base64 of ``value``, a data URL's part after the comma."""
    if value.startswith("data:"):
        head, comma, rest = value.partition(",")
        if not comma or not head.endswith(";base64"):
            raise ValueError("a data URL must be base64 (data:<type>;base64,<data>)")
        return rest
    return value


def decoded_length(value: str) -> int:
    """The size of base64 ``value`` decoded; ValueError if it is not base64 or too large."""
    try:
        data = base64.b64decode(_payload(value), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"data is not valid base64: {exc}") from exc
    if len(data) > MAX_ATTACHMENT_BYTES:
        raise ValueError(f"a file is {len(data):,} bytes; the limit is {MAX_ATTACHMENT_BYTES:,}")
    return len(data)
