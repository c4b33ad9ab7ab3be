"""The AI SDK's UI message stream (v1): ``POST /api/chat`` for ``useChat``'s default transport.

Request: what ``ai``'s ``DefaultChatTransport`` sends (``id``, ``messages`` as UI messages
with ``parts``, ``trigger``, ``messageId``) plus the transport's extra body fields: ``model``
and an ``agentloop`` object (``tools``, ``approval_tools``, ``max_iterations``,
``token_budget``), as on the OpenAI face. Earlier turns become the agent's history: text parts
are the content; finished tool parts (``tool-<name>``, ``dynamic-tool``) become an assistant
message with ``tool_calls`` and the tool results, one assistant message per step (an
``output-denied`` part's result is the denial the model read); reasoning, source, step-start
and data parts are display-only and skipped; file parts are refused.

Tool approval (the SDK's own approval parts): a call that needs a person's approval is sent
as ``tool-input-available`` + ``tool-approval-request`` {approvalId = toolCallId}; the run
pauses, its ``finish`` saying ``tool-calls`` with ``messageMetadata.resume`` (the signed token,
which the transport sends back with the message). ``Chat.addToolApprovalResponse`` turns the
parts ``approval-responded``; the next request, ending with that assistant message, is the
paused run's continuation: its token from the message's metadata, a decision per responded
part. The answer continues the same message (``start`` carries its id): the decided calls get
``tool-output-available`` / ``tool-output-error`` or, denied, ``tool-output-denied``, and the
run goes on in new steps; its ``finish`` clears ``resume`` (or carries the next pause's).

Answer (top-level events; the stream opens with ``start`` {messageId}):

=================  ======================================================================
run_start          ``message-metadata`` {model, maxIterations, tokenBudget, budgetRemaining}
turn_start         ``finish-step`` (if a step is open), ``start-step``
text_delta         ``text-start`` (once per text part), ``text-delta``
text_reset         nothing: sent text cannot be taken back (:class:`SentText` holds back
                   the retried text while it repeats what was sent)
tool_call_start    ``tool-input-available`` {toolCallId, toolName, input} (not again for a
                   call decided in this request: its part is there already)
tool_call_result   ``tool-output-available`` {output: the result text} or, not ok,
                   ``tool-output-error`` {errorText: the result text}; a denied call's:
                   ``tool-output-denied``
approval_request   ``tool-input-available``, ``tool-approval-request`` {approvalId, toolCallId}
usage (any depth)  ``message-metadata`` {usage (the request's so far), budgetRemaining}
model_switched     ``message-metadata`` {model} and a ``data-notice`` part
notice             ``data-notice`` part {code, message}
error              kept for the end: ``error`` {errorText} before ``finish``
done               ``text-end``, ``source-url`` {sourceId, url, [title]} per ``done.sources``
                   (a continued answer: those its message lacks), ``finish-step``,
                   [``error``], ``finish`` {finishReason,
                   messageMetadata: usage, stopReason, iterations, budgetRemaining,
                   [resume]}, [DONE]; a pause finishes with ``tool-calls``
=================  ======================================================================

Sub-agents (events below the top level) are shown in a ``data-subagent`` part whose ``id``
is the ``ask_llm`` call id; the client replaces a data part with the same id in place, so
each update carries the whole state: every sub-agent of that call (``queries`` starts
several) with its query, current text, tool activity, notices, error and outcome.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, StringConstraints
from pydantic_core import PydanticCustomError

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
from agentloop.faces.outcome import NO_ANSWER, Ending, Outcome
from agentloop.faces.stream import STREAM_CUT_MESSAGE as STREAM_CUT
from agentloop.faces.stream import FaceStream
from agentloop.http_api import HttpError
from agentloop.limits import CancelToken
from agentloop.models import (
    Approval,
    AssistantMessage,
    ChatRequest,
    FunctionCall,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from agentloop.tools.results import ToolResult, truncate_middle

UI_STREAM_HEADERS: dict[str, str] = {"x-vercel-ai-ui-message-stream": "v1"}
"""Besides the SSE content type and the no-cache headers every face's stream has."""

_DONE_FRAME = b"data: [DONE]\n\n"

