"""A cgroup per run: one memory cap and one task cap for the program's whole tree.

Per-process rlimits let six processes use six times the memory limit; a cgroup counts them
together, and its member list is the kernel's own account of what is left of a run. It can
be had where this process may create cgroups - as root, on cgroup v1 (memory and pids
hierarchies) or v2 (a child of this process's cgroup with both controllers). Elsewhere
:func:`create` returns None and the supervisor polls the tree's memory and tasks instead.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

REMOVE_WAIT_S = 2.0


@functools.cache
def _mounts() -> dict[str, Path]:
    """Mount points by controller (``memory``, ``pids``) for v1, and ``"2"`` for cgroup2."""
    found: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, after = left.split(), right.split()
        if len(fields) < 5 or len(after) < 3:
            continue
        fstype, options = after[0], after[2].split(",")
        if fstype == "cgroup2":
            found.setdefault("2", Path(fields[4]))
        elif fstype == "cgroup":
            for controller in ("memory", "pids"):
                if controller in options:
                    found.setdefault(controller, Path(fields[4]))
    return found


@functools.cache
def _own_paths() -> dict[str, str]:
    """This process's cgroup path by controller (v1) and ``"2"`` (the unified hierarchy)."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if not controllers:
                paths["2"] = path
            for controller in controllers.split(","):
                paths[controller] = path
    return paths


@dataclass
class RunCgroup:
    """The cgroup(s) of one run: where to put the program, its OOM kills, and removal."""

    dirs: list[Path]
    memory_dir: Path
    version: int
    procs: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.procs = [str(d / "cgroup.procs") for d in self.dirs]

    def members(self) -> list[int]:
        pids: set[int] = set()
        for procs in self.procs:
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(p) for p in Path(procs).read_text().split())
        return sorted(pids)

    def oom_kills(self) -> int:
        """How many processes the kernel killed for going over the memory cap."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        with contextlib.suppress(OSError, ValueError):
            for line in (self.memory_dir / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def remove(self) -> list[int]:
        """Kill whatever is still in the cgroup, then remove it; the pids that had to die."""
        killed: set[int] = set()
        deadline = time.monotonic() + REMOVE_WAIT_S
        while True:
            left = self.members()
            if not left or time.monotonic() > deadline:
                break
            if self.version == 2:
                with contextlib.suppress(OSError):
                    (self.dirs[0] / "cgroup.kill").write_text("1")
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)  # a member of this cgroup cannot be reused
            killed.update(left)
            time.sleep(0.01)
        for directory in self.dirs:
            for _ in range(100):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)  # the last members are still being torn down
        return sorted(killed)


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


def _create_v1(mounts: dict[str, Path], own: dict[str, str], memory: int, tasks: int) -> RunCgroup:
    name = f"agentloop-run-{secrets.token_hex(6)}"
    memory_dir = mounts["memory"] / own.get("memory", "/").lstrip("/") / name
    pids_dir = mounts["pids"] / own.get("pids", "/").lstrip("/") / name
    memory_dir.mkdir()
    group = RunCgroup([memory_dir], memory_dir, 1)
    try:
        pids_dir.mkdir()
        group = RunCgroup([memory_dir, pids_dir], memory_dir, 1)
        (memory_dir / "memory.limit_in_bytes").write_text(str(memory))
        # With swap accounting, swap counts too (memsw must be set after the plain limit).
        _write(memory_dir / "memory.memsw.limit_in_bytes", str(memory))
        (pids_dir / "pids.max").write_text(str(tasks))
    except OSError:
        group.remove()
        raise
    return group


def _create_v2(mount: Path, own: str, memory: int, tasks: int) -> RunCgroup:
    parent = mount / own.lstrip("/")
    enabled = (parent / "cgroup.subtree_control").read_text().split()
    if not {"memory", "pids"} <= set(enabled):
        # Fails (EBUSY) when this cgroup holds processes itself and is not the root.
        (parent / "cgroup.subtree_control").write_text("+memory +pids")
    directory = parent / f"agentloop-run-{secrets.token_hex(6)}"
    directory.mkdir()
    group = RunCgroup([directory], directory, 2)
    try:
        (directory / "memory.max").write_text(str(memory))
        _write(directory / "memory.swap.max", "0")
        (directory / "pids.max").write_text(str(tasks))
    except OSError:
        group.remove()
        raise
    return group


_DENIED = (errno.EACCES, errno.EPERM, errno.EROFS)
_denied = False
"""Set once this process was refused a cgroup: it will be refused again, so runs stop asking."""


def create(memory_bytes: int, max_tasks: int) -> RunCgroup | None:
    """A new cgroup capping memory and tasks, or None where this process cannot make one."""
    global _denied
    if _denied:
        return None
    mounts = _mounts()
    own = _own_paths()
    try:
        if "memory" in mounts and "pids" in mounts:
            return _create_v1(mounts, own, memory_bytes, max_tasks)
        if "2" in mounts and "2" in own:
            return _create_v2(mounts["2"], own["2"], memory_bytes, max_tasks)
    except OSError as exc:
        _denied = exc.errno in _DENIED
        return None
    return None
