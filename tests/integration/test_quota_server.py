"""Per-principal limits through the app on a loopback port: ``/chat`` (and the other faces)
with the scripted model behind the real SDKs, the quota on SQLite and on DynamoDB (moto's
server, serialized: see tests/serial_moto.py), and the clock injected.

A scripted call reports 800 prompt and 200 completion tokens of ``groq:m``, priced here at
$10 per million tokens either way: $0.01 a call, so spending is predictable.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from agentloop.app_settings import AppSettings
from agentloop.ask_llm import ask_llm_tool
from agentloop.auth import BearerAuth, hash_token
from agentloop.config import ConfigurationError
from agentloop.events import Done, Event, Notice, event_adapter
from agentloop.pricing import PriceOverride
from agentloop.principal import Principal
from agentloop.quota import LimitsConfig, Quota, Want
from agentloop.server.identity import api_keys
from agentloop.server.service import service_from_env
from agentloop.store import Store
from agentloop.tools.base import ToolContext, tool
from agentloop.tools.registry import ToolRegistry
from chat_app import create_app
from tests.fakes.loopback import LoopbackServer
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG, parse_sse
from tests.sample_tools import TextArgs
from tests.serial_moto import serial_moto  # noqa: F401 (a fixture)
from tests.served import AUTH, TOKEN, ServedApp, make_service
from tests.store_backends import (
    BACKENDS,
    START,
    Clock,
    Moto,
    aws_env,
    backend_store,
    dynamodb_store,
    free_port,
    sqlite_store,
)

OTHER = "al_other-token-456"
OTHER_AUTH = {"authorization": f"Bearer {OTHER}"}
CONFIG = TEST_CONFIG.model_copy(
    update={"prices": {"groq:m": PriceOverride(input=10, output=10)}, "default_model": "groq:m"}
)
CALL_USD = 0.01
MIDNIGHT = int(START) - int(START) % 86_400 + 86_400
HI = [{"role": "user", "content": "hi"}]


class Gate:
    """A tool that holds its run until the test opens the gate, and counts who is waiting."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.changed = threading.Condition()
        self.waiting = 0

    def wait_for(self, count: int) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.waiting >= count, timeout=10)

    def tool(self) -> Any:
        gate = self

        @tool(name="hold")
        async def hold(args: TextArgs, ctx: ToolContext) -> str:
            """Wait for the gate."""
            import asyncio

            with gate.changed:
                gate.waiting += 1
                gate.changed.notify_all()
            await asyncio.to_thread(gate.open.wait, 10)
            return args.text

        return hold


class Served(ServedApp):
    """The app with a quota, answering two bearer tokens (two principals)."""

    def chat(self, body: dict[str, Any], auth: dict[str, str] = AUTH) -> httpx.Response:
        """POST /chat to its end (the stream read whole)."""
        with httpx.Client(base_url=self.url, timeout=20) as client:
            return client.post("/chat", json={"model": "groq:m", **body}, headers=auth)

    def openai(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=TOKEN, max_retries=0)


def events_of(response: httpx.Response) -> list[Event]:
    assert response.status_code == 200, response.text
    lines = response.text.splitlines()
    return [event_adapter().validate_python(d) for _, d in parse_sse(iter(lines)) if d is not None]


def done_of(response: httpx.Response) -> Done:
    done = events_of(response)[-1]
    assert isinstance(done, Done)
    return done


def refusal(response: httpx.Response, param: str) -> int:
    """The refusal's Retry-After, once its status, param and header are checked."""
    assert response.status_code == 429, response.text
    assert response.json()["error"]["param"] == param
    retry = int(response.headers["retry-after"])
    assert retry >= 1
    return retry


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=BACKENDS)
def store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> Store:
    return backend_store(request, tmp_path, clock, monkeypatch)


@pytest.fixture
def gate() -> Iterator[Gate]:
    made = Gate()
    yield made
    made.open.set()


def serve(store: Store, clock: Clock, gate: Gate, **limits: float) -> Served:
    service = make_service([gate.tool()], config=CONFIG)
    hashes = [hash_token(TOKEN), hash_token(OTHER)]
    service.authenticate = api_keys(BearerAuth(lambda: hashes))
    service.quota = Quota(LimitsConfig.parse(_json({"default": limits})), store, clock)
    return Served(service, name="quota")


def _json(value: object) -> str:
    import json

    return json.dumps(value)


def one_call(llm: ScriptedLLM, delay: float = 0.0) -> None:
    llm.respond_with(lambda _: Reply(text="ok", usage=(800, 200), first_delay=delay))


