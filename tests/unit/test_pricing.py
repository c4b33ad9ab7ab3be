"""Prices per model (genai-prices, offline, and the operator's overrides) and the dollar side
of the budget: shares, reserves and charges flowing up."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import genai_prices
import pytest

from agentloop import price_snapshot
from agentloop.limits import TokenBudget
from agentloop.models import Usage
from agentloop.pricing import PriceOverride, Pricer, parse_prices

TIERED = "openai:gpt-5.4"
"""A model whose price per token grows with the prompt: the table prices it, not the snapshot."""


def table(spec: str, usage: Usage) -> float:
    provider, _, model = spec.partition(":")
    price = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=usage.prompt_tokens,
            cache_read_tokens=usage.cached_tokens,
            output_tokens=usage.completion_tokens,
        ),
        model,
        provider_id=provider,
    )
    return float(price.total_price)


@pytest.mark.parametrize("spec", ["groq:llama-3.3-70b-versatile", "openai:gpt-4o-mini"])
def test_table_prices_and_rates_agree_with_genai_prices(spec: str) -> None:
    pricer = Pricer()
    usage = Usage(prompt_tokens=12_345, completion_tokens=678, cached_tokens=2_048)
    assert pricer.cost(spec, usage) == pytest.approx(table(spec, usage), rel=1e-12)
    rates = pricer.rates(spec)
    assert rates is not None
    assert rates.cost(usage) == pytest.approx(table(spec, usage), rel=1e-9)


USAGES = [
    Usage(prompt_tokens=1, completion_tokens=1),
    Usage(prompt_tokens=12_345, completion_tokens=678, cached_tokens=2_048),
    Usage(prompt_tokens=900_000, completion_tokens=40_000, cached_tokens=800_000),
    Usage(prompt_tokens=2_500_000, completion_tokens=1_000),
]


def test_every_snapshot_price_is_the_tables_price() -> None:
    """Each model the snapshot holds costs what genai-prices says, at every size: so a
    genai-prices upgrade that changes a price fails here until ``make prices`` is run."""
    rates = price_snapshot.snapshot()
    assert len(rates) > 100
    assert "groq:llama-3.3-70b-versatile" in rates
    pricer = Pricer()
    for spec in rates:
        for usage in USAGES:
            assert pricer.cost(spec, usage) == pytest.approx(table(spec, usage), rel=1e-12), spec


def test_the_snapshot_file_is_what_the_installed_table_makes() -> None:
    content = price_snapshot.build()
    assert content["genai_prices"] == version("genai-prices")
    assert price_snapshot.PATH.read_text(encoding="utf-8") == price_snapshot.dumps(content)


def test_a_tiered_model_is_left_to_the_table() -> None:
    assert TIERED not in price_snapshot.snapshot()
    assert price_snapshot.flat_rates(TIERED) is None
    small = Usage(prompt_tokens=1_000)
    large = Usage(prompt_tokens=500_000)
    pricer = Pricer()
    for usage in (small, large):
        assert pricer.cost(TIERED, usage) == pytest.approx(table(TIERED, usage), rel=1e-12)
    per_token = [(pricer.cost(TIERED, u) or 0) / u.prompt_tokens for u in (small, large)]
    assert per_token[0] != per_token[1]


def test_unknown_models_have_no_price() -> None:
    pricer = Pricer()
    assert pricer.cost("groq:not-a-real-model", Usage(prompt_tokens=10)) is None
    assert pricer.rates("nosuchprovider:model") is None
    assert not pricer.knows("openai:not-a-real-model")


def test_an_override_prices_cached_input_apart_and_wins_over_the_table() -> None:
    spec = "openai:gpt-4o-mini"
    pricer = Pricer({spec: PriceOverride(input=3.0, cached_input=1.0, output=10.0)})
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=100_000, cached_tokens=400_000)
    assert pricer.cost(spec, usage) == pytest.approx(0.6 * 3.0 + 0.4 * 1.0 + 0.1 * 10.0)
    no_cache_price = Pricer({spec: PriceOverride(input=3.0, output=10.0)})
    assert no_cache_price.cost(spec, usage) == pytest.approx(3.0 + 1.0)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "JSON object"),
        ('{"a:b": {"input": 1}}', "output"),
        ('{"a:b": {"input": -1, "output": 1}}', "input"),
        ('{"a:b": {"input": 1, "output": 1, "extra": 2}}', "extra"),
    ],
)
def test_bad_price_overrides_are_refused(raw: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_prices(raw)


def test_the_table_works_offline_and_is_imported_only_when_needed() -> None:
    """No socket and no updater thread: the package prices from the data it ships, and only
    for a model the snapshot lacks."""
    script = """
import socket, sys, threading
def refuse(*args, **kwargs):
    raise OSError("network used")
socket.socket.connect = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
import agentloop.chat, agentloop.loop, agentloop.plan
assert "genai_prices" not in sys.modules, "imported before a price was needed"
from agentloop.models import Usage
from agentloop.pricing import Pricer
assert Pricer().cost("openai:gpt-4o-mini", Usage(prompt_tokens=1000)) > 0
assert "genai_prices" not in sys.modules, "imported for a model the snapshot holds"
assert Pricer().cost("TIERED", Usage(prompt_tokens=1000)) > 0
assert "genai_prices" in sys.modules
assert threading.active_count() == 1, threading.enumerate()
"""
    script = script.replace("TIERED", TIERED)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


def test_dollar_shares_are_reserved_and_given_back() -> None:
    root = TokenBudget(10_000, final_reserve=1_000, cost_limit=1.0, cost_final_reserve=0.2)
    assert root.cost_available() == pytest.approx(0.8)
    assert root.cost_available(final=True) == pytest.approx(1.0)
    # A third of the tokens available: a third of the dollars available.
    child = root.share(root.available() // 3)
    assert child.cost_limit is not None
    assert child.cost_limit == pytest.approx(0.8 / 3, rel=1e-3)
    assert child.cost_final_reserve == pytest.approx(child.cost_limit / 4)
    assert root.cost_available() == pytest.approx(0.8 - child.cost_limit)

    child.charge(Usage(prompt_tokens=100), depth=1, cost=0.1)
    assert root.cost_used == pytest.approx(0.1)
    assert root.cost_by_depth == [0.0, pytest.approx(0.1)]
    assert root.cost_reserved == pytest.approx(child.cost_limit - 0.1)
    child.close()
    assert root.cost_reserved == pytest.approx(0.0)
    assert root.cost_available() == pytest.approx(0.7)


def test_a_child_overspending_its_share_cannot_release_more_than_it_held() -> None:
    root = TokenBudget(10_000, cost_limit=1.0)
    child = root.share(5_000, dollars=0.25)
    child.charge(Usage(prompt_tokens=10), cost=0.4)  # one call over its share
    assert root.cost_reserved == pytest.approx(0.0)
    child.close()
    assert root.cost_reserved == pytest.approx(0.0)
    assert root.cost_used == pytest.approx(0.4)
    assert root.cost_available() == pytest.approx(0.6)


def test_an_unpriced_call_makes_the_total_unknown() -> None:
    root = TokenBudget(10_000)
    child = root.share(1_000)
    assert child.cost_limit is None  # no dollar limit: none for the share either
    root.charge(Usage(prompt_tokens=10), cost=0.5)
    child.charge(Usage(prompt_tokens=10), depth=1, cost=None)
    assert root.cost_usd is None
    assert child.cost_usd is None
    assert root.cost_by_depth == [pytest.approx(0.5), None]
