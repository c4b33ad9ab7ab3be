"""What a route needs from a protocol face: one object per protocol, ``FACE`` in the module
the route table names, imported at the route's first request (``server.faces``).

A face parses its protocol's body into its request model, says where that body keeps its
messages (for the message limits) and where a plan refusal points, whether it can ask a
person for approval, and frames a started run: streamed, or collected into one JSON answer.
A face that keeps requests on the server's stores (Responses' ``store`` and
``previous_response_id``) says so with :meth:`Face.kept`; the server runs its steps.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

from agentloop.events import Event
from agentloop.http_api import HttpError
from agentloop.limits import CancelToken
from agentloop.models import Approval, ChatRequest

if TYPE_CHECKING:
    from agentloop.threads import ThreadStore

R = TypeVar("R", bound=BaseModel)

Keep = Callable[[dict[str, Any]], Awaitable[None]]
"""Keeps a run's final answer; an :class:`HttpError` (a 503) if it could not be kept."""


@dataclass(frozen=True)
class FaceRun:
    """A started run, as a face frames it."""

    events: AsyncIterator[Event]
    request_id: str
    model: str
    cancel: CancelToken
    approvals: Sequence[Approval] | None
    """The decisions the request answered a pause with (``ChatRequest.approvals``)."""
    keep: Keep | None = None
    """Set when the face keeps this request (:meth:`Face.kept`): a streamed face awaits it with
    the final answer before its closing frames (an HttpError: it sends its failure instead);
    a collected answer is kept by the server before it is sent."""


class Kept:
    """What a face keeps of one request on the server's stores: the conversation it goes on
    from, and its answer. The server calls :meth:`continued` before the run, :meth:`watch` on
    its events and :meth:`keep` with the final answer before it is sent; a store that
    refuses raises ``StoreError`` (the server answers 503)."""

    async def continued(self, request: ChatRequest) -> ChatRequest:
        """The run's request: ``request`` with the kept conversation it goes on from; an
        HttpError (404 naming the field) for a conversation that is not the caller's."""
        return request

    def watch(self, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        """The run's events, seen on their way to the face (to know the run's ``done``)."""
        return events

    async def keep(self, answer: dict[str, Any]) -> None:
        """Keep the final answer (the face's JSON object), before the client has it."""


class Face(Generic[R]):
    """One protocol's route, minus the HTTP: the defaults fit a streaming face that can ask."""

    request_model: type[R]
    messages_key = "messages"
    """Where the body keeps its messages: the message limits are checked there (413)."""
    can_ask = True
    """False: the protocol cannot ask a person, so tools that need approval are not offered."""
    headers: Mapping[str, str] = {}
    """Added to a streamed answer's headers."""

    def to_chat_request(self, request: R) -> ChatRequest:
        raise NotImplementedError

    def plan_params(self, request: R) -> Mapping[str, str] | None:
        """Where a plan's refusal of each option points in this protocol (None: as named)."""
        return None

    def streams(self, request: R) -> bool:
        return True

    def client_thread_ids(self, request: R) -> bool:
        """True: ``request``'s thread id was made by the client (the AI SDK's chat id, AG-UI's
        threadId), so an id the caller has no thread of yet starts one (``start_run``)."""
        return False

    def kept(self, request: R, owner: str, threads: Callable[[], ThreadStore]) -> Kept | None:
        """What ``request`` keeps for ``owner`` (a principal's id) on the server's stores
        (``threads()``: the app's thread store, made at its first use); None: nothing."""
        return None

    def user_turns_seen(self, request: R) -> int | None:
        """On a thread, for a protocol whose client sends its whole view: how many of the
        user's turns it held before the new ones (a thread with more is a 409: a turn sent
        again after its answer was lost); None: the client sends only what is new."""
        return None

    def frames(self, request: R, run: FaceRun) -> AsyncIterator[bytes]:
        raise NotImplementedError

    async def collect(self, request: R, run: FaceRun) -> dict[str, Any]:
        """The whole run as one JSON answer, for a request that does not stream."""
        raise NotImplementedError

    def refusal(self, error: HttpError) -> HttpError:
        """A request refused before its run started, as this protocol says it (headers)."""
        return error
