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

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

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

TOKEN_TTL_S = 24 * 3600.0
"""How long a paused run can be continued."""
MAX_TOKEN_BYTES = 4_000_000
"""A token's decompressed size limit (checked after its signature)."""

_PREFIX = "al1."


class ContinuationError(ValueError):
    """A continuation this server will not accept; ``param`` is the request field at fault."""

    def __init__(self, message: str, param: Literal["resume", "approvals"] = "resume") -> None:
        super().__init__(message)
        self.message = message
        self.param = param


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


class Signer:
    """Signs and checks continuation tokens with one key."""

    def __init__(self, key: bytes, ttl_s: float = TOKEN_TTL_S) -> None:
        if len(key) < 16:
            raise ValueError("a signing key needs at least 16 bytes")
        self._key = key
        self.ttl_s = ttl_s

    def for_principal(self, principal_id: str) -> Signer:
        """A signer whose tokens only this caller's requests accept: its key is derived from
        this one and the caller's id, so another caller's continuation of the run fails its
        signature check like a forged token (it cannot see, approve or go on with the run)."""
        derived = hmac.new(self._key, b"principal\x00" + principal_id.encode(), "sha256")
        return Signer(derived.digest(), self.ttl_s)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Signer:
        """``AGENTLOOP_SIGNING_KEY`` (any text of 16+ characters), else a key of this process."""
        env = os.environ if environ is None else environ
        configured = env.get("AGENTLOOP_SIGNING_KEY", "").strip()
        return cls(configured.encode() if configured else secrets.token_bytes(32))

    def sign(self, continuation: Continuation) -> str:
        payload = {
            "n": continuation.prefix_length,
            "h": continuation.prefix_hash,
            "tail": continuation.tail,
            "pending": [p.model_dump() for p in continuation.pending],
            "progress": continuation.progress.model_dump(),
            "t": continuation.issued_at,
        }
        body = zlib.compress(json.dumps(payload, separators=(",", ":")).encode(), 6)
        return f"{_PREFIX}{_b64(body)}.{_b64(self._mac(body))}"

    def verify(self, token: str, now: float | None = None) -> Continuation:
        """The token's continuation, or ContinuationError (forged, edited, expired)."""
        if not token.startswith(_PREFIX) or token.count(".") != 2:
            raise ContinuationError("resume: not a token this server issued")
        body_text, mac_text = token[len(_PREFIX) :].split(".")
        try:
            body, mac = _unb64(body_text), _unb64(mac_text)
        except ValueError as exc:
            raise ContinuationError("resume: not a token this server issued") from exc
        if not hmac.compare_digest(mac, self._mac(body)):
            raise ContinuationError("resume: the token's signature does not match")
        try:
            raw = zlib.decompressobj().decompress(body, MAX_TOKEN_BYTES)
            payload = json.loads(raw)
            continuation = Continuation(
                prefix_length=int(payload["n"]),
                prefix_hash=str(payload["h"]),
                tail=list(payload["tail"]),
                pending=[PendingCall.model_validate(p) for p in payload["pending"]],
                progress=RunProgress.model_validate(payload["progress"]),
                issued_at=float(payload["t"]),
            )
        except (ValueError, KeyError, TypeError, zlib.error) as exc:  # signed, so ours: a bug
            raise ContinuationError("resume: the token could not be read") from exc
        age = (time.time() if now is None else now) - continuation.issued_at
        if age > self.ttl_s:
            raise ContinuationError(
                f"resume: the paused run expired ({self.ttl_s / 3600:g} hours); ask again"
            )
        return continuation

    def _mac(self, body: bytes) -> bytes:
        return hmac.new(self._key, body, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


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
