# ruff: noqa: RUF001, RUF003  (the page uses typographic signs: ×, –, −)
"""docs/benchmarks.md and docs/benchmarks.png from the results of one ``bench/run.py`` run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import tasks
from bench.contenders import CONTENDERS, PEERS

SIGNIN_TARGET_MS = 1.0
LIMITS_TARGET_MS = 2.0
THREADS_TARGET_MS = 5.0
"""Issue 27: loading a 50-message thread and saving a run, on SQLite."""
STORE_CALLS_BEFORE = 2
STORE_CALLS_AFTER = 1
LOOP_TARGET = 1.03
PER_CALL_TARGET_MS = 0.2
IMPORT_TARGET = 1.15
COLD_TARGET = 1.25
MEMORY_OVER_FLOOR_MB = 2.0
MEMORY_PARTS = ("python_mb", "malloc_mb", "file_mb")
"""Where a contender's memory is at the end of its run (``bench/worker.py``'s memory_parts)."""
PARALLEL_TARGET = 1.05
STREAM_TARGET_MS = 5.0
TOKENS_TARGET = 0.6

LABELS = {
    "sdk-groq": "groq SDK alone",
    "sdk-openai": "openai SDK alone",
    "none": "Python + the bench harness, nothing else",
    "agentloop-groq-full": "agentloop (Groq), compaction off: full history",
    "agentloop-groq": "agentloop (Groq provider)",
}
COLD_LABELS = {
    "agentloop-app": "agentloop chat app: everything its first request imports",
    "agentloop-groq": "agentloop library, Groq provider",
    "agentloop-openai": "agentloop library, OpenAI provider",
}


def label(key: str) -> str:
    if key in LABELS:
        return LABELS[key]
    return CONTENDERS[key].label if key in CONTENDERS else key


def floor_of(key: str) -> str:
    """The bare-SDK loop a row is compared with: Groq's for Groq rows, else OpenAI's."""
    return (
        "floor-groq" if key in CONTENDERS and CONTENDERS[key].provider == "groq" else "floor-openai"
    )


def med(row: dict[str, Any], field: str) -> float | None:
    if not row.get("ok") or field not in row:
        return None
    return float(row[field]["median"])


def cell(row: dict[str, Any], field: str, digits: int = 1, unit: str = "") -> str:
    if not row.get("ok"):
        return "failed"
    if field not in row:
        return "—"
    s = row[field]
    f = f"{{:,.{digits}f}}"
    spread = f"{f.format(s['min'])}–{f.format(s['max'])}"
    return f"{f.format(s['median'])}{unit} ({spread})"


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "—"
    return f"{a / b:.2f}×"


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def failed_note(row: dict[str, Any]) -> str:
    return f"failed: {row.get('why', '?')}"


class Page:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.targets: list[tuple[str, str, bool | None]] = []

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        self.add("| " + " | ".join(header) + " |", "|" + "---|" * len(header))
        self.add(*("| " + " | ".join(r) + " |" for r in rows))
        self.add("")

    def target(self, name: str, measured: str, ok: bool | None) -> str:
        self.targets.append((name, measured, ok))
        return "n/a" if ok is None else verdict(ok)


# -- the figures -----------------------------------------------------------------------------


def cold(page: Page, fig: dict[str, Any]) -> None:
    page.add(
        "## 1. Cold start",
        "",
        "Fresh processes, each importing exactly what one agent run (or the chat app's first "
        "request) needs; the first of each is not kept (it warms the page cache). *import* is "
        "timed inside the process, *spawn → ready* from `Popen` until the process said it had "
        "imported (so it includes the interpreter's own start). The rows take turns, round by "
        "round, and the ratios are the medians of the round-by-round ratios to the provider SDK "
        "alone (`import groq` for the Groq rows, `import openai` for the others), which keeps "
        "a slow spell of the machine out of them. The chat app imports its provider SDK on its "
        "first request, so its row imports `chat_app` and `groq`. The last rows start the app "
        "as Lambda Web Adapter does (`uvicorn chat_app:app`: interpreter, uvicorn, the app, "
        "its default tools) and time until `GET /healthz` answers and until the first "
        "`POST /chat` has its whole answer (which imports `groq` and makes its client); next "
        "to them, turn about, the least app that does the same on the bare SDK "
        "(`bench/floor_app.py`: uvicorn, Starlette, the floor loop, `groq` imported on the "
        "first request). Their *× SDK alone* is to the median spawn → ready of `import groq`.",
        "",
    )
    rows = []
    order = [
        "sdk-groq",
        "agentloop-app",
        "agentloop-groq",
        "sdk-openai",
        "agentloop-openai",
        *PEERS,
    ]
    for key in order:
        row = fig.get(key, {})
        code = "; ".join(row.get("code", "?").splitlines())  # exactly what was timed
        name = COLD_LABELS.get(key, label(key))
        if not row.get("ok"):
            rows.append([name, f"`{code}`", "", failed_note(row), "", "", "", ""])
            continue
        target = ""
        if key == "agentloop-app":
            r = row["import_ratio"]
            sdk_ms = med(fig["sdk-groq"], "import_ms")
            target = page.target(
                f"cold start: the chat app's imports ≤ {IMPORT_TARGET}× `import groq`",
                f"{r:.3f}× ({med(row, 'import_ms'):.0f} vs {sdk_ms:.0f} ms)",
                r <= IMPORT_TARGET,
            )
        rows.append(
            [
                name,
                f"`{code}`",
                str(row["runs"]),
                cell(row, "import_ms"),
                f"{row['import_ratio']:.2f}×",
                cell(row, "ready_ms"),
                f"{row['ready_ratio']:.2f}×",
                target,
            ]
        )
    for key, what in (
        ("floor-app-uvicorn", "bare groq SDK app"),
        ("app-uvicorn", "agentloop chat app"),
    ):
        app = fig.get(key, {})
        target_app = (
            "`uvicorn chat_app:app`" if key == "app-uvicorn" else "`uvicorn bench.floor_app:app`"
        )
        if not app.get("ok"):
            rows.append([f"{what} under uvicorn", target_app, "", failed_note(app), "", "", "", ""])
            continue
        health_target = first_target = ""
        vs_floor = ""
        if key == "app-uvicorn":
            first_target = page.target(
                f"cold start under uvicorn: the chat app's first answer ≤ {COLD_TARGET}× the bare "
                "SDK app's",
                f"{app['first_answer_vs_floor']:.3f}× ({med(app, 'first_answer_ms'):.0f} vs "
                f"{med(fig['floor-app-uvicorn'], 'first_answer_ms'):.0f} ms); "
                f"{app['first_answer_vs_sdk']:.2f}× spawn → `import groq`",
                app["first_answer_vs_floor"] <= COLD_TARGET,
            )
            health_target = f"{app['healthz_vs_floor']:.2f}× the bare SDK app's"
            vs_floor = f"; {app['first_answer_vs_floor']:.2f}× the bare SDK app's"
        rows.append(
            [
                f"{what}: spawn → `/healthz` 200",
                target_app,
                str(app["runs"]),
                "",
                "",
                cell(app, "healthz_ms"),
                f"{app['healthz_vs_sdk']:.2f}×",
                health_target,
            ]
        )
        rows.append(
            [
                f"{what}: spawn → first `/chat` answered",
                f"{target_app} + one request",
                str(app["runs"]),
                "",
                "",
                cell(app, "first_answer_ms"),
                f"{app['first_answer_vs_sdk']:.2f}×",
                (first_target + vs_floor).lstrip("; "),
            ]
        )
    page.table(
        [
            "",
            "imports",
            "runs",
            "import, ms",
            "× SDK alone",
            "spawn → ready, ms",
            "× SDK alone",
            "target",
        ],
        rows,
    )

    def described(entries: list[dict[str, Any]]) -> str:
        out = []
        for entry in entries:
            inner = ", ".join(f"`{n}` {m:.0f}" for n, m in entry["children"] if m >= 1)
            out.append(f"`{entry['module']}` {entry['ms']:.0f}" + (f" ({inner})" if inner else ""))
        return "; ".join(out)

    if fig.get("breakdown"):
        page.add(
            "Where the time goes, by `python -X importtime` (cumulative ms with the heaviest "
            "direct imports in brackets; a shared dependency is charged to whichever module "
            "imports it first, and the tracing inflates every figure somewhat). "
            f"`import chat_app` once `groq` is imported: {described(fig['breakdown'])}.",
            "",
        )
    if fig.get("startup_breakdown"):
        page.add(
            "The app's start-up from nothing (uvicorn, the app, and the default tool registry "
            "that it builds before `/healthz` answers; `groq` is imported later, by the first "
            f"request): {described(fig['startup_breakdown'])}.",
            "",
        )


def _rounds(fig: dict[str, Any]) -> int:
    """How many timed runs each contender of a task figure had (the floors' count)."""
    return max(
        (int(fig.get(key, {}).get("runs", 0)) for key in ("floor-groq", "floor-openai")), default=0
    )


def loop(page: Page, fig: dict[str, Any]) -> None:
    page.add(
        "## 2. Loop overhead",
        "",
        f"{tasks.LOOP_TURNS} tool turns and an answer ({tasks.LOOP_TURNS + 1} model calls) "
        "against the scripted server answering at once, in-process, in one event loop after "
        "warm-up runs (a warm container); wall time per run. Everything streams. The floor is "
        "the hand-written loop on the same SDK (`bench/floor_groq.py`, `bench/floor_openai.py`); "
        "the frameworks use the openai SDK, so they are compared with its floor. The contenders "
        f"take turns run by run, {_rounds(fig)} rounds (a run's time varies by a tenth or more "
        "from one to the next on a shared machine: with fewer rounds the median ratio moved by "
        "±3% from one `make bench` to the next); *× floor* is the median of the run-by-run "
        "ratios to the floor's run of the same round. *Per call* is (median run − median "
        "floor run) / model calls. *Prompt characters* are what the model server received per "
        "run, every request's messages and tool definitions (compact JSON): the prompt is paid "
        "on every call.",
        "",
    )
    rows = [_loop_row(page, fig, key) for key in LOOP_ROWS]
    page.table(
        [
            "",
            "ms per run",
            "× floor",
            "model calls",
            "per call vs floor, ms",
            "prompt characters per run",
            "target",
        ],
        rows,
    )
    profile = fig.get("profile")
    if profile:
        page.add(
            "",
            f"Where agentloop's own time goes (Groq provider): {profile['runs']} warm runs of "
            "this task under pyinstrument's sampling profiler (every 0.1 ms), agentloop's "
            f"functions by time of their own. Its code took {profile['own_ms_per_call']:.3f} ms "
            "per model call in all while sampled (the profiler slows what it samples).",
            "",
        )
        page.table(
            ["function", "ms per model call"],
            [[f"`{name}`", f"{ms:.3f}"] for name, ms in profile["top"]],
        )


LOOP_ROWS = ("floor-groq", "agentloop-groq", "floor-openai", "agentloop-openai", *PEERS)


def _loop_row(page: Page, fig: dict[str, Any], key: str) -> list[str]:
    row = fig.get(key, {})
    if not row.get("ok"):
        return [label(key), failed_note(row), "", "", "", "", ""]
    base = fig.get(floor_of(key), {})
    ms, floor_ms = med(row, "ms"), med(base, "ms")
    paired = row.get("ms_ratio")
    shown_ratio = f"{paired:.2f}×" if paired is not None else ratio(ms, floor_ms)
    calls = med(row, "calls") or 1
    per_call = None if key.startswith("floor") or floor_ms is None else (ms - floor_ms) / calls
    chars, floor_chars = med(row, "prompt_chars"), med(base, "prompt_chars")
    shown_chars = "—" if chars is None else f"{chars:,.0f}"
    if chars is not None and floor_chars and not key.startswith("floor"):
        shown_chars += f" ({chars / floor_chars:.2f}×)"
    target = ""
    if key.startswith("agentloop") and ms is not None and per_call is not None:
        r = paired if paired is not None else ms / (floor_ms or ms)
        peer_medians = [med(fig.get(k, {}), "ms") for k in PEERS]
        beaten = [p for p in peer_medians if p is not None and p <= ms]
        ok = r <= LOOP_TARGET and per_call <= PER_CALL_TARGET_MS and not beaten
        target = page.target(
            f"loop overhead ({label(key)}): ≤ {LOOP_TARGET}× floor and ≤ "
            f"{PER_CALL_TARGET_MS} ms per call, below every framework",
            f"{r:.3f}× floor, {per_call:+.2f} ms per call; {len(beaten)} framework(s) at or "
            "below it",
            ok and all(p is not None for p in peer_medians),
        )
    return [
        label(key),
        cell(row, "ms"),
        shown_ratio,
        f"{calls:.0f}",
        "—" if per_call is None else f"{per_call:+.2f}",
        shown_chars,
        target,
    ]


def parallel(page: Page, fig: dict[str, Any]) -> None:
    slowest = tasks.WAIT_S * 1000
    page.add(
        "## 3. Parallel tools",
        "",
        f"One turn asking for three tool calls that each sleep {slowest:.0f} ms, then the answer. "
        "The *tool phase* is measured by the model server: from the last byte of the answer "
        "that asked for the tools to the arrival of the next request (reading the rest of the "
        "stream, running the tools, building the next request). *Tools running* is from the "
        "first tool's start to the last one's end, measured inside the tools.",
        "",
    )
    rows = []
    for key in ("floor-groq", "agentloop-groq", "floor-openai", "agentloop-openai", *PEERS):
        row = fig.get(key, {})
        if not row.get("ok"):
            rows.append([label(key), failed_note(row), "", "", "", "", ""])
            continue
        phase = med(row, "tool_phase_ms")
        target = ""
        if key.startswith("agentloop") and phase is not None:
            target = page.target(
                f"parallel tools ({label(key)}): tool phase ≤ {PARALLEL_TARGET}× slowest tool",
                f"{phase / slowest:.3f}× ({phase:.1f} ms)",
                phase / slowest <= PARALLEL_TARGET,
            )
        base = fig.get(floor_of(key), {})
        rows.append(
            [
                label(key),
                cell(row, "tool_phase_ms"),
                ratio(phase, slowest),
                cell(row, "tool_span_ms"),
                cell(row, "ms"),
                ratio(med(row, "ms"), med(base, "ms")),
                target,
            ]
        )
    page.table(
        [
            "",
            "tool phase, ms",
            f"× slowest tool ({slowest:.0f} ms)",
            "tools running, ms",
            "whole run, ms",
            "× floor",
            "target",
        ],
        rows,
    )


def stream(page: Page, fig: dict[str, Any]) -> None:
    page.add(
        "## 4. Streaming: first text",
        "",
        "From the moment the model server hands the first chunk with text to its socket to the "
        "moment the text reaches the caller: the floors' and frameworks' own streaming APIs "
        "in-process, agentloop's `handle_chat` in-process, and the chat app under uvicorn "
        "reached over loopback HTTP by a bare-socket client (first `text_delta` SSE frame). "
        "Both clocks are the machine's monotonic clock. Chunks are "
        f"{tasks.STREAM_CHUNK_DELAY_S * 1000:.0f} ms apart, so a framework that holds a chunk "
        "back until the next one shows it here.",
        "",
    )
    rows = []
    order = (
        "floor-groq",
        "agentloop-groq",
        "agentloop-app",
        "floor-openai",
        "agentloop-openai",
        *PEERS,
    )
    for key in order:
        row = fig.get(key, {})
        if not row.get("ok"):
            rows.append([label(key), failed_note(row), "", "", "", "", ""])
            continue
        first = med(row, "first_text_ms")
        floor_first = med(fig.get(floor_of(key), {}), "first_text_ms")
        added = None if first is None or floor_first is None else first - floor_first
        target = ""
        if key == "agentloop-app" and added is not None:
            target = page.target(
                f"streaming: the chat app adds < {STREAM_TARGET_MS:.0f} ms to the first text",
                f"{added:+.2f} ms",
                added < STREAM_TARGET_MS,
            )
        shown = "—" if key.startswith("floor") or added is None else f"{added:+.2f}"
        rows.append([label(key), cell(row, "first_text_ms", 2), shown, target])
    page.table(
        ["", "first text after it left the server, ms", "added vs floor, ms", "target"], rows
    )


def memory(page: Page, fig: dict[str, Any]) -> None:
    page.add(
        "## 5. Peak memory",
        "",
        f"Peak RSS of a fresh process that imports one contender, builds it and runs the "
        f"{tasks.LOOP_TURNS}-turn task once, read from `/proc/self/status` (`VmHWM`): on Linux "
        "`getrusage(RUSAGE_SELF).ru_maxrss` also keeps the high-water mark of the parent "
        "process image replaced at exec, so it reports the spawning process's size whenever "
        "that is larger (it equals `VmHWM` when started from a shell). The chat app row is "
        "the uvicorn process's `VmHWM` after serving that task once over `POST /chat` (its "
        "default tools registered too). Where the memory is at the end of the run (the peak "
        "is there): *Python objects* are pymalloc's allocated blocks (code, functions, "
        "classes, dicts, strings: every object of up to 512 bytes), *C heap* is what glibc's "
        "malloc has handed out (larger objects, and what extensions such as pydantic-core "
        "allocate), *files* the pages of the interpreter and the libraries it mapped.",
        "",
    )
    rows = []
    for key in (
        "none",
        "floor-groq",
        "agentloop-groq",
        "agentloop-app",
        "floor-openai",
        "agentloop-openai",
        *PEERS,
    ):
        row = fig.get(key, {})
        if not row.get("ok"):
            rows.append([label(key), failed_note(row), "", "", "", "", ""])
            continue
        rss = med(row, "rss_mb")
        floor_rss = med(fig.get(floor_of(key), {}), "rss_mb")
        target = ""
        if key in ("agentloop-groq", "agentloop-openai") and rss is not None and floor_rss:
            target = page.target(
                f"peak memory, import + {tasks.LOOP_TURNS} turns ({label(key)}): ≤ the bare "
                f"SDK loop's + {MEMORY_OVER_FLOOR_MB:g} MB",
                f"{rss:.1f} MB, {rss - floor_rss:+.1f} MB over {floor_rss:.1f}",
                rss - floor_rss <= MEMORY_OVER_FLOOR_MB,
            )
        base = "—" if key == "none" else ratio(rss, med(fig.get(floor_of(key), {}), "rss_mb"))
        parts = [cell(row, part, 1) if part in row else "" for part in MEMORY_PARTS]
        rows.append([label(key), cell(row, "rss_mb", 1), base, *parts, target])
    page.table(
        ["", "peak RSS, MB", "× floor", "Python objects, MB", "C heap, MB", "files, MB", "target"],
        rows,
    )


def docs(page: Page, fig: dict[str, Any]) -> None:
    shape = fig.get("shape", {})
    page.add(
        "## 6. Prompt tokens for a long, tool-heavy task",
        "",
        f"{shape.get('turns', '?')} tool turns, each returning {shape.get('chars', 0):,} "
        "characters (the shape of `bench/compaction.py`), then the answer. Prompt tokens are "
        "counted by the model server for every request of the run, as the scripted server "
        "reports them (characters / 4 of the messages). The model only answers once it has "
        "seen every document's marker and the newest document whole.",
        "",
    )
    full = fig.get("agentloop-groq-full", {})
    full_tokens = med(full, "prompt_tokens")
    rows = []
    for key in ("agentloop-groq-full", "agentloop-groq", "floor-groq", "floor-openai", *PEERS):
        row = fig.get(key, {})
        if not row.get("ok"):
            rows.append([label(key), failed_note(row), "", "", "", ""])
            continue
        tokens = med(row, "prompt_tokens")
        target = ""
        if key == "agentloop-groq" and tokens is not None and full_tokens is not None:
            same = full.get("ok", False)  # both rows passed the same answer check
            target = page.target(
                f"compaction: ≤ {TOKENS_TARGET}× the prompt tokens of full history, same answer",
                f"{tokens / full_tokens:.2f}×" + ("" if same else " (full history failed)"),
                same and tokens / full_tokens <= TOKENS_TARGET,
            )
        answer = f"`{tasks.expected_answer('docs')}`"
        rows.append(
            [
                label(key),
                cell(row, "prompt_tokens", 0),
                ratio(tokens, full_tokens),
                f"{med(row, 'calls') or 0:.0f}",
                answer,
                target,
            ]
        )
    page.table(["", "prompt tokens", "× full history", "model calls", "answer", "target"], rows)
    check = fig.get("compaction.py", {})
    if "off" in check:
        off, on = check["off"], check["on"]
        same = "the same answer" if off["answer"] == on["answer"] else "DIFFERENT answers"
        page.add(
            f"`bench/compaction.py`'s own task, run through its code: {off['prompt_tokens']:,} "
            f"prompt tokens with the full history, {on['prompt_tokens']:,} compacted "
            f"({on['prompt_tokens'] / off['prompt_tokens']:.2f}×), {same}.",
            "",
        )
    elif check:
        page.add(f"`bench/compaction.py` cross-check: {failed_note(check)}.", "")


def research(page: Page, fig: dict[str, Any]) -> None:
    page.add("## 7. Research worker throughput", "")
    if fig.get("output"):
        page.add(
            "`bench/research_throughput.py`, run by this benchmark in its virtualenv; its output:",
            "",
            "```",
            fig["output"],
            "```",
            "",
        )
    if not fig.get("ok"):
        page.table(["", ""], [["research worker", failed_note(fig)]])


def faces(page: Page, fig: dict[str, Any]) -> None:
    from bench.faces import CLIENTS, FACES, RUNS

    page.add(
        "## 8. Faces: first token to first text",
        "",
        "The same tool-less streamed answer (the streaming figure's task) asked of each "
        "protocol face of one chat app under uvicorn, each face driven by its own real client "
        "in a warm process on the model server's CPU (`bench/faces.py`; the two JavaScript "
        "clients under Node.js, `tests/node/bench_faces.mjs`): from the moment the model "
        "server hands its first text chunk to the socket to the moment the client library "
        "hands its caller the first text. Node's `process.hrtime` and Python's "
        "`time.monotonic` read the same monotonic clock as the model server. The faces take "
        f"turns run by run ({RUNS} rounds after warm-up runs); *× /chat* is the median of "
        "the round-by-round ratios to `/chat`'s run of the same round. `/chat` is read by a "
        "bare socket (its first `text_delta` frame), so the other rows include their client "
        "library's parsing as well as the face's translation.",
        "",
    )
    out = []
    for face in FACES:
        row = fig.get(face, {})
        if not row.get("ok"):
            out.append([f"`{face}`", CLIENTS[face], failed_note(row), "", ""])
            continue
        s = row["first_text_ms"]
        shown = "—" if face == "/chat" or "chat_ratio" not in row else f"{row['chat_ratio']:.2f}×"
        out.append(
            [
                f"`{face}`",
                CLIENTS[face],
                f"{s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f})",
                f"{s['p90']:.2f}",
                shown,
            ]
        )
    page.table(["face", "client", "first text, ms", "p90, ms", "× /chat"], out)


# -- the page --------------------------------------------------------------------------------


def tracing(page: Page, fig: dict[str, Any]) -> None:
    page.add(
        "## Tracing: what OpenTelemetry spans cost",
        "",
        "Tracing off (the default: nothing of OpenTelemetry is imported) and on "
        "(`AGENTLOOP_TRACING=on`, spans exported over OTLP/HTTP to a collector stand-in on "
        "loopback and flushed at the end of each run), taking turns. *Cold start*: fresh "
        "processes importing the chat app and doing what its first request does about tracing "
        "(on: importing the SDK and the exporter and making the provider); *added* is the "
        "median of the round-by-round differences. *Per model call*: the loop task "
        f"({tasks.LOOP_TURNS + 1} model calls, {tasks.LOOP_TURNS} tool calls) through "
        "`handle_chat` with the OpenAI provider in warm workers; the run's wall time divided by "
        "its model calls, the spans of the tool calls included.",
        "",
    )
    rows = []
    for key, name in (("cold-off", "cold start, off"), ("cold-on", "cold start, on")):
        row = fig.get(key, {})
        shown = cell(row, "import_ms") if row.get("ok") else failed_note(row)
        added = fig.get("cold-added_ms") if key.endswith("on") else None
        rows.append([name, f"{shown} ms", "" if added is None else f"{added:+.1f} ms"])
    for key, name in (
        ("agentloop-turns-off", "per model call, off"),
        ("agentloop-turns-on", "per model call, on"),
    ):
        row = fig.get(key, {})
        shown = cell(row, "per_call_ms", digits=2) if row.get("ok") else failed_note(row)
        added = fig.get("turns-added_ms_per_call") if key.endswith("on") else None
        rows.append([name, f"{shown} ms", "" if added is None else f"{added:+.2f} ms"])
    page.table(["", "median (min–max)", "added by tracing"], rows)
    page.add(
        f"{fig.get('exports', 0)} OTLP exports, {fig.get('exported_bytes', 0) / 1024:.0f} KB "
        "in all, reached the collector stand-in.",
        "",
    )


def signin(page: Page, fig: dict[str, Any]) -> None:
    page.add(
        "## Sign-in: what checking a JWT adds to a request",
        "",
        "Two chat apps under uvicorn: one checking bearer JWTs against an OpenID Connect "
        "issuer on loopback (`AGENTLOOP_AUTH_MODE=jwt`; discovery and a JWKS with an RSA and an "
        "EC key), one with auth off. `GET /v1/models`, an authenticated route that does nothing "
        "else, over one kept-alive connection each, taking turns round by round; the warm-up "
        "requests fetch the keys, so the timed ones check with the keys cached. *Added* is the "
        "median of the round-by-round differences to the app without auth.",
        "",
    )
    added_table(
        page,
        fig,
        {"none": "auth off", "jwt RS256": "jwt RS256", "jwt ES256": "jwt ES256"},
        ("GET /v1/models, ms", 3),
        lambda key: (
            f"sign-in: checking a JWT ({key.split()[-1]}) with its key cached adds ≤ "
            f"{SIGNIN_TARGET_MS:g} ms per request"
        ),
        SIGNIN_TARGET_MS,
    )
    page.add(f"The issuer's JWKS was fetched {fig.get('jwks_fetches', '?')} time(s).", "")


def limits(page: Page, fig: dict[str, Any]) -> None:
    page.add(
        "## Limits: what a caller's limits add to a request",
        "",
        "Two chat apps under uvicorn: one with `AGENTLOOP_LIMITS` (every kind of limit, set high "
        "enough never to refuse) on the embedded store (SQLite), one without limits. A one-call "
        "`POST /chat`, taking turns round by round; each request with limits admits its run "
        "(one store query, one transaction) before the model call and settles it (one "
        "transaction) after. *Added* is the median of the round-by-round differences.",
        "",
    )
    added_table(
        page,
        fig,
        {"limits off": "limits off", "limits on": "limits on"},
        ("POST /chat (one model call), ms", 2),
        lambda _: (
            "limits: checking and settling a caller's limits on SQLite adds ≤ "
            f"{LIMITS_TARGET_MS:g} ms per request"
        ),
        LIMITS_TARGET_MS,
    )
    store_calls(page, fig.get("dynamodb calls"))


def threads(page: Page, fig: dict[str, Any]) -> None:
    page.add(
        "## Threads: what a run on a thread adds to a request",
        "",
        "One chat app under uvicorn on the embedded store (SQLite). Each round, two one-call "
        "`POST /chat` requests taking turns: on a thread of 50 messages (a fresh one each round, "
        "seeded beforehand) with only the new question sent, and stateless with the same 50 "
        "messages and the question sent by the client. The model is sent the same conversation "
        "both ways, so *added* (the median of the round-by-round differences) is the thread's "
        "work: claiming it, loading its messages, appending the run's and giving it back.",
        "",
    )
    added_table(
        page,
        fig,
        {"stateless": "stateless (the client sends the 50 messages)", "on a thread": "on a thread"},
        ("POST /chat (one model call), ms", 2),
        lambda _: (
            f"threads: loading a 50-message thread and saving a run on SQLite adds ≤ "
            f"{THREADS_TARGET_MS:g} ms per request"
        ),
        THREADS_TARGET_MS,
    )


def sandbox(page: Page, fig: dict[str, Any]) -> None:
    page.add(
        "## Sandbox: execute_code's round trip, locally",
        "",
        "One execute_code call as a run makes it, timed from the tool's start to its result: "
        "the working directory carried in and out, the program run by the local backend "
        f"({fig.get('backend', 'unknown')}), and what it wrote to `output/` kept in a file "
        "store (a temporary directory). The chart reads a 1,000-row CSV with pandas and "
        "saves a matplotlib bar chart of its monthly totals as a PNG. *Cold*: the first call "
        "after the kernel's page cache was dropped; *warm*: the median (and fastest) of the "
        "calls after it. Every call is a new process; only the files are kept between calls. "
        f"Libraries: {', '.join(fig.get('libraries') or ['none'])}.",
        "",
    )
    rows = []
    for name in ("print(1)", "pandas + matplotlib chart"):
        row = fig.get(name) or {}
        if not row.get("ok"):
            rows.append([name, "failed", failed_note(row), "", ""])
            continue
        rows.append(
            [
                name,
                f"{row['cold_ms']:.0f} ms",
                f"{row['warm_ms']:.0f} ms ({row['warm_min_ms']:.0f})",
                str(row["calls"]),
                ", ".join(row["files"]) or "none",
            ]
        )
    page.table(["program", "cold", "warm, median (fastest)", "warm calls", "files kept"], rows)
    cold_kind = (fig.get("print(1)") or {}).get("cold_kind")
    if cold_kind and cold_kind != "page cache dropped":
        page.add(f"Cold here is the {cold_kind} (the page cache could not be dropped).", "")


def store_calls(page: Page, row: dict[str, Any] | None) -> None:
    """The limits figure's DynamoDB part: store calls per request around its model call."""
    if row is None:
        return
    page.add(
        "",
        "On DynamoDB (`bench/store_calls.py`): the app with the same limits on a table of moto's "
        "server, each DynamoDB call counted at a loopback proxy in front of it, in one ordered "
        f"log with the model's requests; {row.get('requests', '?')} requests of one model call.",
        "",
    )
    if not row.get("ok"):
        page.table(["", "store calls per request", "target"], [["DynamoDB", failed_note(row), ""]])
        return
    rows = []
    for part, name, target in (
        ("before", "before the first model call", STORE_CALLS_BEFORE),
        ("between", "between model calls", None),
        ("after", "after the last model call", STORE_CALLS_AFTER),
    ):
        counted = row[part]
        ops = ", ".join(f"{op} {n:g}" for op, n in counted.get("operations", {}).items())
        verdict_cell = ""
        if target is not None:
            verdict_cell = page.target(
                f"limits: at most {target} DynamoDB call(s) {name} per request",
                f"{counted['max']}",
                counted["max"] <= target,
            )
        rows.append([name, f"{counted['max']} (median {counted['median']:g})", ops, verdict_cell])
    page.table(["", "store calls, max (median)", "operations, mean", "target"], rows)


def added_table(
    page: Page,
    fig: dict[str, Any],
    rows_named: dict[str, str],
    timed: tuple[str, int],
    target_text: Callable[[str], str],
    target_ms: float,
) -> None:
    """A figure of a request timed with and without a feature: each row's time, what the
    feature added (``added_ms``, median of round-by-round differences) and its target."""
    column, digits = timed
    rows = []
    for key, name in rows_named.items():
        row = fig.get(key, {})
        if not row.get("ok"):
            rows.append([name, failed_note(row), "", ""])
            continue
        added = row.get("added_ms")
        target = ""
        if added is not None:
            target = page.target(target_text(key), f"{added:+.3f} ms", added <= target_ms)
        shown = "—" if added is None else f"{added:+.3f}"
        rows.append([name, cell(row, "ms", digits), shown, target])
    page.table(["", column, "added, ms", "target"], rows)


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    figures = results["figures"]
    body = Page()
    sections = {
        "cold": cold,
        "loop": loop,
        "parallel": parallel,
        "stream": stream,
        "memory": memory,
        "docs": docs,
        "research": research,
        "faces": faces,
        "tracing": tracing,
        "signin": signin,
        "limits": limits,
        "threads": threads,
        "sandbox": sandbox,
    }
    for name, render in sections.items():
        if name in figures:
            render(body, figures[name])
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
    head = Page()
    head.add(
        "# Benchmarks",
        "",
        "<!-- Generated by `make bench` (bench/run.py); edits are overwritten. -->",
        "",
        "agentloop next to a hand-written loop on the bare provider SDKs (the floor: what any "
        "loop on them must pay) and next to the agent frameworks it would otherwise be "
        "compared with, all driven by the same scripted model server over loopback "
        "(`tests/fakes/scripted_llm.py`, in a process of its own) and measured in one run on "
        "one machine. Every run is checked: the scripted model only gives the final answer "
        "when it was sent the right tool results, and a run that ends with anything else is "
        "shown as failed, not timed. Figures are medians with (min–max); ratios are to the "
        "bare-SDK floor of the same provider unless a column says otherwise.",
        "",
        f"- **Machine:** {m['cpu']}, {m['cores']} cores, {m['memory']}; {m['system']}; "
        f"Python {m['python']}"
        + (
            "; the model server and the measured process pinned to separate CPUs"
            if m["pinned"]
            else ""
        ),
        f"- **Packages:** {versions}",
        f"- **Run:** {m['date']}, commit {m['commit']}, {results.get('seconds', 0) / 60:.1f} min "
        "for the whole `make bench`",
        "- **Contenders:** "
        + "; ".join(
            f"{CONTENDERS[k].label} ({CONTENDERS[k].note})"
            for k in ("floor-groq", "floor-openai", "agentloop-groq", "agentloop-app", *PEERS)
        ),
        "",
        "![Loop overhead, cold start and peak memory per contender](benchmarks.png)",
        "",
        "## Targets",
        "",
    )
    head.table(
        ["target", "measured", ""],
        [
            [name, measured, "n/a" if ok is None else verdict(ok)]
            for name, measured, ok in body.targets
        ],
    )
    missed = [name for name, _, ok in body.targets if ok is False]
    if missed:
        head.add(
            "Missed in this run: "
            + "; ".join(missed)
            + ". The section of each figure shows where the time or memory goes.",
            "",
        )
    body.add(
        "## How it is measured",
        "",
        "- The model server is `tests/fakes/scripted_llm.py`'s app, served by uvicorn binding "
        "its own port (`bench/llm_server.py`), which answers at once unless a figure says "
        "otherwise and records, per run, when each request arrived, when its first text and "
        "its last byte left, and the prompt tokens it carried.",
        "- Each contender runs in its own process, built once; the runs of one figure take "
        "turns across the contenders, round by round, after warm-up runs. Cold start and "
        "memory use a fresh process per sample.",
        "- Tools are `async` where the framework takes them (smolagents runs its synchronous "
        "tools in threads); each framework gets the same system prompt and tool descriptions "
        "and uses its Chat Completions model class with one shared client.",
        "- Everything stays on loopback; framework telemetry is switched off by environment.",
        "- The repository's own modules (agentloop, the chat app, the bench) are compiled to "
        "bytecode before anything is measured, as pip compiled every installed package, so "
        "each process measures code as installed, never its compilation.",
        "- Run one figure alone with `.venv-bench/bin/python bench/run.py --figures loop` "
        "(printed, not written here); raw figures of the last full run are in "
        "`build/bench/results.json`.",
        "",
    )
    return "\n".join(head.lines + body.lines).rstrip() + "\n"


def failures(results: dict[str, Any]) -> list[str]:
    out = []
    for name, fig in results["figures"].items():
        if name == "research":
            if not fig.get("ok"):
                out.append(f"research: {fig.get('why')}")
            continue
        for key, row in fig.items():
            if isinstance(row, dict) and row.get("ok") is False:
                out.append(f"{key} ({name}): {row.get('why')}")
    return out


def chart(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = results["figures"]
    keys = ["floor-groq", "agentloop-groq", "floor-openai", "agentloop-openai", *PEERS]
    names = {
        "floor-groq": "bare groq SDK",
        "floor-openai": "bare openai SDK",
        "agentloop-groq": "agentloop (groq)",
        "agentloop-openai": "agentloop (openai)",
        "smolagents": "smolagents",
        "strands-agents": "strands",
    }
    panels = [
        ("Loop overhead: ms per 10-turn run", figures.get("loop", {}), "ms", {}),
        (
            "Cold start: import, ms",
            figures.get("cold", {}),
            "import_ms",
            {
                "floor-groq": "sdk-groq",
                "floor-openai": "sdk-openai",
                "agentloop-groq": "agentloop-app",
            },
        ),
        ("Peak memory, import + 10 turns: MB", figures.get("memory", {}), "rss_mb", {}),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(11, 3.4), dpi=80, sharey=True)
    colours = {"floor": "#9aa5b1", "agentloop": "#1f6feb", "peer": "#e8a33d"}
    for ax, (title, data, field, alias) in zip(axes, panels, strict=True):
        values, colour = [], []
        for key in keys:
            row = data.get(alias.get(key, key), {})
            values.append(med(row, field) or 0.0)
            kind = (
                "floor"
                if key.startswith("floor")
                else "agentloop"
                if key.startswith("agentloop")
                else "peer"
            )
            colour.append(colours[kind])
        ax.barh(range(len(keys)), values, color=colour)
        for i, v in enumerate(values):
            ax.text(v, i, f" {v:.0f}" if v else " —", va="center", fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.set_xlim(0, max([*values, 1]) * 1.22)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(keys)), [names.get(k, k) for k in keys])
    axes[0].invert_yaxis()
    axes[1].set_xlabel(
        "floors: the SDK alone; agentloop (groq): the chat app + groq; (openai): the library",
        fontsize=7,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
