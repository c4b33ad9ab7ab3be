"""The limits figure: what checking and settling a caller's limits adds to a request.

Two chat apps under uvicorn, started as on Lambda: one with ``AGENTLOOP_LIMITS`` (every kind
of limit, set high enough never to refuse) on the embedded store (SQLite in a temporary
directory), one without limits. A one-call ``POST /chat`` (the ping task) is timed round by
round, taking turns; each request admits its run (one store query, one transaction) before
the model call and settles it (one transaction) after. *Added* is the median of the
round-by-round differences to the app without limits.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from collections.abc import Callable
from typing import Any

WARMUP = 10
ROUNDS = 150
LIMITS = {
    "default": {
        "usd_per_day": 1_000_000,
        "usd_per_month": 1_000_000,
        "tokens_per_day": 10**12,
        "concurrent_runs": 100,
        "requests_per_minute": 100_000,
    }
}


def measure(
    start_app: Callable[[dict[str, str]], Any],
    chat: Callable[[int, str, str], tuple[str, float]],
    expected: str,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """The figure's rows; ``start_app(env)`` starts a chat app (``.port``, ``.stop()``),
    ``chat(port, task, run_id)`` makes one request and returns (answer, seconds)."""
    with tempfile.TemporaryDirectory() as folder:
        on = {"AGENTLOOP_LIMITS": json.dumps(LIMITS), "AGENTLOOP_STORE": f"sqlite:///{folder}/s.db"}
        apps = {"limits on": start_app(on), "limits off": start_app({})}
        samples: dict[str, list[float]] = {name: [] for name in apps}
        try:
            for round_ in range(WARMUP + ROUNDS):
                for name, app in apps.items():
                    answer, seconds = chat(app.port, "ping", f"limits{round_}{name[-2:]}")
                    if answer != expected:
                        raise RuntimeError(f"{name}: the answer was {answer[:80]!r}")
                    if round_ >= WARMUP:
                        samples[name].append(seconds * 1000)
        finally:
            for app in apps.values():
                app.stop()
    rows: dict[str, Any] = {}
    for name, values in samples.items():
        ordered = sorted(values)
        rows[name] = {
            "ok": True,
            "runs": len(values),
            "ms": {"median": statistics.median(ordered), "min": ordered[0], "max": ordered[-1]},
        }
    pairs = zip(samples["limits on"], samples["limits off"], strict=True)
    rows["limits on"]["added_ms"] = statistics.median(a - b for a, b in pairs)
    say(f"  limits   added {rows['limits on']['added_ms']:.3f} ms per /chat request (SQLite)")
    return rows
