"""A face's module is imported at the first request to its route, never before: a function
that only serves ``/chat`` never pays for the other protocols (issue 24, item 3)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# In a fresh process, so nothing another test imported counts. Each request reaches its
# route's handler (a /chat run that ends at once: its provider has no key; the others are
# refused with 422 after their face parsed the body; /mcp answers an unknown method in
# JSON-RPC) and the face packages loaded after it
# are printed, in order.
PROBE = """
import json, sys
from starlette.testclient import TestClient
from chat_app import create_app
from tests.served import AUTH, make_service

PROTOCOLS = ("ui_stream", "ag_ui", "openai", "responses", "mcp")
USER = {"role": "user", "content": "hi"}
REQUESTS = [
    ("/chat", {"messages": [USER], "model": "groq:m"}, 200),
    ("/api/chat", {"messages": "no"}, 422),
    ("/ag-ui", {"threadId": 1}, 422),
    ("/v1/chat/completions", {"messages": [USER], "n": 2}, 422),
    ("/v1/responses", {"input": "hi", "unknown": 1}, 422),
    ("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "nope"}, 200),
]

def loaded():
    return sorted(p for p in PROTOCOLS if f"agentloop.faces.{p}" in sys.modules)

steps = []
with TestClient(create_app(make_service()), base_url="http://127.0.0.1") as client:
    assert client.get("/healthz").status_code == 200
    steps.append(["start", 200, loaded()])
    for path, body, status in REQUESTS:
        answer = client.post(path, json=body, headers=AUTH)
        assert answer.status_code == status, (path, answer.status_code, answer.text[:300])
        steps.append([path, answer.status_code, loaded()])
print(json.dumps(steps))
"""


def test_each_face_is_imported_at_its_routes_first_request() -> None:
    paths = [str(ROOT), str(ROOT / "functions/chat"), str(ROOT / "layers/agent")]
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env={"PYTHONPATH": ":".join(paths), "PATH": "/usr/bin:/bin", "GROQ_API_KEY": ""},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    steps = json.loads(result.stdout.strip().splitlines()[-1])
    assert steps == [
        ["start", 200, []],
        ["/chat", 200, []],
        ["/api/chat", 422, ["ui_stream"]],
        ["/ag-ui", 422, ["ag_ui", "ui_stream"]],
        ["/v1/chat/completions", 422, ["ag_ui", "openai", "ui_stream"]],
        ["/v1/responses", 422, ["ag_ui", "openai", "responses", "ui_stream"]],
        ["/mcp", 200, ["ag_ui", "mcp", "openai", "responses", "ui_stream"]],
    ]


def test_importing_the_route_table_loads_no_endpoint_and_no_engine() -> None:
    """``import chat_app`` (what the bench's cold-start row times) loads the route table and
    nothing behind it: the endpoints load at their first request, the engine at start-up."""
    probe = (
        "import sys, json, chat_app\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('agentloop'))))\n"
        "chat_app.routes()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('agentloop'))))\n"
    )
    paths = [str(ROOT / "functions/chat"), str(ROOT / "layers/agent")]
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env={"PYTHONPATH": ":".join(paths), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    imported, with_routes = (json.loads(line) for line in result.stdout.splitlines()[-2:])
    light = ["agentloop", "agentloop.logs", "agentloop.server", "agentloop.server.deferred"]
    assert imported == with_routes == light
