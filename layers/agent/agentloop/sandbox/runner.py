"""Run model-written Python in a child process tree that is limited, watched and cleaned up.

One runner serves both backends: the ``local`` backend calls it in the agent's own process,
and the sandbox Lambda function calls it for the ``lambda`` backend.

The process tree::

    runner (this process: the agent, or the sandbox function)
      └── supervisor   python -I -S -B _supervisor.py   scrubbed env, new session, subreaper,
            │                                           not dumpable
            └── code   python -I -B -u -X faulthandler main.py   own group, rlimits, nice 10,
                       no_new_privs; with ``namespaces`` isolation under bwrap (see
                       :mod:`agentloop.sandbox.isolation`), in a cgroup of its own where one
                       can be made (:mod:`agentloop.sandbox.cgroups`)

What holds, and on which backend, is in docs/tools.md ("execute_code"). In short: the
program sees a fixed environment and a fresh working directory; it is bound by rlimits, a
wall-clock limit and a cap on the memory and tasks of its whole tree (a cgroup, or polled by
the supervisor); when it ends, every descendant - judged alive by its threads, not by its
leader's state - is killed; output is read while it runs, within caps. The supervisor's
report is believed only when the supervisor exited by itself with status 0. Without
``namespaces`` the program runs as this process's uid and can read what that uid can.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentloop.config import ConfigurationError
from agentloop.files.limits import MAX_WORKSPACE_BYTES, MAX_WORKSPACE_FILES
from agentloop.sandbox import _supervisor, _workdir, cgroups, seccomp, stack
from agentloop.sandbox.files import remove_tree
from agentloop.sandbox.isolation import Isolation, fixed_env, interpreter, namespace_argv
from agentloop.sandbox.models import RunOutcome, SandboxLimits

SUPERVISOR = Path(__file__).with_name("_supervisor.py")
SHUTTLE = Path(__file__).with_name("_workdir.py")
SHUTTLE_VIEW_SCRIPT = "/run/agentloop/workdir.py"
SHUTTLE_VIEW_INPUTS = "/run/agentloop/in"
SHUTTLES = 1
"""The shuttle is one more process of the program's, beside whatever isolates it."""
WORKDIR_PREFIX = "agentloop-sandbox-"
CODE_FILE = "main.py"

# After the time limit, how long the supervisor gets to kill the tree and report before the
# runner kills it and sweeps its descendants itself.
BACKSTOP_GRACE_S = 3.0
TERMINATE_GRACE_S = 2.0
# After the supervisor has exited, how long to wait for the output pipes to close (only a
# process that escaped the sweep could keep them open).
PIPE_DRAIN_S = 0.5
READ_CHUNK = 65_536
CODE_NICE = 10


class SandboxError(Exception):
    """The sandbox could not run the code at all (as opposed to code that failed)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def scrubbed_env(workdir: str) -> dict[str, str]:
    """The code's whole environment; tempfile writes inside the work dir, removed afterwards."""
    return fixed_env(workdir, workdir)


