"""The agent as an AG-UI agent: ``POST /ag-ui`` takes a ``RunAgentInput``, streams AG-UI events.

AG-UI 1.0 (``@ag-ui/core`` 1.0), as ``@ag-ui/client``'s ``HttpAgent`` parses and verifies it:
one ``data: <json>`` SSE message per event. The face translates handle_chat's events:

=====================  ==================================================================
agentloop event        AG-UI events
=====================  ==================================================================
(stream opens)         RUN_STARTED {threadId, runId, parentRunId} from the input
turn_start             STEP_FINISHED of the last turn, STEP_STARTED "turn <n>"
text_delta             TEXT_MESSAGE_START (first text of a message), TEXT_MESSAGE_CONTENT
text_reset             top level: :class:`SentText` (the retried text is held back while it
                       repeats what was sent; text that departs ends the run in RUN_ERROR
                       "stream_cut"); sub-agent: TEXT_MESSAGE_END with metadata
                       ``agentloop.voided`` and the retried text in a new message
tool_call_start        TEXT_MESSAGE_END of open text, TOOL_CALL_START/ARGS/END
                       (parentMessageId: the turn's assistant message)
tool_call_result       TOOL_CALL_RESULT (metadata ``agentloop``: ok, duration_ms)
approval_request       TOOL_CALL_START/ARGS/END of the call that waits (it is not run)
subagent_start         SUBAGENT_STARTED {subagentRunId: the sub-agent's run_id, name
                       "ask_llm", description: its query, parentToolCallId,
                       parentMessageId, parentSubagentRunId when nested}
subagent_finish        SUBAGENT_FINISHED {result, outcome success}, or SUBAGENT_ERROR when
                       it stopped with "error" or "cancelled"
notice, model_switched CUSTOM "agentloop.notice" / "agentloop.model_switched"
usage                  summed per model into RUN_FINISHED.usage / RUN_ERROR.usage
error (top level)      RUN_ERROR {message, code}; the rest of the run is drained unsent
done (top level)       RUN_FINISHED {result (stop reason, usage, ``sources``...), outcome,
                       usage}; "cancelled": outcome
                       cancelled; "error" without an error event: RUN_ERROR "internal";
                       a pause for approval: outcome interrupt, one interrupt per call
=====================  ==================================================================

Every event of a sub-agent carries ``subagentRunId``; whatever a message, step or sub-agent
left open is closed before the run's last event. The history sent back drops messages with a
``subagentRunId`` (a sub-agent's own work, which its ``ask_llm`` tool result sums up).
Agent options travel in ``forwardedProps.agentloop`` (model, tools, approval_tools,
max_iterations, token_budget); ``context`` entries become one system message.

Tool approval is AG-UI's interrupt / resume. A run paused on calls that need a person's
approval finishes with ``outcome: {type: "interrupt", interrupts}``, one per call: ``id`` and
``toolCallId`` = the call's id, ``reason`` "tool_call", a ``message``, a ``responseSchema``
({approved: boolean, reason?: string}) and ``metadata.agentloop`` {name, arguments, resume}:
``resume`` is the paused run's signed token. The next run answers every interrupt in
``RunAgentInput.resume``: ``resolved`` with ``payload`` {approved, reason?}, or ``cancelled``
(not run, as a denial), each entry echoing the interrupt's ``metadata`` (the protocol's place
for "a signature proving the decision was not tampered with"), and the thread's messages as
the client holds them. The resumed run emits no TOOL_CALL_START again: TOOL_CALL_RESULT
against each decided call, then the rest of the run.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentloop.events import (
    ApprovalRequest,
    Done,
    ErrorEvent,
    Event,
    ModelSwitched,
    Notice,
    RunStart,
    SubagentFinish,
    SubagentStart,
    TextDelta,
    TextReset,
    ToolCallResult,
    ToolCallStart,
    TurnStart,
    UsageReport,
)
from agentloop.faces.options import AskingAgentOptions, option_params
from agentloop.faces.outcome import NO_ANSWER, OUTCOMES, Ending, Outcome
from agentloop.faces.stream import FaceStream
from agentloop.http_api import HttpError, RequestLimits
from agentloop.limits import CancelToken
from agentloop.models import (
    Approval,
    AssistantMessage,
    ChatRequest,
    FunctionCall,
    Message,
    PendingCall,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from agentloop.tools.results import truncate_middle

PROTOCOL_VERSION = "1.0"
SUBAGENT_NAME = "ask_llm"
RUN_OUTCOMES: dict[Outcome, str] = {
    Outcome.ANSWERED: "success",
    Outcome.CUT_SHORT: "success",
    Outcome.AWAITS_APPROVAL: "interrupt",
    Outcome.CANCELLED: "cancelled",
}
"""RUN_FINISHED's ``outcome.type`` per outcome (a limit's: success, the result's
``stop_reason`` says which, and the limit's notice ends the text); the others end in
RUN_ERROR."""

JSON = dict[str, Any]

# -- the input ----------------------------------------------------------------------------------


class _Loose(BaseModel):
    """AG-UI's objects are open: unknown keys (name, metadata, encryptedValue...) are ignored."""

    model_config = ConfigDict(extra="ignore")


