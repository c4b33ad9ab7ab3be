"""Bearer-token auth for the chat endpoints: static API keys, each with a name.

Only SHA-256 hashes of valid tokens are stored (in the project's secret, or locally in
``AGENTLOOP_AUTH_TOKEN_SHA256``), so reading the secret or the environment never reveals a
token. An entry is ``name:<sha256 hex>`` (the key of one person or client: its name is who
the caller is, a :class:`~agentloop.principal.Principal` of kind ``key``; removing the entry
revokes it) or a bare ``<sha256 hex>``, named by its first 8 hex digits (the id such keys had
in logs and sandbox tenants before keys had names). Several entries may share a name: one
caller's old and new key during a rotation. The hash of a presented token is compared with
every stored hash in constant time. Nothing here echoes a presented token or logs a hash.
Importing this module uses only the standard library; the secret is read (and boto3
imported) on the first check.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from agentloop.principal import Principal
from agentloop.secret_store import SECRET_ID_ENV, read_secret

logger = logging.getLogger(__name__)

AuthMode = Literal["bearer", "jwt", "iam", "none"]
AUTH_MODES: tuple[AuthMode, ...] = get_args(AuthMode)

AUTH_MODE_ENV = "AGENTLOOP_AUTH_MODE"
TOKEN_HASHES_ENV = "AGENTLOOP_AUTH_TOKEN_SHA256"
SECRET_HASHES_KEY = "auth_token_sha256"
TOKEN_PREFIX = "al_"

_HEX = frozenset("0123456789abcdef")
KEY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")
"""A key's name: short and plain, so ``key:<name>`` is a readable log field and sandbox
tenant id; no ``:`` (the separator), no spaces, nothing to forge a log line with."""
UNNAMED_KEY_ID_CHARS = 8
"""A bare hash's name: its first hex digits (not a secret: 32 bits of a SHA-256)."""
REALM_CHALLENGE = 'Bearer realm="agentloop"'
INVALID_TOKEN_CHALLENGE = REALM_CHALLENGE + ', error="invalid_token"'


def hash_token(token: str) -> str:
    """The form a token is stored in: its SHA-256 hex digest."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> tuple[str, str]:
    """A fresh token (given to the client) and its hash (stored in the secret)."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return token, hash_token(token)


def check_key_name(name: str) -> str:
    """``name`` if it can name a key, else ValueError saying what a name may hold."""
    if not KEY_NAME.fullmatch(name):
        raise ValueError(
            "a key name is 1-64 letters, digits and . _ @ + - (not starting with a punctuation "
            "mark; no ':' or spaces)"
        )
    return name


class AuthError(Exception):
    """A request without a valid token: always 401, with a message safe to send back.

    RFC 6750: the challenge names the scheme, and says ``error="invalid_token"`` only when a
    token was presented and refused (no error attribute when none was sent).
    """

    status: int = 401

    def __init__(self, message: str, *, invalid_token: bool = False) -> None:
        super().__init__(message)
        self.message = message
        challenge = INVALID_TOKEN_CHALLENGE if invalid_token else REALM_CHALLENGE
        self.headers: dict[str, str] = {"WWW-Authenticate": challenge}


@dataclass(frozen=True, slots=True)
class StoredKey:
    """One usable entry of the key list: who it is, and the hash (lowercase hex, ASCII)."""

    name: str
    digest: bytes


def parse_key_entry(entry: object) -> StoredKey | None:
    """``name:<sha256 hex>`` or a bare ``<sha256 hex>``; None when it is neither."""
    if not isinstance(entry, str):
        return None
    name, sep, digest = entry.strip().rpartition(":")
    hashed = _normalise_hash(digest)
    if hashed is None or (sep and not KEY_NAME.fullmatch(name)):
        return None
    return StoredKey(name if sep else hashed[:UNNAMED_KEY_ID_CHARS].decode("ascii"), hashed)


class BearerAuth:
    """Checks ``Authorization: Bearer <token>`` against the stored token hashes.

    ``load_hashes`` is called on every check, so a loader backed by a cached secret picks up
    rotated tokens when its cache expires. Errors from the loader (a missing secret) are
    deployment problems and propagate as they are, not as 401s.
    """

    def __init__(self, load_hashes: Callable[[], Collection[str]]) -> None:
        self._load_hashes = load_hashes
        self._warned_ignored = 0

    def check(self, authorization: str | None) -> str:
        """The name of the key presented (not a secret), or raise AuthError."""
        presented = hash_token(bearer_token(authorization)).encode("ascii")
        matched: str | None = None
        usable = 0
        ignored = 0
        # One pass over every entry, with no early exit, so timing does not reveal which
        # stored hash matched or how far down the list it is.
        for entry in self._load_hashes():
            key = parse_key_entry(entry)
            if key is None:
                ignored += 1
                continue
            usable += 1
            if hmac.compare_digest(presented, key.digest) and matched is None:
                matched = key.name
        self._warn_ignored(ignored)
        if usable == 0:
            raise AuthError(
                "no bearer tokens are configured on the server: add token hashes "
                f"({SECRET_HASHES_KEY} in the secret, or {TOKEN_HASHES_ENV} locally)",
                invalid_token=True,
            )
        if matched is None:
            raise AuthError("invalid token", invalid_token=True)
        return matched

    def principal(self, authorization: str | None) -> Principal:
        """The caller holding the key presented, or raise AuthError."""
        return Principal.for_key(self.check(authorization))

    def _warn_ignored(self, ignored: int) -> None:
        """Warn about malformed stored hashes once per change in their number, not per request."""
        if ignored and ignored != self._warned_ignored:
            logger.warning(
                "ignoring %d stored token hash(es) that are not 64 hex characters", ignored
            )
        self._warned_ignored = ignored


