"""The chat page's resumable runs, in Chromium, against the app and the scripted model (a slow
answer, ``chunk_delay``): every run on a thread is sent ``resumable``; a connection that
drops mid-answer is picked up again with ``GET /chat/stream`` and ``Last-Event-ID`` and the
answer goes on in place, once; a reload mid-answer follows the answer to its end; a run that
ended while the page was away is shown from the thread; Stop only stops following (the run
ends on the server, kept in the thread). Pictures of a resumed answer at 1280x800 and 390x844
go to ``test-output/screenshots/resumed-*.png``."""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any, cast

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import WAIT_MS, ServeChat, open_chat, send, wait_for_reply
from tests.e2e.screenshot import SHOTS, SIZES
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.sample_tools import echo, gate_tool
from tests.served import ServedApp

pytestmark = pytest.mark.e2e

expect.set_options(timeout=WAIT_MS)

REPLY = "article.assistant"
WORDS = [f"word{i}" for i in range(60)]
ANSWER = " ".join(WORDS)


class Cuttable:
    """A loopback TCP forwarder in front of the app whose connections the test cuts: a real
    dropped connection for the browser (Chromium's offline mode leaves a stream that is
    already open alone). While it is down, a new connection is reset as soon as it comes."""

    def __init__(self, target: str) -> None:
        self.target = ("127.0.0.1", int(target.rsplit(":", 1)[1]))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.down = threading.Event()
        self.lock = threading.Lock()
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.down.is_set():
                reset(client)
                continue
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.open += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=pump, args=(src, dst), daemon=True).start()

    def cut(self) -> None:
        """Every open connection reset, and new ones too until ``restore``."""
        self.down.set()
        with self.lock:
            for sock in self.open:
                reset(sock)
            self.open.clear()

    def restore(self) -> None:
        self.down.clear()

    def close(self) -> None:
        self.listener.close()
        self.cut()


def reset(sock: socket.socket) -> None:
    """Closed with a TCP reset (linger 0): the peer sees the connection broken. The shutdown
    wakes the pump blocked reading it (a close alone would leave it waiting)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def cuttable() -> Iterator[list[Cuttable]]:
    made: list[Cuttable] = []
    yield made
    for proxy in made:
        proxy.close()


def behind(made: list[Cuttable], server: ServedApp) -> tuple[Cuttable, ServedApp]:
    """A cuttable forwarder to server, and what open_chat needs to load the page through it."""
    proxy = Cuttable(server.url)
    made.append(proxy)
    return proxy, cast(ServedApp, proxy)


def requests_to(page: Page, path: str) -> list[Any]:
    """The page's requests whose URL path is ``path``, as they are sent."""
    seen: list[Any] = []
    page.on("request", lambda request: seen.append(request) if path in request.url else None)
    return seen


def open_thread_id(page: Page) -> str:
    expect(page).to_have_url(re.compile(r"#thread=th_"))
    return page.url.split("#thread=", 1)[1]


def answer_words(page: Page) -> list[str]:
    return page.locator(f"{REPLY} .answer").last.inner_text().split()


def test_a_dropped_connection_resumes_and_the_answer_is_shown_once(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM, cuttable: list[Cuttable]
) -> None:
    server = serve_chat([echo])
    proxy, through = behind(cuttable, server)
    posts = requests_to(page, "/chat")
    llm.script(
        Reply(text="Let me echo first.", tool_calls=[call("echo", text="ping")]),
        Reply(text=ANSWER, chunk_delay=0.03),
    )
    open_chat(page, through, extra_tools="echo")
    send(page, "Echo, then count.")
    expect(page.locator(f"{REPLY} .answer").last).to_contain_text("word5")
    proxy.cut()  # the connection drops mid-answer
    expect(page.locator(f'{REPLY}[data-reconnecting="true"]')).to_have_count(1)
    expect(page.locator("#status")).to_have_text("Connection lost; reconnecting…")
    expect(page.locator(f"{REPLY} .answer").last).not_to_contain_text(WORDS[-1])
    proxy.restore()
    wait_for_reply(page)
    expect(page.locator("#status")).to_have_text("Done.")
    body = next(r for r in posts if r.method == "POST").post_data_json
    assert body["resumable"] is True
    assert body["thread_id"] == "new"
    resumed = [r for r in posts if r.method == "GET" and "/chat/stream?thread_id=" in r.url]
    assert resumed, "the page never asked for the rest of the stream"
    last_ids = [int(r.headers["last-event-id"]) for r in resumed if "last-event-id" in r.headers]
    assert last_ids
    assert last_ids[-1] > 5
    reply = page.locator(REPLY)
    expect(reply).to_have_count(1)
    expect(reply.locator(".tool-card")).to_have_count(1)
    assert " ".join(answer_words(page)) == ANSWER  # every word, none twice
    expect(reply.locator(".answer").first).to_have_text("Let me echo first.")
    expect(reply.locator(".resumed")).to_have_text(re.compile("picked it up again"))
    [done] = server.runs(1)
    assert done.stop_reason == "completed"
    shoot_resumed(page)


def shoot_resumed(page: Page) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    for size, (width, height) in SIZES.items():
        page.set_viewport_size({"width": width, "height": height})
        page.locator(f"{REPLY} .meta").last.scroll_into_view_if_needed()
        overflow = page.evaluate("() => document.documentElement.scrollWidth - innerWidth")
        assert overflow <= 0, f"{size}: the page scrolls sideways"
        page.screenshot(path=str(SHOTS / f"resumed-{size}.png"))


