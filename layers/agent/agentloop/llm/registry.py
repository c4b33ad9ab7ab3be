"""``provider:model`` strings to ready models, with one SDK client per process.

SDKs are imported the first time their provider is used, so a Groq-only deployment
never pays OpenAI's import time. Clients are cached per event loop: an HTTP client's
connection pool belongs to the loop it was created on (one loop for a Lambda's life,
but one per ``asyncio.run`` in tests and scripts).

Which providers have a key also decides the default model when ``AGENTLOOP_DEFAULT_MODEL``
is not set (:func:`default_model_for`), what ``GET /v1/models`` lists (:func:`listed_models`)
and the start-up line that says so (:func:`describe_models`): someone with only an OpenAI
key gets answers without choosing a model.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import logging
import os
import weakref
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from agentloop.config import DEFAULT_MODEL_ENV, ConfigurationError
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
    default_model: str
    """What answers when this provider is the one chosen for the default model."""
    listed_models: tuple[str, ...]
    """What ``GET /v1/models`` offers for ``provider:*`` (any other model can still be named)."""

    @property
    def default_spec(self) -> str:
        return f"{self.name}:{self.default_model}"


PROVIDERS: dict[str, Provider] = {
    "groq": Provider(
        "groq",
        "groq",
        "AsyncGroq",
        "GROQ_API_KEY",
        "GROQ_BASE_URL",
        asks_for_usage=False,
        default_model="llama-3.3-70b-versatile",
        listed_models=("llama-3.3-70b-versatile", "openai/gpt-oss-120b", "llama-3.1-8b-instant"),
    ),
    "openai": Provider(
        "openai",
        "openai",
        "AsyncOpenAI",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        asks_for_usage=True,
        default_model="gpt-4o-mini",
        listed_models=("gpt-4o-mini", "gpt-4.1-mini", "gpt-4.1", "gpt-4o"),
    ),
}
"""In the order of preference for the default model: Groq first (fast, cheap), then OpenAI."""

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


def model_allowed(spec: str, allowed: Collection[str] | None) -> bool:
    """Whether ``AGENTLOOP_ALLOWED_MODELS`` (None: everything) lets a request use ``spec``."""
    provider_name = spec.partition(":")[0]
    return allowed is None or spec in allowed or f"{provider_name}:*" in allowed


def providers_with_keys(environ: Mapping[str, str] | None = None) -> list[str]:
    """The providers whose key is set (names only, never values), in order of preference."""
    env = os.environ if environ is None else environ
    return [p.name for p in PROVIDERS.values() if env.get(p.key_env)]


def default_model_for(
    environ: Mapping[str, str] | None = None, allowed: Collection[str] | None = None
) -> str:
    """The default model when ``AGENTLOOP_DEFAULT_MODEL`` is not set: for the first provider
    (Groq, then OpenAI) that has a key, its default model, or the first model of it that
    ``allowed`` names when the allow-list leaves its default out.

    With no such key, the first allowed provider's all the same: its runs then end with an
    error naming the key to set, which tells a newcomer more than an empty choice.
    """
    keyed = providers_with_keys(environ)
    candidates = [
        (provider.name, spec)
        for provider in PROVIDERS.values()
        if (spec := _allowed_model_of(provider, allowed)) is not None
    ]
    usable = [spec for name, spec in candidates if name in keyed]
    fallback = [spec for _, spec in candidates] or [next(iter(PROVIDERS.values())).default_spec]
    return (usable or fallback)[0]


def _allowed_model_of(provider: Provider, allowed: Collection[str] | None) -> str | None:
    if model_allowed(provider.default_spec, allowed):
        return provider.default_spec
    for entry in allowed or ():
        name, _, model = entry.partition(":")
        if name == provider.name and model and "*" not in model:
            return entry
    return None


def listed_models(
    default_model: str, allowed: Collection[str] | None, keyed: Collection[str]
) -> list[str]:
    """What ``GET /v1/models`` offers: the default first, then the allowed models whose
    provider has a key (``provider:*`` and no allow-list: that provider's listed models).

    The default is listed even when its provider has no key: a picker with nothing in it is
    a dead end, while the default's runs say which key to set.
    """
    entries = [f"{name}:*" for name in PROVIDERS] if allowed is None else allowed
    names = [default_model]
    for entry in entries:
        provider_name, _, model = entry.partition(":")
        provider = PROVIDERS.get(provider_name)
        if provider is None or provider_name not in keyed or not model:
            continue
        if model == "*":
            names.extend(f"{provider_name}:{listed}" for listed in provider.listed_models)
        elif "*" not in model:  # the allow-list knows no other patterns
            names.append(entry)
    return list(dict.fromkeys(names))


def describe_models(
    default_model: str, environ: Mapping[str, str] | None = None
) -> tuple[int, str]:
    """The start-up log line (and its level): which model answers a request that names none,
    why, and which providers have a key. Names only: a key's value never appears."""
    env = os.environ if environ is None else environ
    keyed = providers_with_keys(env)
    how = (
        f"set by {DEFAULT_MODEL_ENV}"
        if env.get(DEFAULT_MODEL_ENV)
        else f"chosen from the keys set; {DEFAULT_MODEL_ENV} picks another"
    )
    if not keyed:
        variables = " or ".join(p.key_env for p in PROVIDERS.values())
        return logging.WARNING, (
            f"no provider key is set: set {variables}; until then every run ends with an "
            f"error (the default model is {default_model}: {how})"
        )
    with_keys = f"providers with keys: {', '.join(keyed)}"
    try:
        provider, _ = parse_model_spec(default_model)
    except ConfigurationError as exc:
        return logging.WARNING, f"the default model is unusable ({how}): {exc}; {with_keys}"
    if provider.name not in keyed:
        return logging.WARNING, (
            f"model {default_model} answers ({how}), but {provider.key_env} is not set: "
            f"requests that name no other model end with an error; {with_keys}"
        )
    return logging.INFO, f"model {default_model} answers ({how}); {with_keys}"


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
