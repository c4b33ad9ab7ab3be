"""The thread routes through the app on a loopback port, with two bearer tokens (two
principals), the threads on SQLite and on DynamoDB (moto's server, serialized), the clock
injected. Threads are made through ``ThreadStore`` (as a run would), then read, listed,
renamed and deleted over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from agentloop.auth import BearerAuth, hash_token
from agentloop.server.identity import api_keys
from agentloop.store import Store
from agentloop.threads import ThreadStore
from tests.serial_moto import serial_moto  # noqa: F401 (a fixture)
from tests.served import AUTH, TOKEN, ServedApp, make_service
from tests.store_backends import BACKENDS, START, Clock, backend_store, sqlite_store

OTHER = "al_other-token-456"
OTHER_AUTH = {"authorization": f"Bearer {OTHER}"}
HASHES = [hash_token(TOKEN), hash_token(OTHER)]
ADA = BearerAuth(lambda: HASHES).principal(AUTH["authorization"]).id
NOT_FOUND = {
    "error": {"message": "no such thread", "type": "not_found", "param": None, "code": 404}
}
T = TypeVar("T")


class Served(ServedApp):
    """The app answering two tokens, its threads on a given store."""

    def __init__(self, threads: ThreadStore | None) -> None:
        service = make_service()
        service.authenticate = api_keys(BearerAuth(lambda: HASHES))
        super().__init__(service, name="threads")
        if threads is not None:
            self.app.state.threads = threads  # type: ignore[attr-defined]

    def call(
        self, method: str, path: str, auth: dict[str, str] = AUTH, **kwargs: Any
    ) -> httpx.Response:
        with httpx.Client(base_url=self.url, timeout=20) as client:
            return client.request(
                method, path, headers={**auth, **kwargs.pop("headers", {})}, **kwargs
            )


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """A store call from the test's thread (the app runs on its own loop)."""
    return asyncio.run(coroutine)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=BACKENDS)
def store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> Store:
    return backend_store(request, tmp_path, clock, monkeypatch)


@pytest.fixture
def threads(store: Store, clock: Clock) -> ThreadStore:
    return ThreadStore(store, clock=clock)


@pytest.fixture
def served(threads: ThreadStore) -> Iterator[Served]:
    with Served(threads) as app:
        yield app


def seed(threads: ThreadStore, clock: Clock, count: int) -> list[str]:
    """``count`` threads of ADA, one a second, each with one exchange; their ids, oldest first."""

    async def make() -> list[str]:
        ids = []
        for i in range(count):
            clock.now = START + i
            made = await threads.create(ADA)
            turn = [{"role": "user", "content": f"question {i}"}]
            await threads.append(
                ADA, made.id, [*turn, {"role": "assistant", "content": "ok"}], key="r"
            )
            ids.append(made.id)
        return ids

    return run(make())


def listed(served: Served, auth: dict[str, str] = AUTH, limit: int = 2) -> list[str]:
    """Every thread id ``GET /threads`` gives, page after page."""
    found: list[str] = []
    params: dict[str, Any] = {"limit": limit}
    for _ in range(50):
        answer = served.call("GET", "/threads", auth, params=params)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        found += [t["id"] for t in body["data"]]
        if body["next_cursor"] is None:
            return found
        params["cursor"] = body["next_cursor"]
    raise AssertionError("the cursors never ended")


def test_list_read_rename_delete(served: Served, threads: ThreadStore, clock: Clock) -> None:
    ids = seed(threads, clock, 5)
    assert listed(served) == ids[::-1]
    first = served.call("GET", "/threads", params={"limit": 2}).json()
    assert first["object"] == "list"
    assert first["data"][0] == {
        "id": ids[4],
        "object": "thread",
        "title": "question 4",
        "created_at": START + 4,
        "updated_at": START + 4,
        "message_count": 2,
    }
    assert len(served.call("GET", "/threads").json()["data"]) == 5, "20 by default"

    one = served.call("GET", f"/threads/{ids[1]}")
    assert one.status_code == 200, one.text
    assert one.headers["cache-control"] == "no-store"
    assert one.json()["messages"] == [
        {"role": "user", "content": "question 1"},
        {"role": "assistant", "content": "ok"},
    ]
    renamed = served.call("PATCH", f"/threads/{ids[1]}", json={"title": " Trip "})
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["title"] == "Trip"
    assert served.call("GET", f"/threads/{ids[1]}").json()["title"] == "Trip"

    deleted = served.call("DELETE", f"/threads/{ids[1]}")
    assert deleted.json() == {"id": ids[1], "object": "thread.deleted", "deleted": True}
    for method in ("GET", "DELETE"):
        gone = served.call(method, f"/threads/{ids[1]}")
        assert (gone.status_code, gone.json()) == (404, NOT_FOUND)
    assert listed(served) == [ids[4], ids[3], ids[2], ids[0]]


