"""search_web against local fakes of Tavily, Brave, SearXNG and DuckDuckGo on loopback.

The tool talks real HTTP to :class:`~tests.fakes.search_apis.SearchAPIs`, which answers in
each provider's wire format; the last tests run it inside a full agent run through
``handle_chat`` and the real groq/openai SDKs against the scripted model.
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agentloop.limits import CancelToken, Deadline, TokenBudget
from agentloop.tools.base import Tool, ToolContext, ToolError
from agentloop.tools.search import search_web_tool
from agentloop.tools.search.settings import ENV_VARS
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.fakes.search_apis import (
    BRAVE_KEY,
    PAGES,
    TAVILY_KEY,
    SearchAPIs,
    duckduckgo_anomaly_page,
)
from tests.helpers import run_chat, tool_payload

ALTERNATIVES = "TAVILY_API_KEY, BRAVE_API_KEY or AGENTLOOP_SEARXNG_URL"


@pytest.fixture(scope="module")
def search_server() -> Iterator[SearchAPIs]:
    with SearchAPIs() as server:
        yield server


@pytest.fixture
def apis(search_server: SearchAPIs) -> Iterator[SearchAPIs]:
    """The fakes with no faults and an empty request log."""
    search_server.reset()
    yield search_server
    search_server.reset()


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No search variable from the developer's shell leaks into a test."""
    for variable in ENV_VARS.values():
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


def context(deadline: Deadline | None = None) -> ToolContext:
    return ToolContext(
        call_id="call_test",
        depth=0,
        deadline=deadline or Deadline(),
        budget=TokenBudget(10_000),
        cancel=CancelToken(),
    )


async def search(tool: Tool, **arguments: Any) -> dict[str, Any]:
    """Call the tool as the loop does: validated arguments, a context; its result returned."""
    result = await tool.fn(tool.args_model.model_validate(arguments), context())
    assert isinstance(result, dict)
    json.dumps(result)  # what the loop sends the model must be JSON
    return result


async def search_error(tool: Tool, **arguments: Any) -> ToolError:
    with pytest.raises(ToolError) as caught:
        await search(tool, **arguments)
    return caught.value


def assert_no_keys(error: ToolError) -> None:
    text = f"{error.message} {error.hint}"
    for key in (TAVILY_KEY, BRAVE_KEY, "tvly-wrong-key", "wrong-brave-key"):
        assert key not in text


# -- one test per provider ------------------------------------------------------------------


async def test_tavily(apis: SearchAPIs) -> None:
    tool = search_web_tool(apis.settings("tavily"))

    result = await search(tool, query="python free threading", count=3)

    assert result == {
        "query": "python free threading",
        "provider": "tavily",
        "results": [{"title": p.title, "url": p.url, "snippet": p.text} for p in PAGES[:3]],
    }
    [sent] = apis.requests_to("tavily")
    assert (sent.method, sent.path) == ("POST", "/tavily/search")
    assert sent.headers["authorization"] == f"Bearer {TAVILY_KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert sent.json["query"] == "python free threading"
    assert 3 <= sent.json["max_results"] <= 20
    assert sent.json["search_depth"] == "basic"
    assert "api_key" not in sent.json, "the key travels in the Authorization header only"


async def test_brave(apis: SearchAPIs) -> None:
    tool = search_web_tool(apis.settings("brave"))

    result = await search(tool, query="python gil", count=3)

    assert result["provider"] == "brave"
    assert result["query"] == "python gil"
    urls = [r["url"] for r in result["results"]]
    assert urls == [p.url for p in PAGES[:3]], "the page Brave listed twice appears once"
    first = result["results"][0]
    assert first["snippet"] == PAGES[0].text, "<strong> highlighting stripped"
    assert "&amp;" not in json.dumps(result)
    [sent] = apis.requests_to("brave")
    assert (sent.method, sent.path) == ("GET", "/brave/res/v1/web/search")
    assert sent.params["q"] == "python gil"
    assert 3 <= int(sent.params["count"]) <= 20
    assert sent.headers["x-subscription-token"] == BRAVE_KEY
    assert sent.headers["accept"] == "application/json"


async def test_searxng(apis: SearchAPIs) -> None:
    tool = search_web_tool(apis.settings("searxng"))

    result = await search(tool, query="python gil", count=10)

    assert result["provider"] == "searxng"
    assert [r["url"] for r in result["results"]] == [p.url for p in PAGES], "http duplicate gone"
    [sent] = apis.requests_to("searxng")
    assert (sent.method, sent.path) == ("GET", "/searxng/search")
    assert sent.params == {"q": "python gil", "format": "json"}
    assert "authorization" not in sent.headers
    assert "x-subscription-token" not in sent.headers


