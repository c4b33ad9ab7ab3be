"""The chat page shows what is left of the caller's allowance under an answer, where the server
limits it (``GET /v1/usage``), and nothing of the kind where it does not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from agentloop.pricing import PriceOverride
from agentloop.quota import LimitsConfig, Quota
from tests.e2e.conftest import WAIT_MS, ServeChat, open_chat, send, wait_for_reply
from tests.e2e.screenshot import SHOTS, SIZES
from tests.fakes.scripted_llm import Reply, ScriptedLLM
from tests.helpers import TEST_CONFIG
from tests.served import ServedApp, make_service
from tests.store_backends import Clock, sqlite_store

pytestmark = pytest.mark.e2e

expect.set_options(timeout=WAIT_MS)

# A call of 1,000 prompt and 100 completion tokens at $10 per million either way: $0.011.
CONFIG = TEST_CONFIG.model_copy(
    update={"prices": {"groq:m": PriceOverride(input=10, output=10)}, "default_model": "groq:m"}
)
LIMITS = {"default": {"usd_per_day": 1, "usd_per_month": 20, "concurrent_runs": 2}}


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[ServedApp]:
    """The chat app with a daily and a monthly dollar limit on the embedded store."""
    clock = Clock()
    service = make_service([], CONFIG, heartbeat_s=1.0)
    service.quota = Quota(
        LimitsConfig.parse(json.dumps(LIMITS)), sqlite_store(tmp_path / "s.db", clock), clock
    )
    server = ServedApp(service, name="limited-chat-app").start()
    yield server
    server.stop()


def test_an_answer_says_what_is_left_of_the_day_and_the_month(
    page: Page, limited: ServedApp, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text="Hello.", usage=(1_000, 100)))
    open_chat(page, limited)
    send(page, "hi")
    wait_for_reply(page)
    meta = page.locator("article.assistant .meta").last
    expect(meta.locator(".allowance")).to_have_text("$0.9890 left today · $19.99 left this month")
    for label, (width, height) in SIZES.items():
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=str(SHOTS / f"allowance-{label}.png"))


def test_without_limits_an_answer_says_nothing_of_an_allowance(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([], config=CONFIG)
    llm.script(Reply(text="Hello.", usage=(1_000, 100)))
    usage_answers: list[int] = []
    page.on(
        "response",
        lambda r: usage_answers.append(r.status) if r.url.endswith("/v1/usage") else None,
    )
    open_chat(page, server)
    send(page, "hi")
    wait_for_reply(page)
    expect(page.locator("article.assistant .meta").last).to_contain_text("left in budget")
    expect(page.locator(".allowance")).to_have_count(0)
    assert usage_answers == [200]  # asked, and told there are no limits