class TextPart(_Loose):
    type: Literal["text"]
    text: str


class MediaPart(_Loose):
    """An image, audio, video or document part: valid AG-UI, but this agent reads only text."""

    type: Literal["image", "audio", "video", "document"]


Part = Annotated[TextPart | MediaPart, Field(discriminator="type")]
Content = str | list[Part]


class _Message(_Loose):
    id: str
    subagentRunId: str | None = None
    """Set on a sub-agent's messages (as this face streams them): not part of the history."""


class DeveloperMessage(_Message):
    role: Literal["developer"]
    content: str


class AgUiSystemMessage(_Message):
    role: Literal["system"]
    content: str


class AgUiFunctionCall(_Loose):
    name: str = Field(min_length=1, max_length=128)
    arguments: str


class AgUiToolCall(_Loose):
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


class ContextEntry(_Loose):
    description: str
    value: str


class AgUiOptions(AskingAgentOptions):
    """``forwardedProps.agentloop``: what AG-UI has no field for. Strict, so typos are 422s."""

    model: str | None = Field(default=None, max_length=200)


class ResumeEntry(_Loose):
    """An answer to one interrupt: a paused call's decision (see the module docstring)."""

    interruptId: str = Field(min_length=1, max_length=128)
    status: Literal["resolved", "cancelled"]
    payload: Any = None
    metadata: dict[str, Any] | None = None


class ForwardedProps(_Loose):
    """The application's own props; only the ``agentloop`` key is read."""

    agentloop: AgUiOptions = Field(default_factory=AgUiOptions)