SUBAGENT_OUTPUT_PREVIEW = 1_000
"""Characters of a sub-agent's tool result shown in its data part, which is resent whole on
every update (the result itself goes to the sub-agent, and the answer to the tool part)."""

_ShortId = Annotated[str, StringConstraints(max_length=256)]
_CallId = Annotated[str, StringConstraints(min_length=1, max_length=128)]
_ToolName = Annotated[str, StringConstraints(min_length=1, max_length=128)]

# -- the request ----------------------------------------------------------------------------


class _Part(BaseModel):
    # Fields the SDK adds for display (providerMetadata, title, ...) are dropped, as the
    # SDK's own validateUIMessages drops unknown ones.
    model_config = ConfigDict(extra="ignore")


class TextPart(_Part):
    type: Literal["text"]
    text: str


class ReasoningPart(_Part):
    type: Literal["reasoning"]
    text: str


class StepStartPart(_Part):
    type: Literal["step-start"]


class SourcePart(_Part):
    type: Literal["source-url", "source-document"]
    url: Any = None
    """Read only to leave out of a continued answer the sources its message shows already."""


class FilePart(_Part):
    type: Literal["file"]
    mediaType: str
    url: str


class DataPart(_Part):
    type: Annotated[str, StringConstraints(pattern=r"^data-.", max_length=200)]
    id: _ShortId | None = None
    data: Any = None


ToolState = Literal[
    "input-streaming",
    "input-available",
    "approval-requested",
    "approval-responded",
    "output-available",
    "output-error",
    "output-denied",
]


class ToolApproval(_Part):
    """A tool part's ``approval``: asked for (``id``), then answered (``approved``, ``reason``)."""

    id: _ShortId
    approved: bool | None = None
    reason: str | None = Field(default=None, max_length=2_000)


class _ToolPart(_Part):
    toolCallId: _CallId
    state: ToolState
    input: Any = None
    output: Any = None
    errorText: str | None = None
    approval: ToolApproval | None = None

    @property
    def tool_name(self) -> str:
        raise NotImplementedError


class ToolPart(_ToolPart):
    """``tool-<name>``: how the stream shows the agent's tool calls."""

    type: Annotated[str, StringConstraints(pattern=r"^tool-.", max_length=133)]

    @property
    def tool_name(self) -> str:
        return self.type.removeprefix("tool-")


class DynamicToolPart(_ToolPart):
    type: Literal["dynamic-tool"]
    toolName: _ToolName

    @property
    def tool_name(self) -> str:
        return self.toolName


_PART_MODELS: dict[str, type[_Part]] = {
    "text": TextPart,
    "reasoning": ReasoningPart,
    "step-start": StepStartPart,
    "source-url": SourcePart,
    "source-document": SourcePart,
    "file": FilePart,
    "dynamic-tool": DynamicToolPart,
}


def _parse_part(value: Any) -> _Part:
    """The part's model chosen by its ``type`` (``tool-*`` and ``data-*`` by prefix), so an
    error names the part's own field (``messages.0.parts.1.state``)."""
    if isinstance(value, _Part):
        return value
    kind = value.get("type") if isinstance(value, dict) else None
    model: type[_Part] | None = None
    if isinstance(kind, str):
        model = _PART_MODELS.get(kind)
        if model is None and kind.startswith("tool-"):
            model = ToolPart
        elif model is None and kind.startswith("data-"):
            model = DataPart
    if model is None:
        raise PydanticCustomError(
            "invalid_part",
            "unknown part type: expected text, reasoning, step-start, source-url, "
            "source-document, file, data-*, tool-* or dynamic-tool",
        )
    return model.model_validate(value)


UIPart = Annotated[
    TextPart
    | ReasoningPart
    | StepStartPart
    | SourcePart
    | FilePart
    | DataPart
    | ToolPart
    | DynamicToolPart,
    PlainValidator(_parse_part),
]


class UIMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: _ShortId
    role: Literal["system", "user", "assistant"]
    metadata: Any = None
    parts: list[UIPart]


_OPTION_PARAMS = option_params(AskingAgentOptions, "agentloop")


