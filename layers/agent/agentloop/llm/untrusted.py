"""What a model streams is untrusted input: make it safe to keep, show and send back.

A provider may stream tool calls whose names are empty, too long or not a name at all, ids
that are missing, over-long or repeated, arguments that are not JSON, and text holding lone
surrogates (a JSON ``\\ud800`` escape decodes to one, and no UTF-8 encoder will take it).
The run must go on: every call becomes a :class:`~agentloop.models.ToolCall` that our own
history check and every provider accept, and what was wrong with it is kept so the loop
answers it with an error result the model can act on, instead of running it.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from agentloop.models import FunctionCall, ToolCall

# OpenAI's function-name rule; Groq and the other compatible providers follow it.
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# Ids are echoed back to the provider: OpenAI refuses ones over 40 characters.
CALL_ID = re.compile(r"[A-Za-z0-9_.:-]{1,40}")
INVALID_NAME = "invalid_tool_name"
MAX_CALLS_PER_TURN = 32
MAX_ARGUMENT_CHARS = 100_000
MAX_FINISH_REASON = 40

_SURROGATE = re.compile(r"[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, so that it encodes as UTF-8."""
    return _SURROGATE.sub("\ufffd", text)


def clean_finish_reason(value: object) -> str | None:
    """A finish reason fit for logs and events: a short string, or None."""
    if not isinstance(value, str) or not value:
        return None
    return clean_text(value[:MAX_FINISH_REASON])


@dataclass(frozen=True)
class RawCall:
    """One tool call as assembled from the stream, before anything is trusted."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class CheckedCall:
    """A call safe to keep in the history, and why it must not run (None: it may)."""

    call: ToolCall
    problem: str | None = None


def _new_id() -> str:
    return f"call_{uuid.uuid4().hex[:20]}"


def _shown(value: str) -> str:
    """A model-written value quoted in an error result: short, and safe to encode."""
    value = clean_text(value)
    return repr(value if len(value) <= 80 else value[:77] + "...")


def check_calls(raw: list[RawCall]) -> list[CheckedCall]:
    """Every raw call as a valid :class:`ToolCall`; ids unique within the turn."""
    checked: list[CheckedCall] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        problem: str | None = None
        name = clean_text(item.name)
        if not NAME.fullmatch(name):
            problem = (
                f"the tool name {_shown(item.name)} is not a valid name "
                "(1-64 letters, digits, '_' or '-')"
                if item.name
                else "the tool call has no tool name"
            )
            name = INVALID_NAME
        call_id = item.id if CALL_ID.fullmatch(item.id) and item.id not in seen else _new_id()
        seen.add(call_id)
        arguments = clean_text(item.arguments)
        if len(arguments) > MAX_ARGUMENT_CHARS:
            problem = problem or (
                f"the arguments are {len(arguments):,} characters; at most "
                f"{MAX_ARGUMENT_CHARS:,} are accepted"
            )
            arguments = arguments[:MAX_ARGUMENT_CHARS]
        if index >= MAX_CALLS_PER_TURN:
            problem = (
                f"not run: at most {MAX_CALLS_PER_TURN} tool calls are run per turn; "
                "call fewer at a time"
            )
        call = ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments))
        checked.append(CheckedCall(call, problem))
    return checked
