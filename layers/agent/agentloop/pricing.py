"""What a model call costs in US dollars.

Prices come from the operator's ``AGENTLOOP_PRICES`` first (negotiated prices, models the
table does not know), then from the ``genai-prices`` package's table, which ships its data
with the package: nothing is fetched at run time (its updater is a thread we never start).
A model with one price per token at any size (most of them) is priced from the table's
rates taken ahead of time (:mod:`agentloop.price_snapshot`); the package itself (40 ms and
4.4 MB to import, 0.2 ms a calculation) is imported only for the others.

A model neither knows has no price: :meth:`Pricer.cost` returns ``None`` and the run says so,
rather than report a wrong number. Input, cached input and output tokens are priced separately
(``Usage.cached_tokens`` is part of ``prompt_tokens``, as genai-prices' ``cache_read_tokens`` is
part of its ``input_tokens``).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentloop.models import Usage

MILLION = 1_000_000


class PriceOverride(BaseModel):
    """One model's price, in US dollars per million tokens (``AGENTLOOP_PRICES``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    cached_input: float | None = Field(
        default=None, ge=0, description="Cache reads; left out: the input price."
    )
    output: float = Field(ge=0)


def parse_prices(raw: str) -> dict[str, PriceOverride]:
    """``AGENTLOOP_PRICES``: a JSON object of ``provider:model`` -> price; ValueError if not."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"AGENTLOOP_PRICES is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError("AGENTLOOP_PRICES must be a JSON object of 'provider:model' -> prices")
    try:
        return {str(spec): PriceOverride.model_validate(price) for spec, price in data.items()}
    except ValidationError as exc:
        raise ValueError(f"AGENTLOOP_PRICES: {exc}") from exc


@dataclass(frozen=True)
class Rates:
    """Dollars per token: what an estimate multiplies by."""

    input: float
    cached_input: float
    output: float

    def cost(self, usage: Usage) -> float:
        uncached = max(0, usage.prompt_tokens - usage.cached_tokens)
        return (
            uncached * self.input
            + usage.cached_tokens * self.cached_input
            + usage.completion_tokens * self.output
        )


@dataclass
class Pricer:
    """Prices ``provider:model`` usage (the table's rates are cached per process)."""

    overrides: dict[str, PriceOverride] = field(default_factory=dict)
    _rates: dict[str, Rates | None] = field(default_factory=dict)

    def cost(self, spec: str, usage: Usage) -> float | None:
        """The usage's price in dollars, or None when no price is known for ``spec``."""
        override = self.overrides.get(spec)
        if override is not None:
            return _override_rates(override).cost(usage)
        flat = _flat_rates(spec)
        if flat is not None:
            return flat.cost(usage)
        calculation = _table_price(spec, usage)
        return None if calculation is None else float(calculation.total_price)

    def rates(self, spec: str) -> Rates | None:
        """Per-token rates of ``spec`` (for estimates before a call), None when unknown."""
        if spec not in self._rates:
            override = self.overrides.get(spec)
            self._rates[spec] = (
                _override_rates(override)
                if override is not None
                else _flat_rates(spec) or _table_rates(spec)
            )
        return self._rates[spec]

    def knows(self, spec: str) -> bool:
        return self.rates(spec) is not None


def _override_rates(price: PriceOverride) -> Rates:
    cached = price.input if price.cached_input is None else price.cached_input
    return Rates(price.input / MILLION, cached / MILLION, price.output / MILLION)


@functools.lru_cache(maxsize=256)
def _flat_rates(spec: str) -> Rates | None:
    """The snapshot's rates of ``spec`` (a model with one price per token), if it has them."""
    from agentloop.price_snapshot import rates_of

    rates = rates_of(spec)
    return None if rates is None else Rates(*rates)


def _table_price(spec: str, usage: Usage) -> Any:
    """genai-prices' calculation for ``usage`` (its ``PriceCalculation``), None if unknown."""
    provider, _, model = spec.partition(":")
    import genai_prices  # heavy (40 ms, 4.4 MB): only for a model the snapshot lacks

    table_usage = genai_prices.Usage(
        input_tokens=usage.prompt_tokens,
        cache_read_tokens=usage.cached_tokens,
        output_tokens=usage.completion_tokens,
    )
    try:
        return genai_prices.calc_price(table_usage, model, provider_id=provider)
    except LookupError:
        return None


@functools.lru_cache(maxsize=256)
def _table_rates(spec: str) -> Rates | None:
    """Per-token rates from the table: the price of a million of each kind of token."""
    plain = _table_price(spec, Usage(prompt_tokens=MILLION, completion_tokens=MILLION))
    if plain is None:
        return None
    cached = _table_price(spec, Usage(prompt_tokens=MILLION, cached_tokens=MILLION))
    return Rates(
        float(plain.input_price) / MILLION,
        float(cached.input_price) / MILLION,
        float(plain.output_price) / MILLION,
    )
