"""A real MCP server (the ``mcp`` SDK's MCPServer over Streamable HTTP) for the client tests.

Tools: ``echo`` (text), ``picture`` (a PNG image), ``document`` (an embedded text resource),
``fail`` (an error result), ``slow`` (sleeps), and ``grow``, which adds the tool ``late``
and tells the client with ``notifications/tools/list_changed``. Hostile but well-formed:
``flood`` (one text of any size), ``many`` (any number of images), ``mixed`` (audio, a binary
resource and a link beside text), ``storm`` (``grow`` with any number of notifications).
``probe`` is there to be answered by the ``Gate``. Served on loopback by ``LoopbackServer``
(lifespan on: the SDK's session manager runs in it).

What the SDK's server cannot be made to send (a malformed result, a body of tens of MB as
plain JSON, a hostile tool list) the ``Gate`` in front of it forges: ``Gate.forged`` maps a
request (``tools/list``, or ``tools/call:<tool>``) to the raw reply, everything else (the
handshake included) is the real server's.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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

    @server.tool()
    async def storm(times: int, ctx: Context[Any, Any]) -> str:
        """Adds the tool ``late`` and says so ``times`` times."""

        def late() -> str:
            """A tool that came later."""
            return "late tool ran"

        server.add_tool(late)
        for _ in range(times):
            await ctx.session.send_tool_list_changed()
        return "stormed"

    @server.tool(structured_output=False)  # no output schema for a forged answer to meet
    def probe(case: str) -> str:
        """Answered by the gate when a test forges ``tools/call:probe``."""
        return f"real answer for {case}"

    @server.tool()
    def flood(chars: int) -> str:
        """One text of ``chars`` characters."""
        return "x" * chars

    @server.tool()
    def many(count: int) -> list[ContentBlock]:
        """``count`` images."""
        encoded = base64.b64encode(PNG).decode()
        return [ImageContent(type="image", data=encoded, mime_type="image/png")] * count

    @server.tool()
    def mixed() -> list[ContentBlock]:
        """Text beside audio, a binary resource and a link."""
        return [
            TextContent(type="text", text="see attached"),
            AudioContent(
                type="audio", data=base64.b64encode(b"RIFF" * 100).decode(), mime_type="audio/wav"
            ),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(
                    uri="file:///data.bin", mime_type="application/octet-stream", blob="not base64!"
                ),
            ),
            ResourceLink(type="resource_link", uri="https://example.com/r", name="r"),
        ]

    return server


Answer = Callable[[dict[str, Any]], tuple[str, Iterable[bytes]]]
"""A forged reply to a JSON-RPC request: its content type and its body's chunks."""


def json_answer(result: Any) -> Answer:
    """The JSON-RPC response carrying ``result`` (anything, malformed included) as JSON."""
    return lambda request: ("application/json", [_response(request["id"], result)])


def raw_answer(content_type: str, body: bytes) -> Answer:
    """Exactly ``body``, whatever the request was."""
    return lambda request: (content_type, [body])


def huge_json_answer(megabytes: int) -> Answer:
    """A well-formed text result of ``megabytes`` MB as plain JSON, made as it is sent."""

    def chunks(rid: Any) -> Iterator[bytes]:
        head, tail = _response(rid, {"content": [{"type": "text", "text": "@"}]}).split(b"@")
        yield head
        for _ in range(megabytes * 16):
            yield b"y" * 65_536
        yield tail

    return lambda request: ("application/json", chunks(request["id"]))


def by_case(answers: dict[str, Answer]) -> Answer:
    """For ``probe``: the answer named by the call's ``case`` argument."""
    return lambda request: answers[request["params"]["arguments"]["case"]](request)


def _response(rid: Any, result: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()


class Gate:
    """ASGI wrapper that records each request's headers, can play a server that is down
    (every request answered 503), to test that a client reconnects once it is back, and
    answers the requests named in ``forged`` itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.seen: list[dict[str, str]] = []
        self.down = False
        self.forged: dict[str, Answer] = {}
        self.requests: list[str] = []
        """Each POST's ``tools/list``, ``tools/call:<tool>`` or other JSON-RPC method."""
        self.sent: dict[str, int] = {}
        """Bytes of each forged body that went out before the client hung up (or all)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
            if self.down:
                await send({"type": "http.response.start", "status": 503, "headers": []})
                await send({"type": "http.response.body", "body": b"down"})
                return
            if scope["method"] == "POST":
                body, receive = await _read_body(receive)
                key, message = _rpc_key(body)
                self.requests.append(key)
                if key in self.forged:
                    await self._forge(key, self.forged[key](message), receive, send)
                    return
        await self.app(scope, receive, send)

    async def _forge(
        self, key: str, answer: tuple[str, Iterable[bytes]], receive: Receive, send: Send
    ) -> None:
        """Send the forged body chunk by chunk, counting what went out until the client left
        (a client that stops reading holds ``send`` back: uvicorn waits for the socket)."""
        content_type, chunks = answer
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.create_task(watch())
        headers = [(b"content-type", content_type.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        sent = 0
        try:
            for chunk in chunks:
                await asyncio.sleep(0)  # lets the watcher see a disconnect
                if gone.is_set():
                    break
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                sent += len(chunk)
            if not gone.is_set():
                await send({"type": "http.response.body", "body": b""})
        finally:
            watcher.cancel()
            self.sent[key] = sent


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The request's body, and a ``receive`` that gives it to the app again."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        parts.append(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body"):
            break
    body = b"".join(parts)
    replayed = False

    async def again() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, again


def _rpc_key(body: bytes) -> tuple[str, dict[str, Any]]:
    """``tools/list``, ``tools/call:<name>`` or the method; and the request."""
    try:
        message = json.loads(body)
    except ValueError:
        return "", {}
    if not isinstance(message, dict):
        return "", {}
    method = str(message.get("method", ""))
    if method == "tools/call":
        method = f"{method}:{message.get('params', {}).get('name')}"
    return method, message


def serve() -> tuple[LoopbackServer, Gate]:
    """Start a fresh server; its MCP endpoint is ``<url>/mcp``."""
    gate = Gate(build_server().streamable_http_app())
    return LoopbackServer(gate, name="fake-mcp", lifespan="on").start(), gate
