"""One connection per configured MCP server, and its tools as registry tools.

Each server gets a long-lived session (the ``mcp`` SDK's ``Client`` over Streamable HTTP, the
handshake-era protocol every server speaks) owned by one background task, so the server's
``notifications/tools/list_changed`` reach us on its GET stream; tool calls from any run share
it. A session that fails (server gone, connection refused) is dropped and the next use
reconnects. Every failure of a call — unreachable, slow, an error result, cancelled — is a
``ToolError`` the model reads, never an exception out of the run.

Result rendering (``render``): text as text; an image or audio as what it is (type, size),
not its base64, which would spend thousands of tokens the model cannot see as a picture; an
embedded resource as its URI and text (a binary one by type and size); a resource link by URI.

A server is not trusted to be well-behaved. No message from it is read past
``MAX_MESSAGE_BYTES`` (a plain JSON body is cut off by ``_bound_body``, an event stream's
events by the SDK's own limit), so memory stays bounded whatever it sends; a result the SDK
cannot validate is a ToolError naming the first problem; the executor then cuts what is
left to the tool-result bound. A listing is checked tool by tool (``_unusable``): a tool
whose name is unusable or could be mistaken for another server's, whose schema is not a JSON
Schema or is huge, is left out (one log line per listing); a description is cut to what
providers accept; a server lists at most ``MAX_TOOLS``. A storm of ``list_changed``
notifications costs one listing at a time.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from agentloop.mcp.config import McpServerConfig
from agentloop.tools.base import Tool, ToolContext, ToolError
from agentloop.tools.registry import ToolRegistry

if TYPE_CHECKING:
    import httpx2
    from mcp import Client
    from mcp.types import CallToolResult
    from mcp.types import Tool as ListedTool

logger = logging.getLogger(__name__)

SEPARATOR = "__"
LOAD_TIMEOUT_S = 5.0
"""How long the first request waits for the tool lists before it is planned."""
RETRY_AFTER_S = 30.0
"""A server that could not be listed is tried again by a request this much later."""
_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
MAX_MESSAGE_BYTES = 1 << 20
"""The most of one message (a result, a page of the listing) read from a server: the SDK's
own limit for an event, held for plain JSON bodies too."""
MAX_TOOLS = 256
"""Tools taken from one server's listing; the rest are left out."""
MAX_DESCRIPTION_CHARS = 1_024
"""OpenAI refuses a request whose tool description is longer."""
MAX_SCHEMA_CHARS = 20_000
"""A tool's JSON Schema, as JSON: sent with every model call that offers the tool."""


