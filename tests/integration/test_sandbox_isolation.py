"""Hostile programs against each way code is run, as an attacker who knows the design would.

Three setups, each serving several runs in one long-lived process:

* ``deployed``: the sandbox function's handler (``functions/sandbox``) with its host clean-up,
  as a non-root uid of its own (Lambda's runtimes run as one), in :mod:`tests.fakes.sandbox_jail`;
* ``local-root``: the local backend with namespace isolation in this test process (root on
  CI: bwrap privileged, the program under a uid of its own);
* ``local-user``: the same backend in a driver that is not root (bwrap in a user namespace).

Every case ends with a clear outcome, and afterwards nothing of the run is left: no process
of the driver's uid but the driver, no process that mentions the case's marker, no cgroup.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloop.sandbox import SandboxLimits, run_python
from agentloop.sandbox.isolation import _prefixes, namespaces
from agentloop.sandbox.service import DISCARD_EXIT_STATUS, _uid_processes
from tests.fakes.sandbox_jail import Driver, jail_available
from tests.sandbox_probes import ZOMBIE_FARM, namespaces_missing, processes_mentioning

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")

SECRET = "fake-provider-key-5e1f9c"
IS_ROOT = os.geteuid() == 0


needs_namespaces = pytest.mark.skipif(
    namespaces_missing() is not None, reason=f"no namespace isolation: {namespaces_missing()}"
)
needs_jail = pytest.mark.skipif(jail_available() is not None, reason=str(jail_available()))

Run = Callable[..., dict[str, Any]]


def uid_processes(uid: int) -> list[int]:
    """Live processes of real uid ``uid``, as the sandbox handler's own check sees them."""
    return sorted(pid for pid, _ in _uid_processes(uid))


def run_cgroups() -> list[str]:
    """The run cgroups that exist now, where the runner makes them."""
    from agentloop.sandbox.cgroups import _mounts, _own_paths

    own = _own_paths()
    found = []
    for key, mount in _mounts().items():
        parent = mount / own.get(key, "/").lstrip("/")
        found += [str(p) for p in parent.glob("agentloop-run-*")]
    return found


@pytest.fixture(scope="module")
def deployed_driver() -> Iterator[Driver]:
    driver = Driver(env={"AWS_SECRET_ACCESS_KEY": SECRET, "GROQ_API_KEY": SECRET})
    yield driver
    driver.close()


@pytest.fixture(scope="module")
def user_driver() -> Iterator[Driver]:
    driver = Driver(uid=65533, env={"GROQ_API_KEY": SECRET})
    yield driver
    driver.close()


def _check_driver_clean(driver: Driver) -> None:
    assert driver.returncode is None, "".join(driver.stderr)
    state = driver.call({"op": "whoami"})
    assert state is not None
    assert state["temp"] == [], "a run left files in the driver's temp dir"
    if driver.jailed:  # the uid is the driver's alone: nothing else may run under it
        assert uid_processes(driver.uid) == [driver.pid]


def _deployed(driver: Driver) -> Run:
    def run(code: str, **limits: Any) -> dict[str, Any]:
        answer = driver.invoke(code, **limits)
        assert answer is not None, "".join(driver.stderr)
        assert answer["ok"], answer
        outcome: dict[str, Any] = answer["outcome"]
        _check_driver_clean(driver)
        return outcome

    return run


def _local_user(driver: Driver) -> Run:
    def run(code: str, **limits: Any) -> dict[str, Any]:
        outcome = driver.local(code, **limits)
        assert outcome is not None, "".join(driver.stderr)
        _check_driver_clean(driver)
        return outcome

    return run


def _local_root(code: str, **limits: Any) -> dict[str, Any]:
    before = set(run_cgroups())
    outcome = run_python(code, SandboxLimits(**limits), isolation=namespaces()).model_dump()
    json.dumps(outcome)
    # The run's cgroup is gone (others may come and go meanwhile: another test run's).
    deadline = time.monotonic() + 5
    while set(run_cgroups()) - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert set(run_cgroups()) - before == set()
    return outcome


