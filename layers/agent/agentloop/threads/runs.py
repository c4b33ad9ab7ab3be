"""A run on a thread: the thread is claimed for the run (one run at a time), its messages go
before the request's new ones, and what the run adds is appended as it goes: the request's
new messages as the run starts, each finished tool round, and the rest at its ``done`` (which
a run whose client left still reaches: the tool round in progress finishes first). Each
append is keyed by the run and its step, so a retried one is not written twice.

The server (``server/runs.py``) opens the thread before the run is planned, tells the loop
where to hand its rounds (``RunSetup.on_round``) and wraps the run's events in
:func:`saving`; the loop knows nothing else of threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from agentloop.events import Done, Event, Notice
from agentloop.models import (
    NEW_THREAD,
    AssistantMessage,
    ChatRequest,
    Message,
    UserMessage,
    messages_from_wire,
    to_wire,
)
from agentloop.store import StoreError, StoreUnavailable
from agentloop.threads.errors import ThreadError, ThreadExists, ThreadMovedOn, ThreadNotFound
from agentloop.threads.store import ThreadStore

logger = logging.getLogger(__name__)

LEASE_MARGIN_S = 60.0
"""A claim outlasts the run's deadline by this much (then a dead process's claim lapses)."""
LONGEST_RUN_S = 900.0
"""A run without a deadline (locally) holds its thread this long at most: Lambda's limit."""


@dataclass
class ThreadRun:
    """One run's hold on its thread and what it has appended there so far."""

    threads: ThreadStore
    owner: str
    thread_id: str
    run_key: str
    sent: list[dict[str, Any]]
    """The request's new messages (wire form) while they are not in the thread yet."""
    saved: int = 0
    """How many of the run's messages are in the thread already (appended round by round)."""
    rounds: int = 0
    created: bool = False
    """The thread was made for this run (``"new"``, or a client's new id)."""
    _question: asyncio.Task[None] | None = field(default=None, repr=False)

    def note_on_question(self, note: str) -> None:
        """Add ``note`` to the request's last message as the thread will keep it (what was
        attached to it)."""
        if self.sent and isinstance(self.sent[-1].get("content"), str):
            self.sent[-1] = {**self.sent[-1], "content": self.sent[-1]["content"] + note}

    def keep_question(self) -> None:
        """The run starts: append the request's new messages now, beside its first model
        call (not before it), so a reader of the thread mid-run (a reloaded page) sees the
        question. If that fails, the next append carries them."""
        self._question = asyncio.create_task(self._append_question())

    async def _append_question(self) -> None:
        try:
            await self._append([], f"{self.run_key}.q")
        except (StoreError, ThreadError) as exc:
            logger.warning("a run's question could not be saved yet (the next will try): %s", exc)

    async def save_round(self, added: list[Message]) -> None:
        """After a tool round: append what the run added since the last append (a process
        that dies now loses nothing before this round). A failure is left to the end's
        append, which writes whatever is still unsaved."""
        try:
            await self._append(added, f"{self.run_key}.{self.rounds}")
            self.rounds += 1
        except (StoreError, ThreadError) as exc:
            logger.warning("a round could not be saved to its thread (the end will try): %s", exc)

    async def save(self, done: Done) -> None:
        """Append the rest of the run's messages (``done.messages``), once; a paused run's
        without its paused turn, whose calls wait (the thread stays a conversation every
        provider takes; the paused run goes on by its token, see ``continuation.py``)."""
        kept = _before_paused_turn(done.messages) if done.pending else done.messages
        await self._append(kept, f"{self.run_key}.end")

    async def _append(self, messages: list[Message], key: str) -> None:
        if self._question is not None and asyncio.current_task() is not self._question:
            question, self._question = self._question, None
            await question  # never raises: its failure leaves ``sent`` for this append
        added = [*self.sent, *to_wire(messages[self.saved :])]
        if not added:
            return
        await self.threads.append(self.owner, self.thread_id, added, key=key)
        self.saved = max(self.saved, len(messages))
        self.sent = []

    async def abandon(self) -> None:
        """The run will not start (refused when planned or reserved): give the thread back,
        and delete it if it was made for this run, so no empty thread is left in the list."""
        await self.release()
        if self.created and self.saved == 0 and self.rounds == 0:
            with contextlib.suppress(StoreError, ThreadError):
                await self.threads.delete(self.owner, self.thread_id)

    async def release(self) -> None:
        """Give the thread back (a claim that cannot be given back lapses with its lease)."""
        with contextlib.suppress(StoreError, ThreadError):
            await self.threads.release(self.owner, self.thread_id, self.run_key)


