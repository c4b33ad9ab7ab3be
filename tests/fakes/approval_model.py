"""The scripted model the approval tests talk to, for every face that asks a person.

One served app answers every case of a module; the model tells the cases apart by the
conversation's first question. It calls the tools ``TURNS`` names for that question, then
answers with the results it read (``"denied"`` for a refused call), so a test sees what
the model was sent. Each run's calls get fresh ids, so a token never fits another run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.fakes.scripted_llm import RecordedRequest, Reply, call
from tests.helpers import tool_payload

JSON = dict[str, Any]
Turns = dict[str, list[tuple[str, JSON]]]

TURNS: Turns = {
    "approve": [("double", {"n": 21})],
    "deny": [("double", {"n": 21})],
    "mixed": [("double", {"n": 21}), ("echo", {"text": "hi"})],
    "two": [("double", {"n": 1}), ("double", {"n": 2})],
    "again": [("double", {"n": 21})],
}
"""The paused turn's calls, per question (``double`` waits for a person, ``echo`` does not)."""
CHECKING = "Let me check."
"""What the model says before its calls."""


def first_user(request: RecordedRequest) -> str:
    """The conversation's first question: which case this request belongs to."""
    return str(next(m["content"] for m in request.messages if m["role"] == "user"))


def results(request: RecordedRequest) -> dict[str, JSON]:
    """The tool results the model was sent, by call id."""
    return {
        m["tool_call_id"]: tool_payload(m["content"])
        for m in request.messages
        if m["role"] == "tool"
    }


@dataclass(frozen=True)
class ApprovalModel:
    """A responder for ``ScriptedLLM.respond_with``: calls first; then an answer made of the
    results it read; "again" makes one more call that waits; a follow-up is thanked."""

    turns: Turns = field(default_factory=lambda: dict(TURNS))

    def __call__(self, request: RecordedRequest) -> Reply:
        last = request.messages[-1]["role"]
        if last == "user" and len([m for m in request.messages if m["role"] == "user"]) > 1:
            return Reply(text="You're welcome.")
        if last == "user":
            calls = [call(name, **args) for name, args in self.turns[first_user(request)]]
            return Reply(text=CHECKING, tool_calls=calls, usage=(100, 20))
        read = results(request)
        if first_user(request) == "again" and len(read) == 1:
            return Reply(tool_calls=[call("double", n=42)], usage=(150, 10))
        shown = [str(r["result"]) if r["ok"] else "denied" for r in read.values()]
        return Reply(text=f"Results: {', '.join(shown)}.", usage=(200, 10))