async def test_searxng_credentials_in_the_url(apis: SearchAPIs) -> None:
    url = apis.url("searxng").replace("http://", "http://agent:p%40ss@") + "/search"
    tool = search_web_tool(apis.settings("searxng", searxng_url=url))

    result = await search(tool, query="q", count=1)

    assert len(result["results"]) == 1
    [sent] = apis.requests_to("searxng")
    assert sent.path == "/searxng/search", "the endpoint given as the base URL is tolerated"
    assert sent.headers["authorization"] == "Basic " + base64.b64encode(b"agent:p@ss").decode()


async def test_duckduckgo(apis: SearchAPIs) -> None:
    tool = search_web_tool(apis.settings("duckduckgo"))

    result = await search(tool, query="python gil")

    assert result["provider"] == "duckduckgo"
    assert len(result["results"]) == 5, "the default count"
    assert [r["url"] for r in result["results"]] == [p.url for p in PAGES[:5]]
    assert all("duckduckgo.com" not in r["url"] for r in result["results"]), "no ad, no redirect"
    assert result["results"][0]["title"] == "Free-threaded CPython in 3.13 — What's New"
    [sent] = apis.requests_to("duckduckgo")
    assert (sent.method, sent.path) == ("POST", "/duckduckgo/html/")
    assert sent.form == {"q": "python gil"}
    assert sent.headers["user-agent"].startswith("Mozilla/5.0")
    assert not {"authorization", "x-subscription-token"} & set(sent.headers)


async def test_count_is_capped_by_the_settings(apis: SearchAPIs) -> None:
    tool = search_web_tool(apis.settings("searxng", max_results=2, snippet_max_chars=60))

    result = await search(tool, query="python gil", count=10)

    assert len(result["results"]) == 2
    assert all(len(r["snippet"]) <= 60 for r in result["results"])


# -- rate limits --------------------------------------------------------------------------------


async def test_tavily_rate_limit_says_when_to_retry(apis: SearchAPIs) -> None:
    apis.fault("tavily", status=429, retry_after="7")

    error = await search_error(search_web_tool(apis.settings("tavily")), query="q")

    assert error.message.startswith(
        "Tavily is rate limiting this client (HTTP 429, retry after 7 s)"
    )
    assert ALTERNATIVES in error.message
    assert "excessive requests" in error.message, "Tavily's own words are passed on"
    assert error.hint is not None
    assert "wait" in error.hint


async def test_brave_rate_limit_reads_its_rate_limit_headers(apis: SearchAPIs) -> None:
    apis.fault("brave", status=429)

    error = await search_error(search_web_tool(apis.settings("brave")), query="q")

    assert error.message.startswith(
        "Brave is rate limiting this client (HTTP 429, retry after 1 s)"
    )
    assert "Request rate limit exceeded for plan" in error.message


async def test_duckduckgo_202_is_rate_limiting(apis: SearchAPIs) -> None:
    apis.fault("duckduckgo", status=202)

    error = await search_error(search_web_tool(apis.settings("duckduckgo")), query="q")

    assert error.message == (
        "DuckDuckGo is rate limiting this IP (HTTP 202): configure "
        f"{ALTERNATIVES} for reliable search."
    )


async def test_duckduckgo_anomaly_page_with_200_is_rate_limiting(apis: SearchAPIs) -> None:
    apis.fault("duckduckgo", body=duckduckgo_anomaly_page())

    error = await search_error(search_web_tool(apis.settings("duckduckgo")), query="q")

    assert error.message.startswith("DuckDuckGo is rate limiting this IP (HTTP 200)")


async def test_searxng_limiter(apis: SearchAPIs) -> None:
    apis.fault("searxng", status=429, retry_after="30")

    error = await search_error(search_web_tool(apis.settings("searxng")), query="q")

    assert error.message.startswith("SearXNG is rate limiting this client (HTTP 429, retry after")
    assert "limiter" in error.message


# -- auth failures and other refusals -----------------------------------------------------------


