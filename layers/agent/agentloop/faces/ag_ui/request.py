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
from agentloop.models import Approval, ChatRequest


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

    def _chat_request(self) -> ChatRequest:
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
