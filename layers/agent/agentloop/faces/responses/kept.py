"""What a Responses request keeps (``Face.kept``): ``previous_response_id`` puts the
caller's stored conversation between the instructions and ``input``, and ``store`` (unset:
true) saves the response's snapshot (``saved.py``) before its answer is sent, so a client
that has the answer can continue from it at once. The server runs these steps
(``server.faces``) and answers a store that refuses with a 503; a run without an answer
stores nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agentloop.events import Done, Event
from agentloop.faces.face import Kept
from agentloop.faces.responses.request import ResponsesRequest
from agentloop.faces.responses.saved import ResponseNotFound, ResponseStore, StoredResponse
from agentloop.http_api import HttpError
from agentloop.models import ChatRequest, messages_from_wire, to_wire
from agentloop.store import StoreUnavailable

if TYPE_CHECKING:
    from agentloop.threads import ThreadStore


def not_found(param: str | None = None) -> HttpError:
    return HttpError(404, "not_found", "no such response", param=param)


def response_store(threads: ThreadStore) -> ResponseStore:
    """Stored responses on the threads' store, kept as long as threads."""
    return ResponseStore(threads.store, threads.ttl_s, threads.clock)


class Snapshot(Kept):
    """One response's snapshot: the conversation before it, its input, and its run's ``done``."""

    def __init__(
        self, request: ResponsesRequest, owner: str, threads: Callable[[], ThreadStore]
    ) -> None:
        self.request, self.owner = request, owner
        self.store = response_store(threads())
        self.history: list[dict[str, Any]] = []
        """The previous response's conversation, in wire form."""
        self.done: Done | None = None

    async def continued(self, request: ChatRequest) -> ChatRequest:
        """The instructions, the previous response's conversation, then ``input``."""
        previous = self.request.previous_response_id
        if previous is None:
            return request
        try:
            self.history = (await self.store.load(self.owner, previous)).messages
        except ResponseNotFound as exc:  # another principal's too
            raise not_found("previous_response_id") from exc
        try:
            earlier = messages_from_wire(self.history)
        except ValidationError as exc:  # written by us: the store gave back something else
            raise StoreUnavailable("a stored response is unreadable") from exc
        return self.request.to_chat_request(earlier)

    def watch(self, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        return self._watch(events) if self.request.stored else events

    async def _watch(self, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        async for event in events:
            if isinstance(event, Done) and event.depth == 0:
                self.done = event
            yield event

    async def keep(self, answer: dict[str, Any]) -> None:
        """Store the response under its id (StoreError if the store refuses)."""
        if not self.request.stored:
            return
        assert self.done is not None, "an answer comes after its run's done"
        request, response_id = self.request, str(answer["id"])
        new = to_wire(request.input_messages())
        messages = [*self.history, *new, *to_wire(self.done.messages)]
        items = [item.to_item(f"msg_{response_id}_{n}") for n, item in enumerate(request.input)]
        await self.store.save(self.owner, response_id, StoredResponse(answer, items, messages))
