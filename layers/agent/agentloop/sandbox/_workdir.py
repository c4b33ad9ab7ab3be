"""The program's working directory, carried in and out of the sandbox: the "shuttle".

Run as ``python -I -S -B _workdir.py <config JSON>`` in the program's place, inside whatever
isolates it (bubblewrap's namespaces locally, the sandbox function deployed). Standard
library only: nothing of agentloop is in the sandbox's view.

1. It copies the files the runner put in ``config["inputs"]`` into its working directory,
   and makes ``output/`` there.
2. It runs the program (``config["argv"]``) as its child and waits for it.
3. It walks the working directory and writes what changed, as one JSON object, to the pipe
   ``config["out_fd"]``; then it exits as the program did (the same status, or the same
   signal), so the runner's report is the program's.

What it sends back is bounded (``max_files``, ``max_bytes``) and only regular files at safe
relative paths are read (symlinks are never followed). The program runs as the same user and
could tamper with this process: what comes back is therefore only the program's own files,
and the runner checks it all again before anything is kept.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from typing import Any

MAX_DEPTH = 3
SKIP = frozenset({"main.py"})
"""The program itself is not part of its working directory's files."""
SCAN_LIMIT = 100_000
"""Entries looked at before the walk gives up counting (a program that made millions)."""
PR_SET_DUMPABLE = 4
OUTPUT = "output"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def usable(path: str) -> bool:
    """A relative path the runner will accept: short plain segments, no dot-files."""
    parts = path.split("/")
    return 0 < len(parts) <= MAX_DEPTH and all(
        part and len(part) <= 100 and not part.startswith(".") for part in parts
    )


def place(inputs: str, into: str) -> None:
    """Copy the runner's files into the working directory (the runner named them safely)."""
    for root, _dirs, files in os.walk(inputs):
        for name in files:
            source = os.path.join(root, name)
            target = os.path.join(into, os.path.relpath(source, inputs))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(source, target)


def walk(root: str) -> tuple[list[str], int, list[str]]:
    """The regular files under ``root`` (relative paths, sorted), how many entries were seen,
    and what was passed over (links, devices, too deep, unusable names)."""
    found: list[str] = []
    skipped: list[str] = []
    seen = 0
    stack = [""]
    while stack and seen < SCAN_LIMIT:
        prefix = stack.pop()
        with contextlib.suppress(OSError), os.scandir(os.path.join(root, prefix)) as entries:
            for entry in entries:
                seen += 1
                path = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    if path.count("/") + 1 < MAX_DEPTH and not entry.name.startswith("."):
                        stack.append(path + "/")
                elif entry.is_file(follow_symlinks=False) and usable(path):
                    if path not in SKIP:
                        found.append(path)
                elif path not in SKIP:
                    skipped.append(path)
    return sorted(found), seen, sorted(skipped)[:20]


def collect(root: str, before: dict[str, str], max_files: int, max_bytes: int) -> dict[str, Any]:
    """What the runner gets back: the files present, the changed ones' bytes, or a problem."""
    paths, seen, skipped = walk(root)
    if len(paths) > max_files or seen >= SCAN_LIMIT:
        return {"problem": "too_many_files", "count": len(paths) if seen < SCAN_LIMIT else seen}
    changed: dict[str, str] = {}
    total = 0
    for path in paths:
        try:
            with open(os.path.join(root, path), "rb") as f:
                data = f.read(max_bytes + 1)
        except OSError:
            continue
        total += len(data)
        if total > max_bytes:
            return {"problem": "too_large", "path": path, "bytes": total}
        if before.get(path) != digest(data):
            changed[path] = base64.b64encode(data).decode("ascii")
    return {"present": paths, "changed": changed, "skipped": skipped}


def run(argv: list[str]) -> int:
    """The program's status as ``subprocess`` gives it (negative: killed by that signal)."""
    try:
        return subprocess.run(argv, close_fds=True, check=False).returncode
    except OSError as exc:
        os.write(2, f"sandbox: could not start the program: {exc!r}\n".encode())
        return 127


def send(fd: int, result: dict[str, Any]) -> None:
    with contextlib.suppress(OSError), os.fdopen(fd, "w") as out:
        out.write(json.dumps(result))


def exit_as(status: int) -> None:
    """End the way the program ended, so the runner reports its status, not ours."""
    if status < 0:
        sig = -status
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
            os.kill(os.getpid(), sig)
        status = 128 + sig
    sys.exit(status)


def main(config: dict[str, Any]) -> None:
    # The program (same user) may not read or write our /proc entries, the pipe above all.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    out_fd = int(config["out_fd"])
    os.set_inheritable(out_fd, False)
    cwd = os.getcwd()
    place(config["inputs"], cwd)
    os.makedirs(os.path.join(cwd, OUTPUT), exist_ok=True)  # where files for the person go
    status = run(list(config["argv"]))
    before = {str(k): str(v) for k, v in config["before"].items()}
    send(out_fd, collect(cwd, before, int(config["max_files"]), int(config["max_bytes"])))
    exit_as(status)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
