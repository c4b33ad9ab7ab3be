"""The chat page's scripts are ES modules served by the app itself.

A browser refuses a module script whose content type is not JavaScript, and a module that
fails to load leaves the page dead without an uncaught error to report; so this loads the
page and checks what it fetched: every ``static/*.js`` file (none left unused, none missing),
each with a JavaScript content type, and the page working once they ran.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, Response, expect

from tests.e2e.conftest import WAIT_MS, ServeChat
from tests.helpers import ROOT

pytestmark = pytest.mark.e2e

STATIC = ROOT / "functions" / "chat" / "static"
# What Python's mimetypes answers for .js (text/javascript from 3.12 or /etc/mime.types,
# application/javascript before): both are JavaScript types a browser runs as a module.
JAVASCRIPT = {"text/javascript", "application/javascript"}


def test_every_module_loads_as_javascript(page: Page, serve_chat: ServeChat) -> None:
    server = serve_chat([])
    loaded: dict[str, tuple[int, str]] = {}

    def record(response: Response) -> None:
        path = response.url.removeprefix(server.url)
        if path.startswith("/static/") and path.endswith(".js"):
            loaded[path.removeprefix("/static/")] = (
                response.status,
                response.headers.get("content-type", ""),
            )

    page.on("response", record)
    page.goto(server.url + "/")
    # The entry module ran to its end: the empty page shows its example prompts.
    expect(page.get_by_role("list", name="Example prompts")).to_be_visible(timeout=WAIT_MS)

    assert sorted(loaded) == sorted(path.name for path in STATIC.glob("*.js"))
    for name, (status, content_type) in loaded.items():
        assert status == 200, name
        assert content_type.split(";")[0].strip() in JAVASCRIPT, (name, content_type)
    # The modules share what they need through imports, not through the window.
    names = page.evaluate("() => Object.keys(window).filter((k) => /agentloop/i.test(k))")
    assert names == []
