"""How a run ended, as every face must say it: one classification, mapped per protocol.

Each face keeps only a small table from :class:`Outcome` to its wire value (a finish
reason, a status, an event), so a new stop reason is classified here once and every face
that has no entry for it fails loudly in review rather than quietly answering "success".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from agentloop.events import Done, ErrorEvent
from agentloop.models import StopReason


class Outcome(Enum):
    """What a client must be told about a run's end."""

    ANSWERED = "answered"
    """The run answered."""
    CUT_SHORT = "cut_short"
    """A limit (iterations, tokens or dollars, the deadline) cut the answer short; the text
    is still the answer, and ends with the limit's notice."""
    AWAITS_APPROVAL = "awaits_approval"
    """Paused on calls that wait for a person's decision (``done.pending``, ``done.resume``)."""
    AWAITS_CLIENT_TOOLS = "awaits_client_tools"
    """Paused on calls of the client's own tools, for the client to run."""
    SUSPENDED = "suspended"
    """Paused for the server to continue in another invocation (research jobs only)."""
    FAILED = "failed"
    """No answer: an error (the run's first ``error`` event says which)."""
    CANCELLED = "cancelled"
    """No answer: the run was cancelled (the client left, or its stream was cut)."""

    @property
    def has_answer(self) -> bool:
        """True when ``done.text`` is an answer a client may show as one."""
        return self in _WITH_ANSWER


_WITH_ANSWER = frozenset({Outcome.ANSWERED, Outcome.CUT_SHORT})

OUTCOMES: dict[StopReason, Outcome] = {
    "completed": Outcome.ANSWERED,
    "max_iterations": Outcome.CUT_SHORT,
    "budget": Outcome.CUT_SHORT,
    "quota": Outcome.CUT_SHORT,
    "deadline": Outcome.CUT_SHORT,
    "approval_required": Outcome.AWAITS_APPROVAL,
    "client_tools": Outcome.AWAITS_CLIENT_TOOLS,
    "suspended": Outcome.SUSPENDED,
    "error": Outcome.FAILED,
    "cancelled": Outcome.CANCELLED,
}
"""Every stop reason's outcome (mypy checks the keys against ``StopReason``'s values only
through this table's type; tests/unit/test_faces.py checks that none is missing)."""


NO_ANSWER = "the run ended without an answer"


@dataclass(frozen=True, slots=True)
class Ending:
    """A run's top-level ``done``, its outcome and its first top-level ``error`` event."""

    done: Done
    outcome: Outcome
    error: ErrorEvent | None = None

    @property
    def failure(self) -> str:
        """Why the run has no answer, in words a client can show."""
        if self.outcome is Outcome.CANCELLED:
            return "the run was cancelled before it finished"
        if self.error is not None:
            return self.error.message
        return NO_ANSWER


def outcome(done: Done, error: ErrorEvent | None = None) -> Ending:
    """Classify a run's end. ``error`` is the run's first top-level ``error`` event: it says
    why a failed run failed; the stop reason alone decides the outcome."""
    return Ending(done, OUTCOMES[done.stop_reason], error)
