"""Stored responses through the openai SDK: ``store`` (true unless told), ``previous_response_id``
over three turns, ``responses.retrieve``, ``responses.delete`` and
``responses.input_items.list``, and a second principal who gets a 404 on each. The model is
the scripted LLM; the app is served on a loopback socket, its store SQLite (and DynamoDB on
moto's server for a snapshot larger than one item)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from agentloop.auth import BearerAuth, hash_token
from agentloop.faces.responses.saved import ResponseStore
from agentloop.server.identity import api_keys
from agentloop.store import Store
from agentloop.threads import ThreadStore
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM
from tests.serial_moto import serial_moto  # noqa: F401 (a fixture)
from tests.served import TOKEN, ServedApp, make_service
from tests.store_backends import BACKENDS, Clock, backend_store, sqlite_store

MODEL = "groq:llama-3.3-70b-versatile"
OTHER = "al_other-token-456"
HASHES = [hash_token(TOKEN), hash_token(OTHER)]
ADA = BearerAuth(lambda: HASHES).principal(f"Bearer {TOKEN}").id


class Served(ServedApp):
    """The app answering two tokens, its threads and responses on ``store``."""

    def __init__(self, store: Store, clock: Clock) -> None:
        service = make_service()
        service.authenticate = api_keys(BearerAuth(lambda: HASHES))
        super().__init__(service, name="responses-store")
        self.threads = ThreadStore(store, clock=clock)
        self.app.state.threads = self.threads  # type: ignore[attr-defined]

    def client(self, token: str = TOKEN) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=token, max_retries=0)

    def get(self, path: str, token: str = TOKEN) -> httpx.Response:
        headers = {"authorization": f"Bearer {token}"}
        return httpx.get(f"{self.url}{path}", headers=headers, timeout=20)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    clock = Clock()
    with Served(sqlite_store(tmp_path / "store.db", clock), clock) as app:
        yield app


def _create(client: openai.OpenAI, stream: bool, **fields: Any) -> Any:
    """``responses.create``, streamed or not: the final response object."""
    if not stream:
        return client.responses.create(model=MODEL, **fields)
    events = list(client.responses.create(model=MODEL, stream=True, **fields))
    assert events[-1].type == "response.completed", [e.type for e in events]
    return events[-1].response


def _turns(request: RecordedRequest) -> list[tuple[str, str]]:
    """The conversation the model was sent, after the agent's own system prompt."""
    first, *rest = request.messages
    assert first["role"] == "system"
    return [(m["role"], str(m["content"])) for m in rest]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_three_turns_continue_from_the_previous_response(
    served: Served, llm: ScriptedLLM, stream: bool
) -> None:
    llm.script(Reply(text="A1"), Reply(text="A2"), Reply(text="A3"))
    client = served.client()

    first = _create(client, stream, input="Q1", instructions="Be brief.")
    second = _create(client, stream, input="Q2", previous_response_id=first.id)
    third = _create(client, stream, input="Q3", previous_response_id=second.id)

    assert (first.output_text, second.output_text, third.output_text) == ("A1", "A2", "A3")
    assert (first.to_dict()["store"], first.previous_response_id) == (True, None)
    assert third.previous_response_id == second.id
    assert _turns(llm.requests[0]) == [("system", "Be brief."), ("user", "Q1")]
    assert _turns(llm.requests[2]) == [
        ("user", "Q1"),
        ("assistant", "A1"),
        ("user", "Q2"),
        ("assistant", "A2"),
        ("user", "Q3"),
    ], "the earlier turns, without the first response's instructions"
    assert len({first.id, second.id, third.id}) == 3
    assert all(len(r.id.removeprefix("resp_")) >= 32 for r in (first, second, third))


def test_a_response_can_be_continued_twice(served: Served, llm: ScriptedLLM) -> None:
    llm.script(Reply(text="A1"), Reply(text="left"), Reply(text="right"))
    client = served.client()
    first = _create(client, False, input="Q1")

    _create(client, False, input="go left", previous_response_id=first.id)
    _create(client, True, input="go right", previous_response_id=first.id)

    assert _turns(llm.requests[2]) == [("user", "Q1"), ("assistant", "A1"), ("user", "go right")]