async def test_tavily_wrong_key(apis: SearchAPIs, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    tool = search_web_tool(apis.settings("tavily", tavily_api_key="tvly-wrong-key"))

    error = await search_error(tool, query="q")

    assert error.message.startswith("Tavily rejected the key (HTTP 401): check TAVILY_API_KEY.")
    assert "missing or invalid API key" in error.message
    assert error.hint is not None
    assert "do not search again" in error.hint
    assert_no_keys(error)
    assert "tvly-wrong-key" not in caplog.text
    [sent] = apis.requests_to("tavily")
    assert sent.headers["authorization"] == "Bearer tvly-wrong-key"


async def test_brave_wrong_key(apis: SearchAPIs, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    tool = search_web_tool(apis.settings("brave", brave_api_key="wrong-brave-key"))

    error = await search_error(tool, query="q")

    assert error.message.startswith(
        "Brave rejected the key (HTTP 422, SUBSCRIPTION_TOKEN_INVALID): check BRAVE_API_KEY."
    )
    assert_no_keys(error)
    assert "wrong-brave-key" not in caplog.text


async def test_brave_401(apis: SearchAPIs) -> None:
    apis.fault("brave", status=401)

    error = await search_error(search_web_tool(apis.settings("brave")), query="q")

    assert error.message.startswith("Brave rejected the key (HTTP 401")
    assert "check BRAVE_API_KEY" in error.message
    assert_no_keys(error)


@pytest.mark.parametrize(
    ("status", "says"),
    [
        (432, "upgrade the Tavily plan"),
        (433, "raise it on the Tavily dashboard"),
        (403, "check TAVILY_API_KEY"),
    ],
)
async def test_tavily_plan_limits(apis: SearchAPIs, status: int, says: str) -> None:
    apis.fault("tavily", status=status)

    error = await search_error(search_web_tool(apis.settings("tavily")), query="q")

    assert error.message.startswith(f"Tavily refused the request (HTTP {status})")
    assert says in error.message


async def test_provider_error_text_never_carries_the_key(apis: SearchAPIs) -> None:
    apis.fault("tavily", status=401, body={"detail": {"error": f"bad key {TAVILY_KEY}"}})

    error = await search_error(search_web_tool(apis.settings("tavily")), query="q")

    assert_no_keys(error)
    assert "[redacted]" in error.message


async def test_bad_query_is_for_the_model_to_fix(apis: SearchAPIs) -> None:
    apis.fault("tavily", status=400)

    error = await search_error(search_web_tool(apis.settings("tavily")), query="q")

    assert error.message.startswith("Tavily rejected the query (HTTP 400)")
    assert error.hint is not None
    assert error.hint.startswith("rephrase the query")


async def test_searxng_without_json_format(apis: SearchAPIs) -> None:
    apis.fault("searxng", status=403)

    error = await search_error(search_web_tool(apis.settings("searxng")), query="q")

    assert "search.formats" in error.message
    assert "settings.yml" in error.message


async def test_searxng_url_that_is_not_searxng(apis: SearchAPIs) -> None:
    apis.fault("searxng", body="<html><body>Sign in</body></html>")

    error = await search_error(search_web_tool(apis.settings("searxng")), query="q")

    assert "AGENTLOOP_SEARXNG_URL" in error.message


async def test_server_error(apis: SearchAPIs) -> None:
    apis.fault("brave", status=503)

    error = await search_error(search_web_tool(apis.settings("brave")), query="q")

    assert error.message.startswith("Brave had a server error (HTTP 503)")


# -- timeouts and unreachable providers ---------------------------------------------------------


async def test_timeout(apis: SearchAPIs) -> None:
    apis.fault("brave", delay=3.0)
    tool = search_web_tool(apis.settings("brave", timeout_s=0.3))

    started = time.monotonic()
    error = await search_error(tool, query="q")

    assert time.monotonic() - started < 2.0
    assert error.message.startswith("Brave did not answer within 0.3 s")
    assert "AGENTLOOP_SEARCH_TIMEOUT_S" in error.message


async def test_timeout_is_capped_by_the_request_deadline(apis: SearchAPIs) -> None:
    apis.fault("searxng", delay=3.0)
    tool = search_web_tool(apis.settings("searxng", timeout_s=30))
    args = tool.args_model.model_validate({"query": "q"})

    started = time.monotonic()
    with pytest.raises(ToolError, match="did not answer within"):
        await tool.fn(args, context(Deadline.after(0.3)))
    assert time.monotonic() - started < 2.0

    with pytest.raises(ToolError, match="no time is left"):
        await tool.fn(args, context(Deadline.after(0)))


async def test_unreachable_provider(apis: SearchAPIs) -> None:
    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = apis.settings("tavily", tavily_url=f"http://127.0.0.1:{port}/tavily")

    error = await search_error(search_web_tool(settings), query="q")

    assert error.message.startswith(f"could not reach Tavily at http://127.0.0.1:{port}/tavily")
    assert "AGENTLOOP_TAVILY_URL" in error.message


# -- choosing the provider from the environment -------------------------------------------------


@pytest.mark.parametrize(
    ("env", "provider"),
    [
        ({}, "duckduckgo"),
        ({"SEARXNG": "1"}, "searxng"),
        ({"BRAVE_API_KEY": BRAVE_KEY, "SEARXNG": "1"}, "brave"),
        ({"TAVILY_API_KEY": TAVILY_KEY, "BRAVE_API_KEY": BRAVE_KEY}, "tavily"),
        (
            {
                "TAVILY_API_KEY": TAVILY_KEY,
                "AGENTLOOP_SEARCH_PROVIDER": "brave",
                "BRAVE_API_KEY": BRAVE_KEY,
            },
            "brave",
        ),
    ],
)
async def test_provider_from_the_environment(
    apis: SearchAPIs, clean_env: pytest.MonkeyPatch, env: dict[str, str], provider: str
) -> None:
    for name, value in {**apis.env(), **env}.items():
        if name == "SEARXNG":
            clean_env.setenv("AGENTLOOP_SEARXNG_URL", apis.url("searxng"))
        else:
            clean_env.setenv(name, value)
    tool = search_web_tool()  # no settings: read from the environment at call time

    result = await search(tool, query="python gil", count=2)

    assert result["provider"] == provider
    assert [r.provider for r in apis.requests] == [provider]
    assert len(result["results"]) == 2


async def test_keys_set_after_the_tool_was_built_are_used(
    apis: SearchAPIs, clean_env: pytest.MonkeyPatch
) -> None:
    tool = search_web_tool()
    for name, value in apis.env().items():
        clean_env.setenv(name, value)
    clean_env.setenv("TAVILY_API_KEY", TAVILY_KEY)  # as the chat app does from the secret

    assert (await search(tool, query="q"))["provider"] == "tavily"


async def test_chosen_provider_without_its_key(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("AGENTLOOP_SEARCH_PROVIDER", "brave")

    error = await search_error(search_web_tool(), query="q")

    assert error.message == (
        "AGENTLOOP_SEARCH_PROVIDER is 'brave' but BRAVE_API_KEY is not set: set it, or choose "
        "another provider"
    )


async def test_unknown_provider_name(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("AGENTLOOP_SEARCH_PROVIDER", "altavista")

    error = await search_error(search_web_tool(), query="q")

    assert "AGENTLOOP_SEARCH_PROVIDER" in error.message
    assert "tavily" in error.message
    assert "duckduckgo" in error.message


# -- in a full agent run ------------------------------------------------------------------------


def _search_results(request: RecordedRequest) -> list[dict[str, Any]]:
    return [tool_payload(m["content"]) for m in request.messages if m["role"] == "tool"]


async def test_agent_searches_and_cites_a_result(
    apis: SearchAPIs, llm: ScriptedLLM, model: str
) -> None:
    llm.script(Reply(tool_calls=[call("search_web", query="python 3.13 free threading", count=3)]))

    def answer(request: RecordedRequest) -> Reply:
        [payload] = _search_results(request)
        top = payload["result"]["results"][0]
        return Reply(text=f"CPython 3.13 can run without the GIL [1].\n\n[1] {top['url']}")

    llm.respond_with(answer)
    tool = search_web_tool(apis.settings("brave"))

    result = await run_chat("Can Python 3.13 run without the GIL?", model=model, tools=[tool])

    assert result.done.stop_reason == "completed"
    assert result.done.text.endswith(f"[1] {PAGES[0].url}")
    [finished] = result.tool_results
    assert finished.ok
    payload = tool_payload(finished.content)
    assert payload["ok"] is True
    assert payload["result"]["query"] == "python 3.13 free threading"
    assert payload["result"]["provider"] == "brave"
    assert [r["url"] for r in payload["result"]["results"]] == [p.url for p in PAGES[:3]]
    assert llm.requests[0].tool_names == ["search_web"]
    assert apis.requests_to("brave")[0].params["q"] == "python 3.13 free threading"


async def test_agent_reads_a_rate_limit_as_a_tool_error(
    apis: SearchAPIs, llm: ScriptedLLM, model: str
) -> None:
    apis.fault("duckduckgo", status=202)
    llm.script(Reply(tool_calls=[call("search_web", query="latest python release")]))

    def answer(request: RecordedRequest) -> Reply:
        [payload] = _search_results(request)
        assert payload["ok"] is False
        return Reply(text=f"Search is unavailable: {payload['error']}")

    llm.respond_with(answer)
    tool = search_web_tool(apis.settings("duckduckgo"))

    result = await run_chat("What is the latest Python?", model=model, tools=[tool])

    [finished] = result.tool_results
    assert not finished.ok
    payload = tool_payload(finished.content)
    assert payload["error"].startswith("DuckDuckGo is rate limiting this IP (HTTP 202)")
    assert "wait" in payload["hint"]
    assert result.done.text.startswith("Search is unavailable: DuckDuckGo is rate limiting")
