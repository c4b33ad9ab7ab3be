"""The supervisor: the one process that sits between the runner and model-written code.

It is started by :mod:`agentloop.sandbox.runner` as ``python -I -S -B _supervisor.py CONFIG``
with a scrubbed environment, in a session of its own. Why a separate process:

* The code's *parent* is this process, whose environment holds nothing secret, so reading
  ``/proc/<ppid>/environ`` finds nothing (the runner's own process is one level further up).
* It makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): a grandchild that
  calls ``setsid()`` leaves the process group, but when its parent dies it is re-parented here
  instead of to init, so it is still found (as a descendant in ``/proc``) and killed.
* It makes itself non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): a process of the same uid
  that is not root can then no longer open its ``/proc`` entries (environ, mem, fd) nor
  ptrace it, so the program cannot write a report through ``/proc/<ppid>/fd``.
* It applies the rlimits, ``no_new_privs`` and the cgroups in the forked child before
  ``exec`` (no ``preexec_fn`` in the threaded parent) and enforces the wall-clock limit
  itself, then kills every descendant and reports what happened on a private pipe.

Liveness is judged per thread group, not by the leader's state: a process whose main thread
ended with a raw ``exit`` syscall is listed as a zombie while its other threads run on, and
it is alive until ``/proc/<pid>/task`` holds no live thread.

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
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
# In an argv that bwrap runs, replaced by the fd number of a pipe holding the seccomp filter.
SECCOMP_FD = "@seccomp-fd@"

# Signals that mean "stop now": the runner cancels with SIGTERM, and a runner that dies sends
# SIGTERM through PR_SET_PDEATHSIG.
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
WATCHED = frozenset({signal.SIGCHLD, *STOP_SIGNALS})

# How often processes and memory are counted where no kernel limit binds (root without a
# pids cgroup; no memory cgroup).
PROCESS_POLL_S = 0.05
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


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


def _task_states(pid: int) -> list[str]:
    """The state of every thread of ``pid`` (empty once it is gone)."""
    states: list[str] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return states
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                data = f.read()
            states.append(data[data.rindex(b")") + 2 :].split()[0].decode("ascii", "replace"))
        except (OSError, ValueError, IndexError):
            continue
    return states


def is_alive(pid: int, state: str) -> bool:
    """Whether ``pid``'s thread group still runs: a zombie leader may have live threads."""
    if state not in ("Z", "X"):
        return True
    return any(task not in ("Z", "X") for task in _task_states(pid))


def live_tasks(pid: int) -> int:
    """Live threads of ``pid``: what ``RLIMIT_NPROC`` and a pids cgroup count."""
    return sum(1 for task in _task_states(pid) if task not in ("Z", "X"))


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
        alive = [pid for pid in below if is_alive(pid, table[pid][1])]
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
            if session == sid and pid != me and is_alive(pid, state)
        ]
        if not alive or time.monotonic() > deadline:
            return signalled
        in_session = _in_session(sid)
        for pid in alive:
            _kill(pid, in_session)
        signalled.update(alive)
        time.sleep(0.002)


def survivors(root: int) -> list[int]:
    """Descendants of ``root`` whose thread group still runs."""
    table = process_table()
    return [pid for pid in descendants(root, table) if is_alive(pid, table[pid][1])]


def count_live(root: int) -> int:
    return len(survivors(root))


def tree_usage(root: int) -> tuple[int, int]:
    """Live tasks (threads included) and resident bytes of every process below ``root``."""
    tasks = 0
    resident = 0
    for pid in descendants(root, process_table()):
        tasks += live_tasks(pid)
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                resident += int(f.read().split()[1]) * PAGE_SIZE
        except (OSError, ValueError, IndexError):
            continue
    return tasks, resident


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


def install_seccomp(program: bytes) -> None:
    """Load a BPF filter (``struct sock_filter[]``) for this process and what it runs."""
    import ctypes

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp filter refused")


def _with_seccomp(config: dict[str, Any]) -> list[str]:
    """The argv to exec, with the seccomp filter installed here or handed to bwrap."""
    argv: list[str] = list(config["argv"])
    program = bytes.fromhex(config.get("seccomp") or "")
    if SECCOMP_FD in argv:  # bwrap applies it to the program, after its own set-up
        read, write = os.pipe()
        os.write(write, program)
        os.close(write)
        os.set_inheritable(read, True)
        return [str(read) if arg == SECCOMP_FD else arg for arg in argv]
    if program:
        install_seccomp(program)
    return argv


def _exec_code(config: dict[str, Any]) -> None:
    """In the forked child: cgroups, own group, death with the supervisor, rlimits, exec."""
    try:
        for procs in config.get("cgroup_procs", ()):
            with open(procs, "w") as f:  # before anything is started: the whole tree is in it
                f.write(str(os.getpid()))
        os.setpgid(0, 0)
        # If the supervisor is killed (by the code itself, say), the program dies with it.
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        # No set-uid binary or file capability can raise the program's privileges.
        prctl(PR_SET_NO_NEW_PRIVS, 1)
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
        argv = _with_seccomp(config)
        os.execve(argv[0], argv, dict(os.environ))
    except BaseException as exc:
        os.write(2, f"sandbox: could not start the program: {exc!r}\n".encode())
    os._exit(127)


