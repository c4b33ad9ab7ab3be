"""The sandbox runner's pieces and its contract on ordinary programs; attacks are elsewhere."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentloop.config import ConfigurationError
from agentloop.sandbox import SandboxLimits, run_python
from agentloop.sandbox._supervisor import descendants, process_table
from agentloop.sandbox.files import empty_dir
from agentloop.sandbox.runner import _Capture, scrubbed_env
from agentloop.sandbox.service import SandboxHost, handle_sandbox_event
from agentloop.sandbox.settings import SandboxSettings

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")


# ---- output capture -------------------------------------------------------------------------


def test_capture_under_the_cap_is_whole() -> None:
    capture = _Capture(100)
    for chunk in (b"hello ", b"world"):
        capture.feed(chunk)
    assert (capture.text(), capture.cut) == ("hello world", 0)


def test_capture_keeps_head_and_tail_and_counts_the_cut() -> None:
    capture = _Capture(30)  # 20 bytes of head, 10 of tail
    capture.feed(b"H" * 25)
    for _ in range(10):
        capture.feed(b"m" * 1000)
    capture.feed(b"0123456789")

    assert capture.total == 10_035
    assert capture.cut == 10_005
    assert capture.text() == "H" * 20 + "\n[... 10,005 of 10,035 bytes cut ...]\n0123456789"


def test_capture_decodes_invalid_utf8_with_replacement() -> None:
    capture = _Capture(100)
    capture.feed("é".encode() + b"\xff" + "ü".encode()[:1])
    assert capture.text() == "é\ufffd\ufffd"


# ---- environment, limits, settings ----------------------------------------------------------


def test_scrubbed_env_is_fixed_values_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "nope")
    env = scrubbed_env("/tmp/work")
    assert env == {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": "/tmp/work",
        "TMPDIR": "/tmp/work",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MALLOC_ARENA_MAX": "2",
    }


def test_cpu_limit_defaults_to_just_over_the_wall_clock() -> None:
    assert SandboxLimits(timeout_s=2.5).cpu_limit_s == 4
    assert SandboxLimits(timeout_s=2.5, cpu_s=1).cpu_limit_s == 1


def test_settings_default_to_local_and_switch_to_lambda_with_a_function() -> None:
    assert SandboxSettings.from_env({}).backend == "local"
    settings = SandboxSettings.from_env(
        {
            "AGENTLOOP_SANDBOX_FUNCTION": "stack-SandboxFunction-1",
            "AGENTLOOP_SANDBOX_MEMORY_MB": "128",
        }
    )
    assert (settings.backend, settings.function) == ("lambda", "stack-SandboxFunction-1")
    assert settings.limits.memory_mb == 128
    explicit = SandboxSettings.from_env(
        {"AGENTLOOP_SANDBOX_FUNCTION": "f", "AGENTLOOP_SANDBOX_BACKEND": "local"}
    )
    assert explicit.backend == "local"


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"AGENTLOOP_SANDBOX_BACKEND": "lambda"}, "needs the sandbox function"),
        ({"AGENTLOOP_SANDBOX_BACKEND": "docker"}, "backend"),
        ({"AGENTLOOP_SANDBOX_TIMEOUT_S": "60"}, "above max_timeout_s"),
        ({"AGENTLOOP_SANDBOX_MEMORY_MB": "lots"}, "memory_mb"),
    ],
)
def test_bad_settings_are_configuration_errors(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=fragment):
        SandboxSettings.from_env(env)


def test_descendants_follow_the_parent_links() -> None:
    table = {
        10: (1, "S", 10),
        11: (10, "S", 10),
        12: (11, "Z", 10),
        13: (1, "S", 13),  # re-parented to init: not below 10 any more
        14: (13, "S", 13),
    }
    assert sorted(descendants(10, table)) == [11, 12]
    assert descendants(12, table) == []


@linux_only
def test_process_table_sees_this_process() -> None:
    import os

    table = process_table()
    assert table[os.getpid()][0] == os.getppid()


# ---- the runner on ordinary programs ----------------------------------------------------------


@linux_only
def test_a_program_runs_and_its_output_comes_back(tmp_path: Path) -> None:
    outcome = run_python("print(6 * 7)", SandboxLimits(timeout_s=5), tmp_root=tmp_path)

    assert outcome.exit_code == 0
    assert outcome.stdout == "42\n"
    assert outcome.stderr == ""
    assert not outcome.truncated
    assert not outcome.timed_out
    assert outcome.killed_by is None
    assert outcome.notes == []
    assert 0 < outcome.duration_ms < 5000
    assert list(tmp_path.iterdir()) == []


@linux_only
def test_failure_is_an_ordinary_outcome(tmp_path: Path) -> None:
    code = "import sys\nprint('partial')\nraise SystemExit('bad input')\n"
    outcome = run_python(code, SandboxLimits(timeout_s=5), tmp_root=tmp_path)

    assert outcome.exit_code == 1
    assert outcome.stdout == "partial\n"
    assert outcome.stderr == "bad input\n"
    traceback = run_python("1/0", SandboxLimits(timeout_s=5), tmp_root=tmp_path)
    assert traceback.exit_code == 1
    assert "ZeroDivisionError" in traceback.stderr
    assert 'main.py", line 1' in traceback.stderr


@linux_only
def test_the_program_sees_its_limits_and_a_fresh_isolated_interpreter(tmp_path: Path) -> None:
    code = """
