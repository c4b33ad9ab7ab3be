# ruff: noqa: RUF002, RUF003  (typographic signs in docstrings: –, →)
"""``make bench``: agentloop next to the bare SDKs and other agent frameworks, in one run.

Starts the scripted model server (``bench/llm_server.py``) in a process of its own, runs
every measurement in subprocesses of this virtualenv's Python (``bench/worker.py``: one
process per contender for the task figures, a fresh one per sample for memory; ``python -c``
for imports; uvicorn for the chat app; Node.js for the faces figure's JavaScript clients),
checks every answer, and writes ``docs/benchmarks.md`` and ``docs/benchmarks.png``
(``bench/report.py``) plus the raw figures to ``build/bench/results.json``.

On a machine with two or more CPUs the model server runs on the first and the process being
measured on the second, so the two do not take turns on one core.

``python bench/run.py --figures loop,stream`` measures only those figures and prints them
(docs/ is only rewritten by a full run, so the page always comes from one run).
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import platform
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import report, tasks  # noqa: E402
from bench.contenders import CONTENDERS, IN_PROCESS, PEERS, post_chat  # noqa: E402

PY = sys.executable
RESULTS = ROOT / "build" / "bench" / "results.json"
FIGURES = (
    "cold",
    "loop",
    "parallel",
    "stream",
    "faces",
    "memory",
    "docs",
    "research",
    "tracing",
    "signin",
    "limits",
    "threads",
    "sandbox",
)

RUNS = {"loop": 61, "parallel": 7, "stream": 9, "memory": 5, "docs": 5}
WARMUP = {"loop": 3, "parallel": 1, "stream": 2, "docs": 0}
PEER_COLD_RUNS = 5
APP_COLD_RUNS = 9
WORKER_TIMEOUT_S = 240
RESEARCH_TIMEOUT_S = 600

_CPUS = sorted(os.sched_getaffinity(0))
SERVER_CPU, MEASURED_CPU = (_CPUS[0], _CPUS[1]) if len(_CPUS) >= 2 else (None, None)

# Nothing may leave the machine: no proxy for loopback, no framework telemetry.
QUIET_ENV = {
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",
    "AGENTLOOP_AUTH_MODE": "none",
    "PYTHONWARNINGS": "ignore",
}
DROPPED_ENV = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "GROQ_API_KEY",
    "GROQ_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "AGENTLOOP_SECRET_ID",
    "PYTHONPATH",
)


SOURCES = (ROOT / "layers" / "agent" / "agentloop", ROOT / "functions", ROOT / "bench")
"""This repository's Python, which every contender and app process imports from source."""


def compile_sources() -> None:
    """Bytecode for :data:`SOURCES`, as pip wrote it for every installed package a contender
    imports, so each process measures agentloop as installed rather than its compilation.

    A first import would write it, except where ``PYTHONDONTWRITEBYTECODE`` is set: then every
    worker compiled the modules changed since their last bytecode again, which cost 0.4 MB of
    peak memory and 10-20 ms of cold start that no deployment pays (``make package`` ships
    the layers' bytecode)."""
    for source in SOURCES:
        if not compileall.compile_dir(source, quiet=1):
            raise RuntimeError(f"{source.relative_to(ROOT)} does not compile")


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    env.update(QUIET_ENV)
    env.update(extra)
    return env


def pinned(cpu: int | None) -> Callable[[], None] | None:
    if cpu is None:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


def say(message: str) -> None:
    print(message, flush=True)


# -- processes -------------------------------------------------------------------------------


