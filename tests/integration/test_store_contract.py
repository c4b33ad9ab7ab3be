"""The store's contract, run on both backends: SQLite on a temporary file, and DynamoDB
through boto3 against moto's server on loopback (a table made as template.yaml makes it)."""

from __future__ import annotations

import asyncio

import pytest

from agentloop.store import (
    Add,
    Conflict,
    Delete,
    InvalidCursor,
    LimitExceeded,
    Put,
    Rejected,
    Store,
)
from tests.serial_moto import serial_moto  # noqa: F401 (a fixture)
from tests.store_backends import (
    Clock,
    store_fixtures,
)

clock, store = store_fixtures()


async def sorts(store: Store, partition: str, **query: object) -> list[str]:
    """Every sort key a query yields, page after page."""
    found: list[str] = []
    cursor = None
    for _ in range(100):
        page = await store.query(partition, after=cursor, **query)  # type: ignore[arg-type]
        found += [record.sort for record in page.records]
        cursor = page.cursor
        if cursor is None:
            return found
    raise AssertionError("the cursors never ended")


# -- items ----------------------------------------------------------------------------------


async def test_put_get_delete(store: Store) -> None:
    assert await store.get("user#a", "profile") is None
    written = await store.put("user#a", "profile", {"name": "Ada", "n": 1.5, "tags": ["x"]})
    got = await store.get("user#a", "profile")
    assert got == written
    assert got is not None
    assert got.data == {"name": "Ada", "n": 1.5, "tags": ["x"]}
    assert got.counters == {}
    assert await store.get("user#a", "other") is None
    assert await store.get("user#b", "profile") is None
    assert await store.delete("user#a", "profile") is True
    assert await store.get("user#a", "profile") is None
    assert await store.delete("user#a", "profile") is False


async def test_every_write_changes_the_version(store: Store) -> None:
    first = await store.put("p", "s", {"v": 1})
    second = await store.put("p", "s", {"v": 2})
    third = await store.add("p", "s", {"n": 1})
    assert len({first.version, second.version, third.version}) == 3
    assert third.data == {"v": 2}
    await store.delete("p", "s")
    again = await store.put("p", "s", {"v": 3})
    assert again.version not in {first.version, second.version, third.version}


async def test_if_absent(store: Store) -> None:
    await store.put("p", "lock", {"owner": "a"}, if_absent=True)
    with pytest.raises(Conflict) as refused:
        await store.put("p", "lock", {"owner": "b"}, if_absent=True)
    current = await store.get("p", "lock")
    assert current is not None
    assert current.data == {"owner": "a"}
    assert refused.value.version == current.version


async def test_if_version(store: Store) -> None:
    first = await store.put("p", "doc", {"rev": 1})
    second = await store.put("p", "doc", {"rev": 2}, if_version=first.version)
    with pytest.raises(Conflict) as stale:
        await store.put("p", "doc", {"rev": "lost"}, if_version=first.version)
    assert stale.value.version == second.version
    with pytest.raises(Conflict) as absent:
        await store.put("p", "nothing", {}, if_version=first.version)
    assert absent.value.version is None
    with pytest.raises(Conflict):
        await store.delete("p", "doc", if_version=first.version)
    assert await store.delete("p", "doc", if_version=second.version) is True
    assert await store.get("p", "doc") is None


async def test_put_replaces_counters_and_expiry(store: Store, clock: Clock) -> None:
    await store.add("p", "s", {"n": 5}, expires_at=int(clock.now) + 10)
    replaced = await store.put("p", "s", {"fresh": True})
    assert replaced.counters == {}
    assert replaced.expires_at is None
    assert await store.get("p", "s") == replaced


# -- expiry ---------------------------------------------------------------------------------


async def test_expired_items_are_invisible_and_absent(store: Store, clock: Clock) -> None:
    soon = int(clock.now) + 60
    await store.put("p", "a", {"x": 1}, expires_at=soon)
    await store.put("p", "b", {"x": 2})
    assert (await store.get("p", "a")) is not None
    clock.now = soon  # expires_at is the first second it is gone
    assert await store.get("p", "a") is None
    assert await sorts(store, "p") == ["b"]
    await store.put("p", "a", {"x": 3}, if_absent=True)  # expired counts as absent
    got = await store.get("p", "a")
    assert got is not None
    assert got.data == {"x": 3}
    assert got.expires_at is None


async def test_an_expired_version_no_longer_matches(store: Store, clock: Clock) -> None:
    old = await store.put("p", "lease", {"holder": "a"}, expires_at=int(clock.now) + 5)
    clock.now += 5
    with pytest.raises(Conflict) as refused:
        await store.put("p", "lease", {"holder": "a"}, if_version=old.version)
    assert refused.value.version is None
    with pytest.raises(Conflict):
        await store.delete("p", "lease", if_version=old.version)