class UIChatRequest(BaseModel):
    """The body ``DefaultChatTransport`` posts; unknown fields are refused (a misspelt
    option must not be ignored in silence)."""

    model_config = ConfigDict(extra="forbid")

    id: _ShortId | None = None
    messages: list[UIMessage] = Field(min_length=1)
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    messageId: _ShortId | None = None
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
            history.extend(_convert_message(message, f"messages.{index}", seen, answers))
        resume = None
        if decisions:
            resume = self._resume_token()
        elif self.messages[last].role != "user":
            raise _invalid(f"messages.{last}", "the last message must be the user's (role 'user')")
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
            raise _invalid("messages", str(exc)) from exc

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
            raise _invalid(
                f"messages.{last}.metadata.resume",
                "answering approvals continues the paused run, which needs its token: send the "
                "assistant message back with the metadata its stream gave it",
            )
        return token


def _invalid(param: str, message: str) -> HttpError:
    return HttpError(422, "invalid_request", f"{param}: {message}", param=param)


def _convert_message(
    message: UIMessage, where: str, seen: set[str], decisions: dict[str, Approval] | None
) -> list[Message]:
    if message.role == "assistant":
        return _assistant_messages(message, where, seen, decisions)
    texts: list[str] = []
    for index, part in enumerate(message.parts):
        at = f"{where}.parts.{index}"
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, FilePart):
            raise _file_refused(at)
        elif isinstance(part, _ToolPart):
            raise _invalid(f"{at}.type", f"a {message.role} message cannot hold tool parts")
    if not message.parts:
        raise _invalid(f"{where}.parts", f"a {message.role} message needs at least one part")
    content = "".join(texts)
    return [
        SystemMessage(content=content) if message.role == "system" else UserMessage(content=content)
    ]


def _file_refused(at: str) -> HttpError:
    return _invalid(f"{at}.type", "file parts are not supported: the agent reads text only")


def _assistant_messages(
    message: UIMessage, where: str, seen: set[str], decisions: dict[str, Approval] | None
) -> list[Message]:
    """One assistant message per step (its text and tool calls), each followed by its tool
    results; text after a step's tool parts starts a new message, as the model said it
    after reading the results.

    ``decisions`` (the last message only) collects the answered approvals: such a call has no
    result yet, the continued run gives it one."""
    out: list[Message] = []
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: list[ToolMessage] = []

    def flush() -> None:
        text = "".join(texts)
        if calls:
            out.append(AssistantMessage(content=text or None, tool_calls=list(calls)))
            out.extend(results)
        elif text:
            out.append(AssistantMessage(content=text))
        texts.clear()
        calls.clear()
        results.clear()

    for index, part in enumerate(message.parts):
        at = f"{where}.parts.{index}"
        if isinstance(part, StepStartPart):
            flush()
        elif isinstance(part, TextPart):
            if calls:
                flush()
            texts.append(part.text)
        elif isinstance(part, FilePart):
            raise _file_refused(at)
        elif isinstance(part, _ToolPart):
            if part.toolCallId in seen:
                raise _invalid(f"{at}.toolCallId", f"duplicate tool call id {part.toolCallId!r}")
            seen.add(part.toolCallId)
            calls.append(
                ToolCall(
                    id=part.toolCallId,
                    function=FunctionCall(name=part.tool_name, arguments=_arguments(part.input)),
                )
            )
            if part.state == "approval-responded":
                _decide(part, at, decisions)
            else:
                results.append(ToolMessage(tool_call_id=part.toolCallId, content=_result(part, at)))
    flush()
    return out


def _decide(part: _ToolPart, at: str, decisions: dict[str, Approval] | None) -> None:
    """Record a person's answer to a paused call; only the last message can carry one."""
    if decisions is None:
        raise _invalid(
            f"{at}.state",
            "an answered approval continues the paused run and must be in the last message, "
            "the assistant message that asked for it",
        )
    approval = part.approval
    if approval is None or approval.approved is None:
        raise _invalid(f"{at}.approval.approved", "an approval-responded part needs its decision")
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


