"""Pictures of the chat page: docs/chat-page.png, and the layout shots of issue 29.

    make screenshot      (or: .venv/bin/python -m tests.e2e.screenshot [output.png])

writes docs/chat-page.png (a finished answer with tool cards, a code result as terminal
output and the sources, 1280 wide and as tall as the conversation) and, in
test-output/screenshots/, the page at 1280x800 and 390x844: empty (with the example prompts),
settings open (its top and its end), and that answer; at 390x844 also a run paused on
Approve / Deny and a token budget the page refuses.

Same setup as the browser tests: the chat app on a loopback port, the scripted model behind
it, Debian's Chromium driven by Playwright. The tools are stand-ins with canned results, so
the pictures are the same on every machine and nothing leaves it. The browser test
``test_chat_page_layout.py`` takes the same pictures and checks their layout.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
for extra in (ROOT, ROOT / "functions" / "chat"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from playwright.sync_api import Browser, Page, sync_playwright  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from agentloop.tools.base import Tool, ToolContext, tool  # noqa: E402
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, TOKEN  # noqa: E402
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call  # noqa: E402

SIZES = {"1280x800": (1280, 800), "390x844": (390, 844)}
"""The viewports of the layout shots: a laptop and a phone."""

SHOTS = ROOT / "test-output" / "screenshots"

QUESTION = "About how many people live in Lyon and Marseille together?"

ANSWER = """Together, **Lyon and Marseille have about 1.4 million inhabitants**:

| city | inhabitants |
| --- | --: |
| Lyon | 522,250 |
| Marseille | 873,076 |
| **total** | **1,395,326** |

