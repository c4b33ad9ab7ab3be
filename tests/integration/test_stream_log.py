"""The stream log's contract on both backends (SQLite on a file; DynamoDB through moto's
server on loopback): a writer logs a run's frames in batches while a reader replays them and
follows live; a frame larger than an item is cut across items and joined again; the log is
the owner's; a new run replaces it; a log left live by a dead process, or expired, ends."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import pytest

from agentloop.limits import CancelToken
from agentloop.store import Store
from agentloop.streams import DAY_S, Head, Replay, StreamLog, StreamWriter, keys, replay
from tests.serial_moto import serial_moto  # noqa: F401 (a fixture)
from tests.store_backends import START, Clock, store_fixtures

ADA, BOB = "key:ada", "jwt:0123456789abcdef01234567"
THREAD = "th_abc"
BIG = "é" * 200_000 + "x" * 300_000
"""A frame of ~1.5 MB once stored (every é is six bytes escaped): it spans several items."""


clock, store = store_fixtures()


@pytest.fixture
def log(store: Store, clock: Clock) -> StreamLog:
    return StreamLog(store, clock=clock)


async def frames_from(queue: asyncio.Queue[bytes | None]) -> AsyncIterator[bytes]:
    while (frame := await queue.get()) is not None:
        yield frame


def frame(n: int) -> bytes:
    return f'event: text_delta\ndata: {{"n": {n}}}\n\n'.encode()


async def reader(log: StreamLog, owner: str, after: int = 0) -> AsyncIterator[bytes]:
    head = await log.head(owner, THREAD)
    assert head is not None
    stop_at = time.monotonic() + 20
    async for sent in replay(
        Replay(log, owner, THREAD, head, after), CancelToken(), stop_at, poll_s=0.01
    ):
        yield sent


async def test_a_reader_replays_what_was_logged_then_follows_live_to_the_end(
    log: StreamLog,
) -> None:
    writer = StreamWriter(log, ADA, THREAD, int(START) + 600)
    await writer.open()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    sent: list[bytes] = []

    async def run() -> None:
        async for out in writer.frames(frames_from(queue)):
            sent.append(out)

    running = asyncio.create_task(run())
    for n in range(1, 6):
        queue.put_nowait(frame(n))
    got: list[bytes] = []
    follow = reader(log, ADA, after=2)
    got.append(await anext(follow))  # frame 3, from the store
    for n in range(6, 40):
        queue.put_nowait(frame(n))
    queue.put_nowait(BIG.encode())
    queue.put_nowait(frame(41))
    queue.put_nowait(None)
    got += [out async for out in follow]
    await running
    assert sent == [b"id: %d\n" % n + frame(n) for n in range(1, 40)] + [
        b"id: 40\n" + BIG.encode(),
        b"id: 41\n" + frame(41),
    ]
    assert got == sent[2:]
    head = await log.head(ADA, THREAD)
    assert head == Head(writer.run_key, "ended", 41, writer.written, int(START) + 600)
    assert writer.written >= 5  # the big frame alone is five items
    assert [out async for out in reader(log, ADA)] == sent  # from the start, once ended


async def test_frames_are_written_in_batches_not_one_by_one(log: StreamLog) -> None:
    writer = StreamWriter(log, ADA, THREAD, int(START) + 600)
    await writer.open()

    async def burst() -> AsyncIterator[bytes]:
        for n in range(1, 201):
            yield frame(n)

    sent = [out async for out in writer.frames(burst())]
    assert len(sent) == 200
    assert writer.written <= 2
    assert len([out async for out in reader(log, ADA)]) == 200


async def test_the_log_is_the_owners_and_a_new_run_replaces_it(log: StreamLog) -> None:
    first = StreamWriter(log, ADA, THREAD, int(START) + 600)
    await first.open()
    assert await log.head(BOB, THREAD) is None
    head = await log.head(ADA, THREAD)
    assert head is not None
    follow = replay(Replay(log, ADA, THREAD, head), CancelToken(), time.monotonic() + 20)
    second = StreamWriter(log, ADA, THREAD, int(START) + 600)
    await second.open()  # a new run on the thread: the first run's replay ends
    assert [out async for out in follow] == []
    head = await log.head(ADA, THREAD)
    assert head is not None
    assert (head.run_key, head.state) == (second.run_key, "live")


async def test_a_log_left_live_by_a_dead_process_ends_at_its_until_and_expires(
    log: StreamLog, clock: Clock
) -> None:
    writer = StreamWriter(log, ADA, THREAD, int(START) + 60)
    await writer.open()
    head = await log.head(ADA, THREAD)
    assert head is not None
    assert head.live(clock())
    clock.now += 61
    assert not head.live(clock())
    assert [out async for out in reader(log, ADA)] == []  # ends instead of polling forever
    clock.now = START + DAY_S + 1
    assert await log.head(ADA, THREAD) is None


async def test_a_reader_stops_at_a_gap_in_the_log(log: StreamLog, store: Store) -> None:
    writer = StreamWriter(log, ADA, THREAD, int(START) + 600)
    await writer.open()
    for number in (0, 2):
        await log.put_item(ADA, THREAD, writer.run_key, number, keys.pack([(number + 1, "x")])[0])
    assert [out async for out in reader(log, ADA)] == [b"x"]


def test_pack_cuts_big_frames_across_items_and_keeps_items_under_the_limit() -> None:
    items = keys.pack([(1, "a"), (2, BIG), (3, "b")])
    assert items[0]["s"] == 1
    assert all(len(json.dumps(item)) <= keys.ITEM_BYTES + 100 for item in items)
    assert (items[0]["f"][0], items[-1]["f"][-1]) == ("a", "b")
    joined = "".join(t for item in items for t in item["f"])
    assert joined == "a" + BIG + "b"
    assert [item["c"] for item in items][:-1] == [True] * (len(items) - 1)
