"""JwtSettings: which issuer's tokens are accepted, for which audiences, and how checked.

Every problem is a ``ConfigurationError`` naming the ``AGENTLOOP_JWT_*`` variable it comes
from, raised when the settings are built (at start-up), not at the first request.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NoReturn
from urllib.parse import urlsplit

ISSUER_ENV = "AGENTLOOP_JWT_ISSUER"
AUDIENCE_ENV = "AGENTLOOP_JWT_AUDIENCE"
JWKS_URL_ENV = "AGENTLOOP_JWT_JWKS_URL"
TIER_CLAIM_ENV = "AGENTLOOP_JWT_TIER_CLAIM"

SUPPORTED_ALGORITHMS: tuple[str, ...] = ("RS256", "ES256")
"""Asymmetric only: a shared-secret (HS*) algorithm would let whoever knows the public key,
which is everyone, sign tokens if a library ever mistook one for the other."""

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_MAX_URL_CHARS = 2048
_MAX_LEEWAY_S = 300


@dataclass(frozen=True, slots=True)
class JwtSettings:
    """What a token must show. ``audience`` holds every accepted ``aud`` / ``client_id``."""

    issuer: str
    audience: tuple[str, ...]
    jwks_url: str | None = None
    algorithms: tuple[str, ...] = SUPPORTED_ALGORITHMS
    leeway_s: int = 30
    tier_claim: str | None = None
    jwks_timeout_s: float = 3.0

    def __post_init__(self) -> None:
        check_url(self.issuer, ISSUER_ENV)
        if self.jwks_url is not None:
            check_url(self.jwks_url, JWKS_URL_ENV)
        if not self.audience or not all(isinstance(a, str) and a for a in self.audience):
            _fail(f"{AUDIENCE_ENV} must name at least one audience (client id)")
        if not self.algorithms or not set(self.algorithms) <= set(SUPPORTED_ALGORITHMS):
            _fail(f"JWT algorithms must be a non-empty subset of {', '.join(SUPPORTED_ALGORITHMS)}")
        if not 0 <= self.leeway_s <= _MAX_LEEWAY_S:
            _fail(f"JWT leeway must be 0 to {_MAX_LEEWAY_S} seconds")
        if not self.jwks_timeout_s > 0:
            _fail("the JWKS fetch timeout must be positive")
        if self.tier_claim is not None and not self.tier_claim:
            _fail(f"{TIER_CLAIM_ENV} must be a claim name when set")

    @property
    def discovery_url(self) -> str:
        """OpenID Connect Discovery: the issuer, less a trailing slash, then the well-known path."""
        return self.issuer.rstrip("/") + "/.well-known/openid-configuration"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> JwtSettings:
        """Read ``AGENTLOOP_JWT_ISSUER``, ``_AUDIENCE`` (comma-separated), ``_JWKS_URL``,
        ``_TIER_CLAIM``; the first two are required."""
        issuer = environ.get(ISSUER_ENV, "").strip()
        if not issuer:
            _fail(f"{ISSUER_ENV} is not set: the issuer URL whose tokens are accepted")
        audience = tuple(a.strip() for a in environ.get(AUDIENCE_ENV, "").split(",") if a.strip())
        if not audience:
            _fail(f"{AUDIENCE_ENV} is not set: the accepted audience(s), comma-separated")
        return cls(
            issuer=issuer,
            audience=audience,
            jwks_url=environ.get(JWKS_URL_ENV, "").strip() or None,
            tier_claim=environ.get(TIER_CLAIM_ENV, "").strip() or None,
        )


def check_url(url: str, where: str) -> None:
    """An https URL with a host, or http to a loopback host (a local or test issuer).

    Plain http anywhere else would let the network between us and the issuer swap the keys.
    """
    if not isinstance(url, str) or len(url) > _MAX_URL_CHARS:
        _fail(f"{where} must be a URL of at most {_MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        _fail(f"{where} is not a valid URL")
    if not host or parts.username is not None or parts.password is not None or parts.fragment:
        _fail(f"{where} must be a URL with a host, no user:password@ and no #fragment")
    secure = parts.scheme == "https" or (parts.scheme == "http" and host in LOOPBACK_HOSTS)
    if not secure:
        _fail(f"{where} must be an https URL (http only for 127.0.0.1 or localhost)")


def _fail(message: str) -> NoReturn:
    from agentloop.config import ConfigurationError

    raise ConfigurationError(message)
