"""An OpenAI-compatible face of the agent: ``POST /v1/chat/completions``.

Existing OpenAI clients and chat UIs can talk to the agent unchanged: the request's
messages become a :class:`ChatRequest`, the run's top-level text becomes the
completion. Tool activity stays out of the text unless the request asks for it
with ``"agentloop": {"show_tools": true}``; agent options (tools, limits) travel in
that same ``agentloop`` object, since OpenAI's own fields have no place for them.

Client-side tools work as OpenAI's: the request's ``tools`` are offered to the model beside
the server's; when the model calls one, the run pauses and the answer ends with
``finish_reason: "tool_calls"`` and those calls only (the server's calls of that turn have
run and stay server-side), non-streamed on the message, streamed as ``delta.tool_calls``
chunks. The assistant message also carries ``"agentloop": {"resume": <token>}`` (streamed: on
the last chunk's delta), which the openai SDK sends back when the application appends the
message to its conversation: the next request, with the tools' results, continues the paused
run (its hidden server rounds, iterations and budget come from the token). Without the token
(LangChain drops unknown fields) the conversation goes on as a plain continuation.

Under failure the face speaks OpenAI's language too (docs/architecture.md, "The OpenAI
face under failure"): a run without an answer is an error object, never a ``"stop"``; a
run cut by a limit finishes with ``"length"``; errors tell SDKs not to retry what the
server has already retried; and sent text, which cannot be taken back, is only ever
continued, never contradicted.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentloop.events import (
    Done,
    ErrorCode,
    ErrorEvent,
    Event,
    TextDelta,
    ToolCallResult,
    ToolCallStart,
)
from agentloop.faces.options import AgentOptions, option_params
from agentloop.faces.outcome import NO_ANSWER, Ending, Outcome, outcome
from agentloop.faces.stream import FaceStream
from agentloop.http_api import HttpError
from agentloop.limits import CancelToken
from agentloop.models import (
    AssistantMessage,
    ChatRequest,
    ClientTool,
    FunctionCall,
    Message,
    PendingCall,
    ResponseFormat,
    Sampling,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)

DEFAULT_MODEL_ALIAS = "agentloop"
"""Model name meaning "the server's default", for clients that insist on sending one."""

FinishReason = Literal["stop", "length", "tool_calls"]

FINISH_REASONS: dict[Outcome, FinishReason] = {
    Outcome.ANSWERED: "stop",
    Outcome.CUT_SHORT: "length",
    Outcome.AWAITS_CLIENT_TOOLS: "tool_calls",
}
"""Outcomes a completion finishes with. A limit cut the answer short, which is what OpenAI's
"length" says; a pause for the client's tools is OpenAI's own "tool_calls". The others have
no answer and end in an error object (:func:`run_error`)."""

_RUN_ERROR_STATUS: dict[ErrorCode, int] = {
    "configuration": 503,
    "provider": 502,
    "invalid_request": 422,
    "invalid_output": 502,
    "internal": 500,
}

NO_CLIENT_RETRY = {"x-should-retry": "false"}
"""Honoured by the openai SDK (and other Stainless-generated SDKs) before its own retry rules."""

_DONE_FRAME = b"data: [DONE]\n\n"


def no_client_retry(error: HttpError) -> HttpError:
    """Mark ``error`` as not worth a client retry; returns it for chaining."""
    error.headers.update(NO_CLIENT_RETRY)
    return error


def refusal(error: HttpError) -> HttpError:
    """A request refused before its run started, with the face's retry policy applied.

    Client errors (4xx) would be refused again, so clients are told not to retry, except
    408 (the body came too slowly), which a retry can cure. A 5xx here (the token store
    could not be read) made no model call, so the SDK's retries multiply nothing and may
    outlast a passing failure: they are left alone.
    """
    if error.status == 408 or error.status >= 500:
        return error
    return no_client_retry(error)


def event_error(event: ErrorEvent) -> HttpError:
    """The error object for a run's ``error`` event; never retried by clients, because
    the server already retried the provider (or a retry cannot help)."""
    status = _RUN_ERROR_STATUS.get(event.code, 500)
    return no_client_retry(HttpError(status, f"{event.code}_error", event.message))


def run_error(ending: Ending) -> HttpError:
    """The error answer for a run that ended without an answer (see :data:`FINISH_REASONS`)."""
    if ending.outcome is Outcome.AWAITS_APPROVAL:
        return approval_error(ending.done.pending)
    if ending.outcome is Outcome.CANCELLED:  # only a client that left cancels: no one reads this
        return no_client_retry(HttpError(499, "cancelled", ending.failure))
    if ending.error is not None:
        return event_error(ending.error)
    return no_client_retry(HttpError(500, "internal_error", ending.failure))


def approval_error(pending: list[PendingCall]) -> HttpError:
    """For a run that paused for a person's approval: this protocol cannot ask for one."""
    names = sorted({p.name for p in pending if p.kind == "approval"})
    return no_client_retry(
        HttpError(
            422,
            "approval_required",
            f"the model called {names}, which need a person's approval here, and OpenAI's "
            "protocols have no way to ask for it: use POST /chat, /api/chat or /ag-ui, or "
            'leave these tools out with "agentloop": {"tools": [...]}',
            param="agentloop.tools",
        )
    )


