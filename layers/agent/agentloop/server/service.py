"""The service every route shares, built once per process (per Lambda container): the agent's
configuration, its tools, how callers are checked, the request limits and the run hooks."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from agentloop.app_settings import AppSettings
from agentloop.auth import AuthMode, bearer_auth_from_env
from agentloop.chat import AgentSetup
from agentloop.config import AgentConfig, ConfigurationError
from agentloop.defaults import default_registry, mcp_tools_from_env
from agentloop.events import Done
from agentloop.http_api import InvocationInfo, RequestLimits
from agentloop.llm.registry import describe_models, listed_models, providers_with_keys
from agentloop.secret_store import load_provider_keys, read_secret
from agentloop.server.identity import (
    Authenticate,
    allow_anyone,
    api_keys,
    iam_caller,
    jwt_bearer,
)
from agentloop.tools.execute_code import execute_code_mode
from agentloop.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from agentloop.mcp.client import McpTools
    from agentloop.quota import Quota

logger = logging.getLogger("agentloop.chat_app")


@dataclass
class ChatService:
    """Everything a request handler needs; built once per process (per Lambda container)."""

    config: AgentConfig
    tools: ToolRegistry
    authenticate: Authenticate
    auth_mode: AuthMode
    limits: RequestLimits = field(default_factory=RequestLimits)
    heartbeat_s: float = 10.0
    execute_code: str = "not configured"
    """Where execute_code runs and how it is isolated, or why it is off (see /healthz)."""
    metrics_namespace: str | None = None
    """Where each run's EMF metrics go; None: none are written (AGENTLOOP_METRICS)."""
    on_finish: list[Callable[[Done, InvocationInfo], None]] = field(default_factory=list)
    mcp_tools: McpTools | None = None
    """The MCP servers whose tools join ``tools`` when first listed (AGENTLOOP_MCP_SERVERS)."""
    models: tuple[str, ...] = ()
    """What ``GET /v1/models`` offers, the default first, decided at start-up from the keys
    set (``registry.listed_models``); empty: the default model alone."""
    quota: Quota | None = None
    """Per-principal limits (AGENTLOOP_LIMITS) on the store; None: none, and no store call."""

    @functools.cached_property
    def setup(self) -> AgentSetup:
        """What every request's context shares (the same object for the life of the app)."""
        return AgentSetup(config=self.config, tools=self.tools)


def service_from_env(settings: AppSettings | None = None) -> ChatService:
    """The service as configured by ``AGENTLOOP_*`` variables (and the secret, in AWS)."""
    settings = settings or AppSettings.from_env()
    secret: dict[str, Any] = {}
    if settings.secret_id:
        secret = read_secret(settings.secret_id)
        names = load_provider_keys(secret)
        logger.info("provider keys loaded from the secret", extra={"keys": names})
    if settings.metrics:
        # Import now, in Lambda's init phase, not while the first request's done is pending.
        import aws_lambda_powertools.metrics  # noqa: F401
    mode = settings.auth_mode
    authenticate = authenticator(settings)
    tools = default_registry()
    mcp_tools = mcp_tools_from_env(tools, secret)
    execute_code = execute_code_mode() if "execute_code" in tools.names else "off"
    logger.info("execute_code: %s", execute_code)
    config = AgentConfig.from_env()  # after the secret's keys: they choose the default model
    quota = _quota_from_env()
    logger.log(*describe_models(config.default_model))
    return ChatService(
        config=config,
        tools=tools,
        authenticate=authenticate,
        auth_mode=mode,
        limits=settings.limits,
        execute_code=execute_code,
        metrics_namespace=settings.metrics_namespace if settings.metrics else None,
        mcp_tools=mcp_tools,
        models=tuple(
            listed_models(config.default_model, config.allowed_models, providers_with_keys())
        ),
        quota=quota,
    )


def _quota_from_env() -> Quota | None:
    """AGENTLOOP_LIMITS on AGENTLOOP_STORE's store (unset: None; the quota is not imported)."""
    if not os.environ.get("AGENTLOOP_LIMITS", "").strip():
        return None
    from agentloop.quota import quota_from_env

    quota = quota_from_env(os.environ)
    if quota is not None:
        logger.info("per-principal limits on %s", quota.store.url)
    return quota


def authenticator(settings: AppSettings) -> Authenticate:
    """How this process checks callers, by ``AGENTLOOP_AUTH_MODE``; every face uses it."""
    if settings.auth_mode == "bearer":
        return api_keys(bearer_auth_from_env(settings.auth_environ()))
    if settings.auth_mode == "jwt":
        from agentloop.oidc import JwtVerifier

        if settings.jwt is None:  # AppSettings.from_env reads them in jwt mode
            raise ConfigurationError("AGENTLOOP_AUTH_MODE=jwt needs AGENTLOOP_JWT_ISSUER")
        logger.info("jwt auth: tokens of %s", settings.jwt.issuer)
        return jwt_bearer(JwtVerifier(settings.jwt))
    if settings.auth_mode == "iam":
        return iam_caller
    logger.warning("AGENTLOOP_AUTH_MODE=none: anyone who can reach this URL can use it")
    return allow_anyone


def service_of(request: Request) -> ChatService:
    """The app's service (``create_app``'s, or the one its lifespan built)."""
    service: ChatService = request.app.state.service
    return service
