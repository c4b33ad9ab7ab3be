"""``GET /files/{file_id}``: a kept file, for its owner only; and the app's file store.

Two ways in. A link from a ``file`` event (``?expires=&signature=``, local runs) is the
capability itself, as an S3 presigned URL is deployed: it works without credentials until it
expires (then 403). Without a signature the caller authenticates as for every route, and only
the owner's file answers: another principal's id is the same 404 as none. Deployed, that
answer is a redirect to a fresh presigned URL. A file is served with headers that keep it from
running anything in this origin (:func:`agentloop.files.media.serving_headers`).
"""

from __future__ import annotations

import logging
import time

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from agentloop.config import ConfigurationError
from agentloop.files.artifacts import Artifacts
from agentloop.files.blobs import DirectoryBlobs, FilesUnavailable
from agentloop.files.media import serving_headers
from agentloop.http_api import HttpError
from agentloop.server.identity import authenticate
from agentloop.server.service import service_of

logger = logging.getLogger("agentloop.chat_app")

RETRY_AFTER_S = 5


def files_store(request: Request) -> Artifacts:
    """The app's file store, made at its first use (a 503 if it is misconfigured)."""
    state = request.app.state
    found: Artifacts | None = getattr(state, "files", None)
    if found is None:
        from agentloop.files.settings import artifacts_from_env

        try:
            found = artifacts_from_env()
        except ConfigurationError as exc:
            logger.error("files unavailable: %s", exc)
            raise HttpError(503, "configuration_error", "files are unavailable") from exc
        state.files = found
    return found


def files_http_error(exc: FilesUnavailable) -> HttpError:
    logger.error("file store unavailable: %s", exc)
    return HttpError(
        503,
        "files_unavailable",
        "the service's file store is unavailable; try again later",
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


async def get_file(request: Request) -> Response:
    """``GET /files/{file_id}``: by its signed link, or by its owner."""
    artifacts = files_store(request)
    file_id = str(request.path_params["file_id"])
    try:
        if "signature" in request.query_params or "expires" in request.query_params:
            return await _signed(request, artifacts, file_id)
        who = authenticate(service_of(request), request)
        if not isinstance(artifacts.blobs, DirectoryBlobs):  # deployed: S3 serves the bytes
            ref = await artifacts.ref(who.id, file_id)
            if ref is None:
                raise _not_found()
            return RedirectResponse(ref.url, status_code=307, headers={"cache-control": "no-store"})
        blob = await artifacts.open(who.id, file_id)
    except FilesUnavailable as exc:
        raise files_http_error(exc) from exc
    if blob is None:
        raise _not_found()
    return _serve(blob.data, blob.meta)


async def _signed(request: Request, artifacts: Artifacts, file_id: str) -> Response:
    blobs = artifacts.blobs
    expires_raw = request.query_params.get("expires", "")
    signature = request.query_params.get("signature", "")
    usable = expires_raw.isdigit() and len(expires_raw) < 12
    if not isinstance(blobs, DirectoryBlobs) or not usable:
        raise HttpError(403, "forbidden", "this link is not valid")
    expires = int(expires_raw)
    if len(signature) != 64 or not blobs.verify(file_id, expires, signature):
        raise HttpError(403, "forbidden", "this link is not valid")
    if expires < time.time():
        raise HttpError(403, "expired", "this link has expired; ask for the file again")
    blob = await blobs.get(f"files/{file_id}")
    if blob is None:
        raise _not_found()
    return _serve(blob.data, blob.meta)


def _serve(data: bytes, meta: dict[str, str]) -> Response:
    name = meta.get("name", "file")
    media = meta.get("media_type", "application/octet-stream")
    return Response(data, headers=serving_headers(name, media, len(data)))


def _not_found() -> HttpError:
    return HttpError(404, "not_found", "no such file")
