"""``POST /v1/responses`` through the one face route (``server.faces.serve``) and its kept
requests (``Face.kept``): the instructions stay first when a response is continued, and a
store that refuses makes the answer a 503 (streamed: ``error`` then ``response.failed``),
the run's answer never reaching the client as if it were kept. The store is a real SQLite
file, closed under the running app; the model is the scripted LLM."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from agentloop.store import Store
from tests.fakes.scripted_llm import Reply, ScriptedLLM
from tests.integration.test_responses_store import MODEL, TOKEN, Served, _turns
from tests.store_backends import Clock, sqlite_store

AUTH = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return sqlite_store(tmp_path / "store.db", Clock())


@pytest.fixture
def served(store: Store) -> Iterator[Served]:
    with Served(store, Clock()) as app:
        yield app


def _refuse(store: Store) -> None:
    """Close the store under the running app: every operation now raises StoreUnavailable."""
    store.backend.close()


def _post(served: Served, **body: object) -> httpx.Response:
    return httpx.post(f"{served.url}/v1/responses", json=body, headers=AUTH, timeout=20)


def test_instructions_and_a_developer_item_keep_their_places(
    served: Served, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text="A1"), Reply(text="A2"))
    client = served.client()
    first = client.responses.create(model=MODEL, input="Q1")
    client.responses.create(
        model=MODEL,
        instructions="Be brief.",
        input=[
            {"role": "developer", "content": "Say it twice."},
            {"role": "user", "content": "Q2"},
        ],
        previous_response_id=first.id,
    )
    assert _turns(llm.requests[1]) == [
        ("system", "Be brief."),
        ("user", "Q1"),
        ("assistant", "A1"),
        ("system", "Say it twice."),
        ("user", "Q2"),
    ]


def test_a_refusing_store_makes_the_answer_a_503(
    served: Served, store: Store, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text="not kept"))
    _refuse(store)
    answer = _post(served, model=MODEL, input="Q")
    assert answer.status_code == 503, answer.text
    assert "not kept" not in answer.text
    assert len(llm.requests) == 1, "the run ran; its answer could not be kept"


def test_a_refusing_store_fails_the_stream_before_it_completes(
    served: Served, store: Store, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text="streamed"), Reply(text="again"))
    _refuse(store)
    answer = _post(served, model=MODEL, input="Q", stream=True)
    assert answer.status_code == 200
    events = [
        json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: ")
    ]
    types = [event["type"] for event in events]
    assert types[-2:] == ["error", "response.failed"], types
    assert "response.completed" not in types
    assert "response.output_text.done" not in types, "no closing frame before the failure"
    assert (events[-2]["code"], events[-1]["response"]["status"]) == ("503", "failed")
    with pytest.raises(openai.APIError, match="store is unavailable"):
        list(served.client().responses.create(model=MODEL, input="Q", stream=True))


def test_store_false_on_a_refusing_store_is_answered(
    served: Served, store: Store, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text="fine"), Reply(text="streamed"))
    _refuse(store)
    plain = served.client().responses.create(model=MODEL, input="Q", store=False)
    assert plain.output_text == "fine"
    events = list(
        served.client().responses.create(model=MODEL, input="Q", store=False, stream=True)
    )
    assert events[-1].type == "response.completed"


def test_previous_response_id_on_a_refusing_store_is_a_503_before_any_run(
    served: Served, store: Store, llm: ScriptedLLM
) -> None:
    _refuse(store)
    answer = _post(served, model=MODEL, input="Q", previous_response_id="resp_" + "a" * 48)
    assert answer.status_code == 503, answer.text
    assert llm.requests == []
    with pytest.raises(openai.InternalServerError):
        served.client().responses.create(
            model=MODEL, input="Q", store=False, previous_response_id="resp_" + "b" * 48
        )
    assert llm.requests == []
