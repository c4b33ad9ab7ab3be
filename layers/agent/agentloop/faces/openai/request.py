"""Chat Completions' request as the agent honours it: the body of
``POST /v1/chat/completions`` mapped to a :class:`ChatRequest` (with the OpenAI faces'
options, and the echoed assistant message that carries a paused run's token)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentloop.faces.options import AgentOptions, option_params
from agentloop.http_api import HttpError, first_problem
from agentloop.models import (
    AssistantMessage,
    ChatRequest,
    ClientTool,
    FunctionCall,
    Message,
    ResponseFormat,
    Sampling,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

DEFAULT_MODEL_ALIAS = "agentloop"
"""Model name meaning "the server's default", for clients that insist on sending one."""


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
            loc = exc.errors(include_url=False)[0]["loc"]
            problem = first_problem(exc)
            if not loc:  # the conversation's shape, checked by ChatRequest as a whole
                raise HttpError(422, "invalid_request", problem, param="messages") from exc
            where = str(loc[0])  # the client tools, or a sampling value out of range
            field = "tools" if where == "client_tools" else self._sampling_field(where)
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
