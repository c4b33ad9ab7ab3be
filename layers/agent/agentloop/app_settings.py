"""The chat app's process settings, read from the environment once, and its logging set-up.

``AgentConfig`` says how a run behaves; this says how the server around it behaves: where the
secret is, how callers authenticate, which Host names and CORS origins are served, the body
limits, metrics and logging. ``AppSettings.from_env`` reads them all in one place when the
app is created, so a bad value stops start-up with a message naming the variable, and no
request reads ``os.environ``.

Logging: :func:`configure_logging` runs once per process and installs :class:`RequestIdFilter`
on the handlers it sets up, so every line logged while a request is handled (the loop's, a
tool's) carries that request's id from :data:`REQUEST_ID` and its caller's principal id (never
a token) from :data:`PRINCIPAL_ID`, which the app sets per request.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentloop.auth import AUTH_MODE_ENV, TOKEN_HASHES_ENV, AuthMode, auth_mode_from_env
from agentloop.config import ConfigurationError
from agentloop.host_check import AllowedHosts, allowed_hosts_for, parse_allowed_hosts
from agentloop.http_api import RequestLimits
from agentloop.logs import PRINCIPAL_ID, REQUEST_ID, quiet_request_loggers
from agentloop.oidc import JwtSettings
from agentloop.secret_store import SECRET_ID_ENV

METRICS_ENV = "AGENTLOOP_METRICS"
CORS_ORIGINS_ENV = "AGENTLOOP_CORS_ORIGINS"
ALLOWED_HOSTS_ENV = "AGENTLOOP_ALLOWED_HOSTS"


class AppSettings(BaseModel):
    """Everything the chat app reads from ``AGENTLOOP_*`` (and a few standard) variables."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    on_lambda: bool = Field(default=False, description="AWS_LAMBDA_FUNCTION_NAME is set.")
    secret_id: str | None = Field(default=None, description="Provider keys and token hashes.")
    auth_mode: AuthMode = "bearer"
    auth_token_sha256: str | None = Field(
        default=None, description="Comma-separated token hashes, when there is no secret."
    )
    jwt: JwtSettings | None = Field(
        default=None, description="The OpenID Connect issuer (AGENTLOOP_JWT_*), in jwt mode."
    )
    metrics: bool = Field(
        default=False, description="One EMF blob per run: default on on Lambda, off elsewhere."
    )
    metrics_namespace: str = "agentloop"
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = Field(
        default=(), description="Host names served besides the loopback ones (normalized)."
    )
    limits: RequestLimits = Field(default_factory=RequestLimits)
    log_level: str = "INFO"
    service_name: str = Field(default="agentloop-chat", description="Powertools' service key.")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AppSettings:
        """Read and check every setting; a ConfigurationError names the variable that is wrong."""
        env = os.environ if environ is None else environ

        def read(name: str) -> str | None:
            return env.get(name, "").strip() or None

        on_lambda = bool(read("AWS_LAMBDA_FUNCTION_NAME"))
        auth_mode = auth_mode_from_env(env)
        values: dict[str, Any] = {
            "on_lambda": on_lambda,
            "secret_id": read(SECRET_ID_ENV),
            "auth_mode": auth_mode,
            # jwt mode without an issuer or audience stops start-up, naming the variable.
            "jwt": JwtSettings.from_env(env) if auth_mode == "jwt" else None,
            "auth_token_sha256": read(TOKEN_HASHES_ENV),
            "metrics": _metrics_on(read(METRICS_ENV), on_lambda=on_lambda),
            "cors_origins": _split(env.get(CORS_ORIGINS_ENV, "")),
            "allowed_hosts": parse_allowed_hosts(env.get(ALLOWED_HOSTS_ENV, "")),
            "limits": RequestLimits.from_env(env),
        }
        for field, name in (
            ("metrics_namespace", "POWERTOOLS_METRICS_NAMESPACE"),
            ("log_level", "LOG_LEVEL"),
            ("service_name", "POWERTOOLS_SERVICE_NAME"),
        ):
            if (raw := read(name)) is not None:
                values[field] = raw
        return cls.model_validate(values)

    def host_check(self) -> AllowedHosts | None:
        """The Host names to accept, or None for no check (on Lambda with none configured)."""
        return allowed_hosts_for(self.allowed_hosts, on_lambda=self.on_lambda)

    def auth_environ(self) -> dict[str, str]:
        """The auth variables as ``auth.bearer_auth_from_env`` takes them, from these values."""
        env: dict[str, str] = {AUTH_MODE_ENV: self.auth_mode}
        if self.secret_id:
            env[SECRET_ID_ENV] = self.secret_id
        if self.auth_token_sha256:
            env[TOKEN_HASHES_ENV] = self.auth_token_sha256
        return env


def _split(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _metrics_on(raw: str | None, *, on_lambda: bool) -> bool:
    """On Lambda metrics are wanted (CloudWatch reads the EMF lines); locally they are noise
    on stdout after every request, so there they are off unless asked for."""
    if raw is None:
        return on_lambda
    value = raw.lower()
    if value not in ("on", "off"):
        raise ConfigurationError(f"{METRICS_ENV} must be on or off, got {raw!r}")
    return value == "on"


# -- logging -----------------------------------------------------------------------------------


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` and ``principal`` to every record that passes, from
    :data:`REQUEST_ID` and :data:`PRINCIPAL_ID` (the caller's id: a key's name, an ARN, a
    digest of issuer and subject; never a token).

    A record that already has one (``extra={"request_id": ...}``) keeps it. Outside a request
    the attribute is ``default``: ``"-"`` for the plain format, None on Lambda, where
    Powertools' JSON formatter leaves None values out.
    """

    def __init__(self, default: str | None = None) -> None:
        super().__init__()
        self.default = default

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = REQUEST_ID.get() or self.default
        if getattr(record, "principal", None) is None:
            record.principal = PRINCIPAL_ID.get() or self.default
        return True


PLAIN_FORMAT = "%(levelname)s:%(name)s:[%(request_id)s %(principal)s] %(message)s"


def configure_logging(settings: AppSettings) -> None:
    """JSON logs through Powertools on Lambda; plain logs elsewhere; request ids on both.

    Called when the app starts; calling it again changes nothing (no second handler or filter).
    """
    quiet_request_loggers()
    if not settings.on_lambda:
        logging.basicConfig(level=settings.log_level, format=PLAIN_FORMAT)
        _add_request_ids(logging.getLogger().handlers, default="-")
        return
    root = logging.getLogger("agentloop")
    if root.handlers and not root.propagate:  # done already
        return
    from aws_lambda_powertools import Logger

    powertools = Logger(service=settings.service_name)  # its level: LOG_LEVEL, as before
    root.handlers = powertools.handlers
    root.setLevel(powertools.log_level)
    root.propagate = False
    _add_request_ids(root.handlers, default=None)


def _add_request_ids(handlers: list[logging.Handler], default: str | None) -> None:
    for handler in handlers:
        if not any(isinstance(f, RequestIdFilter) for f in handler.filters):
            handler.addFilter(RequestIdFilter(default))
