"""AG-UI's ``RunAgentInput`` as a :class:`ChatRequest`: its messages, the agent options in
``forwardedProps.agentloop``, and the answers to a paused run's interrupts in ``resume``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from agentloop.faces.ag_ui.messages import (
    AgUiMessage,
    ContextEntry,
    Loose,
    to_message,
    with_context,
)
from agentloop.faces.options import AskingAgentOptions, option_params
from agentloop.http_api import HttpError, first_problem
from agentloop.models import NEW_THREAD, Approval, ChatRequest, Message, UserMessage


class AgUiOptions(AskingAgentOptions):
    """``forwardedProps.agentloop``: what AG-UI has no field for. Strict, so typos are 422s."""

    model: str | None = Field(default=None, max_length=200)


class ResumeEntry(Loose):
    """An answer to one interrupt: a paused call's decision (see the module docstring)."""

    interruptId: str = Field(min_length=1, max_length=128)
    status: Literal["resolved", "cancelled"]
    payload: Any = None
    metadata: dict[str, Any] | None = None


class ForwardedProps(Loose):
    """The application's own props; only the ``agentloop`` key is read."""

    agentloop: AgUiOptions = Field(default_factory=AgUiOptions)


class RunAgentInput(Loose):
    """AG-UI's ``RunAgentInput``, the body of ``POST /ag-ui``."""

    threadId: str
    runId: str
    parentRunId: str | None = None
    protocolVersion: str | None = None
    state: Any = None
    """Shared state is not used by this agent; accepted and left alone."""
    messages: list[AgUiMessage]
    tools: list[Any] = Field(default_factory=list)
    context: list[ContextEntry] = Field(default_factory=list)
    forwardedProps: ForwardedProps = Field(default_factory=ForwardedProps)
    resume: list[ResumeEntry] | None = Field(default=None, max_length=64)

    @field_validator("forwardedProps", mode="before")
    @classmethod
    def _only_objects_carry_options(cls, value: Any) -> Any:
        """forwardedProps may be any dict[str, Any]; only an object can hold ``agentloop``."""
        return value if isinstance(value, dict) else {}

    def to_chat_request(self) -> ChatRequest:
        """The run to start, or a 4xx naming the field this agent cannot honour."""
        if self.tools:
            raise HttpError(
                422,
                "unsupported_parameter",
                "client-side tools are not supported: the agent runs its own tools; choose "
                'them with forwardedProps {"agentloop": {"tools": [...]}}',
                param="tools",
            )
        try:
            return self._chat_request()
        except ValidationError as exc:  # conversation-shape problems found by ChatRequest
            why = first_problem(exc)
            why = why if why.startswith("messages") else f"messages: {why}"
            raise HttpError(422, "invalid_request", why, param="messages") from exc

    @property
    def on_thread(self) -> bool:
        """The run goes on on the caller's thread ``threadId`` (made by its first such run):
        opted in with ``forwardedProps.agentloop.thread_id`` set to ``threadId``."""
        return self.forwardedProps.agentloop.thread_id is not None

    def _chat_request(self) -> ChatRequest:
        if self.on_thread:
            return self._threaded()
        messages = [
            to_message(message, index)
            for index, message in enumerate(self.messages)
            if message.subagentRunId is None
        ]
        if not messages:
            raise HttpError(
                422,
                "invalid_request",
                "messages: the conversation needs the user's message (a sub-agent's messages, "
                "those with a subagentRunId, are not part of it)",
                param="messages",
            )
        if self.context:
            messages = with_context(messages, self.context)
        options = self.forwardedProps.agentloop
        approvals, token = _answers(self.resume or [])
        return ChatRequest(
            messages=messages,
            model=options.model,
            **options.chat_fields(),
            approvals=approvals or None,
            resume=token,
        )

    def _threaded(self) -> ChatRequest:
        """The run's new messages on the thread ``threadId``, whose stored messages (the
        server's, authoritative) go before them: the new ones are those after the last
        assistant or tool message the client sends back (see :func:`new_turn`)."""
        options = self.forwardedProps.agentloop
        if options.thread_id != self.threadId or self.threadId == NEW_THREAD:
            raise _refuse(
                "forwardedProps.agentloop.thread_id",
                "the thread is the run's threadId: set thread_id to threadId (not 'new') to "
                "keep the conversation on the server",
            )
        if self.resume:
            raise _refuse("resume", "answering interrupts on a thread is not supported yet")
        if self.context:
            raise _refuse("context", "context is not kept on a thread: run without thread_id")
        return ChatRequest(
            messages=new_turn(self.messages), model=options.model, **options.chat_fields()
        )

    def user_turns_seen(self) -> int:
        """The user's turns the client holds before this run's (``new_turn``'s) ones."""
        own = [m for m in self.messages if m.subagentRunId is None]
        new = sum(isinstance(m, UserMessage) for m in new_turn(self.messages))
        return sum(m.role == "user" for m in own) - new

    def plan_params(self) -> dict[str, str]:
        """Where AG-UI carries what a plan may refuse (``start_run``'s params)."""
        return PLAN_PARAMS


