"""JwtVerifier: a bearer JWT checked against the issuer's published keys, as a Principal.

The order of the checks is the point: the header is read (bounded, unverified) only to pick
an algorithm from the configured ones and a ``kid`` to look up in the configured key set;
the signature is checked with that key and that algorithm alone; only then are the claims
believed. Every refusal is an ``AuthError`` (401) whose message says what was wrong without
quoting the token or any claim from it.
"""

from __future__ import annotations

import time
from typing import Any, TypeGuard

from agentloop.auth import AuthError
from agentloop.oidc.fetch import Fetch, http_get
from agentloop.oidc.jwks import Clock, KeyCache
from agentloop.oidc.keys import MAX_KID_CHARS, LoadedKey
from agentloop.oidc.settings import JwtSettings
from agentloop.principal import Principal

MAX_TOKEN_CHARS = 16 * 1024
MAX_SUBJECT_CHARS = 255
MAX_NAME_CHARS = 256
MAX_TIER_CHARS = 128
NAME_CLAIMS = ("email", "username", "preferred_username", "cognito:username")
TOKEN_USES = ("id", "access")  # a tuple: a claim may be unhashable (a list)
_REQUIRED_CLAIMS = ["exp", "iss", "sub"]


class JwtVerifier:
    """``verify(token) -> Principal``; safe to call from several threads at once."""

    def __init__(
        self, settings: JwtSettings, fetch: Fetch = http_get, clock: Clock = time.monotonic
    ) -> None:
        self.settings = settings
        self._keys = KeyCache(settings, fetch, clock)
        self._audiences = frozenset(settings.audience)

    def verify(self, token: str) -> Principal:
        """The caller the token names, or AuthError; JwksUnavailable when no key set loads."""
        alg, kid = self._header(token)
        key = self._keys.get(kid)
        if key is None:
            raise invalid_token("invalid token: signed with a key the issuer does not publish")
        if key.alg != alg:
            raise invalid_token("invalid token: its algorithm does not match its key")
        claims = self._decode(token, key)
        self._check_audience(claims)
        subject = _subject(claims)
        return Principal.for_jwt(
            self.settings.issuer, subject, _name(claims, subject), self._tier(claims)
        )

    def _header(self, token: str) -> tuple[str, str]:
        """The header's ``alg`` and ``kid``, checked; nothing else in it is ever used."""
        if not isinstance(token, str) or not token:
            raise invalid_token("invalid token: empty")
        if len(token) > MAX_TOKEN_CHARS:
            raise invalid_token(f"invalid token: longer than {MAX_TOKEN_CHARS} characters")
        if token.count(".") != 2:
            raise invalid_token("invalid token: not a signed JWT")
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except (jwt.PyJWTError, ValueError, RecursionError):
            raise invalid_token("invalid token: malformed") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.settings.algorithms:
            raise invalid_token("invalid token: its signing algorithm is not accepted")
        if "crit" in header:  # RFC 7515 4.1.11: extensions we do not understand: refuse
            raise invalid_token("invalid token: it has critical header extensions")
        kid = header.get("kid")
        if not isinstance(kid, str) or not 0 < len(kid) <= MAX_KID_CHARS:
            raise invalid_token("invalid token: no usable key id (kid) in its header")
        return alg, kid

    def _decode(self, token: str, key: LoadedKey) -> dict[str, Any]:
        """Signature, ``iss``, ``exp``, ``nbf``, ``iat`` (with the leeway), via PyJWT."""
        import jwt

        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[key.alg],
                issuer=self.settings.issuer,
                leeway=self.settings.leeway_s,
                options={"require": _REQUIRED_CLAIMS, "verify_aud": False},
            )
        except jwt.MissingRequiredClaimError as exc:
            raise invalid_token(f"invalid token: no {exc.claim} claim") from None
        except (jwt.PyJWTError, ValueError, RecursionError) as exc:
            raise invalid_token(f"invalid token: {_decode_reason(exc)}") from None
        return claims

    def _check_audience(self, claims: dict[str, Any]) -> None:
        """``aud`` names an accepted audience, or (a Cognito access token) ``client_id`` does."""
        token_use = claims.get("token_use")
        if token_use is not None and token_use not in TOKEN_USES:
            raise invalid_token("invalid token: token_use is neither id nor access")
        aud = claims.get("aud")
        if aud is not None:
            values = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
            accepted = any(isinstance(v, str) and v in self._audiences for v in values)
        elif token_use == "access":
            client_id = claims.get("client_id")
            accepted = isinstance(client_id, str) and client_id in self._audiences
        else:
            accepted = False
        if not accepted:
            raise invalid_token("invalid token: not issued for this audience")

    def _tier(self, claims: dict[str, Any]) -> str | None:
        """The tier claim's value (a string, or the first of a list), when configured."""
        if self.settings.tier_claim is None:
            return None
        value = claims.get(self.settings.tier_claim)
        if isinstance(value, list):
            value = value[0] if value else None
        return value if _readable(value, MAX_TIER_CHARS) else None


def invalid_token(message: str) -> AuthError:
    """A 401 whose challenge says the token (not its absence) was the problem (RFC 6750)."""
    return AuthError(message, invalid_token=True)


def _decode_reason(exc: Exception) -> str:
    """A fixed phrase per PyJWT failure: its own messages are not promised to be token-free."""
    import jwt

    reasons: tuple[tuple[type[Exception], str], ...] = (
        (jwt.ExpiredSignatureError, "expired"),
        (jwt.ImmatureSignatureError, "not yet valid"),
        (jwt.InvalidIssuerError, "issued by another issuer"),
        (jwt.InvalidIssuedAtError, "bad iat claim"),
        (jwt.InvalidSignatureError, "bad signature"),
        (jwt.InvalidAlgorithmError, "its signing algorithm is not accepted"),
    )
    return next((reason for kind, reason in reasons if isinstance(exc, kind)), "malformed")


def _subject(claims: dict[str, Any]) -> str:
    """``sub``: a non-empty printable string of bounded length."""
    subject = claims.get("sub")
    if not _readable(subject, MAX_SUBJECT_CHARS):
        raise invalid_token("invalid token: sub is not a short printable string")
    return subject


def _name(claims: dict[str, Any], subject: str) -> str:
    """What a person reads: an email or user name claim when there is one, else ``sub``."""
    for claim in NAME_CLAIMS:
        value = claims.get(claim)
        if _readable(value, MAX_NAME_CHARS):
            return value
    return subject


def _readable(value: object, limit: int) -> TypeGuard[str]:
    """A non-empty printable string (nothing to forge a log line with) of at most ``limit``."""
    return isinstance(value, str) and 0 < len(value) <= limit and value.isprintable()
