"""Tools from MCP servers, through full agent runs on ``POST /chat``.

A real MCP server (the ``mcp`` SDK's MCPServer, ``tests/fakes/mcp_server.py``) and the chat
app each run on loopback; the scripted model calls the remote tools by their
``server__tool`` names, and what the model is shown and reads back is checked.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from agentloop.auth import BearerAuth, hash_token
from agentloop.config import AgentConfig, ConfigurationError
from agentloop.defaults import mcp_tools_from_env
from agentloop.events import Done
from agentloop.mcp.config import servers_from_env
from agentloop.tools.registry import ToolRegistry
from chat_app import ChatService, create_app
from tests.fakes.loopback import LoopbackServer
from tests.fakes.mcp_server import Gate, serve
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG, parse_sse, tool_payload
from tests.sample_tools import echo

TOKEN = "al_test-token-123"
AUTH = {"authorization": f"Bearer {TOKEN}"}
MCP_TOKEN = "mcp-secret-token"


@dataclass
class Stack:
    """A fake MCP server and the chat app configured to use it."""

    mcp: LoopbackServer
    gate: Gate
    app: LoopbackServer
    service: ChatService
    finished: list[Done]

    def chat(self, tools: list[str], prompt: str = "go") -> list[tuple[str, Any]]:
        body = {"messages": [{"role": "user", "content": prompt}], "tools": tools}
        with httpx.stream(
            "POST", f"{self.app.url}/chat", json=body, headers=AUTH, timeout=30
        ) as response:
            assert response.status_code == 200, response.read()
            return parse_sse(response.iter_lines())

    def tools(self) -> dict[str, Any]:
        response = httpx.get(f"{self.app.url}/tools", headers=AUTH, timeout=30)
        assert response.status_code == 200
        value: dict[str, Any] = response.json()
        return value


def _results(frames: list[tuple[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each tool result's envelope, by tool name."""
    starts = {d["call_id"]: d["name"] for e, d in frames if e == "tool_call_start"}
    return {
        starts[d["call_id"]]: tool_payload(d["content"])
        for e, d in frames
        if e == "tool_call_result"
    }


def _done(frames: list[tuple[str, Any]]) -> dict[str, Any]:
    event, data = frames[-1]
    assert event == "done"
    assert isinstance(data, dict)
    return data


def _stack(
    monkeypatch: pytest.MonkeyPatch, config: AgentConfig = TEST_CONFIG, url: str | None = None
) -> Iterator[Stack]:
    mcp, gate = serve()
    servers = {"fake": {"url": url or f"{mcp.url}/mcp", "headers": {"x-api": {"secret": "K"}}}}
    monkeypatch.setenv("AGENTLOOP_MCP_SERVERS", json.dumps(servers))
    registry = ToolRegistry([echo])
    hashes = [hash_token(TOKEN)]
    service = ChatService(
        config=config,
        tools=registry,
        authenticate=BearerAuth(lambda: hashes).check,
        auth_mode="bearer",
        mcp_tools=mcp_tools_from_env(registry, secret={"K": MCP_TOKEN}),
    )
    finished: list[Done] = []
    service.on_finish.append(lambda done, info: finished.append(done))
    app = LoopbackServer(create_app(service), name="chat-mcp", lifespan="on").start()
    try:
        yield Stack(mcp, gate, app, service, finished)
    finally:
        app.stop()  # first: its shutdown ends the MCP session, so the server stops at once
        mcp.stop()


