"""What each backend does beyond the contract: failing closed when it cannot be used, the
DynamoDB calls each operation makes (the limits' budget of store calls per request), the
IAM actions the template grants against the ones made, and imports kept lazy."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from agentloop.store import Add, Delete, Put, Record, Store, StoreUnavailable, open_store
from agentloop.store.http import store_http_error
from tests.cloudformation import load_template
from tests.helpers import ROOT
from tests.store_backends import (
    CallCounter,
    Clock,
    Moto,
    aws_env,
    dynamodb_store,
    free_port,
    moto_server,  # noqa: F401 (a fixture)
    sqlite_store,
)

Operation = Callable[[Store], Awaitable[object]]
OPERATIONS: dict[str, Operation] = {
    "check": lambda s: s.check(),
    "get": lambda s: s.get("p", "s"),
    "put": lambda s: s.put("p", "s", {"x": 1}),
    "put_if_absent": lambda s: s.put("p", "s", {"x": 1}, if_absent=True),
    "delete": lambda s: s.delete("p", "s"),
    "query": lambda s: s.query("p"),
    "delete_partition": lambda s: s.delete_partition("p"),
    "add": lambda s: s.add("p", "s", {"n": 1}, limits={"n": 5}),
    "add_many": lambda s: s.add_many([Add("p", "a", {"n": 1}, {"n": 5}), Add("p", "b", {"n": 1})]),
}


async def assert_fails_closed(store: Store) -> None:
    """Every operation raises StoreUnavailable: none passes as if nothing were stored."""
    for name, operation in OPERATIONS.items():
        with pytest.raises(StoreUnavailable) as failed:
            await operation(store)
        assert str(failed.value) == "the store is unavailable", name
        assert failed.value.detail, name


# -- failing closed -------------------------------------------------------------------------


def unusable_sqlite_paths(tmp_path: Path) -> dict[str, Path]:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    folder = tmp_path / "a-folder.db"
    folder.mkdir()
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a SQLite database, just text" * 200)
    return {
        "parent is a file": blocker / "store.db",
        "path is a folder": folder,
        "not a database": garbage,
    }


async def test_sqlite_that_cannot_be_used_fails_closed(tmp_path: Path) -> None:
    for path in unusable_sqlite_paths(tmp_path).values():
        store = sqlite_store(path, Clock())
        await assert_fails_closed(store)
        await store.close()


async def test_sqlite_closed_fails_closed(tmp_path: Path) -> None:
    store = sqlite_store(tmp_path / "store.db", Clock())
    await store.put("p", "s", {})
    await store.close()
    for operation in OPERATIONS.values():
        with pytest.raises(StoreUnavailable):
            await operation(store)


async def test_dynamodb_on_a_closed_port_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    aws_env(monkeypatch)
    store = open_store("dynamodb://agentloop-store", endpoint_url=f"http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    await assert_fails_closed(store)
    elapsed = time.monotonic() - started
    assert elapsed < 60, f"{len(OPERATIONS)} refused operations took {elapsed:.1f} s"
    await store.close()


async def test_dynamodb_without_its_table_fails_closed(
    moto_server: Moto,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    aws_env(monkeypatch)
    store = dynamodb_store(moto_server, "no-such-table", Clock())
    await assert_fails_closed(store)
    await store.close()


def test_an_unavailable_store_is_a_503_that_keeps_its_detail_out() -> None:
    error = store_http_error(
        StoreUnavailable("the store is unavailable", "dynamodb arn:aws:...:table/x AccessDenied")
    )
    assert error.status == 503
    assert error.headers["Retry-After"] == "5"
    assert error.body()["error"]["type"] == "store_unavailable"
    assert "arn" not in str(error.body())


# -- DynamoDB calls per operation -------------------------------------------------------------


@pytest.fixture
async def counted(
    moto_server: Moto,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[tuple[Store, CallCounter, Clock]]:
    aws_env(monkeypatch)
    clock = Clock()
    store = dynamodb_store(moto_server, moto_server.create_table(), clock)
    yield store, CallCounter(store), clock
    await store.close()


# What the store calls (a transaction is authorized by its parts: PutItem, UpdateItem,
# DeleteItem): test_dynamodb_calls_per_operation makes each, the template must grant these.
STORE_ACTIONS = {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "BatchWriteItem"}


async def test_dynamodb_calls_per_operation(counted: tuple[Store, CallCounter, Clock]) -> None:
    """One request per operation, except an add on an expired item (2) and a partition's
    delete (a query per 1 MB of keys, a batch per 25 items)."""
    store, counter, clock = counted
    seen: set[str] = set()
    expected: list[tuple[str, Operation, dict[str, int]]] = [
        ("get", lambda s: s.get("u", "x"), {"GetItem": 1}),
        ("put", _hold, {"PutItem": 1}),
        ("put, condition failed", _failing_put, {"PutItem": 1}),
        ("add", lambda s: s.add("u", "day", {"usd": 5}, limits={"usd": 100}), {"UpdateItem": 1}),
        ("add, over its limit", _failing_add, {"UpdateItem": 1}),
        ("add_many (day + month)", _reserve, {"TransactWriteItems": 1}),
        ("transact (settle)", _settle, {"TransactWriteItems": 1}),
        ("query (one page)", lambda s: s.query("u"), {"Query": 1}),
        ("delete", lambda s: s.delete("u", "day"), {"DeleteItem": 1}),
        ("check", lambda s: s.check(), {"GetItem": 1}),
    ]
    for name, operation, calls in expected:
        await operation(store)
        assert counter.take() == calls, name
        seen |= set(calls)
    await store.add("u", "minute", {"n": 1}, expires_at=int(clock.now) + 60)
    clock.now += 60
    counter.take()
    await store.add("u", "minute", {"n": 1})
    assert counter.take() == {"UpdateItem": 1, "PutItem": 1}, "add on an expired item"
    for i in range(30):
        await store.put("t", f"m{i:02d}", {})
    counter.take()
    assert await store.delete_partition("t") == 30
    assert counter.take() == {"Query": 1, "BatchWriteItem": 2}, "delete_partition of 30"
    seen |= {"BatchWriteItem"}
    assert seen - {"TransactWriteItems"} == STORE_ACTIONS


async def _failing_put(store: Store) -> None:
    with pytest.raises(Exception, match="conflict"):
        await store.put("u", "resv#1", {"usd": 5}, if_absent=True)


async def _failing_add(store: Store) -> None:
    with pytest.raises(Exception, match="limit"):
        await store.add("u", "day", {"usd": 500}, limits={"usd": 100})


async def _reserve(store: Store) -> None:
    await store.add_many(
        [Add("u", "d", {"usd": 5}, {"usd": 100}), Add("u", "m", {"usd": 5}, {"usd": 900})]
    )


HELD: list[Record] = []


async def _hold(store: Store) -> None:
    HELD.append(await store.put("u", "resv#1", {"usd": 5}))


async def _settle(store: Store) -> None:
    [record] = HELD
    await store.transact(
        [
            Add("u", "d", {"usd": -2}),
            Add("u", "m", {"usd": -2}),
            Delete("u", "resv#1", if_version=record.version),
            Put("u", "log#1", {"spent": 3}),
        ]
    )


def test_the_template_grants_the_calls_the_store_makes() -> None:
    """The IAM actions on the store's table are exactly what the store calls (a transaction
    is authorized by its parts: PutItem, UpdateItem, DeleteItem)."""
    made = {f"dynamodb:{name}" for name in STORE_ACTIONS}
    template = load_template()
    for function in ("ChatFunction", "ResearchWorkerFunction"):
        resource = template["Resources"][function]["Properties"]
        env = resource["Environment"]["Variables"]
        assert env["AGENTLOOP_STORE"] == {"Fn::Sub": "dynamodb://${AgentStoreTable}"}
        granted = _actions_on(resource["Policies"], {"Fn::GetAtt": ["AgentStoreTable", "Arn"]})
        assert granted == made, function
    planner = template["Resources"]["ResearchPlannerFunction"]["Properties"]
    assert "AGENTLOOP_STORE" not in planner["Environment"]["Variables"]


def _actions_on(policies: list[Any], resource: object) -> set[str]:
    actions: set[str] = set()
    for policy in policies:
        for statement in policy.get("Statement", []) if isinstance(policy, dict) else []:
            if statement["Resource"] == resource:
                listed = statement["Action"]
                actions |= {listed} if isinstance(listed, str) else set(listed)
            else:
                assert "dynamodb:Query" not in str(statement.get("Action")), statement
    return actions


# -- imports --------------------------------------------------------------------------------


def test_opening_a_store_imports_no_backend_library() -> None:
    code = (
        "import sys, agentloop.store as s\n"
        "s.open_store('dynamodb://agentloop-store')\n"
        "bad = {'boto3', 'botocore', 'sqlite3'} & set(sys.modules)\n"
        "assert not bad, bad\n"
        "s.open_store('sqlite:///x.db')\n"
        "assert 'sqlite3' in sys.modules and 'boto3' not in sys.modules\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
