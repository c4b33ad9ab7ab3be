"""The rows of a figure that times one request with and without a feature, round by round."""

from __future__ import annotations

import statistics
from typing import Any


def paired_rows(samples: dict[str, list[float]], feature: str, baseline: str) -> dict[str, Any]:
    """Each row's median, min and max (ms), and on the ``feature`` row ``added_ms``: the median
    of the round-by-round differences to ``baseline`` (the rounds took turns, so each pair
    ran under the same conditions)."""
    rows: dict[str, Any] = {}
    for name, values in samples.items():
        ordered = sorted(values)
        rows[name] = {
            "ok": True,
            "runs": len(values),
            "ms": {"median": statistics.median(ordered), "min": ordered[0], "max": ordered[-1]},
        }
    pairs = zip(samples[feature], samples[baseline], strict=True)
    rows[feature]["added_ms"] = statistics.median(a - b for a, b in pairs)
    return rows
