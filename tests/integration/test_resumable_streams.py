"""Resumable streams over HTTP (``resumable: true``): a ``/chat`` run whose client drops the
connection mid-answer goes on to its end, and ``GET /chat/stream`` with ``Last-Event-ID``
gives the rest (no frame twice) and then the live frames; 204 when nothing runs on the
thread; another principal's thread is a 404; ``POST /chat/stream/cancel`` stops the run, in
this process or through the store. The scripted model answers slowly (``chunk_delay``) or
waits in a gate tool; the threads and logs are on SQLite."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentloop.streams import StreamLog
from agentloop.streams import writer as writer_module
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.integration.thread_faces import OTHER, ThreadedApp
from tests.sample_tools import gate_tool
from tests.served import PRINCIPAL, TOKEN

JSON = dict[str, Any]
WORDS = [f"word{i}" for i in range(40)]
ANSWER = " ".join(WORDS)
TEXT_PART = {"type": "text", "text": "Hi"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ThreadedApp]:
    with ThreadedApp(tmp_path, "resumable-streams") as app:
        yield app


def messages(buffer: str) -> list[JSON]:
    """The SSE messages of ``buffer`` (comments left out): id, event and data."""
    out: list[JSON] = []
    for block in buffer.split("\n\n"):
        fields: JSON = {}
        for line in block.splitlines():
            name, _, value = line.partition(": ")
            if name in ("id", "event", "data"):
                fields[name] = value
        if "event" in fields:
            out.append({**fields, "data": json.loads(fields["data"])})
    return out


def read_until(response: httpx.Response, stop: str) -> str:
    """The stream's text until a message of type ``stop`` has arrived whole."""
    text = ""
    for chunk in response.iter_text():
        text += chunk
        if any(m["event"] == stop for m in messages(text.rsplit("\n\n", 1)[0] + "\n\n")):
            return text.rsplit("\n\n", 1)[0] + "\n\n"
    return text


def start(served: ThreadedApp, client: httpx.Client, body: JSON) -> Any:
    headers = {"authorization": f"Bearer {TOKEN}"}
    return client.stream("POST", "/chat", json=body, headers=headers)


def resume(served: ThreadedApp, thread_id: str, last: str | None, token: str = TOKEN) -> Any:
    headers = {"authorization": f"Bearer {token}"}
    if last is not None:
        headers["last-event-id"] = last
    client = httpx.Client(base_url=served.url, timeout=20)
    return client, client.stream("GET", f"/chat/stream?thread_id={thread_id}", headers=headers)


def text_of(found: list[JSON]) -> str:
    return "".join(m["data"]["text"] for m in found if m["event"] == "text_delta")


def test_a_dropped_stream_resumes_after_its_last_id_and_the_run_goes_on(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text=ANSWER, chunk_delay=0.02))
    body = {"messages": [{"role": "user", "content": "Count."}], "thread_id": "new"}
    with (
        httpx.Client(base_url=served.url, timeout=20) as client,
        start(served, client, {**body, "resumable": True}) as response,
    ):
        assert response.status_code == 200
        first = messages(read_until(response, "text_delta"))
    # the connection is closed here, mid-answer
    assert [m["event"] for m in first][:2] == ["run_start", "turn_start"]
    ids = [int(m["id"]) for m in first]
    assert ids == list(range(1, len(first) + 1))
    thread_id = first[0]["data"]["thread_id"]
    client, stream = resume(served, thread_id, str(ids[-1]))
    with client, stream as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        rest = messages(response.read().decode())
    assert [int(m["id"]) for m in rest] == list(range(ids[-1] + 1, ids[-1] + 1 + len(rest)))
    assert rest[-1]["event"] == "done"
    assert rest[-1]["data"]["stop_reason"] == "completed"
    assert text_of(first) + text_of(rest) == ANSWER
    [done] = served.runs(1)
    assert done.stop_reason == "completed"  # the client's leaving cancelled nothing
    assert served.kept(thread_id) == [("user", "Count."), ("assistant", ANSWER)]


def test_without_last_event_id_the_whole_stream_is_replayed_then_nothing_runs(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text=ANSWER, chunk_delay=0.02))
    body = {"messages": [{"role": "user", "content": "Count."}], "thread_id": "new"}
    with (
        httpx.Client(base_url=served.url, timeout=20) as client,
        start(served, client, {**body, "resumable": True}) as response,
    ):
        first = messages(read_until(response, "run_start"))
    thread_id = first[0]["data"]["thread_id"]
    client, stream = resume(served, thread_id, None)
    with client, stream as response:
        assert response.status_code == 200
        whole = messages(response.read().decode())
    assert [int(m["id"]) for m in whole] == list(range(1, len(whole) + 1))
    assert whole[0] == first[0]
    assert text_of(whole) == ANSWER
    assert whole[-1]["event"] == "done"
    served.runs(1)
    client, stream = resume(served, thread_id, str(len(whole)))
    with client, stream as response:
        assert response.status_code == 204  # the run has ended: nothing to resume


