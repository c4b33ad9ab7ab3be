"""A process that serves sandbox runs the way a deployment does, for the isolation tests.

Started by :mod:`tests.fakes.sandbox_jail`; reads one JSON request per line on stdin and
answers one JSON line on stdout, in one long-lived process (as Lambda reuses an execution
environment):

* ``{"op": "invoke", "event": {...}}``: the sandbox function's handler, exactly as deployed
  (``functions/sandbox/sandbox_handler.py``, host clean-up on);
* ``{"op": "local", "code": ..., "limits": {...}}``: the local backend's runner with
  namespace isolation, as ``make dev`` runs it;
* ``{"op": "whoami"}``: this process's pid and uid, and what its temp dir holds.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "functions" / "sandbox"))


class Context:
    """The part of Lambda's context object the handler reads."""

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def serve() -> None:
    import sandbox_handler
    from agentloop.sandbox import SandboxLimits, run_python
    from agentloop.sandbox.isolation import namespaces

    for line in sys.stdin:
        request: dict[str, Any] = json.loads(line)
        answer: dict[str, Any]
        if request["op"] == "invoke":
            answer = sandbox_handler.handler(request["event"], Context())
        elif request["op"] == "local":
            limits = SandboxLimits.model_validate(request.get("limits", {}))
            outcome = run_python(request["code"], limits, isolation=namespaces())
            answer = outcome.model_dump(mode="json")
        else:
            temp = tempfile.gettempdir()
            answer = {"pid": os.getpid(), "uid": os.getuid(), "temp": sorted(os.listdir(temp))}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
