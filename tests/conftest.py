"""Fixtures shared by every test: the scripted model server and the provider choice."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from agentloop.llm.resilient import RATE_LIMITS
from tests.fakes.scripted_llm import ScriptedLLM

pytest_plugins = ["tests.fakes.pytest_plugin"]

# Property tests explore new inputs on every local run (and have found real bugs that way);
# CI runs a fixed set, so a submission's result does not depend on the draw.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

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


@pytest.fixture(autouse=True)
def _own_store(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each test's app keeps what it stores (threads, stored responses) in a store of its
    own, never in the working directory's default one (a test that wants another sets it)."""
    folder = tmp_path_factory.mktemp("store")
    monkeypatch.setenv("AGENTLOOP_STORE", f"sqlite:///{folder}/store.db")
    monkeypatch.setenv("AGENTLOOP_FILES_DIR", str(folder / "files"))


@pytest.fixture
def mocked_aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto behind boto3, dummy credentials in one region, and no Powertools cache kept
    across tests (``clear_caches`` also drops its boto3 clients, so the next read makes
    one inside this test's mock)."""
    from aws_lambda_powertools.utilities import parameters
    from moto import mock_aws

    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    parameters.clear_caches()
    with mock_aws():
        yield
    parameters.clear_caches()