def test_204_when_nothing_runs_404_for_another_principal_or_no_thread(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text="Hi."), Reply(text=ANSWER, chunk_delay=0.02))
    plain = {"messages": [{"role": "user", "content": "Hi"}], "thread_id": "new"}
    response = served.call("POST", "/chat", json=plain)
    thread_id = messages(response.text)[0]["data"]["thread_id"]
    assert "id" not in messages(response.text)[0]  # not resumable: no ids, no log
    assert served.call("GET", f"/chat/stream?thread_id={thread_id}").status_code == 204
    body = {**plain, "thread_id": thread_id, "resumable": True}
    with (
        httpx.Client(base_url=served.url, timeout=20) as client,
        start(served, client, body) as response,
    ):
        read_until(response, "text_delta")
        for token, path in [
            (OTHER, f"/chat/stream?thread_id={thread_id}"),
            (TOKEN, "/chat/stream?thread_id=th_nothing"),
            (TOKEN, "/chat/stream?thread_id=a%2Fb"),
            (TOKEN, "/chat/stream"),
        ]:
            refused = served.call("GET", path, token)
            assert refused.status_code == 404, (path, refused.text)
            assert refused.json()["error"]["message"] == "no such thread"
        client, stream = resume(served, thread_id, "x")
        with client, stream as bad:
            assert bad.status_code == 400
    served.runs(2)


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/chat", {"messages": [{"role": "user", "content": "Hi"}], "resumable": True}, None),
        (
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": "Hi"}],
                "stream": True,
                "agentloop": {"resumable": True},
            },
            "agentloop.resumable",
        ),
        (
            "/api/chat",
            {
                "id": "chat-1",
                "messages": [
                    {"id": "u", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}
                ],
                "agentloop": {"resumable": True},
            },
            "agentloop.resumable",
        ),
    ],
)
def test_resumable_without_a_thread_is_422_before_anything_runs(
    served: ThreadedApp, llm: ScriptedLLM, path: str, body: JSON, param: str | None
) -> None:
    response = served.call("POST", path, json=body)
    assert response.status_code == 422, response.text
    if param is not None:
        assert response.json()["error"]["param"] == param
    assert "resumable" in response.text
    assert llm.requests == []


# -- stopping a resumable run (its client leaving does not) ---------------------------------


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[tuple[ThreadedApp, threading.Event]]:
    gate = threading.Event()
    with ThreadedApp(tmp_path, "resumable-cancel", [gate_tool(gate)]) as app:
        yield app, gate


def _start_gated_run(served: ThreadedApp, llm: ScriptedLLM) -> tuple[str, httpx.Client, Any]:
    """A resumable run waiting in its gate tool; its thread id and open stream."""
    llm.script(Reply(tool_calls=[call("gate", name="g")]), Reply(text="went on"))
    body = {
        "messages": [{"role": "user", "content": "Wait."}],
        "thread_id": "new",
        "resumable": True,
        "tools": ["gate"],
    }
    client = httpx.Client(base_url=served.url, timeout=20)
    stream = start(served, client, body)
    response = stream.__enter__()
    first = messages(read_until(response, "tool_call_start"))
    return first[0]["data"]["thread_id"], client, stream


def test_cancel_stops_the_run_after_its_round_and_the_thread_keeps_it(
    gated: tuple[ThreadedApp, threading.Event], llm: ScriptedLLM
) -> None:
    served, gate = gated
    thread_id, client, stream = _start_gated_run(served, llm)
    stream.__exit__(None, None, None)  # the client leaves: nothing is cancelled yet
    client.close()
    other = served.call("POST", f"/chat/stream/cancel?thread_id={thread_id}", OTHER)
    assert other.status_code == 404
    asked = served.call("POST", f"/chat/stream/cancel?thread_id={thread_id}")
    assert asked.status_code == 202, asked.text
    assert asked.json() == {"thread_id": thread_id, "cancelling": True}
    gate.set()
    [done] = served.runs(1)
    assert done.stop_reason == "cancelled"
    assert len(llm.requests) == 1, "no model call after the stop"
    kept = served.kept(thread_id)
    assert kept is not None
    assert [role for role, _ in kept] == ["user", "assistant", "tool", "assistant"]
    assert kept[2] == ("tool", json.dumps({"ok": True, "result": "opened g"}))
    assert "the run was cancelled" in kept[3][1]
    after = served.call("POST", f"/chat/stream/cancel?thread_id={thread_id}")
    assert after.status_code == 204, "nothing runs any more"


def test_a_stop_asked_in_the_store_reaches_a_run_of_another_instance(
    gated: tuple[ThreadedApp, threading.Event], llm: ScriptedLLM
) -> None:
    """Deployed, the run's instance is busy streaming, so the cancel lands elsewhere: its
    writer reads the stop from the log (once a second) and cancels its run."""
    served, gate = gated
    thread_id, client, stream = _start_gated_run(served, llm)
    threads = served.app.state.threads  # type: ignore[attr-defined]
    log = StreamLog(threads.store, clock=threads.clock)
    head = asyncio.run(log.head(PRINCIPAL.id, thread_id))
    assert head is not None
    asyncio.run(log.ask_stop(PRINCIPAL.id, thread_id, head.run_key))  # as another instance
    token = writer_module._HERE[(PRINCIPAL.id, thread_id)][1]
    for _ in range(200):  # the writer reads the stop within STOP_POLL_S
        if token.cancelled:
            break
        threading.Event().wait(0.05)
    assert token.cancelled
    gate.set()
    stream.__exit__(None, None, None)
    client.close()
    [done] = served.runs(1)
    assert done.stop_reason == "cancelled"
    assert len(llm.requests) == 1