def stream_cut_error(message: str) -> HttpError:
    """For a stream that already sent text the retried answer does not continue."""
    return no_client_retry(HttpError(502, "stream_cut", message))


class OpenAIOptions(AgentOptions):
    """The OpenAI faces' ``agentloop`` object: the agent's options (no ``approval_tools``:
    these protocols cannot ask a person), and whether tool activity shows in the text."""

    show_tools: bool = False


class CompletionOptions(OpenAIOptions):
    """The chat-completions face's ``agentloop`` object: also a paused run's token."""

    resume: str | None = Field(default=None, min_length=1, max_length=500_000)


_OPTION_PARAMS = option_params(CompletionOptions, "agentloop")


class StreamOptions(BaseModel):
    include_usage: bool = False


class ResumeMark(BaseModel):
    """``"agentloop"`` on an assistant message this face answered with: the paused run's token."""

    model_config = ConfigDict(extra="forbid")

    resume: str = Field(min_length=1, max_length=500_000)


class EchoedFunctionCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=128)
    arguments: str
    parsed_arguments: Any = Field(
        default=None, description="The openai SDK's parse of ``arguments`` (ignored)."
    )


class EchoedToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=128)
    type: Literal["function"] = "function"
    function: EchoedFunctionCall
    index: int | None = Field(default=None, description="Left by the SDK's stream helper.")


class EchoedAssistantMessage(AssistantMessage):
    """An assistant message as OpenAI clients send one back: an answer of this face appended
    as the openai SDK's model (its stream helper adds null fields and the tool calls'
    ``index``), with this face's ``agentloop`` mark. Everything beyond the agent's message
    shape must be empty, or is the SDK's own copy of what the message says (``parsed``)."""

    tool_calls: list[EchoedToolCall] | None = None  # type: ignore[assignment]
    agentloop: ResumeMark | None = None
    refusal: None = None
    function_call: None = None
    audio: None = None
    annotations: list[Any] | None = Field(default=None, max_length=0)
    parsed: Any = Field(default=None, description="The openai SDK's parse of content (ignored).")

    def plain(self) -> AssistantMessage:
        """The message as the agent keeps it (the mark and the SDK's copies left out)."""
        calls = [
            ToolCall(
                id=c.id, function=FunctionCall(name=c.function.name, arguments=c.function.arguments)
            )
            for c in self.tool_calls or ()
        ]
        return AssistantMessage(content=self.content, tool_calls=calls or None)


CompletionMessage = Annotated[
    SystemMessage | UserMessage | EchoedAssistantMessage | ToolMessage,
    Field(discriminator="role"),
]


