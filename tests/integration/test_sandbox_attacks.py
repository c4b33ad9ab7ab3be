"""Hostile programs against the local backend: each ends cleanly, clearly, and leaves nothing.

Every test runs its work dirs under a fresh root (``sandbox_root``). Afterwards the fixture
checks that the root is empty (the work dir was removed) and that no process mentions it in
its command line, environment (HOME and TMPDIR point into the work dir) or working directory
- so nothing the program started is still running.

Where the local backend does *not* protect (writes to world-writable places, the runner's
own environment), the tests pin the documented behaviour down; see docs/tools.md.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentloop.sandbox import RunOutcome, SandboxLimits, run_python, run_python_async
from agentloop.sandbox import runner as runner_module
from tests.sandbox_probes import ZOMBIE_FARM, processes_mentioning

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")

FAST = SandboxLimits(timeout_s=1.5)


@pytest.fixture
def sandbox_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="agentloop-attack-"))
    try:
        yield root
        assert processes_mentioning(str(root)) == [], "a process outlived the run"
        assert list(root.iterdir()) == [], "the work dir was not removed"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(code: str, root: Path, limits: SandboxLimits = FAST) -> RunOutcome:
    outcome = run_python(code, limits, tmp_root=root)
    json.dumps(outcome.model_dump())  # always a clean, serialisable result
    return outcome


def test_environment_and_parent_environ_hold_no_secrets(
    sandbox_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-aws-secret-4b1d")
    monkeypatch.setenv("GROQ_API_KEY", "fake-groq-key-9c2e")
    code = """
import os
print("ENV", dict(os.environ))
try:
    supervisor = int(open(f"/proc/{os.getppid()}/stat").read().rsplit(")", 1)[1].split()[1])
    print("PARENT", open(f"/proc/{supervisor}/environ", "rb").read())
except PermissionError:
    print("PARENT unreadable")
"""
    outcome = run(code, sandbox_root)

    assert outcome.exit_code == 0, outcome.stderr
    for secret in ("fake-aws-secret-4b1d", "fake-groq-key-9c2e", "AWS_", "GROQ"):
        assert secret not in outcome.stdout + outcome.stderr
    env_line = outcome.stdout.splitlines()[0]
    assert sorted(ast.literal_eval(env_line.removeprefix("ENV "))) == [
        "HOME",
        "LANG",
        "MALLOC_ARENA_MAX",
        "PATH",
        "PYTHONDONTWRITEBYTECODE",
        "TMPDIR",
    ]
    if os.geteuid() == 0:  # root reads anything; the supervisor's is the fixed list anyway
        assert "PARENT b'PATH=/usr/bin:/bin\\x00LANG=C.UTF-8" in outcome.stdout
    else:  # the supervisor is not dumpable
        assert "PARENT unreadable" in outcome.stdout


def test_limitation_code_can_read_the_runner_s_own_environment(tmp_path: Path) -> None:
    """Why the deployed chat must use the lambda backend: same uid, so /proc is open.

    The runner here is a separate process started with a secret in its environment (a
    variable set in this process with monkeypatch would not show in /proc/<pid>/environ).
    """
    code = (
        "import os\n"
        "shuttle = os.getppid()\n"
        "supervisor = int(open(f'/proc/{shuttle}/stat').read().rsplit(')', 1)[1].split()[1])\n"
        "runner = int(open(f'/proc/{supervisor}/stat').read().rsplit(')', 1)[1].split()[1])\n"
        "print(open(f'/proc/{runner}/environ', 'rb').read())\n"
    )
    script = (
        "import sys\n"
        "from agentloop.sandbox import SandboxLimits, run_python\n"
        "print(run_python(sys.argv[1], SandboxLimits(timeout_s=5)).stdout)\n"
    )
    env = {**os.environ, "GROQ_API_KEY": "runner-secret-77f1"}
    done = subprocess.run(
        [sys.executable, "-c", script, code], env=env, capture_output=True, text=True, timeout=30
    )
    assert "runner-secret-77f1" in done.stdout, done.stderr


def test_fork_bomb_is_stopped_and_swept(sandbox_root: Path) -> None:
    code = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
    started = time.monotonic()
    outcome = run(code, sandbox_root, SandboxLimits(timeout_s=1.5, max_processes=16))

    assert time.monotonic() - started < 8
    assert outcome.exit_code != 0
    # As root the supervisor counts processes and stops it; elsewhere RLIMIT_NPROC makes
    # fork fail and the time limit ends the spinning processes.
    assert outcome.timed_out or any("more than 16 processes" in n for n in outcome.notes)


def test_memory_bomb_hits_the_address_space_limit(sandbox_root: Path) -> None:
    code = """