@contextlib.contextmanager
def model_server() -> Iterator[str]:
    process = subprocess.Popen(
        [PY, str(ROOT / "bench" / "llm_server.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env=base_env(),
        text=True,
        preexec_fn=pinned(SERVER_CPU),
    )
    try:
        assert process.stdout is not None
        url = json.loads(process.stdout.readline())["url"]
        yield url
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_get_ok(port: int, path: str) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(
                f"GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n".encode()
            )
            return sock.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


class App:
    """The chat app under uvicorn, started the way run.sh starts it on Lambda."""

    def __init__(
        self, server: str, target: str = "chat_app:app", env: dict[str, str] | None = None
    ) -> None:
        self.port = free_port()
        self.log = tempfile.TemporaryFile()  # noqa: SIM115  (closed by stop())
        self.started = time.perf_counter()
        command = [PY, "-m", "uvicorn", "--app-dir", "functions/chat", "--host", "127.0.0.1"]
        command += ["--port", str(self.port), "--no-access-log", target]
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=base_env(GROQ_BASE_URL=server, GROQ_API_KEY="bench-key", **(env or {})),
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            preexec_fn=pinned(MEASURED_CPU),
        )

    def wait_ready(self, timeout: float = 60) -> float:
        """Seconds from spawn until GET /healthz answered 200."""
        deadline = time.perf_counter() + timeout
        while not http_get_ok(self.port, "/healthz"):
            if self.process.poll() is not None or time.perf_counter() > deadline:
                raise RuntimeError(f"the chat app did not start: {self.log_tail()}")
            time.sleep(0.002)
        return time.perf_counter() - self.started

    def log_tail(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-400:]

    def peak_rss_mb(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
        return int(line.split()[1]) / 1024

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def chat(port: int, task: str, run_id: str) -> tuple[str, float]:
    """One POST /chat from this process; (answer, seconds)."""
    import asyncio

    body = json.dumps(
        {
            "messages": [{"role": "user", "content": tasks.prompt(task, run_id)}],
            "tools": list(tasks.TOOL_NAMES.get(task, ())),
            "max_iterations": 20,
        }
    ).encode()
    started = time.perf_counter()
    answer, _ = asyncio.run(post_chat("127.0.0.1", port, body))
    return answer, time.perf_counter() - started


def worker(
    spec: dict[str, Any], env: dict[str, str] | None = None, cpu: int | None = MEASURED_CPU
) -> dict[str, Any]:
    """Run bench/worker.py in a fresh process; a crash becomes a failed result."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        spec = {**spec, "out": out.name}
        try:
            done = subprocess.run(
                [PY, "-m", "bench.worker", json.dumps(spec)],
                cwd=ROOT,
                env=env or base_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=WORKER_TIMEOUT_S,
                preexec_fn=pinned(cpu),
            )
        except subprocess.TimeoutExpired:
            return {"runs": [{"ok": False, "why": f"timed out after {WORKER_TIMEOUT_S} s"}]}
        text = Path(out.name).read_text()
        if done.returncode != 0 or not text:
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
            why = f"worker exited {done.returncode}: {tail[0][:200]}"
            return {"runs": [{"ok": False, "why": why}]}
        result: dict[str, Any] = json.loads(text)
        return result


# -- figures ---------------------------------------------------------------------------------


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def outcome(result: dict[str, Any], *fields: str) -> dict[str, Any]:
    """Medians (with min–max) of each field over the runs, or why the contender failed."""
    runs = result.get("runs", [])
    failed = [r for r in runs if not r.get("ok")]
    if failed or not runs:
        why = failed[0]["why"] if failed else "no runs"
        return {"ok": False, "why": why, "runs": len(runs)}
    out: dict[str, Any] = {"ok": True, "runs": len(runs)}
    for name in fields:
        values = [r[name] for r in runs if name in r]
        if values:
            out[name] = summary(values)
    return out


IMPORT_ROWS = {
    "sdk-groq": ("import groq", "groq"),
    "sdk-openai": ("import openai", "openai"),
    "agentloop-app": (CONTENDERS["agentloop-app"].imports, "groq"),
    "agentloop-groq": (CONTENDERS["agentloop-groq"].imports, "groq"),
    "agentloop-openai": (CONTENDERS["agentloop-openai"].imports, "openai"),
    **{key: (CONTENDERS[key].imports, "openai") for key in PEERS},
}
COLD_ROUNDS = {"sdk-groq": 31, "agentloop-app": 31, "agentloop-groq": 7, "sdk-openai": 7}
"""How many times each row is imported: the two rows of the target most often (the machine's
speed drifts, so their ratio needs many pairs), the frameworks (slow) ``PEER_COLD_RUNS``."""


def time_import(code: str, **env: str) -> tuple[float, float]:
    """(ms the imports took inside the process, ms from spawn until they were done); ``env``
    is added to the process's environment."""
    child = (
        "import time as _t\n_s = _t.perf_counter()\n"
        + code
        + "\nimport sys as _y\n_y.stdout.write('%.3f\\n' % ((_t.perf_counter() - _s) * 1000))"
        + "\n_y.stdout.flush()\n"
    )
    started = time.perf_counter()
    process = subprocess.Popen(
        [PY, "-c", child],
        cwd=ROOT,
        env=base_env(PYTHONPATH=str(ROOT / "functions" / "chat"), **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=pinned(MEASURED_CPU),
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    ready = (time.perf_counter() - started) * 1000
    _, err = process.communicate(timeout=60)
    if process.returncode != 0 or not line:
        raise RuntimeError(err.decode(errors="replace").strip().splitlines()[-1])
    return float(line), ready


def fig_cold(server: str) -> dict[str, Any]:
    """Imports in fresh processes, round-robin (so a slow spell of a shared machine hits
    every row alike), each ``COLD_ROUNDS`` times."""
    rows: dict[str, Any] = {}
    samples: dict[str, list[tuple[float, float]]] = {key: [] for key in IMPORT_ROWS}
    for key, (code, _) in IMPORT_ROWS.items():
        try:
            time_import(code)  # warms the page cache: not kept
        except Exception as exc:  # an import that fails is a row that says so
            rows[key] = {"ok": False, "why": str(exc)[:200], "code": code}
    for round_ in range(max(COLD_ROUNDS.values())):
        for key, (code, _) in IMPORT_ROWS.items():
            if key in rows or round_ >= COLD_ROUNDS.get(key, PEER_COLD_RUNS):
                continue
            samples[key].append(time_import(code))
    for key, (code, provider) in IMPORT_ROWS.items():
        if key in rows:
            continue
        base = samples[f"sdk-{provider}"]
        mine = samples[key]
        rows[key] = {
            "ok": True,
            "code": code,
            "runs": len(mine),
            "import_ms": summary([s[0] for s in mine]),
            "ready_ms": summary([s[1] for s in mine]),
            # Round by round (each round imports every row back to back), then the median.
            "import_ratio": statistics.median(
                a[0] / b[0] for a, b in zip(mine, base, strict=False)
            ),
            "ready_ratio": statistics.median(a[1] / b[1] for a, b in zip(mine, base, strict=False)),
        }
        say(f"  cold start {key:<16} {rows[key]['import_ms']['median']:8.1f} ms import")
    # The chat app as Lambda Web Adapter starts it: spawn -> /healthz -> first answer; and
    # the same for the least app on the bare SDK (bench/floor_app.py), turn about.
    apps = {"app-uvicorn": "chat_app:app", "floor-app-uvicorn": "bench.floor_app:app"}
    timings: dict[str, list[tuple[float, float]]] = {key: [] for key in apps}
    try:
        for i in range(APP_COLD_RUNS + 1):
            for key, target in apps.items():
                app = App(server, target)
                try:
                    ready = app.wait_ready()
                    answer, _ = chat(app.port, "ping", f"cold{i}{key.replace('-', '')}")
                    total = time.perf_counter() - app.started
                finally:
                    app.stop()
                if answer != tasks.expected_answer("ping"):
                    raise RuntimeError(f"{target}: the first answer was {answer[:80]!r}")
                if i:  # the first start warms the page cache: not kept
                    timings[key].append((ready * 1000, total * 1000))
        groq_ready = statistics.median(s[1] for s in samples["sdk-groq"])
        floor = timings["floor-app-uvicorn"]
        for key in apps:
            mine = timings[key]
            rows[key] = {
                "ok": True,
                "runs": len(mine),
                "healthz_ms": summary([t[0] for t in mine]),
                "first_answer_ms": summary([t[1] for t in mine]),
                # vs spawn -> `import groq` done (not interleaved: medians), and vs the floor app
                # (interleaved: the median of the start-by-start ratios).
                "healthz_vs_sdk": statistics.median(t[0] for t in mine) / groq_ready,
                "first_answer_vs_sdk": statistics.median(t[1] for t in mine) / groq_ready,
                "healthz_vs_floor": statistics.median(
                    a[0] / b[0] for a, b in zip(mine, floor, strict=True)
                ),
                "first_answer_vs_floor": statistics.median(
                    a[1] / b[1] for a, b in zip(mine, floor, strict=True)
                ),
            }
            say(f"  cold start {key:<18} healthz {rows[key]['healthz_ms']['median']:6.1f} ms")
    except Exception as exc:
        for key in apps:
            rows[key] = {"ok": False, "why": str(exc)[:300]}
    rows["breakdown"] = import_breakdown("import chat_app", after="import groq")
    rows["startup_breakdown"] = import_breakdown(
        "import uvicorn.main, chat_app\n"
        "from agentloop.defaults import default_registry\ndefault_registry()"
    )
    return rows


def import_breakdown(code: str, after: str | None = None) -> list[dict[str, Any]]:
    """What ``code`` imports (once ``after`` has run), by ``python -X importtime``: each
    module imported at the top level with its cumulative ms and its heaviest direct imports.
    A dependency is charged to the first module that imports it."""
    done = subprocess.run(
        [PY, "-X", "importtime", "-c", f"{after or ''}\n{code}"],
        cwd=ROOT,
        env=base_env(PYTHONPATH=str(ROOT / "functions" / "chat"), AGENTLOOP_AUTH_MODE="none"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    rows: list[tuple[float, int, str]] = []
    for line in done.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[0].strip().isdigit():
            name = parts[2].rstrip()
            depth = (len(name) - len(name.lstrip())) // 2
            rows.append((int(parts[1]) / 1000, depth, name.strip()))
    if after is not None:  # -X importtime lists a module after its imports: skip through it
        last = after.split()[-1]
        rows = rows[next((i + 1 for i, r in enumerate(rows) if r[2] == last and r[1] == 0), 0) :]
    out: list[dict[str, Any]] = []
    children: list[tuple[float, str]] = []
    for ms, depth, name in rows:
        if depth == 1:
            children.append((ms, name))
        elif depth == 0:
            top = sorted(children, reverse=True)[:6]
            out.append({"module": name, "ms": ms, "children": [[n, m] for m, n in top]})
            children = []
    return sorted(out, key=lambda r: -r["ms"])[:6]


class Pool:
    """One ``bench/worker.py serve`` process per contender, all built up front; runs are
    handed out one at a time, round-robin, so no contender gets the quiet minutes of a
    shared machine and another the busy ones. Idle workers wait on a pipe (no CPU)."""

    def __init__(self, server: str, places: dict[str, tuple[dict[str, str], int | None]]) -> None:
        self.workers: dict[str, subprocess.Popen[str]] = {}
        self.logs: dict[str, Any] = {}
        self.failed: dict[str, str] = {}
        for key, (env, cpu) in places.items():
            self.logs[key] = tempfile.TemporaryFile()  # noqa: SIM115  (closed by close())
            spec = {"mode": "serve", "contender": key, "server": server}
            self.workers[key] = subprocess.Popen(
                [PY, "-m", "bench.worker", json.dumps(spec)],
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.logs[key],
                text=True,
                preexec_fn=pinned(cpu),
            )
        for key in list(self.workers):
            answer = self._read(key, WORKER_TIMEOUT_S)
            if answer is not None and not answer.get("ready"):
                self._fail(key, answer.get("why", "did not start"))

    def _fail(self, key: str, why: str) -> None:
        self.failed[key] = why
        process = self.workers.pop(key)
        process.kill()
        process.wait()

    def _read(self, key: str, timeout: float) -> dict[str, Any] | None:
        process = self.workers[key]
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], timeout)
        line = process.stdout.readline() if ready else ""
        if not line:
            self.logs[key].seek(0)
            tail = self.logs[key].read().decode(errors="replace").strip().splitlines()
            why = "timed out" if not ready else f"exited: {(tail or ['?'])[-1][:200]}"
            self._fail(key, why)
            return None
        answer: dict[str, Any] = json.loads(line)
        return answer

    def run(self, key: str, task: str, run_id: str) -> dict[str, Any]:
        if key in self.failed:
            return {"ok": False, "why": self.failed[key]}
        process = self.workers[key]
        assert process.stdin is not None
        process.stdin.write(json.dumps({"task": task, "run": run_id}) + "\n")
        process.stdin.flush()
        record = self._read(key, WORKER_TIMEOUT_S)
        return record if record is not None else {"ok": False, "why": self.failed[key]}

    def close(self) -> None:
        for process in self.workers.values():
            assert process.stdin is not None
            process.stdin.close()
        for process in self.workers.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for log in self.logs.values():
            log.close()


FIELDS = (
    "ms",
    "calls",
    "prompt_tokens",
    "prompt_chars",
    "tool_phase_ms",
    "tool_span_ms",
    "first_text_ms",
)


def fig_tasks(
    server: str,
    task: str,
    keys: tuple[str, ...],
    places: dict[str, tuple[dict[str, str], int | None]] | None = None,
) -> dict[str, Any]:
    """``task`` run by every contender in ``keys``: warm-up runs, then ``RUNS[task]`` rounds."""
    where = {key: (base_env(), MEASURED_CPU) for key in keys} | (places or {})
    pool = Pool(server, where)
    runs: dict[str, list[dict[str, Any]]] = {key: [] for key in keys}
    try:
        for key in keys:
            for i in range(WARMUP[task]):
                record = pool.run(key, task, f"{task}w{i}{key.replace('-', '')}")
                if not record["ok"]:  # a contender that fails its warm-up fails the figure
                    runs[key].append({**record, "why": f"warm-up: {record['why']}"})
                    break
        for round_ in range(RUNS[task]):
            order = keys[round_ % len(keys) :] + keys[: round_ % len(keys)]
            for key in order:
                if runs[key] and not runs[key][-1]["ok"]:
                    continue  # failed once: the row says why, it is not timed further
                runs[key].append(pool.run(key, task, f"{task}r{round_}{key.replace('-', '')}"))
    finally:
        pool.close()
    rows: dict[str, Any] = {}
    for key in keys:
        row = outcome({"runs": runs[key]}, *FIELDS, "reported_prompt_tokens")
        floor = "floor-groq" if CONTENDERS[key].provider == "groq" else "floor-openai"
        if row["ok"] and floor in runs and not key.startswith("floor"):
            # Run by run against the floor's run of the same round: the machine's speed
            # drifts, so this is steadier than the ratio of the two medians.
            pairs = zip(runs[key], runs[floor], strict=False)
            ratios = [a["ms"] / b["ms"] for a, b in pairs if a.get("ok") and b.get("ok")]
            if ratios:
                row["ms_ratio"] = statistics.median(ratios)
        rows[key] = row
        if row["ok"]:
            shown = {f: round(row[f]["median"], 1) for f in FIELDS if f in row}
            say(f"  {task:<8} {key:<20} {shown}")
        else:
            say(f"  {task:<8} {key:<20} FAILED: {row['why']}")
    return rows


def fig_loop(server: str) -> dict[str, Any]:
    """The loop task by every contender, then where agentloop's own time went (the profile
    of a worker running it, printed so a regression shows its source)."""
    rows = fig_tasks(server, "loop", IN_PROCESS)
    found = worker({"mode": "profile", "server": server, "contender": "agentloop-groq"})
    if "top" in found:
        rows["profile"] = found
        say(f"  loop     agentloop's own code: {found['own_ms_per_call']:.3f} ms per model call")
        for name, ms in found["top"]:
            say(f"    {ms:6.3f} ms/call  {name}")
    else:
        say(f"  loop     profile FAILED: {found['runs'][0]['why']}")
    return rows


def started_app(server: str) -> Callable[[dict[str, str]], App]:
    """What a figure of two apps calls to start one with more environment, ready."""

    def start(env: dict[str, str]) -> App:
        app = App(server, env=env)
        app.wait_ready()
        return app

    return start


def fig_signin(server: str) -> dict[str, Any]:
    """What checking a JWT (its keys cached) adds to a request (``bench/signin.py``)."""
    from bench import signin

    try:
        rows: dict[str, Any] = signin.measure(started_app(server), say)
    except Exception as exc:  # a figure that cannot run is a row that says why
        return {"jwt RS256": {"ok": False, "why": str(exc)[:300]}}
    return rows


def fig_limits(server: str) -> dict[str, Any]:
    """What a caller's limits add to a request on the embedded store (``bench/limits.py``)."""
    from bench import limits

    ping = tasks.expected_answer("ping")
    try:
        rows: dict[str, Any] = limits.measure(started_app(server), chat, ping, say)
    except Exception as exc:  # a figure that cannot run is a row that says why
        return {"limits on": {"ok": False, "why": str(exc)[:300]}}
    return rows


def fig_threads(server: str) -> dict[str, Any]:
    """What a run on a 50-message thread adds on the embedded store (``bench/threads.py``)."""
    from bench import threads
    from bench.contenders import post_chat

    try:
        rows: dict[str, Any] = threads.measure(started_app(server), post_chat, say)
    except Exception as exc:  # a figure that cannot run is a row that says why
        return {"on a thread": {"ok": False, "why": str(exc)[:300]}}
    return rows


def fig_sandbox() -> dict[str, Any]:
    """execute_code's round trip: ``print(1)`` and a chart, cold and warm (bench/sandbox.py)."""
    from bench import sandbox

    try:
        rows: dict[str, Any] = sandbox.measure(say)
    except Exception as exc:  # a figure that cannot run is a row that says why
        return {"print(1)": {"ok": False, "why": str(exc)[:300]}}
    return rows


def fig_stream(server: str) -> dict[str, Any]:
    app = App(server)
    try:
        app.wait_ready()
    except Exception as exc:
        app.stop()
        rows = fig_tasks(server, "stream", IN_PROCESS)
        rows["agentloop-app"] = {"ok": False, "why": str(exc)[:300]}
        return rows
    try:
        # The app's HTTP client shares CPU 0 with the model server (idle between chunks);
        # the app itself has CPU 1, where the in-process contenders run their turns.
        env = base_env(BENCH_APP_URL=f"http://127.0.0.1:{app.port}")
        return fig_tasks(
            server,
            "stream",
            (*IN_PROCESS, "agentloop-app"),
            {"agentloop-app": (env, SERVER_CPU)},
        )
    finally:
        app.stop()


def fig_faces(server: str) -> dict[str, Any]:
    """Each protocol face of one chat app, by its own client (``bench/faces.py``); the
    clients share CPU 0 with the model server, as the streaming figure's client does."""
    from bench import faces

    app = App(server)
    try:
        app.wait_ready()
        url = f"http://127.0.0.1:{app.port}"
        return faces.measure(server, url, base_env(), pinned(SERVER_CPU), say)
    except Exception as exc:  # a figure that cannot run is a row that says why
        return {face: {"ok": False, "why": str(exc)[:300]} for face in faces.FACES}
    finally:
        app.stop()


def fig_memory(server: str) -> dict[str, Any]:
    """Peak RSS of fresh processes. Timing does not matter here, so a contender's samples
    run side by side (on every CPU) to keep the whole bench short."""
    from concurrent.futures import ThreadPoolExecutor

    rows: dict[str, Any] = {}
    spec = {"mode": "memory", "server": server, "runs": 1}
    with ThreadPoolExecutor(max_workers=max(1, len(os.sched_getaffinity(0)))) as threads:
        for key in ("none", *IN_PROCESS):
            one = {**spec, "contender": key}
            results = list(threads.map(lambda s: worker(s, cpu=None), [one] * RUNS["memory"]))
            runs = [(r.get("runs") or [{"ok": False, "why": "no result"}])[0] for r in results]
            bad = [r["why"] for r in runs if not r["ok"]]
            if bad:
                rows[key] = {"ok": False, "why": bad[0]}
                say(f"  memory   {key:<20} FAILED: {bad[0]}")
                continue
            samples = [r["max_rss_mb"] for r in results]
            rows[key] = {"ok": True, "runs": len(samples), "rss_mb": summary(samples)}
            for part in report.MEMORY_PARTS:
                if all(part in r for r in results):
                    rows[key][part] = summary([r[part] for r in results])
            say(f"  memory   {key:<20} {rows[key]['rss_mb']['median']:6.1f} MB")
    # The deployed shape: uvicorn + chat app (with the bench tools), one 10-turn /chat.
    samples = []
    try:
        for i in range(RUNS["memory"]):
            app = App(server, "bench.chat_app_with_tools:app")
            try:
                app.wait_ready()
                answer, _ = chat(app.port, "loop", f"mem{i}")
                rss = app.peak_rss_mb()
            finally:
                app.stop()
            if answer != tasks.expected_answer("loop"):
                raise RuntimeError(f"answer {answer[:80]!r}")
            samples.append(rss)
        rows["agentloop-app"] = {"ok": True, "runs": len(samples), "rss_mb": summary(samples)}
        say(f"  memory   {'agentloop-app':<20} {statistics.median(samples):6.1f} MB")
    except Exception as exc:
        rows["agentloop-app"] = {"ok": False, "why": str(exc)[:300]}
    return rows


def fig_docs(server: str) -> dict[str, Any]:
    keys = ("agentloop-groq-full", "agentloop-groq", "floor-groq", "floor-openai", *PEERS)
    rows = fig_tasks(server, "docs", keys)
    check = worker({"mode": "compaction-check", "contender": "none", "server": server, "runs": 1})
    rows["compaction.py"] = (
        check if "off" in check else {"ok": False, "why": check["runs"][0]["why"]}
    )
    turns, chars = tasks.doc_shape()
    rows["shape"] = {"turns": turns, "chars": chars}
    return rows


def fig_research() -> dict[str, Any]:
    script = ROOT / "bench" / "research_throughput.py"
    if not script.exists():
        return {"ok": False, "why": "bench/research_throughput.py is missing"}
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [PY, str(script)],
            cwd=ROOT,
            env=base_env(),
            capture_output=True,
            text=True,
            timeout=RESEARCH_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "why": f"bench/research_throughput.py ran over {RESEARCH_TIMEOUT_S} s"}
    output = done.stdout.strip()
    say("  " + "\n  ".join(output.splitlines()))
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"ok": False, "why": f"exited {done.returncode}: {tail[:300]}", "output": output}
    return {"ok": True, "output": output, "seconds": time.perf_counter() - started}


# -- the machine -----------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory = ""
    with contextlib.suppress(OSError, StopIteration):
        line = next(
            x for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemTotal")
        )
        memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    names = (
        "agentloop", "openai", "groq", "httpx", "pydantic", "starlette", "uvicorn",
        "openai-agents", "pydantic-ai-slim", "smolagents", "strands-agents", "langgraph",
        "langchain-core", "langchain-openai", "matplotlib",
    )  # fmt: skip
    versions = {}
    for name in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": memory,
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
        "versions": versions,
        "commit": commit or "unknown",
        "pinned": SERVER_CPU is not None,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


# -- tracing: what OpenTelemetry spans cost -----------------------------------------------------

TRACING_COLD_ROUNDS = 15
TRACING_RUNS = 21
TRACING_FIRST_USE = (
    "import chat_app\nfrom agentloop import tracing\ntracing.observer([], None, 'openai:m')"
)
"""The chat app, then what its first request does about tracing (off: nothing is imported;
on: the SDK and the OTLP/HTTP exporter are imported and the provider is made)."""


@contextlib.contextmanager
def otlp_sink() -> Iterator[tuple[str, list[int]]]:
    """A collector stand-in on loopback: takes OTLP/HTTP posts, answers 200, keeps their sizes."""
    import http.server
    import threading

    sizes: list[int] = []

    class Sink(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            sizes.append(len(self.rfile.read(int(self.headers.get("content-length", 0)))))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", sizes
    finally:
        server.shutdown()
        server.server_close()


def fig_tracing(server: str) -> dict[str, Any]:
    """Tracing off vs on: the first request's imports in fresh processes, and the loop task's
    time per model call in warm workers (on: spans exported over OTLP/HTTP to a loopback
    sink, flushed at the end of each run), the two taking turns."""
    rows: dict[str, Any] = {}
    with otlp_sink() as (sink, sizes):
        on_env = {"AGENTLOOP_TRACING": "on", "OTEL_EXPORTER_OTLP_ENDPOINT": sink}
        envs = {"off": {"AGENTLOOP_TRACING": "off"}, "on": on_env}
        cold: dict[str, list[tuple[float, float]]] = {key: [] for key in envs}
        for env in envs.values():
            time_import(TRACING_FIRST_USE, **env)  # warms the page cache: not kept
        for _ in range(TRACING_COLD_ROUNDS):
            for key, env in envs.items():
                cold[key].append(time_import(TRACING_FIRST_USE, **env))
        for key, samples in cold.items():
            rows[f"cold-{key}"] = {
                "ok": True,
                "code": TRACING_FIRST_USE,
                "runs": len(samples),
                "import_ms": summary([s[0] for s in samples]),
            }
        rows["cold-added_ms"] = statistics.median(
            a[0] - b[0] for a, b in zip(cold["on"], cold["off"], strict=True)
        )
        off_key, on_key = "agentloop-openai", "agentloop-openai+tracing"
        places = {
            off_key: (base_env(AGENTLOOP_TRACING="off"), MEASURED_CPU),
            on_key: (base_env(**on_env), MEASURED_CPU),
        }
        pool = Pool(server, places)
        runs: dict[str, list[dict[str, Any]]] = {key: [] for key in places}
        try:
            for key in places:
                for i in range(WARMUP["loop"]):
                    pool.run(key, "loop", f"tracew{i}{key.replace('-', '').replace('+', '')}")
            for round_ in range(TRACING_RUNS):
                order = [off_key, on_key] if round_ % 2 == 0 else [on_key, off_key]
                for key in order:
                    tag = key.replace("-", "").replace("+", "")
                    runs[key].append(pool.run(key, "loop", f"tracer{round_}{tag}"))
        finally:
            pool.close()
        for key, name in ((off_key, "agentloop-turns-off"), (on_key, "agentloop-turns-on")):
            row = outcome({"runs": runs[key]}, "ms", "calls")
            if row["ok"]:
                per_call = [r["ms"] / max(1, r["calls"]) for r in runs[key]]
                row["per_call_ms"] = summary(per_call)
            rows[name] = row
        if rows["agentloop-turns-off"]["ok"] and rows["agentloop-turns-on"]["ok"]:
            pairs = zip(runs[on_key], runs[off_key], strict=True)
            rows["turns-added_ms_per_call"] = statistics.median(
                (a["ms"] - b["ms"]) / max(1, a["calls"]) for a, b in pairs
            )
        rows["exported_bytes"] = sum(sizes)
        rows["exports"] = len(sizes)
    for key in ("cold-off", "cold-on", "agentloop-turns-off", "agentloop-turns-on"):
        row = rows[key]
        shown = row.get("import_ms", row.get("per_call_ms", {})).get("median")
        say(f"  tracing {key:<10} {shown if shown is None else round(shown, 2)}")
    return rows


# -- main ------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", default=",".join(FIGURES), help=",".join(FIGURES))
    parser.add_argument("--report-only", action="store_true", help="re-render the last results")
    args = parser.parse_args()
    chosen = [f.strip() for f in args.figures.split(",") if f.strip()]
    if unknown := set(chosen) - set(FIGURES):
        parser.error(f"unknown figures: {sorted(unknown)}")
    full = set(chosen) == set(FIGURES)

    if args.report_only:
        results = json.loads(RESULTS.read_text())
    else:
        started = time.perf_counter()
        compile_sources()
        results = {"machine": machine(), "figures": {}}
        say(f"make bench: {results['machine']['cpu']}, {results['machine']['cores']} cores")
        with model_server() as server:
            steps: dict[str, Callable[[], dict[str, Any]]] = {
                "cold": lambda: fig_cold(server),
                "loop": lambda: fig_loop(server),
                "parallel": lambda: fig_tasks(server, "parallel", IN_PROCESS),
                "stream": lambda: fig_stream(server),
                "faces": lambda: fig_faces(server),
                "memory": lambda: fig_memory(server),
                "docs": lambda: fig_docs(server),
                "research": fig_research,
                "tracing": lambda: fig_tracing(server),
                "signin": lambda: fig_signin(server),
                "limits": lambda: fig_limits(server),
                "threads": lambda: fig_threads(server),
                "sandbox": fig_sandbox,
            }
            for name in chosen:
                say(f"[{name}]")
                figure_started = time.perf_counter()
                results["figures"][name] = steps[name]()
                say(f"[{name}: {time.perf_counter() - figure_started:.0f} s]")
        results["seconds"] = time.perf_counter() - started
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        saved = RESULTS if full else RESULTS.with_name("results-partial.json")
        saved.write_text(json.dumps(results, indent=1))
    page = report.markdown(results)
    print()
    print(page)
    if full or (args.report_only and set(results["figures"]) == set(FIGURES)):
        (ROOT / "docs" / "benchmarks.md").write_text(page)
        report.chart(results, ROOT / "docs" / "benchmarks.png")
        say("wrote docs/benchmarks.md and docs/benchmarks.png")
    failures = report.failures(results)
    for line in failures:
        say(f"FAILED: {line}")
    # A framework that fails is reported, not fatal; agentloop failing its own tasks is.
    return 1 if any(line.startswith("agentloop") for line in failures) else 0


if __name__ == "__main__":
    raise SystemExit(main())
