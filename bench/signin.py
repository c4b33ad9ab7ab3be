"""The sign-in figure: what checking a caller's JWT adds to a request.

Two chat apps under uvicorn, started as on Lambda: one with ``AGENTLOOP_AUTH_MODE=jwt``
against a loopback issuer (``tests/jwks_server.py``: discovery and a JWKS with an RSA and an EC
key made here), one with auth off. Over one kept-alive connection each, ``GET /v1/models`` (an
authenticated route that does nothing else) is timed round by round, taking turns; the keys
are fetched by the warm-up requests, so the timed ones check with the keys cached. *Added* is
the median of the round-by-round differences to the app without auth.
"""

from __future__ import annotations

import http.client
import statistics
import time
from collections.abc import Callable
from typing import Any

WARMUP = 20
ROUNDS = 300
AUDIENCE = "bench-client"


def timed_get(connection: http.client.HTTPConnection, headers: dict[str, str]) -> float:
    """ms for one GET /v1/models answered 200 on a kept-alive connection."""
    started = time.perf_counter()
    connection.request("GET", "/v1/models", headers=headers)
    response = connection.getresponse()
    body = response.read()
    elapsed = (time.perf_counter() - started) * 1000
    if response.status != 200:
        raise RuntimeError(f"GET /v1/models answered {response.status}: {body[:200]!r}")
    return elapsed


def measure(start_app: Callable[[dict[str, str]], Any], say: Callable[[str], None]) -> Any:
    """The figure's rows; ``start_app(env)`` starts a chat app (``.port``, ``.stop()``)."""
    from tests.jwks_server import IssuerServer, ec_key, mint, rsa_key

    keys = {"RS256": rsa_key("bench-rsa"), "ES256": ec_key("bench-ec")}
    with IssuerServer(list(keys.values())) as issuer:
        env = {
            "AGENTLOOP_AUTH_MODE": "jwt",
            "AGENTLOOP_JWT_ISSUER": issuer.url,
            "AGENTLOOP_JWT_AUDIENCE": AUDIENCE,
        }
        claims = {"iss": issuer.url, "aud": AUDIENCE, "sub": "bench-user", "exp": 2**31}
        tokens = {alg: mint(claims, key) for alg, key in keys.items()}
        apps = {"jwt": start_app(env), "none": start_app({"AGENTLOOP_AUTH_MODE": "none"})}
        try:
            samples = _rounds(apps, tokens)
            fetched = issuer.count("/jwks.json")
        finally:
            for app in apps.values():
                app.stop()
    rows: dict[str, Any] = {"jwks_fetches": fetched}
    base = samples["none"]
    for name, values in samples.items():
        rows[name] = {"ok": True, "runs": len(values), "ms": _summary(values)}
        if name != "none":
            pairs = zip(values, base, strict=True)
            rows[name]["added_ms"] = statistics.median(a - b for a, b in pairs)
            say(f"  signin   {name:<12} added {rows[name]['added_ms']:.3f} ms per request")
    return rows


def _rounds(apps: dict[str, Any], tokens: dict[str, str]) -> dict[str, list[float]]:
    connections = {
        name: http.client.HTTPConnection("127.0.0.1", app.port, timeout=10)
        for name, app in apps.items()
    }
    cases = {f"jwt {alg}": ("jwt", {"authorization": f"Bearer {t}"}) for alg, t in tokens.items()}
    cases["none"] = ("none", {})
    samples: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for round_ in range(WARMUP + ROUNDS):
            for name, (app, headers) in cases.items():
                elapsed = timed_get(connections[app], headers)
                if round_ >= WARMUP:
                    samples[name].append(elapsed)
    finally:
        for connection in connections.values():
            connection.close()
    return samples


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": statistics.median(ordered),
        "min": ordered[0],
        "max": ordered[-1],
        "p90": ordered[int(len(ordered) * 0.9) - 1],
    }
