"""The caller's threads over HTTP: ``GET /threads``, and ``GET``, ``PATCH`` (rename) and
``DELETE /threads/{thread_id}``.

Every route authenticates first and sees only the caller's threads: another principal's
thread is the same 404, with the same body, as one that does not exist. The thread store is
the app's (``thread_store``): on the quota's store when limits are on, else on
``AGENTLOOP_STORE``'s, made at the first request that needs it. A store that cannot be
reached is a 503 (``store_http_error``), never an answer without the owner check.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentloop.config import ConfigurationError
from agentloop.http_api import HttpError, read_json
from agentloop.principal import Principal
from agentloop.server.body import read_body
from agentloop.server.identity import authenticate
from agentloop.server.service import service_of
from agentloop.store import StoreError
from agentloop.store.http import store_http_error
from agentloop.threads import (
    InvalidThreadInput,
    ThreadBusy,
    ThreadError,
    ThreadMovedOn,
    ThreadNotFound,
    ThreadStore,
    threads_from_env,
)
from agentloop.threads.info import checked_title

logger = logging.getLogger("agentloop.chat_app")

DEFAULT_LIMIT, MAX_LIMIT = 20, 100
PRIVATE = {"cache-control": "no-store"}
"""A thread is one person's: no shared cache keeps it."""


def thread_store(request: Request) -> ThreadStore:
    """The app's thread store, made at its first use (a 503 if it is misconfigured)."""
    state = request.app.state
    found: ThreadStore | None = getattr(state, "threads", None)
    if found is None:
        quota = service_of(request).quota
        try:  # on the quota's store, the quota's clock: one notion of "now" for its items
            found = (
                threads_from_env()
                if quota is None
                else threads_from_env(store=quota.store, clock=quota.clock)
            )
        except ConfigurationError as exc:
            logger.error("threads unavailable: %s", exc)
            raise HttpError(503, "configuration_error", "threads are unavailable") from exc
        state.threads = found
    return found


def thread_http_error(exc: ThreadError | StoreError) -> HttpError:
    """The answer for what the thread store refused (404, 409, 400) or could not do."""
    if isinstance(exc, ThreadNotFound):
        return HttpError(404, "not_found", "no such thread")
    if isinstance(exc, ThreadBusy | ThreadMovedOn):
        return HttpError(409, "conflict", str(exc))
    if isinstance(exc, InvalidThreadInput):
        return HttpError(400, "invalid_request_error", str(exc))
    if isinstance(exc, StoreError):
        return store_http_error(exc, cursor_param="cursor")
    return HttpError(400, "invalid_request_error", str(exc))


async def list_threads(request: Request) -> Response:
    """``GET /threads?limit=&cursor=``: the caller's threads, last changed first."""
    who, threads = _caller(request)
    limit = _limit(request.query_params.get("limit"))
    cursor = request.query_params.get("cursor") or None
    try:
        page = await threads.list_threads(who.id, limit=limit, cursor=cursor)
    except (ThreadError, StoreError) as exc:
        raise thread_http_error(exc) from exc
    body = {
        "object": "list",
        "data": [t.to_json() for t in page.threads],
        "next_cursor": page.cursor,
    }
    return JSONResponse(body, headers=PRIVATE)


async def thread(request: Request) -> Response:
    """``GET``, ``PATCH`` or ``DELETE /threads/{thread_id}``."""
    who, threads = _caller(request)
    thread_id = str(request.path_params["thread_id"])
    title = await _title(request) if request.method == "PATCH" else None
    try:
        if request.method == "DELETE":
            await threads.delete(who.id, thread_id)
            await _delete_files(request, who, thread_id)
            body: dict[str, Any] = {"id": thread_id, "object": "thread.deleted", "deleted": True}
        elif title is not None:
            body = (await threads.rename(who.id, thread_id, title)).to_json()
        else:
            loaded = await threads.load(who.id, thread_id)
            files = await _files(request, who, thread_id)
            body = {**loaded.info.to_json(), "messages": loaded.messages, "files": files}
    except (ThreadError, StoreError) as exc:
        raise thread_http_error(exc) from exc
    return JSONResponse(body, headers=PRIVATE)


async def _files(request: Request, who: Principal, thread_id: str) -> list[dict[str, Any]]:
    """The thread's kept files with fresh links (a 503 if the file store is down)."""
    from agentloop.files.blobs import FilesUnavailable
    from agentloop.server.files import files_http_error, files_store

    try:
        refs = await files_store(request).thread_files(who.id, thread_id)
    except FilesUnavailable as exc:
        raise files_http_error(exc) from exc
    return [ref.model_dump(mode="json") for ref in refs]


async def _delete_files(request: Request, who: Principal, thread_id: str) -> None:
    """The thread's files go with it; if the file store is down they are left for its
    expiry (the thread itself is gone already), and the log says so."""
    from agentloop.files.blobs import FilesUnavailable
    from agentloop.server.files import files_store

    try:
        await files_store(request).delete_thread(who.id, thread_id)
    except (FilesUnavailable, HttpError) as exc:
        logger.error("a deleted thread's files were left to expire: %s", exc)


def _caller(request: Request) -> tuple[Principal, ThreadStore]:
    service = service_of(request)
    return authenticate(service, request), thread_store(request)


def _limit(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_LIMIT
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 3 and 1 <= int(raw) <= MAX_LIMIT):
        raise HttpError(
            400, "invalid_request_error", f"limit must be 1 to {MAX_LIMIT}", param="limit"
        )
    return int(raw)


async def _title(request: Request) -> str:
    """The new title of a ``PATCH`` body ``{"title": "..."}`` (400 for anything else)."""
    limits = service_of(request).limits
    raw = read_json(await read_body(request, limits), request.headers.get("content-type"), limits)
    if not isinstance(raw, dict):
        raise HttpError(400, "invalid_request_error", "the body must be a JSON object")
    if set(raw) - {"title"}:
        raise HttpError(400, "invalid_request_error", "only title may be changed")
    if "title" not in raw:
        raise HttpError(400, "invalid_request_error", "title is required", param="title")
    try:
        return checked_title(raw["title"])
    except InvalidThreadInput as exc:
        raise HttpError(400, "invalid_request_error", str(exc), param="title") from exc
