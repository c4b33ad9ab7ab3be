"""Write docs/chat-page.png: the chat page after a finished conversation with tool cards.

    make screenshot      (or: .venv/bin/python -m tests.e2e.screenshot [output.png])

Same setup as the browser tests: the chat app on a loopback port, the scripted model behind
it, Debian's Chromium driven by Playwright. The tools are stand-ins with canned results, so
the picture is the same on every machine and nothing leaves it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
for extra in (ROOT, ROOT / "functions" / "chat"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from playwright.sync_api import sync_playwright  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from agentloop.tools.base import ToolContext, tool  # noqa: E402
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, TOKEN  # noqa: E402
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call  # noqa: E402

QUESTION = "About how many people live in Lyon and Marseille together?"

ANSWER = """Together, **Lyon and Marseille have about 1.4 million inhabitants**:

| city | inhabitants (city proper) |
| --- | --: |
| Lyon | 522,250 |
| Marseille | 873,076 |
| **total** | **1,395,326** |

Both figures are municipal populations from the 2021 census; the metropolitan areas are \
much larger (about 2.3 and 1.9 million). Sources: *insee.example*, *city-data.example*.
"""


class QueryArgs(BaseModel):
    query: str


class CodeArgs(BaseModel):
    code: str


@tool(name="search_web")
async def fake_search(args: QueryArgs, ctx: ToolContext) -> dict[str, Any]:
    """Search the web (canned results)."""
    await asyncio.sleep(0.4)
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
    """Run Python (canned output)."""
    await asyncio.sleep(0.2)
    return {"exit_code": 0, "stdout": "1395326\n", "stderr": "", "duration_ms": 21}


def main(argv: list[str]) -> int:
    output = Path(argv[0]) if argv else ROOT / "docs" / "chat-page.png"
    from agentloop.auth import BearerAuth, hash_token
    from agentloop.tools.registry import ToolRegistry
    from chat_app import ChatService, create_app
    from tests.fakes.loopback import LoopbackServer
    from tests.helpers import TEST_CONFIG

    with ScriptedLLM() as llm:
        os.environ.update(
            GROQ_BASE_URL=llm.groq_base_url,
            GROQ_API_KEY="screenshot",
            OPENAI_BASE_URL=llm.openai_base_url,
            OPENAI_API_KEY="screenshot",
        )
        llm.script(
            Reply(
                text="I'll look up both cities.",
                tool_calls=[
                    call("search_web", query="Lyon population 2021 census"),
                    call("search_web", query="Marseille population 2021 census"),
                ],
            ),
            Reply(tool_calls=[call("execute_code", code="print(522_250 + 873_076)")]),
            Reply(text=ANSWER),
        )
        hashes = [hash_token(TOKEN)]
        service = ChatService(
            config=TEST_CONFIG,
            tools=ToolRegistry([fake_search, fake_python]),
            authenticate=BearerAuth(lambda: hashes).check,
            auth_mode="bearer",
        )
        settings = {"token": TOKEN, "tools": ["search_web", "execute_code"]}
        with (
            LoopbackServer(create_app(service), name="chat-app") as server,
            sync_playwright() as playwright,
        ):
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 900, "height": 780}, locale="en-US")
            page.add_init_script(
                f"localStorage.setItem('agentloop.settings', {json.dumps(json.dumps(settings))})"
            )
            page.goto(server.url + "/")
            page.get_by_role("textbox", name="Message").fill(QUESTION)
            page.keyboard.press("Enter")
            page.locator('article.assistant[data-state="done"]').wait_for(timeout=15_000)
            page.get_by_role("textbox", name="Message").fill("And Toulouse?")
            page.screenshot(path=str(output))
            browser.close()
    print(f"wrote {output} ({output.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
