"""Serve an ASGI app with uvicorn on a free loopback port, in a background thread.

Used for the scripted model server and for tests that need the chat app behind a
real socket (the OpenAI SDK as a client, a client that disconnects mid-stream).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from types import TracebackType
from typing import Self

import uvicorn
from starlette.types import ASGIApp


class LoopbackServer:
    def __init__(
        self,
        app: ASGIApp,
        *,
        name: str = "loopback-server",
        lifespan: str = "off",
        log_filter: logging.Filter | None = None,
    ) -> None:
        self.app = app
        self.name = name
        self.lifespan = lifespan
        self.log_filter = log_filter
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def port(self) -> int:
        if self._socket is None:
            raise RuntimeError(f"{self.name} is not running")
        return int(self._socket.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> Self:
        """Bind a free port ourselves (so it is known at once) and serve until :meth:`stop`."""
        if self._thread is not None:
            return self
        # IPPROTO_TCP (not 0): asyncio then sets TCP_NODELAY on accepted connections, so a
        # reused keep-alive connection does not wait ~40 ms for a delayed ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self._socket = sock
        config = uvicorn.Config(
            self.app,
            log_config=None,  # leave the test process's logging alone
            log_level="warning",
            access_log=False,
            lifespan=self.lifespan,
            http="h11",
            loop="asyncio",
            timeout_graceful_shutdown=1,
        )
        self._server = server = uvicorn.Server(config)
        if self.log_filter is not None:
            logging.getLogger("uvicorn.error").addFilter(self.log_filter)
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name=self.name, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Shut uvicorn down and wait for its thread."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
