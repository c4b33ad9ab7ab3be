"""``provider:model`` strings to ready models, with one SDK client per process.

SDKs are imported the first time their provider is used, so a Groq-only deployment
never pays OpenAI's import time. Clients are cached per event loop: an HTTP client's
connection pool belongs to the loop it was created on (one loop for a Lambda's life,
but one per ``asyncio.run`` in tests and scripts).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import os
import weakref
from dataclasses import dataclass
from typing import Any

from agentloop.config import ConfigurationError
from agentloop.llm.base import ChatModel
from agentloop.llm.openai_compat import OpenAICompatibleModel


@dataclass(frozen=True)
class Provider:
    name: str
    module: str
    client_class: str
    key_env: str
    base_url_env: str
    asks_for_usage: bool  # needs stream_options.include_usage to report usage when streaming


PROVIDERS: dict[str, Provider] = {
    "groq": Provider("groq", "groq", "AsyncGroq", "GROQ_API_KEY", "GROQ_BASE_URL", False),
    "openai": Provider(
        "openai", "openai", "AsyncOpenAI", "OPENAI_API_KEY", "OPENAI_BASE_URL", True
    ),
}

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, ...], Any]] = (
    weakref.WeakKeyDictionary()
)


def parse_model_spec(spec: str) -> tuple[Provider, str]:
    """Split ``provider:model``; raise :class:`ConfigurationError` naming what is wrong."""
    provider_name, sep, model = spec.partition(":")
    if not sep or not provider_name or not model:
        raise ConfigurationError(
            f"model {spec!r} is not of the form 'provider:model' "
            f"(for example 'groq:llama-3.3-70b-versatile')"
        )
    provider = PROVIDERS.get(provider_name)
    if provider is None:
        known = ", ".join(sorted(PROVIDERS))
        raise ConfigurationError(f"unknown provider {provider_name!r} (known: {known})")
    return provider, model


def get_model(spec: str) -> ChatModel:
    """A model for ``spec``, on this event loop's cached client for its provider."""
    provider, model = parse_model_spec(spec)
    api_key = os.environ.get(provider.key_env, "")
    if not api_key:
        raise ConfigurationError(
            f"{provider.key_env} is not set: set it to use '{spec}', or choose another provider"
        )
    sdk = importlib.import_module(provider.module)
    client = _client_for(provider, sdk, api_key)
    return OpenAICompatibleModel(
        provider=provider.name,
        model=model,
        client=client,
        sdk=sdk,
        key_env=provider.key_env,
        asks_for_usage=provider.asks_for_usage,
    )


def _client_for(provider: Provider, sdk: Any, api_key: str) -> Any:
    loop = asyncio.get_running_loop()
    base_url = os.environ.get(provider.base_url_env, "")
    key_digest = hashlib.sha256(api_key.encode()).hexdigest()[:16]
    cache_key = (provider.name, base_url, key_digest)
    per_loop = _clients.setdefault(loop, {})
    client = per_loop.get(cache_key)
    if client is None:
        # Retries are the loop's job (it knows the deadline); the SDK must not add its own.
        client = getattr(sdk, provider.client_class)(api_key=api_key, max_retries=0)
        per_loop[cache_key] = client
    return client
