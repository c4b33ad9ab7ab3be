"""The stored responses' own routes (``saved.py``): ``GET`` and ``DELETE
/v1/responses/{response_id}`` and ``GET /v1/responses/{response_id}/input_items``, the
caller's only (another principal's is a 404). ``POST /v1/responses`` is a face like the
others (``face.py``, served by ``server.faces``), which keeps its responses (``kept.py``).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentloop.faces.responses.kept import not_found, response_store
from agentloop.faces.responses.saved import ResponseNotFound, ResponseStore, StoredResponse
from agentloop.http_api import HttpError
from agentloop.server.identity import authenticate
from agentloop.server.service import service_of
from agentloop.server.threads import thread_store
from agentloop.store import StoreError
from agentloop.store.http import store_http_error

PRIVATE = {"cache-control": "no-store"}


async def response(request: Request) -> Response:
    """``GET`` (the response object) or ``DELETE /v1/responses/{response_id}``."""
    store, owner, response_id = _caller(request)
    if request.method != "DELETE":
        return JSONResponse((await _load(store, owner, response_id)).response, headers=PRIVATE)
    try:
        await store.delete(owner, response_id)
    except ResponseNotFound as exc:
        raise not_found() from exc
    except StoreError as exc:
        raise store_http_error(exc) from exc
    body = {"id": response_id, "object": "response", "deleted": True}
    return JSONResponse(body, headers=PRIVATE)


async def input_items(request: Request) -> Response:
    """``GET /v1/responses/{response_id}/input_items?order=&limit=&after=``: the request's
    input items (``order`` desc unless asked, as OpenAI's; ``after`` an item id)."""
    store, owner, response_id = _caller(request)
    order, limit, after = _list_params(request)
    items = (await _load(store, owner, response_id)).input_items
    if order == "desc":
        items = items[::-1]
    if after is not None:
        ids = [item.get("id") for item in items]
        if after not in ids:
            raise HttpError(400, "invalid_request_error", "after: no such item", param="after")
        items = items[ids.index(after) + 1 :]
    page = items[:limit]
    body = {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(items) > limit,
    }
    return JSONResponse(body, headers=PRIVATE)


async def _load(store: ResponseStore, owner: str, response_id: str) -> StoredResponse:
    """The caller's stored response (404 for another's or none; 503 if the store is down)."""
    try:
        return await store.load(owner, response_id)
    except ResponseNotFound as exc:
        raise not_found() from exc
    except StoreError as exc:
        raise store_http_error(exc) from exc


def _caller(request: Request) -> tuple[ResponseStore, str, str]:
    who = authenticate(service_of(request), request)
    return response_store(thread_store(request)), who.id, str(request.path_params["response_id"])


def _list_params(request: Request) -> tuple[str, int, str | None]:
    query = request.query_params
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise HttpError(400, "invalid_request_error", "order: asc or desc", param="order")
    raw = query.get("limit", "20")
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 3 and 1 <= int(raw) <= 100):
        raise HttpError(400, "invalid_request_error", "limit must be 1 to 100", param="limit")
    return order, int(raw), query.get("after") or None