class AnyArguments(BaseModel):
    """The executor's parse step accepts any object; the server's JSON Schema checks it."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True)
class RemoteTool:
    """A tool as the server listed it."""

    name: str
    description: str
    schema: dict[str, Any]


class ServerLink:
    """The session with one server: connect on demand, list tools (cached), call tools."""

    def __init__(self, config: McpServerConfig, on_list: Callable[[ServerLink], None]) -> None:
        self.config = config
        self.tools: dict[str, RemoteTool] | None = None
        """The last listing (None until one succeeded)."""
        self.failed_at: float | None = None
        self._on_list = on_list
        self._client: Client | None = None
        self._owner: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._gone = asyncio.Event()
        self._stop = asyncio.Event()
        self._stale = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._relisting: asyncio.Task[None] | None = None

    async def _session(self) -> Client:
        """The live session, connecting first if there is none (or it was dropped)."""
        if self._owner is not None and self._stop.is_set():
            await asyncio.wait({self._owner}, timeout=5)  # a dropped session winds down first
        if self._owner is None or self._owner.done():
            self._ready, self._gone, self._stop = asyncio.Event(), asyncio.Event(), asyncio.Event()
            self._owner = asyncio.get_running_loop().create_task(self._own(), name="mcp-session")
        await self._ready.wait()
        if self._client is None:
            raise ToolError(f"MCP server {self.config.name!r} is unreachable")
        return self._client

    async def _own(self) -> None:
        """Hold the session open until stopped or broken (its anyio scopes live here)."""
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        try:
            http = create_mcp_http_client(headers=self.config.headers)
            http.event_hooks = {**http.event_hooks, "response": [_bound_body]}
            async with (
                http,
                Client(
                    streamable_http_client(
                        self.config.url,
                        http_client=http,
                        max_sse_event_size=MAX_MESSAGE_BYTES,
                    ),
                    mode="legacy",
                    message_handler=self._on_message,
                    cache=None,
                ) as client,
            ):
                self._client = client
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError) and self._stop.is_set():
                raise
            logger.warning("MCP server %s: session ended: %s", self.config.name, _describe(exc))
        finally:
            self._client = None
            self._ready.set()
            self._gone.set()

    async def _on_message(self, message: Any) -> None:
        from mcp.types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self._stale = True
            self._relist_soon()

    def _background(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``work`` on its own, keeping a reference so that it is not collected mid-way."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _relist_soon(self) -> None:
        """List again, unless a listing is under way: it goes on while the list is stale, so
        any number of notifications costs one listing at a time."""
        if self._relisting is None or self._relisting.done():
            self._relisting = self._background(self._relist())

    async def _relist(self) -> None:
        with contextlib.suppress(Exception):
            while self._stale:
                await self.list_tools()

    async def list_tools(self) -> dict[str, RemoteTool]:
        """Fetch the listing (every page) and publish it; raises on failure."""
        try:
            client = await self._session()
            found: dict[str, RemoteTool] = {}
            left_out: list[str] = []
            cursor: str | None = None
            for _ in range(50):
                page = await self._guard(client.list_tools(cursor=cursor))
                for item in page.tools:
                    if len(found) == MAX_TOOLS:
                        left_out.append(f"every tool after the first {MAX_TOOLS}")
                        break
                    problem = _unusable(self.config.name, item, found)
                    if problem is None:
                        found[item.name] = _offered(item)
                    else:
                        left_out.append(f"{item.name[:80]!r} ({problem})")
                cursor = page.next_cursor
                if not cursor or len(found) == MAX_TOOLS:
                    break
        except BaseException:
            self.failed_at = time.monotonic()
            raise
        if left_out:  # one line, however many: a listing is the server's to make long
            logger.warning(
                "MCP server %s: %d left out: %s%s",
                self.config.name,
                len(left_out),
                "; ".join(left_out[:5]),
                "; ..." if len(left_out) > 5 else "",
            )
        self.tools, self._stale, self.failed_at = found, False, None
        self._on_list(self)
        return found

    async def call(self, name: str, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        """Call one tool; every failure is a ToolError (the executor's timeout cancels us)."""
        client = await self._session()
        cancelled = asyncio.ensure_future(ctx.cancel.wait())
        try:
            call = client.call_tool(name, arguments)
            result = await self._guard(call, cancelled)
        finally:
            cancelled.cancel()
        if self._stale:
            self._relist_soon()
        return render(result, self.config.name, name)

    async def _guard(self, work: Any, *others: asyncio.Future[Any]) -> Any:
        """Await ``work`` unless the session dies or the run is cancelled first."""
        task = asyncio.ensure_future(work)
        gone = asyncio.ensure_future(self._gone.wait())
        try:
            done, _ = await asyncio.wait({task, gone, *others}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not task.done():
                task.cancel()
        if task in done:
            try:
                return task.result()
            except ValidationError as exc:
                self._stop.set()  # a session that failed once is not trusted: reconnect next time
                raise ToolError(
                    f"MCP server {self.config.name!r} sent a result that is not valid MCP: "
                    f"{_first_problem(exc)}",
                    hint="answer without this tool, or call it differently",
                ) from exc
            except Exception as exc:
                self._stop.set()
                raise ToolError(
                    f"MCP server {self.config.name!r} failed: {_describe(exc)}",
                    hint="try again later, or answer without this tool",
                ) from exc
        if gone in done:
            raise ToolError(
                f"MCP server {self.config.name!r} went away during the call",
                hint="try again later, or answer without this tool",
            )
        raise ToolError("cancelled: the request was cancelled during the call")

    async def close(self) -> None:
        self._stop.set()
        if self._owner is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._owner, 5)


def _describe(exc: BaseException) -> str:
    """A short reason, unwrapping the SDK's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def _first_problem(exc: ValidationError) -> str:
    """Pydantic's first error, where and what, without the input it quotes."""
    errors = exc.errors(include_url=False, include_input=False)
    if not errors:
        return "unreadable"
    where = ".".join(str(part) for part in errors[0]["loc"]) or "(result)"
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return f"{where}: {errors[0]['msg']}{more}"[:300]


async def _bound_body(response: httpx2.Response) -> None:
    """httpx response hook: a body the SDK reads whole (JSON, errors) stops at the bound.

    The error is an ``httpx2.StreamError``, which the SDK turns into a JSON-RPC error for the
    request waiting on it. An event stream is left alone: the SDK bounds each of its events.
    """
    import httpx2

    if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
        return
    if isinstance(response.stream, httpx2.AsyncByteStream):
        response.stream = _capped(response.stream)


def _capped(inner: httpx2.AsyncByteStream) -> httpx2.AsyncByteStream:
    import httpx2

    class Capped(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            async for chunk in inner:
                seen += len(chunk)
                if seen > MAX_MESSAGE_BYTES:
                    raise httpx2.StreamError(
                        f"the answer is over {MAX_MESSAGE_BYTES:,} bytes, more than is read"
                    )
                yield chunk

        async def aclose(self) -> None:
            await inner.aclose()

    return Capped()


def _offered(item: ListedTool) -> RemoteTool:
    """A listed tool as it is offered: its description cut to what providers accept."""
    description = item.description or ""
    if len(description) > MAX_DESCRIPTION_CHARS:
        description = description[: MAX_DESCRIPTION_CHARS - 1] + "…"
    return RemoteTool(item.name, description, dict(item.input_schema))


def _unusable(server: str, item: ListedTool, found: dict[str, RemoteTool]) -> str | None:
    """Why a listed tool cannot be offered, or None."""
    from jsonschema import validators
    from jsonschema.exceptions import SchemaError

    name = f"{server}{SEPARATOR}{item.name}"
    if not (len(name) <= 64 and set(name) <= _NAME_OK):
        return "not a valid tool name (letters, digits, '_' and '-'; 64 with the server's)"
    if item.name.startswith("_"):
        # "a" + "__" + "_x" would be named like server "a_"'s tool "x"
        return "a name starting with '_' could be another server's tool"
    if item.name in found:
        return "listed twice (the first is kept)"
    schema = dict(item.input_schema)
    if len(json.dumps(schema, default=str)) > MAX_SCHEMA_CHARS:
        return f"its input schema is over {MAX_SCHEMA_CHARS:,} characters"
    try:
        validators.validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        return f"its input schema is not a JSON Schema: {exc.message[:120]}"
    return None


def render(result: CallToolResult, server: str, tool: str) -> Any:
    """The tool result as the model reads it; an error result becomes a ToolError."""
    parts = [_part(block) for block in result.content]
    if result.is_error:
        text = " ".join(p["text"] for p in parts if p.get("type") == "text") or "no details"
        raise ToolError(f"{server}{SEPARATOR}{tool} answered with an error: {text}")
    texts = [p["text"] for p in parts if p.get("type") == "text"]
    if parts and len(texts) == len(parts):
        return "\n".join(texts)  # structured content, if any, is serialized in the text
    out: dict[str, Any] = {"content": parts}
    if result.structured_content is not None and not texts:
        out["structured"] = result.structured_content
    return out


def _part(block: Any) -> dict[str, Any]:
    kind = getattr(block, "type", "unknown")
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind in ("image", "audio"):
        return {
            "type": kind,
            "mime_type": block.mime_type,
            "bytes": _decoded_size(block.data),
            "note": f"the {kind} is not shown to the model",
        }
    if kind == "resource":
        res = block.resource
        item: dict[str, Any] = {"type": "resource", "uri": str(res.uri), "mime_type": res.mime_type}
        if hasattr(res, "text"):
            item["text"] = res.text
        else:
            item["bytes"] = _decoded_size(res.blob)
        return item
    if kind == "resource_link":
        return {"type": "resource_link", "uri": str(block.uri), "name": block.name}
    return {"type": str(kind)}


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except ValueError:
        return len(data) * 3 // 4


@dataclass(frozen=True)
class McpTool(Tool):
    """A remote tool: its schema is shown as the server gave it and checks the arguments."""

    link: ServerLink | None = field(default=None, repr=False, compare=False)
    remote_name: str = ""

    @property
    def definition(self) -> dict[str, Any]:
        """Read from the current listing, so a ``list_changed`` refresh is seen at once."""
        remote = self._remote()
        schema = remote.schema if remote else {"type": "object"}
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": schema},
        }

    def _remote(self) -> RemoteTool | None:
        tools = self.link.tools if self.link else None
        return tools.get(self.remote_name) if tools else None


def _make_tool(link: ServerLink, remote: RemoteTool) -> McpTool:
    async def run(args: AnyArguments, ctx: ToolContext) -> Any:
        current = link.tools.get(remote.name) if link.tools else None
        if current is None:
            raise ToolError(f"MCP server {link.config.name!r} no longer offers {remote.name!r}")
        arguments = dict(args.model_extra or {})
        check_arguments(current.schema, arguments)
        return await link.call(remote.name, arguments, ctx)

    description = remote.description or f"{remote.name} (from MCP server {link.config.name})"
    return McpTool(
        name=f"{link.config.name}{SEPARATOR}{remote.name}",
        description=description,
        args_model=AnyArguments,
        fn=run,
        opt_in=True,
        link=link,
        remote_name=remote.name,
    )


def check_arguments(schema: dict[str, Any], arguments: dict[str, Any]) -> None:
    """Check the model's arguments against the tool's JSON Schema before the call."""
    from jsonschema import validators
    from jsonschema.exceptions import SchemaError

    try:
        cls = validators.validator_for(schema)
        cls.check_schema(schema)
    except SchemaError:
        return  # the server's schema is not one; let the server judge the arguments
    errors = sorted(cls(schema).iter_errors(arguments), key=lambda e: list(e.path))
    if errors:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.path) or '(root)'}: {e.message}" for e in errors[:10]
        )
        raise ToolError(
            f"invalid arguments: {problems}", hint="fix the fields named and call again"
        )


