"""Someone with only an OpenAI key: ``make dev`` answers on ``/chat`` and through the openai
SDK with no other setting, ``/v1/models`` lists only models that key can use, and the start-up
log says which model answers, never the key. In AWS the same choice follows the secret's keys.

``make dev`` runs as a newcomer runs it, its environment stripped of every provider key and
``AGENTLOOP_*`` setting but ``OPENAI_API_KEY`` (and ``OPENAI_BASE_URL``, pointing the openai
SDK at the scripted model server).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
import pytest

from agentloop.app_settings import AppSettings
from agentloop.server.service import service_from_env
from tests.fakes.scripted_llm import Reply, ScriptedLLM
from tests.helpers import ROOT, make_command, parse_sse

ONLY_KEY = "sk-only-openai-7c41e9d2a6b8f03d"
OPENAI_DEFAULT = "openai:gpt-4o-mini"
QUESTION = {"role": "user", "content": "What is the capital of France?"}
STARTED = "Application startup complete"


@dataclass
class DevServer:
    url: str
    log: list[str] = field(default_factory=list)
    """Its stderr lines so far (a thread keeps reading, so the pipe never fills)."""


def newcomer_env(llm_server: ScriptedLLM) -> dict[str, str]:
    """The caller's environment without provider keys or agentloop settings, plus one key."""
    dropped = ("GROQ_", "OPENAI_", "AGENTLOOP_", "TAVILY_", "BRAVE_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env.update(OPENAI_API_KEY=ONLY_KEY, OPENAI_BASE_URL=llm_server.openai_base_url)
    return env


@pytest.fixture(scope="module")
def dev_server(llm_server: ScriptedLLM) -> Iterator[DevServer]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        make_command("dev", f"PORT={port}"),
        cwd=ROOT,
        env=newcomer_env(llm_server),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    server = DevServer(f"http://127.0.0.1:{port}")
    ready = threading.Event()

    def read_log() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            server.log.append(line)
            if STARTED in line:
                ready.set()
        ready.set()  # it ended: the test below reports the log

    reader = threading.Thread(target=read_log, name="make-dev-log", daemon=True)
    reader.start()
    try:
        ready.wait(120)  # the first make dev may install bubblewrap
        assert any(STARTED in line for line in server.log), "".join(server.log)
        yield server
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
        reader.join(timeout=10)


def test_start_up_names_the_model_and_the_providers_never_the_key(dev_server: DevServer) -> None:
    [line] = [line for line in dev_server.log if " answers (" in line]
    assert f"model {OPENAI_DEFAULT} answers (chosen from the keys set;" in line
    assert line.rstrip().endswith("providers with keys: openai")
    assert line.startswith("INFO:agentloop.chat_app:")


def test_chat_answers_with_the_openai_default(dev_server: DevServer, llm: ScriptedLLM) -> None:
    llm.script(Reply(text="Paris."))
    response = httpx.post(f"{dev_server.url}/chat", json={"messages": [QUESTION]}, timeout=30)

    assert response.status_code == 200, response.text
    frames = parse_sse(response.text.splitlines())
    kinds = [kind for kind, _ in frames]
    assert "error" not in kinds, frames
    assert kinds[0] == "run_start"
    assert frames[-1][0] == "done"
    done: dict[str, Any] = frames[-1][1] or {}
    assert (done["text"], done["stop_reason"]) == ("Paris.", "completed")
    [request] = llm.requests
    assert (request.flavour, request.model) == ("openai", "gpt-4o-mini")
    assert request.headers["authorization"] == f"Bearer {ONLY_KEY}"


def test_the_openai_sdk_gets_answers_for_agentloop_and_no_model(
    dev_server: DevServer, llm: ScriptedLLM
) -> None:
    llm.respond_with(lambda request: Reply(text="Paris."))
    client = openai.OpenAI(base_url=f"{dev_server.url}/v1", api_key="unused", max_retries=0)

    completion = client.chat.completions.create(model="agentloop", messages=[QUESTION])
    stream = client.chat.completions.create(model="agentloop", messages=[QUESTION], stream=True)
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    # The SDK always sends a model; a plain HTTP client may leave it out.
    without = httpx.post(
        f"{dev_server.url}/v1/chat/completions", json={"messages": [QUESTION]}, timeout=30
    )

    assert completion.choices[0].message.content == "Paris."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == OPENAI_DEFAULT
    assert streamed == "Paris."
    assert without.status_code == 200, without.text
    assert without.json()["choices"][0]["message"]["content"] == "Paris."
    assert [(r.flavour, r.model) for r in llm.requests] == [("openai", "gpt-4o-mini")] * 3


def test_models_lists_only_what_the_openai_key_can_use(dev_server: DevServer) -> None:
    client = openai.OpenAI(base_url=f"{dev_server.url}/v1", api_key="unused", max_retries=0)
    ids = [model.id for model in client.models.list()]

    assert ids[0] == OPENAI_DEFAULT
    assert len(ids) > 1, "the template's openai:* is offered as concrete models"
    assert all(model_id.startswith("openai:") for model_id in ids), ids
    assert len(set(ids)) == len(ids)


def test_no_key_value_is_in_the_log(dev_server: DevServer, llm: ScriptedLLM) -> None:
    llm.script(Reply(text="Paris."))  # one more run, so its lines are in the log too
    httpx.post(f"{dev_server.url}/chat", json={"messages": [QUESTION]}, timeout=30)
    log = "".join(dev_server.log)
    assert "run finished" in log
    assert ONLY_KEY not in log
    assert ONLY_KEY[-12:] not in log


def test_the_cli_answers_with_only_an_openai_key(llm: ScriptedLLM) -> None:
    """``make chat``'s command, with the same environment as ``make dev`` above."""
    llm.script(Reply(text="Paris."))
    proc = subprocess.run(
        [sys.executable, "-m", "agentloop", "chat", "What is the capital of France?"],
        capture_output=True,
        text=True,
        timeout=60,
        env=newcomer_env(llm),
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Paris."
    assert [(r.flavour, r.model) for r in llm.requests] == [("openai", "gpt-4o-mini")]


# -- deployed: the secret's keys choose ------------------------------------------------------


def test_in_aws_the_secrets_keys_choose_the_default(
    mocked_aws: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The template leaves AGENTLOOP_DEFAULT_MODEL empty; the secret holds only an OpenAI key:
    that key, copied into the environment at start-up, chooses the model."""
    import boto3

    boto3.client("secretsmanager").create_secret(
        Name="agentloop/test",
        SecretString=json.dumps({"OPENAI_API_KEY": ONLY_KEY, "GROQ_API_KEY": ""}),
    )
    for name in ("GROQ_API_KEY", "OPENAI_API_KEY", "AGENTLOOP_DEFAULT_MODEL"):
        monkeypatch.setenv(name, "")  # empty: filled from the secret, restored after the test
    monkeypatch.delenv("AGENTLOOP_ALLOWED_MODELS", raising=False)
    settings = AppSettings.from_env({"AGENTLOOP_SECRET_ID": "agentloop/test"})

    with caplog.at_level(logging.INFO, logger="agentloop"):
        service = service_from_env(settings)

    assert service.config.default_model == OPENAI_DEFAULT
    assert service.models[0] == OPENAI_DEFAULT
    assert all(model.startswith("openai:") for model in service.models)
    lines = [record.getMessage() for record in caplog.records]
    assert (
        f"model {OPENAI_DEFAULT} answers (chosen from the keys set; AGENTLOOP_DEFAULT_MODEL "
        "picks another); providers with keys: openai"
    ) in lines
    assert not any(ONLY_KEY in line for line in lines)
