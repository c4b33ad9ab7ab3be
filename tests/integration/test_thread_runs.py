"""Runs on threads through ``POST /chat``: the app on a loopback port, the scripted model, the
threads on SQLite (and once on moto's DynamoDB). A client sends only its new message; what
the model is sent, what the thread keeps, a client that leaves mid-round, one run at a time,
and another principal's thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentloop.auth import BearerAuth, hash_token
from agentloop.server.identity import api_keys
from agentloop.store import Store
from agentloop.threads import ThreadStore
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.helpers import parse_sse
from tests.sample_tools import echo, gate_tool, sleeper
from tests.served import AUTH, PRINCIPAL, TOKEN, ServedApp, make_service
from tests.store_backends import Clock, sqlite_store

OTHER = "al_other-token-456"
OTHER_AUTH = {"authorization": f"Bearer {OTHER}"}
NOT_FOUND = {
    "error": {"message": "no such thread", "type": "not_found", "param": None, "code": 404}
}


class Served(ServedApp):
    """The app answering two tokens (two principals), its threads on ``store``."""

    def __init__(self, store: Store, clock: Clock, gate: threading.Event | None = None) -> None:
        tools = [sleeper([]), echo, *([gate_tool(gate)] if gate is not None else [])]
        service = make_service(tools)
        hashes = [hash_token(TOKEN), hash_token(OTHER)]
        service.authenticate = api_keys(BearerAuth(lambda: hashes))
        super().__init__(service, name="thread-runs")
        self.app.state.threads = ThreadStore(store, clock=clock)  # type: ignore[attr-defined]

    def chat(self, body: dict[str, Any], auth: dict[str, str] = AUTH) -> httpx.Response:
        with httpx.Client(base_url=self.url, timeout=20) as client:
            return client.post("/chat", json={"model": "groq:m", **body}, headers=auth)

    def get(self, path: str, auth: dict[str, str] = AUTH) -> httpx.Response:
        with httpx.Client(base_url=self.url, timeout=20) as client:
            return client.get(path, headers=auth)


def events(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    return [data for _, data in parse_sse(iter(response.text.splitlines())) if data is not None]


def ask(served: Served, thread_id: str, text: str, **extra: Any) -> list[dict[str, Any]]:
    message = {"role": "user", "content": text}
    return events(served.chat({"messages": [message], "thread_id": thread_id, **extra}))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def served(tmp_path: Path, clock: Clock) -> Iterator[Served]:
    with Served(sqlite_store(tmp_path / "store.db", clock), clock) as app:
        yield app


def test_a_thread_keeps_the_conversation_and_the_client_sends_only_the_new_message(
    served: Served, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text="Paris."), Reply(text="About 2.1 million."))
    first = ask(served, "new", "Capital of France?")
    thread_id = first[0]["thread_id"]
    assert first[0]["type"] == "run_start"
    assert thread_id.startswith("th_")
    assert first[-1]["type"] == "done"
    assert first[-1]["text"] == "Paris."

    second = ask(served, thread_id, "Its population?")
    assert second[0]["thread_id"] == thread_id
    assert second[-1]["text"] == "About 2.1 million."
    sent = [(m["role"], m.get("content")) for m in llm.requests[1].messages[1:]]
    assert sent == [
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
        ("user", "Its population?"),
    ]
    kept = served.get(f"/threads/{thread_id}").json()
    assert [m["content"] for m in kept["messages"]] == [
        "Capital of France?",
        "Paris.",
        "Its population?",
        "About 2.1 million.",
    ]


def test_a_run_without_a_thread_keeps_nothing(served: Served, llm: ScriptedLLM) -> None:
    llm.script(Reply(text="ok"))
    run = events(served.chat({"messages": [{"role": "user", "content": "hi"}]}))
    assert run[0]["thread_id"] is None
    assert served.get("/threads").json()["data"] == []


def test_stop_mid_round_keeps_the_round_and_continue_sends_its_results(
    served: Served, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text="Hi."))
    thread_id = ask(served, "new", "Say hi", tools=[])[0]["thread_id"]
    llm.script(
        Reply(tool_calls=[call("sleep", label="nap", seconds=0.3)]),
        Reply(text="Carried on."),
    )
    body = {
        "model": "groq:m",
        "messages": [{"role": "user", "content": "Nap, then tell me."}],
        "thread_id": thread_id,
        "tools": ["sleep"],
    }
    with (
        httpx.Client(timeout=10) as http,
        http.stream("POST", f"{served.url}/chat", json=body, headers=AUTH) as response,
    ):
        for line in response.iter_lines():
            if line == "event: tool_call_start":
                break  # Stop, while the tool runs
    [_, stopped] = served.runs(2)
    assert stopped.stop_reason == "cancelled"

    ask(served, thread_id, "continue", tools=["sleep"])
    sent = llm.requests[-1].messages
    results = [m for m in sent if m["role"] == "tool"]
    assert len(results) == 1, sent
    assert "nap" in results[0]["content"]
    calls = [c for m in sent if m["role"] == "assistant" for c in m.get("tool_calls") or ()]
    assert [c["id"] for c in calls] == [results[0]["tool_call_id"]]
    assert sent[-1] == {"role": "user", "content": "continue"}


def test_each_finished_round_is_kept_before_the_run_ends(
    tmp_path: Path, clock: Clock, llm: ScriptedLLM
) -> None:
    """A process that dies mid-run loses at most its round in progress: while the third
    round waits, the thread already holds the question and the first two rounds."""
    gate = threading.Event()
    with Served(sqlite_store(tmp_path / "store.db", clock), clock, gate) as served:
        llm.script(Reply(text="ready"))
        thread_id = ask(served, "new", "start")[0]["thread_id"]
        llm.script(
            Reply(tool_calls=[call("sleep", label="one", seconds=0)]),
            Reply(tool_calls=[call("sleep", label="two", seconds=0)]),
            Reply(tool_calls=[call("gate", name="three")]),
            Reply(text="all three"),
        )
        body = {
            "model": "groq:m",
            "messages": [{"role": "user", "content": "three rounds"}],
            "thread_id": thread_id,
            "tools": ["sleep", "gate"],
        }
        with (
            httpx.Client(timeout=10) as http,
            http.stream("POST", f"{served.url}/chat", json=body, headers=AUTH) as response,
        ):
            lines = response.iter_lines()
            starts = 0
            for line in lines:
                starts += line == "event: tool_call_start"
                if starts == 3:
                    break
            kept = served.get(f"/threads/{thread_id}").json()["messages"]
            gate.set()
            rest = "\n".join(lines)
        assert "all three" in rest
        assert [m["role"] for m in kept] == [
            "user",
            "assistant",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
        ]
        assert kept[2]["content"] == "three rounds"
        final = served.get(f"/threads/{thread_id}").json()["messages"]
        assert final[: len(kept)] == kept, "nothing saved twice or out of order"
        assert [m["role"] for m in final[len(kept) :]] == ["assistant", "tool", "assistant"]
        assert final[-1]["content"] == "all three"


def test_a_paused_run_leaves_the_thread_a_conversation_a_provider_takes(
    served: Served, llm: ScriptedLLM
) -> None:
    llm.script(Reply(tool_calls=[call("echo", text="rm -rf")]))
    paused = ask(served, "new", "Clean up", tools=["echo"], approval_tools=["echo"])
    thread_id = paused[0]["thread_id"]
    assert paused[-1]["stop_reason"] == "approval_required"
    kept = served.get(f"/threads/{thread_id}").json()["messages"]
    assert kept == [{"role": "user", "content": "Clean up"}], "not the turn whose call waits"

    llm.script(Reply(text="Never mind then."))
    assert ask(served, thread_id, "Forget it")[-1]["text"] == "Never mind then."
    sent = [(m["role"], m.get("content")) for m in llm.requests[-1].messages[1:]]
    assert sent == [("user", "Clean up"), ("user", "Forget it")]


def test_another_principals_thread_is_a_404_on_chat(served: Served, llm: ScriptedLLM) -> None:
    llm.script(Reply(text="mine"))
    thread_id = ask(served, "new", "private question")[0]["thread_id"]
    theirs = served.chat(
        {"messages": [{"role": "user", "content": "read it"}], "thread_id": thread_id},
        OTHER_AUTH,
    )
    assert theirs.status_code == 404
    assert theirs.json() == NOT_FOUND
    made_up = served.chat({"messages": [{"role": "user", "content": "x"}], "thread_id": "th_x"})
    assert made_up.status_code == 404
    assert made_up.json() == NOT_FOUND
    assert len(llm.requests) == 1, "no model call for a refused thread"
    assert served.get(f"/threads/{thread_id}", OTHER_AUTH).status_code == 404


def test_a_refused_request_leaves_no_new_thread(served: Served, llm: ScriptedLLM) -> None:
    refused = served.chat(
        {"messages": [{"role": "user", "content": "x"}], "thread_id": "new", "tools": ["nope"]}
    )
    assert refused.status_code == 422, refused.text
    assert served.get("/threads").json()["data"] == [], "no empty thread in the list"
    assert llm.requests == []


def test_bad_thread_ids_are_422(served: Served) -> None:
    for bad in ["", "a/b", "x" * 129, "th id", 7]:
        answer = served.chat({"messages": [{"role": "user", "content": "x"}], "thread_id": bad})
        assert answer.status_code == 422, (bad, answer.text)


def test_one_run_at_a_time_per_thread(tmp_path: Path, clock: Clock, llm: ScriptedLLM) -> None:
    gate = threading.Event()
    store = sqlite_store(tmp_path / "store.db", clock)
    with Served(store, clock, gate) as served:
        llm.script(Reply(text="ready"))
        thread_id = ask(served, "new", "start")[0]["thread_id"]
        llm.script(Reply(tool_calls=[call("gate", name="g")]), Reply(text="first done"))
        body = {
            "model": "groq:m",
            "messages": [{"role": "user", "content": "first"}],
            "thread_id": thread_id,
            "tools": ["gate"],
        }
        with (
            httpx.Client(timeout=10) as http,
            http.stream("POST", f"{served.url}/chat", json=body, headers=AUTH) as response,
        ):
            lines = response.iter_lines()
            for line in lines:
                if line == "event: tool_call_start":
                    break
            second = served.chat(
                {"messages": [{"role": "user", "content": "second"}], "thread_id": thread_id}
            )
            assert second.status_code == 409, second.text
            gate.set()
            rest = "\n".join(lines)
        assert "first done" in rest
        kept = served.get(f"/threads/{thread_id}").json()["messages"]
        users = [m["content"] for m in kept if m["role"] == "user"]
        assert users == ["start", "first"], "the refused run added nothing"
        assert ask(served, thread_id, "third")[-1]["type"] == "done", "free again"


def test_fifty_runs_on_fifty_threads_lose_nothing(
    tmp_path: Path, clock: Clock, llm: ScriptedLLM
) -> None:
    """Through the app on SQLite (the thread store's own tests race appends on DynamoDB)."""
    llm.respond_with(lambda req: Reply(text=f"answer to {req.messages[-1]['content']}"))
    with Served(sqlite_store(tmp_path / "store.db", clock), clock) as served:
        ids = asyncio.run(_seeded(served.app.state.threads, 50))  # type: ignore[attr-defined]
        results: dict[int, list[dict[str, Any]]] = {}

        def go(i: int) -> None:
            results[i] = ask(served, ids[i], f"again {i}")

        workers = [threading.Thread(target=go, args=(i,)) for i in range(50)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert sorted(results) == list(range(50))
        for i, thread_id in enumerate(ids):
            kept = served.get(f"/threads/{thread_id}").json()["messages"]
            assert [m["content"] for m in kept] == [
                f"q{i}",
                f"answer to q{i}",
                f"again {i}",
                f"answer to again {i}",
            ]


def test_a_store_that_is_down_is_a_503(tmp_path: Path, clock: Clock, llm: ScriptedLLM) -> None:
    down = sqlite_store(tmp_path / "file" / "store.db", clock)  # cannot be opened
    (tmp_path / "file").write_text("not a folder")
    with Served(down, clock) as served:
        answer = served.chat({"messages": [{"role": "user", "content": "x"}], "thread_id": "new"})
    assert answer.status_code == 503, answer.text
    assert llm.requests == []


async def _seeded(threads: ThreadStore, count: int) -> list[str]:
    """``count`` threads of the test's caller, each with one exchange, as a run leaves them."""
    ids = []
    for i in range(count):
        made = await threads.create(PRINCIPAL.id)
        exchange = [
            {"role": "user", "content": f"q{i}"},
            {"role": "assistant", "content": f"answer to q{i}"},
        ]
        await threads.append(PRINCIPAL.id, made.id, exchange, key="seed")
        ids.append(made.id)
    return ids
