"""execute_code end to end: in a full agent run, through the sandbox function, over the Lambda API.

* the tool in ``handle_chat`` against the scripted model (both SDKs), on the local backend
  and on the lambda backend;
* the sandbox function's handler invoked with ``events/sandbox.json`` and with bad events;
* the lambda backend's client - real boto3 - against a loopback fake of the Lambda Invoke
  API that calls the real handler, including the service's and the function's errors;
* the handler's own clean-up on Lambda (run in a subprocess, since it adopts orphans).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sandbox_handler
from agentloop.sandbox import RunOutcome, SandboxLimits
from agentloop.sandbox.backends import LambdaBackend
from agentloop.sandbox.runner import SandboxError
from agentloop.sandbox.service import DISCARD_EXIT_STATUS
from agentloop.sandbox.settings import SandboxSettings
from agentloop.tools.execute_code import execute_code_tool
from tests.fakes.lambda_api import SANDBOX_FUNCTION, FakeContext, FakeLambda
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import ROOT, run_chat, tool_payload

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")

SAMPLE_EVENT = ROOT / "events" / "sandbox.json"


def tool_contents(request: RecordedRequest) -> list[dict[str, Any]]:
    return [tool_payload(m["content"]) for m in request.messages if m["role"] == "tool"]


def answer_with_stdout(req: RecordedRequest) -> Reply:
    outcome = tool_contents(req)[-1]["result"]
    return Reply(text=f"The program printed {outcome['stdout'].strip()}.")


@pytest.fixture
def local_settings(tmp_path: Path) -> SandboxSettings:
    return SandboxSettings(backend="local", tmp_root=str(tmp_path))


# ---- the tool in a full agent run (local backend) -----------------------------------------------


async def test_model_runs_code_and_answers_with_its_output(
    llm: ScriptedLLM, model: str, local_settings: SandboxSettings, tmp_path: Path
) -> None:
    llm.script(
        Reply(tool_calls=[call("execute_code", code="print(sum(i * i for i in range(10)))")])
    )
    llm.respond_with(answer_with_stdout)

    result = await run_chat(
        "Sum of squares below 10?", model=model, tools=[execute_code_tool(local_settings)]
    )

    assert result.done.text == "The program printed 285."
    [finished] = result.tool_results
    assert finished.ok
    outcome = tool_payload(finished.content)["result"]
    assert outcome["exit_code"] == 0
    assert outcome["stdout"] == "285\n"
    assert outcome["timed_out"] is False
    [definition] = llm.requests[0].tools or []
    parameters = definition["function"]["parameters"]
    assert parameters["properties"]["timeout_s"]["maximum"] == 30
    assert parameters["properties"]["code"]["maxLength"] == 20_000
    assert "standard library" in definition["function"]["description"]
    assert not any(os.scandir(tmp_path)), "the work dir was removed"


async def test_a_failing_program_is_a_result_the_model_fixes(
    llm: ScriptedLLM, model: str, local_settings: SandboxSettings
) -> None:
    llm.script(
        Reply(tool_calls=[call("execute_code", code="print(undefined_name)")]),
        Reply(tool_calls=[call("execute_code", code="print('fixed')")]),
    )
    llm.respond_with(answer_with_stdout)

    result = await run_chat("Try it.", model=model, tools=[execute_code_tool(local_settings)])

    first, second = (tool_payload(r.content) for r in result.tool_results)
    assert first["ok"] is True, "a failing program is not a tool error"
    assert first["result"]["exit_code"] == 1
    assert "NameError: name 'undefined_name' is not defined" in first["result"]["stderr"]
    assert second["result"]["stdout"] == "fixed\n"
    assert result.done.text == "The program printed fixed."


async def test_time_limits_are_enforced_and_explained(
    llm: ScriptedLLM, model: str, local_settings: SandboxSettings
) -> None:
    llm.script(
        Reply(
            tool_calls=[
                call("execute_code", code="print(1)", timeout_s=3600),
                call("execute_code", code="import time\ntime.sleep(60)", timeout_s=0.5),
            ]
        ),
        Reply(text="done"),
    )

    result = await run_chat("Slow.", model=model, tools=[execute_code_tool(local_settings)])

    too_long, slept = (tool_payload(r.content) for r in result.tool_results)
    assert too_long["ok"] is False
    assert "timeout_s: Input should be less than or equal to 30" in too_long["error"]
    assert slept["result"]["timed_out"] is True
    assert slept["result"]["notes"] == ["Stopped: the program ran past the 0.5 s time limit."]


async def test_the_local_backend_refuses_to_run_inside_a_lambda_function(
    llm: ScriptedLLM, model: str, local_settings: SandboxSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "agentloop-chat")
    llm.script(Reply(tool_calls=[call("execute_code", code="print(1)")]), Reply(text="ok"))

    result = await run_chat("Run.", model=model, tools=[execute_code_tool(local_settings)])

    payload = tool_payload(result.tool_results[0].content)
    assert payload == {
        "ok": False,
        "error": "execute_code is not configured: this server has no sandbox function",
        "hint": "answer without running code",
    }


# ---- the sandbox function's handler -----------------------------------------------------------


def test_handler_runs_the_sample_event() -> None:
    event = json.loads(SAMPLE_EVENT.read_text())

    result = sandbox_handler.handler(event, FakeContext(SANDBOX_FUNCTION, timeout_s=60))

    assert result["ok"] is True
    assert result["outcome"]["exit_code"] == 0
    assert result["outcome"]["stdout"] == "mean 3.875\nmedian 3.5\n"
    assert result["outcome"]["notes"] == []


@pytest.mark.parametrize(
    ("event", "fragment"),
    [
        (["print(1)"], "Input should be a valid dictionary"),
        ({"source": "print(1)"}, "code: Field required"),
        ({"code": "print(1)", "limits": {"timeout_s": "soon"}}, "limits.timeout_s"),
    ],
)
def test_handler_answers_bad_events_with_an_error(event: object, fragment: str) -> None:
    result = sandbox_handler.handler(event, FakeContext(SANDBOX_FUNCTION, timeout_s=60))

    assert result["ok"] is False
    assert result["error_kind"] == "invalid_request"
    assert fragment in result["error"]


@pytest.mark.parametrize(
    ("files", "fragment"),
    [
        ({"../escape.txt": "YQ=="}, "not a usable path"),
        ({"/etc/passwd": "YQ=="}, "not a usable path"),
        ({"a/b/c/d.txt": "YQ=="}, "not a usable path"),
        ({".hidden": "YQ=="}, "not a usable path"),
        ({"data.csv": "not base64!"}, "files:"),
        ({f"f{i}": "" for i in range(65)}, "files"),
    ],
)
def test_handler_refuses_files_it_could_not_place_safely(
    files: dict[str, str], fragment: str
) -> None:
    event = {"code": "print(1)", "files": files}
    result = sandbox_handler.handler(event, FakeContext(SANDBOX_FUNCTION, timeout_s=60))

    assert result["ok"] is False
    assert result["error_kind"] == "invalid_request"
    assert fragment in result["error"]


def test_handler_carries_the_working_directory_both_ways() -> None:
    code = "open('output/upper.txt', 'w').write(open('data.csv').read().upper())"
    event = {"code": code, "files": {"data.csv": base64.b64encode(b"a,b\n").decode()}}
    result = sandbox_handler.handler(event, FakeContext(SANDBOX_FUNCTION, timeout_s=60))

    assert result["ok"] is True, result
    workdir = result["workdir"]
    assert workdir["present"] == ["data.csv", "output/upper.txt"]
    assert {p: base64.b64decode(d) for p, d in workdir["changed"].items()} == {
        "output/upper.txt": b"A,B\n"
    }


def test_handler_cleans_up_what_escaped_its_supervisor(tmp_path: Path) -> None:
    """On Lambda the handler is a subreaper: a process that killed its supervisor still dies.

    Run in a subprocess (with the Lambda clean-up forced on and its own temp dir), since the
    handler process adopts orphans and empties the temp dir.
    """
    marker = f"escapee-{uuid.uuid4().hex}"
    code = f"""