@pytest.fixture
def stack(llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    yield from _stack(monkeypatch)


def test_remote_tools_in_a_full_run(stack: Stack, llm: ScriptedLLM) -> None:
    """Schemas reach the model as the server gave them; text, image, resource and error
    results come back rendered; bad arguments are refused before the call."""
    llm.script(
        Reply(
            tool_calls=[
                call("fake__echo", text="hi", times=2),
                call("fake__picture"),
                call("fake__document"),
                call("fake__fail", reason="no"),
                call("fake__slow", seconds="soon"),
            ]
        ),
        Reply(text="All done."),
    )
    names = ["fake__echo", "fake__picture", "fake__document", "fake__fail", "fake__slow"]
    frames = stack.chat(names)
    assert _done(frames)["stop_reason"] == "completed"
    assert _done(frames)["text"] == "All done."

    shown = {t["function"]["name"]: t["function"] for t in llm.requests[0].body["tools"]}
    assert list(shown) == names
    assert shown["fake__echo"]["parameters"] == {
        "properties": {
            "text": {"title": "Text", "type": "string"},
            "times": {"default": 1, "title": "Times", "type": "integer"},
        },
        "required": ["text"],
        "type": "object",
        "title": "echoArguments",
    }
    assert shown["fake__echo"]["description"] == "Repeat text."

    results = _results(frames)
    assert results["fake__echo"] == {"ok": True, "result": "hi hi"}
    picture = results["fake__picture"]["result"]["content"][0]
    assert picture["type"] == "image"
    assert picture["mime_type"] == "image/png"
    assert picture["bytes"] == 70
    assert "data" not in picture
    document = results["fake__document"]["result"]["content"][0]
    assert document == {
        "type": "resource",
        "uri": "memo://one",
        "mime_type": "text/plain",
        "text": "the memo says hello",
    }
    assert results["fake__fail"]["ok"] is False
    assert "refused: no" in results["fake__fail"]["error"]
    assert results["fake__slow"]["ok"] is False
    assert results["fake__slow"]["error"].startswith("invalid arguments: seconds:")
    # The header named a key of the secret; its value went to the server on every request.
    assert stack.gate.seen
    assert all(h.get("x-api") == MCP_TOKEN for h in stack.gate.seen)
    # The page's list: the server and its tools; the built-in echo too.
    listed = stack.tools()
    assert listed["mcp_servers"][0]["server"] == "fake"
    assert "fake__picture" in listed["mcp_servers"][0]["tools"]
    assert {"name": "fake__echo", "opt_in": True} in listed["tools"]


def test_remote_tools_are_opt_in(stack: Stack, llm: ScriptedLLM) -> None:
    llm.script(Reply(text="Plain."))
    body = {"messages": [{"role": "user", "content": "hi"}]}
    response = httpx.post(f"{stack.app.url}/chat", json=body, headers=AUTH, timeout=30)
    assert response.status_code == 200
    assert [t["function"]["name"] for t in llm.requests[0].body["tools"]] == ["echo"]


@pytest.fixture
def slow_stack(llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    yield from _stack(monkeypatch, TEST_CONFIG.model_copy(update={"tool_timeout_s": 1.0}))


def test_slow_tool_times_out_and_the_session_goes_on(slow_stack: Stack, llm: ScriptedLLM) -> None:
    llm.script(
        Reply(tool_calls=[call("fake__slow", seconds=20)]),
        Reply(tool_calls=[call("fake__echo", text="still here")]),
        Reply(text="Done."),
    )
    started = time.monotonic()
    frames = slow_stack.chat(["fake__slow", "fake__echo"])
    assert time.monotonic() - started < 10
    results = _results(frames)
    assert results["fake__slow"]["ok"] is False
    assert "timed out after 1.0 s" in results["fake__slow"]["error"]
    assert results["fake__echo"] == {"ok": True, "result": "still here"}
    assert _done(frames)["stop_reason"] == "completed"


def test_server_that_goes_away_gives_a_tool_error(stack: Stack, llm: ScriptedLLM) -> None:
    llm.script(Reply(tool_calls=[call("fake__echo", text="one")]), Reply(text="First."))
    first = stack.chat(["fake__echo"])
    assert _results(first)["fake__echo"]["ok"] is True
    stack.mcp.stop()
    llm.script(Reply(tool_calls=[call("fake__echo", text="two")]), Reply(text="Second."))
    second = stack.chat(["fake__echo"])
    result = _results(second)["fake__echo"]
    assert result["ok"] is False
    assert "MCP server 'fake'" in result["error"]
    assert _done(second)["stop_reason"] == "completed"
    assert _done(second)["text"] == "Second."


def test_list_changed_refreshes_the_tools(stack: Stack, llm: ScriptedLLM) -> None:
    body = {"messages": [{"role": "user", "content": "x"}], "tools": ["fake__late"]}
    refused = httpx.post(f"{stack.app.url}/chat", json=body, headers=AUTH, timeout=30)
    assert refused.status_code == 422
    llm.script(Reply(tool_calls=[call("fake__grow")]), Reply(text="Grown."))
    assert _results(stack.chat(["fake__grow"]))["fake__grow"]["ok"] is True
    deadline = time.monotonic() + 10
    while "fake__late" not in stack.tools()["mcp_servers"][0]["tools"]:
        assert time.monotonic() < deadline, "the list_changed notification was not acted on"
        time.sleep(0.05)
    llm.script(Reply(tool_calls=[call("fake__late")]), Reply(text="Late."))
    frames = stack.chat(["fake__late"])
    assert _results(frames)["fake__late"] == {"ok": True, "result": "late tool ran"}


def test_client_that_leaves_cancels_the_call(stack: Stack, llm: ScriptedLLM) -> None:
    llm.script(Reply(tool_calls=[call("fake__slow", seconds=25)]))
    body = {"messages": [{"role": "user", "content": "x"}], "tools": ["fake__slow"]}
    with httpx.stream("POST", f"{stack.app.url}/chat", json=body, headers=AUTH) as response:
        for line in response.iter_lines():
            if line == "event: tool_call_start":
                break
    started = time.monotonic()
    while not stack.finished:
        assert time.monotonic() - started < 10, "the run did not end after the client left"
        time.sleep(0.02)
    assert stack.finished[0].stop_reason == "cancelled"
    assert time.monotonic() - started < 5


def test_server_down_at_first_use_has_no_tools(
    llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    for stack in _stack(monkeypatch, url="http://127.0.0.1:9/mcp"):
        listed = stack.tools()
        assert listed["mcp_servers"] == [{"server": "fake", "tools": [], "reachable": False}]
        body = {"messages": [{"role": "user", "content": "x"}], "tools": ["fake__echo"]}
        response = httpx.post(f"{stack.app.url}/chat", json=body, headers=AUTH, timeout=30)
        assert response.status_code == 422
        llm.script(Reply(text="Fine without."))
        assert _done(stack.chat(["echo"]))["text"] == "Fine without."


# -- the setting ------------------------------------------------------------------------------


def test_header_values_from_the_secret_or_the_environment() -> None:
    value = json.dumps(
        {
            "a": {"url": "https://a.example/mcp", "headers": {"x": "plain", "y": {"secret": "S"}}},
            "b": {"url": "http://b.example/mcp", "headers": {"z": {"secret": "E"}}},
        }
    )
    env = {"AGENTLOOP_MCP_SERVERS": value, "E": "from-env", "S": "not-this"}
    a, b = servers_from_env(env, secret={"S": "from-secret"})
    assert a.headers == {"x": "plain", "y": "from-secret"}
    assert b.headers == {"z": "from-env"}
    assert "from-secret" not in repr(a)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{", "not JSON"),
        ("[]", "must be an object"),
        ('{"a__b": {"url": "https://x"}}', "server name"),
        ('{"a": {"url": "ftp://x"}}', "http(s) URL"),
        ('{"a": {"url": "https://x", "headers": {"h": {"secret": "MISSING"}}}}', "'MISSING'"),
        ('{"a": {"url": "https://x", "command": "rm"}}', "unknown field"),
    ],
)
def test_bad_settings_name_the_problem(value: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match="AGENTLOOP_MCP_SERVERS") as caught:
        servers_from_env({"AGENTLOOP_MCP_SERVERS": value})
    assert message in str(caught.value)


_NO_MCP_SCRIPT = """
import sys
from starlette.testclient import TestClient
from chat_app import create_app
with TestClient(create_app(), base_url="http://127.0.0.1") as client:
    assert client.get("/healthz").status_code == 200
    assert client.get("/tools").status_code == 200
    assert client.post("/chat", json={"messages": []}).status_code == 422
print(sorted(m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "mcp_types"))))
"""


def test_no_server_configured_imports_nothing_of_mcp(tmp_path: Any) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": "layers/agent:functions/chat",
        "AGENTLOOP_AUTH_MODE": "none",
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-c", _NO_MCP_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_server_that_comes_back_is_used_again(
    stack: Stack, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Down at first use: no tools; back up: listed by a later request (retry interval 0
    here), and a session broken by an outage is replaced by a new one."""
    monkeypatch.setattr("agentloop.mcp.client.RETRY_AFTER_S", 0.0)
    stack.gate.down = True
    assert stack.tools()["mcp_servers"][0]["reachable"] is False
    stack.gate.down = False
    assert "fake__echo" in stack.tools()["mcp_servers"][0]["tools"]
    stack.gate.down = True
    llm.script(Reply(tool_calls=[call("fake__echo", text="a")]), Reply(text="Down."))
    assert _results(stack.chat(["fake__echo"]))["fake__echo"]["ok"] is False
    stack.gate.down = False
    llm.script(Reply(tool_calls=[call("fake__echo", text="b")]), Reply(text="Up."))
    assert _results(stack.chat(["fake__echo"]))["fake__echo"] == {"ok": True, "result": "b"}
    sessions = {h.get("mcp-session-id") for h in stack.gate.seen} - {None}
    assert len(sessions) == 2
