"""Runs that pause and are continued by another request, with nothing stored on the server.

A run pauses after a turn whose calls wait for the client: a person's approval, or the result
of a tool the client runs itself. Its ``done`` carries a token, signed with HMAC-SHA256, that
holds what the next request needs and must not be able to change: a hash of the conversation
as the client sent it (the *prefix*), everything the server added after it (the *tail*: tool
rounds, and the paused turn with the assistant's calls and the results of the calls that ran),
which calls wait and for what, and the iterations and tokens spent so far.

The next request sends the conversation, the token and its decisions. :func:`resume` checks
that the conversation starts with the prefix the token was made for and takes the tail from
the token, not from the client: so a client can neither approve a call the model did not make
nor edit its arguments, and a client that kept only part of the tail (the OpenAI face shows
only the client's own calls) loses nothing. After the prefix, the client may send only its
view of the tail and the results of its own tools' calls.

Stateless means replayable: a token can be used again within its lifetime, as a request can be
sent again. The key comes from the project's secret (``AGENTLOOP_SIGNING_KEY``); without one a
process makes its own, and its tokens die with it.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from agentloop.models import (
    AssistantMessage,
    ChatRequest,
    Message,
    PendingCall,
    RunProgress,
    ToolMessage,
    messages_from_wire,
    to_wire,
)
from agentloop.signing import ContinuationError, Signer


@dataclass(frozen=True)
class Continuation:
    """What a paused run hands the request that continues it (signed into its token)."""

    prefix_length: int
    prefix_hash: str
    tail: list[dict[str, Any]]
    """In wire form, what the server's conversation holds after the prefix, up to and
    including the paused turn (the assistant message with every call, the results of the
    calls that ran)."""
    pending: list[PendingCall]
    progress: RunProgress
    issued_at: float = field(default_factory=time.time)


def conversation_hash(messages: list[Message]) -> str:
    """A digest of a conversation's provider-facing form (what the model was sent)."""
    canonical = json.dumps(
        to_wire(messages), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Resumption:
    """A checked continuation: the conversation to go on from and what the request decided."""

    conversation: list[Message]
    """The prefix, the tail as the token holds it, then the client tools' results."""
    prefix_length: int
    """The part of the conversation the client holds as the server does (later pauses of the
    same run keep it)."""
    progress: RunProgress
    approved: list[PendingCall]
    denied: list[tuple[PendingCall, str | None]]
    client_results: list[ToolMessage]
    """The client's results for its own tools' calls, in the order the model made them (the
    last part of ``conversation``)."""


def resume(request: ChatRequest, signer: Signer) -> Resumption:
    """Check ``request``'s continuation of a paused run; ContinuationError names what is wrong."""
    if request.resume is None:
        raise ContinuationError(
            "approvals: only a paused run can be continued with approvals; send its done's "
            "resume token too",
            "approvals",
        )
    continuation = signer.verify(request.resume)
    messages = request.messages
    n = continuation.prefix_length
    if len(messages) < n or conversation_hash(messages[:n]) != continuation.prefix_hash:
        raise ContinuationError("resume: the conversation is not the one this token was issued for")
    try:
        tail = messages_from_wire(continuation.tail)
    except ValidationError as exc:  # signed, so ours: a bug
        raise ContinuationError("resume: the token could not be read") from exc
    calls = {c.id for m in tail if isinstance(m, AssistantMessage) for c in m.tool_calls or ()}
    pending = {p.call_id: p for p in continuation.pending}
    client_results = _client_results(messages[n:], calls, pending)
    approved, denied = _decisions(request, pending)
    return Resumption(
        conversation=[*messages[:n], *tail, *client_results],
        prefix_length=n,
        progress=continuation.progress,
        approved=approved,
        denied=denied,
        client_results=client_results,
    )


def _client_results(
    after: list[Message], calls: set[str], pending: dict[str, PendingCall]
) -> list[ToolMessage]:
    """The client tools' results, from what the client sent after the prefix: its view of the
    tail (assistant messages and results, which the token holds already) and one result per
    pending call of its own tools. Anything else there (a new question) is refused."""
    results: dict[str, ToolMessage] = {}
    for message in after:
        if isinstance(message, AssistantMessage):
            if not {c.id for c in message.tool_calls or ()} <= calls:
                raise ContinuationError("resume: the paused run's calls were changed")
            continue
        if not isinstance(message, ToolMessage) or message.tool_call_id not in calls:
            raise ContinuationError(
                "resume: a paused run is continued with its results and decisions only; "
                "ask a new question once it has answered"
            )
        waiting = pending.get(message.tool_call_id)
        if waiting is not None and waiting.kind == "client":
            if message.tool_call_id in results:
                raise ContinuationError(f"resume: two results for {message.tool_call_id!r}")
            results[message.tool_call_id] = message
    missing = [
        p.call_id for p in pending.values() if p.kind == "client" and p.call_id not in results
    ]
    if missing:
        raise ContinuationError(f"resume: no result for the client tool call(s) {missing}")
    return [results[p.call_id] for p in pending.values() if p.call_id in results]


def _decisions(
    request: ChatRequest, pending: dict[str, PendingCall]
) -> tuple[list[PendingCall], list[tuple[PendingCall, str | None]]]:
    decided = {a.call_id: a for a in request.approvals or ()}
    for call_id in decided:
        if call_id not in pending or pending[call_id].kind != "approval":
            raise ContinuationError(
                f"approvals: no call {call_id!r} of this run waits for approval", "approvals"
            )
    undecided = [
        p.call_id for p in pending.values() if p.kind == "approval" and p.call_id not in decided
    ]
    if undecided:
        raise ContinuationError(
            f"approvals: the call(s) {undecided} wait for a decision (approved true or false)",
            "approvals",
        )
    asked = [p for p in pending.values() if p.kind == "approval"]  # the model's order
    approved = [p for p in asked if decided[p.call_id].approved]
    denied = [(p, decided[p.call_id].reason) for p in asked if not decided[p.call_id].approved]
    return approved, denied