PLAN_PARAMS = {**option_params(AgUiOptions, "forwardedProps.agentloop"), "approvals": "resume"}
"""Where AG-UI carries what a plan may refuse: its own ``tools`` are the client's, so a bare
"tools" would point at the wrong field; the token and the decisions are in ``resume``."""

APPROVAL_REASON = "tool_call"
"""AG-UI's core reason for an interrupt bound to a tool call awaiting a decision."""
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "reason": {"type": "string", "maxLength": 2000},
    },
    "required": ["approved"],
}
"""An approval interrupt's ``responseSchema``: what ``resume[].payload`` holds."""


def new_turn(messages: list[AgUiMessage]) -> list[Message]:
    """The messages a run on a thread adds: those after the last assistant or tool message.
    The client (``HttpAgent``) sends back the whole conversation; what it got from earlier
    runs is on the thread already, the user's turn since is new (422 if it has no user
    message). A sub-agent's messages are left out, as without a thread."""
    own = [(i, m) for i, m in enumerate(messages) if m.subagentRunId is None]
    answered = [i for i, (_, m) in enumerate(own) if m.role in ("assistant", "tool")]
    turn = own[answered[-1] + 1 :] if answered else own
    if not any(m.role == "user" for _, m in turn):
        raise _refuse(
            "messages",
            "on a thread the run's new messages are those after the last assistant or tool "
            "message, and they hold no user message",
        )
    return [to_message(message, index) for index, message in turn]


def _answers(entries: list[ResumeEntry]) -> tuple[list[Approval], str | None]:
    """The decisions in ``resume`` and the paused run's token they echo (422 naming the entry
    field that is wrong). The core checks the token and that each decision is for a call of
    that run that waits."""
    approvals: list[Approval] = []
    tokens: set[str] = set()
    for index, entry in enumerate(entries):
        at = f"resume.{index}"
        if any(a.call_id == entry.interruptId for a in approvals):
            raise _refuse(f"{at}.interruptId", f"interrupt {entry.interruptId!r} answered twice")
        approvals.append(_approval(entry, at))
        echoed = (entry.metadata or {}).get("agentloop")
        token = echoed.get("resume") if isinstance(echoed, dict) else None
        if not isinstance(token, str) or not token:
            raise _refuse(
                f"{at}.metadata.agentloop.resume",
                "echo the interrupt's metadata in its resume entry: it carries the paused "
                "run's token",
            )
        tokens.add(token)
    if len(tokens) > 1:
        raise _refuse("resume", "the resume entries answer interrupts of different runs")
    return approvals, next(iter(tokens), None)


def _approval(entry: ResumeEntry, at: str) -> Approval:
    if entry.status == "cancelled":  # abandoned: the call is not run, as if denied
        return Approval(call_id=entry.interruptId, approved=False, reason=None)
    payload = entry.payload
    if not isinstance(payload, dict) or not isinstance(payload.get("approved"), bool):
        raise _refuse(
            f"{at}.payload.approved",
            "a resolved approval needs payload {approved: true | false, reason?: string}",
        )
    if "editedArgs" in payload:
        raise _refuse(
            f"{at}.payload.editedArgs",
            "a call's arguments cannot be edited here: approve or deny the call as the model "
            "made it",
        )
    reason = payload.get("reason")
    if reason is not None and (not isinstance(reason, str) or len(reason) > 2_000):
        raise _refuse(f"{at}.payload.reason", "the reason is a string of up to 2000 characters")
    return Approval(call_id=entry.interruptId, approved=payload["approved"], reason=reason)


def _refuse(param: str, message: str) -> HttpError:
    return HttpError(422, "invalid_request", f"{param}: {message}", param=param)
