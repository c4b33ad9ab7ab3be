"""Pytest fixtures around :class:`~tests.fakes.scripted_llm.ScriptedLLM`.

Registered from ``tests/conftest.py`` with ``pytest_plugins = ["tests.fakes.pytest_plugin"]``.
One server serves the whole session (starting uvicorn per test would cost time for nothing);
each test that uses ``llm`` gets it with an empty script and no recorded requests.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

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


def point_sdks_at(env: pytest.MonkeyPatch, server: ScriptedLLM) -> None:
    """Point both SDKs (and so the library) at ``server`` through the environment."""
    env.setenv("OPENAI_BASE_URL", server.openai_base_url)
    env.setenv("GROQ_BASE_URL", server.groq_base_url)
    env.setenv("OPENAI_API_KEY", TEST_OPENAI_KEY)
    env.setenv("GROQ_API_KEY", TEST_GROQ_KEY)
    for name in _LEAKY_ENV:
        env.delenv(name, raising=False)


@pytest.fixture
def provider_env(monkeypatch: pytest.MonkeyPatch, llm_server: ScriptedLLM) -> ScriptedLLM:
    """Point both SDKs (and so the library) at the scripted server through the environment."""
    point_sdks_at(monkeypatch, llm_server)
    return llm_server


@contextmanager
def provider_env_for_module(server: ScriptedLLM) -> Iterator[ScriptedLLM]:
    """``provider_env`` for a module-scoped fixture (one served app for many tests): the
    environment pointed at ``server`` until the block ends, ``server`` reset before and after."""
    with pytest.MonkeyPatch.context() as env:
        point_sdks_at(env, server)
        server.reset()
        try:
            yield server
        finally:
            server.reset()
