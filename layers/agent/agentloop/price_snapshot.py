"""The flat prices of our providers' models, taken from genai-prices ahead of time.

genai-prices is the source of every price, but importing its table costs about 40 ms and
4.4 MB, and its calculation 0.2 ms per model call. Most models have one price per token of
each kind at any size and on any date: for those, ``prices.json`` (next to this module)
holds the table's rates, and a call's price is three multiplications. A model the file does
not hold (tiered or dated prices, a name the table matches by pattern, a provider we do not
run) is priced by genai-prices itself, as before.

The file is made from the installed genai-prices (``python -m agentloop.price_snapshot``,
``make prices``), which pyproject.toml pins to the version it names; a test checks every
entry against the table, so an upgrade without a new file fails.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from decimal import Decimal

PATH = Path(__file__).with_name("prices.json")
PROVIDERS = ("groq", "openai")
"""The providers ``llm.registry`` runs; others' models are never asked for here."""
MILLION = 1_000_000

# Usages (prompt, cached, output) a flat price must price exactly: a tier would start
# somewhere between the smallest and the largest.
_PROBES: tuple[tuple[int, int, int], ...] = (
    (1, 0, 1),
    (1_000, 0, 0),
    (0, 0, 1_000),
    (3_000, 1_000, 0),
    (2_000_000, 0, 0),
    (3_000_000, 2_000_000, 0),
    (0, 0, 2_000_000),
)


def snapshot() -> dict[str, tuple[float, float, float]]:
    """``provider:model`` -> dollars per token (input, cached input, output), from the file."""
    models = json.loads(PATH.read_text(encoding="utf-8"))["models"]
    return {spec: _per_token(rates) for spec, rates in models.items()}


def rates_of(spec: str) -> tuple[float, float, float] | None:
    """One model's :func:`snapshot` entry. The table is read again (0.1 ms) rather than kept:
    a process prices a few models, and the whole table would stay in its memory."""
    rates = json.loads(PATH.read_text(encoding="utf-8"))["models"].get(spec)
    return None if rates is None else _per_token(rates)


def _per_token(rates: list[str]) -> tuple[float, float, float]:
    prompt, cached, output = rates
    return float(prompt) / MILLION, float(cached) / MILLION, float(output) / MILLION


def table_price(spec: str, prompt: int, cached: int, output: int) -> Decimal | None:
    """genai-prices' total for this usage (``prompt`` includes ``cached``), None if unknown."""
    from decimal import Decimal

    import genai_prices

    provider, _, model = spec.partition(":")
    usage = genai_prices.Usage(input_tokens=prompt, cache_read_tokens=cached, output_tokens=output)
    try:
        return Decimal(genai_prices.calc_price(usage, model, provider_id=provider).total_price)
    except LookupError:
        return None


def flat_rates(spec: str) -> tuple[Decimal, Decimal, Decimal] | None:
    """The table's price per million of each kind of token, if it is one price at every size
    probed and on every date (no conditional prices); None otherwise."""
    from genai_prices.data_snapshot import get_snapshot
    from genai_prices.types import ModelPrice

    provider, _, model = spec.partition(":")
    try:
        _, info = get_snapshot().find_provider_model(model, None, provider, None)
    except LookupError:
        return None
    if not isinstance(info.prices, ModelPrice):  # prices that change on a date
        return None
    per_million = [table_price(spec, *usage) for usage in ((MILLION, 0, 0), (MILLION, MILLION, 0))]
    output = table_price(spec, 0, 0, MILLION)
    if per_million[0] is None or per_million[1] is None or output is None:
        return None
    rates = (per_million[0], per_million[1], output)
    for prompt, cached, out in _PROBES:
        expected = ((prompt - cached) * rates[0] + cached * rates[1] + out * rates[2]) / MILLION
        if table_price(spec, prompt, cached, out) != expected:
            return None
    return rates


def build() -> dict[str, Any]:
    """The file's content: every flat-priced name of our providers' models in the table,
    each name as the table itself resolves it."""
    from importlib.metadata import version

    from genai_prices.data import providers

    names = sorted(
        f"{provider.id}:{name}"
        for provider in providers
        if provider.id in PROVIDERS
        for model in provider.models
        for name in {model.id, *_equal_names(model.match)}
    )
    models: dict[str, list[str]] = {}
    for spec in names:
        rates = flat_rates(spec)
        if rates is not None and any(rates):  # all zero: not priced per token (speech)
            models[spec] = [format(rate.normalize(), "f") for rate in rates]
    return {"genai_prices": version("genai-prices"), "per": "million tokens", "models": models}


def _equal_names(clause: Any) -> list[str]:
    """The names a match clause accepts exactly (``equals``, possibly inside ``or``)."""
    equals = getattr(clause, "equals", None)
    if isinstance(equals, str):
        return [equals]
    return [name for inner in getattr(clause, "or_", None) or () for name in _equal_names(inner)]


def dumps(content: dict[str, Any]) -> str:
    """The file's text: one model a line, so an upgrade's diff shows what changed."""
    lines = [
        f"  {json.dumps(spec)}: {json.dumps(rates)}" for spec, rates in content["models"].items()
    ]
    head = {key: value for key, value in content.items() if key != "models"}
    header = "".join(f"  {json.dumps(key)}: {json.dumps(value)},\n" for key, value in head.items())
    return "{\n" + header + '  "models": {\n  ' + ",\n  ".join(lines) + "\n  }\n}\n"


if __name__ == "__main__":  # python -m agentloop.price_snapshot: rewrite prices.json
    content = build()
    PATH.write_text(dumps(content), encoding="utf-8")
    sys.stdout.write(f"{len(content['models'])} models, genai-prices {content['genai_prices']}\n")
