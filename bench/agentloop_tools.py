"""The benchmark's tools as agentloop tools (imported only by the agentloop contenders)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from agentloop.tools.base import ToolContext, tool
from bench import tasks


class KeyArgs(BaseModel):
    key: str = Field(description=tasks.ARGUMENT_DESCRIPTIONS["key"])


class LabelArgs(BaseModel):
    label: str = Field(description=tasks.ARGUMENT_DESCRIPTIONS["label"])


class DocArgs(BaseModel):
    n: int = Field(description=tasks.ARGUMENT_DESCRIPTIONS["n"])


@tool(name="lookup", description=tasks.DESCRIPTIONS["lookup"])
async def lookup(args: KeyArgs, ctx: ToolContext) -> str:
    return tasks.lookup(args.key)


@tool(name="wait", description=tasks.DESCRIPTIONS["wait"])
async def wait(args: LabelArgs, ctx: ToolContext) -> str:
    return await tasks.wait(args.label)


@tool(name="fetch_doc", description=tasks.DESCRIPTIONS["fetch_doc"])
async def fetch_doc(args: DocArgs, ctx: ToolContext) -> str:
    return tasks.fetch_doc(args.n)


TOOLS = [lookup, wait, fetch_doc]
