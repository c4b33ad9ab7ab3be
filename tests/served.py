"""The chat app as tests meet it: its test credentials, a service, and the app on a socket.

``ServedApp`` runs the app on a loopback port (``LoopbackServer``) and keeps the runs its
service finished, as the service's ``on_finish`` hook reports them. A test that needs a run's
``done`` (a stream the face cut ends before its run has wound down; a run the client left)
waits on that hook's signal, so it wakes the moment the run ends and never polls a clock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from agentloop.auth import BearerAuth, hash_token
from agentloop.config import AgentConfig
from agentloop.events import Done
from agentloop.http_api import InvocationInfo, RequestLimits
from agentloop.server.identity import api_keys
from agentloop.server.service import ChatService
from agentloop.tools.base import Tool
from agentloop.tools.registry import ToolRegistry
from chat_app import create_app
from tests.fakes.loopback import LoopbackServer
from tests.helpers import TEST_CONFIG

TOKEN = "al_test-token-123"
AUTH = {"authorization": f"Bearer {TOKEN}"}
PRINCIPAL = BearerAuth(lambda: [hash_token(TOKEN)]).principal(AUTH["authorization"])
"""Who ``TOKEN`` is: the caller its runs are for (and its continuation tokens bound to)."""
# TestClient's default base URL, http://testserver, is not a Host the local app answers to.
LOCAL = "http://127.0.0.1"
WAIT_S = 10.0
"""How long a test waits for a run to finish before it fails (a run here ends in well under)."""


def make_service(
    tools: list[Tool] | None = None,
    config: AgentConfig = TEST_CONFIG,
    heartbeat_s: float = 10.0,
    limits: RequestLimits | None = None,
    models: tuple[str, ...] = (),
) -> ChatService:
    """The app's service with ``tools``, answering bearer ``TOKEN`` (``models``: what
    ``GET /v1/models`` lists, the default first)."""
    hashes = [hash_token(TOKEN)]
    return ChatService(
        config=config,
        tools=ToolRegistry(tools or []),
        authenticate=api_keys(BearerAuth(lambda: hashes)),
        auth_mode="bearer",
        limits=limits or RequestLimits(),
        heartbeat_s=heartbeat_s,
        models=models,
    )


class FinishedRuns:
    """The runs a service finished, in order; register ``record`` as its ``on_finish`` hook."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._runs: list[tuple[Done, InvocationInfo]] = []

    def record(self, done: Done, info: InvocationInfo) -> None:
        with self._changed:
            self._runs.append((done, info))
            self._changed.notify_all()

    @property
    def runs(self) -> list[tuple[Done, InvocationInfo]]:
        """Each finished run's ``done`` and request, so far."""
        with self._changed:
            return list(self._runs)

    def wait(self, count: int, timeout: float = WAIT_S) -> list[Done]:
        """The finished runs' ``done`` events once there are ``count`` (all there are, should
        ``timeout`` pass first: the test's own assertion then says what is missing)."""
        self.wait_for(lambda runs: len(runs) >= count, timeout)
        return [done for done, _ in self.runs]

    def wait_for(
        self, found: Callable[[list[tuple[Done, InvocationInfo]]], bool], timeout: float = WAIT_S
    ) -> bool:
        """Wait until ``found`` holds of the finished runs; whether it did within ``timeout``."""
        with self._changed:
            return self._changed.wait_for(lambda: found(self._runs), timeout)

    def of_request(self, request_id: str, timeout: float = WAIT_S) -> Done:
        """The ``done`` of the one run that answered request ``request_id``, once it finished."""

        def answered(runs: list[tuple[Done, InvocationInfo]]) -> bool:
            return any(info.request_id == request_id for _, info in runs)

        if not self.wait_for(answered, timeout):
            raise AssertionError(f"no finished run for request {request_id}")
        [done] = [done for done, info in self.runs if info.request_id == request_id]
        return done


class ServedApp(LoopbackServer):
    """The chat app of ``service`` on a loopback port, and the runs the service finished.

    A context manager (``LoopbackServer``'s); subclasses add what a face's tests call the app
    with (an SDK client, a raw request)."""

    def __init__(self, service: ChatService, *, name: str, lifespan: str = "off") -> None:
        super().__init__(create_app(service), name=name, lifespan=lifespan)
        self.service = service
        self.finished_runs = FinishedRuns()
        service.on_finish.append(self.finished_runs.record)

    @property
    def finished(self) -> list[Done]:
        """The finished runs' ``done`` events so far (no wait: for "no run started")."""
        return [done for done, _ in self.finished_runs.runs]

    def runs(self, count: int, timeout: float = WAIT_S) -> list[Done]:
        """The finished runs' ``done`` events, once there are ``count``."""
        return self.finished_runs.wait(count, timeout)

    def last_run(self, timeout: float = WAIT_S) -> Done:
        """The latest run's ``done``, once one finished."""
        finished = self.runs(1, timeout)
        assert finished, "no run finished"
        return finished[-1]

    def done_of_message(self, message: dict[str, Any]) -> Done:
        """The run that answered with the UI ``message`` (``/api/chat`` makes its id from the
        request id), once it finished."""
        message_id = str(message["id"])
        assert message_id.startswith("msg-"), message_id
        return self.finished_runs.of_request(message_id.removeprefix("msg-"))
