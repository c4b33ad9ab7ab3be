"""Tools used by the loop tests: small, deterministic, and each exercising one behaviour."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from pydantic import BaseModel, Field

from agentloop.tools.base import Tool, ToolContext, ToolError, tool
from agentloop.tools.results import ToolOutput


class KeyArgs(BaseModel):
    key: str = Field(description="Which value to look up.")


class NumberArgs(BaseModel):
    n: int


class SleepArgs(BaseModel):
    label: str
    seconds: float = Field(ge=0, le=5)


class TextArgs(BaseModel):
    text: str


def lookup_tool(table: dict[str, int]) -> Tool:
    @tool(name="lookup")
    async def lookup(args: KeyArgs, ctx: ToolContext) -> int:
        """Look up a number by key."""
        if args.key not in table:
            raise ToolError(f"no value for {args.key!r}", hint=f"known keys: {sorted(table)}")
        return table[args.key]

    return lookup


@tool(name="double")
async def double(args: NumberArgs, ctx: ToolContext) -> int:
    """Double a number."""
    return args.n * 2


@tool(name="echo")
async def echo(args: TextArgs, ctx: ToolContext) -> str:
    """Return the text unchanged."""
    return args.text


@tool(name="boom")
async def boom(args: TextArgs, ctx: ToolContext) -> str:
    """Always fails."""
    raise RuntimeError(f"kaboom: {args.text}")


@tool(name="big")
async def big(args: NumberArgs, ctx: ToolContext) -> str:
    """Return n characters of text."""
    return "".join(chr(ord("a") + i % 26) for i in range(args.n))


def sleeper(
    log: list[tuple[str, str]],
    *,
    timeout_s: float | None = None,
    started: threading.Event | None = None,
) -> Tool:
    """A tool that records when each call starts and ends, to observe concurrency;
    ``started`` is set as a call starts, for a test that waits for that from another thread."""

    @tool(name="sleep", timeout_s=timeout_s)
    async def sleep(args: SleepArgs, ctx: ToolContext) -> str:
        """Sleep for a while, then return the label."""
        log.append(("start", args.label))
        if started is not None:
            started.set()
        await asyncio.sleep(args.seconds)
        log.append(("end", args.label))
        return args.label

    return sleep


class NoArgs(BaseModel):
    pass


def whoami_tool(seen: list[tuple[Any, Any]]) -> Tool:
    """``whoami``: records who the run is for (its principal and its sandbox tenant)."""
    from agentloop.principal import PRINCIPAL_KEY
    from agentloop.sandbox.backends import SANDBOX_TENANT_KEY

    @tool(name="whoami")
    async def whoami(args: NoArgs, ctx: ToolContext) -> str:
        """Say who the run is for."""
        seen.append((ctx.extras.get(PRINCIPAL_KEY), ctx.extras.get(SANDBOX_TENANT_KEY)))
        return "noted"

    return whoami


class Unserialisable:
    """A result the JSON encoder falls back to str() for, whose str() raises: a bug."""

    def __str__(self) -> str:
        raise RuntimeError("a bug in result rendering")


@tool(name="buggy")
async def buggy(args: NoArgs, ctx: ToolContext) -> object:
    """Returns something that cannot be rendered (simulates a bug inside the loop)."""
    return Unserialisable()


class MarginArgs(BaseModel):
    margin_s: float = Field(gt=0)


@tool(name="until_deadline")
async def until_deadline(args: MarginArgs, ctx: ToolContext) -> str:
    """Work until only ``margin_s`` seconds are left before the request's deadline.

    Lets deadline tests use up the time by the deadline's own clock, so they do not
    depend on how fast the machine is.
    """
    await asyncio.sleep(max(0.0, ctx.deadline.remaining() - args.margin_s) + 0.05)
    return "used up the time"


class GateArgs(BaseModel):
    name: str


def gate_tool(gate: threading.Event) -> Tool:
    """A tool that returns only once the test opens ``gate`` (from another thread)."""

    @tool(name="gate")
    async def gate_fn(args: GateArgs, ctx: ToolContext) -> str:
        """Wait until the test opens the gate."""
        if await asyncio.to_thread(gate.wait, 10):
            return f"opened {args.name}"
        raise ToolError("the gate was never opened")

    return gate_fn


def tiny_png(width: int = 4, height: int = 3) -> bytes:
    """A valid RGB PNG made with the standard library (a red-to-blue gradient)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(
        b"\x00" + b"".join(bytes((255 - 60 * x, 40, 60 * x)) for x in range(width))
        for _ in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


class FileArgs(BaseModel):
    name: str = Field(default="chart.png", max_length=200)
    text: str | None = Field(default=None, description="Content of a text file; else a PNG.")


def make_file_tool() -> Tool:
    """``make_file``: keeps a file for the caller the way execute_code does (through the run's
    workspace), so faces and the page can be tested without the sandbox's stack."""
    from agentloop.files.artifacts import Made
    from agentloop.files.workspace import WORKSPACE_KEY, Workspace

    @tool(name="make_file")
    async def make_file(args: FileArgs, ctx: ToolContext) -> ToolOutput:
        """Make a file (a small PNG chart unless text is given) and show it to the person."""
        workspace = ctx.extras.get(WORKSPACE_KEY)
        if not isinstance(workspace, Workspace):
            raise ToolError("this run keeps no files")
        data = args.text.encode() if args.text is not None else tiny_png()
        refs = await workspace.keep([Made(args.name, data)], ctx.call_id)
        made = [{"name": r.name, "media_type": r.media_type, "size": r.size} for r in refs]
        return ToolOutput({"files": made}, tuple(refs))

    return make_file


def list_files_tool() -> Tool:
    """``list_files``: what the run's working directory holds (name -> text), as a program
    run by execute_code would find it."""
    from agentloop.files.workspace import WORKSPACE_KEY, Workspace

    @tool(name="list_files")
    async def list_files(args: NoArgs, ctx: ToolContext) -> dict[str, str]:
        """List the working directory's files and their text."""
        workspace = ctx.extras.get(WORKSPACE_KEY)
        if not isinstance(workspace, Workspace):
            raise ToolError("no working directory")
        files = await workspace.snapshot()
        return {name: data.decode("utf-8", "replace") for name, data in files.items()}

    return list_files
