"""What the sandbox tests share: a look for processes left behind, hostile programs, and
the marks of tests that need the real sandbox with its libraries."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentloop.sandbox.isolation import IsolationUnavailable, namespaces

LOCAL_STACK = Path(__file__).resolve().parents[1] / ".sandbox-stack"
"""The libraries ``make sandbox-stack`` builds (``make test`` depends on it)."""


def namespaces_missing() -> str | None:
    """Why this machine cannot isolate programs in namespaces; None when it can."""
    try:
        namespaces()
    except IsolationUnavailable as exc:
        return str(exc)
    return None


NEEDS_ISOLATED_STACK = [
    pytest.mark.skipif(
        namespaces_missing() is not None, reason="needs bubblewrap (make test installs it as root)"
    ),
    pytest.mark.skipif(
        not (LOCAL_STACK / "manifest.json").exists(), reason="needs make sandbox-stack (make test)"
    ),
]
"""Marks of a test that runs programs in namespaces with numpy, pandas and matplotlib."""

NUL = b"\0"


def processes_mentioning(marker: str) -> list[str]:
    """Live processes whose cmdline, environment or cwd contains ``marker``."""
    found = []
    needle = marker.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        base = f"/proc/{name}"
        try:
            with open(f"{base}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"{base}/environ", "rb") as f:
                environ = f.read()
            cwd = os.readlink(f"{base}/cwd")
        except OSError:
            continue  # gone, a zombie, or not ours to read
        if needle in cmdline or needle in environ or marker in cwd:
            found.append(f"{name}: {cmdline.replace(NUL, b' ').decode(errors='replace')}")
    return found


ZOMBIE_FARM = """
import ctypes, os, platform, threading, time
NR_EXIT = {"x86_64": 60, "aarch64": 93}[platform.machine()]
made = 0
for _ in range(40):
    try:
        pid = os.fork()
    except OSError as exc:
        print("fork refused:", exc.strerror, flush=True)
        break
    if pid == 0:
        threading.Thread(target=time.sleep, args=(30,)).start()
        ctypes.CDLL(None).syscall(NR_EXIT, 0)
    made += 1
    print("made", made, flush=True)
time.sleep(2)
"""
"""Forks children whose main thread exits while another runs on (zombie leaders): processes
an old count did not see, for the process limit to bind on."""
