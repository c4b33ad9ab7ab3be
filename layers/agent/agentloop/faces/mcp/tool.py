"""The ``ask`` tool as a calling model sees it: its arguments, its schemas and descriptions
(written for that model), its progress lines and its result."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentloop.config import AgentConfig
from agentloop.events import (
    Done,
    ErrorEvent,
    Event,
    ModelSwitched,
    Notice,
    Source,
    SubagentFinish,
    SubagentStart,
    ToolCallResult,
    ToolCallStart,
)
from agentloop.faces.options import option_params
from agentloop.faces.outcome import Outcome, outcome
from agentloop.files.models import FileRef
from agentloop.models import Iterations, ToolNames
from agentloop.tools.registry import ToolRegistry, UnknownToolError

TOOL_NAME = "ask"


@dataclass(frozen=True)
class ToolChoice:
    """The tool names ``ask`` accepts, and those a run uses when it names none: its schema
    lists them, since a calling model cannot guess them."""

    offered: tuple[str, ...] = ()
    default: tuple[str, ...] = ()

    @classmethod
    def of(cls, registry: ToolRegistry, config: AgentConfig) -> ToolChoice:
        """As the plan decides for a face that cannot ask a person: tools that wait for an
        approval are neither offered nor used."""
        waiting = set(config.approval_tools)
        try:
            default = registry.select(config.default_tools).names
        except UnknownToolError:  # every plan that names no tools is refused, with the reason
            default = []
        return cls(
            offered=tuple(name for name in registry.names if name not in waiting),
            default=tuple(name for name in default if name not in waiting),
        )


class AskArgs(BaseModel):
    # ``ask``'s arguments; the tool's input schema comes from this model (see _schema_for_models).
    # Its options are the agent's own (faces.options) with descriptions for the calling model.
    model_config = ConfigDict(extra="forbid")

    question: str = Field(
        min_length=1,
        description="The question or task, in plain language, with all the context the agent "
        "needs: it sees only this text, not your conversation, and cannot ask you anything back.",
    )
    tools: ToolNames | None = Field(
        default=None,
        description="Names of the tools the agent may use. Omit to let it use its default set; "
        "pass [] to have it answer from the model's own knowledge, without tools.",
    )
    max_iterations: Iterations | None = Field(
        default=None,
        description="The most model turns the agent may take (each turn may call tools). Omit "
        "for the server's default; 2 or 3 gives a quicker, shallower answer. A value above the "
        "server's limit is lowered to it.",
    )


PLAN_PARAMS = option_params(AskArgs, "")
"""Where a plan's refusal points, in ``ask``'s own arguments."""


def _schema_for_models(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic JSON Schema without what pydantic adds for developers: ``title`` (class and
    field names) and an object's ``description`` (a class docstring). The descriptions given
    to fields stay. A property named ``title`` is a property, not the keyword, and stays."""

    def clean(node: Any) -> Any:
        if isinstance(node, list):
            return [clean(item) for item in node]
        if not isinstance(node, dict):
            return node
        drop = {"title", "description"} if "properties" in node else {"title"}
        cleaned = {key: clean(value) for key, value in node.items() if key not in drop}
        if isinstance(node.get("properties"), dict):
            cleaned["properties"] = {
                name: clean(value) for name, value in node["properties"].items()
            }
        return cleaned

    result: dict[str, Any] = clean(schema)
    return result


_USAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prompt_tokens": {"type": "integer"},
        "completion_tokens": {"type": "integer"},
        "cached_tokens": {"type": "integer", "description": "Prompt tokens served from cache."},
    },
    "required": ["prompt_tokens", "completion_tokens"],
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "description": "The agent's answer, as in the text content."},
        "stop_reason": {
            "type": "string",
            "description": "Why the run ended: completed, or the limit that cut it short "
            "(max_iterations, budget, deadline), in which case the answer may be partial. A "
            "run that failed or was cancelled is an error result instead.",
        },
        "iterations": {"type": "integer", "description": "The model turns the run took."},
        "usage": {**_USAGE_SCHEMA, "description": "Tokens used, the sub-agents' included."},
        "usage_by_depth": {
            "type": "array",
            "items": _USAGE_SCHEMA,
            "description": "Tokens used at each depth: the agent first, then its sub-agents.",
        },
        "sources": {
            "type": "array",
            "items": _schema_for_models(Source.model_json_schema()),
            "description": "The web pages the agent used, in the order it first used them.",
        },
        "files": {
            "type": "array",
            "items": _schema_for_models(FileRef.model_json_schema()),
            "description": "Files the agent made (charts, tables), in the order made; also in "
            "the content: an image inline, any other file as a link that expires.",
        },
    },
    "required": ["answer", "stop_reason", "iterations", "usage"],
}