@pytest.fixture(params=["deployed", "local-root", "local-user"])
def setup(request: pytest.FixtureRequest) -> Iterator[tuple[str, Run]]:
    name = str(request.param)
    if name == "deployed":
        if jail_available():
            pytest.skip(str(jail_available()))
        yield name, _deployed(request.getfixturevalue("deployed_driver"))
    elif name == "local-root":
        if not IS_ROOT:
            pytest.skip("the local backend as root needs the tests to run as root")
        if namespaces_missing():
            pytest.skip(f"no namespace isolation: {namespaces_missing()}")
        yield name, _local_root
    else:
        if namespaces_missing():
            pytest.skip(f"no namespace isolation: {namespaces_missing()}")
        yield name, _local_user(request.getfixturevalue("user_driver"))


# ---- a process that outlives its run -----------------------------------------------------------

SURVIVOR = """
import ctypes, glob, os, platform, threading, time
NR_EXIT = {"x86_64": 60, "aarch64": 93}[platform.machine()]
spool = os.path.dirname(os.getcwd())  # where the next runs' work dirs are made
if os.fork() == 0:
    os.setsid()
    def spy():
        while True:
            for path in glob.glob(spool + "/*/main.py") + glob.glob("/tmp/*/main.py"):
                try:
                    text = open(path).read()
                    open(spool + "/loot.txt", "a").write(text)
                except OSError:
                    pass
            time.sleep(0.02)
    threading.Thread(target=spy).start()
    ctypes.CDLL(None).syscall(NR_EXIT, 0)  # only the main thread ends: a zombie that runs
time.sleep(0.3)
print("attacker done", flush=True)
"""

OBSERVER = """
import glob, os
spool = os.path.dirname(os.getcwd())
for path in glob.glob(spool + "/loot.txt") + glob.glob("/tmp/loot.txt"):
    print("LOOT", open(path).read())
print("observer done")
"""


def test_a_thread_of_a_zombie_does_not_outlive_the_run(setup: tuple[str, Run]) -> None:
    name, run = setup
    marker = f"victim-{uuid.uuid4().hex}"

    first = run(SURVIVOR, timeout_s=5)
    second = run(f"print({marker!r}[:6])\n", timeout_s=5)
    third = run(OBSERVER, timeout_s=5)

    assert first["stdout"] == "attacker done\n"
    if name == "deployed":  # the handler's sweep found the thread group and killed it
        assert any("still running when the program exited" in n for n in first["notes"])
    assert second["stdout"] == "victim\n"
    assert third["stdout"] == "observer done\n", third
    assert marker not in json.dumps(third)
    assert processes_mentioning(marker) == []


# ---- the process limit, with processes the old count did not see ----------------------------


def test_the_process_limit_binds_for_zombie_leaders(setup: tuple[str, Run]) -> None:
    _, run = setup
    outcome = run(ZOMBIE_FARM, timeout_s=8, max_processes=8)

    made = [int(line.split()[1]) for line in outcome["stdout"].splitlines() if line[:4] == "made"]
    stopped = any("more than 8 processes" in n for n in outcome["notes"])
    # Each child is two tasks (a zombie leader and its thread): at most 8 tasks may be added.
    assert stopped or "fork refused" in outcome["stdout"], outcome
    assert max(made, default=0) <= 8


# ---- the supervisor, the runner and the agent are out of reach -----------------------------

REACH = """
import ctypes, json, os
report = {"ancestors": [], "secret_seen": False}
pid = os.getpid()
while pid > 1:
    pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    report["ancestors"].append(pid)
for pid in report["ancestors"] + [1]:
    for entry in ("environ", "mem", "fd"):
        path = f"/proc/{pid}/{entry}"
        try:
            if entry == "fd":
                data = " ".join(os.listdir(path)).encode()
            else:
                with open(path, "rb") as f:
                    if entry == "mem":
                        f.seek(0x400000)
                    data = f.read(1 << 20)
            report[path] = "read"
            report["secret_seen"] |= b"fake-provider-key" in data
        except OSError as exc:
            report[path] = type(exc).__name__
libc = ctypes.CDLL(None, use_errno=True)
report["ptrace"] = [libc.ptrace(16, pid, 0, 0) for pid in report["ancestors"]]  # ATTACH
for path in ("/root/.aws/credentials", os.path.expanduser("~/.aws/credentials")):
    try:
        report[path] = open(path).read()
    except OSError as exc:
        report[path] = type(exc).__name__
print(json.dumps(report))
"""


