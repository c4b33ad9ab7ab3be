"""``POST /mcp``: the agent as an MCP server, called by the ``mcp`` SDK's own client.

The app is served on loopback; the SDK's Streamable HTTP client lists ``ask``, calls it with
a progress callback and reads the answer. The model is the scripted one.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from agentloop.ask_llm import ask_llm_tool
from agentloop.tools.base import ToolContext, tool
from chat_app import create_app
from tests.fakes.loopback import LoopbackServer
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.mcp_session import open_mcp_session
from tests.sample_tools import NoArgs, echo
from tests.served import ServedApp, make_service

ROOT = Path(__file__).resolve().parents[2]


@tool(name="until_cancelled")
async def until_cancelled(args: NoArgs, ctx: ToolContext) -> str:
    """Return once the run is cancelled (or after 10 s, when the test has failed)."""
    try:
        await asyncio.wait_for(ctx.cancel.wait(), 10)
    except TimeoutError:
        return "never cancelled"
    return "cancelled"


@tool(name="cancel_run")
async def cancel_run(args: NoArgs, ctx: ToolContext) -> str:
    """Cancel the run from inside, while its caller still waits for the answer."""
    ctx.cancel.cancel()
    return "cancelling"


@pytest.fixture
def served(llm: ScriptedLLM, provider_env: ScriptedLLM) -> Iterator[ServedApp]:
    service = make_service([echo, ask_llm_tool(), until_cancelled])
    with ServedApp(service, name="mcp-face", lifespan="on") as served:
        yield served


def ask_args(question: str, tools: list[str]) -> dict[str, Any]:
    return {"question": question, "tools": tools}


def tool_results(request: RecordedRequest) -> int:
    return sum(1 for m in request.messages if m["role"] == "tool")


async def test_lists_ask_and_answers_with_progress_and_usage(
    served: ServedApp, llm: ScriptedLLM
) -> None:
    def respond(request: RecordedRequest) -> Reply:
        user = next(m["content"] for m in request.messages if m["role"] == "user")
        if user == "What is A?":  # the sub-agent
            return Reply(text="A is 42.", usage=(7, 3))
        if tool_results(request) == 0:
            return Reply(
                tool_calls=[call("echo", text="hi"), call("ask_llm", query="What is A?")],
                usage=(20, 5),
            )
        return Reply(text="Echoed hi; A is 42.", usage=(30, 6))

    llm.respond_with(respond)
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with open_mcp_session(served.url) as mcp_session:
        listed = await mcp_session.list_tools()
        result = await mcp_session.call_tool(
            "ask",
            ask_args("Echo hi, then ask what A is.", ["echo", "ask_llm"]),
            progress_callback=on_progress,
        )

    [tool] = listed.tools
    assert tool.name == "ask"
    assert set(tool.input_schema["properties"]) == {"question", "tools", "max_iterations"}
    assert tool.input_schema["required"] == ["question"]
    assert not result.is_error
    assert [block.text for block in result.content if isinstance(block, types.TextContent)] == [
        "Echoed hi; A is 42."
    ]
    structured = result.structured_content
    assert structured["answer"] == "Echoed hi; A is 42."
    assert (structured["stop_reason"], structured["iterations"]) == ("completed", 2)
    assert structured["usage"] == {"prompt_tokens": 57, "completion_tokens": 14, "cached_tokens": 0}
    assert [u["prompt_tokens"] for u in structured["usage_by_depth"]] == [50, 7]
    messages = [message for _, message in seen]
    for expected in (
        "calling echo",
        "echo returned",
        "calling ask_llm",
        "ask_llm returned",
        "sub-agent started: What is A?",
        "sub-agent finished (completed)",
    ):
        assert expected in messages
    assert messages.index("calling ask_llm") < messages.index("sub-agent started: What is A?")
    assert [value for value, _ in seen] == sorted({value for value, _ in seen}), "increasing"
    [done] = served.runs(1)
    assert done.stop_reason == "completed"


async def test_a_wrong_token_gets_401(served: ServedApp) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"{served.url}/mcp",
            headers={"authorization": "Bearer wrong", "accept": "application/json"},
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        )
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "unauthorized"
    statuses: list[int] = []
    with pytest.raises(ExceptionGroup) as info:  # the SDK raises it from its task group
        async with open_mcp_session(served.url, token="wrong", statuses=statuses):
            pass
    assert info.group_contains(MCPError)
    assert statuses == [401]
    assert served.finished == []


async def test_bad_arguments_are_tool_errors(served: ServedApp, llm: ScriptedLLM) -> None:
    async with open_mcp_session(served.url) as mcp_session:
        missing = await mcp_session.call_tool("ask", {})
        extra = await mcp_session.call_tool("ask", {"question": "hi", "model": "x"})
        zero = await mcp_session.call_tool("ask", {"question": "hi", "max_iterations": 0})
        unknown = await mcp_session.call_tool("ask", {"question": "hi", "tools": ["nope"]})
        with pytest.raises(MCPError) as info:
            await mcp_session.call_tool("other", {"question": "hi"})

    def text(result: types.CallToolResult) -> str:
        assert result.is_error
        [block] = result.content
        assert isinstance(block, types.TextContent)
        return block.text

    assert "question" in text(missing)
    assert "model" in text(extra)
    assert "max_iterations" in text(zero)
    assert "(tools)" in text(unknown)
    assert "nope" in text(unknown)
    assert "unknown tool 'other'" in str(info.value)
    assert llm.requests == [], "nothing reached the model"
    assert served.finished == []


async def test_a_client_that_goes_away_cancels_the_run(served: ServedApp, llm: ScriptedLLM) -> None:
    def respond(request: RecordedRequest) -> Reply:
        if tool_results(request) == 0:
            return Reply(tool_calls=[call("until_cancelled")])
        return Reply(text="should not be asked")

    llm.respond_with(respond)
    waiting = asyncio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if message == "calling until_cancelled":
            waiting.set()

    async def ask() -> None:
        async with open_mcp_session(served.url) as mcp_session:
            await mcp_session.call_tool(
                "ask", ask_args("wait", ["until_cancelled"]), progress_callback=on_progress
            )

    task = asyncio.create_task(ask())
    await asyncio.wait_for(waiting.wait(), 10)
    task.cancel()  # the client goes away mid-call
    with pytest.raises(asyncio.CancelledError):
        await task
    [done] = await asyncio.to_thread(served.runs, 1, 15.0)
    assert done.stop_reason == "cancelled"
    results = [m.content for m in done.messages if m.role == "tool"]
    assert [json.loads(str(r))["result"] for r in results] == ["cancelled"], "the tool saw it"
    assert len(llm.requests) == 1, "the model was not asked again after the client left"


def test_start_up_and_a_refused_mcp_request_import_nothing_of_mcp() -> None:
    code = """
