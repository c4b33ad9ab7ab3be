"""``POST /api/chat`` under a real React ``useChat`` page, bundled by esbuild, in Chromium.

The page (``tests/node/use_chat_page``) is what a web UI author writes with ``@ai-sdk/react``:
``useChat`` with the default transport (path ``/api/chat``, same origin), given only the
bearer header and the agent options as extra body fields. It is bundled once per session
into a temporary directory and served under ``/usechat/`` by a small dispatcher in front of
the chat app, so the browser, the AI SDK's stream parser and our server meet as in production.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import Locator, Page, expect
from starlette.responses import FileResponse, PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from agentloop.ask_llm import ask_llm_tool
from agentloop.events import Done
from agentloop.tools.base import Tool
from chat_app import create_app
from tests.e2e.conftest import TOKEN, WAIT_MS
from tests.fakes.loopback import LoopbackServer
from tests.fakes.node_client import run_node
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.sample_tools import echo, make_file_tool, tiny_png
from tests.served import FinishedRuns, make_service

pytestmark = pytest.mark.e2e

expect.set_options(timeout=WAIT_MS)

PAGE_PREFIX = "/usechat/"
PAGE_FILES = {
    "": ("index.html", "text/html; charset=utf-8"),
    "index.html": ("index.html", "text/html; charset=utf-8"),
    "app.js": ("app.js", "text/javascript; charset=utf-8"),
    "style.css": ("style.css", "text/css; charset=utf-8"),
}
# The test page may talk to its own origin only: /api/chat must work same-origin.
PAGE_HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
}


@pytest.fixture(scope="session")
def use_chat_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page bundled by esbuild (a fraction of a second), once per session."""
    outdir = tmp_path_factory.mktemp("use_chat_page")
    built = run_node("use_chat_page/build.mjs", {"outdir": str(outdir)})
    assert built["warnings"] == 0, built
    assert built["files"]["app.js"] > 0, built
    return outdir


class PageThenApp:
    """ASGI: the built page under ``/usechat/``, everything else to the chat app."""

    def __init__(self, bundle: Path, app: ASGIApp) -> None:
        self.bundle = bundle
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(PAGE_PREFIX):
            await self.app(scope, receive, send)
            return
        known = PAGE_FILES.get(path.removeprefix(PAGE_PREFIX))
        if known is None or scope["method"] != "GET":
            response: Any = PlainTextResponse("not found", status_code=404)
        else:
            name, media_type = known
            response = FileResponse(self.bundle / name, media_type=media_type, headers=PAGE_HEADERS)
        await response(scope, receive, send)


@dataclass
class UseChatServer:
    url: str
    finished: FinishedRuns = field(default_factory=FinishedRuns)

    def page_url(self, body: dict[str, Any] | None = None, token: str = TOKEN) -> str:
        """The page, told its token and extra body fields in the fragment (never sent)."""
        config = json.dumps({"token": token, "body": body or {}})
        return f"{self.url}{PAGE_PREFIX}#{quote(config)}"

    def wait_for_done(self) -> Done:
        """The one run's ``done``, once the service finished it."""
        [done] = self.finished.wait(1)
        return done


ServeUseChat = Callable[[list[Tool]], UseChatServer]


@pytest.fixture
def serve_use_chat(llm: ScriptedLLM, use_chat_bundle: Path) -> Iterator[ServeUseChat]:
    """The chat app (bearer auth, the given tools) with the page in front, on loopback."""
    servers: list[LoopbackServer] = []

    def serve(tools: list[Tool]) -> UseChatServer:
        service = make_service(tools, heartbeat_s=1.0)
        app = PageThenApp(use_chat_bundle, create_app(service))
        server = LoopbackServer(app, name="use-chat").start()
        servers.append(server)
        chat = UseChatServer(url=server.url)
        service.on_finish.append(chat.finished.record)
        return chat

    yield serve
    for server in servers:
        server.stop()


def send(page: Page, text: str) -> None:
    page.get_by_role("textbox", name="Message").fill(text)
    page.get_by_role("button", name="Send").click()


