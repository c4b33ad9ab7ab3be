"""``python -m agentloop`` as a user runs it: a subprocess talking to the scripted server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.fakes.scripted_llm import Reply, ScriptedLLM
from tests.helpers import ROOT


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "agentloop", *args], env)


def run(command: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=60,
        env=env if env is not None else dict(os.environ),
        cwd=ROOT,
        check=False,
    )


def test_chat_streams_the_answer_to_stdout(llm: ScriptedLLM, model: str) -> None:
    llm.script(Reply(text="Forty-two is the answer.", usage=(30, 6)))

    proc = run_cli("chat", "What is the answer?", "--model", model)

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Forty-two is the answer."
    assert "[completed] 1 iteration(s), 30 prompt + 6 completion tokens" in proc.stderr
    assert llm.requests[0].messages[-1]["content"] == "What is the answer?"


def test_chat_without_a_key_says_which_variable_to_set(llm: ScriptedLLM) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GROQ_API_KEY"}

    proc = run_cli("chat", "Hi", "--model", "groq:llama-3.3-70b-versatile", env=env)

    assert proc.returncode == 1
    assert "GROQ_API_KEY is not set" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert llm.requests == []


def test_chat_refuses_an_empty_question(llm: ScriptedLLM, model: str) -> None:
    for question in ("", "  \n\t "):
        proc = run_cli("chat", question, "--model", model)

        assert proc.returncode == 2
        assert "the question is empty" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stdout == ""
    assert llm.requests == []


@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
def test_make_chat_without_q_prints_usage() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("Q", "MAKEFLAGS", "MFLAGS")}
    proc = run(["make", "--no-print-directory", "chat", "Q="], env)

    assert proc.returncode == 2
    assert 'usage: make chat Q="your question"' in proc.stderr


def test_schema_command_prints_the_committed_schema() -> None:
    proc = run_cli("schema")

    assert proc.returncode == 0
    assert proc.stdout == (ROOT / "docs" / "events.schema.json").read_text()
