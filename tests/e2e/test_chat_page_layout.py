"""The chat page's layout at 1280x800 and 390x844: empty, settings open, an answer.

Takes the pictures ``make screenshot`` takes (``screenshot.shoot``), into
``test-output/screenshots/``, and checks each state before its picture: nothing sticks out
sideways or is cut off, nothing overlaps, the settings sit beside the conversation on a
wide screen and are a sheet with a Close button on a phone.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e import screenshot
from tests.e2e.conftest import WAIT_MS, ServeChat
from tests.fakes.scripted_llm import ScriptedLLM
from tests.helpers import ROOT, TEST_CONFIG

pytestmark = pytest.mark.e2e

expect.set_options(timeout=WAIT_MS)

# Boxes of the elements given, and whether any text inside them is clipped sideways.
MEASURE = """(selectors) => {
    const box = (n) => {
        const r = n.getBoundingClientRect();
        return {x: r.left, y: r.top, right: r.right, bottom: r.bottom, w: r.width, h: r.height};
    };
    const out = {};
    for (const selector of selectors) {
        out[selector] = [...document.querySelectorAll(selector)]
            .filter((n) => n.getClientRects().length)
            .map((n) => ({...box(n), clipped: n.scrollWidth > n.clientWidth + 1}));
    }
    out.page = {scrollWidth: document.documentElement.scrollWidth, width: innerWidth};
    return out;
}"""


PARTS = ".settings-form .field > *, .settings-form .help, .warning, .tool-choices > label"
"""The settings' labels, inputs, help texts and the ask_llm warning."""


SHOW = """(node) => {
    if (node.matches('input, select')) node.focus();
    else node.scrollIntoView({block: 'nearest'});
    const r = node.getBoundingClientRect();
    const head = document.querySelector('.settings-head').getBoundingClientRect();
    const panel = document.getElementById('settings').getBoundingClientRect();
    return [r.top, r.bottom, head.bottom, Math.min(panel.bottom, innerHeight)];
}"""
"""Bring one part of the settings into view as a person would (Tab, or scrolling)."""


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["x"] < b["right"] - 1
        and b["x"] < a["right"] - 1
        and (a["y"] < b["bottom"] - 1 and b["y"] < a["bottom"] - 1)
    )


def no_two_overlap(boxes: list[dict[str, Any]], what: str) -> None:
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not overlap(a, b), f"{what} overlap: {a} and {b}"


def check(page: Page, state: str, size: str) -> None:
    width, height = screenshot.SIZES[size]
    phone = width < 600
    m = page.evaluate(
        MEASURE,
        [
            ".top > *",
            ".top > button",
            ".example",
            "#settings",
            ".chat-column",
            PARTS,
            ".terminal pre",
            "article.assistant",
        ],
    )
    assert m["page"]["scrollWidth"] <= m["page"]["width"], f"{state}: the page scrolls sideways"
    header = m[".top > *"]
    no_two_overlap(header, "header items")
    for item in header:
        assert item["x"] >= 0, f"a header item is off screen: {item}"
        assert item["right"] <= width, f"a header item is off screen: {item}"
    for button in m[".top > button"]:
        assert not button["clipped"], "a header button's label is cut off"

    if state == "empty":
        examples = m[".example"]
        assert len(examples) == 4
        no_two_overlap(examples, "example prompts")
        for example in examples:
            assert example["x"] >= 0
            assert example["right"] <= width
            assert example["bottom"] <= height, "an example is below the fold"
            assert not example["clipped"], "an example's text is cut off"

    if state in ("settings", "settings-end"):
        [panel] = m["#settings"]
        if phone:
            # A sheet over the page, with its Close button on screen.
            assert (panel["x"], panel["y"], panel["w"], panel["h"]) == (0, 0, width, height)
            expect(page.get_by_role("button", name="Close")).to_be_in_viewport()
            # What the sheet covers cannot be reached with Tab meanwhile.
            expect(page.locator(".chat-column")).to_have_js_property("inert", True)
            expect(page.locator(".top")).to_have_js_property("inert", True)
        else:
            # Beside the conversation: the chat stays usable while settings are open.
            expect(page.locator(".chat-column")).to_have_js_property("inert", False)
            [chat] = m[".chat-column"]
            assert chat["right"] <= panel["x"] + 1
            assert chat["w"] >= 600
            expect(page.get_by_role("button", name="Send")).to_be_in_viewport()
        for part in m[PARTS]:
            assert part["x"] >= panel["x"], f"{state} {size}: sticks out of the panel: {part}"
            assert part["right"] <= panel["right"], f"{state} {size}: sticks out: {part}"
            assert not part["clipped"], f"{state} {size}: text cut off: {part}"
        if state == "settings":
            # Every control reached with Tab, and every help text and the warning scrolled
            # to, is shown whole: below the panel's sticky heading, above its end.
            parts = page.locator("#settings").locator("input, select, .help, .warning")
            every = parts.all()
            for part in [*every, *reversed(every)]:  # Tab down the panel, then Shift+Tab up
                top, bottom, head, end = part.evaluate(SHOW)
                assert head <= top + 1, f"{size}: under the panel's heading: {part}"
                assert bottom <= end + 1, f"{size}: past the panel's end: {part}"
            # Back as it opened, for the picture.
            page.locator("#settings").evaluate("(panel) => panel.scrollTo(0, 0)")
            page.get_by_role("heading", name="Settings").focus()

    if state == "answer":
        terminal = page.locator(".terminal").first
        expect(terminal).to_be_in_viewport()
        for pre in m[".terminal pre"]:
            assert not pre["clipped"], "terminal output runs off sideways"
        for reply in m["article.assistant"]:
            assert reply["right"] <= width


def test_the_page_at_a_laptop_and_a_phone_size(
    browser: Browser, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    config = TEST_CONFIG.model_copy(update={"default_model": screenshot.MODELS[0]})
    server = serve_chat(screenshot.TOOLS, config, models=screenshot.MODELS)
    written = screenshot.shoot(browser, server.url, llm, screenshot.SHOTS, check)
    names = sorted(path.relative_to(ROOT).as_posix() for path in written)
    assert names == sorted(
        f"test-output/screenshots/{state}-{size}.png"
        for state in ("empty", "settings", "settings-end", "answer")
        for size in screenshot.SIZES
    )