def wait_finished(page: Page, count: int) -> dict[str, Any]:
    """Wait for useChat's ``count``-th onFinish; returns what it reported (finishReason,
    isAbort, isError, isDisconnect). The server's done comes before the page has it all."""
    finished = page.locator(f'.finished[data-count="{count}"]')
    finished.wait_for(state="attached")
    last: dict[str, Any] = json.loads(finished.get_attribute("data-last") or "null")
    return last


def last_assistant(page: Page) -> Locator:
    return page.locator('article.message[data-role="assistant"]').last


def answer_text(page: Page) -> str:
    """What the page shows as the answer: the text parts after the last tool part."""
    text: str = page.evaluate(
        """() => {
            const reply = [...document.querySelectorAll('article[data-role="assistant"]')].pop();
            if (!reply) return '';
            const parts = [...reply.querySelectorAll(':scope > .text, :scope > .tool')];
            const lastTool = parts.map((p) => p.classList.contains('tool')).lastIndexOf(true);
            return parts.slice(lastTool + 1).map((p) => p.textContent).join('');
        }"""
    )
    return text


def metadata(reply: Locator) -> Any:
    """The assistant message's metadata as useChat merged it from the stream."""
    return json.loads(reply.locator(".metadata pre").text_content() or "null")


FINISHED = {"finishReason": "stop", "isAbort": False, "isError": False, "isDisconnect": False}


def test_use_chat_shows_the_tool_part_and_the_answer_and_sends_them_back(
    page: Page, serve_use_chat: ServeUseChat, llm: ScriptedLLM
) -> None:
    server = serve_use_chat([echo])
    llm.script(
        Reply(tool_calls=[call("echo", text="hello from echo")]),
        Reply(text="The echo tool said: hello from echo.", chunk_delay=0.01),
    )
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    page.goto(server.page_url())
    expect(page.get_by_role("status")).to_have_text("ready")

    send(page, "What does echo say?")
    assert wait_finished(page, 1) == FINISHED
    expect(page.get_by_role("status")).to_have_text("ready")
    expect(page.get_by_role("alert")).to_have_count(0)
    assert posts == [f"{server.url}/api/chat"]  # the default transport's path, same origin

    user = page.locator('article.message[data-role="user"]')
    expect(user.locator(".text")).to_have_text("What does echo say?")
    reply = last_assistant(page)
    tool = reply.locator("section.tool")
    expect(tool).to_have_count(1)
    expect(tool).to_have_attribute("data-tool", "echo")
    expect(tool).to_have_attribute("data-state", "output-available")
    assert json.loads(tool.locator(".tool-input").inner_text()) == {"text": "hello from echo"}
    assert "hello from echo" in tool.locator(".tool-output").inner_text()

    done = server.wait_for_done()
    assert done.stop_reason == "completed"
    assert done.text == "The echo tool said: hello from echo."
    assert answer_text(page) == done.text
    shown = metadata(reply)
    assert shown["stopReason"] == "completed"
    assert shown["iterations"] == done.iterations == 2
    assert shown["usage"]["totalTokens"] == done.usage.total_tokens
    # The model saw the tool's result before answering: the page's request ran the agent.
    first, second = llm.requests
    assert first.messages[-1] == {"role": "user", "content": "What does echo say?"}
    tool_result = second.messages[-1]
    assert tool_result["role"] == "tool"

    # A follow-up: useChat sends the whole conversation back, tool part included, and the
    # model gets it as the history it made (the call, its result, the answer).
    llm.script(Reply(text="Still hello."))
    send(page, "And again?")
    assert wait_finished(page, 2) == FINISHED
    expect(last_assistant(page).locator(".text")).to_have_text("Still hello.")
    history = [m for m in llm.requests[2].messages if m["role"] != "system"]
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant", "user"]
    assert history[1]["tool_calls"][0]["function"]["name"] == "echo"
    assert json.loads(history[1]["tool_calls"][0]["function"]["arguments"]) == {
        "text": "hello from echo"
    }
    assert history[2]["content"] == tool_result["content"]
    assert history[3]["content"] == done.text
    assert history[4]["content"] == "And again?"