def test_a_reload_mid_answer_follows_it_to_its_end(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([])
    llm.script(Reply(text="Hi there."), Reply(text=ANSWER, chunk_delay=0.03))
    open_chat(page, server)
    send(page, "Hello")
    wait_for_reply(page)
    send(page, "Count for me.")
    expect(page.locator(f"{REPLY} .answer").last).to_contain_text("word3")
    page.reload()
    expect(page.locator("#status")).to_contain_text("following it")
    expect(page.locator(".msg.user")).to_have_text(["Hello", "Count for me."])
    expect(page.locator(f'{REPLY}[data-state="running"]')).to_have_count(1)
    wait_for_reply(page)
    expect(page.locator(REPLY)).to_have_count(2)
    assert " ".join(answer_words(page)) == ANSWER
    expect(page.locator(f'{REPLY}[data-state="saved"] .answer')).to_have_text("Hi there.")
    server.runs(2)
    # The conversation goes on on its thread.
    llm.script(Reply(text="Next."))
    send(page, "Next?")
    expect(page.locator(f'{REPLY}[data-state="done"]')).to_have_count(2)
    sent = [m["content"] for m in llm.requests[-1].messages if m["role"] == "user"]
    assert sent == ["Hello", "Count for me.", "Next?"]


def test_a_reload_after_a_saved_round_shows_the_round_once(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    gate = threading.Event()
    server = serve_chat([gate_tool(gate), echo])
    llm.script(
        Reply(text="Echo first.", tool_calls=[call("echo", text="one")]),
        Reply(tool_calls=[call("gate", name="g1")]),
        Reply(text="All done."),
    )
    open_chat(page, server, extra_tools="echo, gate")
    try:
        send(page, "Echo, then the gate.")
        expect(page.locator('.tool-card[data-name="gate"]')).to_have_attribute(
            "data-status", "running"
        )
        page.reload()  # the echo round is saved in the thread; the run waits on the gate
        expect(page.locator('.tool-card[data-name="gate"]')).to_have_attribute(
            "data-status", "running"
        )
        expect(page.locator(".msg.user")).to_have_text(["Echo, then the gate."])
        expect(page.locator(REPLY)).to_have_count(1)
        expect(page.locator('.tool-card[data-name="echo"]')).to_have_count(1)
    finally:
        gate.set()
    wait_for_reply(page)
    expect(page.locator(f"{REPLY} .answer").last).to_have_text("All done.")
    expect(page.locator(".tool-card")).to_have_count(2)
    server.runs(1)


def test_stop_asks_the_server_to_stop_a_resumable_run_after_its_round(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    """A run on a thread is resumable, so the page's leaving would not stop it: Stop asks the
    server (POST /chat/stream/cancel), which finishes the tool round and keeps it."""
    gate = threading.Event()
    server = serve_chat([gate_tool(gate)])
    llm.script(Reply(tool_calls=[call("gate", name="g1")]), Reply(text="Opened it."))
    open_chat(page, server, extra_tools="gate")
    cancels: list[int] = []
    page.on(
        "response",
        lambda r: cancels.append(r.status) if "/chat/stream/cancel" in r.url else None,
    )
    try:
        send(page, "Open the gate.")
        expect(page.locator('.tool-card[data-name="gate"]')).to_have_attribute(
            "data-status", "running"
        )
        page.get_by_role("button", name="Stop").click()
        wait_for_reply(page, "stopped")
        alert = page.locator(REPLY).last.get_by_role("alert")
        expect(alert).to_contain_text("send “continue” to go on")
        expect(page.locator(".tool-status")).to_have_text("finishing on the server")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.set_viewport_size({"width": 1280, "height": 800})
        page.screenshot(path=str(SHOTS / "stopped-1280x800.png"))
        page.set_viewport_size({"width": 390, "height": 844})
        page.screenshot(path=str(SHOTS / "stopped-390x844.png"))
    finally:
        gate.set()
    [run] = server.runs(1)
    assert run.stop_reason == "cancelled"  # asked to stop, after its round
    assert cancels == [202]
    assert len(llm.requests) == 1, "no model call after the round"
    page.reload()
    expect(page.locator('.tool-card[data-name="gate"]')).to_have_count(1)
    expect(page.locator(f'{REPLY}[data-state="saved"] .answer').last).to_contain_text("cancelled")


def test_a_run_that_ended_while_the_page_was_offline_is_shown_from_the_thread(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM, cuttable: list[Cuttable]
) -> None:
    gate = threading.Event()
    server = serve_chat([gate_tool(gate)])
    proxy, through = behind(cuttable, server)
    llm.script(Reply(text="Waiting.", tool_calls=[call("gate", name="g1")]), Reply(text="Open."))
    open_chat(page, through, extra_tools="gate")
    send(page, "Open the gate.")
    expect(page.locator('.tool-card[data-name="gate"]')).to_have_attribute("data-status", "running")
    proxy.cut()
    expect(page.locator(f'{REPLY}[data-reconnecting="true"]')).to_have_count(1)
    gate.set()
    server.runs(1)  # the run ends while the page cannot reach the server
    proxy.restore()
    expect(page.locator("#status")).to_have_text(
        "The answer finished while the connection was down; here it is."
    )
    expect(page.locator(f'{REPLY}[data-state="saved"] .answer').last).to_have_text("Open.")
    expect(page.locator(".tool-card")).to_have_count(1)