def _nproc_limit(config: dict[str, Any]) -> tuple[int, int] | None:
    """RLIMIT_NPROC for the code, or None where it cannot bind.

    It counts the tasks of the code's real uid. The runner passes a fixed value when the
    code gets a uid of its own (namespaces, as root); otherwise it is the tasks this uid
    already has plus the allowance, and root, which it does not bind, gets none.
    """
    shuttles = int(config.get("shuttles", 0))  # the working directory's, run as the program
    if config.get("nproc_own_uid"):  # bwrap's helpers run as root: only the program counts
        own = int(config["max_processes"]) + 1 + shuttles
        return own, own
    allowance = int(config["max_processes"]) + 1 + int(config.get("helpers", 0)) + shuttles
    if os.geteuid() == 0:
        return None
    soft = uid_task_count(os.getuid()) + allowance
    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    return soft, soft


def _over_limit(me: int, config: dict[str, Any]) -> str | None:
    """The polled limits, where no kernel limit binds: tasks, and memory of the whole tree."""
    tasks, resident = tree_usage(me)
    allowed = (
        int(config["max_processes"])
        + 1
        + int(config.get("helpers", 0))
        + int(config.get("shuttles", 0))
    )
    if config.get("poll_tasks") and tasks > allowed:
        return "process_limit"
    cap = config.get("poll_memory_bytes")
    if cap and resident > int(cap):
        return "memory_limit"
    return None


def supervise(config: dict[str, Any]) -> dict[str, Any]:
    """Run the code under the limits of ``config``; what happened, as a JSON-able dict."""
    me = os.getpid()
    subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1)
    config = _with_nproc(config)

    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    started = time.monotonic()
    deadline = started + float(config["timeout_s"])
    pid = _start_code(config)

    statuses: dict[int, int] = {}
    stopped_by = _watch(pid, me, config, deadline, statuses)
    ended = time.monotonic()

    # Whatever still runs once the program has exited was left behind on purpose or not.
    leftovers = max(0, count_live(me) - int(config.get("helpers", 0))) if stopped_by is None else 0
    _kill_all(pid, me, statuses)
    status = statuses.get(pid)
    return {
        "exit_code": None if status is None else os.waitstatus_to_exitcode(status),
        "stopped_by": stopped_by,
        "leftovers": leftovers,
        "subreaper": subreaper,
        "run_s": ended - started,
    }


def _with_nproc(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with RLIMIT_NPROC among the code's rlimits, or else with the tasks polled.

    Polled only where neither RLIMIT_NPROC (root) nor a pids cgroup binds.
    """
    nproc = _nproc_limit(config)
    if nproc is not None:
        return {**config, "rlimits": {**config["rlimits"], "RLIMIT_NPROC": list(nproc)}}
    if not config.get("cgroup_procs"):
        return {**config, "poll_tasks": True}  # root, no pids cgroup: count the tasks
    return config


def _start_code(config: dict[str, Any]) -> int:
    """Fork the child that becomes the program; its pid, which is also its process group."""
    pid = os.fork()
    if pid == 0:
        _exec_code(config)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # also here, so the group exists before any killpg
    return pid


def _watch(
    pid: int, me: int, config: dict[str, Any], deadline: float, statuses: dict[int, int]
) -> str | None:
    """Wait for the program to exit; or why it was stopped first (time, a signal, a limit).

    The watched signals are blocked, so they wait here for ``sigtimedwait`` to take them.
    """
    polled = bool(config.get("poll_tasks") or config.get("poll_memory_bytes"))
    while pid not in statuses:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        wait = min(remaining, PROCESS_POLL_S) if polled else remaining
        info = signal.sigtimedwait(WATCHED, wait)
        if info is not None and info.si_signo in STOP_SIGNALS:
            return "cancelled"
        reap(statuses)
        if polled and pid not in statuses and (over := _over_limit(me, config)):
            return over
    return None


def _kill_all(pid: int, me: int, statuses: dict[int, int]) -> None:
    """Kill the program's group and every descendant, and collect the program's status."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    kill_descendants(me, statuses=statuses)
    if pid not in statuses:  # killed above: wait for it so its status is known
        with contextlib.suppress(ChildProcessError):
            statuses[pid] = os.waitpid(pid, 0)[1]


def main(argv: list[str]) -> int:
    # First of all: no other process of this uid (the program) may read or write our /proc
    # entries - the report pipe in /proc/self/fd above all - or ptrace us.
    prctl(PR_SET_DUMPABLE, 0)
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
