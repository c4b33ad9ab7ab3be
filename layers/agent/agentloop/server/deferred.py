"""An endpoint named by where it lives, imported at its route's first request.

The route table (``functions/chat/chat_app.py``) names every endpoint this way, so importing
the table imports no protocol and no engine: each route's module is loaded when the route is
first used, and the engine when the app starts (its lifespan builds the service). This module
uses only the standard library and Starlette's routing.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from starlette.routing import request_response
from starlette.types import ASGIApp, Receive, Scope, Send


class Deferred:
    """The ASGI app of ``"package.module:name"``, loaded at its first request.

    ``name`` is a request handler (``async def f(request) -> Response``), an ASGI app, or a
    factory of either (a class, or a function given ``args``) called once with ``args``.
    """

    def __init__(self, target: str, *args: Any) -> None:
        module, _, name = target.partition(":")
        if not module or not name:
            raise ValueError(f"a deferred endpoint is 'module:name', not {target!r}")
        self.target = target
        self.args = args
        self._app: ASGIApp | None = None

    def load(self) -> ASGIApp:
        """The endpoint as an ASGI app (imported and built on the first call only)."""
        if self._app is None:
            module, _, name = self.target.partition(":")
            found = getattr(importlib.import_module(module), name)
            endpoint = found(*self.args) if self.args or inspect.isclass(found) else found
            is_handler = inspect.isfunction(endpoint) or inspect.ismethod(endpoint)
            self._app = request_response(endpoint) if is_handler else endpoint
        return self._app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.load()(scope, receive, send)
