"""No token in the server's log: not from the query string, not from a header.

The app runs as ``make dev`` runs it (the Makefile's own recipe line, uvicorn with its access
log on) and as the deployed ``functions/chat/run.sh`` runs it (access log off), each in its own
process; everything the process writes is read after it stops.
"""

from __future__ import annotations

import http.client
import json
import os
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agentloop.auth import hash_token
from tests.conftest import MODELS
from tests.fakes.scripted_llm import Reply, ScriptedLLM
from tests.helpers import ROOT

# A token's first 8 characters are its id, which the app may name; the secret part follows.
TOKEN = "al_logs-SECRET456"
QUERY = "?access_token=SECRET123"
WRONG = "not-the-token-SECRET789"
SECRETS = ("SECRET123", "SECRET456", "SECRET789")


def make_dev_command(port: int) -> list[str]:
    """The recipe of ``make dev`` as the Makefile has it, with this interpreter and ``port``."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    target = next(index for index, line in enumerate(lines) if line.startswith("dev:"))
    recipe = lines[target + 1].strip()
    recipe = recipe.replace("$(BIN)/python", sys.executable).replace("$(PORT)", str(port))
    assert "uvicorn" in recipe, f"make dev's recipe changed: {recipe!r}"
    assert "$(" not in recipe, f"unknown variables in make dev's recipe: {recipe!r}"
    return shlex.split(recipe)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def app_process(how: str, port: int, log: Path) -> Iterator[None]:
    """The chat app served on ``port`` the way ``how`` says, its output going to ``log``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTLOOP_", "AWS_"))}
    env.update(
        PYTHONUNBUFFERED="1",
        PORT=str(port),
        AGENTLOOP_AUTH_MODE="bearer",
        AGENTLOOP_AUTH_TOKEN_SHA256=hash_token(TOKEN),
        # run.sh starts `python3`: this environment's
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    if how == "make dev":
        command, cwd = make_dev_command(port), ROOT
    else:
        command, cwd = ["sh", str(ROOT / "functions/chat/run.sh")], ROOT / "functions/chat"
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_until_healthy(process, port, log)
        yield
    finally:
        process.terminate()
        process.wait(timeout=15)


def _wait_until_healthy(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the app exited {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"the app did not answer /healthz in 30 s:\n{log.read_text()}")


def post_chat(port: int, token: str, origin: str = "") -> tuple[int, str]:
    """POST /chat with the token in the query string too; ``origin`` before the path sends
    the target in absolute form (``http://host/chat?...``), as a proxy would."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "model": MODELS["groq"]})
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    connection.request("POST", origin + "/chat" + QUERY, body=body, headers=headers)
    response = connection.getresponse()
    return response.status, response.read().decode()


def try_websocket(port: int) -> bytes:
    """A WebSocket handshake on /chat: uvicorn logs those on its error log, target included."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            f"GET /chat{QUERY} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode()
        )
        return sock.recv(65536)


@pytest.mark.parametrize("how", ["make dev", "run.sh"])
def test_no_token_from_the_query_or_a_header_is_logged(
    how: str, llm: ScriptedLLM, tmp_path: Path
) -> None:
    llm.respond_with(lambda request: Reply(text="fine"))
    log = tmp_path / "app.log"
    port = free_port()
    with app_process(how, port, log):
        status, text = post_chat(port, TOKEN)
        assert status == 200, text
        assert "event: done" in text
        assert post_chat(port, WRONG)[0] == 401
        post_chat(port, TOKEN, origin=f"http://127.0.0.1:{port}")  # answered or not: logged
        assert try_websocket(port).startswith(b"HTTP/1.1 403")
    lines = log.read_text().splitlines()

    assert [line for line in lines if any(secret in line for secret in SECRETS)] == []
    access = [line for line in lines if '"POST /chat' in line]
    if how == "make dev":  # the access log stays, each line with its path and status
        assert len(access) == 2, lines
        assert '"POST /chat HTTP/1.1" 200' in access[0]
        assert '"POST /chat HTTP/1.1" 401' in access[1]
    else:  # deployed: no access log at all
        assert access == [], lines
    assert any('"WebSocket /chat"' in line for line in lines), lines
    assert any("run finished" in line for line in lines), "the app's own lines are read too"
