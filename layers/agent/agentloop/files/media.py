"""Media types of kept files, and the headers that serve them without risk to the page.

A type comes from the file's extension, from a short table, never from the bytes or from a
client's claim: ``application/octet-stream`` when unknown. Raster images are shown inline;
every other file, SVG and HTML included, is served as a download under a CSP ``sandbox``
with ``nosniff``, so even opened directly it cannot run script in the page's origin (an SVG
in an ``<img>`` never runs script either).
"""

from __future__ import annotations

from urllib.parse import quote

OCTET_STREAM = "application/octet-stream"
_TYPES = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "svg": "image/svg+xml",
    "pdf": "application/pdf",
    "csv": "text/csv",
    "tsv": "text/tab-separated-values",
    "txt": "text/plain",
    "md": "text/markdown",
    "json": "application/json",
    "html": "text/html",
    "htm": "text/html",
    "xml": "application/xml",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "parquet": "application/vnd.apache.parquet",
    "zip": "application/zip",
    "py": "text/x-python",
}
INLINE_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Shown in the page as pictures and served inline; nothing in them can run."""

SANDBOX_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; sandbox"


def media_type(name: str) -> str:
    """The media type of a file called ``name``, by its extension."""
    _, dot, ext = name.rpartition(".")
    return _TYPES.get(ext.lower(), OCTET_STREAM) if dot else OCTET_STREAM


def disposition(name: str, media: str) -> str:
    """``inline`` for raster images, else ``attachment``; the name in RFC 6266 form."""
    kind = "inline" if media in INLINE_IMAGES else "attachment"
    ascii_name = "".join(
        c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in name
    )
    return f"{kind}; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name, safe='')}"


def serving_headers(name: str, media: str, size: int) -> dict[str, str]:
    """Headers for serving a kept file from this app's own origin."""
    return {
        "content-type": media if media != "text/html" else "text/plain; charset=utf-8",
        "content-length": str(size),
        "content-disposition": disposition(name, media),
        "x-content-type-options": "nosniff",
        "content-security-policy": SANDBOX_CSP,
        "cache-control": "private, max-age=300",
    }
