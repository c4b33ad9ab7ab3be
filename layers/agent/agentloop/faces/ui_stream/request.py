"""The body ``DefaultChatTransport`` posts to ``POST /api/chat``, as a :class:`ChatRequest`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agentloop.faces.attachments import attachment, check_count
from agentloop.faces.options import AskingAgentOptions, option_params
from agentloop.faces.ui_stream.history import convert_message
from agentloop.faces.ui_stream.parts import FilePart, ShortId, SourcePart, UIMessage, invalid
from agentloop.files.models import Attachment
from agentloop.models import NEW_THREAD, Approval, ChatRequest, Message, ThreadId

_OPTION_PARAMS = option_params(AskingAgentOptions, "agentloop")
_THREAD_ID: TypeAdapter[str] = TypeAdapter(ThreadId)


class UIChatRequest(BaseModel):
    """The body ``DefaultChatTransport`` posts; unknown fields are refused (a misspelt
    option must not be ignored in silence)."""

    model_config = ConfigDict(extra="forbid")

    id: ShortId | None = None
    messages: list[UIMessage] | None = Field(default=None, min_length=1)
    message: UIMessage | None = None
    """Only the new message: the chat's earlier ones are on the caller's thread ``id`` (the
    body the AI SDK's persistence guide makes with ``prepareSendMessagesRequest``)."""
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    messageId: ShortId | None = None
    model: str | None = Field(default=None, max_length=200)
    agentloop: AskingAgentOptions = Field(default_factory=AskingAgentOptions)

    @property
    def conversation(self) -> list[UIMessage]:
        """The UI messages this body carries: the whole chat, or only its new message."""
        if self.messages is not None:
            return self.messages
        return [self.message] if self.message is not None else []

    @property
    def on_thread(self) -> bool:
        """The body sends only the new message: the chat goes on on the caller's thread ``id``
        (made by its first such request)."""
        return self.message is not None

    def to_chat_request(self) -> ChatRequest:
        """The run to start: the whole conversation without a thread (:meth:`_stateless`), or
        the new message on the chat's thread (:meth:`_threaded`); 422 naming what is wrong."""
        if self.message is not None and self.messages is not None:
            raise invalid(
                "message",
                "send either messages (the whole chat) or message (only the new one, the "
                "others being on the chat's thread)",
            )
        if self.message is not None:
            return self._threaded(self.message)
        if self.agentloop.resumable:
            raise invalid(
                "agentloop.resumable",
                "a resumable stream is kept on the chat's thread: send the chat id and only "
                "the new message (message), not the whole chat",
            )
        if self.messages is None:
            raise invalid("messages", "the chat's messages (or its new message) are missing")
        return self._stateless(self.messages)

    def _stateless(self, messages: list[UIMessage]) -> ChatRequest:
        """The conversation as the agent's history (422 naming the part it cannot take); when it
        ends with a paused run's assistant message whose approvals were answered, that run's
        continuation (its token and the decisions). The chat ``id`` is not read."""
        history: list[Message] = []
        seen: set[str] = set()
        last = len(messages) - 1
        decisions: dict[str, Approval] = {}
        for index, message in enumerate(messages):
            answers = decisions if index == last else None
            history.extend(convert_message(message, f"messages.{index}", seen, answers))
        resume = None
        if decisions:
            resume = self._resume_token()
        elif messages[last].role != "user":
            raise invalid(f"messages.{last}", "the last message must be the user's (role 'user')")
        # A continuation's last message is the assistant's, which no attachment goes with.
        files = [] if decisions else _attachments(list(_numbered(messages)))
        return self._chat_request(
            history, approvals=list(decisions.values()) or None, resume=resume, files=files
        )

    def _threaded(self, message: UIMessage) -> ChatRequest:
        """The new user message on the caller's thread ``id``, whose messages go before it."""
        thread_id = self._thread_id()
        if message.role != "user":
            raise invalid(
                "message.role",
                "the new message on a chat's thread is the user's; answering approvals "
                "continues a paused run, which needs the whole chat in messages",
            )
        if self.trigger != "submit-message":
            raise invalid(
                "trigger",
                "regenerating an answer needs the whole chat in messages: the thread keeps "
                "the answer it would replace",
            )
        new = convert_message(message, "message", set(), None)
        files = _attachments([(message, "message")])
        return self._chat_request(new, thread_id=thread_id, files=files)

    def _thread_id(self) -> str:
        """The chat ``id`` as the caller's thread id (422 if it cannot be one)."""
        if self.id is None:
            raise invalid("id", "sending only the new message needs the chat id: its thread")
        try:
            thread_id = _THREAD_ID.validate_python(self.id)
        except ValidationError as exc:
            raise invalid("id", "a chat id on a thread is 1-128 letters, digits, - or _") from exc
        if thread_id == NEW_THREAD:
            raise invalid("id", f"{NEW_THREAD!r} cannot be a chat id: make one (generateId)")
        named = self.agentloop.thread_id
        if named is not None and named != thread_id:
            raise invalid("agentloop.thread_id", "the chat id is the thread: leave this out")
        return thread_id

    def _chat_request(
        self,
        messages: list[Message],
        *,
        approvals: list[Approval] | None = None,
        resume: str | None = None,
        thread_id: str | None = None,
        files: list[Attachment] | None = None,
    ) -> ChatRequest:
        options = self.agentloop.chat_fields()
        if thread_id is not None:
            options["thread_id"] = thread_id
        try:
            return ChatRequest(
                messages=messages,
                model=self.model,
                approvals=approvals,
                resume=resume,
                attachments=files or None,
                **options,
            )
        except ValueError as exc:  # conversation-shape problems found by ChatRequest
            raise invalid("messages", str(exc)) from exc

    @property
    def continued_message_id(self) -> str | None:
        """The paused assistant message this request continues (its answer goes on in it).
        A conversation that :meth:`to_chat_request` took ends with the user's message, or
        with the assistant message whose approvals it answers."""
        message = self.conversation[-1]
        return message.id if message.role == "assistant" else None

    def shown_sources(self) -> frozenset[str]:
        """The URLs of the sources the continued message shows already (none: a new answer)."""
        if self.continued_message_id is None:
            return frozenset()
        parts = self.conversation[-1].parts
        return frozenset(
            p.url for p in parts if isinstance(p, SourcePart) and isinstance(p.url, str)
        )

    def plan_params(self) -> dict[str, str]:
        """Where this protocol carries what a plan may refuse (``start_run``'s params)."""
        if self.messages is None:
            return dict(_OPTION_PARAMS)
        last = len(self.messages) - 1
        return {
            **_OPTION_PARAMS,
            "resume": f"messages.{last}.metadata.resume",
            "approvals": f"messages.{last}.parts",
        }

    def _resume_token(self) -> str:
        last = len(self.conversation) - 1
        metadata = self.conversation[last].metadata
        token = metadata.get("resume") if isinstance(metadata, dict) else None
        if not isinstance(token, str) or not token:
            raise invalid(
                f"messages.{last}.metadata.resume",
                "answering approvals continues the paused run, which needs its token: send the "
                "assistant message back with the metadata its stream gave it",
            )
        return token


def _numbered(messages: list[UIMessage]) -> Iterator[tuple[UIMessage, str]]:
    for index, message in enumerate(messages):
        yield message, f"messages.{index}"


def _attachments(messages: list[tuple[UIMessage, str]]) -> list[Attachment]:
    """The user's file parts as the run's attachments, in order (413 past the count).

    Every user message's, not only the last one's: a chat without a thread sends its whole
    conversation each time and its run's working directory starts empty, so the files of
    earlier turns are put back too. An assistant's file parts are files a run made: shown by
    the client, not sent to the run again."""
    found = [
        (part, f"{where}.parts.{index}")
        for message, where in messages
        if message.role == "user"
        for index, part in enumerate(message.parts)
        if isinstance(part, FilePart)
    ]
    if found:
        check_count(len(found), found[-1][1])
    return [attachment(part.url, part.filename, part.mediaType, f"{at}.url") for part, at in found]