def principal_of(auth: dict[str, str]) -> Principal:
    hashes = [hash_token(TOKEN), hash_token(OTHER)]
    return BearerAuth(lambda: hashes).principal(auth["authorization"])


# -- dollars per day ------------------------------------------------------------------------


def test_twenty_concurrent_requests_spend_at_most_the_cap_and_one_call(
    store: Store, clock: Clock, gate: Gate, llm: ScriptedLLM
) -> None:
    """$0.035 a day fits three runs of $0.01: of 20 at once, the rest are refused before any
    model call; another principal is unaffected; the next day they pass again."""
    one_call(llm, delay=0.05)  # the runs overlap
    body = {"messages": HI, "max_cost_usd": CALL_USD, "tools": []}
    with serve(store, clock, gate, usd_per_day=0.035) as served:
        with ThreadPoolExecutor(20) as pool:
            answers = list(pool.map(lambda _: served.chat(body), range(20)))
        passed = [done_of(a) for a in answers if a.status_code == 200]
        refused = [a for a in answers if a.status_code != 200]
        spent = sum(d.cost_usd or 0 for d in passed)

        assert 3 <= len(passed) <= 4, [a.status_code for a in answers]
        assert len(llm.requests) == len(passed), "no model call for a refused request"
        assert spent <= 0.035 + CALL_USD + 1e-9
        for answer in refused:
            refusal(answer, "usd_per_day")
        usage = run_sync(served.service.quota.usage(principal_of(AUTH)))  # type: ignore[union-attr]
        assert usage["usd_per_day"].used == pytest.approx(spent)

        assert done_of(served.chat(body, OTHER_AUTH)).stop_reason == "completed"
        later = served.chat(body)
        assert refusal(later, "usd_per_day") == MIDNIGHT - int(START), "until midnight UTC"
        clock.now = MIDNIGHT + 5
        assert done_of(served.chat(body)).stop_reason == "completed", "a new day"


def test_a_run_cut_short_by_the_quota_ends_with_quota(
    store: Store, clock: Clock, gate: Gate, llm: ScriptedLLM
) -> None:
    """$0.015 a day: the first run spends $0.01; the second may spend $0.005, its first call
    costs $0.01, and the run ends there with an answer and stop reason ``quota``."""
    one_call(llm)
    with serve(store, clock, gate, usd_per_day=0.015) as served:
        assert done_of(served.chat({"messages": HI})).cost_usd == pytest.approx(CALL_USD)
        llm.respond_with(lambda _: Reply(tool_calls=[call("hold", text="x")], usage=(800, 200)))
        gate.open.set()
        events = events_of(served.chat({"messages": HI, "tools": ["hold"]}))
    done = events[-1]
    assert isinstance(done, Done)
    assert done.stop_reason == "quota"
    assert done.text, "it ends with an answer"
    assert [n.code for n in events if isinstance(n, Notice)] == ["quota"]
    assert len(llm.requests) == 2, "no call past the reservation"


def test_an_ask_llm_tree_counts_against_its_owner(
    store: Store, clock: Clock, gate: Gate, llm: ScriptedLLM
) -> None:
    """Two parallel sub-agents spend out of their request's reservation: the owner's day
    counts every call of the tree."""

    def respond(request: RecordedRequest) -> Reply:
        asked = next(m["content"] for m in request.messages if m["role"] == "user")
        answered = any(m["role"] == "tool" for m in request.messages)
        if asked == "hi" and not answered:
            return Reply(tool_calls=[call("ask_llm", queries=["q1", "q2"])], usage=(800, 200))
        return Reply(text=f"answer to {asked}", usage=(800, 200))

    llm.respond_with(respond)
    with serve(store, clock, gate, usd_per_day=1, tokens_per_day=10**6) as served:
        served.service.tools = ToolRegistry([ask_llm_tool(), gate.tool()])
        done = done_of(served.chat({"messages": HI, "tools": ["ask_llm"]}))
        usage = run_sync(served.service.quota.usage(principal_of(AUTH)))  # type: ignore[union-attr]
    assert len(llm.requests) == 4
    assert done.cost_usd == pytest.approx(4 * CALL_USD)
    assert usage["usd_per_day"].used == pytest.approx(4 * CALL_USD)
    assert usage["tokens_per_day"].used == 4000


