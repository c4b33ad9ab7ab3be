"""The chat page's settings and empty page in Chromium, against the real app.

The model picker is filled from the app's ``GET /v1/models``; the token budget goes out as
``/chat``'s ``token_budget`` and is checked before a message is sent; ask_llm's cost is a
warning box; the empty page offers example prompts.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import (
    TOKEN,
    WAIT_MS,
    ServeChat,
    chat_bodies,
    open_chat,
    send,
    settings_button,
    wait_for_reply,
)
from tests.fakes.scripted_llm import Reply, ScriptedLLM
from tests.helpers import TEST_CONFIG

pytestmark = pytest.mark.e2e

expect.set_options(timeout=WAIT_MS)

REPLY = "article.assistant"
MODELS = ("groq:llama-3.3-70b-versatile", "openai:gpt-4o-mini", "openai:gpt-4.1-mini")
CONFIG = TEST_CONFIG.model_copy(update={"default_model": MODELS[0]})


def save_settings(page: Page, url: str, **settings: Any) -> None:
    """Store settings the way the page does, then load the page afresh."""
    page.goto(url + "/")
    page.evaluate(
        "(s) => localStorage.setItem('agentloop.settings', JSON.stringify(s))",
        {"tools": [], **settings},
    )
    page.reload()


def picker_options(page: Page) -> list[tuple[str, str]]:
    options = page.get_by_label("Model").locator("option")
    return [(o.get_attribute("value") or "", o.inner_text()) for o in options.all()]


def test_the_model_picker_offers_the_servers_models(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([], CONFIG, models=MODELS)
    bodies = chat_bodies(page)
    llm.respond_with(lambda request: Reply(text="ok"))
    offered = [
        ("", "groq:llama-3.3-70b-versatile (default)"),
        ("openai:gpt-4o-mini", "openai:gpt-4o-mini"),
        ("openai:gpt-4.1-mini", "openai:gpt-4.1-mini"),
    ]

    # No token yet: /v1/models says 401, so the picker has the server's default only.
    page.goto(server.url + "/")
    settings_button(page).click()
    picker = page.get_by_label("Model")
    expect(picker).to_have_attribute("data-source", "unknown")
    assert picker_options(page) == [("", "server default")]
    # The token is entered: the list is asked for again, the default first and chosen.
    page.get_by_label("Bearer token").fill(TOKEN)
    page.get_by_label("Bearer token").press("Tab")
    expect(picker).to_have_attribute("data-source", "server")
    assert picker_options(page) == offered
    expect(picker).to_have_value("")

    # A saved choice the server still offers is kept, and sent.
    save_settings(page, server.url, token=TOKEN, model="openai:gpt-4.1-mini")
    expect(page.get_by_label("Model")).to_have_attribute("data-source", "server")
    expect(page.get_by_label("Model")).to_have_value("openai:gpt-4.1-mini")
    send(page, "one")
    wait_for_reply(page)
    assert bodies[-1]["model"] == "openai:gpt-4.1-mini"
    assert llm.requests[-1].body["model"] == "gpt-4.1-mini"

    # The default again: no model in the body, the server picks.
    settings_button(page).click()
    page.get_by_label("Model").select_option("")
    send(page, "two")
    expect(page.locator(f'{REPLY}[data-state="done"]')).to_have_count(2)
    assert "model" not in bodies[-1]
    assert llm.requests[-1].body["model"] == "llama-3.3-70b-versatile"
    assert (
        json.loads(page.evaluate("() => localStorage.getItem('agentloop.settings')"))["model"] == ""
    )

    # A saved choice the server no longer offers falls back to the default.
    save_settings(page, server.url, token=TOKEN, model="openai:gone-model")
    expect(page.get_by_label("Model")).to_have_attribute("data-source", "server")
    assert picker_options(page) == offered
    expect(page.get_by_label("Model")).to_have_value("")
    send(page, "three")
    wait_for_reply(page)
    assert "model" not in bodies[-1]


def test_the_token_budget_is_checked_and_sent(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([])
    bodies = chat_bodies(page)
    llm.respond_with(lambda request: Reply(text="ok", usage=(300, 20)))
    open_chat(page, server)
    budget = page.get_by_label("Token budget")
    panel = page.get_by_role("complementary", name="Settings")

    for wrong in ("0", "-3", "1.5"):
        settings_button(page).click()
        budget.fill(wrong)
        expect(budget).to_have_attribute("aria-invalid", "true")
        expect(budget).to_have_accessible_description(re.compile("Enter a whole number from 1 up"))
        page.get_by_role("button", name="Close").click()
        send(page, "hello")
        # Nothing went out: the settings open at the field, the status says what to fix.
        expect(panel).to_be_visible()
        expect(budget).to_be_focused()
        expect(page.get_by_role("status")).to_have_text(
            "Token budget in Settings is not a whole number from 1 up."
        )
        expect(page.get_by_role("textbox", name="Message")).to_have_value("hello")
        page.get_by_role("button", name="Close").click()
    assert bodies == []
    expect(page.locator(REPLY)).to_have_count(0)

    settings_button(page).click()
    budget.fill("2500")
    expect(budget).to_have_attribute("aria-invalid", "false")
    expect(page.locator("#error-budget")).to_be_hidden()
    send(page, "hello")
    wait_for_reply(page)
    assert bodies[-1]["token_budget"] == 2500
    assert server.finished[-1].budget_remaining == 2500 - 320
    expect(page.locator(REPLY).last.locator(".meta")).to_contain_text("2,180 left in budget")

    # Kept across a reload; empty again means the server's default.
    page.reload()
    settings_button(page).click()
    expect(page.get_by_label("Token budget")).to_have_value("2500")
    page.get_by_label("Token budget").fill("")
    expect(page.get_by_label("Token budget")).to_have_attribute("aria-invalid", "false")
    send(page, "again")
    wait_for_reply(page)
    assert "token_budget" not in bodies[-1]
    assert server.finished[-1].budget_remaining == TEST_CONFIG.token_budget - 320


def test_a_wrong_max_iterations_is_named_and_nothing_goes_out(
    page: Page, serve_chat: ServeChat
) -> None:
    server = serve_chat([])
    bodies = chat_bodies(page)
    open_chat(page, server)
    settings_button(page).click()
    iterations = page.get_by_label("Max iterations")
    page.get_by_label("Token budget").fill("0")  # both wrong: the first one is named
    iterations.fill("2.5")
    expect(iterations).to_have_attribute("aria-invalid", "true")
    page.get_by_role("button", name="Close").click()
    send(page, "hello")
    expect(iterations).to_be_focused()
    expect(page.get_by_role("status")).to_have_text(
        "Max iterations in Settings is not a whole number from 1 up."
    )
    assert bodies == []


def test_ask_llm_carries_a_high_token_use_warning(page: Page, serve_chat: ServeChat) -> None:
    server = serve_chat([])
    page.goto(server.url + "/")
    settings_button(page).click()
    ask_llm = page.get_by_role("checkbox", name="ask_llm")
    expect(ask_llm).to_have_accessible_description(re.compile(r"^high token use ask_llm "))
    warning = page.locator("#warn-ask-llm")
    warning.scroll_into_view_if_needed()
    expect(warning).to_be_in_viewport()
    expect(warning.locator(".badge")).to_have_text("high token use")
    expect(warning).to_contain_text("every sub-agent is a whole agent run")
    # A box that stands out from the panel, not a muted help line.
    looks = warning.evaluate(
        """(box) => {
            const style = getComputedStyle(box);
            const panel = getComputedStyle(document.getElementById('settings'));
            const help = getComputedStyle(document.querySelector('.help'));
            return {
                background: style.backgroundColor,
                panel: panel.backgroundColor,
                edge: parseFloat(style.borderLeftWidth),
                color: style.color,
                muted: help.color,
            };
        }"""
    )
    assert looks["background"] != looks["panel"]
    assert looks["edge"] >= 3
    assert looks["color"] != looks["muted"]


def test_an_example_prompt_fills_the_message_box(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([])
    llm.script(Reply(text="The primes below 100 add up to 1060."))
    open_chat(page, server)

    examples = page.get_by_role("list", name="Example prompts").get_by_role("button")
    expect(examples).to_have_count(4)
    first = examples.first
    text = first.locator(".example-text").inner_text()
    assert text.startswith("Use Python")
    first.click()
    box = page.get_by_role("textbox", name="Message")
    expect(box).to_have_value(text)
    expect(box).to_be_focused()
    box.press("Enter")
    wait_for_reply(page)
    assert llm.requests[0].messages[-1] == {"role": "user", "content": text}
    expect(page.get_by_role("list", name="Example prompts")).to_have_count(0)

    page.get_by_role("button", name="New chat").click()
    expect(page.get_by_role("list", name="Example prompts").get_by_role("button")).to_have_count(4)


def test_on_a_phone_the_settings_are_a_sheet_closed_with_escape_or_close(
    page: Page, serve_chat: ServeChat
) -> None:
    server = serve_chat([])
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(server.url + "/")
    toggle = settings_button(page)
    panel = page.get_by_role("complementary", name="Settings")
    expect(toggle).to_have_attribute("aria-expanded", "false")

    toggle.click()
    expect(panel).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(page.get_by_role("heading", name="Settings")).to_be_focused()
    # Tab never lands behind the sheet: that part of the page is inert.
    reached = set()
    for _ in range(30):
        page.keyboard.press("Tab")
        reached.add(page.evaluate("() => document.activeElement.id || document.activeElement.name"))
        assert page.evaluate("() => !document.activeElement.closest('.top, .chat-column')")
    assert {"set-model", "set-token-budget", "settings-close"} <= reached
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    expect(toggle).to_be_focused()
    expect(page.get_by_role("textbox", name="Message")).to_be_editable()

    toggle.click()
    page.get_by_role("button", name="Close").click()
    expect(panel).to_be_hidden()
    expect(toggle).to_be_focused()


def test_a_pasted_token_stays_in_the_tabs_session_never_in_local_storage(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    """The bearer token is a long-lived secret: sessionStorage (gone with the tab), and one an
    older page left in localStorage is moved there on load."""
    server = serve_chat([], config=CONFIG)
    llm.script(Reply(text="Hello."))
    open_chat(page, server)
    send(page, "hi")
    wait_for_reply(page)
    local = page.evaluate("() => JSON.stringify(Object.assign({}, localStorage))")
    assert TOKEN not in local
    assert page.evaluate("() => sessionStorage.getItem('agentloop.token')") == TOKEN
    page.reload()  # the same tab keeps it
    expect(page.get_by_label("Bearer token")).to_have_value(TOKEN)

    page.evaluate("() => sessionStorage.clear()")  # a new tab, then a page of before
    save_settings(page, server.url, token="al_from-an-older-page")
    assert page.evaluate("() => sessionStorage.getItem('agentloop.token')") == (
        "al_from-an-older-page"
    )
    stored = json.loads(page.evaluate("() => localStorage.getItem('agentloop.settings')"))
    assert "token" not in stored
