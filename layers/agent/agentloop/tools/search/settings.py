"""Which search provider to use and how to reach it, read from the environment.

Keys are ``SecretStr`` so that a settings object can be printed or logged without
showing them. Every field has a default that works with no configuration at all
(DuckDuckGo, which needs no key).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from agentloop.config import ConfigurationError

ProviderName = Literal["tavily", "brave", "searxng", "duckduckgo"]
PROVIDER_NAMES: tuple[ProviderName, ...] = ("tavily", "brave", "searxng", "duckduckgo")

DEFAULT_USER_AGENT = "Mozilla/5.0 (compatible; agentloop/0.1; web search tool)"

ENV_VARS: dict[str, str] = {
    "provider": "AGENTLOOP_SEARCH_PROVIDER",
    "tavily_api_key": "TAVILY_API_KEY",
    "brave_api_key": "BRAVE_API_KEY",
    "searxng_url": "AGENTLOOP_SEARXNG_URL",
    "tavily_url": "AGENTLOOP_TAVILY_URL",
    "brave_url": "AGENTLOOP_BRAVE_URL",
    "duckduckgo_url": "AGENTLOOP_DUCKDUCKGO_URL",
    "max_results": "AGENTLOOP_SEARCH_MAX_RESULTS",
    "timeout_s": "AGENTLOOP_SEARCH_TIMEOUT_S",
    "snippet_max_chars": "AGENTLOOP_SEARCH_SNIPPET_MAX_CHARS",
}
"""Setting -> environment variable (the key names are the ones the project secret uses)."""


class SearchSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: ProviderName | None = Field(
        default=None, description="None: the first provider configured, else duckduckgo."
    )
    tavily_api_key: SecretStr | None = None
    brave_api_key: SecretStr | None = None
    searxng_url: str | None = Field(default=None, description="Base URL of a SearXNG instance.")
    tavily_url: str = "https://api.tavily.com"
    brave_url: str = "https://api.search.brave.com"
    duckduckgo_url: str = "https://html.duckduckgo.com"
    max_results: int = Field(default=10, ge=1, le=10, description="Cap on results per call.")
    timeout_s: float = Field(default=10.0, gt=0, le=120, description="Per search, in total.")
    snippet_max_chars: int = Field(default=400, ge=50, le=4_000)
    user_agent: str = DEFAULT_USER_AGENT

    @field_validator("provider", mode="before")
    @classmethod
    def _provider_name(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip().lower()
            return value or None
        return value

    @field_validator("tavily_api_key", "brave_api_key", mode="before")
    @classmethod
    def _blank_key_is_none(cls, value: Any) -> Any:
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if isinstance(value, str):
            return value.strip() or None
        return value

    @field_validator("searxng_url", mode="before")
    @classmethod
    def _blank_url_is_none(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            return None
        return value

    @field_validator("searxng_url", "tavily_url", "brave_url", "duckduckgo_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip().rstrip("/")
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http(s) URL such as https://search.example.org")
        return value

    def chosen_provider(self) -> ProviderName:
        """The explicit choice, else the first provider whose key or URL is configured."""
        if self.provider is not None:
            return self.provider
        if self.tavily_api_key is not None:
            return "tavily"
        if self.brave_api_key is not None:
            return "brave"
        if self.searxng_url is not None:
            return "searxng"
        return "duckduckgo"

    def secrets(self) -> tuple[str, ...]:
        """Every configured key (and a SearXNG password), so error text can be scrubbed."""
        keys = [
            k.get_secret_value() for k in (self.tavily_api_key, self.brave_api_key) if k is not None
        ]
        if self.searxng_url is not None:
            password = urlsplit(self.searxng_url).password
            if password:
                keys.append(unquote(password))
        return tuple(keys)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SearchSettings:
        """Build from the variables in :data:`ENV_VARS`; unset or empty ones keep the default."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field, variable in ENV_VARS.items():
            raw = env.get(variable)
            if raw is not None and raw.strip():
                values[field] = raw
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            # Built from the field and message only: pydantic's own text repeats the input,
            # which for a key would put the key in an error message.
            problems = "; ".join(
                f"{ENV_VARS.get(str(err['loc'][0]), str(err['loc'][0])) if err['loc'] else '?'}"
                f": {err['msg']}"
                for err in exc.errors()
            )
            raise ConfigurationError(f"invalid search setting: {problems}") from None
