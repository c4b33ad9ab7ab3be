"""A real MCP server (the ``mcp`` SDK's MCPServer over Streamable HTTP) for the client tests.

Tools: ``echo`` (text), ``picture`` (a PNG image), ``document`` (an embedded text resource),
``fail`` (an error result), ``slow`` (sleeps), and ``grow``, which adds the tool ``late``
and tells the client with ``notifications/tools/list_changed``. Served on loopback by
``LoopbackServer`` (lifespan on: the SDK's session manager runs in it).
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import EmbeddedResource, TextResourceContents
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.fakes.loopback import LoopbackServer

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def build_server() -> MCPServer:
    server = MCPServer("fake-mcp")

    @server.tool()
    def echo(text: str, times: int = 1) -> str:
        """Repeat text."""
        return " ".join([text] * times)

    @server.tool()
    def picture() -> Image:
        """A tiny picture."""
        return Image(data=PNG, format="png")

    @server.tool()
    def document() -> EmbeddedResource:
        """A document as an embedded resource."""
        return EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri="memo://one", mime_type="text/plain", text="the memo says hello"
            ),
        )

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails."""
        raise ToolError(f"refused: {reason}")

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleeps."""
        await asyncio.sleep(seconds)
        return "woke up"

    @server.tool()
    async def grow(ctx: Context[Any, Any]) -> str:
        """Adds the tool late and says so."""

        def late() -> str:
            """A tool that came later."""
            return "late tool ran"

        server.add_tool(late)
        await ctx.session.send_tool_list_changed()
        return "grown"

    return server


class Gate:
    """ASGI wrapper that records each request's headers and can play a server that is down
    (every request answered 503), to test that a client reconnects once it is back."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.seen: list[dict[str, str]] = []
        self.down = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
            if self.down:
                await send({"type": "http.response.start", "status": 503, "headers": []})
                await send({"type": "http.response.body", "body": b"down"})
                return
        await self.app(scope, receive, send)


def serve() -> tuple[LoopbackServer, Gate]:
    """Start a fresh server; its MCP endpoint is ``<url>/mcp``."""
    gate = Gate(build_server().streamable_http_app())
    return LoopbackServer(gate, name="fake-mcp", lifespan="on").start(), gate
