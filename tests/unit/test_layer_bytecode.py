"""The layers and the chat function are deployed as ``make package`` builds them, with
python3.13 bytecode: they are read-only on Lambda, so without it every new container would
compile what it imports again."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path
from types import ModuleType

import pytest

from tests.cloudformation import load_template
from tests.helpers import ROOT

LAYERS = {
    "AgentLayer": "build/layer/",
    "SandboxAgentLayer": "build/sandbox-layer/",
    "SandboxStackLayer": "build/sandbox-stack/",
}


def _package() -> ModuleType:
    spec = importlib.util.spec_from_file_location("package", ROOT / "functions" / "package.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_layer_is_deployed_from_what_make_package_built() -> None:
    resources = load_template()["Resources"]
    layers = {
        name: resource
        for name, resource in resources.items()
        if resource["Type"] == "AWS::Serverless::LayerVersion"
    }
    assert set(layers) == set(LAYERS)
    for name, resource in layers.items():
        assert resource["Properties"]["ContentUri"] == LAYERS[name]
        # A BuildMethod would have sam build make the layer again, without bytecode.
        assert "BuildMethod" not in resource.get("Metadata", {}), name


def test_the_chat_function_is_deployed_from_what_make_package_built() -> None:
    chat = load_template()["Resources"]["ChatFunction"]
    assert chat["Properties"]["CodeUri"] == "build/chat/"
    # sam build would install uvicorn and starlette again, without bytecode, ahead of the layer.
    assert chat["Metadata"] == {"SkipBuild": True}


def test_a_layer_gets_bytecode_that_python_313_uses_whatever_the_files_times(
    tmp_path: Path,
) -> None:
    package = _package()
    if package.find_python313() is None:
        pytest.skip("no python3.13 on this machine: make package would warn and compile none")
    site = tmp_path / "python"
    (site / "lib").mkdir(parents=True)
    (site / "lib" / "__init__.py").write_text("ANSWER = 42\n")
    package.compile_for_lambda(site, "/opt/python")
    compiled = site / "lib" / "__pycache__" / "__init__.cpython-313.pyc"
    header = compiled.read_bytes()[:16]
    flags = struct.unpack("<I", header[4:8])[0]
    # PEP 552: bit 0 set is hash-based, bit 1 clear is "do not check the source".
    assert flags == 0b01
    code = compiled.read_bytes()
    assert b"/opt/python/lib/__init__.py" in code
