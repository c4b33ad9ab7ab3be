"""``server.deferred.Deferred``: an endpoint named by where it lives, loaded at first use."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send

from agentloop.server.deferred import Deferred

MODULE = "deferred_probe_endpoints"


class Greeter:
    """An ASGI class: Deferred makes one instance, with the given args."""

    made: list[tuple[str, ...]] = []

    def __init__(self, *words: str) -> None:
        Greeter.made.append(words)
        self.words = words

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await PlainTextResponse(" ".join(self.words))(scope, receive, send)


async def handler(request: Request) -> Response:
    return PlainTextResponse(f"handled {request.method}")


def factory(word: str) -> object:
    async def made(request: Request) -> Response:
        return PlainTextResponse(word)

    return made


@pytest.fixture
def probe_module() -> Iterator[types.ModuleType]:
    """A module that is not imported until a route's first request (it counts imports)."""
    module = types.ModuleType(MODULE)
    module.__dict__.update(Greeter=Greeter, handler=handler, factory=factory)
    Greeter.made.clear()
    sys.modules[MODULE] = module
    yield module
    del sys.modules[MODULE]


def test_each_kind_of_endpoint_answers_and_is_built_once(probe_module: types.ModuleType) -> None:
    app = Starlette(
        routes=[
            Route("/class", Deferred(f"{MODULE}:Greeter", "hello", "there"), methods=["GET"]),
            Route("/handler", Deferred(f"{MODULE}:handler"), methods=["POST"]),
            Route("/factory", Deferred(f"{MODULE}:factory", "made"), methods=["GET"]),
        ]
    )
    with TestClient(app) as client:
        assert Greeter.made == []  # nothing built before the first request
        assert client.get("/class").text == "hello there"
        assert client.get("/class").text == "hello there"
        assert Greeter.made == [("hello", "there")]
        assert client.post("/handler").text == "handled POST"
        assert client.get("/handler").status_code == 405  # the route's methods still hold
        assert client.get("/factory").text == "made"


@pytest.mark.parametrize("target", ["no_colon", ":name", "module:", ""])
def test_a_target_without_module_and_name_is_refused_when_the_table_is_built(
    target: str,
) -> None:
    with pytest.raises(ValueError, match="module:name"):
        Deferred(target)