Both are municipal populations from the 2021 census; the metropolitan areas are much \
larger (about 2.3 and 1.9 million).
"""

PROGRAM = """\
lyon, marseille = 522_250, 873_076
print(f"Lyon + Marseille = {lyon + marseille:,}")
print(f"Marseille is {marseille / lyon:.2f}x Lyon")
"""


class QueryArgs(BaseModel):
    query: str


class CodeArgs(BaseModel):
    code: str


@tool(name="search_web")
async def fake_search(args: QueryArgs, ctx: ToolContext) -> dict[str, Any]:
    """Search the web (canned results)."""
    await asyncio.sleep(0.3)
    city = args.query.split()[0]
    return {
        "query": args.query,
        "provider": "example",
        "results": [
            {
                "title": f"{city}: population (2021 census)",
                "url": f"https://insee.example/{city.lower()}",
                "snippet": f"Municipal population of {city} ...",
            }
        ],
    }


@tool(name="execute_code")
async def fake_python(args: CodeArgs, ctx: ToolContext) -> dict[str, Any]:
    """Run Python (canned output, in execute_code's own result shape)."""
    await asyncio.sleep(0.2)
    return {
        "exit_code": 0,
        "stdout": "Lyon + Marseille = 1,395,326\nMarseille is 1.67x Lyon\n",
        "stderr": "",
        "truncated": False,
        "duration_ms": 38,
        "timed_out": False,
        "killed_by": None,
        "notes": [],
    }


TOOLS: list[Tool] = [fake_search, fake_python]
MODELS = ("groq:llama-3.3-70b-versatile", "openai:gpt-4o-mini", "openai:gpt-4.1-mini")
"""What the pictured server's /v1/models lists, its default first."""
SETTINGS = {"token": TOKEN, "tools": ["search_web", "execute_code"]}


def script_answer(llm: ScriptedLLM) -> None:
    """The model's side of the pictured conversation: two searches, a program, the answer."""
    llm.script(
        Reply(
            text="I'll look up both cities.",
            tool_calls=[
                call("search_web", query="Lyon population 2021 census"),
                call("search_web", query="Marseille population 2021 census"),
            ],
        ),
        Reply(tool_calls=[call("execute_code", code=PROGRAM)]),
        Reply(text=ANSWER),
    )


def open_page(browser: Browser, url: str, size: str) -> Page:
    """A fresh context at one of SIZES with the pictured settings saved, the page loaded."""
    width, height = SIZES[size]
    context = browser.new_context(viewport={"width": width, "height": height}, locale="en-US")
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.add_init_script(
        f"localStorage.setItem('agentloop.settings', {json.dumps(json.dumps(SETTINGS))})"
    )
    page.goto(url + "/")
    # The model picker is filled from /v1/models: wait for it, it is in the settings shot.
    page.locator('#set-model[data-source="server"]').wait_for(state="attached")
    return page


def ask_and_wait(page: Page) -> None:
    """Send the question, wait for the answer, and bring the code result into view."""
    page.get_by_role("textbox", name="Message").fill(QUESTION)
    page.keyboard.press("Enter")
    page.locator('article.assistant[data-state="done"]').wait_for()
    page.locator(".tool-card[data-name='execute_code']").evaluate(
        "(card) => card.scrollIntoView({block: 'start'})"
    )


Check = Callable[[Page, str, str], None]
"""Called with (page, state, size) before each shot: the layout test's assertions."""


def shoot(
    browser: Browser, url: str, llm: ScriptedLLM, out: Path, check: Check | None = None
) -> list[Path]:
    """The layout shots into ``out``: {empty,settings,settings-end,answer}-{size}.png."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def take(page: Page, state: str, size: str) -> None:
        if check:
            check(page, state, size)
        written.append(out / f"{state}-{size}.png")
        page.screenshot(path=str(written[-1]))

    for size in SIZES:
        page = open_page(browser, url, size)
        try:
            take(page, "empty", size)
            page.get_by_role("banner").get_by_role("button", name="Settings").click()
            take(page, "settings", size)
            # The panel scrolls on its own: its end too, to see that nothing is cut off.
            page.locator("#settings").evaluate("(panel) => panel.scrollTo(0, panel.scrollHeight)")
            take(page, "settings-end", size)
            page.get_by_role("button", name="Close").click()
            script_answer(llm)
            ask_and_wait(page)
            take(page, "answer", size)
        finally:
            page.context.close()
    return written


def shoot_phone_states(browser: Browser, url: str, llm: ScriptedLLM, out: Path) -> list[Path]:
    """Two more phone shots: a run paused on Approve / Deny, and a token budget refused."""
    written = [out / "paused-390x844.png", out / "budget-invalid-390x844.png"]
    page = open_page(browser, url, "390x844")
    try:
        page.get_by_role("banner").get_by_role("button", name="Settings").click()
        page.get_by_label("Ask before running").fill("execute_code")
        page.get_by_role("button", name="Close").click()
        script_answer(llm)
        page.get_by_role("textbox", name="Message").fill(QUESTION)
        page.keyboard.press("Enter")
        page.locator('article.assistant[data-state="paused"]').wait_for()
        page.screenshot(path=str(written[0]))
        page.get_by_role("button", name="Deny").click()
        page.locator('article.assistant[data-state="done"]').wait_for()
        page.get_by_role("banner").get_by_role("button", name="Settings").click()
        page.get_by_label("Token budget").fill("0")
        page.get_by_role("button", name="Close").click()
        page.get_by_role("textbox", name="Message").fill("And Toulouse?")
        page.keyboard.press("Enter")
        page.locator('#set-token-budget[aria-invalid="true"]').wait_for()
        page.screenshot(path=str(written[1]))
    finally:
        page.context.close()
    return written


EARLIER_TITLES = ["Weekend train times to Marseille", "Plot of monthly rainfall", "Lyon museums"]


def name_earlier_threads(url: str) -> None:
    """The README picture's list shows other conversations than the one it asks: the earlier
    shots' threads (the same question each) get titles of their own."""
    import httpx

    auth = {"authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=url, headers=auth, timeout=10) as client:
        threads = client.get("/threads").json()["data"]
        for thread, title in zip(threads, EARLIER_TITLES, strict=False):
            client.patch(f"/threads/{thread['id']}", json={"title": title}).raise_for_status()


def main(argv: list[str]) -> int:
    output = Path(argv[0]) if argv else ROOT / "docs" / "chat-page.png"
    from tests.helpers import TEST_CONFIG
    from tests.served import ServedApp, make_service

    with ScriptedLLM() as llm, tempfile.TemporaryDirectory() as store:
        os.environ.update(
            AGENTLOOP_STORE=f"sqlite:///{store}/store.db",  # the shots' threads only
            GROQ_BASE_URL=llm.groq_base_url,
            GROQ_API_KEY="screenshot",
            OPENAI_BASE_URL=llm.openai_base_url,
            OPENAI_API_KEY="screenshot",
        )
        config = TEST_CONFIG.model_copy(update={"default_model": MODELS[0]})
        service = make_service(TOOLS, config, models=MODELS)
        with (
            ServedApp(service, name="chat-app") as server,
            sync_playwright() as playwright,
        ):
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                shots = shoot(browser, server.url, llm, SHOTS)
                shots += shoot_phone_states(browser, server.url, llm, SHOTS)
                name_earlier_threads(server.url)
                page = open_page(browser, server.url, "1280x800")
                script_answer(llm)
                ask_and_wait(page)
                page.get_by_role("textbox", name="Message").fill("And Toulouse?")
                # The README's picture: tall enough for the whole conversation, question first.
                hidden = page.locator("#conversation").evaluate(
                    "(c) => c.scrollHeight - c.clientHeight"
                )
                page.set_viewport_size({"width": 1280, "height": min(800 + hidden, 1400)})
                page.screenshot(path=str(output))
            finally:
                browser.close()
    for shot in shots:
        print(f"wrote {shot.relative_to(ROOT)}")
    print(f"wrote {output} ({output.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