def test_a_continued_run_is_charged_once(
    store: Store, clock: Clock, gate: Gate, llm: ScriptedLLM
) -> None:
    """A run paused for approval, then continued: each request charges what it spent, the
    continuation not again what the first part had (its budget carries it)."""
    ask = call("hold", text="x")
    llm.script(Reply(tool_calls=[ask], usage=(800, 200)), Reply(text="done", usage=(800, 200)))
    gate.open.set()
    with serve(store, clock, gate, usd_per_day=1, tokens_per_day=10**6) as served:
        served.service.config = CONFIG.model_copy(update={"approval_tools": ("hold",)})
        paused = done_of(served.chat({"messages": HI, "tools": ["hold"]}))
        assert paused.stop_reason == "approval_required"
        history = [*HI, *[m.model_dump() for m in paused.messages]]
        body = {"messages": history, "tools": ["hold"], "resume": paused.resume}
        body["approvals"] = [{"call_id": ask.id, "approved": True}]
        done = done_of(served.chat(body))
        usage = run_sync(served.service.quota.usage(principal_of(AUTH)))  # type: ignore[union-attr]
    assert done.stop_reason == "completed"
    assert done.cost_usd == pytest.approx(2 * CALL_USD), "the run's total, both parts"
    assert usage["usd_per_day"].used == pytest.approx(2 * CALL_USD)
    assert usage["tokens_per_day"].used == 2000


def test_a_dollar_limit_refuses_a_model_without_a_price(
    store: Store, clock: Clock, gate: Gate, llm: ScriptedLLM
) -> None:
    one_call(llm)
    with serve(store, clock, gate, usd_per_day=1) as served:
        response = served.chat({"model": "groq:no-price-known", "messages": HI})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["param"] == "model"
    assert llm.requests == []


# -- load -----------------------------------------------------------------------------------


def test_concurrent_runs_hold(store: Store, clock: Clock, gate: Gate, llm: ScriptedLLM) -> None:
    def respond(request: RecordedRequest) -> Reply:
        if (
            any(m["role"] == "tool" for m in request.messages)
            or request.messages[-1]["content"] == "other"
        ):
            return Reply(text="done")
        return Reply(tool_calls=[call("hold", text="x")])

    llm.respond_with(respond)
    body = {"messages": HI, "tools": ["hold"]}
    other = {"messages": [{"role": "user", "content": "other"}], "tools": ["hold"]}
    with serve(store, clock, gate, concurrent_runs=2) as served, ThreadPoolExecutor(2) as pool:
        held = [pool.submit(served.chat, body) for _ in range(2)]
        assert gate.wait_for(2)
        calls = len(llm.requests)
        assert refusal(served.chat(body), "concurrent_runs") == 2
        assert len(llm.requests) == calls
        assert done_of(served.chat(other, OTHER_AUTH)).stop_reason == "completed"
        gate.open.set()
        assert [done_of(f.result()).stop_reason for f in held] == ["completed"] * 2
        assert done_of(served.chat(body)).stop_reason == "completed", "the slots are free"