class CompletionRequest(BaseModel):
    """OpenAI's request as the agent honours it: every field either reaches the model, is
    harmless and accepted (``user``, ``metadata``, ``store``, defaults such as ``n: 1``), or
    is refused with a 422 naming it. Unknown fields are refused too, as OpenAI does."""

    model_config = ConfigDict(extra="forbid")

    model: str = DEFAULT_MODEL_ALIAS
    messages: list[CompletionMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[ClientTool] | None = Field(
        default=None,
        max_length=64,
        description="Client-side tools: offered to the model; a call to one is answered with "
        'finish_reason "tool_calls" for the client to run.',
    )
    tool_choice: Literal["auto", "none"] | None = Field(
        default=None,
        description='"none": the client\'s tools are not offered this time (the agent still '
        "uses its own). Forcing a call is not supported: the agent decides.",
    )
    agentloop: CompletionOptions = Field(default_factory=CompletionOptions)
    # Reach every model call of the run:
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    response_format: ResponseFormat | None = None
    # Accepted: one answer per request, nothing stored.
    n: Literal[1] | None = Field(
        default=None, description="One choice per request: the agent's answer."
    )
    user: str | None = Field(default=None, max_length=256)
    metadata: dict[str, str] | None = None
    store: Literal[False] | None = Field(default=None, description="Nothing is stored.")
    parallel_tool_calls: Literal[True] | None = Field(
        default=None,
        description="The model may call several tools in one turn; false is not supported.",
    )
    presence_penalty: Literal[0] | None = Field(default=None, description="Not supported.")
    frequency_penalty: Literal[0] | None = Field(default=None, description="Not supported.")
    logprobs: Literal[False] | None = Field(default=None, description="Not supported.")

    @field_validator("agentloop", mode="before")
    @classmethod
    def _options(cls, value: Any) -> Any:
        """Plain :class:`OpenAIOptions` (both OpenAI faces' options) are accepted too."""
        if isinstance(value, OpenAIOptions) and not isinstance(value, CompletionOptions):
            return value.model_dump()
        return value

    @field_validator("tool_choice", mode="before")
    @classmethod
    def _choice_is_the_agents(cls, value: Any) -> Any:
        if value is None or value in ("auto", "none"):
            return value
        raise ValueError(
            '"auto" or "none" only: the agent decides which tools to call and when, so a '
            "required or named tool cannot be forced"
        )

    def plan_params(self) -> dict[str, str]:
        """Where this face carries the fields a plan may refuse (``start_run``'s params)."""
        marked = self._marked()
        resume = "agentloop.resume"
        if marked is not None and self.agentloop.resume is None:
            resume = f"messages[{marked[0]}].agentloop.resume"
        return {**_OPTION_PARAMS, "client_tools": "tools", "resume": resume}

    def to_chat_request(self) -> ChatRequest:
        options = self.agentloop
        offered = self.tools if self.tools and self.tool_choice != "none" else None
        messages: list[Message] = [
            m.plain() if isinstance(m, EchoedAssistantMessage) else m for m in self.messages
        ]
        try:
            return ChatRequest(
                messages=messages,
                model=None if self.model == DEFAULT_MODEL_ALIAS else self.model,
                **options.chat_fields(),
                sampling=self._sampling(),
                response_format=self.response_format,
                client_tools=offered,
                resume=self._resume(),
            )
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            if not first["loc"]:  # the conversation's shape, checked by ChatRequest as a whole
                problem = str(first["msg"]).removeprefix("Value error, ")
                raise HttpError(422, "invalid_request", problem, param="messages") from exc
            where = str(first["loc"][0])  # the client tools, or a sampling value out of range
            field = "tools" if where == "client_tools" else self._sampling_field(where)
            problem = str(first["msg"]).removeprefix("Value error, ")
            raise HttpError(422, "invalid_request", f"{field}: {problem}", param=field) from exc

    def _marked(self) -> tuple[int, str] | None:
        """The token marked on the paused turn's assistant message (the last one, followed
        only by tool results), and its index. Marks on earlier assistant messages belong to
        runs that have gone on since, and are left alone."""
        for index in range(len(self.messages) - 1, -1, -1):
            message = self.messages[index]
            if isinstance(message, EchoedAssistantMessage):
                return None if message.agentloop is None else (index, message.agentloop.resume)
            if not isinstance(message, ToolMessage):
                return None
        return None

    def _resume(self) -> str | None:
        """The paused run's token: ``agentloop.resume`` or the paused turn's mark."""
        marked, option = self._marked(), self.agentloop.resume
        if marked is None:
            return option
        index, token = marked
        if option is not None and option != token:
            raise HttpError(
                422,
                "invalid_request",
                f"agentloop.resume: differs from messages[{index}].agentloop.resume; send one",
                param="agentloop.resume",
            )
        return token

    def _sampling(self) -> Sampling | None:
        if (
            self.max_tokens is not None
            and self.max_completion_tokens is not None
            and self.max_tokens != self.max_completion_tokens
        ):
            raise HttpError(
                422,
                "invalid_request",
                "max_tokens and max_completion_tokens disagree; send one of them",
                param="max_tokens",
            )
        values = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_output_tokens": self.max_completion_tokens or self.max_tokens,
            "stop": [self.stop] if isinstance(self.stop, str) else self.stop,
            "seed": self.seed,
        }
        set_values = {name: value for name, value in values.items() if value is not None}
        return Sampling.model_validate(set_values) if set_values else None

    def _sampling_field(self, name: str) -> str:
        """The request field a ``Sampling`` field came from (for the 422's ``param``)."""
        if name != "max_output_tokens":
            return name or "sampling"
        return "max_completion_tokens" if self.max_completion_tokens is not None else "max_tokens"


