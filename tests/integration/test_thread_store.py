"""The thread store's contract on both backends: SQLite on a file, and DynamoDB through boto3
against moto's server on loopback (serialized: see tests/serial_moto.py). The clock is
injected, so leases and retention are tested by moving it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentloop.store import InvalidCursor, Store
from agentloop.threads import (
    InvalidThreadInput,
    ThreadBusy,
    ThreadExists,
    ThreadNotFound,
    ThreadStore,
    keys,
)
from agentloop.threads.segments import MAX_APPEND_SEGMENTS, SEGMENT_BYTES
from tests.serial_moto import serial_moto  # noqa: F401 (a fixture)
from tests.store_backends import START, Clock, store_fixtures

ADA, BOB = "key:ada", "jwt:0123456789abcdef01234567"
DAY = 86_400


clock, store = store_fixtures()


@pytest.fixture
def threads(store: Store, clock: Clock) -> ThreadStore:
    return ThreadStore(store, ttl_days=30, clock=clock)


def turn(question: str, answer: str = "ok") -> list[dict[str, Any]]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


def tool_round(call_id: str, result: str) -> list[dict[str, Any]]:
    call = {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return [
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


async def every_thread(threads: ThreadStore, owner: str, limit: int) -> list[str]:
    found: list[str] = []
    cursor = None
    for _ in range(100):
        page = await threads.list_threads(owner, limit=limit, cursor=cursor)
        found += [t.id for t in page.threads]
        cursor = page.cursor
        if cursor is None:
            return found
    raise AssertionError("the cursors never ended")


# -- create, list, rename, delete ------------------------------------------------------------


async def test_create_get_and_list_newest_first(threads: ThreadStore, clock: Clock) -> None:
    made = []
    for i in range(7):
        clock.now = START + i
        made.append(await threads.create(ADA))
    assert all(t.id.startswith("th_") and len(t.id) == 35 for t in made)
    assert len({t.id for t in made}) == 7
    got = await threads.get(ADA, made[2].id)
    assert got == made[2]
    assert (got.title, got.message_count, got.created_at) == (None, 0, START + 2)

    newest_first = [t.id for t in reversed(made)]
    assert await every_thread(threads, ADA, limit=3) == newest_first
    assert await every_thread(threads, ADA, limit=100) == newest_first
    assert await every_thread(threads, BOB, limit=5) == []

    clock.now = START + 100
    await threads.append(ADA, made[0].id, turn("first again"), key="r1")
    page = await threads.list_threads(ADA, limit=2)
    assert [t.id for t in page.threads] == [made[0].id, made[6].id], "an append moves it up"
    assert page.threads[0].updated_at == START + 100
    assert page.threads[0].title == "first again"
    assert page.threads[0].message_count == 2


async def test_a_cursor_of_another_owner_or_garbage_is_refused(threads: ThreadStore) -> None:
    for _ in range(3):
        await threads.create(ADA)
    page = await threads.list_threads(ADA, limit=1)
    assert page.cursor is not None
    with pytest.raises(InvalidCursor):
        await threads.list_threads(BOB, limit=1, cursor=page.cursor)
    with pytest.raises(InvalidCursor):
        await threads.list_threads(ADA, limit=1, cursor="not-a-cursor")
    for bad in (0, 101, True):
        with pytest.raises(InvalidThreadInput):
            await threads.list_threads(ADA, limit=bad)


async def test_titles_from_the_first_user_message_and_renames(threads: ThreadStore) -> None:
    thread = await threads.create(ADA)
    long = "word " * 40
    messages = [{"role": "system", "content": "be brief"}, *turn(f"  {long}\n"), *turn("later")]
    info = await threads.append(ADA, thread.id, messages, key="r1")
    assert info.title is not None
    assert len(info.title) == 80
    assert info.title.endswith("…")
    assert info.title.startswith("word word")

    renamed = await threads.rename(ADA, thread.id, "  Holiday plans  ")
    assert renamed.title == "Holiday plans"
    assert (await threads.list_threads(ADA)).threads[0].title == "Holiday plans"
    await threads.append(ADA, thread.id, turn("another question"), key="r2")
    assert (await threads.get(ADA, thread.id)).title == "Holiday plans", "kept"
    for bad in ("", "   ", "x" * 201, "a\nb", "\x00", 5):
        with pytest.raises(InvalidThreadInput):
            await threads.rename(ADA, thread.id, bad)  # type: ignore[arg-type]
    assert (await threads.rename(ADA, thread.id, "é" * 200)).title == "é" * 200


async def test_delete_removes_every_item_of_the_thread(threads: ThreadStore, store: Store) -> None:
    kept = await threads.create(ADA)
    gone = await threads.create(ADA)
    await threads.append(ADA, gone.id, turn("x" * 10, "y" * (SEGMENT_BYTES + 5)), key="r1")
    await threads.claim(ADA, gone.id, "run-1", 60)
    await threads.delete(ADA, gone.id)

    for call in (threads.get, threads.load, threads.delete):
        with pytest.raises(ThreadNotFound):
            await call(ADA, gone.id)
    assert (await store.query(keys.thread_partition(ADA, gone.id))).records == []
    assert await every_thread(threads, ADA, 10) == [kept.id]


async def test_a_chosen_id_is_created_once_per_owner(threads: ThreadStore) -> None:
    await threads.create(ADA, thread_id="chat-1", title="Mine")
    with pytest.raises(ThreadExists):
        await threads.create(ADA, thread_id="chat-1")
    theirs = await threads.create(BOB, thread_id="chat-1")
    assert theirs.title is None
    assert (await threads.get(ADA, "chat-1")).title == "Mine"
    for bad in ("", "a/b", "a#b", "x" * 129, "é"):
        with pytest.raises(InvalidThreadInput):
            await threads.create(ADA, thread_id=bad)


# -- isolation -------------------------------------------------------------------------------


async def test_another_principals_thread_is_absent_to_every_operation(
    threads: ThreadStore,
) -> None:
    thread = await threads.create(ADA)
    await threads.append(ADA, thread.id, turn("secret"), key="r1")
    attempts = [
        threads.get(BOB, thread.id),
        threads.load(BOB, thread.id),
        threads.rename(BOB, thread.id, "mine now"),
        threads.delete(BOB, thread.id),
        threads.append(BOB, thread.id, turn("hi"), key="r2"),
        threads.claim(BOB, thread.id, "run-b", 60),
    ]
    for attempt in attempts:
        with pytest.raises(ThreadNotFound) as refused:
            await attempt
        assert str(refused.value) == "no such thread"
    assert await threads.release(BOB, thread.id, "run-b") is False
    with pytest.raises(ThreadNotFound) as missing:
        await threads.get(ADA, "th_" + "A" * 32)
    assert str(missing.value) == "no such thread"
    for bad in ("", "../x", "a#b", "x" * 200):
        with pytest.raises(ThreadNotFound):
            await threads.get(ADA, bad)
    loaded = await threads.load(ADA, thread.id)
    assert loaded.messages == turn("secret")
    assert loaded.info.title == "secret"


# -- appends ---------------------------------------------------------------------------------


async def test_appends_load_in_order_and_a_repeated_key_is_not_written_again(
    threads: ThreadStore,
) -> None:
    thread = await threads.create(ADA)
    first = turn("q1") + tool_round("c1", "result") + [{"role": "assistant", "content": "a1"}]
    await threads.append(ADA, thread.id, first, key="run-1")
    again = await threads.append(ADA, thread.id, first, key="run-1")
    assert again.message_count == 5
    await threads.append(ADA, thread.id, turn("q2"), key="run-2")
    loaded = await threads.load(ADA, thread.id)
    assert loaded.messages == first + turn("q2")
    assert loaded.info.message_count == 7


async def test_bad_appends_are_refused_and_write_nothing(threads: ThreadStore) -> None:
    thread = await threads.create(ADA)
    bad_messages: list[Any] = [
        [],
        "hi",
        [{"content": "no role"}],
        [{"role": "robot", "content": "x"}],
        [{"role": "user", "content": float("nan")}],
        [{"role": "user", "content": object()}],
    ]
    for messages in bad_messages:
        with pytest.raises(InvalidThreadInput):
            await threads.append(ADA, thread.id, messages, key="k")
    for key in ("", "a b", "x" * 129, "é"):
        with pytest.raises(InvalidThreadInput):
            await threads.append(ADA, thread.id, turn("hi"), key=key)
    too_big = MAX_APPEND_SEGMENTS * SEGMENT_BYTES + 1
    with pytest.raises(InvalidThreadInput):
        await threads.append(ADA, thread.id, turn("x" * too_big), key="big")
    assert (await threads.load(ADA, thread.id)).messages == []


async def test_a_thread_larger_than_a_dynamodb_item_round_trips(threads: ThreadStore) -> None:
    thread = await threads.create(ADA)
    quoted = '"quoted\\" and \\\\ escaped\n' * 20_000  # doubles as stored JSON: more slices
    expected: list[dict[str, Any]] = []
    runs = [
        turn("read the big file") + tool_round("c1", "x" * 700_000),
        [*tool_round("c2", quoted), {"role": "assistant", "content": "done ✓ ünïcode"}],
        turn("small"),
    ]
    for i, run in enumerate(runs):
        await threads.append(ADA, thread.id, run, key=f"run-{i}")
        expected += run
    loaded = await threads.load(ADA, thread.id)
    assert loaded.messages == expected
    assert loaded.info.message_count == len(expected)
    assert sum(len(str(m)) for m in expected) > 1_200_000


async def test_fifty_concurrent_appends_to_fifty_threads_lose_nothing(
    threads: ThreadStore,
) -> None:
    made = await asyncio.gather(*(threads.create(ADA) for _ in range(50)))

    async def converse(i: int) -> None:
        await threads.append(ADA, made[i].id, turn(f"q{i}", f"a{i}"), key=f"run-{i}")

    await asyncio.gather(*(converse(i) for i in range(50)))
    loaded = await asyncio.gather(*(threads.load(ADA, t.id) for t in made))
    assert [t.messages for t in loaded] == [turn(f"q{i}", f"a{i}") for i in range(50)]
    assert len(await every_thread(threads, ADA, 20)) == 50


async def test_concurrent_appends_to_one_thread_neither_lose_nor_duplicate(
    threads: ThreadStore,
) -> None:
    thread = await threads.create(ADA)
    count = 12

    async def converse(i: int) -> None:
        await threads.append(ADA, thread.id, turn(f"q{i}", f"a{i}"), key=f"run-{i}")

    # Each append twice, all at once: a retried append is not written again.
    await asyncio.gather(*(converse(i % count) for i in range(2 * count)))
    loaded = await threads.load(ADA, thread.id)
    questions = [m["content"] for m in loaded.messages if m["role"] == "user"]
    assert sorted(questions) == sorted(f"q{i}" for i in range(count))
    for i in range(0, len(loaded.messages), 2):  # each append's messages stay together
        assert loaded.messages[i + 1]["content"] == "a" + loaded.messages[i]["content"][1:]
    assert loaded.info.message_count == 2 * count


# -- one run at a time -----------------------------------------------------------------------


async def test_a_claim_excludes_other_runs_until_released(threads: ThreadStore) -> None:
    thread = await threads.create(ADA)
    until = await threads.claim(ADA, thread.id, "run-1", 60)
    assert until == int(START) + 60
    with pytest.raises(ThreadBusy) as busy:
        await threads.claim(ADA, thread.id, "run-2", 60)
    assert busy.value.until == until
    assert await threads.release(ADA, thread.id, "run-2") is False, "not its claim"
    assert await threads.claim(ADA, thread.id, "run-1", 120) == int(START) + 120, "renewed"
    assert await threads.release(ADA, thread.id, "run-1") is True
    assert await threads.release(ADA, thread.id, "run-1") is False
    assert await threads.claim(ADA, thread.id, "run-2", 60) == until


async def test_concurrent_claims_admit_exactly_one(threads: ThreadStore) -> None:
    thread = await threads.create(ADA)
    results = await asyncio.gather(
        *(threads.claim(ADA, thread.id, f"run-{i}", 60) for i in range(10)),
        return_exceptions=True,
    )
    assert sum(isinstance(r, int) for r in results) == 1, results
    assert all(isinstance(r, (int, ThreadBusy)) for r in results), results


async def test_a_lease_ends_by_itself_when_its_run_dies(threads: ThreadStore, clock: Clock) -> None:
    thread = await threads.create(ADA)
    await threads.claim(ADA, thread.id, "dead-run", 30)
    clock.now = START + 29
    with pytest.raises(ThreadBusy):
        await threads.claim(ADA, thread.id, "next-run", 30)
    clock.now = START + 30
    assert await threads.claim(ADA, thread.id, "next-run", 30) == int(START) + 60
    assert await threads.release(ADA, thread.id, "dead-run") is False
    for bad in (0, -1, 86_401, float("nan"), True):
        with pytest.raises(InvalidThreadInput):
            await threads.claim(ADA, thread.id, "run", bad)
    with pytest.raises(InvalidThreadInput):
        await threads.claim(ADA, thread.id, "run id with spaces", 30)


# -- retention -------------------------------------------------------------------------------


async def test_a_thread_expires_whole_after_its_last_append(
    threads: ThreadStore, clock: Clock
) -> None:
    idle = await threads.create(ADA)
    active = await threads.create(ADA)
    await threads.append(ADA, idle.id, turn("once"), key="r0")
    for day in range(0, 60, 10):  # an append every ten days keeps it, segments and all
        clock.now = START + day * DAY
        await threads.append(ADA, active.id, turn(f"day {day}"), key=f"r{day}")
        assert len((await threads.load(ADA, active.id)).messages) == 2 * (day // 10 + 1)
    clock.now = START + 30 * DAY
    with pytest.raises(ThreadNotFound):
        await threads.get(ADA, idle.id)
    assert await every_thread(threads, ADA, 10) == [active.id]

    clock.now = START + 50 * DAY + 29 * DAY  # the last append + 29 days: all still there
    assert len((await threads.load(ADA, active.id)).messages) == 12
    clock.now = START + 50 * DAY + 30 * DAY
    with pytest.raises(ThreadNotFound):
        await threads.load(ADA, active.id)
    assert await every_thread(threads, ADA, 10) == []
