"""The supervisor: the one process that sits between the runner and model-written code.

It is started by :mod:`agentloop.sandbox.runner` as ``python -I -S -B _supervisor.py CONFIG``
with a scrubbed environment, in a session of its own. Why a separate process:

* The code's *parent* is this process, whose environment holds nothing secret, so reading
  ``/proc/<ppid>/environ`` finds nothing (the runner's own process is one level further up).
* It makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): a grandchild that
  calls ``setsid()`` leaves the process group, but when its parent dies it is re-parented here
  instead of to init, so it is still found (as a descendant in ``/proc``) and killed.
* It applies the rlimits in the forked child before ``exec`` (no ``preexec_fn`` in the
  threaded parent) and enforces the wall-clock limit itself, then kills every descendant and
  reports what happened on a private pipe.

This file is also imported by the runner (for :func:`kill_descendants`), so it must only use
the standard library: it runs with ``-S``, without site-packages or the agentloop package.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

# Signals that mean "stop now": the runner cancels with SIGTERM, and a runner that dies sends
# SIGTERM through PR_SET_PDEATHSIG.
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
WATCHED = frozenset({signal.SIGCHLD, *STOP_SIGNALS})

# How often the process count is checked where RLIMIT_NPROC does not bite (root).
PROCESS_POLL_S = 0.05


def prctl(option: int, value: int) -> bool:
    """``prctl(option, value)`` through libc; False where it is unavailable or refused."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


# ---- the process table ------------------------------------------------------------------------


Table = dict[int, tuple[int, str, int]]


def process_table() -> Table:
    """``pid -> (ppid, state, session id)`` for every process in ``/proc``."""
    table: Table = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
            # The command name may hold spaces and parentheses: fields start after the last ")".
            fields = data[data.rindex(b")") + 2 :].split()
            state = fields[0].decode("ascii", "replace")
            table[int(name)] = (int(fields[1]), state, int(fields[3]))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return table


def descendants(root: int, table: Table) -> list[int]:
    """Every process below ``root`` (zombies included), parents before children."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child != root:
                found.append(child)
                stack.append(child)
    return found


def _entry(pid: int) -> tuple[int, str, int] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2 :].split()
        return int(fields[1]), fields[0].decode("ascii", "replace"), int(fields[3])
    except (OSError, ValueError, IndexError):
        return None


def _is_alive(state: str) -> bool:
    return state not in ("Z", "X")


def _kill(pid: int, still_ours: Callable[[tuple[int, str, int]], bool]) -> None:
    """SIGKILL ``pid`` if its ``/proc`` entry, read again, still says it is ours.

    The pid is pinned with a pidfd first and then checked, so a pid that was reused by an
    unrelated process since the scan is left alone.
    """
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except OSError:  # no pidfd support (old kernel): plain kill, checked as well as we can
        entry = _entry(pid)
        if entry is not None and still_ours(entry):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        return
    try:
        entry = _entry(pid)
        if entry is not None and still_ours(entry):
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
    finally:
        os.close(fd)


def reap(statuses: dict[int, int]) -> bool:
    """Collect every finished child without blocking; False once there are no children left."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        statuses[pid] = status


def kill_descendants(
    root: int, *, timeout_s: float = 5.0, statuses: dict[int, int] | None = None
) -> set[int]:
    """SIGKILL every live descendant of ``root`` until none is left; the pids signalled.

    Repeated because a process may fork between the scan and the kill. With ``statuses``,
    ``root`` is this process and reaps its children as it goes (as a subreaper, every orphan
    of the tree ends up as one of them).
    """
    signalled: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while True:
        if statuses is not None:
            reap(statuses)
        table = process_table()
        below = descendants(root, table)
        alive = [pid for pid in below if _is_alive(table[pid][1])]
        # The reaper is done when nothing is left below it; another caller when nothing lives.
        finished = not below if statuses is not None else not alive
        if finished or time.monotonic() > deadline:
            return signalled
        still_below = _child_of({root, *below})
        for pid in alive:
            _kill(pid, still_below)
        signalled.update(alive)
        time.sleep(0.002)


def _child_of(parents: set[int]) -> Callable[[tuple[int, str, int]], bool]:
    return lambda entry: entry[0] in parents


def _in_session(sid: int) -> Callable[[tuple[int, str, int]], bool]:
    return lambda entry: entry[2] == sid


