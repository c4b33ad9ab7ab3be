"""A UI conversation as the agent's history: text parts are the content, finished tool parts
become an assistant message with ``tool_calls`` and their results, answered approvals the
decisions that continue a paused run. File parts are not history: a user's are the run's
attachments (``request.py``), an assistant's are files a run made, shown by the client."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentloop.faces.ui_stream.parts import (
    BaseToolPart,
    StepStartPart,
    TextPart,
    UIMessage,
    invalid,
)
from agentloop.models import (
    Approval,
    AssistantMessage,
    FunctionCall,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agentloop.tools.results import ToolResult


def convert_message(
    message: UIMessage, where: str, seen: set[str], decisions: dict[str, Approval] | None
) -> list[Message]:
    if message.role == "assistant":
        return _assistant_messages(message, where, seen, decisions)
    texts: list[str] = []
    for index, part in enumerate(message.parts):
        at = f"{where}.parts.{index}"
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, BaseToolPart):
            raise invalid(f"{at}.type", f"a {message.role} message cannot hold tool parts")
    if not message.parts:
        raise invalid(f"{where}.parts", f"a {message.role} message needs at least one part")
    content = "".join(texts)
    return [
        SystemMessage(content=content) if message.role == "system" else UserMessage(content=content)
    ]


@dataclass
class _Step:
    """The assistant message being built from a step's parts, and its tool results."""

    out: list[Message] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    results: list[ToolMessage] = field(default_factory=list)

    def flush(self) -> None:
        text = "".join(self.texts)
        if self.calls:
            self.out.append(AssistantMessage(content=text or None, tool_calls=list(self.calls)))
            self.out.extend(self.results)
        elif text:
            self.out.append(AssistantMessage(content=text))
        self.texts.clear()
        self.calls.clear()
        self.results.clear()


def _assistant_messages(
    message: UIMessage, where: str, seen: set[str], decisions: dict[str, Approval] | None
) -> list[Message]:
    """One assistant message per step (its text and tool calls), each followed by its tool
    results; text after a step's tool parts starts a new message, as the model said it
    after reading the results.

    ``decisions`` (the last message only) collects the answered approvals: such a call has no
    result yet, the continued run gives it one."""
    step = _Step()
    for index, part in enumerate(message.parts):
        at = f"{where}.parts.{index}"
        if isinstance(part, StepStartPart):
            step.flush()
        elif isinstance(part, TextPart):
            if step.calls:
                step.flush()
            step.texts.append(part.text)
        elif isinstance(part, BaseToolPart):
            _tool_part(part, at, step, seen, decisions)
    step.flush()
    return step.out


def _tool_part(
    part: BaseToolPart,
    at: str,
    step: _Step,
    seen: set[str],
    decisions: dict[str, Approval] | None,
) -> None:
    """A tool part: its call in the step's message, and its result or its decision."""
    if part.toolCallId in seen:
        raise invalid(f"{at}.toolCallId", f"duplicate tool call id {part.toolCallId!r}")
    seen.add(part.toolCallId)
    arguments = _arguments(part.input)
    call = ToolCall(
        id=part.toolCallId, function=FunctionCall(name=part.tool_name, arguments=arguments)
    )
    step.calls.append(call)
    if part.state == "approval-responded":
        _decide(part, at, decisions)
    else:
        step.results.append(ToolMessage(tool_call_id=part.toolCallId, content=_result(part, at)))


def _decide(part: BaseToolPart, at: str, decisions: dict[str, Approval] | None) -> None:
    """Record a person's answer to a paused call; only the last message can carry one."""
    if decisions is None:
        raise invalid(
            f"{at}.state",
            "an answered approval continues the paused run and must be in the last message, "
            "the assistant message that asked for it",
        )
    approval = part.approval
    if approval is None or approval.approved is None:
        raise invalid(f"{at}.approval.approved", "an approval-responded part needs its decision")
    decisions[part.toolCallId] = Approval(
        call_id=part.toolCallId, approved=approval.approved, reason=approval.reason
    )


def denied_result(reason: str | None) -> str:
    """What the model read for a denied call: an ``output-denied`` part carries no text, so the
    history sent back rebuilds it from the part's reason, as the loop wrote it."""
    return ToolResult.denied(reason).render(max_chars=3_000)


def _arguments(value: Any) -> str:
    """A tool part's input as argument text: a string is the model's text as written (the
    stream sends arguments that are not a JSON object that way)."""
    if isinstance(value, str):
        return value
    return json.dumps({} if value is None else value, ensure_ascii=False)


def _result(part: BaseToolPart, at: str) -> str:
    if part.state == "output-available":
        if "output" not in part.model_fields_set:
            raise invalid(f"{at}.output", "an output-available tool part needs its output")
        output = part.output
        return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    if part.state == "output-error":
        if part.errorText is None:
            raise invalid(f"{at}.errorText", "an output-error tool part needs its errorText")
        return part.errorText
    if part.state == "output-denied":
        return denied_result(part.approval.reason if part.approval else None)
    if part.state == "approval-requested":
        raise invalid(
            f"{at}.state",
            "this call waits for a person's approval: answer it (addToolApprovalResponse) "
            "before sending the conversation again",
        )
    raise invalid(
        f"{at}.state",
        f"a tool part in state {part.state!r} has no result; only finished tool calls "
        "(output-available, output-error, output-denied) and answered approvals can be sent "
        "back",
    )
