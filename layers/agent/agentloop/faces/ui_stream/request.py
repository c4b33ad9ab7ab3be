"""The body ``DefaultChatTransport`` posts to ``POST /api/chat``, as a :class:`ChatRequest`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agentloop.faces.options import AskingAgentOptions, option_params
from agentloop.faces.ui_stream.history import convert_message
from agentloop.faces.ui_stream.parts import ShortId, SourcePart, UIMessage, invalid
from agentloop.models import Approval, ChatRequest, Message

_OPTION_PARAMS = option_params(AskingAgentOptions, "agentloop")


class UIChatRequest(BaseModel):
    """The body ``DefaultChatTransport`` posts; unknown fields are refused (a misspelt
    option must not be ignored in silence)."""

    model_config = ConfigDict(extra="forbid")

    id: ShortId | None = None
    messages: list[UIMessage] = Field(min_length=1)
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    messageId: ShortId | None = None
    model: str | None = Field(default=None, max_length=200)
    agentloop: AskingAgentOptions = Field(default_factory=AskingAgentOptions)

    def to_chat_request(self) -> ChatRequest:
        """The conversation as the agent's history (422 naming the part it cannot take); when it
        ends with a paused run's assistant message whose approvals were answered, that run's
        continuation (its token and the decisions)."""
        history: list[Message] = []
        seen: set[str] = set()
        last = len(self.messages) - 1
        decisions: dict[str, Approval] = {}
        for index, message in enumerate(self.messages):
            answers = decisions if index == last else None
            history.extend(convert_message(message, f"messages.{index}", seen, answers))
        resume = None
        if decisions:
            resume = self._resume_token()
        elif self.messages[last].role != "user":
            raise invalid(f"messages.{last}", "the last message must be the user's (role 'user')")
        options = self.agentloop
        try:
            return ChatRequest(
                messages=history,
                model=self.model,
                **options.chat_fields(),
                approvals=list(decisions.values()) or None,
                resume=resume,
            )
        except ValueError as exc:  # conversation-shape problems found by ChatRequest
            raise invalid("messages", str(exc)) from exc

    @property
    def continued_message_id(self) -> str | None:
        """The paused assistant message this request continues (its answer goes on in it).
        A conversation that :meth:`to_chat_request` took ends with the user's message, or
        with the assistant message whose approvals it answers."""
        message = self.messages[-1]
        return message.id if message.role == "assistant" else None

    def shown_sources(self) -> frozenset[str]:
        """The URLs of the sources the continued message shows already (none: a new answer)."""
        if self.continued_message_id is None:
            return frozenset()
        parts = self.messages[-1].parts
        return frozenset(
            p.url for p in parts if isinstance(p, SourcePart) and isinstance(p.url, str)
        )

    def plan_params(self) -> dict[str, str]:
        """Where this protocol carries what a plan may refuse (``start_run``'s params)."""
        last = len(self.messages) - 1
        return {
            **_OPTION_PARAMS,
            "resume": f"messages.{last}.metadata.resume",
            "approvals": f"messages.{last}.parts",
        }

    def _resume_token(self) -> str:
        last = len(self.messages) - 1
        metadata = self.messages[last].metadata
        token = metadata.get("resume") if isinstance(metadata, dict) else None
        if not isinstance(token, str) or not token:
            raise invalid(
                f"messages.{last}.metadata.resume",
                "answering approvals continues the paused run, which needs its token: send the "
                "assistant message back with the metadata its stream gave it",
            )
        return token