def _usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }


def tool_line(event: ToolCallStart | ToolCallResult) -> str:
    if isinstance(event, ToolCallStart):
        return f"\n\n> calling `{event.name}` {event.arguments}\n\n"
    status = "ok" if event.ok else "failed"
    return f"> `{event.name}` {status} in {event.duration_ms:.0f} ms\n\n"


class OpenAIStream(FaceStream[bytes]):
    """How both OpenAI faces' streams (Chat Completions, Responses) follow a run: text as it
    comes (:class:`FaceStream` honours ``text_reset`` and cuts), tool lines with
    ``show_tools``, and the run's first error, which ends the stream at once (the apology the
    loop writes after it is not an answer). Each face frames them its own way."""

    retry_advice = "a retry, or a non-streamed request, will get the whole answer"

    def __init__(self, cancel: CancelToken | None, show_tools: bool) -> None:
        super().__init__(cancel)
        self.show_tools = show_tools

    def encode(self, chunk: bytes) -> bytes:
        return chunk

    def fail(self, error: HttpError) -> list[bytes]:
        """End the stream with ``error`` (the face's error frames)."""
        raise NotImplementedError

    def send_text(self, text: str) -> list[bytes]:
        """Frames for text to add to the answer (the run's, or a tool line)."""
        raise NotImplementedError

    def on_text(self, event: TextDelta, text: str) -> list[bytes]:
        return self.send_text(text)

    def on_error(self, event: ErrorEvent) -> list[bytes]:
        return self.fail(event_error(event))

    def on_cut(self, message: str) -> list[bytes]:
        return self.fail(stream_cut_error(message))

    def on_close(self) -> list[bytes]:
        if self.ended:
            return []
        return self.fail(no_client_retry(HttpError(500, "internal_error", NO_ANSWER)))

    def on_tool_start(self, event: ToolCallStart) -> list[bytes]:
        return self._tool_line(event)

    def on_tool_result(self, event: ToolCallResult) -> list[bytes]:
        return self._tool_line(event)

    def _tool_line(self, event: ToolCallStart | ToolCallResult) -> list[bytes]:
        if not self.show_tools:
            return []
        return self.send_text(tool_line(event))


