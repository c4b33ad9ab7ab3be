"""The chat page signs in against a real OpenID Connect provider, in Chromium.

The provider is the ``oidc-provider`` package on loopback (``tests.fakes.oidc_provider``): the
page is its public client (code flow with PKCE, no secret). The chat app runs in jwt mode
with that issuer, so every request the page makes is checked against the provider's keys.
The test signs in on the provider's pages, asks, sees the answer, and signs out; a tool
reports whose run it is, so the scripted model's log shows the principal's request.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agentloop.oidc import JwtSettings, JwtVerifier
from agentloop.principal import PRINCIPAL_KEY, Principal
from agentloop.server.identity import jwt_bearer
from agentloop.server.service import ChatService
from agentloop.tools.base import ToolContext, tool
from agentloop.tools.registry import ToolRegistry
from tests.e2e.conftest import WAIT_MS, send, settings_button, wait_for_reply
from tests.e2e.screenshot import SHOTS, SIZES
from tests.fakes.oidc_provider import OidcProvider
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG
from tests.sample_tools import NoArgs
from tests.served import ServedApp

pytestmark = pytest.mark.e2e

expect.set_options(timeout=WAIT_MS)

# Shorter than the minute the page keeps in hand: each request refreshes the tokens first.
ID_TOKEN_TTL_S = 30
USER = "ada"
EMAIL = "ada@example.test"
TOKEN_SHAPE = re.compile(r"[\w-]{10,}\.[\w-]{10,}\.[\w-]{10,}")


@tool(name="whoami")
async def whoami(args: NoArgs, ctx: ToolContext) -> dict[str, Any]:
    """Say whose run this is (the principal the server authenticated)."""
    principal: Principal = ctx.extras[PRINCIPAL_KEY]
    return {"kind": principal.kind, "id": principal.id, "name": principal.name}


@pytest.fixture
def signed_in_setup(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[OidcProvider, ServedApp]]:
    """The provider, and the chat app in jwt mode trusting it, each knowing the other."""
    with OidcProvider(id_token_ttl_s=ID_TOKEN_TTL_S) as provider:
        monkeypatch.setenv("AGENTLOOP_JWT_ISSUER", provider.issuer)
        monkeypatch.setenv("AGENTLOOP_JWT_AUDIENCE", OidcProvider.CLIENT_ID)
        settings = JwtSettings.from_env()
        service = ChatService(
            config=TEST_CONFIG,
            tools=ToolRegistry([whoami]),
            authenticate=jwt_bearer(JwtVerifier(settings)),
            auth_mode="jwt",
            heartbeat_s=1.0,
        )
        with ServedApp(service, name="chat-app-jwt").start() as server:
            provider.register(server.url + "/")
            yield provider, server


def sign_in(page: Page, server: ServedApp) -> None:
    """Open the page, press Sign in, and sign in on the provider's pages."""
    page.goto(server.url + "/")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/interaction/"))
    page.locator('input[name="login"]').fill(USER)
    page.locator('input[name="password"]').fill("any password")
    page.locator('button[type="submit"]').click()
    page.wait_for_url(server.url + "/")
    expect(page.locator("#account")).to_have_attribute("data-state", "signed-in")


def choose_tools(page: Page, tools: str) -> None:
    """Only ``tools``, chosen in the settings (no token pasted: the sign-in's is sent)."""
    settings_button(page).click()
    for name in ("search_web", "scrape", "execute_code", "ask_llm"):
        page.get_by_role("checkbox", name=name).set_checked(False)
    page.get_by_label("Other tools").fill(tools)
    page.get_by_role("button", name="Close").click()


def storage(page: Page, which: str) -> dict[str, str]:
    stored: dict[str, str] = page.evaluate(f"() => ({{ ...{which} }})")
    return stored


