"""Where the local backend's program runs: in namespaces of its own, or - by choice - not.

``namespaces`` runs the program under bubblewrap (Debian's ``bubblewrap``, ``/usr/bin/bwrap``)
with its own PID, network, IPC, UTS and cgroup namespaces and a mount namespace that holds
only a read-only view of the system (``/usr``, the interpreter's prefix, a few ``/etc``
files), a private ``/proc``, a minimal ``/dev`` and size-capped tmpfs for ``/tmp``,
``/dev/shm`` and the working directory ``/sandbox``. Nothing of the agent - its processes,
its home, the project - is in that view, and there is no network but the namespace's own
loopback. When bwrap's
namespace init dies, the kernel kills everything in the PID namespace.

* As root, bwrap runs privileged (no user namespace) and ``setpriv`` drops the program to a
  uid of its own for the run, with no capabilities and ``no_new_privs``: ``RLIMIT_NPROC``
  then binds, and the program owns nothing outside its tmpfs.
* Otherwise bwrap makes an unprivileged user namespace (nested ones disabled); the program
  keeps the caller's uid, which owns nothing in the view.

``unisolated`` is the plain runner in the agent's own view of the system: the operator must
name it (``AGENTLOOP_SANDBOX_ISOLATION=unisolated``), and the start-up log and ``/healthz``
say so. ``auto`` (the default) is ``namespaces`` where bwrap works and otherwise leaves
``execute_code`` out of the local server.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from agentloop.config import ConfigurationError
from agentloop.sandbox import seccomp
from agentloop.sandbox._supervisor import SECCOMP_FD
from agentloop.sandbox.stack import VIEW_DIR, Stack

IsolationSetting = Literal["auto", "namespaces", "unisolated"]
IsolationMode = Literal["namespaces", "unisolated"]

SANDBOX_DIR = "/sandbox"
# What Python and ordinary programs need from /etc; nothing that names users or secrets.
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf")
TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# Per-run uids for the program when the host runs as root: far above any real account or
# the usual subuid ranges, and different for each run so that RLIMIT_NPROC is per run.
RUN_UID_BASE = 1_500_000_000
RUN_UID_SPAN = 500_000_000
# bwrap itself and its namespace init are in the tree besides the program.
HELPER_PROCESSES = 2
PROBE_TIMEOUT_S = 10.0


class IsolationUnavailable(Exception):
    """The requested isolation cannot be had on this machine; the message says why."""


@dataclass(frozen=True)
class Isolation:
    """How the local backend runs a program; ``bwrap`` is set in ``namespaces`` mode.

    ``stack`` is the libraries the program gets besides the standard library (read-only).
    """

    mode: IsolationMode
    bwrap: str | None = None
    setpriv: str | None = None
    stack: Stack | None = None

    @property
    def helpers(self) -> int:
        return HELPER_PROCESSES if self.mode == "namespaces" else 0

    def describe(self) -> str:
        if self.mode == "namespaces":
            who = "a uid of its own" if self.setpriv else "a user namespace"
            return f"namespaces (bubblewrap: no network, own PID and mount namespaces, {who})"
        return "unisolated (the program can read what the agent's user can, and use the network)"


def interpreter() -> str:
    """The real interpreter behind ``sys.executable`` (a venv's python is a symlink)."""
    return os.path.realpath(sys.executable)


def _prefixes() -> list[str]:
    """Directories the interpreter needs that ``/usr`` may not hold (pyenv, /opt builds)."""
    found: list[str] = []
    for path in (sys.base_prefix, sys.base_exec_prefix, os.path.dirname(interpreter())):
        real = os.path.realpath(path)
        if real in ("/", "/usr") or real.startswith("/usr/"):
            continue
        if not any(real == p or real.startswith(p + "/") for p in found):
            found.append(real)
    return found


def _parents(path: str, made: set[str]) -> list[str]:
    """``--dir`` options for the parents of ``path`` that are not made yet, traversable."""
    args: list[str] = []
    for parent in reversed(PurePosixPath(path).parents[:-1] if path != "/" else ()):
        name = str(parent)
        if name not in made:
            made.add(name)
            args += ["--perms", "0755", "--dir", name]
    return args


def _system_view(extra: Iterable[str]) -> list[str]:
    """Read-only binds of the system the interpreter runs on, and nothing else."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in TOP_LEVEL:
        path = f"/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for name in ETC_FILES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    made: set[str] = set()
    for path in extra:
        args += _parents(path, made)
        args += ["--ro-bind", path, path]
    return args


def fixed_env(home: str, tmp: str) -> dict[str, str]:
    """A program's whole environment: fixed values only, nothing inherited to find."""
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": home,
        "TMPDIR": tmp,
        "PYTHONDONTWRITEBYTECODE": "1",
        # glibc reserves 64 MB of address space per thread arena: with RLIMIT_AS that would
        # leave room for a handful of threads. Two arenas keep the limit about real memory.
        "MALLOC_ARENA_MAX": "2",
    }


def code_env(stack: Stack | None = None) -> dict[str, str]:
    """The program's environment inside the namespaces (with the stack's additions)."""
    env = fixed_env(SANDBOX_DIR, "/tmp")
    return env | stack.env(VIEW_DIR, "/tmp") if stack else env


