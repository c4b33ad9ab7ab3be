"""Pytest fixtures around :class:`~tests.fakes.scripted_llm.ScriptedLLM`.

Registered from ``tests/conftest.py`` with ``pytest_plugins = ["tests.fakes.pytest_plugin"]``.
One server serves the whole session (starting uvicorn per test would cost time for nothing);
each test that uses ``llm`` gets it with an empty script and no recorded requests.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.scripted_llm import ScriptedLLM

TEST_OPENAI_KEY = "test-openai-key"
TEST_GROQ_KEY = "test-groq-key"

# Variables the SDKs read that would make a developer's shell leak into the tests.
_LEAKY_ENV = (
    "OPENAI_ADMIN_KEY",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "OPENAI_CUSTOM_HEADERS",
    "GROQ_CUSTOM_HEADERS",
)


@pytest.fixture(scope="session")
def llm_server() -> Iterator[ScriptedLLM]:
    """The session's scripted server, started once."""
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def llm(llm_server: ScriptedLLM) -> Iterator[ScriptedLLM]:
    """The scripted server with a clean script, responder and request log."""
    llm_server.reset()
    yield llm_server
    llm_server.reset()


@pytest.fixture
def provider_env(monkeypatch: pytest.MonkeyPatch, llm_server: ScriptedLLM) -> ScriptedLLM:
    """Point both SDKs (and so the library) at the scripted server through the environment."""
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.openai_base_url)
    monkeypatch.setenv("GROQ_BASE_URL", llm_server.groq_base_url)
    monkeypatch.setenv("OPENAI_API_KEY", TEST_OPENAI_KEY)
    monkeypatch.setenv("GROQ_API_KEY", TEST_GROQ_KEY)
    for name in _LEAKY_ENV:
        monkeypatch.delenv(name, raising=False)
    return llm_server