class _Capture:
    """Bytes of one stream within a cap: the head and the tail are kept, the middle counted."""

    def __init__(self, limit: int) -> None:
        self.head_cap = limit * 2 // 3
        self.tail_cap = limit - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        if len(data) >= self.tail_cap:
            self.tail = bytearray(data[len(data) - self.tail_cap :])
        else:
            self.tail += data
            if len(self.tail) > self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    @property
    def cut(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if not self.cut:
            return head + tail
        return f"{head}\n[... {self.cut:,} of {self.total:,} bytes cut ...]\n{tail}"


def _rlimits(limits: SandboxLimits) -> dict[str, list[int]]:
    mb = 1024 * 1024
    cpu = limits.cpu_limit_s
    return {
        # SIGXCPU at the soft limit, SIGKILL one second later.
        "RLIMIT_CPU": [cpu, cpu + 1],
        "RLIMIT_AS": [limits.memory_mb * mb] * 2,
        "RLIMIT_FSIZE": [limits.max_file_mb * mb] * 2,
        "RLIMIT_NOFILE": [limits.max_open_files] * 2,
        "RLIMIT_CORE": [0, 0],
    }


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _notes(
    limits: SandboxLimits,
    report: dict[str, Any],
    stopped_by: str | None,
    exit_code: int | None,
    stderr: str,
    captures: list[_Capture],
    oom_kills: int = 0,
) -> list[str]:
    """Plain-language reasons, so the model knows which limit it hit and what to change."""
    notes: list[str] = []
    ending = _ending_note(limits, stopped_by, exit_code)
    if ending is not None:
        notes.append(ending)
    notes += _memory_and_file_notes(limits, stderr, oom_kills)
    notes += _cleanup_notes(report)
    notes += _cut_notes(captures)
    return notes


def _ending_note(
    limits: SandboxLimits, stopped_by: str | None, exit_code: int | None
) -> str | None:
    """Why the run ended, when something other than the program itself ended it."""
    if stopped_by == "timeout":
        return f"Stopped: the program ran past the {limits.timeout_s:g} s time limit."
    if stopped_by == "process_limit":
        return f"Stopped: the program started more than {limits.max_processes} processes."
    if stopped_by == "memory_limit":
        return (
            f"Stopped: the program's processes together used more than the "
            f"{limits.memory_mb} MB memory limit."
        )
    if stopped_by == "cancelled":
        return "Stopped: the run was cancelled."
    if stopped_by == "supervisor_lost":
        return (
            "The sandbox supervisor gave no report it could vouch for (the program killed it "
            "or tampered with its report?), so the exit status is unknown; its processes were "
            "killed as far as they could be found."
        )
    if exit_code is not None and exit_code < 0:
        return _signal_note(limits, _signal_name(-exit_code))
    return None


def _signal_note(limits: SandboxLimits, name: str) -> str:
    """What the signal that killed the program most likely means here."""
    if name == "SIGXCPU":
        return f"Killed: the CPU time limit of {limits.cpu_limit_s} s was reached."
    if name == "SIGSEGV":
        return (
            "The Python interpreter crashed (SIGSEGV); very deep recursion after "
            "sys.setrecursionlimit() is a common cause."
        )
    if name == "SIGKILL":
        return "Killed by SIGKILL: the hard CPU time limit, or the system ran out of memory."
    return f"Killed by {name}."


def _memory_and_file_notes(limits: SandboxLimits, stderr: str, oom_kills: int) -> list[str]:
    """The memory and file-size limits, as the cgroup's OOM count and the program's stderr show."""
    notes: list[str] = []
    if oom_kills:
        notes.append(
            f"{oom_kills} process(es) were killed because the program's processes together "
            f"used more than the {limits.memory_mb} MB memory limit."
        )
    if "MemoryError" in stderr:
        notes.append(f"The program ran out of memory: the limit is {limits.memory_mb} MB.")
    if "File too large" in stderr:
        notes.append(f"A file hit the size limit of {limits.max_file_mb} MB.")
    return notes


def _cleanup_notes(report: dict[str, Any]) -> list[str]:
    """What the supervisor's sweep found (or could not track) after the program exited."""
    notes: list[str] = []
    leftovers = int(report.get("leftovers") or 0)
    if leftovers:
        notes.append(
            f"{leftovers} process(es) still running when the program exited were killed; "
            "nothing outlives a run."
        )
    if report and not report.get("subreaper", True):
        notes.append("Detached processes could not be tracked here; some may have survived.")
    return notes


def _cut_notes(captures: list[_Capture]) -> list[str]:
    """Which of stdout and stderr were cut to their caps, so the model prints less."""
    return [
        f"{name} was {capture.total:,} bytes; only the first and last "
        f"{len(capture.head) + len(capture.tail):,} are kept."
        for name, capture in zip(("stdout", "stderr"), captures, strict=True)
        if capture.cut
    ]


def _parse_report(raw: bytes) -> dict[str, Any]:
    """The supervisor's final report; empty if it never wrote one (it was killed)."""
    try:
        value = json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Ran:
    """A run's outcome, and what its working directory held at the end: the shuttle's answer
    as it came (``_workdir.collect``; None when none came back: the program was stopped, or
    the answer was over its bound or not JSON). :mod:`agentloop.sandbox.workdir` checks it."""

    outcome: RunOutcome
    workdir: dict[str, Any] | None


def run_python(
    code: str,
    limits: SandboxLimits,
    *,
    tmp_root: str | os.PathLike[str] | None = None,
    cancel: threading.Event | None = None,
    isolation: Isolation | None = None,
) -> RunOutcome:
    """:func:`run_program` with an empty working directory; only the outcome."""
    return run_program(code, limits, tmp_root=tmp_root, cancel=cancel, isolation=isolation).outcome


def run_program(
    code: str,
    limits: SandboxLimits,
    *,
    files: Mapping[str, bytes] | None = None,
    tmp_root: str | os.PathLike[str] | None = None,
    cancel: threading.Event | None = None,
    isolation: Isolation | None = None,
) -> Ran:
    """Run ``code`` as a Python program under ``limits``; blocks until it and its tree are gone.

    ``files`` (relative paths, checked by the caller) are in its working directory when it
    starts; what the directory holds when it ends comes back in :attr:`Ran.workdir`.

    ``tmp_root`` is where the work dir is made (default: the system's temp dir); ``cancel``
    stops the run early, as cleanly as a timeout; ``isolation`` is how the program is
    isolated (None: ``unisolated``, as in the sandbox function, whose whole environment is
    the boundary).
    """
    if not sys.platform.startswith("linux"):
        raise SandboxError("the code sandbox needs Linux (/proc, prctl, pidfd)")
    if not sys.executable:
        raise SandboxError("no Python interpreter path (sys.executable) to run code with")
    try:
        isolation = isolation or Isolation("unisolated", stack=stack.from_env())
    except ConfigurationError as exc:
        raise SandboxError(str(exc)) from exc
    try:
        base = tempfile.mkdtemp(prefix=WORKDIR_PREFIX, dir=tmp_root)
    except OSError as exc:
        raise SandboxError(f"could not create a work directory: {exc}") from exc
    try:
        try:
            shuttle = _Shuttle.prepare(base, files or {})
            Path(shuttle.workdir, CODE_FILE).write_text(code, encoding="utf-8")
        except OSError as exc:  # files that cannot stand together ("a" and "a/b"), a full disk
            raise SandboxError(f"could not prepare the working directory: {exc.strerror}") from exc
        return _run_in(shuttle, limits, cancel, isolation)
    finally:
        remove_tree(base)


@dataclass(frozen=True)
class _Shuttle:
    """The run's directories on the host: ``work`` (the program's, unisolated), ``in`` (the
    files it starts with, copied into its working directory by ``_workdir.py``)."""

    workdir: str
    inputs: str
    before: dict[str, str]
    max_files: int
    max_bytes: int

    @classmethod
    def prepare(cls, base: str, files: Mapping[str, bytes]) -> _Shuttle:
        workdir, inputs = os.path.join(base, "work"), os.path.join(base, "in")
        os.mkdir(workdir, 0o700)
        os.mkdir(inputs, 0o755)
        for path, data in files.items():
            target = Path(inputs, path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(0o644)
        before = {path: _workdir.digest(data) for path, data in files.items()}
        return cls(workdir, inputs, before, MAX_WORKSPACE_FILES, MAX_WORKSPACE_BYTES)

    def argv(self, python: str, inputs: str, program: list[str], out_fd: int, at: str) -> list[str]:
        """The command that runs ``program`` through the shuttle (``at``: its script's path)."""
        config = {
            "inputs": inputs,
            "argv": program,
            "before": self.before,
            "out_fd": out_fd,
            "max_files": self.max_files,
            "max_bytes": self.max_bytes,
        }
        return [python, "-I", "-S", "-B", at, json.dumps(config)]


def _with_stack(workdir: str, isolation: Isolation) -> tuple[list[str], dict[str, str]]:
    """The interpreter's isolation flags, and the environment additions for the stack.

    With a stack, ``-I`` becomes ``-s -P``: isolated mode without ``-E``, so that PYTHONPATH
    (the stack's ``site``) is read. That lets in nothing from outside: the program's whole
    environment is the fixed one made here (or bwrap's ``--clearenv`` list), never inherited.
    Under namespaces bwrap shows the stack and sets its variables (``isolation.py``).
    """
    if isolation.stack is None:
        return ["-I"], {}
    if isolation.mode == "namespaces":
        return ["-s", "-P"], {}
    return ["-s", "-P"], isolation.stack.prepare_unisolated(workdir)


def _program(
    shuttle: _Shuttle, limits: SandboxLimits, isolation: Isolation, flags: list[str], out_fd: int
) -> tuple[list[str], bool]:
    """The code's command line (the shuttle's, which runs it), and whether it runs as a uid
    of its own."""
    python = [sys.executable, *flags, "-B", "-u", "-X", "faulthandler", CODE_FILE]
    if isolation.mode != "namespaces":
        return shuttle.argv(sys.executable, shuttle.inputs, python, out_fd, str(SHUTTLE)), False
    python[0] = interpreter()
    inside = shuttle.argv(python[0], SHUTTLE_VIEW_INPUTS, python, out_fd, SHUTTLE_VIEW_SCRIPT)
    argv, run_uid = namespace_argv(
        isolation,
        str(Path(shuttle.workdir, CODE_FILE)),
        inside,
        tmpfs_bytes=limits.memory_mb * 1024 * 1024,
        binds=[(shuttle.inputs, SHUTTLE_VIEW_INPUTS), (str(SHUTTLE), SHUTTLE_VIEW_SCRIPT)],
    )
    return argv, run_uid is not None


def _run_in(
    shuttle: _Shuttle, limits: SandboxLimits, cancel: threading.Event | None, isolation: Isolation
) -> Ran:
    memory = limits.memory_mb * 1024 * 1024
    group = cgroups.create(memory, limits.max_processes + 1 + isolation.helpers + SHUTTLES)
    try:
        return _supervised(shuttle, limits, cancel, isolation, group)
    finally:
        if group is not None:
            group.remove()


@dataclass
class _Output:
    """Where the supervisor's three pipes go: the program's stdout and stderr, and the report."""

    out: _Capture
    err: _Capture
    report: bytearray = field(default_factory=bytearray)
    workdir: bytearray = field(default_factory=bytearray)
    """The shuttle's answer: bounded (``_read_ready`` stops at ``workdir_cap``)."""
    workdir_cap: int = 0


def _supervised(
    shuttle: _Shuttle,
    limits: SandboxLimits,
    cancel: threading.Event | None,
    isolation: Isolation,
    group: cgroups.RunCgroup | None,
) -> Ran:
    """Start the supervisor, read its pipes until the run is over, and judge its report."""
    flags, stack_env = _with_stack(shuttle.workdir, isolation)
    report_r, report_w = os.pipe()
    workdir_r, workdir_w = os.pipe()
    argv, own_uid = _program(shuttle, limits, isolation, flags, workdir_w)
    config = _supervisor_config(argv, own_uid, limits, isolation, group, report_w)
    started = time.monotonic()
    pipes = (report_r, report_w, workdir_r, workdir_w)
    proc = _start_supervisor(shuttle.workdir, config, pipes, stack_env)
    output = _Output(_Capture(limits.max_stdout_bytes), _Capture(limits.max_stderr_bytes))
    output.workdir_cap = shuttle.max_bytes * 4 // 3 + 64 * 1024
    runner_stop = _read_to_end(proc, (report_r, workdir_r), output, limits, started, cancel)
    # Believed only from a supervisor that ended by itself with status 0: a program that
    # wrote a report of its own and then killed the supervisor gets "supervisor_lost".
    report = _parse_report(bytes(output.report)) if proc.returncode == 0 else {}
    outcome = _outcome(report, runner_stop, output, limits, isolation, group, started)
    return Ran(outcome, _parse_workdir(output) if runner_stop is None else None)


def _parse_workdir(output: _Output) -> dict[str, Any] | None:
    """The shuttle's answer, if one came whole; unchecked (the caller checks every part)."""
    if not output.workdir or len(output.workdir) > output.workdir_cap:
        return None
    return _parse_report(bytes(output.workdir)) or None


def _supervisor_config(
    argv: list[str],
    own_uid: bool,
    limits: SandboxLimits,
    isolation: Isolation,
    group: cgroups.RunCgroup | None,
    report_w: int,
) -> dict[str, Any]:
    """Everything the supervisor is told, as one JSON argument (it imports no agentloop)."""
    return {
        "argv": argv,
        "timeout_s": limits.timeout_s,
        "rlimits": _rlimits(limits),
        "max_processes": limits.max_processes,
        "helpers": isolation.helpers,
        "shuttles": SHUTTLES,
        "nproc_own_uid": own_uid,
        "cgroup_procs": group.procs if group else [],
        # Without a cgroup, the supervisor counts tasks and memory of the tree itself.
        "poll_tasks": group is None,
        "poll_memory_bytes": None if group else limits.memory_mb * 1024 * 1024,
        "seccomp": (seccomp.program() or b"").hex(),
        "nice": CODE_NICE,
        "report_fd": report_w,
        "parent_pid": os.getpid(),
    }


def _start_supervisor(
    workdir: str,
    config: dict[str, Any],
    pipes: tuple[int, int, int, int],
    extra: dict[str, str],
) -> subprocess.Popen[bytes]:
    """Start the supervisor in a session of its own; afterwards only it holds the write ends
    of the report pipe and of the shuttle's pipe (which it passes on to the program)."""
    report_r, report_w, workdir_r, workdir_w = pipes
    try:
        # The supervisor needs no site-packages and must not write bytecode anywhere.
        return subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", str(SUPERVISOR), json.dumps(config)],
            cwd=workdir,
            env=scrubbed_env(workdir) | extra,  # the program inherits it
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(report_w, workdir_w),
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        os.close(report_r)
        os.close(workdir_r)
        raise SandboxError(f"could not start the sandbox: {exc}") from exc
    finally:
        os.close(report_w)
        os.close(workdir_w)


def _read_to_end(
    proc: subprocess.Popen[bytes],
    reads: tuple[int, int],
    output: _Output,
    limits: SandboxLimits,
    started: float,
    cancel: threading.Event | None,
) -> str | None:
    """:func:`_pump` the pipes, then - whatever happened - kill what is left and reap.

    Returns why the runner itself stopped the run, if it did.
    """
    assert proc.stdout is not None
    assert proc.stderr is not None
    try:
        return _pump(proc, reads, output, limits, started, cancel)
    finally:
        # Normally a no-op (one scan of /proc); after a supervisor that was killed or stuck,
        # or one whose sweep missed something, it kills what is left from outside.
        _hard_stop(proc)
        proc.wait()  # only now is the supervisor reaped, and its pid free for reuse
        for fd in reads:
            os.close(fd)
        proc.stdout.close()
        proc.stderr.close()


def _outcome(
    report: dict[str, Any],
    runner_stop: str | None,
    output: _Output,
    limits: SandboxLimits,
    isolation: Isolation,
    group: cgroups.RunCgroup | None,
    started: float,
) -> RunOutcome:
    """The run's outcome from a report already judged; without one, the exit is unknown."""
    finished = "exit_code" in report
    stopped_by = runner_stop or (report.get("stopped_by") if finished else "supervisor_lost")
    exit_code: int | None = report.get("exit_code") if finished else None
    out, err = output.out, output.err
    stderr = err.text()
    _raise_if_not_started(finished, exit_code, stderr, isolation)
    run_s = report.get("run_s")
    duration = float(run_s) if isinstance(run_s, int | float) else time.monotonic() - started
    oom_kills = group.oom_kills() if group else 0
    return RunOutcome(
        exit_code=exit_code,
        stdout=out.text(),
        stderr=stderr,
        truncated=bool(out.cut or err.cut),
        duration_ms=round(duration * 1000),
        timed_out=stopped_by == "timeout",
        killed_by=_signal_name(-exit_code) if exit_code is not None and exit_code < 0 else None,
        notes=_notes(limits, report, stopped_by, exit_code, stderr, [out, err], oom_kills),
    )


def _raise_if_not_started(
    finished: bool, exit_code: int | None, stderr: str, isolation: Isolation
) -> None:
    """A program that never started is the sandbox's failure, not an outcome."""
    if not finished:
        return
    if exit_code == 127 and "sandbox: could not start the program" in stderr:
        raise SandboxError(stderr.strip())
    if isolation.mode == "namespaces" and exit_code == 1 and stderr.startswith("bwrap: "):
        raise SandboxError(f"the namespace sandbox could not start: {stderr.strip()}")


def _pump(
    proc: subprocess.Popen[bytes],
    reads: tuple[int, int],
    output: _Output,
    limits: SandboxLimits,
    started: float,
    cancel: threading.Event | None,
) -> str | None:
    """Read output, report and the shuttle's answer until all four pipes close; stop the run
    if it must be stopped.

    Returns why the runner itself stopped the run (``timeout`` or ``cancelled``), if it did.
    """
    assert proc.stdout is not None
    assert proc.stderr is not None
    report_r, workdir_r = reads
    sinks: dict[int, _Capture | bytearray] = {
        proc.stdout.fileno(): output.out,
        proc.stderr.fileno(): output.err,
        report_r: output.report,
        workdir_r: output.workdir,
    }
    watch = _Watch(proc, started + limits.timeout_s + BACKSTOP_GRACE_S, cancel)
    with selectors.DefaultSelector() as selector:
        for fd in sinks:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            if watch.done_waiting(time.monotonic()):
                break  # the caller sweeps from outside
            _read_ready(selector, sinks, output.workdir_cap)
    return watch.stop_reason


class _Watch:
    """The runner's check on each pass: stop what the supervisor did not, give up on the pipes.

    It is the backstop for a supervisor that was stopped or killed, and for a process that
    escaped the sweep and holds the pipes open.
    """

    def __init__(
        self, proc: subprocess.Popen[bytes], backstop: float, cancel: threading.Event | None
    ) -> None:
        self.proc = proc
        self.backstop = backstop
        self.cancel = cancel
        self.stop_reason: str | None = None
        self.terminated_at: float | None = None
        self.exited_at: float | None = None

    def done_waiting(self, now: float) -> bool:
        """Stop the run if it must stop; True once reading on is pointless."""
        if self.stop_reason is None:
            self.stop_reason = self._reason_to_stop(now)
        if self.stop_reason is not None and self.terminated_at is None:
            self.terminated_at = now
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)  # the supervisor sweeps and reports
                self.proc.send_signal(signal.SIGCONT)  # in case the program stopped it
        if self.terminated_at is not None and now > self.terminated_at + TERMINATE_GRACE_S:
            return True  # the supervisor did not finish after SIGTERM
        if self.exited_at is None and _has_exited(self.proc):
            self.exited_at = now
        # The supervisor is gone; whoever still holds the pipes escaped it.
        return self.exited_at is not None and now > self.exited_at + PIPE_DRAIN_S

    def _reason_to_stop(self, now: float) -> str | None:
        if self.cancel is not None and self.cancel.is_set():
            return "cancelled"
        if now > self.backstop:
            return "timeout"  # the supervisor did not enforce it (stopped?)
        return None


def _read_ready(
    selector: selectors.BaseSelector, sinks: dict[int, _Capture | bytearray], cap: int
) -> None:
    """One short wait for the pipes; what is ready goes to its sink, a closed pipe is dropped."""
    for key, _ in selector.select(timeout=0.05):
        fd = int(key.fd)
        try:
            data = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            continue
        if not data:
            selector.unregister(fd)
            continue
        sink = sinks[fd]
        if isinstance(sink, _Capture):
            sink.feed(data)
        elif len(sink) <= cap:  # past the cap it is read and dropped: the answer is void
            sink += data


def _has_exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the supervisor has exited, *without* reaping it (``Popen.poll`` would).

    Unreaped, its pid - which is also the session id of everything it started - cannot be
    reused, so the sweeps in :func:`_hard_stop` can never hit an unrelated process.
    """
    try:
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        return os.waitid(os.P_PID, proc.pid, flags) is not None
    except ChildProcessError:
        return True


def _hard_stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill the supervisor's tree from outside: its descendants, it, and its whole session.

    The session catches the program's processes that the supervisor no longer parents (it
    was killed): only those that called ``setsid`` themselves escape.
    """
    if not _has_exited(proc):
        _supervisor.kill_descendants(proc.pid, timeout_s=2.0)
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
    _supervisor.kill_session(proc.pid)


async def run_python_async(
    code: str,
    limits: SandboxLimits,
    *,
    tmp_root: str | os.PathLike[str] | None = None,
    isolation: Isolation | None = None,
) -> RunOutcome:
    """:func:`run_python` off the event loop; cancelling the task stops the run."""
    ran = await run_program_async(code, limits, tmp_root=tmp_root, isolation=isolation)
    return ran.outcome


async def run_program_async(
    code: str,
    limits: SandboxLimits,
    *,
    files: Mapping[str, bytes] | None = None,
    tmp_root: str | os.PathLike[str] | None = None,
    isolation: Isolation | None = None,
) -> Ran:
    """:func:`run_program` off the event loop; cancelling the task stops the run."""
    cancel = threading.Event()
    try:
        return await asyncio.to_thread(
            run_program,
            code,
            limits,
            files=files,
            tmp_root=tmp_root,
            cancel=cancel,
            isolation=isolation,
        )
    except asyncio.CancelledError:
        cancel.set()  # the thread kills the tree within a poll interval and cleans up
        raise
