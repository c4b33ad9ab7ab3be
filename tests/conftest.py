"""Fixtures shared by every test: the scripted model server and the provider choice."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

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

# Modules whose tests must not run at the same time as each other under pytest-xdist: they go
# to one worker as one unit. The sandbox's: the jailed drivers' uid 993 is "the driver's alone",
# and the process limit counts every task of a uid. make's: `make dev` and `make invoke`
# (re)install .venv when its stamp is older than pyproject.toml, and two at once break it.
_TOGETHER = {
    "sandbox": ("test_sandbox_", "test_execute_code_tool"),
    "make": ("test_default_model", "test_invoke", "test_cli"),
}


def _unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its module's group, or the test alone."""
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    for unit, prefixes in _TOGETHER.items():
        if module.startswith(prefixes):
            return unit
    return nodeid


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist (the dev extra); unused without
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist load``, but each of the groups above is one unit of work. (xdist's own
    ``xdist_group`` marks do nothing under pytest 9: xdist renames the nodeid through a
    private attribute pytest no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class Together(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return _unit_of(nodeid)

    return Together(config, log)


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