hoard = []
while True:
    hoard.append(bytearray(10_000_000))
"""
    outcome = run(code, sandbox_root, SandboxLimits(timeout_s=5, memory_mb=128))

    assert outcome.exit_code == 1
    assert "MemoryError" in outcome.stderr
    assert not outcome.timed_out
    assert "ran out of memory: the limit is 128 MB" in " ".join(outcome.notes)


def test_infinite_loop_is_killed_at_the_time_limit(sandbox_root: Path) -> None:
    outcome = run("while True:\n    pass\n", sandbox_root)

    assert outcome.timed_out
    assert outcome.killed_by == "SIGKILL"
    assert outcome.exit_code == -9
    assert 1400 <= outcome.duration_ms < 3000
    assert outcome.notes == ["Stopped: the program ran past the 1.5 s time limit."]


def test_long_sleep_is_killed_and_earlier_output_kept(sandbox_root: Path) -> None:
    code = "import time\nprint('before the sleep')\ntime.sleep(3600)\n"
    outcome = run(code, sandbox_root)

    assert outcome.timed_out
    assert outcome.stdout == "before the sleep\n"  # unbuffered: nothing lost to the kill


def test_cpu_limit_kills_with_sigxcpu(sandbox_root: Path) -> None:
    outcome = run("while True:\n    pass\n", sandbox_root, SandboxLimits(timeout_s=5, cpu_s=1))

    assert outcome.killed_by == "SIGXCPU"
    assert not outcome.timed_out
    assert "CPU time limit of 1 s" in outcome.notes[0]


def test_hundred_megabytes_of_output_are_capped(sandbox_root: Path) -> None:
    code = """
import sys
sys.stdout.write("START")
for _ in range(100):
    sys.stdout.write("x" * 1_000_000)
sys.stdout.write("END")
sys.stderr.write("e" * 5_000_000)
"""
    outcome = run(code, sandbox_root, SandboxLimits(timeout_s=10))

    assert outcome.exit_code == 0
    assert outcome.truncated
    assert outcome.stdout.startswith("START")
    assert outcome.stdout.endswith("xEND")
    assert "bytes cut ...]" in outcome.stdout
    assert len(outcome.stdout) < FAST.max_stdout_bytes + 100
    assert len(outcome.stderr) < FAST.max_stderr_bytes + 100
    assert any("stdout was 100,000,008 bytes" in n for n in outcome.notes)


def test_invalid_utf8_output_is_replaced(sandbox_root: Path) -> None:
    code = r"""
import sys
sys.stdout.buffer.write(b"ok \xff\xfe\xc3 end\n")
sys.stderr.buffer.write(b"\x80 err\n")
"""
    outcome = run(code, sandbox_root)

    assert outcome.exit_code == 0
    assert outcome.stdout == "ok \ufffd\ufffd\ufffd end\n"
    assert outcome.stderr == "\ufffd err\n"


def test_writes_outside_the_work_dir(sandbox_root: Path) -> None:
    """Inside: removed. Big files: refused. World-writable places: *not* prevented locally."""
    outside = Path(tempfile.gettempdir()) / f"agentloop-attack-{uuid.uuid4().hex}"
    code = f"""
import os
os.makedirs("inside/deep", exist_ok=True)
open("inside/deep/data.txt", "w").write("kept only for the run")
os.chmod("inside", 0o000)  # try to make the work dir hard to remove
open("../sibling.txt", "w").write("next to the work dir")
open({str(outside)!r}, "w").write("in the shared temp dir")
try:
    open("big.bin", "wb").write(b"x" * (3 * 1024 * 1024))
except OSError as exc:
    print("big file:", exc)
"""
    try:
        outcome = run(code, sandbox_root, SandboxLimits(timeout_s=5, max_file_mb=2))

        assert outcome.exit_code == 0, outcome.stderr
        assert "big file: [Errno 27] File too large" in outcome.stdout
        # Next to the work dir is still the run's own directory: removed with it.
        assert list(sandbox_root.iterdir()) == []
        # Documented limitation: same uid, so writable places outside stay writable.
        assert outside.read_text() == "in the shared temp dir"
    finally:
        (sandbox_root / "sibling.txt").unlink(missing_ok=True)
        outside.unlink(missing_ok=True)
    # ... and the fixture checks that the work dir, "inside/" included, is gone.


def test_detached_process_does_not_outlive_the_call(sandbox_root: Path) -> None:
    marker = f"detached-{uuid.uuid4().hex}"
    code = f"""
