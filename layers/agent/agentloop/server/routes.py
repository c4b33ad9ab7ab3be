"""The routes that are no protocol face: readiness, the model and tool lists, and the chat
page with its modules."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from agentloop.server.identity import authenticate
from agentloop.server.runs import prepare_tools
from agentloop.server.service import service_of

# The page runs only its own script and styles; connect-src stays open because the endpoint
# setting may point at another origin (a deployed Function URL). Pictures come from this
# origin, or from where kept files are served (see page_headers).
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:{files}; "
    "connect-src *; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "content-security-policy": PAGE_CSP.format(files=""),
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
    "cache-control": "no-cache",
}


def page_headers(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The page's headers; with a files bucket its presigned links' origins may be pictures
    (S3's, or AGENTLOOP_FILES_ENDPOINT_URL's). The page makes no other ``<img>``."""
    env = os.environ if environ is None else environ
    if not env.get("AGENTLOOP_FILES_BUCKET", "").strip():
        return PAGE_HEADERS
    origins = ["https://*.amazonaws.com"]
    endpoint = urlsplit(env.get("AGENTLOOP_FILES_ENDPOINT_URL", "").strip())
    if endpoint.scheme in ("http", "https") and endpoint.netloc:
        origins.append(f"{endpoint.scheme}://{endpoint.netloc}")
    csp = PAGE_CSP.format(files="".join(f" {origin}" for origin in origins))
    return {**PAGE_HEADERS, "content-security-policy": csp}


async def healthz(request: Request) -> Response:
    """Readiness for Lambda Web Adapter, and which sandbox mode ``execute_code`` is in."""
    return JSONResponse({"status": "ok", "execute_code": service_of(request).execute_code})


async def list_models(request: Request) -> Response:
    """``GET /v1/models``: what OpenAI-style chat UIs offer in their model picker: the default,
    then the allowed models whose provider has a key."""
    service = service_of(request)
    authenticate(service, request)
    names = service.models or (service.config.default_model,)
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": name.split(":", 1)[0]}
        for name in names
    ]
    return JSONResponse({"object": "list", "data": data})


async def list_tools(request: Request) -> Response:
    """``GET /tools``: the tools a request may name (the chat page's settings list them)."""
    service = service_of(request)
    authenticate(service, request)
    await prepare_tools(service)
    tools = [{"name": t.name, "opt_in": t.opt_in} for t in service.tools]
    mcp = service.mcp_tools.describe() if service.mcp_tools is not None else []
    return JSONResponse({"tools": tools, "mcp_servers": mcp})


class Page:
    """``GET /``: the chat page (static; it asks for the token itself), under its CSP."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.headers = page_headers()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await FileResponse(self.path, headers=self.headers)(scope, receive, send)


class PageFiles(StaticFiles):
    """The page's modules and styles, each checked again on every use (``no-cache``).

    The page is a set of ES modules: after a deploy a browser must not run a cached old
    module next to a new one. The check costs a 304 where nothing changed (the ETag).
    """

    def __init__(self, directory: Path) -> None:
        super().__init__(directory=directory)

    def file_response(
        self,
        full_path: str | os.PathLike[str],
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["cache-control"] = "no-cache"
        return response
