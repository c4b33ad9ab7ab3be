"""The app as the faces' thread tests meet it: two principals (``TOKEN`` and ``OTHER``), the
scripted model, the threads on SQLite; and what the model was sent, as (role, text) pairs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from agentloop.auth import BearerAuth, hash_token
from agentloop.server.identity import api_keys
from agentloop.threads import ThreadStore
from agentloop.tools.base import Tool
from tests.fakes.scripted_llm import RecordedRequest
from tests.helpers import parse_sse
from tests.served import TOKEN, ServedApp, make_service
from tests.store_backends import Clock, sqlite_store

OTHER = "al_other-token-456"
"""A second principal's token."""


class ThreadedApp(ServedApp):
    """The app answering ``TOKEN`` and ``OTHER``, its threads on SQLite under ``tmp``."""

    def __init__(self, tmp: Path, name: str, tools: list[Tool] | None = None) -> None:
        service = make_service(tools or [])
        hashes = [hash_token(TOKEN), hash_token(OTHER)]
        service.authenticate = api_keys(BearerAuth(lambda: hashes))
        super().__init__(service, name=name)
        clock = Clock()
        store = ThreadStore(sqlite_store(tmp / "store.db", clock), clock=clock)
        self.app.state.threads = store  # type: ignore[attr-defined]

    def call(self, method: str, path: str, token: str = TOKEN, **kwargs: Any) -> httpx.Response:
        headers = {"authorization": f"Bearer {token}"}
        with httpx.Client(base_url=self.url, timeout=20) as client:
            return client.request(method, path, headers=headers, **kwargs)

    def chat_events(
        self, body: dict[str, Any], token: str = TOKEN, timeout: float = 30
    ) -> list[dict[str, Any]]:
        """The events of a ``POST /chat`` run, as it streamed them (asserting a 200)."""
        headers = {"authorization": f"Bearer {token}"}
        with (
            httpx.Client(base_url=self.url, timeout=timeout) as client,
            client.stream("POST", "/chat", json=body, headers=headers) as response,
        ):
            assert response.status_code == 200, response.read()
            return [data for _, data in parse_sse(response.iter_lines()) if data is not None]

    def kept(self, thread_id: str, token: str = TOKEN) -> list[tuple[str, str]] | None:
        """The thread's messages as ``token``'s principal reads them (None: a 404)."""
        response = self.call("GET", f"/threads/{thread_id}", token)
        if response.status_code == 404:
            return None
        assert response.status_code == 200, response.text
        return [(m["role"], m.get("content") or "") for m in response.json()["messages"]]


def conversation(request: RecordedRequest) -> list[tuple[str, str]]:
    """What the model was sent, the server's system prompt left out."""
    return [
        (str(m["role"]), str(m.get("content") or ""))
        for m in request.messages
        if m["role"] != "system"
    ]