async def test_counters_of_an_expired_item_start_again(store: Store, clock: Clock) -> None:
    await store.add("p", "window", {"requests": 3}, expires_at=int(clock.now) + 60)
    clock.now += 61
    fresh = await store.add("p", "window", {"requests": 1}, limits={"requests": 1})
    assert fresh.counters == {"requests": 1}
    assert fresh.expires_at is None
    assert fresh.data == {}


# -- queries --------------------------------------------------------------------------------


async def test_query_order_prefix_and_pages(store: Store) -> None:
    for i in range(7):
        await store.put("thread#1", f"msg#{i:03d}", {"i": i})
    await store.put("thread#1", "meta", {})
    await store.put("thread#2", "msg#000", {})
    expected = [f"msg#{i:03d}" for i in range(7)]
    for limit in (1, 2, 3, 7, 100):
        assert await sorts(store, "thread#1", prefix="msg#", limit=limit) == expected
        assert (
            await sorts(store, "thread#1", prefix="msg#", limit=limit, newest_first=True)
            == (expected[::-1])
        )
    assert await sorts(store, "thread#1") == ["meta", *expected]
    page = await store.query("thread#1", prefix="msg#", limit=3, newest_first=True)
    assert [r.data["i"] for r in page.records] == [6, 5, 4]
    assert page.cursor is not None
    last = await store.query("thread#1", prefix="msg#", limit=10)
    assert last.cursor is None
    assert await sorts(store, "nobody") == []


async def test_a_cursor_only_serves_its_own_query(store: Store) -> None:
    for i in range(4):
        await store.put("a", f"k{i}", {})
        await store.put("b", f"k{i}", {})
    page = await store.query("a", limit=2)
    assert page.cursor is not None
    for garbage in ("", "not a cursor", "!!!!", "eyJ4IjogMX0", "A" * 5000, page.cursor + "x"):
        with pytest.raises(InvalidCursor):
            await store.query("a", limit=2, after=garbage)
    with pytest.raises(InvalidCursor):  # another partition's
        await store.query("b", limit=2, after=page.cursor)
    with pytest.raises(InvalidCursor):  # another order's
        await store.query("a", limit=2, after=page.cursor, newest_first=True)
    with pytest.raises(InvalidCursor):  # another prefix's
        await store.query("a", prefix="k", limit=2, after=page.cursor)
    assert isinstance(InvalidCursor("x"), ValueError)


async def test_delete_partition(store: Store, clock: Clock) -> None:
    for i in range(30):
        await store.put("thread#9", f"msg#{i:03d}", {"i": i})
    await store.put("thread#9", "gone", {}, expires_at=int(clock.now) + 1)
    await store.put("thread#10", "msg#000", {})
    clock.now += 2
    assert await store.delete_partition("thread#9") == 30
    assert await sorts(store, "thread#9") == []
    assert await sorts(store, "thread#10") == ["msg#000"]
    assert await store.delete_partition("thread#9") == 0


# -- counters -------------------------------------------------------------------------------


async def test_add_creates_and_adds(store: Store, clock: Clock) -> None:
    day = int(clock.now) + 86_400
    first = await store.add(
        "user#a", "usage#d", {"tokens": 100, "usd_micros": 2500}, expires_at=day
    )
    assert first.counters == {"tokens": 100, "usd_micros": 2500}
    assert first.expires_at == day
    second = await store.add("user#a", "usage#d", {"tokens": -30})
    assert second.counters == {"tokens": 70, "usd_micros": 2500}
    assert second.expires_at == day  # kept when not given
    assert await store.get("user#a", "usage#d") == second


async def test_add_within_limits_and_refused_past_them(store: Store) -> None:
    await store.add("u", "day", {"usd": 700, "tokens": 10}, limits={"usd": 1000})
    with pytest.raises(LimitExceeded) as refused:
        await store.add("u", "day", {"usd": 301, "tokens": 5}, limits={"usd": 1000, "tokens": 99})
    error = refused.value
    assert (error.counter, error.current, error.delta, error.limit) == ("usd", 700, 301, 1000)
    got = await store.get("u", "day")
    assert got is not None
    assert got.counters == {"usd": 700, "tokens": 10}  # nothing changed
    exact = await store.add("u", "day", {"usd": 300}, limits={"usd": 1000})
    assert exact.counters["usd"] == 1000
    with pytest.raises(LimitExceeded) as fresh:  # an absent counter is 0
        await store.add("u", "other", {"runs": 3}, limits={"runs": 2})
    assert fresh.value.current == 0
    assert await store.get("u", "other") is None
    settled = await store.add("u", "day", {"usd": -400})  # a settle frees what was reserved
    assert settled.counters["usd"] == 600


async def test_add_many_is_all_or_nothing(store: Store) -> None:
    day, month = (
        Add("u", "usd#day", {"usd": 60}, {"usd": 100}),
        Add("u", "usd#month", {"usd": 60}, {"usd": 1000}),
    )
    await store.add_many([day, month])
    with pytest.raises(LimitExceeded) as refused:
        await store.add_many([month, day])
    assert (refused.value.sort, refused.value.index, refused.value.current) == ("usd#day", 1, 60)
    got_day, got_month = await store.get("u", "usd#day"), await store.get("u", "usd#month")
    assert got_day is not None
    assert got_month is not None
    assert (got_day.counters, got_month.counters) == ({"usd": 60}, {"usd": 60})


