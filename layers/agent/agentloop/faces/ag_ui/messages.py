"""AG-UI's messages as the agent's conversation: text only, a sub-agent's messages left out,
the application's context as one system message."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentloop.http_api import HttpError, RequestLimits
from agentloop.models import (
    AssistantMessage,
    FunctionCall,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)


class Loose(BaseModel):
    """AG-UI's objects are open: unknown keys (name, metadata, encryptedValue...) are ignored."""

    model_config = ConfigDict(extra="ignore")


class TextPart(Loose):
    type: Literal["text"]
    text: str


class MediaPart(Loose):
    """An image, audio, video or document part: valid AG-UI, but this agent reads only text."""

    type: Literal["image", "audio", "video", "document"]


Part = Annotated[TextPart | MediaPart, Field(discriminator="type")]
Content = str | list[Part]


class _Message(Loose):
    id: str
    subagentRunId: str | None = None
    """Set on a sub-agent's messages (as this face streams them): not part of the history."""


class DeveloperMessage(_Message):
    role: Literal["developer"]
    content: str


class AgUiSystemMessage(_Message):
    role: Literal["system"]
    content: str


class AgUiFunctionCall(Loose):
    name: str = Field(min_length=1, max_length=128)
    arguments: str


class AgUiToolCall(Loose):
    id: str = Field(min_length=1, max_length=128)
    type: Literal["function"] = "function"
    function: AgUiFunctionCall


class AgUiAssistantMessage(_Message):
    role: Literal["assistant"]
    content: str | None = None
    toolCalls: list[AgUiToolCall] | None = None


class AgUiUserMessage(_Message):
    role: Literal["user"]
    content: Content


class AgUiToolMessage(_Message):
    role: Literal["tool"]
    content: Content
    toolCallId: str = Field(min_length=1, max_length=128)
    error: str | None = None


class UnmappableMessage(_Message):
    """Roles with no place in the model's conversation (UI progress, another model's reasoning)."""

    role: Literal["activity", "reasoning"]


AgUiMessage = Annotated[
    DeveloperMessage
    | AgUiSystemMessage
    | AgUiAssistantMessage
    | AgUiUserMessage
    | AgUiToolMessage
    | UnmappableMessage,
    Field(discriminator="role"),
]


class ContextEntry(Loose):
    description: str
    value: str


def _text(content: Content, where: str) -> str:
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for index, part in enumerate(content):
        if not isinstance(part, TextPart):
            raise HttpError(
                422,
                "unsupported_content",
                f"{where}.content.{index}: this agent reads text only, not {part.type} parts",
                param=f"{where}.content.{index}",
            )
        texts.append(part.text)
    return "".join(texts)


def to_message(message: AgUiMessage, index: int) -> Message:
    where = f"messages.{index}"
    if isinstance(message, DeveloperMessage | AgUiSystemMessage):
        return SystemMessage(content=message.content)
    if isinstance(message, AgUiUserMessage):
        return UserMessage(content=_text(message.content, where))
    if isinstance(message, AgUiAssistantMessage):
        calls = [
            ToolCall(
                id=c.id, function=FunctionCall(name=c.function.name, arguments=c.function.arguments)
            )
            for c in message.toolCalls or ()
        ]
        content = (message.content or None) if calls else message.content
        return AssistantMessage(content=content, tool_calls=calls or None)
    if isinstance(message, AgUiToolMessage):
        content = _text(message.content, where)
        if message.error:
            content = f"{content}\n\nerror: {message.error}" if content else message.error
        return ToolMessage(tool_call_id=message.toolCallId, content=content)
    raise HttpError(
        422,
        "unsupported_role",
        f"{where}: role {message.role!r} has no place in the model's conversation",
        param=f"{where}.role",
    )


def with_context(messages: list[Message], context: list[ContextEntry]) -> list[Message]:
    """The context as one system message, after the conversation's leading system messages."""
    lines = [f"- {entry.description}: {entry.value}" for entry in context]
    text = "Context from the application:\n" + "\n".join(lines)
    limit = RequestLimits().max_message_chars
    if len(text) > limit:
        raise HttpError(
            413,
            "message_too_large",
            f"context has {len(text)} characters; the limit is {limit}",
            param="context",
        )
    at = next((i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)), 0)
    return [*messages[:at], SystemMessage(content=text), *messages[at:]]
