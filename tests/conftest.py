"""Fixtures shared by every test: the scripted model server and the provider choice."""

from __future__ import annotations

import pytest

from agentloop.llm.resilient import RATE_LIMITS
from tests.fakes.scripted_llm import ScriptedLLM

pytest_plugins = ["tests.fakes.pytest_plugin"]

MODELS = {
    "groq": "groq:llama-3.3-70b-versatile",
    "openai": "openai:gpt-4o-mini",
}


@pytest.fixture(params=sorted(MODELS))
def model(request: pytest.FixtureRequest, provider_env: ScriptedLLM) -> str:
    """A model spec per provider: each test using it runs through both real SDKs."""
    return MODELS[request.param]


@pytest.fixture
def llm(provider_env: ScriptedLLM) -> ScriptedLLM:
    """The scripted server, reset, with both SDKs pointed at it."""
    provider_env.reset()
    return provider_env


@pytest.fixture(autouse=True)
def _forget_rate_limits() -> None:
    """Rate-limit memory is process-wide by design; each test starts without any."""
    RATE_LIMITS.clear()
