"""execute_code's scientific stack: numpy, pandas and matplotlib in the programs' view.

A real program (write a CSV, read it with pandas, plot it with matplotlib into a PNG) runs in
two setups, once each (the imports cost about a second):

* the local backend with namespace isolation (this test process; root on CI): the stack is
  bound read-only at /opt/sandbox-stack;
* the sandbox function's handler as deployed, unisolated, as a uid that is not root in
  :mod:`tests.fakes.sandbox_jail`, the stack named by ``AGENTLOOP_SANDBOX_STACK`` as the
  template sets it for the layer: a read-only directory, as /opt is on Lambda.

Each checks that matplotlib uses the font list built with the stack (no rebuild, no warning
about its config dir) and that the stack cannot be written. Then the settings, the tool's
description and the template, without running anything.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloop.config import ConfigurationError
from agentloop.sandbox import SandboxError, SandboxLimits, run_python, stack
from agentloop.sandbox.isolation import namespaces
from agentloop.sandbox.settings import STACK_MEMORY_MB, SandboxSettings
from agentloop.tools.execute_code import _description
from tests.cloudformation import load_template
from tests.fakes.sandbox_jail import Driver, jail_available
from tests.sandbox_probes import LOCAL_STACK, namespaces_missing

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")

ROOT = Path(__file__).resolve().parents[2]
SECRET = "fake-provider-key-9c2e41"

PROGRAM = r"""
import errno, logging, os, sys, time
messages = []
class Keep(logging.Handler):
    def emit(self, record):
        messages.append(record.getMessage())
logging.getLogger("matplotlib").addHandler(Keep(logging.DEBUG))
logging.getLogger("matplotlib").setLevel(logging.DEBUG)
started = time.monotonic()
import numpy as np, pandas as pd
import matplotlib, matplotlib.pyplot as plt
imported = time.monotonic() - started
with open("visits.csv", "w") as f:
    f.write("day,visits\n" + "".join(f"{d},{d * d % 7 + 3}\n" for d in range(1, 31)))
frame = pd.read_csv("visits.csv")
frame.plot(x="day", y="visits", title="Visits per day")
plt.savefig("visits.png")
with open("visits.png", "rb") as f:
    print("png=", f.read(8).hex(), os.path.getsize("visits.png") > 2000)
print("mean=", round(frame["visits"].mean(), 4), np.__version__, pd.__version__)
print("backend=", matplotlib.get_backend(), os.environ["OPENBLAS_NUM_THREADS"])
print("fonts cached=", any(m.startswith("Using fontManager instance") for m in messages))
print("fonts rebuilt=", any("generated new fontManager" in m for m in messages))
print("cache in temp=", matplotlib.get_cachedir() == os.environ["MPLCONFIGDIR"])
print("flags=", sys.flags.isolated, sys.flags.no_user_site, int(sys.flags.safe_path))
site = os.path.dirname(os.path.dirname(np.__file__))
refused = []
for target in (os.path.join(site, "numpy", "planted.py"), os.path.join(site, "planted.pth")):
    try:
        open(target, "w").close()
    except OSError as exc:
        refused.append(exc.errno in (errno.EROFS, errno.EACCES))
print("writes refused=", refused)
print("secret seen=", "SECRET_MARK" in repr(dict(os.environ)))
print("project visible=", os.path.exists("PROJECT_ROOT"))
print("site=", site)
print("imported in=", round(imported, 2))
""".replace("SECRET_MARK", SECRET).replace("PROJECT_ROOT", str(ROOT))


@pytest.fixture(scope="module")
def built() -> stack.Stack:
    """The stack make sandbox-stack built (make test depends on it)."""
    if not (LOCAL_STACK / stack.MANIFEST).is_file():
        pytest.skip("no .sandbox-stack: run make sandbox-stack")
    return stack.load(LOCAL_STACK)


def _lines(stdout: str) -> dict[str, str]:
    """The program's report: ``key= value`` lines."""
    return {
        key: value.strip()
        for key, _, value in (line.partition("=") for line in stdout.splitlines())
    }


def _check_run(outcome: dict[str, Any], built: stack.Stack, site: str) -> dict[str, str]:
    """What both setups must show: a PNG, the font list as built, a stack nobody can write."""
    assert outcome["exit_code"] == 0, outcome
    report = _lines(outcome["stdout"])
    assert report["png"] == "89504e470d0a1a0a True"  # the PNG signature, and a real image
    versions = dict(built.versions)
    mean = round(sum(d * d % 7 + 3 for d in range(1, 31)) / 30, 4)
    assert report["mean"] == f"{mean} {versions['numpy']} {versions['pandas']}"
    assert report["backend"] == "Agg 1"
    assert report["fonts cached"] == "True"
    assert report["fonts rebuilt"] == "False"
    assert report["cache in temp"] == "True"
    assert report["writes refused"] == "[True, True]", outcome["stdout"]
    assert report["secret seen"] == "False"
    assert report["site"] == site
    for warning in ("building the font cache", "is not a writable directory", "Matplotlib"):
        assert warning not in outcome["stderr"]
    return report


@pytest.mark.skipif(os.geteuid() != 0, reason="the local backend as root needs root")
def test_namespaces_give_programs_the_stack_read_only(built: stack.Stack) -> None:
    if namespaces_missing():
        pytest.skip(f"no namespace isolation: {namespaces_missing()}")
    isolation = dataclasses.replace(namespaces(), stack=built)
    limits = SandboxLimits(timeout_s=30, memory_mb=STACK_MEMORY_MB)

    outcome = run_python(PROGRAM, limits, isolation=isolation).model_dump()

    report = _check_run(outcome, built, f"{stack.VIEW_DIR}/site")
    # -I without -E: PYTHONPATH is read, the user site and the script's directory are not.
    assert report["flags"] == "0 1 1"
    assert report["project visible"] == "False"
    assert not (LOCAL_STACK / "site" / "planted.pth").exists()


