"""moto's DynamoDB server taking one request at a time, for tests of concurrent transactions.

DynamoDB runs conflicting transactions one after the other. moto (5.2.5) does not: its
``transact_write_items`` takes no lock, and a cancelled transaction rolls back by putting
back a copy of the whole table made when it began, which erases the writes other
transactions committed meanwhile. Under concurrent requests a limit checked in a transaction
is then passed (seen: 4 and 5 of 12 admitted under a limit of 3). Serialized, moto answers as
DynamoDB would; the store's requests still overlap on the client side as they do deployed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from tests.store_backends import Moto


class _OneAtATime:
    """A WSGI app that lets one request through at a time."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        with self.lock:
            return list(self.app(environ, start_response))


@pytest.fixture(scope="module")
def serial_moto() -> Iterator[Moto]:
    """moto's server on a loopback port, serialized (see the module's docstring)."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    app = _OneAtATime(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, app, True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield Moto(f"http://{host!s}:{port}")
    server.shutdown()
    thread.join()
