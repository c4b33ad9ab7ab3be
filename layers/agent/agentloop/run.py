"""What one run of the loop is given, and what it changes, kept apart.

A :class:`RunSetup` is fixed for the run's length: ``chat._prepare`` builds it from the plan
and the request's context, and :class:`agentloop.loop.AgentLoop` only reads it. A
:class:`RunState` is what the run changes as it goes: its turn count, the history it adds, the
tool results it gathered. What a client shows as the answer has its own keeper
(:class:`agentloop.answer.ShownAnswer`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentloop.config import AgentConfig
from agentloop.context import CompactionSettings, ViewCache
from agentloop.limits import CancelToken, Deadline, TokenBudget
from agentloop.llm.base import ChatModel
from agentloop.models import Message, Sampling, SystemMessage, ToolCall, to_wire
from agentloop.pausing import Pausing
from agentloop.pricing import Pricer
from agentloop.sources import SourceCollector
from agentloop.tools.base import RunInfo
from agentloop.tools.registry import ToolRegistry

RoundSink = Callable[[list[Message]], Awaitable[None]]

if TYPE_CHECKING:
    from agentloop.output_format import OutputFormat


@dataclass(frozen=True)
class RunLimits:
    """What bounds the run; the budget, deadline and cancel token are the request's, shared
    with its nested runs."""

    max_iterations: int
    budget: TokenBudget
    deadline: Deadline
    cancel: CancelToken
    pricer: Pricer = field(default_factory=Pricer)
    """Prices each call for ``cost_usd`` and the dollar budget (``budget.cost_limit``)."""


@dataclass(frozen=True)
class RunSetup:
    """Everything a run is given; none of it changes while it runs."""

    model: ChatModel
    tools: ToolRegistry
    config: AgentConfig
    limits: RunLimits
    conversation: list[Message]
    """What the run goes on from (a continued run's: the prefix, the tail, the client's results)."""
    tool_extras: dict[str, Any] = field(default_factory=dict)
    """Values of the request handed to every tool (``ToolScope.extras``)."""
    run_info: RunInfo | None = None
    """What ``ask_llm`` reads about this run; None: no nested runs."""
    sampling: Sampling | None = None
    output: OutputFormat | None = None
    """The answer's required shape: told to the model, checked before the run ends."""
    pausing: Pausing = field(default_factory=Pausing)
    """Which calls wait for the client, and the paused run this one continues."""
    on_round: RoundSink | None = None
    """Told the messages the run has added so far after each finished tool round (a thread
    keeps them as they come, so a process that dies loses at most the round in progress)."""
    iterations_before: int = 0
    """Turns taken before this invocation (a continued run, a research job's next part): the
    run's count goes on from there, against the same ``max_iterations``."""

    def system_prompt(self) -> str:
        """The configured prompt, and what the answer's required shape is (if any)."""
        prompt = self.config.system_prompt
        if self.output is None:
            return prompt
        return f"{prompt}\n\n{self.output.instruction()}"


@dataclass
class ToolRecord:
    """A call the run made and what came of it, for the summary a failed run answers with."""

    call: ToolCall
    ok: bool
    preview: str


@dataclass
class RunState:
    """What a run changes as it goes."""

    iterations: int
    """Turns taken, those of earlier invocations included."""
    wire: list[dict[str, Any]]
    """The history in the provider's form: the system prompt, the conversation, then every
    message the run added."""
    compaction: CompactionSettings
    """How the model's view is compacted (made harder when the provider says too long)."""
    view_cache: ViewCache = field(default_factory=ViewCache)
    """Each message's form in the view and its size, measured once for the run."""
    added: list[Message] = field(default_factory=list)
    """Every message the run added: ``done.messages``."""
    records: list[ToolRecord] = field(default_factory=list)
    sources: SourceCollector = field(default_factory=SourceCollector)
    """The pages this run and its sub-agents used, for ``done.sources``."""
    mend: list[dict[str, Any]] | None = None
    """The rejected answer and why, shown to the next call only (never kept in the history);
    an empty list once the one chance to mend an answer has been used."""

    @classmethod
    def start(cls, setup: RunSetup) -> RunState:
        config = setup.config
        system = SystemMessage(content=setup.system_prompt())
        return cls(
            iterations=setup.iterations_before,
            wire=to_wire([system, *setup.conversation]),
            compaction=CompactionSettings(
                preview_chars=config.tool_preview_chars, max_chars=config.context_max_chars
            ),
        )

    def append(self, message: Message) -> None:
        """Keep a message the run added, and its provider form for the next calls."""
        self.added.append(message)
        self.wire.extend(to_wire([message]))
