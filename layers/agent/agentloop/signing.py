"""The key that signs paused runs' tokens, and the signing.

Kept apart from what a token holds (``continuation.py``), which a run loads only when it
pauses or continues: every request carries a :class:`Signer`, few ever use it.
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
from typing import TYPE_CHECKING, Literal

from agentloop.models import PendingCall, RunProgress

if TYPE_CHECKING:
    from agentloop.continuation import Continuation

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
            from agentloop.continuation import Continuation  # a paused run's: loaded then

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