import os, sys, time
if os.fork() == 0:
    os.setsid()  # leave the process group and the session
    if os.fork() == 0:
        os.chdir("/")
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", {marker!r}])
    os._exit(0)  # orphan the grandchild
time.sleep(0.3)
print("parent exits")
"""
    outcome = run(code, sandbox_root)

    assert outcome.exit_code == 0
    assert outcome.stdout == "parent exits\n"
    assert any("1 process(es) still running" in n for n in outcome.notes)
    assert processes_mentioning(marker) == []


def test_deep_recursion_crash_is_reported_as_sigsegv(sandbox_root: Path) -> None:
    code = """
import sys
sys.setrecursionlimit(10**6)
class Loop:
    def __repr__(self):
        return repr(self)
repr(Loop())
"""
    outcome = run(code, sandbox_root, SandboxLimits(timeout_s=10))

    if sys.version_info >= (3, 12):  # newer interpreters guard the C stack themselves
        assert outcome.killed_by == "SIGSEGV" or "RecursionError" in outcome.stderr
        return
    assert outcome.killed_by == "SIGSEGV"
    assert outcome.exit_code == -11
    assert "Fatal Python error: Segmentation fault" in outcome.stderr  # -X faulthandler
    assert "The Python interpreter crashed (SIGSEGV)" in outcome.notes[0]


def test_stopping_the_supervisor_falls_back_to_the_runner(
    sandbox_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner_module, "BACKSTOP_GRACE_S", 0.5)
    monkeypatch.setattr(runner_module, "TERMINATE_GRACE_S", 0.5)
    code = """
import os, signal, time
print("stopping my supervisor", flush=True)
os.kill(int(open(f"/proc/{os.getppid()}/stat").read().rsplit(")", 1)[1].split()[1]), signal.SIGSTOP)
time.sleep(60)
"""
    outcome = run(code, sandbox_root, SandboxLimits(timeout_s=1))

    assert outcome.timed_out
    assert outcome.stdout == "stopping my supervisor\n"


async def test_cancelling_the_call_kills_the_run(sandbox_root: Path) -> None:
    marker = f"cancelled-{uuid.uuid4().hex}"
    code = f"import time\n# {marker}\nprint('started', flush=True)\ntime.sleep(60)\n"
    task = asyncio.create_task(
        run_python_async(code, SandboxLimits(timeout_s=60), tmp_root=sandbox_root)
    )
    await asyncio.sleep(0.5)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The worker thread sees the cancel within a poll interval, sweeps and removes the dir.
    await asyncio.to_thread(wait_until_clean, sandbox_root, timeout_s=5)
    assert time.monotonic() - started < 3


def wait_until_clean(root: Path, *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while processes_mentioning(str(root)) or list(root.iterdir()):
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)


def test_zombie_leaders_do_not_get_past_the_process_limit(sandbox_root: Path) -> None:
    """Processes whose main thread exited (zombie leaders with a live thread) still count."""
    outcome = run(ZOMBIE_FARM, sandbox_root, SandboxLimits(timeout_s=8, max_processes=8))

    made = [int(line.split()[1]) for line in outcome.stdout.splitlines() if line[:4] == "made"]
    stopped = any("more than 8 processes" in n for n in outcome.notes)
    assert stopped or "fork refused" in outcome.stdout, outcome
    assert max(made, default=0) <= 8


def test_a_report_written_beside_the_supervisor_s_is_not_believed(sandbox_root: Path) -> None:
    """Even where the pipe can be reached (root), a second report makes the report unreadable."""
    code = """
import json, os
supervisor = int(open(f"/proc/{os.getppid()}/stat").read().rsplit(")", 1)[1].split()[1])
try:
    args = open(f"/proc/{supervisor}/cmdline").read().split("\\0")
    config = json.loads(next(arg for arg in args if arg.startswith("{")))
    with open(f"/proc/{supervisor}/fd/{config['report_fd']}", "w") as report:
        report.write(json.dumps({"exit_code": 0, "stopped_by": None, "leftovers": 0}))
    print("forged")
except (OSError, ValueError, StopIteration, KeyError) as exc:
    print("no forgery:", type(exc).__name__)
raise SystemExit(7)
"""
    outcome = run(code, sandbox_root)

    if outcome.stdout.startswith("forged"):  # root: the supervisor's own report follows it
        assert outcome.exit_code is None
        assert any("supervisor gave no report" in n for n in outcome.notes)
    else:  # not root: the supervisor is not dumpable
        assert outcome.stdout == "no forgery: PermissionError\n"
        assert outcome.exit_code == 7