def kill_session(sid: int, *, timeout_s: float = 2.0) -> set[int]:
    """SIGKILL every process of session ``sid`` (but the caller) until none is left.

    Used from outside when the supervisor (the session leader) is gone or stuck: as long as
    it is not reaped its pid, and so the session id, cannot be reused.
    """
    signalled: set[int] = set()
    deadline = time.monotonic() + timeout_s
    me = os.getpid()
    while True:
        table = process_table()
        alive = [
            pid
            for pid, (_, state, session) in table.items()
            if session == sid and pid != me and _is_alive(state)
        ]
        if not alive or time.monotonic() > deadline:
            return signalled
        in_session = _in_session(sid)
        for pid in alive:
            _kill(pid, in_session)
        signalled.update(alive)
        time.sleep(0.002)


def count_live(root: int) -> int:
    table = process_table()
    return sum(1 for pid in descendants(root, table) if _is_alive(table[pid][1]))


def uid_task_count(uid: int) -> int:
    """Tasks (threads included) of a real uid: what RLIMIT_NPROC is compared with."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", encoding="ascii", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in lines if ":" in line)
        try:
            if int(fields.get("Uid", "-1").split()[0]) == uid:
                total += int(fields.get("Threads", "1").strip())
        except (ValueError, IndexError):
            continue
    return total


# ---- the child --------------------------------------------------------------------------------


def _exec_code(config: dict[str, Any]) -> None:
    """In the forked child: own group, death with the supervisor, rlimits, then exec."""
    try:
        os.setpgid(0, 0)
        # If the supervisor is killed (by the code itself, say), the program dies with it.
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)  # Python ignores them; exec would keep that
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        with contextlib.suppress(OSError):
            os.nice(int(config["nice"]))
        for name, (soft, hard) in config["rlimits"].items():
            limit = getattr(resource, name)
            _, current_hard = resource.getrlimit(limit)
            if current_hard != resource.RLIM_INFINITY:  # never ask for more than allowed
                soft, hard = min(soft, current_hard), min(hard, current_hard)
            resource.setrlimit(limit, (soft, hard))
        os.execve(config["argv"][0], config["argv"], dict(os.environ))
    except BaseException as exc:
        os.write(2, f"sandbox: could not start the program: {exc!r}\n".encode())
    os._exit(127)


def _nproc_limit(max_processes: int) -> tuple[int, int] | None:
    """RLIMIT_NPROC for the code: the tasks this uid already has, plus the allowance."""
    if os.geteuid() == 0:
        return None  # root is exempt from RLIMIT_NPROC: the supervisor counts instead
    soft = uid_task_count(os.getuid()) + max_processes
    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    return soft, soft


def supervise(config: dict[str, Any]) -> dict[str, Any]:
    """Run the code under the limits of ``config``; what happened, as a JSON-able dict."""
    me = os.getpid()
    subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1)
    max_processes = int(config["max_processes"])
    rlimits: dict[str, list[int]] = dict(config["rlimits"])
    nproc = _nproc_limit(max_processes)
    if nproc is not None:
        rlimits["RLIMIT_NPROC"] = list(nproc)
    poll = None if nproc is not None else PROCESS_POLL_S

    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    started = time.monotonic()
    deadline = started + float(config["timeout_s"])
    pid = os.fork()
    if pid == 0:
        _exec_code({**config, "rlimits": rlimits})
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # also here, so the group exists before any killpg below

    statuses: dict[int, int] = {}
    stopped_by: str | None = None
    while pid not in statuses:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            stopped_by = "timeout"
            break
        info = signal.sigtimedwait(WATCHED, min(remaining, poll) if poll else remaining)
        if info is not None and info.si_signo in STOP_SIGNALS:
            stopped_by = "cancelled"
            break
        reap(statuses)
        if poll and pid not in statuses and count_live(me) > max_processes:
            stopped_by = "process_limit"
            break
    ended = time.monotonic()

    # Whatever still runs once the program has exited was left behind on purpose or not.
    leftovers = count_live(me) if stopped_by is None else 0
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    kill_descendants(me, statuses=statuses)
    if pid not in statuses:  # killed above: wait for it so its status is known
        with contextlib.suppress(ChildProcessError):
            statuses[pid] = os.waitpid(pid, 0)[1]
    status = statuses.get(pid)
    return {
        "exit_code": None if status is None else os.waitstatus_to_exitcode(status),
        "stopped_by": stopped_by,
        "leftovers": leftovers,
        "subreaper": subreaper,
        "run_s": ended - started,
    }


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    report_fd = int(config["report_fd"])
    os.set_inheritable(report_fd, False)  # the code must not be able to forge the report
    # If the runner dies, stop (and clean up) rather than run on unsupervised.
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != int(config["parent_pid"]):
        return 3  # the runner was already gone before PDEATHSIG was armed
    report = supervise(config)
    with os.fdopen(report_fd, "w") as out:
        out.write(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