def test_requests_per_minute_hold(store: Store, clock: Clock, gate: Gate, llm: ScriptedLLM) -> None:
    one_call(llm)
    with serve(store, clock, gate, requests_per_minute=2) as served:
        for _ in range(2):
            assert served.chat({"messages": HI}).status_code == 200
        minute_end = (int(START) // 60 + 1) * 60
        assert refusal(served.chat({"messages": HI}), "requests_per_minute") == (
            minute_end - int(START)
        )
        assert len(llm.requests) == 2
        clock.now = minute_end
        assert served.chat({"messages": HI}).status_code == 200


def test_a_killed_processs_reservation_expires(
    store: Store, clock: Clock, gate: Gate, llm: ScriptedLLM
) -> None:
    """A reservation made and never settled (its process died) holds the only run slot until
    its lease ends; the next request after that reclaims it."""
    one_call(llm)
    with serve(store, clock, gate, concurrent_runs=1, usd_per_day=1) as served:
        quota = served.service.quota
        assert quota is not None
        assert run_sync(quota.admit(principal_of(AUTH), Want(1000, 10_000, lease_s=300)))
        refusal(served.chat({"messages": HI}), "concurrent_runs")
        clock.now = START + 301
        assert done_of(served.chat({"messages": HI})).stop_reason == "completed"
        usage = run_sync(quota.usage(principal_of(AUTH)))
    assert usage["concurrent_runs"].used == 0
    assert usage["usd_per_day"].used == pytest.approx(CALL_USD), "the dead run's $0.01 is back"


def test_a_client_that_leaves_still_settles(
    store: Store, clock: Clock, gate: Gate, llm: ScriptedLLM
) -> None:
    llm.respond_with(lambda _: Reply(tool_calls=[call("hold", text="x")], usage=(800, 200)))
    with serve(store, clock, gate, concurrent_runs=1) as served:
        with (
            httpx.Client(base_url=served.url, timeout=20) as client,
            client.stream("POST", "/chat", json={"messages": HI, "tools": ["hold"]}, headers=AUTH),
        ):
            assert gate.wait_for(1)
        # The client has gone: the run is cancelled, winds down and settles.
        gate.open.set()
        [done] = served.runs(1)
        assert done.stop_reason == "cancelled"
        usage = run_sync(served.service.quota.usage(principal_of(AUTH)))  # type: ignore[union-attr]
    assert usage["concurrent_runs"].used == 0


# -- the openai SDK, a store that is down, no limits -----------------------------------------


def test_openai_sdk_gets_a_rate_limit_error(
    store: Store, clock: Clock, gate: Gate, llm: ScriptedLLM
) -> None:
    one_call(llm)
    with serve(store, clock, gate, requests_per_minute=1) as served:
        client = served.openai()
        client.chat.completions.create(model="groq:m", messages=HI)  # type: ignore[arg-type]
        with pytest.raises(openai.RateLimitError) as caught:
            client.chat.completions.create(model="groq:m", messages=HI)  # type: ignore[arg-type]
    assert caught.value.status_code == 429
    assert int(caught.value.response.headers["retry-after"]) >= 1
    assert len(llm.requests) == 1


FACE_BODIES: dict[str, dict[str, Any]] = {
    "/chat": {"model": "groq:m", "messages": HI},
    "/v1/chat/completions": {"model": "groq:m", "messages": HI},
    "/v1/responses": {"model": "groq:m", "input": "hi"},
    "/api/chat": {
        "id": "c1",
        "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
    },
    "/ag-ui": {
        "threadId": "t",
        "runId": "r",
        "messages": [{"id": "m1", "role": "user", "content": "hi"}],
    },
}


@pytest.mark.parametrize("path", sorted(FACE_BODIES))
def test_a_store_that_is_down_is_a_503_on_every_face(
    path: str, tmp_path: Path, clock: Clock, gate: Gate, llm: ScriptedLLM
) -> None:
    (tmp_path / "file").write_text("not a directory")
    down = sqlite_store(tmp_path / "file" / "store.db", clock)  # cannot be opened
    one_call(llm)
    with serve(down, clock, gate, usd_per_day=1) as served, httpx.Client(timeout=20) as client:
        response = client.post(f"{served.url}{path}", json=FACE_BODIES[path], headers=AUTH)
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"]
    assert llm.requests == []


def test_dynamodb_down_is_a_503(
    clock: Clock, gate: Gate, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    aws_env(monkeypatch)
    nowhere = Moto(f"http://127.0.0.1:{free_port()}")
    down = dynamodb_store(nowhere, "no-such-table", clock)
    one_call(llm)
    with serve(down, clock, gate, concurrent_runs=1) as served:
        response = served.chat({"messages": HI})
    assert response.status_code == 503, response.text
    assert llm.requests == []


def test_without_limits_the_store_is_never_touched(
    tmp_path: Path, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store.db"
    monkeypatch.setenv("AGENTLOOP_STORE", f"sqlite:///{path}")
    monkeypatch.delenv("AGENTLOOP_LIMITS", raising=False)
    service = service_from_env(AppSettings.from_env({"AGENTLOOP_AUTH_MODE": "none"}))
    assert service.quota is None
    one_call(llm)
    with (
        LoopbackServer(create_app(service), name="no-limits") as server,
        httpx.Client(timeout=20) as client,
    ):
        response = client.post(f"{server.url}/chat", json={"model": "groq:m", "messages": HI})
    assert response.status_code == 200
    assert not path.exists()
    assert not path.parent.joinpath("store.db-wal").exists()


def test_limits_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOOP_STORE", f"sqlite:///{tmp_path / 'store.db'}")
    settings = AppSettings.from_env({"AGENTLOOP_AUTH_MODE": "none"})
    monkeypatch.setenv("AGENTLOOP_LIMITS", '{"default": {"usd_per_day": 2}}')
    service = service_from_env(settings)
    assert service.quota is not None
    assert service.quota.config.for_tier(None) == {"usd_per_day": 2_000_000}
    assert not (tmp_path / "store.db").exists(), "opening touches nothing"
    monkeypatch.setenv("AGENTLOOP_LIMITS", '{"default": {"usd_per_day": "lots"}}')
    with pytest.raises(ConfigurationError, match="AGENTLOOP_LIMITS"):
        service_from_env(settings)


def run_sync(awaitable: Any) -> Any:
    """Await on a fresh loop in this (test) thread; the stores run their calls in threads."""
    import asyncio

    return asyncio.run(awaitable)
