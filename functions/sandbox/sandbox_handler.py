"""The sandbox function: runs model-written Python for the chat function's execute_code.

Deployed with no IAM permissions and no secrets (template.yaml), so that whatever the code
reads from its environment or its parents' is worth nothing. The logic lives in
``agentloop.sandbox.service``; this only adapts Lambda's event and context to it.
"""

from __future__ import annotations

from typing import Any

from agentloop.sandbox.service import SandboxHost, handle_sandbox_event

# On Lambda: adopt orphaned processes, and clean the environment around each run.
HOST = SandboxHost.from_env()
HOST.prepare()


def handler(event: Any, context: Any) -> dict[str, Any]:
    """Event ``{"code": ..., "limits": {...}}`` -> ``{"ok": true, "outcome": {...}}``."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    remaining_ms = int(remaining()) if callable(remaining) else None
    return handle_sandbox_event(event, remaining_ms=remaining_ms, host=HOST)