class CompletionStream(OpenAIStream):
    """Turns agent events into ``chat.completion.chunk`` SSE lines.

    A run that ends without an answer ends the stream with one error object, the same
    one the non-streamed face answers with (the openai SDK raises ``APIError`` on it),
    and no ``finish_reason``. ``cancel`` stops a run whose answer can no longer reach the
    client correctly (a cut stream that was not repeated).
    """

    def __init__(
        self,
        request: CompletionRequest,
        completion_id: str,
        model: str,
        cancel: CancelToken | None = None,
    ) -> None:
        super().__init__(cancel, request.agentloop.show_tools)
        self.request = request
        self.id = completion_id
        self.created = int(time.time())
        self.model = model

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return self._data({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    def _data(self, fields: dict[str, Any]) -> bytes:
        body = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            **fields,
        }
        return f"data: {json.dumps(body)}\n\n".encode()

    def on_open(self) -> list[bytes]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def fail(self, error: HttpError) -> list[bytes]:
        self.ended = True
        return [f"data: {json.dumps(error.body())}\n\n".encode(), _DONE_FRAME]

    def send_text(self, text: str) -> list[bytes]:
        return [self._chunk({"content": text})]

    def on_finish(self, ending: Ending) -> list[bytes]:
        finish = FINISH_REASONS.get(ending.outcome)
        if finish is None:
            return self.fail(run_error(ending))
        done = ending.done
        if finish == "tool_calls":
            calls = client_calls(done.pending)
            frames = [
                self._chunk({"tool_calls": [{"index": index, **tool_call}]})
                for index, tool_call in enumerate(calls)
            ]
            frames.append(self._chunk({"agentloop": {"resume": done.resume}}, finish))
        else:
            frames = [self._chunk({}, finish)]
        options = self.request.stream_options
        if options is not None and options.include_usage:
            frames.append(self._data({"choices": [], "usage": _usage_json(done.usage)}))
        self.ended = True
        return [*frames, _DONE_FRAME]


def client_calls(pending: list[PendingCall]) -> list[dict[str, Any]]:
    """A paused run's calls of the client's tools, as OpenAI's ``tool_calls``."""
    return [
        {
            "id": p.call_id,
            "type": "function",
            "function": {"name": p.name, "arguments": p.arguments},
        }
        for p in pending
        if p.kind == "client"
    ]


def completion_body(
    ending: Ending, completion_id: str, model: str, tool_lines: list[str]
) -> dict[str, Any]:
    """The non-streamed ``chat.completion`` for a run that ended with an answer, or paused
    for the client's tools (their calls, and the token that continues the run)."""
    done = ending.done
    content = "".join(tool_lines) + done.text
    message: dict[str, Any] = {"role": "assistant", "content": content}
    finish = FINISH_REASONS.get(ending.outcome)
    if finish is None:
        raise run_error(ending)
    if finish == "tool_calls":
        message["content"] = content or None  # as OpenAI answers a turn of calls only
        message["tool_calls"] = client_calls(done.pending)
        message["agentloop"] = {"resume": done.resume}
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage_json(done.usage),
    }


async def collect_run(events: AsyncIterator[Event], show_tools: bool) -> tuple[Ending, list[str]]:
    """Run to the end for a non-streamed answer (both OpenAI faces): the run's ending (its
    top-level ``done`` and first error), and the tool lines ``show_tools`` asks for."""
    tool_lines: list[str] = []
    error: ErrorEvent | None = None
    async for event in events:
        if event.depth != 0:
            continue
        if show_tools and isinstance(event, ToolCallStart | ToolCallResult):
            tool_lines.append(tool_line(event))
        elif isinstance(event, ErrorEvent):
            error = error or event
        elif isinstance(event, Done):
            return outcome(event, error), tool_lines
    raise AssertionError("handle_chat always ends with done")


async def collect_completion(
    request: CompletionRequest, events: AsyncIterator[Event], completion_id: str, model: str
) -> dict[str, Any]:
    """Run to the end and answer with one ``chat.completion`` object.

    The answer is ``done.text``, which already leaves out text a ``text_reset`` voided.
    A run without an answer (failed, cancelled, paused for approval) raises
    :class:`HttpError`: a non-streamed client has no other way to tell an apology from an
    answer.
    """
    ending, tool_lines = await collect_run(events, request.agentloop.show_tools)
    return completion_body(ending, completion_id, model, tool_lines)