def test_code_cannot_read_or_trace_its_ancestors(setup: tuple[str, Run]) -> None:
    name, run = setup
    outcome = run(REACH, timeout_s=10)

    assert outcome["exit_code"] == 0, outcome["stderr"]
    assert SECRET not in outcome["stdout"]
    report = json.loads(outcome["stdout"])
    assert report["secret_seen"] is False
    assert all(result == -1 for result in report["ptrace"]), report["ptrace"]  # seccomp
    if name == "deployed":  # the shuttle, the supervisor and the handler are not dumpable
        for pid in report["ancestors"][:3]:
            for entry in ("environ", "mem", "fd"):
                assert report[f"/proc/{pid}/{entry}"] == "PermissionError", (pid, entry, report)
    else:  # namespaces: the shuttle and bwrap's init, with the fixed environment
        assert report["ancestors"][-1] == 1
        assert len(report["ancestors"]) == 2


FORGE = """
import json, os, signal, time
supervisor = int(open(f"/proc/{os.getppid()}/stat").read().rsplit(")", 1)[1].split()[1])
try:
    args = open(f"/proc/{supervisor}/cmdline").read().split("\\0")
    config = json.loads(next(arg for arg in args if arg.startswith("{")))
    fd = config["report_fd"]
    with open(f"/proc/{supervisor}/fd/{fd}", "w") as report:
        report.write(json.dumps({"exit_code": 0, "stopped_by": None, "leftovers": 0}))
    print("forged", flush=True)
except (OSError, ValueError, StopIteration, KeyError) as exc:
    print("no forgery:", type(exc).__name__, flush=True)
os.kill(supervisor, signal.SIGKILL)
time.sleep(1)
raise SystemExit(7)
"""


def test_a_forged_report_is_not_believed(setup: tuple[str, Run]) -> None:
    name, run = setup
    outcome = run(FORGE, timeout_s=5)

    if name == "deployed":  # the supervisor is the parent here: not dumpable, then killed
        assert outcome["stdout"] == "no forgery: PermissionError\n", outcome
        assert outcome["exit_code"] is None
        assert any("supervisor gave no report" in n for n in outcome["notes"])
    else:  # in namespaces the shuttle's parent is bwrap's init, whose command line holds
        # only the shuttle's config (no report pipe); its death ends it all
        assert outcome["stdout"] == "no forgery: KeyError\n", outcome
        assert outcome["exit_code"] != 0


# ---- memory of the whole tree ------------------------------------------------------------------

SIX_CHILDREN = """
import os, time
for _ in range(6):
    if os.fork() == 0:
        block = b"x" * 100_000_000  # touched: resident, not just reserved
        time.sleep(3)
        os._exit(0)
time.sleep(3)
print("parent survived")
"""


def test_memory_is_capped_for_the_whole_tree(setup: tuple[str, Run]) -> None:
    _, run = setup
    outcome = run(SIX_CHILDREN, timeout_s=6, memory_mb=256)

    assert any("together used more than the 256 MB memory limit" in n for n in outcome["notes"]), (
        outcome
    )


# ---- local isolation: no network, no view of the agent's machine ----------------------------


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    yield server.getsockname()[1]
    server.close()


@needs_namespaces
def test_local_code_has_no_network(listener: int) -> None:
    code = textwrap.dedent(f"""
        import socket
        for host in ("127.0.0.1", "10.0.0.1", "169.254.169.254"):
            try:
                socket.create_connection((host, {listener}), timeout=1).close()
                print(host, "reached")
            except OSError as exc:
                print(host, type(exc).__name__)
    """)
    outcome = run_python(code, SandboxLimits(timeout_s=10), isolation=namespaces())

    assert outcome.exit_code == 0, outcome.stderr
    assert "reached" not in outcome.stdout
    assert outcome.stdout.startswith("127.0.0.1 ConnectionRefusedError")  # its own loopback