ASK_DESCRIPTION = (
    "Ask a research agent a question, or give it a task. The agent works on its own: it "
    "decides which of its tools to call (such as web search, reading pages or running code, "
    "as `tools` allows), over several rounds if needed, then answers in text. A call can take "
    "from seconds to a few minutes and spends model tokens. It does not see your conversation "
    "and remembers nothing between calls, so put everything it needs in `question`. The "
    "result's text is the answer; its structured content adds why the run stopped, the tokens "
    "used and the web pages the agent used."
)
_ASK_INPUT_SCHEMA = _schema_for_models(AskArgs.model_json_schema())


def ask_tool(choice: ToolChoice) -> types.Tool:
    """The ``ask`` tool as this server offers it: its ``tools`` argument lists the names."""
    schema = json.loads(json.dumps(_ASK_INPUT_SCHEMA))  # a copy to fill in
    tools = schema["properties"]["tools"]
    if choice.offered:
        default = ", ".join(choice.default) or "none"
        tools["description"] = (
            f"Names of the tools the agent may use, among: {', '.join(choice.offered)}. Omit "
            f"to let it use its default set ({default}); pass [] to have it answer from the "
            "model's own knowledge, without tools."
        )
        tools["anyOf"][0]["items"]["enum"] = list(choice.offered)
    else:
        tools["description"] = "This server gives the agent no tools: leave this out."
    return types.Tool(
        name=TOOL_NAME,
        title="Ask a research agent",
        description=ASK_DESCRIPTION,
        input_schema=schema,
        output_schema=OUTPUT_SCHEMA,
    )


def tool_error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def argument_error(exc: ValidationError) -> types.CallToolResult:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "arguments"
    return tool_error(f"invalid argument {where}: {first['msg']}")


def progress_message(event: Event) -> str | None:
    """A human-readable line for the events that are the run's activity; None for the rest."""
    prefix = "sub-agent: " if event.depth > 0 else ""
    if isinstance(event, ToolCallStart):
        text = f"calling {event.name}"
    elif isinstance(event, ToolCallResult):
        text = f"{event.name} {'returned' if event.ok else 'failed'}"
    elif isinstance(event, SubagentStart):
        return f"sub-agent started: {event.query[:200]}"
    elif isinstance(event, SubagentFinish):
        return f"sub-agent finished ({event.stop_reason})"
    elif isinstance(event, Notice):
        text = event.message
    elif isinstance(event, ModelSwitched):
        text = f"switched model to {event.to_model} ({event.reason})"
    else:
        return None
    return prefix + text


_FAILURES: dict[Outcome, str] = {
    Outcome.AWAITS_APPROVAL: "the run paused for a person's approval, which MCP cannot ask for",
    Outcome.AWAITS_CLIENT_TOOLS: "the run paused for tools the caller would run",
    Outcome.SUSPENDED: "the run was suspended before it finished",
}
"""Pauses ``ask`` cannot continue (its plan offers no tool that would cause one): errors."""


def answer(
    done: Done, error: ErrorEvent | None, made: Sequence[FileRef] = ()
) -> types.CallToolResult:
    """The top-level ``done`` as the call's result: an answer (cut short by a limit or not,
    ``stop_reason`` says), or a tool error for a run without one (failed, cancelled, paused).
    ``made``: the files the run made, listed in the structured content."""
    ending = outcome(done, error)
    if ending.outcome is Outcome.FAILED:
        return tool_error(f"{error.code}: {error.message}" if error else "the run failed")
    if not ending.outcome.has_answer:
        return tool_error(_FAILURES.get(ending.outcome) or ending.failure)
    structured = {
        "answer": done.text,
        "stop_reason": done.stop_reason,
        "iterations": done.iterations,
        "usage": done.usage.model_dump(),
        "usage_by_depth": [usage.model_dump() for usage in done.usage_by_depth],
        "sources": [source.model_dump() for source in done.sources],
    }
    if made:
        structured["files"] = [ref.model_dump(mode="json") for ref in made]
    return types.CallToolResult(
        content=[types.TextContent(text=done.text)], structured_content=structured
    )
