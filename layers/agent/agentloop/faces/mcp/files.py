"""The files an ``ask`` run made, as MCP content beside its answer.

A raster image comes back as ``image`` content, its bytes read from the file store as the
caller's own file (``Artifacts.open`` with the caller's id: nothing of anyone else's can be
read this way); any other file, an image too large to inline, or one the store cannot give
now, as a ``resource_link`` to its expiring link (absolute: a calling client has no page
origin to resolve a relative one against).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import urljoin

import mcp_types as types

from agentloop.files.blobs import Blob, FilesUnavailable
from agentloop.files.media import INLINE_IMAGES
from agentloop.files.models import FileRef
from agentloop.http_api import HttpError

logger = logging.getLogger(__name__)

MAX_INLINE_IMAGE_BYTES = 1024 * 1024
"""Larger images are linked: the result is read by a model, whose context they would fill."""

OpenFile = Callable[[str], Awaitable[Blob | None]]
"""The caller's file of that id, or None (``Artifacts.open`` bound to the caller)."""

Content = types.TextContent | types.ImageContent | types.ResourceLink


async def file_contents(
    files: list[FileRef], open_file: OpenFile | None, base_url: str
) -> list[Content]:
    """One content block per file, in the order the run made them."""
    return [await _content(ref, open_file, base_url) for ref in files]


async def _content(ref: FileRef, open_file: OpenFile | None, base_url: str) -> Content:
    inline = ref.media_type in INLINE_IMAGES and ref.size <= MAX_INLINE_IMAGE_BYTES
    data = await _read(ref, open_file) if inline and open_file is not None else None
    if data is not None:
        return types.ImageContent(data=base64.b64encode(data).decode(), mime_type=ref.media_type)
    return types.ResourceLink(
        name=ref.name,
        uri=urljoin(base_url, ref.url),
        mime_type=ref.media_type,
        size=ref.size,
        description=f"A file the agent made; this link works until {ref.expires_at} (Unix time).",
    )


async def _read(ref: FileRef, open_file: OpenFile) -> bytes | None:
    """The file's bytes, or None (gone, or the store unavailable: it is linked instead)."""
    try:
        blob = await open_file(ref.id)
    except (FilesUnavailable, HttpError) as exc:
        logger.warning("a made file could not be read for the MCP result: %s", exc)
        return None
    return None if blob is None else blob.data