def test_retrieve_list_and_delete(served: Served, llm: ScriptedLLM) -> None:
    llm.script(Reply(text="Hello, Ada."))
    client = served.client()
    made = client.responses.create(
        model=MODEL,
        input=[
            {"role": "developer", "content": "Greet by name."},
            {"role": "user", "content": [{"type": "input_text", "text": "I am Ada."}]},
        ],
        metadata={"k": "v"},
    )

    got = client.responses.retrieve(made.id)
    assert got.model_dump() == made.model_dump()

    items = list(client.responses.input_items.list(made.id))
    listed: list[dict[str, Any]] = [i.to_dict() for i in items]
    assert [(i["role"], i["content"][0]["text"]) for i in listed] == [
        ("user", "I am Ada."),
        ("developer", "Greet by name."),
    ], "newest first, as OpenAI lists them"
    asc = client.responses.input_items.list(made.id, order="asc", limit=1)
    assert [i.to_dict()["role"] for i in asc.data] == ["developer"]
    assert asc.has_more
    assert [i.to_dict()["role"] for i in asc] == ["developer", "user"]
    page = served.get(f"/v1/responses/{made.id}/input_items").json()
    assert (page["object"], page["has_more"]) == ("list", False)
    assert page["first_id"] == page["data"][0]["id"]
    assert page["last_id"] == page["data"][-1]["id"]

    deleted = httpx.delete(
        f"{served.url}/v1/responses/{made.id}", headers={"authorization": f"Bearer {TOKEN}"}
    )
    assert deleted.json() == {"id": made.id, "object": "response", "deleted": True}
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(made.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(made.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model=MODEL, input="again", previous_response_id=made.id)
    assert len(llm.requests) == 1


def test_another_principal_gets_404_everywhere(served: Served, llm: ScriptedLLM) -> None:
    llm.script(Reply(text="mine"))
    mine = served.client().responses.create(model=MODEL, input="secret")
    theirs = served.client(OTHER)

    with pytest.raises(openai.NotFoundError):
        theirs.responses.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError):
        theirs.responses.input_items.list(mine.id)
    with pytest.raises(openai.NotFoundError):
        theirs.responses.delete(mine.id)
    with pytest.raises(openai.NotFoundError) as caught:
        theirs.responses.create(model=MODEL, input="more", previous_response_id=mine.id)
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["param"] == "previous_response_id"
    assert len(llm.requests) == 1, "no run for the other principal"
    assert served.client().responses.retrieve(mine.id).output_text == "mine", "still there"
    assert served.get("/threads").json()["data"] == [], "a stored response is not a thread"


def test_store_false_keeps_nothing(served: Served, llm: ScriptedLLM) -> None:
    llm.script(Reply(text="gone"), Reply(text="streamed"))
    client = served.client()
    plain = client.responses.create(model=MODEL, input="Q", store=False)
    streamed = _create(client, True, input="Q", store=False)

    assert (plain.to_dict()["store"], streamed.to_dict()["store"]) == (False, False)
    for made in (plain, streamed):
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(made.id)


def test_bad_ids_and_list_params_are_precise_4xx(served: Served, llm: ScriptedLLM) -> None:
    llm.script(Reply(text="ok"))
    made = served.client().responses.create(model=MODEL, input="Q")
    for odd in ("a.b", "x" * 300, "%C3%A9", "resp_unknown"):
        assert served.get(f"/v1/responses/{odd}").status_code == 404, odd
    base = f"/v1/responses/{made.id}/input_items"
    for query, param in (("order=up", "order"), ("limit=0", "limit"), ("after=nope", "after")):
        answer = served.get(f"{base}?{query}")
        assert answer.status_code == 400, query
        assert answer.json()["error"]["param"] == param
    assert served.get(f"/v1/responses/{made.id}", "al_nobody").status_code == 401


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=BACKENDS)
def any_store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> Store:
    return backend_store(request, tmp_path, clock, monkeypatch)


def test_a_snapshot_larger_than_an_item_continues(
    any_store: Store, clock: Clock, llm: ScriptedLLM
) -> None:
    long = "word " * 120_000  # 600 KB: more than one DynamoDB item (400 KB)
    pieces = [long[i : i + 60_000] for i in range(0, len(long), 60_000)]  # streamed quickly
    llm.script(Reply(text=long, text_pieces=pieces), Reply(text="short"))
    with Served(any_store, clock) as served:
        client = served.client()
        first = client.responses.create(model=MODEL, input="Q1")
        assert client.responses.retrieve(first.id).output_text == long
        second = client.responses.create(model=MODEL, input="Q2", previous_response_id=first.id)
        store = response_store_of(served)
        saved = asyncio.run(store.load(ADA, second.id))
    conversation = [(m["role"], m["content"]) for m in saved.messages]
    assert conversation == [
        ("user", "Q1"),
        ("assistant", long),
        ("user", "Q2"),
        ("assistant", "short"),
    ]
    sent = _turns(llm.requests[1])
    assert sent[-1] == ("user", "Q2")
    assert "2 earlier messages" in sent[0][1], "the earlier turns reached the loop (too long)"


def response_store_of(served: Served) -> ResponseStore:
    threads = served.threads
    return ResponseStore(threads.store, threads.ttl_s, threads.clock)