async def test_transact_mixes_writes_all_or_nothing(store: Store) -> None:
    lease = await store.put("u", "resv#run1", {"usd": 50})
    await store.transact(
        [
            Add("u", "usd#day", {"usd": -50}),
            Delete("u", "resv#run1", if_version=lease.version),
            Put("u", "resv#run2", {"usd": 80}, if_absent=True),
        ]
    )
    assert await store.get("u", "resv#run1") is None
    with pytest.raises(Conflict) as refused:
        await store.transact(
            [Add("u", "usd#day", {"usd": 80}), Put("u", "resv#run2", {"usd": 1}, if_absent=True)]
        )
    assert refused.value.index == 1
    got = await store.get("u", "usd#day")
    assert got is not None
    assert got.counters == {"usd": -50}  # the add was undone with the transaction
    run2 = await store.get("u", "resv#run2")
    assert run2 is not None
    assert run2.data == {"usd": 80}


async def test_a_transaction_on_an_expired_counter(store: Store, clock: Clock) -> None:
    await store.add("u", "minute", {"requests": 30}, expires_at=int(clock.now) + 60)
    clock.now += 60
    await store.add_many(
        [
            Add("u", "minute", {"requests": 1}, {"requests": 30}, int(clock.now) + 60),
            Add("u", "day", {"requests": 1}),
        ]
    )
    got = await store.get("u", "minute")
    assert got is not None
    assert (got.counters, got.expires_at) == ({"requests": 1}, int(clock.now) + 60)
    clock.now += 60
    with pytest.raises(LimitExceeded) as refused:  # expired: from 0, and 31 is past 30
        await store.add_many(
            [
                Add("u", "day", {"requests": 1}),
                Add("u", "minute", {"requests": 31}, {"requests": 30}),
            ]
        )
    assert (refused.value.index, refused.value.current) == (1, 0)
    assert await store.get("u", "minute") is None
    day = await store.get("u", "day")
    assert day is not None
    assert day.counters == {"requests": 1}


async def test_concurrent_adds_never_pass_the_limit(store: Store) -> None:
    async def reserve() -> bool:
        try:
            await store.add("u", "runs", {"runs": 1}, limits={"runs": 7})
        except LimitExceeded:
            return False
        return True

    granted = await asyncio.gather(*(reserve() for _ in range(20)))
    assert sum(granted) == 7
    got = await store.get("u", "runs")
    assert got is not None
    assert got.counters == {"runs": 7}


async def test_concurrent_reservations_of_two_counters(store: Store) -> None:
    async def reserve() -> bool:
        try:
            await store.add_many(
                [
                    Add("u", "day", {"usd": 30}, {"usd": 100}),
                    Add("u", "month", {"usd": 30}, {"usd": 1000}),
                ]
            )
        except LimitExceeded:
            return False
        return True

    granted = await asyncio.gather(*(reserve() for _ in range(20)))
    assert sum(granted) == 3
    day, month = await store.get("u", "day"), await store.get("u", "month")
    assert day is not None
    assert month is not None
    assert (day.counters, month.counters) == ({"usd": 90}, {"usd": 90})


# -- what is refused before it reaches a backend ------------------------------------------------


@pytest.mark.parametrize(
    ("partition", "sort"),
    [("", "s"), ("p", ""), ("p", "x" * 1025), ("p\n", "s"), ("p", "\ud800"), (1, "s")],
)
async def test_bad_keys_are_rejected(store: Store, partition: object, sort: object) -> None:
    with pytest.raises(Rejected):
        await store.put(partition, sort, {})  # type: ignore[arg-type]
    with pytest.raises(Rejected):
        await store.get(partition, sort)  # type: ignore[arg-type]


async def test_bad_writes_are_rejected(store: Store) -> None:
    with pytest.raises(Rejected):
        await store.put("p", "s", {"x": float("nan")})
    with pytest.raises(Rejected):
        await store.put("p", "s", {"x": object()})
    with pytest.raises(Rejected):
        await store.put("p", "s", {"x": "y" * 400_000})
    with pytest.raises(Rejected):
        await store.put("p", "s", {}, if_absent=True, if_version=3)
    for deltas in ({}, {"usd": 1.5}, {"usd": True}, {"bad name": 1}, {"x": 2**60}):
        with pytest.raises(Rejected):
            await store.add("p", "s", deltas)  # type: ignore[arg-type]
    with pytest.raises(Rejected):
        await store.add("p", "s", {"a": 1}, limits={"b": 1})
    with pytest.raises(Rejected):
        await store.transact([Add("p", "s", {"a": 1}), Add("p", "s", {"a": 1})])
    with pytest.raises(Rejected):
        await store.transact([])
    with pytest.raises(Rejected):
        await store.query("p", limit=0)
    assert await store.get("p", "s") is None