import json, sys
from starlette.testclient import TestClient
from chat_app import create_app
from tests.served import make_service
with TestClient(create_app(make_service()), base_url="http://127.0.0.1") as client:
    assert client.get("/healthz").status_code == 200
    status = client.post("/mcp", json={}, headers={"authorization": "Bearer no"}).status_code
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types"))
print(json.dumps([status, loaded]))
"""
    paths = [str(ROOT), str(ROOT / "functions/chat"), str(ROOT / "layers/agent")]
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={"PYTHONPATH": ":".join(paths), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    status, imported = json.loads(result.stdout.strip().splitlines()[-1])
    assert (status, imported) == (401, [])


async def test_a_failed_run_is_a_tool_error(served: ServedApp, llm: ScriptedLLM) -> None:
    llm.script(Reply(status=400, error_message="the prompt is malformed"))
    async with open_mcp_session(served.url) as mcp_session:
        result = await mcp_session.call_tool("ask", {"question": "hi"})
    assert result.is_error
    [block] = result.content
    assert isinstance(block, types.TextContent)
    assert block.text.startswith("provider: ")
    assert "the prompt is malformed" in block.text
    assert result.structured_content is None
    [done] = served.runs(1)
    assert done.stop_reason == "error"


async def test_a_cancelled_run_is_a_tool_error_not_an_answer(
    llm: ScriptedLLM, provider_env: ScriptedLLM
) -> None:
    """A run cancelled while its caller still waits has no answer: ``isError``, saying so."""
    llm.script(Reply(tool_calls=[call("cancel_run")]), Reply(text="should not be asked"))
    with ServedApp(make_service([cancel_run]), name="mcp-cancel", lifespan="on") as served:
        async with open_mcp_session(served.url) as mcp_session:
            result = await mcp_session.call_tool("ask", ask_args("go", ["cancel_run"]))
        [done] = served.runs(1)
    assert done.stop_reason == "cancelled"
    assert result.is_error
    [block] = result.content
    assert isinstance(block, types.TextContent)
    assert block.text == "the run was cancelled before it finished"
    assert result.structured_content is None


# -- what a calling model reads ------------------------------------------------------------------

DEVELOPER_PHRASING = (
    "generated from",
    "input schema",
    "docstring",
    "``",
    ":class:",
    "AskArgs",
    "pydantic",
    "opener",  # Source's docstring, advice for a page's developer
)


def schema_texts(node: Any) -> tuple[list[str], list[Any]]:
    """Every ``description`` in a JSON Schema, and every ``title`` keyword (a property named
    ``title`` is not one)."""
    descriptions: list[str] = []
    titles: list[Any] = []

    def walk(value: Any) -> None:
        if isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            for key, item in value.items():
                if key == "properties" and isinstance(item, dict):
                    for schema in item.values():
                        walk(schema)
                elif key == "description":
                    descriptions.append(item)
                elif key == "title":
                    titles.append(item)
                else:
                    walk(item)

    walk(node)
    return descriptions, titles


async def test_server_info_carries_the_package_version(served: ServedApp) -> None:
    import importlib.metadata
    import tomllib

    import agentloop

    async with open_mcp_session(served.url) as mcp_session:
        info = mcp_session.server_info

    assert info is not None
    assert info.name == "agentloop"
    assert info.version == agentloop.__version__
    assert info.version, "an empty version tells a client nothing"
    # __version__ is what the Lambda layer has (no dist-info there): it must not drift.
    assert info.version == importlib.metadata.version("agentloop")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    if "version" in project:
        assert info.version == project["version"]


async def test_the_ask_tool_is_described_for_the_model_that_calls_it(served: ServedApp) -> None:
    async with open_mcp_session(served.url) as mcp_session:
        [tool] = (await mcp_session.list_tools()).tools

    schema = tool.input_schema
    assert tool.description
    assert "question" in tool.description, "it says what to put where"
    descriptions, titles = schema_texts(schema)
    assert titles == [], "pydantic's class and field names are not for a model"
    assert "description" not in schema, "the arguments' class docstring is not for a model"
    for name, prop in schema["properties"].items():
        assert len(prop.get("description", "")) > 40, f"{name} says what to pass"
    out_descriptions, out_titles = schema_texts(tool.output_schema)
    assert out_titles == []
    for text in [tool.description, *descriptions, *out_descriptions]:
        for phrase in DEVELOPER_PHRASING:
            assert phrase not in text, f"{phrase!r} in {text!r}"
    # The tool names a call may pass, and the default set, are this server's.
    tools = schema["properties"]["tools"]
    assert "echo, ask_llm, until_cancelled" in tools["description"]
    assert "default set (echo, until_cancelled)" in tools["description"], "ask_llm is opt-in"
    assert tools["anyOf"][0]["items"]["enum"] == ["echo", "ask_llm", "until_cancelled"]


async def test_tools_that_wait_for_approval_are_not_offered(
    llm: ScriptedLLM, provider_env: ScriptedLLM
) -> None:
    """MCP has no way to ask a person, so the plan would refuse them: the schema leaves them out."""
    from tests.helpers import TEST_CONFIG

    config = TEST_CONFIG.model_copy(update={"approval_tools": ("echo",)})
    service = make_service([echo, ask_llm_tool()], config=config)
    with LoopbackServer(create_app(service), name="mcp-approvals", lifespan="on") as server:
        async with open_mcp_session(server.url) as mcp_session:
            [tool] = (await mcp_session.list_tools()).tools
            refused = await mcp_session.call_tool("ask", {"question": "hi", "tools": ["echo"]})

    tools = tool.input_schema["properties"]["tools"]
    assert tools["anyOf"][0]["items"]["enum"] == ["ask_llm"]
    assert "echo" not in tools["description"]
    assert refused.is_error, "and a call that names one anyway is refused"
    [block] = refused.content
    assert isinstance(block, types.TextContent)
    assert "approval" in block.text
    assert llm.requests == []


async def test_the_session_manager_the_first_request_started_stops_with_the_app(
    llm: ScriptedLLM, provider_env: ScriptedLLM
) -> None:
    """The MCP SDK's session manager lives in a task the first ``/mcp`` request starts; the
    route asks the app to stop it at shutdown (``server.app.on_shutdown``)."""
    app = create_app(make_service([echo]))
    with LoopbackServer(app, name="mcp-shutdown", lifespan="on") as server:
        async with open_mcp_session(server.url) as mcp_session:
            await mcp_session.list_tools()
        endpoint = app.state.mcp
        assert endpoint._task is not None
        assert not endpoint._task.done(), "running while the app serves"
    assert endpoint._task.done(), "stopped when the app shut down"
    assert not endpoint._task.cancelled(), "ended by the app's shutdown, not torn down with it"