def bearer_token(authorization: str | None) -> str:
    """Take the token from the header value; never put any part of it in a message.

    No header, another scheme or an empty token is a request without a token (RFC 6750 3.1:
    no error attribute); a token with spaces in it was presented, and is invalid.
    """
    if authorization is None or not authorization.strip():
        raise AuthError("missing bearer token: send 'Authorization: Bearer <token>'")
    scheme, *rest = authorization.split(None, 1)
    if scheme.lower() != "bearer":
        # The "scheme" may itself be a token sent without one: do not echo it.
        raise AuthError("malformed Authorization header: expected 'Bearer <token>'")
    token = rest[0].strip() if rest else ""
    if not token:
        raise AuthError("malformed Authorization header: the bearer token is empty")
    if any(ch.isspace() for ch in token):
        raise AuthError(
            "malformed Authorization header: the bearer token contains spaces",
            invalid_token=True,
        )
    return token


def _normalise_hash(entry: object) -> bytes | None:
    """A stored hash as lowercase ASCII bytes, or None if it is not 64 hex characters."""
    if not isinstance(entry, str):
        return None
    value = entry.strip().lower()
    if len(value) != 64 or not _HEX.issuperset(value):
        return None
    return value.encode("ascii")


def _split_hashes(value: object, where: str) -> list[str]:
    """Accept a list of hashes or one comma-separated string; anything else is misconfigured."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part for part in value.split(",") if part.strip()]
    if isinstance(value, list | tuple):
        return [item if isinstance(item, str) else "" for item in value]
    from agentloop.config import ConfigurationError

    raise ConfigurationError(f"{where} must be a list of SHA-256 hex strings (or name:hex)")


def token_hashes_from_secret(secret_id: str, max_age_s: int = 300) -> Callable[[], list[str]]:
    """Loader for ``auth_token_sha256`` in the secret, cached by Powertools for max_age_s."""

    def load() -> list[str]:
        secret = read_secret(secret_id, max_age_s=max_age_s)
        return _split_hashes(
            secret.get(SECRET_HASHES_KEY), f"{SECRET_HASHES_KEY!r} in secret {secret_id!r}"
        )

    return load


def token_hashes_from_env(environ: Mapping[str, str] = os.environ) -> Callable[[], list[str]]:
    """Loader for ``AGENTLOOP_AUTH_TOKEN_SHA256`` (comma-separated hashes), for local use."""

    def load() -> list[str]:
        return _split_hashes(environ.get(TOKEN_HASHES_ENV, ""), TOKEN_HASHES_ENV)

    return load


def auth_mode_from_env(environ: Mapping[str, str] = os.environ) -> AuthMode:
    """``AGENTLOOP_AUTH_MODE``: bearer (the default), jwt (an OpenID Connect issuer's tokens),
    iam (the Function URL checks), or none."""
    raw = environ.get(AUTH_MODE_ENV, "").strip().lower() or "bearer"
    for mode in AUTH_MODES:
        if raw == mode:
            return mode
    from agentloop.config import ConfigurationError

    raise ConfigurationError(f"{AUTH_MODE_ENV} must be one of {', '.join(AUTH_MODES)}; got {raw!r}")


def bearer_auth_from_env(environ: Mapping[str, str] = os.environ) -> BearerAuth:
    """Hashes from the secret when ``AGENTLOOP_SECRET_ID`` is set (AWS), else from the env."""
    secret_id = environ.get(SECRET_ID_ENV, "").strip()
    if secret_id:
        return BearerAuth(token_hashes_from_secret(secret_id))
    if environ.get(TOKEN_HASHES_ENV, "").strip():
        return BearerAuth(token_hashes_from_env(environ))
    from agentloop.config import ConfigurationError

    raise ConfigurationError(
        f"bearer auth needs {SECRET_ID_ENV} or {TOKEN_HASHES_ENV} (comma-separated SHA-256 "
        f"hex digests of the valid tokens); or set {AUTH_MODE_ENV}=jwt, =iam or =none"
    )
