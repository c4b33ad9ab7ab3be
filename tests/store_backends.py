"""The store's backends as the tests run them: SQLite on a temporary file, DynamoDB through
boto3 against moto's server on loopback, its table made as ``template.yaml`` defines it."""

from __future__ import annotations

import functools
import socket
import uuid
import warnings
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentloop.store import Store, open_store
from tests.cloudformation import load_template

START = 1_800_000_000.0


class Clock:
    """The stores' clock, moved by the tests (expiry without waiting)."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def free_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@functools.cache
def _boto3_session() -> Any:
    """One boto3 session for the tests' own clients: a new session loads the service's model
    again (~140 ms a client); clients of one session share it (a fraction of that)."""
    import boto3  # type: ignore[import-untyped, unused-ignore]

    return boto3.session.Session()


@dataclass
class Moto:
    endpoint: str

    def client(self) -> Any:
        return _boto3_session().client("dynamodb", endpoint_url=self.endpoint)

    def create_table(self) -> str:
        """A fresh table with the template's keys, billing and TTL (one per test)."""
        table = load_template()["Resources"]["AgentStoreTable"]["Properties"]
        name = f"store-{uuid.uuid4().hex[:12]}"
        client = self.client()
        client.create_table(
            TableName=name,
            AttributeDefinitions=table["AttributeDefinitions"],
            KeySchema=table["KeySchema"],
            BillingMode=table["BillingMode"],
        )
        client.update_time_to_live(
            TableName=name, TimeToLiveSpecification=table["TimeToLiveSpecification"]
        )
        return name


def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dummy credentials in one region; nothing from the developer's own AWS settings."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


@pytest.fixture(scope="module")
def moto_server() -> Iterator[Moto]:
    with warnings.catch_warnings():  # "install moto[server]": its flask is what it needs
        warnings.simplefilter("ignore", UserWarning)
        from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield Moto(f"http://{host}:{port}")
    server.stop()


def sqlite_store(path: Path, clock: Clock) -> Store:
    return open_store(f"sqlite:///{path}", clock=clock)


def dynamodb_store(moto: Moto, table: str, clock: Clock) -> Store:
    return open_store(f"dynamodb://{table}", clock=clock, endpoint_url=moto.endpoint)


BACKENDS = ["sqlite", "dynamodb"]


def backend_store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> Store:
    """A store on the backend a parametrized fixture names (``request.param``): SQLite in
    ``tmp_path``, or DynamoDB in a new table on the serialized moto server (the test module
    imports ``tests.serial_moto.serial_moto``): moto's own transactions are not atomic under
    concurrency, DynamoDB orders conflicting ones, so the tests check the store, not moto."""
    if request.param == "sqlite":
        return sqlite_store(tmp_path / "store.db", clock)
    aws_env(monkeypatch)
    moto: Moto = request.getfixturevalue("serial_moto")
    return dynamodb_store(moto, moto.create_table(), clock)


class CallCounter:
    """DynamoDB API calls a store's client makes, by operation (botocore's before-call
    event: one per API call, however often botocore retried it)."""

    def __init__(self, store: Store) -> None:
        self.calls: Counter[str] = Counter()
        client = store.backend.client  # type: ignore[attr-defined]
        client.meta.events.register("before-call.dynamodb", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1

    def take(self) -> dict[str, int]:
        """The calls since the last take."""
        counted, self.calls = dict(self.calls), Counter()
        return counted


def store_fixtures() -> tuple[Any, Any]:
    """The ``clock`` and ``store`` fixtures of a module that tests on both backends: assign
    them in the module (``clock, store = store_fixtures()``); it imports ``serial_moto`` too.
    ``store`` is a fresh store on each backend, closed after the test."""

    @pytest.fixture
    def clock() -> Clock:
        return Clock()

    @pytest.fixture(params=BACKENDS)
    async def store(
        request: pytest.FixtureRequest,
        tmp_path: Path,
        clock: Clock,
        monkeypatch: pytest.MonkeyPatch,
    ) -> AsyncIterator[Store]:
        opened = backend_store(request, tmp_path, clock, monkeypatch)
        yield opened
        await opened.close()

    return clock, store