def test_use_chat_receives_a_file_part_whose_url_is_the_picture(
    page: Page, serve_use_chat: ServeUseChat, llm: ScriptedLLM
) -> None:
    server = serve_use_chat([make_file_tool()])
    llm.script(Reply(tool_calls=[call("make_file", name="chart.png")]), Reply(text="Made it."))
    page.goto(server.page_url())
    expect(page.get_by_role("status")).to_have_text("ready")

    send(page, "Chart it")
    assert wait_finished(page, 1) == FINISHED
    part = last_assistant(page).locator('section.part[data-type="file"]')
    expect(part).to_have_count(1)
    shown = json.loads(part.locator("pre").inner_text())
    assert shown["mediaType"] == "image/png"
    assert shown["providerMetadata"]["agentloop"]["filename"] == "chart.png"
    picture = page.request.get(shown["url"] if "://" in shown["url"] else server.url + shown["url"])
    assert picture.status == 200
    assert picture.body() == tiny_png()

    # Sent back with the conversation, the file part is the assistant's: nothing to attach.
    llm.script(Reply(text="Still there."))
    send(page, "And now?")
    assert wait_finished(page, 2) == FINISHED
    assert "[Attached files" not in str(llm.requests[2].messages)


def test_use_chat_shows_the_sub_agent_part(
    page: Page, serve_use_chat: ServeUseChat, llm: ScriptedLLM
) -> None:
    server = serve_use_chat([ask_llm_tool(), echo])
    llm.script(
        Reply(tool_calls=[call("ask_llm", query="What does echo say?")]),  # top level
        Reply(tool_calls=[call("echo", text="nested hello")]),  # the sub-agent
        Reply(text="The echo said nested hello."),  # the sub-agent's answer
        Reply(text="The sub-agent heard nested hello."),  # top level, final
    )
    # ask_llm is opt-in: the options travel as the transport's extra body fields.
    page.goto(server.page_url({"agentloop": {"tools": ["ask_llm", "echo"]}}))

    send(page, "Ask a sub-agent what echo says")
    assert wait_finished(page, 1) == FINISHED
    expect(page.get_by_role("alert")).to_have_count(0)

    done = server.wait_for_done()
    assert done.stop_reason == "completed"
    assert llm.requests[0].tool_names == ["ask_llm", "echo"]
    reply = last_assistant(page)
    ask = reply.locator("section.tool")
    expect(ask).to_have_count(1)  # the sub-agent's echo is not a top-level tool part
    expect(ask).to_have_attribute("data-tool", "ask_llm")
    expect(ask).to_have_attribute("data-state", "output-available")
    assert "The echo said nested hello." in ask.locator(".tool-output").inner_text()
    # One data-subagent part (updated in place by its id), in its final state.
    part = reply.locator('section.data[data-type="data-subagent"]')
    expect(part).to_have_count(1)
    call_id = ask.get_attribute("data-call-id")
    expect(part).to_have_attribute("data-id", call_id or "?")
    data = json.loads(part.locator(".data-json").inner_text())
    assert data["callId"] == call_id
    [agent] = data["agents"]
    assert agent["query"] == "What does echo say?"
    assert agent["status"] == "finished"
    assert agent["stopReason"] == "completed"
    assert agent["text"] == "The echo said nested hello."
    [nested] = agent["tools"]
    assert nested["toolName"] == "echo"
    assert nested["input"] == {"text": "nested hello"}
    assert nested["state"] == "output-available"
    assert "nested hello" in nested["output"]
    assert answer_text(page) == done.text == "The sub-agent heard nested hello."


def test_stop_cancels_the_run(page: Page, serve_use_chat: ServeUseChat, llm: ScriptedLLM) -> None:
    server = serve_use_chat([])
    long_answer = " ".join(f"word{i}" for i in range(400))
    llm.script(Reply(text=long_answer, chunk_delay=0.05))  # 20 s if nobody stops it
    page.goto(server.page_url())

    send(page, "Talk for a long time")
    expect(last_assistant(page).locator(".text")).to_contain_text("word3")
    page.get_by_role("button", name="Stop").click()
    assert wait_finished(page, 1)["isAbort"] is True
    expect(page.get_by_role("status")).to_have_text("ready")
    expect(page.get_by_role("button", name="Stop")).to_be_disabled()

    done = server.wait_for_done()
    assert done.stop_reason == "cancelled"
    shown = answer_text(page)
    assert shown.startswith("word0 word1 word2 word3")
    assert "word399" not in shown