import os, signal, sys, time
if os.fork() == 0:
    os.setsid()
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", {marker!r}])
open("../stray-file.txt", "w").write("left in /tmp for the next invocation")
time.sleep(0.2)
shuttle = os.getppid()  # the supervisor's child, which runs this program
os.kill(int(open(f"/proc/{{shuttle}}/stat").read().rsplit(")", 1)[1].split()[1]), signal.SIGKILL)
time.sleep(60)
"""
    script = (
        "import json, sys\n"
        "import sandbox_handler\n"
        "print(json.dumps(sandbox_handler.handler(json.loads(sys.argv[1]), None)))\n"
    )
    event = {"code": code, "limits": {"timeout_s": 5}}
    env = {
        **os.environ,
        "AGENTLOOP_SANDBOX_HOST_CLEANUP": "1",
        "TMPDIR": str(tmp_path),
        "PYTHONPATH": str(ROOT / "functions" / "sandbox"),
    }
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(event)],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )

    assert done.returncode == 0, done.stderr
    outcome = RunOutcome.model_validate(json.loads(done.stdout)["outcome"])
    assert outcome.exit_code is None  # the supervisor never reported it
    assert "The sandbox supervisor gave no report" in outcome.notes[0]
    assert not any(os.scandir(tmp_path)), "the work dir was removed"
    assert not any(marker.encode() in cmdline for cmdline in all_cmdlines())


def all_cmdlines() -> Iterator[bytes]:
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                yield Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue


# ---- the lambda backend over the (fake) Lambda API --------------------------------------------


def lambda_settings(api: FakeLambda, function: str = SANDBOX_FUNCTION) -> SandboxSettings:
    return SandboxSettings(
        backend="lambda", function=function, endpoint_url=api.url, region="us-east-1"
    )


async def test_model_runs_code_in_the_sandbox_function(
    llm: ScriptedLLM, model: str, lambda_api: FakeLambda
) -> None:
    code = "import hashlib\nprint(hashlib.sha256(b'agentloop').hexdigest()[:12])"
    llm.script(Reply(tool_calls=[call("execute_code", code=code, timeout_s=4)]))
    llm.respond_with(answer_with_stdout)

    result = await run_chat(
        "Hash it.", model=model, tools=[execute_code_tool(lambda_settings(lambda_api))]
    )

    import hashlib

    expected = hashlib.sha256(b"agentloop").hexdigest()[:12]
    assert result.done.text == f"The program printed {expected}."
    [invocation] = lambda_api.invocations
    assert invocation.function == SANDBOX_FUNCTION
    assert invocation.invocation_type == "RequestResponse"
    assert invocation.event["code"] == code
    assert invocation.event["limits"]["timeout_s"] == 4
    assert invocation.event["limits"]["memory_mb"] == 256


async def test_lambda_outcome_matches_the_local_one(lambda_api: FakeLambda) -> None:
    code = "import sys\nprint('out')\nsys.stderr.write('err')\nsys.exit(3)"
    limits = SandboxLimits(timeout_s=5)

    remote = (await lambda_settings(lambda_api).make_backend().run(code, limits)).outcome
    local = (await SandboxSettings().make_backend().run(code, limits)).outcome

    assert remote.model_dump(exclude={"duration_ms"}) == local.model_dump(exclude={"duration_ms"})
    assert (remote.exit_code, remote.stdout, remote.stderr) == (3, "out\n", "err")


async def test_an_outcome_without_exit_code_crosses_the_lambda_api(lambda_api: FakeLambda) -> None:
    code = (
        "import os, signal, time\n"
        "shuttle = os.getppid()\n"
        "supervisor = int(open(f'/proc/{shuttle}/stat').read().rsplit(')', 1)[1].split()[1])\n"
        "os.kill(supervisor, signal.SIGKILL)\ntime.sleep(60)"
    )

    backend = lambda_settings(lambda_api).make_backend()
    outcome = (await backend.run(code, SandboxLimits(timeout_s=5))).outcome

    assert outcome.exit_code is None
    assert outcome.killed_by is None
    assert "The sandbox supervisor gave no report" in outcome.notes[0]


def raise_in_handler(event: Any, context: Any) -> Any:
    raise RuntimeError("Runtime exited with error: signal: killed")


def slow_handler(event: Any, context: Any) -> Any:
    time.sleep(1.5)
    return {}


def wrong_shape_handler(event: Any, context: Any) -> Any:
    return {"hello": "world"}


def discarding_handler(event: Any, context: Any) -> Any:
    """What the sandbox handler does when it cannot rule out a survivor: end the process."""
    raise SystemExit(DISCARD_EXIT_STATUS)


@pytest.mark.parametrize(
    ("setup", "message", "hint"),
    [
        ("throttle", "the code sandbox is busy", "wait a little and try again"),
        ("missing", "the sandbox function 'nowhere' does not exist", "AGENTLOOP_SANDBOX_FUNCTION"),
        ("crash", "the code sandbox failed: RuntimeError: Runtime exited", "too much memory"),
        ("discarded", "the code sandbox could not rule out", "running it again is safe"),
        ("timeout", "the code sandbox timed out", "shorter timeout_s"),
        ("no_time", "the code sandbox refused the run: too little time left", None),
        ("wrong_shape", "the code sandbox answered in an unexpected format", None),
    ],
)
async def test_lambda_failures_become_clear_errors(
    lambda_api: FakeLambda, setup: str, message: str, hint: str | None
) -> None:
    function = SANDBOX_FUNCTION
    if setup == "throttle":
        lambda_api.throttle = True
    elif setup == "missing":
        function = "nowhere"
    elif setup == "crash":
        lambda_api.register(SANDBOX_FUNCTION, raise_in_handler)
    elif setup == "timeout":
        lambda_api.register(SANDBOX_FUNCTION, slow_handler, timeout_s=0.3)
    elif setup == "no_time":
        lambda_api.register(SANDBOX_FUNCTION, sandbox_handler.handler, timeout_s=1.0)
    elif setup == "wrong_shape":
        lambda_api.register(SANDBOX_FUNCTION, wrong_shape_handler)
    elif setup == "discarded":
        lambda_api.register(SANDBOX_FUNCTION, discarding_handler)

    backend = lambda_settings(lambda_api, function).make_backend()
    with pytest.raises(SandboxError) as caught:
        await backend.run("print(1)", SandboxLimits(timeout_s=2))

    assert caught.value.message.startswith(message)
    if hint is not None:
        assert hint in (caught.value.hint or "")


async def test_a_busy_sandbox_is_a_tool_error_the_model_reads(
    llm: ScriptedLLM, model: str, lambda_api: FakeLambda
) -> None:
    lambda_api.throttle = True
    llm.script(Reply(tool_calls=[call("execute_code", code="print(1)")]))
    llm.respond_with(lambda req: Reply(text=f"Could not run: {tool_contents(req)[0]['error']}"))

    result = await run_chat(
        "Run.", model=model, tools=[execute_code_tool(lambda_settings(lambda_api))]
    )

    assert (
        result.done.text
        == "Could not run: the code sandbox is busy: every concurrent run is in use"
    )
    assert tool_payload(result.tool_results[0].content)["hint"].startswith("wait a little")


def test_lambda_client_is_created_once_per_configuration(lambda_api: FakeLambda) -> None:
    backend = lambda_settings(lambda_api).make_backend()
    assert isinstance(backend, LambdaBackend)

    backend.invoke("print(1)", SandboxLimits(timeout_s=2))
    backend.invoke("print(2)", SandboxLimits(timeout_s=2))

    from agentloop.sandbox import backends

    keys = [k for k in backends._clients if k[1] == lambda_api.url]
    assert len(keys) == 1


def test_tempdir_default_is_untouched_by_local_runs() -> None:
    """The local backend never empties the shared temp dir (only the handler on Lambda does)."""
    probe = Path(tempfile.gettempdir()) / f"agentloop-probe-{uuid.uuid4().hex}"
    probe.write_text("mine")
    try:
        result = sandbox_handler.handler({"code": "print(1)"}, FakeContext(SANDBOX_FUNCTION, 60))
        assert result["ok"] is True
        assert probe.read_text() == "mine"
    finally:
        probe.unlink()
