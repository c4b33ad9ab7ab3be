"""The limits figure: what checking and settling a caller's limits adds to a request.

Two chat apps under uvicorn, started as on Lambda: one with ``AGENTLOOP_LIMITS`` (every kind
of limit, set high enough never to refuse) on the embedded store (SQLite in a temporary
directory), one without limits. A one-call ``POST /chat`` (the ping task) is timed round by
round, taking turns; each request admits its run (one store query, one transaction) before
the model call and settles it (one transaction) after. *Added* is the median of the
round-by-round differences to the app without limits.

Then the store calls a request makes on DynamoDB (``bench/store_calls.py``): the app on a table
of moto's server, its calls counted at a loopback proxy in front of moto, in one ordered log
with the model's requests, so each is known to come before the first model call or after the
last.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from typing import Any

from bench.paired import paired_rows

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
    rows = paired_rows(samples, "limits on", "limits off")
    say(f"  limits   added {rows['limits on']['added_ms']:.3f} ms per /chat request (SQLite)")
    rows["dynamodb calls"] = _dynamodb_calls(start_app, chat, say)
    return rows


def _dynamodb_calls(
    start_app: Callable[[dict[str, str]], Any],
    chat: Callable[[int, str, str], tuple[str, float]],
    say: Callable[[str], None],
) -> dict[str, Any]:
    """The store-call row (one that cannot be counted says why; the timing rows stand)."""
    from bench import store_calls

    try:
        row: dict[str, Any] = store_calls.count(start_app, chat, LIMITS)
    except Exception as exc:
        say(f"  limits   DynamoDB store calls FAILED: {exc}")
        return {"ok": False, "why": str(exc)[:300]}
    say(
        f"  limits   DynamoDB store calls per request: at most {row['before']['max']} before "
        f"the model call, {row['after']['max']} after ({row['requests']} requests)"
    )
    return row
