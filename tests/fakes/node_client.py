"""Run a JavaScript client script from ``tests/node`` under the machine's Node.js.

The protocol faces are tested with the real client libraries of their protocols (the ``ai``
package, ``@ag-ui/client``, ``@ai-sdk/openai``), installed by ``make test`` from
``tests/node/package-lock.json``. A script reads one JSON object (the test's input: server
URL, token, what to send) from the ``AGENTLOOP_TEST_INPUT`` variable and prints one JSON
object (what the client library made of the answer) as the last line of its stdout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
NODE_MODULES = NODE_DIR / "node_modules"


def node_available() -> None:
    """Fail (not skip) when the clients are missing: ``make test`` installs them."""
    if shutil.which("node") is None:
        pytest.fail("the face tests need Node.js 20+ (make test checks for it)")
    if not (NODE_MODULES / ".package-lock.json").exists():
        pytest.fail("the JavaScript clients are not installed: run make node-clients")


def run_node(script: str, payload: dict[str, Any], timeout: float = 60.0) -> Any:
    """Run ``tests/node/<script>`` with ``payload`` and return the JSON it printed last."""
    node_available()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "AGENTLOOP_TEST_INPUT": json.dumps(payload),
        "NO_PROXY": "127.0.0.1,localhost",
    }
    completed = subprocess.run(
        ["node", str(NODE_DIR / script)],
        cwd=NODE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = [line for line in completed.stdout.splitlines() if line.strip()]
    if completed.returncode != 0 or not lines:
        raise AssertionError(
            f"node {script} exited {completed.returncode}\n"
            f"stdout:\n{completed.stdout[-4000:]}\nstderr:\n{completed.stderr[-4000:]}"
        )
    return json.loads(lines[-1])
