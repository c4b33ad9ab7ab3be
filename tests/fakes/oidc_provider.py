"""A real OpenID Connect provider on loopback: ``tests/node/oidc_provider.mjs`` (oidc-provider).

``OidcProvider`` starts the Node process, which binds a free port and says its issuer URL;
``register(redirect_uri)`` gives it the chat page's URL (known only once the page's server
runs), and from then on every token grant it makes is recorded (``grants``), so a test can
wait for the code exchange or a refresh without polling a clock.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from types import TracebackType
from typing import IO, Any, Self

from tests.fakes.node_client import NODE_DIR, node_available

WAIT_S = 15.0


class OidcProvider:
    """The provider process; a context manager that stops it (closing its stdin) at the end."""

    CLIENT_ID = "chat-page"

    def __init__(self, *, id_token_ttl_s: int = 3600) -> None:
        node_available()
        self._process = subprocess.Popen(
            ["node", str(NODE_DIR / "oidc_provider.mjs"), "--id-token-ttl", str(id_token_ttl_s)],
            cwd=NODE_DIR,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "NO_PROXY": "127.0.0.1"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._changed = threading.Condition()
        self._said: list[dict[str, Any]] = []
        threading.Thread(target=self._read, args=(self._process.stdout,), daemon=True).start()
        self.issuer = str(self._wait_for("issuer")["issuer"])

    def _read(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            try:
                said = json.loads(line)
            except ValueError:  # the package's own notices, printed between ours
                continue
            with self._changed:
                self._said.append(said)
                self._changed.notify_all()
        with self._changed:  # the process ended: nothing more will come
            self._said.append({"exited": True})
            self._changed.notify_all()

    def _wait_for(self, key: str) -> dict[str, Any]:
        with self._changed:
            found = self._changed.wait_for(
                lambda: any(key in said or "exited" in said for said in self._said), WAIT_S
            )
            said = next((s for s in self._said if key in s or "exited" in s), None)
        if not found or said is None or key not in said:
            raise AssertionError(f"the OIDC provider did not say {key!r}: {self._said}")
        return said

    def register(self, redirect_uri: str) -> None:
        """Register the page's client with ``redirect_uri``; returns once it is served."""
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps({"redirect_uri": redirect_uri}) + "\n")
        self._process.stdin.flush()
        self._wait_for("ready")

    @property
    def grants(self) -> list[str]:
        """The grant type of every token grant made so far, in order."""
        with self._changed:
            return [s["grant_type"] for s in self._said if s.get("event") == "grant"]

    def wait_for_grants(self, count: int) -> list[str]:
        """The grants, once there are ``count`` (all there are, should the wait run out)."""
        with self._changed:
            self._changed.wait_for(lambda: len(self.grants) >= count, WAIT_S)
        return self.grants

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