class RunAgentInput(_Loose):
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
        """forwardedProps may be any JSON; only an object can hold ``agentloop``."""
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
            why = exc.errors(include_url=False)[0]["msg"].removeprefix("Value error, ")
            why = why if why.startswith("messages") else f"messages: {why}"
            raise HttpError(422, "invalid_request", why, param="messages") from exc

    def _chat_request(self) -> ChatRequest:
        messages = [
            _to_message(message, index)
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
            messages = _with_context(messages, self.context)
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
APPROVAL_SCHEMA: JSON = {
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


def _to_message(message: AgUiMessage, index: int) -> Message:
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


def _with_context(messages: list[Message], context: list[ContextEntry]) -> list[Message]:
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


# -- the stream ---------------------------------------------------------------------------------


@dataclass
class _Run:
    """What one run (the top level or one sub-agent) has open on the client."""

    run_id: str
    """Prefixes its message ids (the top level's is learned from its first event)."""
    subagent: str | None
    """Its ``subagentRunId``; None at the top level."""
    step: str | None = None
    message: str | None = None
    """The turn's assistant message: its text and the parent of all its tool calls."""
    text_open: bool = False
    after_tools: bool = False
    """A tool result came this turn: text now (a limit's forced answer) is a new message."""
    error: ErrorEvent | None = None
    """A sub-agent's error event, for its SUBAGENT_ERROR."""


class AgUiStream(FaceStream[JSON]):
    """Turns one run's events into AG-UI SSE messages (see the module docstring).

    ``cancel`` stops a run whose answer can no longer reach the client correctly (a cut
    stream whose retry departs from what was sent); ``approvals`` are the decisions the
    input carries (``ChatRequest.approvals``).
    """

    def __init__(
        self,
        run_input: RunAgentInput,
        cancel: CancelToken | None = None,
        approvals: Sequence[Approval] | None = None,
    ) -> None:
        super().__init__(cancel, approvals)
        self.input = run_input
        self._top = _Run(run_id="", subagent=None)
        self._subagents: dict[str, _Run] = {}
        self._calls: dict[tuple[int, str], tuple[str, str]] = {}
        """(depth, call id) -> (run id, parent message id), to place a sub-agent."""
        self._usage: dict[str, Usage] = {}
        self._model: str | None = None
        self._ids = itertools.count(1)

    def encode(self, chunk: JSON) -> bytes:
        return f"data: {json.dumps(chunk)}\n\n".encode()

    def on_open(self) -> list[JSON]:
        body: JSON = {
            "type": "RUN_STARTED",
            "threadId": self.input.threadId,
            "runId": self.input.runId,
            "protocolVersion": PROTOCOL_VERSION,
        }
        if self.input.parentRunId is not None:
            body["parentRunId"] = self.input.parentRunId
        return [body]

    def on_close(self) -> list[JSON]:
        return [] if self.ended else self._fail("internal", "the run ended without finishing")

    # -- the top level --------------------------------------------------------------------------

    def on_usage(self, event: UsageReport) -> list[JSON]:
        self._usage[event.model] = self._usage.get(event.model, Usage()) + event.usage
        return []

    def on_text(self, event: TextDelta, text: str) -> list[JSON]:
        return self._text(self._run(event), text)

    def on_turn(self, event: TurnStart) -> list[JSON]:
        return self._turn(self._run(event), event)

    def on_tool_start(self, event: ToolCallStart) -> list[JSON]:
        run = self._run(event)
        if event.call_id in self.decided:  # its triad is in the interrupted run
            return self._close_text(run)
        return self._tool_call(run, event)

    def on_approval(self, event: ApprovalRequest) -> list[JSON]:
        return self._tool_call(self._run(event), event)

    def on_tool_result(self, event: ToolCallResult) -> list[JSON]:
        return self._tool_result(self._run(event), event)

    def on_error(self, event: ErrorEvent) -> list[JSON]:
        return self._fail(event.code, event.message)

    def on_cut(self, message: str) -> list[JSON]:
        return self._fail("stream_cut", message)

    def on_other(self, event: Event) -> list[JSON]:
        run = self._run(event)
        if isinstance(event, RunStart):
            self._model = event.model
        elif isinstance(event, Notice | ModelSwitched):
            name, value = _custom(event)
            return [self._tag(run, {"type": "CUSTOM", "name": name, "value": value})]
        return []

    # -- sub-agents -----------------------------------------------------------------------------

    def on_subagent(self, event: Event) -> list[JSON]:
        """A sub-agent's event: the same frames as the top level's, tagged with its run."""
        if isinstance(event, SubagentStart):
            return self._subagent_started(event)
        if isinstance(event, SubagentFinish):
            return self._subagent_finished(event)
        run = self._run(event)
        if isinstance(event, TurnStart):
            return self._turn(run, event)
        if isinstance(event, TextDelta):
            return self._text(run, event.text)
        if isinstance(event, TextReset):
            return self._reset(run, event)
        if isinstance(event, ToolCallStart | ApprovalRequest):
            return self._tool_call(run, event)
        if isinstance(event, ToolCallResult):
            return self._tool_result(run, event)
        if isinstance(event, Notice | ModelSwitched):
            name, value = _custom(event)
            return [self._tag(run, {"type": "CUSTOM", "name": name, "value": value})]
        if isinstance(event, ErrorEvent):
            run.error = event
        return []

    def _run(self, event: Event) -> _Run:
        if event.depth == 0:
            self._top.run_id = event.run_id
            return self._top
        run = self._subagents.get(event.run_id)
        if run is None:  # a sub-agent this face did not see start: still attributed
            run = self._subagents[event.run_id] = _Run(event.run_id, subagent=event.run_id)
        return run

    def _new_id(self, run: _Run) -> str:
        """A message id unique in the thread: run ids are, and the count is per stream."""
        return f"{run.run_id}-{next(self._ids)}"

    def _tag(self, run: _Run, body: JSON) -> JSON:
        if run.subagent is not None:
            body["subagentRunId"] = run.subagent
        return body

    def _turn(self, run: _Run, event: TurnStart) -> list[JSON]:
        frames = self._close(run)
        run.message, run.after_tools = None, False
        run.step = f"turn {event.iteration}"
        return [*frames, self._tag(run, {"type": "STEP_STARTED", "stepName": run.step})]

    def _text(self, run: _Run, text: str) -> list[JSON]:
        if not text:
            return []
        frames: list[JSON] = []
        if not run.text_open:
            if run.message is None or run.after_tools:  # text after a tool round: a new one
                run.message, run.after_tools = self._new_id(run), False
            run.text_open = True
            start = {"type": "TEXT_MESSAGE_START", "messageId": run.message, "role": "assistant"}
            frames.append(self._tag(run, start))
        content = {"type": "TEXT_MESSAGE_CONTENT", "messageId": run.message, "delta": text}
        frames.append(self._tag(run, content))
        return frames

    def _reset(self, run: _Run, event: TextReset) -> list[JSON]:
        if not run.text_open:
            return []
        # A sub-agent's messages are not history: its voided text stays, marked, and the
        # retried text (with the turn's tool calls) goes in a message of its own.
        end = {
            "type": "TEXT_MESSAGE_END",
            "messageId": run.message,
            "metadata": {"agentloop": {"voided": event.reason}},
        }
        run.text_open, run.message = False, None
        return [self._tag(run, end)]

    def _tool_call(self, run: _Run, event: ToolCallStart | ApprovalRequest) -> list[JSON]:
        frames = self._close_text(run)
        if run.message is None:  # a turn's calls share its message, results or not between
            run.message = self._new_id(run)
        self._calls[(event.depth, event.call_id)] = (event.run_id, run.message)
        start = {
            "type": "TOOL_CALL_START",
            "toolCallId": event.call_id,
            "toolCallName": event.name,
            "parentMessageId": run.message,
        }
        frames.append(self._tag(run, start))
        if event.arguments:
            args = {"type": "TOOL_CALL_ARGS", "toolCallId": event.call_id, "delta": event.arguments}
            frames.append(self._tag(run, args))
        frames.append(self._tag(run, {"type": "TOOL_CALL_END", "toolCallId": event.call_id}))
        return frames

    def _tool_result(self, run: _Run, event: ToolCallResult) -> list[JSON]:
        frames = self._close_text(run)
        run.after_tools = True
        result = {
            "type": "TOOL_CALL_RESULT",
            "messageId": self._new_id(run),
            "toolCallId": event.call_id,
            "content": event.content,
            "role": "tool",
            "metadata": {"agentloop": {"ok": event.ok, "duration_ms": event.duration_ms}},
        }
        frames.append(self._tag(run, result))
        return frames

    def _subagent_started(self, event: SubagentStart) -> list[JSON]:
        self._subagents[event.run_id] = _Run(event.run_id, subagent=event.run_id)
        body: JSON = {
            "type": "SUBAGENT_STARTED",
            "subagentRunId": event.run_id,
            "name": SUBAGENT_NAME,
            "description": event.query,
            "parentToolCallId": event.call_id,
        }
        parent = self._calls.get((event.depth - 1, event.call_id))
        if parent is not None:
            parent_run, parent_message = parent
            body["parentMessageId"] = parent_message
            if event.depth > 1 and parent_run in self._subagents:
                body["parentSubagentRunId"] = parent_run
        return [body]

    def _subagent_finished(self, event: SubagentFinish) -> list[JSON]:
        run = self._subagents.pop(event.run_id, None)
        frames = self._close(run) if run is not None else []
        if OUTCOMES[event.stop_reason].has_answer:
            result = {
                "stop_reason": event.stop_reason,
                "iterations": event.iterations,
                "usage": _usage_json(event.usage),
                "budget_remaining": event.budget_remaining,
            }
            frames.append(
                {
                    "type": "SUBAGENT_FINISHED",
                    "subagentRunId": event.run_id,
                    "result": result,
                    "outcome": {"type": "success"},
                }
            )
            return frames
        error = run.error if run is not None else None
        frames.append(
            {
                "type": "SUBAGENT_ERROR",
                "subagentRunId": event.run_id,
                "message": error.message
                if error
                else f"the sub-agent stopped: {event.stop_reason}",
                "code": error.code if error else event.stop_reason,
            }
        )
        return frames

    # -- closing --------------------------------------------------------------------------------

    def _close_text(self, run: _Run) -> list[JSON]:
        if not run.text_open:
            return []
        run.text_open = False
        return [self._tag(run, {"type": "TEXT_MESSAGE_END", "messageId": run.message})]

    def _close(self, run: _Run) -> list[JSON]:
        """End the run's open text and step (its tool calls are always closed)."""
        frames = self._close_text(run)
        if run.step is not None:
            frames.append(self._tag(run, {"type": "STEP_FINISHED", "stepName": run.step}))
            run.step = None
        return frames

    def _close_all(self) -> list[JSON]:
        """Everything still open, sub-agents first: the run's last event comes next."""
        frames: list[JSON] = []
        for run_id, run in list(self._subagents.items()):
            frames += self._close(run)
            frames.append(
                {
                    "type": "SUBAGENT_ERROR",
                    "subagentRunId": run_id,
                    "message": "the run ended before the sub-agent finished",
                    "code": "cancelled",
                }
            )
        self._subagents.clear()
        return frames + self._close(self._top)

    def on_finish(self, ending: Ending) -> list[JSON]:
        kind = RUN_OUTCOMES.get(ending.outcome)
        done = ending.done
        asked = [p for p in done.pending if p.kind == "approval"]
        if kind is None or (kind == "interrupt" and not (asked and done.resume)):
            if ending.outcome is Outcome.FAILED:  # no error event said why
                return self._fail("internal", NO_ANSWER)
            return self._fail("internal", "the run paused for nothing this face can ask for")
        body: JSON = {
            "type": "RUN_FINISHED",
            "threadId": self.input.threadId,
            "runId": self.input.runId,
            "usage": self._usage_list(),
            "outcome": {"type": kind},
        }
        if kind == "interrupt":
            body["outcome"]["interrupts"] = [_interrupt(p, done.resume) for p in asked]
        if kind != "cancelled":
            body["result"] = self._result(done)
        frames = self._close_all()
        self.ended = True
        return [*frames, body]

    def _result(self, done: Done) -> JSON:
        """``RUN_FINISHED.result``, which ``runAgent`` returns to the application."""
        return {
            "model": self._model,
            "stop_reason": done.stop_reason,
            "iterations": done.iterations,
            "usage": _usage_json(done.usage),
            "usage_by_depth": [_usage_json(u) for u in done.usage_by_depth],
            "budget_remaining": done.budget_remaining,
            "sources": [source.model_dump() for source in done.sources],
        }

    def _fail(self, code: str, message: str) -> list[JSON]:
        frames = self._close_all()
        self.ended = True
        error = {"type": "RUN_ERROR", "message": message, "code": code, "usage": self._usage_list()}
        return [*frames, error]

    def _usage_list(self) -> list[JSON]:
        """AG-UI's TokenUsage per model: the totals, and the cached part of the input."""
        entries: list[JSON] = []
        for spec, usage in self._usage.items():
            provider, _, model = spec.partition(":")
            entries.append(
                {
                    "provider": provider,
                    "model": model or spec,
                    "inputTokens": usage.prompt_tokens,
                    "outputTokens": usage.completion_tokens,
                    "totalTokens": usage.total_tokens,
                    "cachedInputTokens": usage.cached_tokens,
                }
            )
        return entries


def _interrupt(call: PendingCall, token: str | None) -> JSON:
    """A call that waits for a person, as the interrupt the next run's resume entry answers."""
    return {
        "id": call.call_id,
        "reason": APPROVAL_REASON,
        "message": f"Run {call.name} with {truncate_middle(call.arguments, 500)}?",
        "toolCallId": call.call_id,
        "responseSchema": APPROVAL_SCHEMA,
        "metadata": {
            "agentloop": {"name": call.name, "arguments": call.arguments, "resume": token}
        },
    }


def _custom(event: Notice | ModelSwitched) -> tuple[str, JSON]:
    if isinstance(event, Notice):
        return "agentloop.notice", {"code": event.code, "message": event.message}
    value = {"from_model": event.from_model, "to_model": event.to_model, "reason": event.reason}
    return "agentloop.model_switched", value


def _usage_json(usage: Usage) -> JSON:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cached_tokens": usage.cached_tokens,
        "total_tokens": usage.total_tokens,
    }
