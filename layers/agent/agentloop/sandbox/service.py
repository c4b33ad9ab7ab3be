"""The sandbox function's logic (``functions/sandbox`` only adapts Lambda to it).

Besides running the event's code with :func:`~agentloop.sandbox.runner.run_python`, the host
process cleans its execution environment around every run, because Lambda reuses it for the
next invocation - which may carry another user's code:

* it is a child subreaper itself, so even a process that killed its supervisor stays below
  it, and every descendant is killed after the run;
* it empties the temp dir (on Lambda, ``/tmp`` holds nothing but what runs left there).

Both are on by default only on Lambda (``AWS_LAMBDA_RUNTIME_API`` is set), where the process
exists for nothing else; ``AGENTLOOP_SANDBOX_HOST_CLEANUP=1``/``0`` forces them on or off.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from agentloop.sandbox import _supervisor
from agentloop.sandbox.models import SandboxLimits, SandboxRequest, SandboxResponse
from agentloop.sandbox.runner import SandboxError, run_python

# Time kept back from the invocation's remaining time: killing the tree, cleaning up and
# answering must finish before Lambda's own timeout.
SAFETY_MARGIN_S = 2.0
MIN_RUN_S = 0.5


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(event)'}: {err['msg']}" for err in exc.errors()
    )


@dataclass(frozen=True)
class SandboxHost:
    """What the process hosting the runner does around each run (see the module docstring)."""

    contain: bool = False
    wipe_dir: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SandboxHost:
        env = os.environ if environ is None else environ
        flag = env.get("AGENTLOOP_SANDBOX_HOST_CLEANUP", "").strip()
        enabled = flag == "1" if flag else "AWS_LAMBDA_RUNTIME_API" in env
        if not enabled:
            return cls()
        return cls(contain=True, wipe_dir=tempfile.gettempdir())

    def prepare(self) -> None:
        """Once per process: adopt orphans from now on."""
        if self.contain:
            _supervisor.prctl(_supervisor.PR_SET_CHILD_SUBREAPER, 1)

    def clean(self) -> None:
        """Kill every descendant of this process and empty the temp dir."""
        if self.contain:
            _supervisor.kill_descendants(os.getpid(), statuses={})
        if self.wipe_dir:
            _empty_dir(self.wipe_dir)


def _empty_dir(path: str) -> None:
    try:
        entries = list(os.scandir(path))
    except OSError:
        return
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                _make_tree_writable(entry.path)
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)


def _make_tree_writable(path: str) -> None:
    stack = [path]
    while stack:
        directory = stack.pop()
        with contextlib.suppress(OSError):
            os.chmod(directory, 0o700)
        with contextlib.suppress(OSError), os.scandir(directory) as entries:
            stack.extend(e.path for e in entries if e.is_dir(follow_symlinks=False))


def _error(message: str, kind: str) -> dict[str, Any]:
    return SandboxResponse.model_validate(
        {"ok": False, "error": message, "error_kind": kind}
    ).to_event()


def handle_sandbox_event(
    event: object, *, remaining_ms: int | None = None, host: SandboxHost | None = None
) -> dict[str, Any]:
    """Validate ``event`` (a :class:`SandboxRequest`), run it, answer a :class:`SandboxResponse`.

    Never raises for a bad event: the caller gets ``ok: false`` with the reason. The run's
    timeout is capped so that it ends before the invocation's ``remaining_ms`` do.
    """
    host = host or SandboxHost()
    try:
        request = SandboxRequest.model_validate(event)
    except ValidationError as exc:
        return _error(f"invalid event: {_problems(exc)}", "invalid_request")
    limits: SandboxLimits = request.limits
    capped_to: float | None = None
    if remaining_ms is not None:
        available = remaining_ms / 1000 - SAFETY_MARGIN_S
        if available < MIN_RUN_S:
            return _error("too little time left in this invocation to run code", "no_time")
        if limits.timeout_s > available:
            capped_to = round(available, 1)
            limits = limits.model_copy(update={"timeout_s": capped_to})
    host.clean()
    try:
        outcome = run_python(request.code, limits)
    except SandboxError as exc:
        return _error(exc.message, "internal")
    finally:
        host.clean()
    if capped_to is not None:
        outcome.notes.insert(0, f"The time limit was lowered to {capped_to:g} s to fit.")
    return SandboxResponse(ok=True, outcome=outcome).to_event()
