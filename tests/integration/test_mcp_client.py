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
from agentloop.mcp.client import MAX_DESCRIPTION_CHARS, MAX_TOOLS
from agentloop.mcp.config import servers_from_env
from agentloop.server.identity import api_keys
from agentloop.server.service import ChatService
from agentloop.tools.registry import ToolRegistry
from tests.fakes.loopback import LoopbackServer
from tests.fakes.mcp_server import (
    Answer,
    Gate,
    huge_json_answer,
    json_answer,
    raw_answer,
    serve,
)
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG, parse_sse, tool_payload
from tests.sample_tools import echo
from tests.served import AUTH, TOKEN, ServedApp

MCP_TOKEN = "mcp-secret-token"


@dataclass
class Stack:
    """A fake MCP server and the chat app configured to use it."""

    mcp: LoopbackServer
    gate: Gate
    app: ServedApp
    service: ChatService

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
        authenticate=api_keys(BearerAuth(lambda: hashes)),
        auth_mode="bearer",
        mcp_tools=mcp_tools_from_env(registry, secret={"K": MCP_TOKEN}),
    )
    app = ServedApp(service, name="chat-mcp", lifespan="on").start()
    try:
        yield Stack(mcp, gate, app, service)
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
    finished = stack.app.runs(1)
    assert finished, "the run did not end after the client left"
    assert finished[0].stop_reason == "cancelled"
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


# -- a hostile server ---------------------------------------------------------------------------

MB = 1 << 20


def _deep(request: dict[str, Any]) -> tuple[str, list[bytes]]:
    """A result whose structured content is nested 5,000 deep."""
    head = b'{"jsonrpc":"2.0","id":%d,"result":{"content":[],"structuredContent":' % request["id"]
    return "application/json", [head, b'{"a":' * 5_000 + b"1" + b"}" * 5_000, b"}}"]


