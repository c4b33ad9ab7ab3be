"""``GET /auth/config``: what the chat page needs to sign people in, answered without a token.

In jwt mode the page runs the authorization code flow with PKCE against the issuer the server
trusts, as a public client (no secret), so everything here is public by nature: the issuer,
the client id (it is in every sign-in URL), the scopes. Outside jwt mode the answer is ``{}``
and the page offers only the pasted token.

``AGENTLOOP_JWT_CLIENT_ID`` names the page's client; unset, it is the audience when exactly
one is configured (Cognito and Google: the client id is the audience). Auth0 with an API
differs: the audience is the API's identifier, which the page must ask for by name (the
``audience`` field) to get a JWT access token. ``AGENTLOOP_JWT_SCOPES`` defaults to
``openid email profile``.

The variables are read at the route's first request (the route table loads this module then)
and kept on the app: no request after that reads the environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentloop.config import ConfigurationError
from agentloop.http_api import HttpError
from agentloop.oidc import JwtSettings
from agentloop.server.service import service_of

CLIENT_ID_ENV = "AGENTLOOP_JWT_CLIENT_ID"
SCOPES_ENV = "AGENTLOOP_JWT_SCOPES"
DEFAULT_SCOPES = "openid email profile"
# RFC 6749's scope-token characters (printable ASCII but space, '"' and '\'), space-separated.
_SCOPES = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*")
_CLIENT_ID = re.compile(r"[\x21-\x7e]{1,256}")


@dataclass(frozen=True, slots=True)
class SignInConfig:
    """The public half of the page's OpenID Connect client."""

    issuer: str
    client_id: str
    scopes: str = DEFAULT_SCOPES
    audience: str | None = None
    """Asked for in the authorization request when it is not the client itself (Auth0's API)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> SignInConfig:
        """From ``AGENTLOOP_JWT_*``; a ConfigurationError names the variable that is wrong."""
        jwt = JwtSettings.from_env(environ)
        client_id = environ.get(CLIENT_ID_ENV, "").strip()
        if not client_id:
            if len(jwt.audience) != 1:
                raise ConfigurationError(
                    f"{CLIENT_ID_ENV} is not set and the audience is not one client id: "
                    "name the client the chat page signs in with"
                )
            client_id = jwt.audience[0]
        if not _CLIENT_ID.fullmatch(client_id):
            raise ConfigurationError(f"{CLIENT_ID_ENV} must be a client id (printable, no spaces)")
        scopes = " ".join(environ.get(SCOPES_ENV, DEFAULT_SCOPES).split())
        if not _SCOPES.fullmatch(scopes) or "openid" not in scopes.split(" "):
            raise ConfigurationError(f"{SCOPES_ENV} must be space-separated scopes with openid")
        audience = None if client_id in jwt.audience else jwt.audience[0]
        return cls(issuer=jwt.issuer, client_id=client_id, scopes=scopes, audience=audience)

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "issuer": self.issuer,
            "client_id": self.client_id,
            "scopes": self.scopes,
        }
        if self.audience is not None:
            body["audience"] = self.audience
        return body


async def auth_config(request: Request) -> Response:
    """``GET /auth/config``: the page's sign-in client, or ``{}`` when tokens are not JWTs."""
    body: dict[str, Any] = {}
    if service_of(request).auth_mode == "jwt":
        body = _config_of(request).as_json()
    return JSONResponse(body, headers={"cache-control": "no-cache"})


def _config_of(request: Request) -> SignInConfig:
    """The app's sign-in client, read from the environment at its first request."""
    state = request.app.state
    config: SignInConfig | None = getattr(state, "signin_config", None)
    if config is None:
        try:
            config = SignInConfig.from_env(os.environ)
        except ConfigurationError as exc:
            raise HttpError(503, "configuration_error", str(exc)) from None
        state.signin_config = config
    return config