@dataclass
class McpTools:
    """Every configured server; adds their tools to ``registry`` as they are listed."""

    servers: list[McpServerConfig]
    registry: ToolRegistry
    links: list[ServerLink] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.links = [ServerLink(s, self._publish) for s in self.servers]

    def _publish(self, link: ServerLink) -> None:
        for remote in (link.tools or {}).values():
            if self.registry.get(f"{link.config.name}{SEPARATOR}{remote.name}") is None:
                self.registry.add(_make_tool(link, remote))

    async def ensure_loaded(self, wait_s: float = LOAD_TIMEOUT_S) -> None:
        """List the servers not listed yet (at first use; a failed one again after a while)."""
        now = time.monotonic()
        due = [
            link
            for link in self.links
            if link.tools is None
            and (link.failed_at is None or now - link.failed_at > RETRY_AFTER_S)
        ]
        if not due:
            return
        results = await asyncio.gather(
            *(asyncio.wait_for(link.list_tools(), wait_s) for link in due), return_exceptions=True
        )
        for link, outcome in zip(due, results, strict=True):
            if isinstance(outcome, BaseException):
                link.failed_at = time.monotonic()
                logger.warning(
                    "MCP server %s: no tools yet: %s", link.config.name, _describe(outcome)
                )

    def describe(self) -> list[dict[str, Any]]:
        """What the chat page lists: each server's tools (or that it is not reachable)."""
        return [
            {
                "server": link.config.name,
                "tools": sorted(f"{link.config.name}{SEPARATOR}{n}" for n in link.tools or {}),
                "reachable": link.tools is not None,
            }
            for link in self.links
        ]

    async def close(self) -> None:
        await asyncio.gather(*(link.close() for link in self.links))
