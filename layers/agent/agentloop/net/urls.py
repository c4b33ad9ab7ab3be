"""What makes a URL worth keeping: the standard library only, for everything that lists
sources (search results, ``done.sources``) without fetching anything."""

from __future__ import annotations

from urllib.parse import urlsplit


def usable_url(url: object) -> str | None:
    """``url`` if it is an absolute http(s) URL, else None (a result without one is useless)."""
    if not isinstance(url, str):
        return None
    url = url.strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    return url