@pytest.fixture(scope="module")
def deployed(built: stack.Stack) -> Iterator[Driver]:
    if jail_available():
        pytest.skip(str(jail_available()))
    env = {stack.ENV_VAR: str(built.root), "AWS_SECRET_ACCESS_KEY": SECRET}
    driver = Driver(env=env)
    yield driver
    driver.close()


def test_the_sandbox_function_gives_programs_the_stack(
    deployed: Driver, built: stack.Stack
) -> None:
    answer = deployed.invoke(PROGRAM, timeout_s=30, memory_mb=STACK_MEMORY_MB)

    assert answer is not None, "".join(deployed.stderr)
    assert answer["ok"], answer
    report = _check_run(answer["outcome"], built, f"{built.root}/site")
    assert report["flags"] == "0 1 1"
    state = deployed.call({"op": "whoami"})
    assert state is not None
    assert state["temp"] == []  # the run's files and matplotlib dir went with it


# ---- settings, description and template: nothing runs ------------------------------------------


def test_settings_find_the_stack_and_raise_the_memory_default(
    built: stack.Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    found = SandboxSettings.from_env({})
    assert found.offered_libraries() == built.libraries()
    assert found.limits.memory_mb == STACK_MEMORY_MB
    assert SandboxSettings.from_env({"AGENTLOOP_SANDBOX_MEMORY_MB": "300"}).limits.memory_mb == 300
    named = SandboxSettings.from_env({stack.ENV_VAR: str(built.root)})
    assert named.local_stack() == built
    off = SandboxSettings.from_env({stack.ENV_VAR: "none"})
    assert off.offered_libraries() == []
    assert off.limits.memory_mb == SandboxLimits().memory_mb
    remote = SandboxSettings.from_env(
        {
            "AGENTLOOP_SANDBOX_FUNCTION": "f",
            "AGENTLOOP_SANDBOX_LIBRARIES": " numpy 2.4.6,, pandas 3.1.1 ",
        }
    )
    assert remote.offered_libraries() == ["numpy 2.4.6", "pandas 3.1.1"]
    assert remote.limits.memory_mb == STACK_MEMORY_MB
    bare = SandboxSettings.from_env({"AGENTLOOP_SANDBOX_FUNCTION": "f"})
    assert bare.offered_libraries() == []
    assert bare.limits.memory_mb == SandboxLimits().memory_mb


def test_a_bad_stack_is_a_clear_error_never_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = SandboxSettings.from_env({stack.ENV_VAR: str(tmp_path / "missing")})
    with pytest.raises(ConfigurationError, match=r"no manifest\.json; run make sandbox-stack"):
        settings.make_backend()
    # A manifest that points outside the stack, or lists nothing, is refused.
    (tmp_path / "site").mkdir()
    for manifest in (
        {"libraries": {"numpy": "1"}, "fontlist": "../../etc/passwd"},
        {"libraries": {}},
        ["not", "an", "object"],
    ):
        (tmp_path / stack.MANIFEST).write_text(json.dumps(manifest), "utf-8")
        os.utime(tmp_path / stack.MANIFEST, ns=(len(repr(manifest)), len(repr(manifest))))
        with pytest.raises(ConfigurationError, match="is not a usable sandbox stack"):
            stack.load(tmp_path)
    # The sandbox function's runner: a tool error, not a crash of the handler.
    monkeypatch.setenv(stack.ENV_VAR, str(tmp_path / "missing"))
    with pytest.raises(SandboxError, match="run make sandbox-stack"):
        run_python("print(1)", SandboxLimits(timeout_s=5))


def test_the_description_names_the_libraries_or_the_standard_library() -> None:
    limits = SandboxLimits()
    with_stack = _description(limits, 30, ["numpy 2.4.6", "pandas 3.1.1"])
    assert "numpy 2.4.6, pandas 3.1.1 are installed" in with_stack
    assert "Only the standard library" not in with_stack
    assert "Only the standard library is available" in _description(limits, 30, [])
    assert len(with_stack) < len(_description(limits, 30, [])) + 140


def test_the_template_gives_the_sandbox_the_layer_and_the_chat_its_list() -> None:
    template = load_template()
    resources = template["Resources"]
    sandbox = resources["SandboxFunction"]
    assert {"Ref": "SandboxStackLayer"} in sandbox["Properties"]["Layers"]
    variables = sandbox["Properties"]["Environment"]["Variables"]
    assert variables[stack.ENV_VAR] == stack.VIEW_DIR
    assert sandbox["Metadata"]["BuildMethod"] == "makefile"
    layer = resources["SandboxStackLayer"]["Properties"]
    assert layer["ContentUri"] == "build/sandbox-stack/"
    pins = [
        line.split("==")
        for line in (ROOT / "functions/sandbox/requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    chat = resources["ChatFunction"]["Properties"]["Environment"]["Variables"]
    assert chat["AGENTLOOP_SANDBOX_LIBRARIES"] == ",".join(f"{n} {v}" for n, v in pins)
    assert re.fullmatch(r"\d+", str(template["Parameters"]["SandboxMemorySize"]["Default"]))
    assert int(template["Parameters"]["SandboxMemorySize"]["Default"]) >= 2 * STACK_MEMORY_MB