def namespace_argv(
    isolation: Isolation,
    code_file: str,
    program: list[str],
    *,
    tmpfs_bytes: int,
    binds: Iterable[tuple[str, str]] = (),
) -> tuple[list[str], int | None]:
    """The command that runs ``program`` (argv inside) under bwrap; and the run's own uid.

    ``code_file`` (on the host) appears read-only as ``/sandbox/main.py``, and each of
    ``binds`` (host path, path inside) read-only where it says.
    """
    assert isolation.bwrap is not None
    args = [isolation.bwrap, "--die-with-parent", "--new-session"]
    if isolation.setpriv:  # root: namespaces without a user namespace, then a uid of its own
        args += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
        args += ["--unshare-cgroup-try", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args += ["--unshare-all", "--unshare-user", "--disable-userns"]
    args += _system_view(_prefixes())
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += _run_dirs(code_file, tmpfs_bytes, binds, isolation.stack)
    args += ["--remount-ro", "/"]  # the new root is a tmpfs too: not a place to write
    if seccomp.program() is not None:
        args += ["--seccomp", SECCOMP_FD]  # the supervisor puts the filter in a pipe there
    args += ["--clearenv"]
    for name, value in code_env(isolation.stack).items():
        args += ["--setenv", name, value]
    run_uid: int | None = None
    args.append("--")
    if isolation.setpriv:
        run_uid = RUN_UID_BASE + secrets.randbelow(RUN_UID_SPAN)
        args += [
            isolation.setpriv,
            f"--reuid={run_uid}",
            f"--regid={run_uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        ]
    return args + program, run_uid


def _run_dirs(
    code_file: str, tmpfs_bytes: int, binds: Iterable[tuple[str, str]], stack: Stack | None
) -> list[str]:
    """The run's own places: size-capped tmpfs (``/tmp``, ``/dev/shm``, the working directory
    with the program in it), and the read-only binds (the shuttle's, the stack)."""
    size = str(tmpfs_bytes)
    args = ["--perms", "1777", "--size", size, "--tmpfs", "/tmp"]
    args += ["--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"]  # multiprocessing
    args += ["--perms", "1777", "--size", size, "--tmpfs", SANDBOX_DIR]
    args += ["--ro-bind", code_file, f"{SANDBOX_DIR}/main.py", "--chdir", SANDBOX_DIR]
    made: set[str] = set()
    for source, target in binds:
        args += _parents(target, made)
        args += ["--ro-bind", source, target]
    if stack is not None:
        args += _parents(VIEW_DIR, set())
        args += stack.namespace_args()
    return args


def _probe(isolation: Isolation) -> str | None:
    """Run ``python -c pass`` the way programs will run; why it failed, or None."""
    import tempfile

    read, write = os.pipe()
    os.write(write, seccomp.program() or b"")
    os.close(write)
    with tempfile.NamedTemporaryFile("w", suffix=".py") as code:
        argv, _ = namespace_argv(
            isolation, code.name, [interpreter(), "-I", "-S", "-c", "pass"], tmpfs_bytes=1 << 20
        )
        argv = [str(read) if arg == SECCOMP_FD else arg for arg in argv]
        try:
            done = subprocess.run(
                argv,
                capture_output=True,
                timeout=PROBE_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
                pass_fds=(read,),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return f"bwrap could not run: {exc}"
        finally:
            os.close(read)
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bwrap failed: {detail[-1] if detail else f'exit status {done.returncode}'}"
    return None


@functools.cache
def namespaces() -> Isolation:
    """The namespace isolation of this machine, checked once; IsolationUnavailable if none."""
    if not sys.platform.startswith("linux"):
        raise IsolationUnavailable("namespaces need Linux")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise IsolationUnavailable(
            "bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
        )
    setpriv: str | None = None
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv", path="/usr/bin:/bin")
        if setpriv is None:
            raise IsolationUnavailable("running as root needs setpriv (util-linux) as well")
    isolation = Isolation("namespaces", bwrap=bwrap, setpriv=setpriv)
    problem = _probe(isolation)
    if problem:
        raise IsolationUnavailable(problem)
    return isolation


def resolve(setting: IsolationSetting, stack: Stack | None = None) -> Isolation:
    """The isolation for ``setting``, giving programs ``stack``.

    Raises IsolationUnavailable for ``auto`` where namespaces cannot be had (execute_code is
    then left out) and ConfigurationError for ``namespaces`` (the server does not start).
    """
    if setting == "unisolated":
        return Isolation("unisolated", stack=stack)
    try:
        return dataclasses.replace(namespaces(), stack=stack)
    except IsolationUnavailable as exc:
        if setting == "namespaces":
            raise ConfigurationError(
                f"AGENTLOOP_SANDBOX_ISOLATION=namespaces, but this machine has none: {exc}"
            ) from exc
        raise IsolationUnavailable(
            f"execute_code needs isolation on this machine and has none: {exc}. Install "
            "bubblewrap, or set AGENTLOOP_SANDBOX_ISOLATION=unisolated to run model-written "
            "code with this server's user, files and network (never on a shared machine)"
        ) from exc
