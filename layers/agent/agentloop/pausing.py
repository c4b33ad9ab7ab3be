"""The loop's decisions about calls that wait for the client, in one place.

Which calls of a turn wait (a person's approval, the client's own tools) and which are refused
(a sub-agent's call to an approval tool: nobody can approve it there), why such a round pauses
the run, the token a paused run ends with (``continuation.py`` signs it) and the first step of
the run that continues it. The plan decides *which* tools need approval (``plan.py``); the
loop asks this module what that means for each call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agentloop.events import ApprovalRequest
from agentloop.models import (
    ClientTool,
    FunctionCall,
    Message,
    PendingCall,
    RunProgress,
    ToolCall,
    to_wire,
)
from agentloop.tools.results import ToolResult

if TYPE_CHECKING:
    from agentloop.continuation import Resumption
    from agentloop.signing import Signer


@dataclass(frozen=True)
class Round:
    """How a turn's calls are sorted: refused (not run, with the reason the model reads),
    waiting for the client, or run now (the refused ones are "run" as their refusal)."""

    refused: dict[str, str]
    waiting: list[PendingCall]
    runnable: list[ToolCall]

    @property
    def stop(self) -> Literal["approval_required", "client_tools"]:
        """Why the run pauses after this round (a person's approval first)."""
        asks = any(p.kind == "approval" for p in self.waiting)
        return "approval_required" if asks else "client_tools"

    def approval_requests(self) -> list[ApprovalRequest]:
        """One event per call that waits for a person, in the model's order."""
        return [
            ApprovalRequest(call_id=p.call_id, name=p.name, arguments=p.arguments)
            for p in self.waiting
            if p.kind == "approval"
        ]


@dataclass(frozen=True)
class Pausing:
    """What a run may wait for, and the paused run it continues."""

    approval_tools: frozenset[str] = frozenset()
    """Tools whose calls wait for a person's approval (the server's and the request's)."""
    client_tools: tuple[ClientTool, ...] = ()
    """Tools the client runs itself: offered to the model, never run here."""
    resumption: Resumption | None = None
    """The paused run this one continues: its decided calls run first."""
    signer: Signer | None = None
    """Signs the token of a run that pauses (needed once it can)."""
    suspend_at_deadline: bool = False
    """At the deadline, end with ``suspended`` (no answer): the caller goes on later."""
    _client_names: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = frozenset(t.function.name for t in self.client_tools)
        object.__setattr__(self, "_client_names", names)

    def client_definitions(self) -> list[dict[str, Any]]:
        """The client tools as the model is offered them, beside the server's."""
        return [t.model_dump(exclude_none=True) for t in self.client_tools]

    def sort(self, calls: list[ToolCall], problems: dict[str, str], depth: int) -> Round:
        """Sort a turn's calls; ``problems``: calls already refused (written wrongly)."""
        refused = dict(problems)
        if depth > 0:  # a sub-agent cannot ask a person
            for call in calls:
                if call.name in self.approval_tools:
                    refused[call.id] = _not_asked(call.name)
        waiting = [
            PendingCall(call_id=c.id, name=c.name, arguments=c.arguments, kind=kind)
            for c in calls
            if c.id not in refused and (kind := self._waits(c, depth)) is not None
        ]
        held = {p.call_id for p in waiting}
        return Round(refused, waiting, [c for c in calls if c.id not in held])

    def _waits(self, call: ToolCall, depth: int) -> Literal["approval", "client"] | None:
        if call.name in self._client_names:
            return "client"
        if call.name in self.approval_tools and depth == 0:
            return "approval"
        return None

    def resumed_calls(self) -> tuple[list[ToolCall], dict[str, ToolResult]]:
        """A continued run's first step: the decided calls (approved, then denied) and the
        denied ones' results; the client tools' results are in the conversation already."""
        if self.resumption is None:
            return [], {}
        denied = self.resumption.denied
        decided = [*self.resumption.approved, *(p for p, _ in denied)]
        calls = [
            ToolCall(id=p.call_id, function=FunctionCall(name=p.name, arguments=p.arguments))
            for p in decided
        ]
        return calls, {p.call_id: ToolResult.denied(reason) for p, reason in denied}

    def token(
        self,
        conversation: list[Message],
        added: list[Message],
        pending: list[PendingCall],
        progress: RunProgress,
    ) -> str:
        """The signed token of a run paused on ``pending``: the part of the conversation the
        client holds as the server does, what the server added after it, and the progress."""
        if self.signer is None:
            raise RuntimeError("a run that can pause needs a signer")
        from agentloop.continuation import Continuation, conversation_hash  # runs that pause

        kept = self.resumption.prefix_length if self.resumption else len(conversation)
        prefix = conversation[:kept]
        return self.signer.sign(
            Continuation(
                prefix_length=kept,
                prefix_hash=conversation_hash(prefix),
                tail=to_wire([*conversation[kept:], *added]),
                pending=pending,
                progress=progress,
            )
        )


def _not_asked(name: str) -> str:
    return (
        f"{name} needs a person's approval in this run, which a sub-agent cannot ask for, so "
        "it was not run. Answer without it, and say what you would run: the agent that asked "
        f"you can call {name} itself, with approval"
    )