@needs_namespaces
def test_local_code_sees_a_read_only_system_and_nothing_of_the_agent(tmp_path: Path) -> None:
    project = Path(__file__).resolve().parents[2]
    code = textwrap.dedent(f"""
        import os
        print("procs", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
        for path in ({str(project)!r}, {str(tmp_path)!r}, "/work", "/home"):
            print(path, os.path.exists(path))
        home = {str(Path.home())!r}
        print("home", sorted(os.listdir(home)) if os.path.isdir(home) else [])
        for path in ("/usr/evil", "/etc/evil", "/evil"):
            try:
                open(path, "w")
                print(path, "written")
            except OSError as exc:
                print(path, type(exc).__name__)
        open("/tmp/scratch", "w").write("x")
        open("scratch", "w").write("x")
        print("cwd", os.getcwd(), "uid", os.getuid())
    """)
    outcome = run_python(code, SandboxLimits(timeout_s=10), isolation=namespaces())

    assert outcome.exit_code == 0, outcome.stderr
    lines = outcome.stdout.splitlines()
    assert lines[0] == "procs [1, 2, 3]"  # bwrap's init, the shuttle and the program
    assert all(line.endswith(" False") for line in lines[1:5]), lines
    # The home directory is there only if the interpreter lives below it, and holds only that.
    interpreter_dirs = {
        p.relative_to(Path.home()).parts[0]
        for p in map(Path, _prefixes())
        if p.is_relative_to(Path.home())
    }
    assert set(ast.literal_eval(lines[5].removeprefix("home "))) <= interpreter_dirs
    assert all("written" not in line for line in lines[6:9])
    assert lines[-1].startswith("cwd /sandbox uid ")
    assert lines[-1] != "cwd /sandbox uid 0"


@needs_namespaces
def test_local_files_do_not_reach_the_next_run() -> None:
    marker = f"kept-{uuid.uuid4().hex}"
    first = run_python(
        f"open('/tmp/{marker}', 'w').write('x')\nopen('{marker}', 'w').write('x')\n",
        SandboxLimits(timeout_s=5),
        isolation=namespaces(),
    )
    second = run_python(
        "import os\nprint(os.listdir('/tmp'), sorted(os.listdir('.')))\n",
        SandboxLimits(timeout_s=5),
        isolation=namespaces(),
    )

    assert first.exit_code == 0
    assert second.stdout == "[] ['main.py', 'output']\n"
    assert not Path("/tmp", marker).exists()


# ---- the deployed handler discards an environment it cannot vouch for -----------------------


@needs_jail
def test_a_process_of_the_sandbox_uid_outside_the_tree_discards_the_environment() -> None:
    if not IS_ROOT:
        pytest.skip("needs root to give the driver a uid of its own")
    driver = Driver(uid=992)
    stray: subprocess.Popen[bytes] | None = None
    try:
        assert driver.invoke("print('first')") is not None
        # A process of the sandbox's uid that is not below the handler: one that escaped by
        # some way the sweep cannot see. The next clean-up must not vouch for the environment.
        stray = subprocess.Popen(
            ["setpriv", "--reuid=992", "--regid=992", "--clear-groups", "sleep", "30"]
        )
        time.sleep(0.2)
        answer = driver.invoke("print('second')")

        assert answer is None
        assert driver.returncode == DISCARD_EXIT_STATUS
        assert "discarding this execution environment" in "".join(driver.stderr)
    finally:
        if stray is not None:
            stray.send_signal(signal.SIGKILL)
            stray.wait()
        driver.close()


def test_isolation_tests_run_on_ci() -> None:
    """On CI (root, namespaces available, bubblewrap installed by make test) none may skip."""
    if os.environ.get("CI") != "true" or not IS_ROOT:
        pytest.skip("only CI, which runs as root, must have every isolation setup")
    assert namespaces_missing() is None
    assert jail_available() is None
