"""Fixtures more than one integration module uses (``tests/conftest.py`` has the suite's)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.fakes.lambda_api import SANDBOX_FUNCTION, FakeLambda


@pytest.fixture(scope="module")
def fake_lambda() -> Iterator[FakeLambda]:
    """The loopback fake of the Lambda Invoke API, one per module."""
    with FakeLambda() as server:
        yield server


@pytest.fixture
def lambda_api(fake_lambda: FakeLambda, monkeypatch: pytest.MonkeyPatch) -> FakeLambda:
    """The fake with the real sandbox handler registered, and boto3 given dummy credentials."""
    import sandbox_handler  # the sandbox function's own code (functions/sandbox)

    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    fake_lambda.functions.clear()
    fake_lambda.invocations.clear()
    fake_lambda.throttle = False
    fake_lambda.register(SANDBOX_FUNCTION, sandbox_handler.handler, timeout_s=60)
    return fake_lambda
