"""Bounded GET of the issuer's discovery document and key set (httpx, imported on first use).

The URLs come from the deployment's settings (or the issuer's own discovery document), never
from a token. Bounded in time and size because a slow or huge answer would otherwise hold a
request thread: the body is read raw (no decompression: no gzip bomb) in chunks and the read
stops past ``MAX_BYTES``. Redirects are not followed; anything but a 200 is a failure.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

MAX_BYTES = 256 * 1024

Fetch = Callable[[str, float], bytes]
"""``(url, seconds allowed) -> body``; raises :class:`FetchFailed` (or OSError) on failure."""


class FetchFailed(Exception):
    """The key set (or discovery document) could not be had; the message is safe to log."""


def http_get(url: str, timeout_s: float) -> bytes:
    """GET ``url`` within about ``timeout_s`` seconds, reading at most ``MAX_BYTES``."""
    import httpx

    deadline = time.monotonic() + timeout_s
    try:
        with (
            httpx.Client(timeout=httpx.Timeout(timeout_s), follow_redirects=False) as client,
            client.stream(
                "GET", url, headers={"Accept": "application/json", "Accept-Encoding": "identity"}
            ) as response,
        ):
            if response.status_code != 200:
                raise FetchFailed(f"{url} answered HTTP {response.status_code}")
            return _read_bounded(response.iter_raw(), url, deadline)
    except httpx.TimeoutException:
        raise FetchFailed(f"{url} did not answer within {timeout_s:g} s") from None
    except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError) as exc:
        raise FetchFailed(f"{url} could not be fetched: {type(exc).__name__}") from None


def _read_bounded(chunks: Iterable[bytes], url: str, deadline: float) -> bytes:
    """Join chunks until the end, failing past the size cap or the deadline."""
    body = bytearray()
    for chunk in chunks:
        body += chunk
        if len(body) > MAX_BYTES:
            raise FetchFailed(f"{url} answered more than {MAX_BYTES // 1024} KiB")
        if time.monotonic() > deadline:
            raise FetchFailed(f"{url} did not finish answering in time")
    return bytes(body)