def _result(part: _ToolPart, at: str) -> str:
    if part.state == "output-available":
        if "output" not in part.model_fields_set:
            raise _invalid(f"{at}.output", "an output-available tool part needs its output")
        output = part.output
        return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    if part.state == "output-error":
        if part.errorText is None:
            raise _invalid(f"{at}.errorText", "an output-error tool part needs its errorText")
        return part.errorText
    if part.state == "output-denied":
        return denied_result(part.approval.reason if part.approval else None)
    if part.state == "approval-requested":
        raise _invalid(
            f"{at}.state",
            "this call waits for a person's approval: answer it (addToolApprovalResponse) "
            "before sending the conversation again",
        )
    raise _invalid(
        f"{at}.state",
        f"a tool part in state {part.state!r} has no result; only finished tool calls "
        "(output-available, output-error, output-denied) and answered approvals can be sent "
        "back",
    )


# -- the answer -----------------------------------------------------------------------------

FINISH_REASONS: dict[Outcome, str] = {
    Outcome.ANSWERED: "stop",
    Outcome.CUT_SHORT: "length",
    Outcome.AWAITS_APPROVAL: "tool-calls",
}
"""Outcomes that end well: with an answer, or paused on calls that wait for a person's
approval (as the SDK's own runs stop for them); others finish with "error"."""

Chunk = dict[str, Any]
"""One UI message stream chunk, as its ``data:`` line holds it."""


def usage_json(usage: Usage) -> dict[str, Any]:
    """Usage named as the AI SDK names it (``LanguageModelUsage``)."""
    return {
        "inputTokens": usage.prompt_tokens,
        "outputTokens": usage.completion_tokens,
        "totalTokens": usage.total_tokens,
        "inputTokenDetails": {"cacheReadTokens": usage.cached_tokens},
    }


def _tool_input(arguments: str) -> Any:
    """Arguments that are a JSON object as that object; anything else as the text itself."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    return value if isinstance(value, dict) else arguments


@dataclass
class _Subagent:
    """One sub-agent's state as its ``data-subagent`` part shows it."""

    run_id: str
    query: str
    depth: int
    text: str = ""
    shown_text: int = 0
    """Length of the text in the last update sent (text updates are sent in growing steps)."""
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    notices: list[dict[str, str]] = field(default_factory=list)
    error: dict[str, str] | None = None
    outcome: dict[str, Any] = field(default_factory=dict)

    def view(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "query": self.query,
            "status": "finished" if self.outcome else "running",
            "text": self.text,
            "tools": list(self.tools.values()),
            "notices": self.notices,
            "error": self.error,
            **self.outcome,
        }


@dataclass
class _SubagentCall:
    """The sub-agents one ``ask_llm`` call started: one data part."""

    call_id: str
    depth: int
    agents: list[_Subagent] = field(default_factory=list)

    def chunk(self) -> dict[str, Any]:
        return {
            "type": "data-subagent",
            "id": self.call_id,
            "data": {
                "callId": self.call_id,
                "depth": self.depth,
                "agents": [agent.view() for agent in self.agents],
            },
        }


