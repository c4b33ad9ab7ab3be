"""Sign-in with an OpenID Connect issuer (Cognito, Auth0, Entra, ...): bearer JWTs checked.

``JwtSettings.from_env()`` says which issuer and audiences; ``JwtVerifier(settings).verify``
turns a token into a :class:`agentloop.principal.Principal` or raises ``AuthError`` (401,
``error="invalid_token"``), or :class:`JwksUnavailable` (a ``ConfigurationError``: 503) when
the issuer's keys were never had. The policy, and why, is in the submodules' docstrings:
``verifier`` (the checks), ``jwks`` (when keys are fetched), ``keys`` (which keys count),
``fetch`` (the bounded GET), ``settings`` (what is configured).

Importing this package uses only the standard library: PyJWT and cryptography are imported
at the first verification, httpx at the first fetch, and ``JwksUnavailable`` (whose base
class lives with pydantic in ``agentloop.config``) when first named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentloop.oidc.settings import JwtSettings
from agentloop.oidc.verifier import JwtVerifier

if TYPE_CHECKING:
    from agentloop.oidc.errors import JwksUnavailable

__all__ = ["JwksUnavailable", "JwtSettings", "JwtVerifier"]


def __getattr__(name: str) -> Any:
    """``JwksUnavailable`` on first use, so the package import does not pull in pydantic."""
    if name == "JwksUnavailable":
        from agentloop.oidc.errors import JwksUnavailable

        return JwksUnavailable
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
