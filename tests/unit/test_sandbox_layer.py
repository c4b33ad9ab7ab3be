"""The sandbox function's layer holds agentloop and pydantic alone (``functions/package.py``,
``SandboxAgentLayer``): its handler must import nothing else, or it fails deployed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cloudformation import load_template

ROOT = Path(__file__).resolve().parents[2]
PYDANTIC = {
    "pydantic",
    "pydantic_core",
    "typing_extensions",
    "annotated_types",
    "typing_inspection",
}
PROBE = (
    "import json, sys\n"
    "before = set(sys.modules)\n"
    "sys.path.insert(0, 'functions/sandbox')\n"
    "import sandbox_handler\n"
    "print(json.dumps(sorted({name.split('.')[0] for name in set(sys.modules) - before})))\n"
)


def test_the_sandbox_handler_imports_only_agentloop_and_pydantic() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AGENTLOOP_"))}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded = set(json.loads(done.stdout))
    others = {
        name
        for name in loaded - set(sys.stdlib_module_names) - {"agentloop", "sandbox_handler"}
        if not name.startswith("_")  # the interpreter's own (_sysconfigdata, ...)
    }
    assert others <= PYDANTIC, f"not in the sandbox function's layer: {sorted(others - PYDANTIC)}"
    assert "pydantic" in others


def test_the_sandbox_function_has_its_own_layer_and_the_stack() -> None:
    template = load_template()
    sandbox = template["Resources"]["SandboxFunction"]["Properties"]
    assert sandbox["Layers"] == [{"Ref": "SandboxAgentLayer"}, {"Ref": "SandboxStackLayer"}]
    layer = template["Resources"]["SandboxAgentLayer"]["Properties"]
    assert layer["ContentUri"] == "build/sandbox-layer/"