def _before_paused_turn(messages: list[Message]) -> list[Message]:
    """``messages`` up to the last assistant message with calls (the paused turn)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AssistantMessage) and message.tool_calls:
            return messages[:index]
    return messages


async def open_thread(
    threads: ThreadStore,
    owner: str,
    request: ChatRequest,
    run_for_s: float,
    *,
    client_ids: bool = False,
    user_turns_seen: int | None = None,
) -> tuple[ChatRequest, ThreadRun]:
    """Claim ``request``'s thread for ``run_for_s`` (plus a margin) and put its messages
    before the request's. ThreadNotFound unless ``owner`` has it, ThreadBusy while another
    run holds it; ``"new"`` makes the thread first. With ``client_ids`` (a protocol whose
    client makes its conversations' ids: the AI SDK's chat id, AG-UI's threadId) an id the
    owner does not have yet starts a thread of that id, in the owner's own namespace. A face
    whose client sends its whole view says how many of the user's turns it holds before the
    new ones (``user_turns_seen``): a thread with more has answered one the client did not
    see, and keeping the new ones would keep that turn twice (ThreadMovedOn, 409)."""
    assert request.thread_id is not None
    thread_id, created = request.thread_id, False
    if thread_id == NEW_THREAD:
        thread_id, created = (await threads.create(owner)).id, True
    elif client_ids:
        created = await _adopt(threads, owner, thread_id)
    run_key = "run_" + secrets.token_urlsafe(12)
    lease_s = min(run_for_s, LONGEST_RUN_S) + LEASE_MARGIN_S
    await threads.claim(owner, thread_id, run_key, lease_s)
    held = ThreadRun(threads, owner, thread_id, run_key, to_wire(request.messages), created=created)
    try:
        thread = await threads.load(owner, thread_id)
        history = messages_from_wire(thread.messages)
        turns = sum(isinstance(m, UserMessage) for m in history)
        if user_turns_seen is not None and turns > user_turns_seen:
            raise ThreadMovedOn()
    except ValidationError as exc:  # written by us: the store gave back something else
        await held.release()
        raise StoreUnavailable("the thread could not be read", str(exc)[:300]) from exc
    except BaseException:
        await held.release()
        raise
    messages = [*history, *request.messages]
    return request.model_copy(update={"messages": messages, "thread_id": thread_id}), held


async def _adopt(threads: ThreadStore, owner: str, thread_id: str) -> bool:
    """Make the owner's thread ``thread_id`` unless it has one (two first requests may race:
    one makes it, the other finds it made); whether this call made it."""
    try:
        await threads.get(owner, thread_id)
    except ThreadNotFound:
        try:
            await threads.create(owner, thread_id=thread_id)
        except ThreadExists:
            return False
        return True
    return False


async def saving(events: AsyncIterator[Event], held: ThreadRun) -> AsyncIterator[Event]:
    """``events``, with the run's messages saved to its thread before its ``done`` is passed
    on (a client that sees ``done`` can read the thread with them). If they cannot be saved,
    a ``notice`` says so before ``done``; the claim is given back when the events end."""
    try:
        async for event in events:
            if isinstance(event, Done) and event.depth == 0:
                notice = await _saved(held, event)
                if notice is not None:
                    yield notice
            yield event
    finally:
        await held.release()


async def _saved(held: ThreadRun, done: Done) -> Notice | None:
    try:
        await held.save(done)
    except (StoreError, ThreadError) as exc:
        logger.error("a run's messages could not be saved to its thread: %s", exc)
        return Notice(
            code="thread_not_saved",
            message="This answer could not be saved to the conversation; it is shown but "
            "will not be there next time.",
            run_id=done.run_id,
        )
    return None