class UIMessageStream(FaceStream[Chunk]):
    """Turns one run's events into UI message stream chunks (SSE ``data:`` lines).

    Sent text is never contradicted (:class:`FaceStream`): a cut ends the stream with an
    ``error`` chunk and cancels the run (``cancel``), whose remaining events are drained
    unsent. ``approvals`` are the decisions the request carries (``ChatRequest.approvals``).
    """

    def __init__(
        self,
        ui_request: UIChatRequest,
        message_id_seed: str,
        cancel: CancelToken,
        approvals: Sequence[Approval] | None = None,
    ) -> None:
        super().__init__(cancel, approvals)
        self.request = ui_request
        self.message_id = ui_request.continued_message_id or f"msg-{message_id_seed}"
        self._shown_sources = ui_request.shown_sources()
        self._step_open = False
        self._step_has_results = False
        self._text_id: str | None = None
        self._text_parts = 0
        self._calls: dict[str, _SubagentCall] = {}
        self._agents: dict[str, tuple[_SubagentCall, _Subagent]] = {}

    async def frames(self, events: AsyncIterator[Event]) -> AsyncIterator[bytes]:
        async for frame in super().frames(events):
            yield frame
        yield _DONE_FRAME

    def encode(self, chunk: Chunk) -> bytes:
        return _frame(chunk)

    def on_open(self) -> list[Chunk]:
        return [{"type": "start", "messageId": self.message_id}]

    def on_close(self) -> list[Chunk]:
        # handle_chat always ends with done; never leave a client waiting
        return [] if self.ended else self._fail(NO_ANSWER)

    # -- top level ------------------------------------------------------------------------

    def on_turn(self, event: TurnStart) -> list[Chunk]:
        return [*self._close_step(), *self._open_step()]

    def on_tool_start(self, event: ToolCallStart) -> list[Chunk]:
        if event.call_id in self.decided:  # its part is in the message already
            return self._close_text()
        return [*self._close_text(), *self._ensure_step(), _input_chunk(event)]

    def on_approval(self, event: ApprovalRequest) -> list[Chunk]:
        request = {"type": "tool-approval-request", "approvalId": event.call_id}
        request["toolCallId"] = event.call_id
        return [*self._close_text(), *self._ensure_step(), _input_chunk(event), request]

    def on_tool_result(self, event: ToolCallResult) -> list[Chunk]:
        self._step_has_results = True
        chunks = self._close_text()
        call_id = event.call_id
        if self.decided.get(call_id) is False:
            chunks.append({"type": "tool-output-denied", "toolCallId": call_id})
        elif event.ok:
            chunks.append(
                {"type": "tool-output-available", "toolCallId": call_id, "output": event.content}
            )
        else:
            chunks.append(
                {"type": "tool-output-error", "toolCallId": call_id, "errorText": event.content}
            )
        return chunks

    def on_other(self, event: Event) -> list[Chunk]:
        if isinstance(event, RunStart):
            return [
                _metadata(
                    model=event.model,
                    maxIterations=event.max_iterations,
                    tokenBudget=event.token_budget,
                    budgetRemaining=event.budget_remaining,
                )
            ]
        if isinstance(event, ModelSwitched):
            return [_metadata(model=event.to_model), _notice(*_switch_notice(event))]
        if isinstance(event, Notice):
            return [_notice(event.code, event.message)]
        return []

    def on_text(self, event: TextDelta, text: str) -> list[Chunk]:
        chunks: list[Chunk] = []
        if self._text_id is None:
            if self._step_has_results:  # an answer after the results, with no turn_start
                chunks += self._close_step()
            chunks += self._ensure_step()
            self._text_parts += 1
            self._text_id = f"text-{self._text_parts}"
            chunks.append({"type": "text-start", "id": self._text_id})
        chunks.append({"type": "text-delta", "id": self._text_id, "delta": text})
        return chunks

    def _close_text(self) -> list[Chunk]:
        if self._text_id is None:
            return []
        text_id, self._text_id = self._text_id, None
        return [{"type": "text-end", "id": text_id}]

    def _open_step(self) -> list[Chunk]:
        self._step_open = True
        self._step_has_results = False
        return [{"type": "start-step"}]

    def _ensure_step(self) -> list[Chunk]:
        return [] if self._step_open else self._open_step()

    def _close_step(self) -> list[Chunk]:
        chunks = self._close_text()
        if self._step_open:
            self._step_open = False
            chunks.append({"type": "finish-step"})
        return chunks

    def on_usage(self, event: UsageReport) -> list[Chunk]:
        return [_metadata(usage=usage_json(event.total), budgetRemaining=event.budget_remaining)]

    def on_finish(self, ending: Ending) -> list[Chunk]:
        done = ending.done
        chunks = [*self._close_text(), *self._sources(done), *self._close_step()]
        metadata: Chunk = {
            "usage": usage_json(done.usage),
            "budgetRemaining": done.budget_remaining,
            "stopReason": done.stop_reason,
            "iterations": done.iterations,
        }
        if done.resume is not None or self.decided:  # a continuation clears the spent token
            metadata["resume"] = done.resume
        finish_reason = FINISH_REASONS.get(ending.outcome)
        if finish_reason is None:
            error = ending.error
            code = error.code if error is not None else done.stop_reason
            metadata["error"] = {"code": code, "message": ending.failure}
            chunks.append({"type": "error", "errorText": ending.failure})
        self.ended = True
        finish = {"type": "finish", "finishReason": finish_reason or "error"}
        chunks.append({**finish, "messageMetadata": metadata})
        return chunks

    def _sources(self, done: Done) -> list[Chunk]:
        """A ``source-url`` part per source of the run, after its answer (a continued answer:
        those its message does not show yet)."""
        chunks: list[Chunk] = []
        for source in done.sources:
            if source.url in self._shown_sources:
                continue
            chunk = {"type": "source-url", "sourceId": _source_id(source.url), "url": source.url}
            if source.title is not None:
                chunk["title"] = source.title
            chunks.append(chunk)
        return chunks

    def _fail(self, message: str) -> list[Chunk]:
        self.ended = True
        return [
            *self._close_step(),
            {"type": "error", "errorText": message},
            {"type": "finish", "finishReason": "error"},
        ]

    def on_cut(self, message: str) -> list[Chunk]:
        return self._fail(message)

    # -- sub-agents -----------------------------------------------------------------------

    def on_subagent(self, event: Event) -> list[Chunk]:
        """Update the sub-agent's data part; returns it when something worth showing changed."""
        if isinstance(event, SubagentStart):
            call = self._calls.get(event.call_id)
            if call is None:
                call = self._calls[event.call_id] = _SubagentCall(event.call_id, event.depth)
            agent = _Subagent(event.run_id, event.query, event.depth)
            call.agents.append(agent)
            self._agents[event.run_id] = (call, agent)
            return [call.chunk()]
        found = self._agents.get(event.run_id)
        if found is None:
            return []
        call, agent = found
        if isinstance(event, TextDelta):
            agent.text += event.text
            grown = len(agent.text) - agent.shown_text
            if grown < max(200, agent.shown_text // 2):  # linear in total, however long
                return []
        elif isinstance(event, TurnStart | TextReset):
            if not agent.text:
                return []
            agent.text = ""
        elif isinstance(event, ToolCallStart):
            agent.tools[event.call_id] = {
                "toolCallId": event.call_id,
                "toolName": event.name,
                "input": _tool_input(event.arguments),
                "state": "input-available",
            }
        elif isinstance(event, ToolCallResult):
            agent.text = ""
            entry = agent.tools.setdefault(
                event.call_id, {"toolCallId": event.call_id, "toolName": event.name}
            )
            preview = truncate_middle(event.content, SUBAGENT_OUTPUT_PREVIEW)
            entry["state"] = "output-available" if event.ok else "output-error"
            entry["output" if event.ok else "errorText"] = preview
            entry["durationMs"] = event.duration_ms
        elif isinstance(event, Notice):
            agent.notices.append({"code": event.code, "message": event.message})
        elif isinstance(event, ModelSwitched):
            agent.notices.append(dict(zip(("code", "message"), _switch_notice(event), strict=True)))
        elif isinstance(event, ErrorEvent):
            agent.error = {"code": event.code, "message": event.message}
        elif isinstance(event, SubagentFinish):
            agent.outcome = {
                "stopReason": event.stop_reason,
                "iterations": event.iterations,
                "usage": usage_json(event.usage),
                "budgetRemaining": event.budget_remaining,
            }
        else:
            return []
        agent.shown_text = len(agent.text)
        return [call.chunk()]


STREAM_CUT_MESSAGE = STREAM_CUT.format(advice=UIMessageStream.retry_advice)
"""The ``errorText`` of a cut stream."""


def _source_id(url: str) -> str:
    """The same id for the same page, in any answer (the SDK's parts need one)."""
    return "src-" + hashlib.sha256(url.encode()).hexdigest()[:16]


def _input_chunk(event: ToolCallStart | ApprovalRequest) -> dict[str, Any]:
    return {
        "type": "tool-input-available",
        "toolCallId": event.call_id,
        "toolName": event.name,
        "input": _tool_input(event.arguments),
    }


def _switch_notice(event: ModelSwitched) -> tuple[str, str]:
    return "model_switched", f"switched from {event.from_model} to {event.to_model}: {event.reason}"


def _metadata(**values: Any) -> dict[str, Any]:
    return {"type": "message-metadata", "messageMetadata": values}


def _notice(code: str, message: str) -> dict[str, Any]:
    return {"type": "data-notice", "data": {"code": code, "message": message}}


def _frame(chunk: dict[str, Any]) -> bytes:
    # ASCII escapes: a lone surrogate in a model-written argument cannot break the encoding.
    return f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n".encode()