import os, resource, sys
print(sys.flags.isolated, sys.flags.dont_write_bytecode)
print(resource.getrlimit(resource.RLIMIT_AS)[0] // 2**20)
print(resource.getrlimit(resource.RLIMIT_FSIZE)[0] // 2**20)
print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
print(resource.getrlimit(resource.RLIMIT_CORE)[0])
print(resource.getrlimit(resource.RLIMIT_CPU))
print(os.getcwd() == os.environ["HOME"], os.listdir("."))
print(os.getpgid(0) == os.getppid(), os.getsid(0) != os.getpid())  # the shuttle's group
print(repr(sys.stdin.read()))
"""
    limits = SandboxLimits(timeout_s=3, memory_mb=200, max_file_mb=3, max_open_files=40)
    outcome = run_python(code, limits, tmp_root=tmp_path)

    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stdout.splitlines() == [
        "1 1",
        "200",
        "3",
        "40",
        "0",
        "(4, 5)",
        "True ['main.py', 'output']",
        "True True",
        "''",
    ]


# ---- the sandbox function's logic -------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "fragment"),
    [
        ("print(1)", "(event): Input should be a valid dictionary"),
        ({}, "code: Field required"),
        ({"code": ""}, "code: String should have at least 1 character"),
        ({"code": "x" * 20_001}, "code: String should have at most 20000 characters"),
        ({"code": "print(1)", "limits": {"memory_mb": 10**6}}, "limits.memory_mb"),
        ({"code": "print(1)", "limits": {"timeout_s": -1}}, "limits.timeout_s"),
        ({"code": "print(1)", "env": {"A": "b"}}, "env: Extra inputs are not permitted"),
    ],
)
def test_bad_events_get_a_clear_error(event: object, fragment: str) -> None:
    result = handle_sandbox_event(event, remaining_ms=30_000)

    assert result["ok"] is False
    assert result["error_kind"] == "invalid_request"
    assert result["error"].startswith("invalid event: ")
    assert fragment in result["error"]


def test_no_time_left_is_refused_before_running() -> None:
    result = handle_sandbox_event({"code": "print(1)"}, remaining_ms=1_500)
    assert result == {
        "ok": False,
        "error": "too little time left in this invocation to run code",
        "error_kind": "no_time",
    }


@linux_only
def test_the_timeout_is_capped_to_the_invocation(tmp_path: Path) -> None:
    event = {"code": "import time\ntime.sleep(30)", "limits": {"timeout_s": 30}}
    result = handle_sandbox_event(event, remaining_ms=3_000)

    assert result["ok"] is True
    outcome = result["outcome"]
    assert outcome["timed_out"] is True
    assert outcome["notes"][0] == "The time limit was lowered to 1 s to fit."
    assert outcome["duration_ms"] < 2000


def test_host_cleanup_is_on_only_on_lambda_unless_forced() -> None:
    assert SandboxHost.from_env({}) == SandboxHost()
    on_lambda = SandboxHost.from_env({"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"})
    assert on_lambda.contain
    assert on_lambda.wipe_dir
    forced_off = {"AWS_LAMBDA_RUNTIME_API": "x", "AGENTLOOP_SANDBOX_HOST_CLEANUP": "0"}
    assert SandboxHost.from_env(forced_off) == SandboxHost()
    assert SandboxHost.from_env({"AGENTLOOP_SANDBOX_HOST_CLEANUP": "1"}).contain


def test_emptying_the_temp_dir_removes_even_locked_entries(tmp_path: Path) -> None:
    wipe = tmp_path / "tmp"
    (wipe / "locked" / "deeper").mkdir(parents=True)
    (wipe / "locked" / "deeper" / "f").write_text("x")
    (wipe / "locked").chmod(0)
    (wipe / "file").write_text("y")
    target = tmp_path / "target.txt"
    target.write_text("not in the temp dir")
    (wipe / "link").symlink_to(target)

    empty_dir(str(wipe))

    assert list(wipe.iterdir()) == []
    assert target.read_text() == "not in the temp dir"  # the link went, not what it named
