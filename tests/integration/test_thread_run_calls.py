"""What a run on a thread costs in DynamoDB calls, counted on moto's server: the steps
``threads.runs`` takes for one run (open: make or claim and load; the question, beside the
first model call; a round; the end; the claim given back), each with its own count, so a
change that adds a call shows here."""

from __future__ import annotations

import asyncio

import pytest

from agentloop.events import Done
from agentloop.models import (
    AssistantMessage,
    ChatRequest,
    FunctionCall,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from agentloop.store import Store
from agentloop.threads import ThreadStore
from agentloop.threads.runs import open_thread
from tests.serial_moto import serial_moto  # noqa: F401 (a fixture)
from tests.store_backends import CallCounter, Clock, aws_env, dynamodb_store

OWNER = "key:ada"


@pytest.fixture
def store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Store:
    aws_env(monkeypatch)
    moto = request.getfixturevalue("serial_moto")
    return dynamodb_store(moto, moto.create_table(), Clock())


def _done(messages: list[AssistantMessage | ToolMessage]) -> Done:
    return Done(
        text="ok",
        stop_reason="completed",
        iterations=2,
        usage=Usage(),
        budget_remaining=0,
        messages=list(messages),
    )


def test_the_store_calls_of_a_run_on_a_thread(store: Store) -> None:
    threads = ThreadStore(store, clock=store.backend.clock)  # type: ignore[attr-defined]
    counter = CallCounter(store)
    request = ChatRequest(messages=[UserMessage(content="hi")], thread_id="new")
    call = ToolCall(id="c1", function=FunctionCall(name="echo", arguments="{}"))
    round_ = [AssistantMessage(tool_calls=[call]), ToolMessage(tool_call_id="c1", content="x")]

    async def one_run(request: ChatRequest) -> tuple[str, dict[str, dict[str, int]]]:
        counts: dict[str, dict[str, int]] = {}
        full, held = await open_thread(threads, OWNER, request, 60.0)
        counts["open"] = counter.take()
        held.keep_question()
        await held.save_round(list(round_))  # waits for the question's append first
        counts["round"] = counter.take()
        await held.save(_done([*round_, AssistantMessage(content="ok")]))
        counts["end"] = counter.take()
        await held.release()
        counts["release"] = counter.take()
        assert full.thread_id is not None
        return full.thread_id, counts

    thread_id, first = asyncio.run(one_run(request))
    _, again = asyncio.run(one_run(request.model_copy(update={"thread_id": thread_id})))

    assert first["open"] == {"TransactWriteItems": 1, "GetItem": 2, "PutItem": 1}
    assert again["open"] == {"GetItem": 2, "PutItem": 1, "Query": 1}
    for run in (first, again):
        assert run["round"] == {"GetItem": 2, "TransactWriteItems": 2}, "question + round"
        assert run["end"] == {"GetItem": 1, "TransactWriteItems": 1}
        assert run["release"] == {"GetItem": 1, "DeleteItem": 1}
