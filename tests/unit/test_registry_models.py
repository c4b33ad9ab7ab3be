"""``provider:model`` parsing, API key checks, per-loop client sharing and lazy SDK imports."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import groq
import openai
import pytest

from agentloop.config import ConfigurationError
from agentloop.llm.openai_compat import OpenAICompatibleModel
from agentloop.llm.registry import PROVIDERS, get_model, parse_model_spec

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake keys for both providers; no request is ever sent."""
    monkeypatch.setenv("GROQ_API_KEY", "gsk-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("GROQ_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def model_of(spec: str) -> OpenAICompatibleModel:
    model = get_model(spec)
    assert isinstance(model, OpenAICompatibleModel)
    return model


# --- parse_model_spec --------------------------------------------------------------------------


def test_parse_model_spec_splits_provider_and_model() -> None:
    provider, model = parse_model_spec("groq:llama-3.3-70b-versatile")

    assert provider is PROVIDERS["groq"]
    assert model == "llama-3.3-70b-versatile"


def test_parse_model_spec_keeps_colons_in_the_model_name() -> None:
    provider, model = parse_model_spec("openai:ft:gpt-4o-mini:acme::abc123")

    assert provider is PROVIDERS["openai"]
    assert model == "ft:gpt-4o-mini:acme::abc123"


@pytest.mark.parametrize("spec", ["llama-3.3-70b-versatile", "", ":", "groq:", ":gpt-4o"])
def test_parse_model_spec_rejects_a_malformed_spec(spec: str) -> None:
    with pytest.raises(ConfigurationError, match="is not of the form 'provider:model'"):
        parse_model_spec(spec)


def test_parse_model_spec_names_the_known_providers() -> None:
    with pytest.raises(
        ConfigurationError, match=r"unknown provider 'azure' \(known: groq, openai\)"
    ):
        parse_model_spec("azure:gpt-4o")


def test_provider_names_are_case_sensitive() -> None:
    with pytest.raises(ConfigurationError, match="unknown provider 'Groq'"):
        parse_model_spec("Groq:llama-3.3-70b-versatile")


# --- get_model ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "key_env"), [("groq:x", "GROQ_API_KEY"), ("openai:x", "OPENAI_API_KEY")]
)
async def test_get_model_without_a_key_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, spec: str, key_env: str
) -> None:
    monkeypatch.delenv(key_env, raising=False)

    with pytest.raises(ConfigurationError, match=f"{key_env} is not set"):
        get_model(spec)


async def test_get_model_with_an_empty_key_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GROQ_API_KEY", "")

    with pytest.raises(ConfigurationError, match="GROQ_API_KEY"):
        get_model("groq:llama-3.3-70b-versatile")


@pytest.mark.usefixtures("keys")
async def test_get_model_builds_an_sdk_backed_model() -> None:
    groq_model = model_of("groq:llama-3.3-70b-versatile")
    openai_model = model_of("openai:gpt-4o-mini")

    assert groq_model.spec == "groq:llama-3.3-70b-versatile"
    assert groq_model.model == "llama-3.3-70b-versatile"
    assert isinstance(groq_model._client, groq.AsyncGroq)
    assert isinstance(openai_model._client, openai.AsyncOpenAI)
    assert groq_model._client.max_retries == 0, "retries are the loop's job"
    assert openai_model._client.max_retries == 0


@pytest.mark.usefixtures("keys")
async def test_models_of_one_provider_share_one_client_per_loop() -> None:
    first = model_of("groq:llama-3.3-70b-versatile")
    second = model_of("groq:llama-3.1-8b-instant")
    gpt = model_of("openai:gpt-4o-mini")
    gpt_again = model_of("openai:gpt-4o")

    assert first._client is second._client
    assert gpt._client is gpt_again._client
    assert first._client is not gpt._client


async def test_a_different_key_gets_its_own_client(
    keys: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = model_of("groq:llama-3.3-70b-versatile")
    monkeypatch.setenv("GROQ_API_KEY", "gsk-other")
    second = model_of("groq:llama-3.3-70b-versatile")

    assert first._client is not second._client


@pytest.mark.usefixtures("keys")
def test_each_event_loop_gets_its_own_client() -> None:
    async def client() -> Any:
        return model_of("groq:llama-3.3-70b-versatile")._client

    first = asyncio.run(client())
    second = asyncio.run(client())

    assert first is not second


def test_sdks_are_imported_lazily() -> None:
    code = "import agentloop.chat, sys; print('openai' in sys.modules, 'groq' in sys.modules)"

    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )

    assert done.stdout.strip() == "False False"
