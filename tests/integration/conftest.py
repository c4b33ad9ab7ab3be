"""Fixtures more than one integration module uses (``tests/conftest.py`` has the suite's)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator

import pytest

from tests.fakes.lambda_api import SANDBOX_FUNCTION, FakeLambda
from tests.fakes.scripted_llm import ScriptedLLM
from tests.jwks_server import IssuerServer, SigningKey, VerifierClock, ec_key, rsa_key
from tests.research_aws import BUCKET, TABLE, Aws


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


@pytest.fixture
def aws(mocked_aws: None, monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLM) -> Iterator[Aws]:
    """The research functions' bucket, queue (with its dead-letter queue) and idempotency table
    on moto, named in their environment variables, and fresh handlers to use them."""
    import boto3

    import research_handlers

    for name, value in {
        "AGENTLOOP_DEADLINE_RESERVE_S": "0",
        "AGENTLOOP_FINAL_ANSWER_RESERVE": "0",
        "AGENTLOOP_RETRY_BASE_DELAY_S": "0.01",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AGENTLOOP_SECRET_ID", raising=False)
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    sqs = boto3.client("sqs")
    dlq = sqs.create_queue(QueueName="research-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])
    redrive = {"deadLetterTargetArn": dlq_arn["Attributes"]["QueueArn"], "maxReceiveCount": 3}
    queue_url = sqs.create_queue(
        QueueName="research-jobs", Attributes={"RedrivePolicy": json.dumps(redrive)}
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
    dynamodb = boto3.client("dynamodb")
    dynamodb.create_table(
        TableName=TABLE,
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    monkeypatch.setenv("AGENTLOOP_RESULTS_BUCKET", BUCKET)
    monkeypatch.setenv("AGENTLOOP_IDEMPOTENCY_TABLE", TABLE)
    monkeypatch.setenv("AGENTLOOP_RESEARCH_QUEUE_URL", queue_url)
    research_handlers.worker.cache_clear()  # a fresh worker on this test's moto clients
    research_handlers.registry.cache_clear()  # and the planner's check on this test's settings
    research_handlers.job_check.cache_clear()
    try:
        yield Aws(s3, sqs, dynamodb, queue_url, queue_arn["Attributes"]["QueueArn"])
    finally:
        if research_handlers.worker.cache_info().currsize:
            research_handlers.worker().close()
        research_handlers.worker.cache_clear()


# -- an OpenID Connect issuer on loopback (tests/jwks_server.py), for the JWT tests ----------


@pytest.fixture(scope="module")
def rsa() -> SigningKey:
    return rsa_key("rsa-1")


@pytest.fixture(scope="module")
def ecdsa() -> SigningKey:
    return ec_key("ec-1")


@pytest.fixture(scope="module")
def stranger() -> SigningKey:
    """A key the issuer never published (an attacker's)."""
    return rsa_key("attacker-1")


@pytest.fixture
def issuer(rsa: SigningKey, ecdsa: SigningKey) -> Iterator[IssuerServer]:
    """The issuer, publishing ``rsa`` and ``ecdsa``."""
    with IssuerServer([rsa, ecdsa]) as server:
        yield server


@pytest.fixture
def clock() -> VerifierClock:
    return VerifierClock()


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """configure_logging changes process-wide state; put it back after the test."""
    from agentloop.app_settings import RequestIdFilter

    root, ours = logging.getLogger(), logging.getLogger("agentloop")
    saved = (list(root.handlers), list(ours.handlers), ours.level, ours.propagate)
    yield
    for handler in [*root.handlers, *ours.handlers]:
        for found in [f for f in handler.filters if isinstance(f, RequestIdFilter)]:
            handler.removeFilter(found)
    root.handlers[:] = saved[0]
    ours.handlers, ours.level, ours.propagate = saved[1], saved[2], saved[3]
