"""The sandbox function's logic (``functions/sandbox`` only adapts Lambda to it).

Besides running the event's code with :func:`~agentloop.sandbox.runner.run_program`, the host
process cleans its execution environment around every run, because Lambda reuses it for the
next invocation - which may carry another user's code:

* it is non-dumpable, so a program (same uid, not root) cannot read its ``/proc`` entries
  (environ, mem, fd) or ptrace it;
* it is a child subreaper itself, so even a process that killed its supervisor stays below
  it, and every descendant is killed after the run;
* it then *verifies* that nothing survived: no descendant whose thread group still runs, and
  (where the uid is the sandbox's alone: on Lambda, or ``AGENTLOOP_SANDBOX_HOST_OWN_UID=1``)
  no process of its uid that was not there when the environment started.
  If something survived, or the check cannot be made, the environment is not reused: the
  process logs why and exits with status 75, Lambda answers this invocation with a
  ``Runtime.ExitError`` (the client says the run may be retried) and starts a fresh
  environment for the next one - before a survivor could see the next event;
* it empties the temp dir (on Lambda, ``/tmp`` holds nothing but what runs left there).

All of it is on by default only on Lambda (``AWS_LAMBDA_RUNTIME_API`` is set), where the
process exists for nothing else; ``AGENTLOOP_SANDBOX_HOST_CLEANUP=1``/``0`` forces it on or off.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from pydantic import ValidationError

from agentloop.sandbox import _supervisor
from agentloop.sandbox.files import empty_dir
from agentloop.sandbox.models import SandboxLimits, SandboxRequest, SandboxResponse
from agentloop.sandbox.runner import SandboxError, run_program

# Time kept back from the invocation's remaining time: killing the tree, cleaning up and
# answering must finish before Lambda's own timeout.
SAFETY_MARGIN_S = 2.0
MIN_RUN_S = 0.5
# The exit status of a process that discards its execution environment (EX_TEMPFAIL).
DISCARD_EXIT_STATUS = 75

logger = logging.getLogger(__name__)


def _discard(reason: str) -> NoReturn:
    """End this process now, so that Lambda does not reuse the environment."""
    print(f"agentloop sandbox: discarding this execution environment: {reason}", file=sys.stderr)
    sys.stderr.flush()
    os._exit(DISCARD_EXIT_STATUS)


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(event)'}: {err['msg']}" for err in exc.errors()
    )


Identity = tuple[int, int]
"""A process as ``(pid, start time)``: a reused pid is another process."""


def _uid_processes(uid: int) -> set[Identity]:
    """Every process of real uid ``uid`` whose thread group still runs."""
    found: set[Identity] = set()
    for pid, (_, state, _) in _supervisor.process_table().items():
        try:
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
                uid_line = next(line for line in f if line.startswith("Uid:"))
            with open(f"/proc/{pid}/stat", "rb") as f:
                data = f.read()
            start = int(data[data.rindex(b")") + 2 :].split()[19])
        except (OSError, StopIteration, ValueError, IndexError):
            continue
        if int(uid_line.split()[1]) == uid and _supervisor.is_alive(pid, state):
            found.add((pid, start))
    return found


@dataclass
class SandboxHost:
    """What the process hosting the runner does around each run (see the module docstring)."""

    contain: bool = False
    wipe_dir: str | None = None
    discard: Callable[[str], NoReturn] = field(default=_discard, repr=False)
    own_uid: bool = False
    baseline: set[Identity] | None = field(default=None, repr=False)
    subreaper: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SandboxHost:
        env = os.environ if environ is None else environ
        flag = env.get("AGENTLOOP_SANDBOX_HOST_CLEANUP", "").strip()
        enabled = flag == "1" if flag else "AWS_LAMBDA_RUNTIME_API" in env
        if not enabled:
            return cls()
        own = env.get("AGENTLOOP_SANDBOX_HOST_OWN_UID", "").strip()
        own_uid = own == "1" if own else "AWS_LAMBDA_RUNTIME_API" in env
        return cls(contain=True, wipe_dir=tempfile.gettempdir(), own_uid=own_uid)

    def prepare(self) -> None:
        """Once per process: not dumpable, adopt orphans, and note the runtime's processes."""
        if not self.contain:
            return
        _supervisor.prctl(_supervisor.PR_SET_DUMPABLE, 0)
        self.subreaper = _supervisor.prctl(_supervisor.PR_SET_CHILD_SUBREAPER, 1)
        if self.own_uid and os.getuid() != 0:  # root's processes are the whole machine's
            self.baseline = _uid_processes(os.getuid())

    def survivors(self) -> list[str]:
        """What is left of the runs: descendants, and (not root) new processes of this uid."""
        me = os.getpid()
        found = [f"descendant {pid}" for pid in _supervisor.survivors(me)]
        if self.baseline is not None:
            new = _uid_processes(os.getuid()) - self.baseline
            found += [f"process {pid}" for pid, _ in sorted(new) if pid != me]
        elif not self.subreaper:
            found.append("no subreaper and no baseline: survivors cannot be ruled out")
        return found

    def clean(self) -> None:
        """Kill every descendant, verify that nothing survived, and empty the temp dir.

        Calls ``discard`` (which does not return) when survival cannot be ruled out.
        """
        if self.contain:
            _supervisor.kill_descendants(os.getpid(), statuses={})
            left = self.survivors()
            if left:
                self.discard(f"{len(left)} left after the run: {', '.join(left[:5])}")
        if self.wipe_dir:
            empty_dir(self.wipe_dir)


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
    try:
        files = request.decoded_files()
    except ValueError as exc:
        return _error(f"invalid event: files: {exc}", "invalid_request")
    host.clean()
    try:
        ran = run_program(request.code, limits, files=files)
    except SandboxError as exc:
        return _error(exc.message, "internal")
    finally:
        host.clean()
    if capped_to is not None:
        ran.outcome.notes.insert(0, f"The time limit was lowered to {capped_to:g} s to fit.")
    return SandboxResponse(ok=True, outcome=ran.outcome, workdir=ran.workdir).to_event()