def test_sign_in_ask_and_sign_out(
    page: Page, signed_in_setup: tuple[OidcProvider, ServedApp], llm: ScriptedLLM
) -> None:
    provider, server = signed_in_setup
    llm.script(
        Reply(text="Let me check.", tool_calls=[call("whoami")]),
        Reply(text="You are **Ada**, signed in."),
    )
    sign_in(page, server)
    expect(page.locator("#account-name")).to_have_text(EMAIL)
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    assert provider.grants == ["authorization_code"]
    assert "code=" not in page.url  # the answer left the address bar

    choose_tools(page, "whoami")
    send(page, "Who am I?")
    wait_for_reply(page)
    expect(page.locator("article.assistant .answer").last).to_contain_text("signed in")

    # The token was about to run out, so the page refreshed it before asking.
    assert provider.wait_for_grants(2)[1:] == ["refresh_token"]
    # The model saw the tool's report of whose run it was: the signed-in person's.
    tool_message = next(m for m in llm.requests[1].body["messages"] if m.get("role") == "tool")
    assert EMAIL in tool_message["content"]
    assert '"kind": "jwt"' in tool_message["content"]

    # Tokens only in this tab's sessionStorage, none in localStorage.
    session = storage(page, "sessionStorage")
    assert TOKEN_SHAPE.search(session["agentloop.signin"])
    local = " ".join(storage(page, "localStorage").values())
    assert not TOKEN_SHAPE.search(local), local

    take_screenshots(page, "signed-in")

    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("button", name=re.compile("sign me out", re.I)).click()
    page.wait_for_url(server.url + "/")
    expect(page.locator("#account")).to_have_attribute("data-state", "signed-out")
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    assert "agentloop.signin" not in storage(page, "sessionStorage")

    # Signed out, a message is refused by the server and reaches no model.
    asked = len(llm.requests)
    send(page, "And now?")
    wait_for_reply(page, "error")
    expect(page.locator("#status")).to_contain_text("missing bearer token")
    expect(page.locator("article.assistant").last).to_contain_text(
        "Sign in (or check the bearer token in Settings)."
    )
    assert len(llm.requests) == asked
    take_screenshots(page, "signed-out-refused")


def take_screenshots(page: Page, name: str) -> None:
    """The page as it is, at the layout shots' sizes."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for label, (width, height) in SIZES.items():
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=str(SHOTS / f"{name}-{label}.png"))
    page.set_viewport_size({"width": 1000, "height": 800})


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("code=forged&state=forged", "does not match a sign-in this tab started"),
        ("error=access_denied&state=forged", "does not match a sign-in this tab started"),
    ],
)
def test_an_answer_this_tab_did_not_ask_for_signs_no_one_in(
    page: Page, signed_in_setup: tuple[OidcProvider, ServedApp], query: str, said: str
) -> None:
    provider, server = signed_in_setup
    page.goto(f"{server.url}/?{query}")
    expect(page.locator("#account-name")).to_contain_text(said)
    expect(page.locator("#account")).to_have_attribute("data-state", "signed-out")
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    assert page.url == server.url + "/"  # the forged answer left the address bar
    assert provider.grants == []  # no code was sent to the token endpoint
    assert "agentloop.signin" not in storage(page, "sessionStorage")


def test_a_state_that_matches_but_a_wrong_issuer_is_refused(
    page: Page, signed_in_setup: tuple[OidcProvider, ServedApp]
) -> None:
    """RFC 9207: an answer naming another issuer (a mix-up) is not exchanged."""
    provider, server = signed_in_setup
    page.goto(server.url + "/")
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    flow = {"state": "s1", "nonce": "n1", "verifier": "v" * 43, "issuer": provider.issuer}
    page.evaluate(
        "(flow) => sessionStorage.setItem('agentloop.signin.flow', JSON.stringify(flow))", flow
    )
    page.goto(f"{server.url}/?code=c1&state=s1&iss=https%3A%2F%2Fevil.example")
    expect(page.locator("#account-name")).to_contain_text("another issuer")
    assert provider.grants == []
