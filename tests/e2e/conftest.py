"""The chat page in a real browser: Debian's Chromium driven by Playwright for Python.

The chat app runs on a loopback port (``LoopbackServer``) with the scripted model behind it,
so a test sees exactly what a person would: the page, the SSE stream, the server's answers.
Chromium comes from Debian (``apt-get install chromium``; ``make test`` installs it as root);
Playwright's own browser downloads are never used. Nothing here reaches the internet: the
launch flags switch off Chromium's background traffic, and Playwright gives the browser a
fresh temporary profile.

Each test leaves a screenshot in ``test-output/e2e/<test>.png``.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, Playwright, Request, sync_playwright

from agentloop.config import AgentConfig
from agentloop.tools.base import Tool
from tests.fakes.scripted_llm import ScriptedLLM
from tests.helpers import ROOT, TEST_CONFIG
from tests.served import TOKEN, ServedApp, make_service

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
OUTPUT = ROOT / "test-output" / "e2e"
MODEL = "groq:llama-3.3-70b-versatile"

# Headless, and nothing that phones home. The switches turn off the background traffic they
# can (sync, component updates, ...); what is left (autofill, account and update look-ups)
# finds every host name unresolvable and every proxied connection refused on loopback. The
# tests only use 127.0.0.1, which bypasses the proxy.
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--metrics-recording-only",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1",
    "--proxy-server=http://127.0.0.1:9",
]

# Timeouts for things that happen on this machine within a second or two; generous for CI.
WAIT_MS = 15_000


@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(
            f"the browser tests need Debian's Chromium at {CHROMIUM}: install it with "
            "'sudo apt-get install chromium' (make test does it when run as root), "
            "or deselect them with -m 'not e2e'",
            pytrace=False,
        )
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="package")
def browser(playwright: Playwright) -> Iterator[Browser]:
    browser = playwright.chromium.launch(
        executable_path=CHROMIUM,
        headless=True,
        args=CHROMIUM_ARGS,
        # Playwright adds --user-data-dir=<fresh temporary directory> itself.
        timeout=30_000,
    )
    yield browser
    browser.close()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh context (empty localStorage) and page; its screenshot is taken at the end."""
    context = browser.new_context(viewport={"width": 1000, "height": 800}, locale="en-US")
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    script_errors: list[str] = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    yield page
    OUTPUT.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^\w.-]+", "_", request.node.name)
    try:
        page.screenshot(path=str(OUTPUT / f"{name}.png"), full_page=True)
    finally:
        context.close()
    if script_errors:
        pytest.fail(f"uncaught errors in the page: {script_errors}", pytrace=False)


@pytest.fixture(autouse=True)
def _threads_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's conversations (the page keeps every chat in a thread) in its own SQLite
    store, not in the working directory's default one."""
    monkeypatch.setenv("AGENTLOOP_STORE", f"sqlite:///{tmp_path / 'store.db'}")
    monkeypatch.setenv("AGENTLOOP_FILES_DIR", str(tmp_path / "files"))


ServeChat = Callable[..., ServedApp]


@pytest.fixture
def serve_chat(llm: ScriptedLLM) -> Iterator[ServeChat]:
    """Start the chat app (bearer auth, the given tools; ``models``: what ``/v1/models``
    lists, the default first) on a loopback port."""
    servers: list[ServedApp] = []

    def serve(
        tools: list[Tool], config: AgentConfig = TEST_CONFIG, models: tuple[str, ...] = ()
    ) -> ServedApp:
        service = make_service(tools, config, heartbeat_s=1.0, models=models)
        server = ServedApp(service, name="chat-app").start()
        servers.append(server)
        return server

    yield serve
    for server in servers:
        server.stop()


def open_chat(
    page: Page,
    server: ServedApp,
    *,
    token: str = TOKEN,
    tools: tuple[str, ...] = (),
    extra_tools: str = "",
    max_iterations: int | None = None,
) -> None:
    """Load the page and fill in the settings form the way a person would."""
    page.goto(server.url + "/")
    settings_button(page).click()
    page.get_by_label("Bearer token").fill(token)
    for name in ("search_web", "scrape", "execute_code", "ask_llm"):
        page.get_by_role("checkbox", name=name).set_checked(name in tools)
    page.get_by_label("Other tools").fill(extra_tools)
    if max_iterations is not None:
        page.get_by_label("Max iterations").fill(str(max_iterations))
    page.get_by_role("button", name="Close").click()  # put the settings away again


def settings_button(page: Page) -> Locator:
    """The header's button that opens and closes the settings panel."""
    return page.get_by_role("banner").get_by_role("button", name="Settings")


def send(page: Page, text: str) -> None:
    """Type a message and press Enter."""
    box = page.get_by_role("textbox", name="Message")
    box.fill(text)
    box.press("Enter")


def wait_for_reply(page: Page, state: str = "done") -> None:
    page.locator(f'article.assistant[data-state="{state}"]').last.wait_for()


def chat_bodies(page: Page, path: str = "/chat") -> list[Any]:
    """Every JSON body the page POSTs to a URL ending in ``path``, in order, as it is sent."""
    bodies: list[Any] = []

    def record(request: Request) -> None:
        if request.method == "POST" and request.url.endswith(path):
            bodies.append(request.post_data_json)

    page.on("request", record)
    return bodies
