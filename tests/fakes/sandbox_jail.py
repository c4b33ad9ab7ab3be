"""Run :mod:`tests.fakes.sandbox_driver` as a deployment would: as a user that is not root.

On Lambda the sandbox function runs as an unprivileged uid; a developer runs ``make dev``
as themselves. When the tests run as root (CI), the driver is started in a jail that gives
it such a uid: bubblewrap (privileged, mount namespace only) shows the system read-only,
re-exposes the interpreter's prefix (it may live under an unreadable ``/root``), gives the
driver a private temp dir, and ``setpriv`` drops it to ``uid`` with no capabilities. Not
root, the driver simply runs as the current user.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from agentloop.sandbox.isolation import _parents, _prefixes

ROOT = Path(__file__).resolve().parents[2]
JAIL_TMP = "/jail-tmp"
LAMBDA_UID = 993  # the uid Lambda's runtimes run as (sbx_user1051)


def jail_available() -> str | None:
    """Why a jailed driver cannot be started here, or None."""
    if os.geteuid() != 0:
        return None  # the driver runs as this (unprivileged) user directly
    for tool in ("bwrap", "setpriv"):
        if shutil.which(tool) is None:
            return f"running the driver as another user needs {tool}"
    return None


def _jail_argv(uid: int) -> list[str]:
    """The system read-only, but ``/root`` and ``/tmp`` (only the project and Python)."""
    argv = ["bwrap", "--die-with-parent", "--perms", "0755", "--tmpfs", "/"]
    for name in sorted(os.listdir("/")):
        path = f"/{name}"
        if name in ("proc", "dev", "root", "tmp"):
            continue
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    # /proc as it is (an unprivileged bwrap inside must write its uid map there).
    argv += ["--bind", "/proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]
    made = {"/", "/tmp"}
    for path in [*_prefixes(), str(ROOT)]:
        if path.startswith(("/root/", "/tmp/")):
            argv += [*_parents(path, made), "--ro-bind", path, path]
    argv += ["--perms", "1777", "--tmpfs", JAIL_TMP, "--setenv", "TMPDIR", JAIL_TMP]
    argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--"]
    argv += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return [*argv, "--inh-caps=-all", "--bounding-set=-all", "--"]


class Driver:
    """One long-lived driver process; :meth:`call` sends a request and waits for the answer."""

    def __init__(self, *, uid: int = LAMBDA_UID, env: dict[str, str] | None = None) -> None:
        command = [sys.executable, "-m", "tests.fakes.sandbox_driver"]
        environ = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "AGENTLOOP_SANDBOX_HOST_CLEANUP": "1",
            **(env or {}),
        }
        self.jailed = os.geteuid() == 0
        self.own_temp: str | None = None
        if self.jailed:  # the uid is the driver's alone, as on Lambda
            command = _jail_argv(uid) + command
            environ["AGENTLOOP_SANDBOX_HOST_OWN_UID"] = "1"
        else:  # a temp dir of its own, which the handler may empty as it does /tmp on Lambda
            self.own_temp = tempfile.mkdtemp(prefix="agentloop-driver-")
            environ["TMPDIR"] = self.own_temp
        self.uid = uid if self.jailed else os.getuid()
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=environ,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr: list[str] = []
        assert self.process.stderr is not None
        stderr = self.process.stderr
        threading.Thread(target=lambda: self.stderr.extend(stderr), daemon=True).start()
        hello = self.call({"op": "whoami"})
        if hello is None:
            raise RuntimeError("the sandbox driver did not start: " + "".join(self.stderr))
        self.pid = int(hello["pid"])  # inside the jail: not the bwrap process started here

    def call(self, request: dict[str, Any], timeout_s: float = 60.0) -> dict[str, Any] | None:
        """The answer, or None when the driver exited instead (see :attr:`returncode`)."""
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            return None
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.process.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout_s)
        if reader.is_alive():
            self.close()
            raise TimeoutError(f"the driver did not answer {request['op']} in {timeout_s} s")
        if not result or not result[0]:
            self.process.wait(timeout=10)
            return None
        answer: dict[str, Any] = json.loads(result[0])
        return answer

    def invoke(self, code: str, **limits: Any) -> dict[str, Any] | None:
        return self.call({"op": "invoke", "event": {"code": code, "limits": limits}})

    def local(self, code: str, **limits: Any) -> dict[str, Any] | None:
        return self.call({"op": "local", "code": code, "limits": limits})

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        if self.own_temp:
            shutil.rmtree(self.own_temp, ignore_errors=True)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
