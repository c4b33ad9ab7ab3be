"""Per-principal limits: their names, ``AGENTLOOP_LIMITS`` (defaults and tiers) and overrides.

Limits are held as integers in the units the store counts in: dollars as micro-dollars, so
both backends count money exactly alike. A missing key is no such limit; an unset variable is
no limits at all (and no store call per request).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

from agentloop.config import ConfigurationError

ENV: Final = "AGENTLOOP_LIMITS"

LimitName = Literal[
    "usd_per_day", "usd_per_month", "tokens_per_day", "concurrent_runs", "requests_per_minute"
]
LIMIT_NAMES: tuple[LimitName, ...] = get_args(LimitName)
MONEY: frozenset[LimitName] = frozenset({"usd_per_day", "usd_per_month"})
MICRO = 1_000_000
"""Micro-dollars per dollar: the store's unit of money."""
MAX_VALUE = 2**50
"""Largest limit in store units (the store's counters stay below 2**53)."""

Limits = dict[LimitName, int]
"""A principal's limits in store units (micro-dollars for the ``usd_*`` ones)."""


class LimitValueError(ValueError):
    """A limit's name or value is not one we accept."""


def to_units(name: str, value: object) -> int:
    """``value`` of limit ``name`` in store units; LimitValueError if it is not acceptable."""
    if name not in LIMIT_NAMES:
        raise LimitValueError(f"unknown limit {name!r} (known: {', '.join(LIMIT_NAMES)})")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise LimitValueError(f"{name} must be a number, not {value!r}")
    if value < 0:
        raise LimitValueError(f"{name} must not be negative")
    if name in MONEY:
        units = math.floor(value * MICRO)
    elif isinstance(value, float) and not value.is_integer():
        raise LimitValueError(f"{name} must be a whole number, not {value!r}")
    else:
        units = int(value)
    if units > MAX_VALUE:
        raise LimitValueError(f"{name} is too large")
    return units


def from_units(name: LimitName, units: int) -> float | int:
    """A store value as people read it: dollars for money, else the count."""
    return units / MICRO if name in MONEY else units


def parse_limits(raw: object, where: str) -> dict[LimitName, int | None]:
    """One object of limits; a null value is "no such limit" (it lifts a default)."""
    if not isinstance(raw, Mapping):
        raise LimitValueError(f"{where} must be an object of limits")
    parsed: dict[LimitName, int | None] = {}
    for name, value in raw.items():
        units = None if value is None else to_units(str(name), value)
        parsed[_name(name)] = units
    return parsed


def _name(name: object) -> LimitName:
    for known in LIMIT_NAMES:
        if name == known:
            return known
    raise LimitValueError(f"unknown limit {name!r} (known: {', '.join(LIMIT_NAMES)})")


def merged(base: Mapping[LimitName, int], over: Mapping[LimitName, int | None]) -> Limits:
    """``base`` with ``over``'s values put over it (None removes a limit)."""
    result: Limits = dict(base)
    for name, units in over.items():
        if units is None:
            result.pop(name, None)
        else:
            result[name] = units
    return result


@dataclass(frozen=True)
class LimitsConfig:
    """``AGENTLOOP_LIMITS``: the default limits and each tier's (put over the default)."""

    default: Limits = field(default_factory=dict)
    tiers: dict[str, dict[LimitName, int | None]] = field(default_factory=dict)

    def for_tier(self, tier: str | None) -> Limits:
        """A tier's limits: the default's, with the tier's over them (an unknown tier, or
        none: the default)."""
        over = self.tiers.get(tier) if tier is not None else None
        return merged(self.default, over or {})

    @classmethod
    def parse(cls, text: str) -> LimitsConfig:
        """The variable's JSON; ConfigurationError naming the variable and what is wrong."""
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise ConfigurationError(f"{ENV} is not JSON: {exc}") from None
        try:
            return cls._of(raw)
        except LimitValueError as exc:
            raise ConfigurationError(f"{ENV}: {exc}") from None

    @classmethod
    def _of(cls, raw: Any) -> LimitsConfig:
        if not isinstance(raw, dict):
            raise LimitValueError('expected {"default": {...}, "tiers": {"name": {...}}}')
        unknown = sorted(set(raw) - {"default", "tiers"})
        if unknown:
            raise LimitValueError(f"unknown key(s) {unknown}: only default and tiers")
        default = parse_limits(raw.get("default", {}), "default")
        tiers_raw = raw.get("tiers", {})
        if not isinstance(tiers_raw, dict):
            raise LimitValueError("tiers must be an object of tier names to limits")
        tiers = {str(k): parse_limits(v, f"tiers.{k}") for k, v in tiers_raw.items()}
        return cls({k: v for k, v in default.items() if v is not None}, tiers)


def limits_from_env(environ: Mapping[str, str]) -> LimitsConfig | None:
    """The configured limits, or None when ``AGENTLOOP_LIMITS`` is unset or blank."""
    text = environ.get(ENV, "").strip()
    return LimitsConfig.parse(text) if text else None