def test_another_principals_thread_is_a_404_on_every_route(
    served: Served, threads: ThreadStore, clock: Clock
) -> None:
    [mine] = seed(threads, clock, 1)
    page = served.call("GET", "/threads", params={"limit": 1}).json()
    attempts = [
        ("GET", {}),
        ("PATCH", {"json": {"title": "mine now"}}),
        ("DELETE", {}),
    ]
    for method, kwargs in attempts:
        theirs = served.call(method, f"/threads/{mine}", OTHER_AUTH, **kwargs)
        missing = served.call(method, "/threads/th_" + "A" * 32, **kwargs)
        assert (theirs.status_code, theirs.json()) == (404, NOT_FOUND), method
        assert (missing.status_code, missing.text) == (404, theirs.text), method
    assert listed(served, OTHER_AUTH) == []
    assert page["next_cursor"] is None
    after = served.call("GET", f"/threads/{mine}").json()
    assert (after["title"], after["message_count"]) == ("question 0", 2), "untouched"


def test_a_cursor_is_bound_to_its_caller(
    served: Served, threads: ThreadStore, clock: Clock
) -> None:
    seed(threads, clock, 3)
    cursor = served.call("GET", "/threads", params={"limit": 1}).json()["next_cursor"]
    assert cursor is not None
    refused = served.call("GET", "/threads", OTHER_AUTH, params={"cursor": cursor})
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "cursor"


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_bad_requests_are_precise_4xx(served: Served, threads: ThreadStore, clock: Clock) -> None:
    [mine] = seed(threads, clock, 1)
    for limit in ("0", "101", "abc", "-1", "1.5", "9" * 5000, "\u0661"):
        answer = served.call("GET", "/threads", params={"limit": limit})
        assert answer.status_code == 400, limit
        assert answer.json()["error"]["param"] == "limit"
    for cursor in ("garbage", "x" * 5000, "eyJ9"):
        answer = served.call("GET", "/threads", params={"cursor": cursor})
        assert answer.status_code == 400, cursor
        assert answer.json()["error"]["param"] == "cursor"

    path = f"/threads/{mine}"
    bodies: list[tuple[dict[str, Any], int, str | None]] = [
        ({"content": b"{", "headers": {"content-type": "application/json"}}, 400, None),
        ({"content": b'{"title": "x"}', "headers": {"content-type": "text/plain"}}, 415, None),
        ({"json": ["title"]}, 400, None),
        ({"json": {}}, 400, "title"),
        ({"json": {"title": "x", "owner": "me"}}, 400, None),
        ({"json": {"title": 5}}, 400, "title"),
        ({"json": {"title": "  "}}, 400, "title"),
        ({"json": {"title": "x" * 201}}, 400, "title"),
        ({"json": {"title": "a\u0000b"}}, 400, "title"),
        ({"content": b"x" * 7_000_000, "headers": {"content-type": "application/json"}}, 413, None),
    ]
    for kwargs, status, param in bodies:
        answer = served.call("PATCH", path, **kwargs)
        assert answer.status_code == status, (kwargs, answer.text)
        assert answer.json()["error"]["param"] == param
    assert served.call("GET", path).json()["title"] == "question 0", "unchanged"

    assert served.call("GET", "/threads", {}).status_code == 401
    assert served.call("GET", path, {"authorization": "Bearer al_nobody"}).status_code == 401
    assert served.call("PATCH", path, {}, json={"title": "x"}).status_code == 401
    assert served.call("POST", path, json={}).status_code == 405
    assert served.call("DELETE", "/threads").status_code == 405
    for odd in ("a%23b", "a.b", "x" * 300, "%C3%A9"):
        answer = served.call("GET", f"/threads/{odd}")
        assert (answer.status_code, answer.json()) == (404, NOT_FOUND), odd


def test_a_store_that_is_down_is_a_503_on_every_route(tmp_path: Path, clock: Clock) -> None:
    (tmp_path / "file").write_text("not a directory")
    down = ThreadStore(sqlite_store(tmp_path / "file" / "store.db", clock), clock=clock)
    requests: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", "/threads", {}),
        ("GET", "/threads/th_x", {}),
        ("PATCH", "/threads/th_x", {"json": {"title": "x"}}),
        ("DELETE", "/threads/th_x", {}),
    ]
    with Served(down) as served:
        for method, path, kwargs in requests:
            answer = served.call(method, path, **kwargs)
            assert answer.status_code == 503, (method, path, answer.text)
            assert answer.json()["error"]["type"] == "store_unavailable"
            assert answer.headers["retry-after"]


def test_the_store_and_retention_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTLOOP_STORE", f"sqlite:///{tmp_path / 'store.db'}")
    monkeypatch.setenv("AGENTLOOP_THREAD_TTL_DAYS", "7")
    with Served(None) as served:
        assert served.call("GET", "/threads").json() == {
            "object": "list",
            "data": [],
            "next_cursor": None,
        }
        made: ThreadStore = served.app.state.threads  # type: ignore[attr-defined]
        assert made.ttl_s == 7 * 86_400
    assert (tmp_path / "store.db").exists()
    monkeypatch.setenv("AGENTLOOP_THREAD_TTL_DAYS", "forever")
    with Served(None) as served:
        answer = served.call("GET", "/threads")
    assert answer.status_code == 503
    assert answer.json()["error"]["type"] == "configuration_error"