MALFORMED: dict[str, tuple[Answer, str]] = {
    "wrong types": (
        json_answer({"content": [{"type": "text", "text": 123}]}),
        "not valid MCP: content.0.TextContent.text: Input should be a valid string",
    ),
    "unknown content": (
        json_answer({"content": [{"type": "hologram", "data": "x"}]}),
        "not valid MCP: content.0",
    ),
    "no content": (json_answer({}), "not valid MCP: content: Field required"),
    "structured string": (
        json_answer({"content": [], "structuredContent": "{not json"}),
        "not valid MCP: structuredContent: Input should be a valid dictionary",
    ),
    "null result": (json_answer(None), "Failed to parse JSON response"),
    "not json": (raw_answer("application/json", b"this is not json {"), "Invalid JSON"),
    "event not json": (
        raw_answer("text/event-stream", b"event: message\ndata: }{\n\n"),
        "Failed to parse SSE message",
    ),
    "html": (raw_answer("text/html", b"<html>hi</html>"), "Unexpected content type"),
    "nested 5,000 deep": (_deep, "recursion limit exceeded"),
    "error of images": (
        json_answer(
            {"isError": True, "content": [{"type": "image", "data": "!!", "mimeType": "x/y"}]}
        ),
        "fake__probe answered with an error: no details",
    ),
    "error flag not a boolean": (
        json_answer({"isError": "yes", "content": []}),
        "fake__probe answered with an error: no details",
    ),
    "error of 500,000 characters": (
        json_answer({"isError": True, "content": [{"type": "text", "text": "E" * 500_000}]}),
        "fake__probe answered with an error: EEEE",
    ),
    "64 MB of plain JSON": (huge_json_answer(64), "over 1,048,576 bytes, more than is read"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_or_huge_result_is_an_error_the_model_reads(
    stack: Stack, llm: ScriptedLLM, case: str
) -> None:
    """The call's result is a short error saying what was wrong; the server's next call
    works (a fresh session), and the run ends with its answer."""
    answer, expected = MALFORMED[case]
    stack.gate.forged["tools/call:probe"] = answer
    llm.script(
        Reply(tool_calls=[call("fake__probe", case=case)]),
        Reply(tool_calls=[call("fake__echo", text="still there")]),
        Reply(text="Done."),
    )
    frames = stack.chat(["fake__probe", "fake__echo"])
    results = _results(frames)
    assert results["fake__probe"]["ok"] is False
    assert expected in results["fake__probe"]["error"]
    assert len(results["fake__probe"]["error"]) <= 2_000
    assert results["fake__echo"] == {"ok": True, "result": "still there"}
    assert _done(frames)["stop_reason"] == "completed"
    assert _done(frames)["text"] == "Done."
    read = [m["content"] for m in llm.requests[1].messages if m["role"] == "tool"]
    assert [tool_payload(c) for c in read] == [results["fake__probe"]]


def test_a_huge_plain_json_body_is_not_read_past_the_bound(stack: Stack, llm: ScriptedLLM) -> None:
    """The client stops reading at 1 MB and hangs up: the server gets no further than what
    the sockets' buffers hold (a few MB), not the 64 MB it meant to send."""
    stack.gate.forged["tools/call:probe"] = huge_json_answer(64)
    llm.script(Reply(tool_calls=[call("fake__probe", case="huge")]), Reply(text="Done."))
    frames = stack.chat(["fake__probe"])
    assert "more than is read" in _results(frames)["fake__probe"]["error"]
    assert stack.gate.sent["tools/call:probe"] < 24 * MB


def test_huge_and_many_results_from_the_real_server_are_bounded(
    stack: Stack, llm: ScriptedLLM
) -> None:
    """Through the SDK's own server: 20 MB in one event is refused at the bound; 300,000
    characters and 5,000 images are cut to the tool-result bound; audio, a binary resource
    (even one that is not base64) and a link are described, not passed on."""
    llm.script(
        Reply(tool_calls=[call("fake__flood", chars=20 * MB)]),
        Reply(tool_calls=[call("fake__flood", chars=300_000)]),
        Reply(tool_calls=[call("fake__many", count=5_000)]),
        Reply(tool_calls=[call("fake__mixed")]),
        Reply(text="Done."),
    )
    frames = stack.chat(["fake__flood", "fake__many", "fake__mixed"])
    assert _done(frames)["stop_reason"] == "completed"
    contents = [d["content"] for e, d in frames if e == "tool_call_result"]
    refused, long, many, mixed = (tool_payload(c) for c in contents)
    assert refused["ok"] is False
    assert "exceeded the 1048576 byte limit" in refused["error"]
    limit = TEST_CONFIG.tool_result_max_chars
    for cut in (long, many):
        assert cut["ok"] is True
        assert cut["truncated"] is True
    assert all(len(c) <= limit for c in contents)
    assert many["result"].startswith('{"content": [{"type": "image", "mime_type": "image/png"')
    assert mixed == {
        "ok": True,
        "result": {
            "content": [
                {"type": "text", "text": "see attached"},
                {
                    "type": "audio",
                    "mime_type": "audio/wav",
                    "bytes": 400,
                    "note": "the audio is not shown to the model",
                },
                {
                    "type": "resource",
                    "uri": "file:///data.bin",
                    "mime_type": "application/octet-stream",
                    "bytes": 8,
                },
                {"type": "resource_link", "uri": "https://example.com/r", "name": "r"},
            ]
        },
    }


def _listed(name: str, schema: Any = None, description: str = "A tool.") -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object"} if schema is None else schema,
    }


HOSTILE_LIST = [
    _listed("fine", description="the first"),
    _listed("fine", description="the second"),
    _listed("wordy", description="w" * 100_000),
    _listed("bad_schema", {"type": "object", "properties": {"a": {"type": "nope"}}}),
    _listed(
        "huge_schema",
        {"type": "object", "properties": {f"p{i}": {"description": "d" * 100} for i in range(300)}},
    ),
    _listed("bad name"),
    _listed("dotted.name"),
    _listed("n" * 61),
    _listed("_shadow"),
    *(_listed(f"t{i}") for i in range(300)),
]


def test_a_hostile_tool_list_is_checked_tool_by_tool(
    stack: Stack, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """Unusable tools are left out (and are not on the page), said in one log line; a
    description is cut to what providers accept; one name is one tool; a server lists at
    most MAX_TOOLS."""
    stack.gate.forged["tools/list"] = json_answer({"tools": HOSTILE_LIST})
    listed = stack.tools()["mcp_servers"][0]
    [logged] = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert logged.startswith("MCP server fake: 8 left out: 'fine' (listed twice")
    assert logged.endswith("; ...")
    assert listed["reachable"] is True
    names = set(listed["tools"])
    assert {"fake__fine", "fake__wordy", "fake__t0"} <= names
    left_out = {"bad_schema", "huge_schema", "bad name"}
    left_out |= {"dotted.name", "n" * 61, "_shadow"}
    assert not names & {f"fake__{n}" for n in left_out}
    assert len(names) == MAX_TOOLS

    for name in ("fake__bad_schema", "fake__bad name", "fake__t299"):
        body = {"messages": [{"role": "user", "content": "x"}], "tools": [name]}
        response = httpx.post(f"{stack.app.url}/chat", json=body, headers=AUTH, timeout=30)
        assert response.status_code == 422, name

    llm.script(Reply(text="Fine."))
    assert _done(stack.chat(["fake__fine", "fake__wordy"]))["text"] == "Fine."
    shown = {t["function"]["name"]: t["function"] for t in llm.requests[0].body["tools"]}
    assert shown["fake__fine"]["description"] == "the first"
    assert len(shown["fake__wordy"]["description"]) == MAX_DESCRIPTION_CHARS
    assert shown["fake__wordy"]["description"].endswith("…")


@pytest.mark.parametrize(
    "answer",
    [
        json_answer({"tools": [_listed("ok"), _listed("x", {"type": "string"})]}),
        json_answer({"tools": [_listed("ok"), {"name": "x", "inputSchema": "a string"}]}),
        json_answer({"tools": "none"}),
        raw_answer("application/json", b'{"jsonrpc": "2.0", "id": 1, "result": {"tools": ['),
        huge_json_answer(16),
    ],
    ids=["schema for a string", "schema a string", "tools not a list", "cut off", "16 MB"],
)
def test_a_listing_that_cannot_be_read_leaves_the_server_without_tools(
    stack: Stack, llm: ScriptedLLM, answer: Answer
) -> None:
    """The SDK validates a page as a whole: one tool whose schema is not for an object, and
    the server has no tools (as if it were down), which costs only its own tools."""
    stack.gate.forged["tools/list"] = answer
    assert stack.tools()["mcp_servers"] == [{"server": "fake", "tools": [], "reachable": False}]
    body = {"messages": [{"role": "user", "content": "x"}], "tools": ["fake__ok"]}
    response = httpx.post(f"{stack.app.url}/chat", json=body, headers=AUTH, timeout=30)
    assert response.status_code == 422
    llm.script(Reply(text="Fine without."))
    assert _done(stack.chat(["echo"]))["text"] == "Fine without."


def test_a_storm_of_list_changed_notifications_costs_one_listing_at_a_time(
    stack: Stack, llm: ScriptedLLM
) -> None:
    """200 notifications in a row: the client lists again, but never two listings at once,
    and the tool that was added is offered."""
    llm.script(Reply(tool_calls=[call("fake__storm", times=200)]), Reply(text="Stormed."))
    assert _results(stack.chat(["fake__storm"]))["fake__storm"]["ok"] is True
    deadline = time.monotonic() + 10
    while "fake__late" not in stack.tools()["mcp_servers"][0]["tools"]:
        assert time.monotonic() < deadline, "the list_changed notifications were not acted on"
        time.sleep(0.05)
    llm.script(Reply(tool_calls=[call("fake__late")]), Reply(text="Late."))
    assert _results(stack.chat(["fake__late"]))["fake__late"]["ok"] is True
    after = stack.gate.requests[stack.gate.requests.index("tools/call:storm") :]
    # Each notification used to start a listing of its own (about 100 of the 200 here); one
    # at a time, a listing starts again only if the list changed while it ran: a handful.
    assert 1 <= after.count("tools/list") <= 20
